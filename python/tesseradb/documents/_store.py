"""The document side of a database: its backend connections and open collections.

One connection per backend (the embedded files ``documents/documents.sqlite``
and ``documents/documents.duckdb``, or a server URL) is shared by every
collection on it, so statements on one backend are serialised by its lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tesseradb.documents._backends import DUCKDB_FILE, EMBEDDED_BACKENDS, SQLITE_FILE, Backend
from tesseradb.documents._collection import Collection
from tesseradb.documents._embedded import DuckDBBackend, SQLiteBackend
from tesseradb.documents._mappings import MAPPINGS, make_mapping
from tesseradb.documents._server_backends import MariaDBBackend, PostgresBackend
from tesseradb.errors import DocumentBackendError, DocumentError

__all__ = ["DEFAULT_BACKEND", "DEFAULT_MAPPING", "DocumentStore"]

# The best embedded configuration measured by `tessera bench nobench` (docs/benchmarks.md).
DEFAULT_BACKEND = "sqlite"
DEFAULT_MAPPING = "hybrid"


class DocumentStore:
    """Backends and collections of one database directory."""

    def __init__(
        self,
        directory: Path,
        read_only: bool,
        on_write: Callable[[str], None] | None = None,
        writer_elsewhere: Callable[[], bool] = lambda: False,
        memory_limit: str | None = None,
    ) -> None:
        self.directory = directory
        self.memory_limit = memory_limit  # (tesseradb._limits) for the embedded backends
        self.read_only = read_only
        self.writer_elsewhere = writer_elsewhere  # another process writes the database
        self.on_write = on_write  # told the name of a collection a transaction changed
        self._backends: dict[str, Backend] = {}
        self._collections: dict[str, Collection] = {}
        self._lock = threading.Lock()
        # Argo/SQL results kept for the next statements (db.argo(..., into=)): collections
        # on a SQLite file in a private temporary folder, in no catalog, gone at close
        self._temporary_folder: Path | None = None
        self._temporary_backend: Backend | None = None
        self.temporaries: dict[str, Collection] = {}

    @staticmethod
    def check_options(backend: str, mapping: str) -> None:
        for what, value in (("backend", backend), ("mapping", mapping)):
            if not isinstance(value, str):
                raise DocumentError(
                    f"a collection's {what} is named by a str, not {type(value).__name__}"
                )
        if mapping not in MAPPINGS:
            raise DocumentError(f"unknown mapping {mapping!r}: use one of {', '.join(MAPPINGS)}")
        if backend not in EMBEDDED_BACKENDS and "://" not in backend:
            raise DocumentError(
                f"unknown document backend {backend!r}: use 'sqlite', 'duckdb' or a "
                "postgresql:// or mysql:// URL"
            )

    def backend(self, spec: str) -> Backend:
        with self._lock:
            if spec not in self._backends:
                self._backends[spec] = open_backend(
                    spec, self.directory, self.read_only, self.writer_elsewhere, self.memory_limit
                )
            return self._backends[spec]

    def open(self, name: str, backend: str, mapping: str, create: bool = False) -> Collection:
        """The collection ``name``; unless ``create``, an embedded backend's file must exist
        (a missing one is named, not silently made anew and empty)."""
        key = name.lower()
        with self._lock:
            found = self._collections.get(key)
        if found is not None:
            return found
        if backend in EMBEDDED_BACKENDS and not create and backend not in self._backends:
            file = self.directory / f"documents.{backend}"
            if not file.is_file():
                raise DocumentBackendError(
                    f"collection {name!r}: its backend file {file} is missing; restore it "
                    "from a backup, or drop the collection"
                )
        connection = self.backend(backend)
        collection = Collection(name, connection, make_mapping(mapping, name, connection))
        collection.on_write = self.on_write
        with self._lock:
            return self._collections.setdefault(key, collection)

    def make_temporary(self, name: str, objects: list[Any]) -> Collection:
        """A new temporary collection ``name`` holding ``objects`` (one made before under
        the name is replaced)."""
        from tesseradb._snapshots import private_directory

        with self._lock:
            if self._temporary_backend is None:
                self._temporary_folder = private_directory("tessera-argo-")
                self._temporary_backend = SQLiteBackend(
                    self._temporary_folder / SQLITE_FILE, False, self.memory_limit
                )
            backend = self._temporary_backend
            old = self.temporaries.pop(name.lower(), None)
        if old is not None:
            old._drop()
        made = Collection(name, backend, make_mapping(DEFAULT_MAPPING, name, backend))
        made._create()
        try:
            made.insert_many(objects)
        except BaseException:
            made._drop()
            raise
        with self._lock:
            self.temporaries[name.lower()] = made
        return made

    def open_backends(self) -> list[Backend]:
        """The backends opened so far (each collection opened opens its own)."""
        with self._lock:
            return list(self._backends.values())

    def forget(self, name: str) -> None:
        with self._lock:
            self._collections.pop(name.lower(), None)

    def close(self) -> None:
        import shutil

        with self._lock:
            for backend in self._backends.values():
                backend.close()
            self._backends.clear()
            self._collections.clear()
            self.temporaries.clear()
            if self._temporary_backend is not None:
                self._temporary_backend.close()
                self._temporary_backend = None
            if self._temporary_folder is not None:
                shutil.rmtree(self._temporary_folder, ignore_errors=True)
                self._temporary_folder = None


def open_backend(
    spec: str,
    directory: Path,
    read_only: bool = False,
    writer_elsewhere: Callable[[], bool] = lambda: False,
    memory_limit: str | None = None,
) -> Backend:
    """The backend named by ``spec``: ``sqlite``, ``duckdb`` (files in ``directory``) or a URL.

    ``writer_elsewhere()`` says whether another process writes the database (a reader of
    the DuckDB file then reads the snapshots it publishes); ``memory_limit`` (a setting of
    :mod:`tesseradb._limits`) bounds an embedded backend's memory."""
    if spec == "sqlite":
        return SQLiteBackend(directory / SQLITE_FILE, read_only, memory_limit)
    if spec == "duckdb":
        return DuckDBBackend(directory / DUCKDB_FILE, read_only, writer_elsewhere, memory_limit)
    scheme = urlparse(spec).scheme.lower()
    if scheme in ("postgresql", "postgres"):
        return PostgresBackend(spec, read_only)
    if scheme in ("mysql", "mariadb"):
        return MariaDBBackend(spec.replace("mariadb://", "mysql://", 1), read_only)
    raise DocumentBackendError(
        f"unknown document backend {spec!r}: use 'sqlite', 'duckdb', "
        "'postgresql://user@host:port/db' or 'mysql://user@host:port/db'"
    )
