"""The database: a directory holding the catalog, the table store and each data model's files.

``Database`` is the hall: it opens or creates the directory, holds the
writer lock and offers the user's API. What each data model is and does
lives in its room (``arrays``, ``records``, ``documents``, ``attached``,
``assoc``, the SQL engine's plain tables), each reached through its
:class:`~tesseradb.kinds.Kind`; the registry (``_registry.py``) keeps the
kinds, the one cache of open objects, and answers the SQL engine's
questions about names. The typed methods of each data model, of SQL and of
loading come from those layers as mixins (``tesseradb.arrays.ArrayMethods``,
``tesseradb.sql.front.SQLMethods``, ...); this module holds what is every
object's.

Layout of a database directory::

    catalog.sqlite   the catalog (SQLite, WAL): objects, kinds, specs, format version
    tables.duckdb    plain tables and views created with SQL (DuckDB's own file)
    write.lock       the writer lock (flock); its content names the holder
    attached/<name>/ sidecar bitmap indexes of an attachment
    streams/<name>/  the segment files of a record stream
    arrays/<name>/   an array's Icechunk repository (repo/) and commit lock
    documents/       the embedded document backends (documents.sqlite, documents.duckdb,
                     documents.snapshots/ for readers of the DuckDB one)
    assoc/<name>/    an associative table's runs and manifest
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._limits import MEMORY_LIMIT_VARIABLE, duckdb_memory_limit
from tesseradb._lock import LOCK_FILE, WriterLock
from tesseradb._registry import Registry
from tesseradb._sqltext import quote_identifier
from tesseradb.arrays import ArrayMethods
from tesseradb.assoc import AssocMethods
from tesseradb.attached import AttachedMethods
from tesseradb.catalog import CATALOG_FILE, Catalog, validate_name
from tesseradb.documents import CollectionMethods
from tesseradb.errors import (
    InvalidArgumentError,
    NotADatabaseError,
    ObjectNotFoundError,
    TesseraError,
    require_bool,
    require_str,
)
from tesseradb.executor import Executor, ExecutorSlot, as_executor
from tesseradb.kinds import KINDS, Kind, KindContext, ObjectInfo, registered_kinds
from tesseradb.records import StreamMethods
from tesseradb.sql.engine import SQLEngine
from tesseradb.sql.front import Session, SQLMethods
from tesseradb.sql.relation import ArrowRelation, Relation
from tesseradb.sql.tables import PLAIN_KINDS, TablesKind
from tesseradb.ssdb import SSDBMethods
from tesseradb.storage import Storage
from tesseradb.transfer import TransferMethods

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    import pyarrow as pa

    from tesseradb.checks import CheckReport

__all__ = [
    "KINDS",
    "Database",
    "DatabaseInfo",
    "ObjectInfo",
    "Session",
    "connect",
    "quote_identifier",
]

TABLE_STORE_FILE = "tables.duckdb"
STORAGE_SETTING = "storage"  # the catalog setting: the default location of bulk data


@dataclass(frozen=True)
class DatabaseInfo:
    path: Path
    format_version: int
    read_only: bool
    objects: list[ObjectInfo]
    bytes: int  # the whole directory on disk


def connect(
    path: str | os.PathLike[str],
    read_only: bool = False,
    *,
    token: str | None = None,
    cluster: Any = None,
    memory_limit: int | str | None = None,
    storage: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Database:
    """Open the database directory at ``path``, creating it if needed (unless ``read_only``).

    ``cluster`` (a ``dask.distributed.Client``) runs chunk- and file-parallel
    work on its workers instead of this process's threads (:meth:`Database.use`).
    ``memory_limit`` (bytes, or a size such as ``"2GB"``) bounds each DuckDB instance
    that holds the database's data: the SQL engine's and a DuckDB document backend's
    (default: the ``TESSERA_MEMORY_LIMIT`` environment variable, so that every ``tessera``
    command and a server take one too; else DuckDB's, 80% of the machine's memory).
    ``storage`` (``"s3://bucket/prefix"``, given when the database is made) puts the bulk
    data of every new array there instead of in the directory; ``storage_options``
    (``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key``,
    ``session_token``, ``profile``, ``anonymous``...) say how to reach it, beside the
    standard AWS environment. They are never recorded (docs/storage.md).
    An ``http://`` or ``https://`` URL opens a database served by ``tessera serve``
    instead (a :class:`tesseradb.server.RemoteDatabase`, with ``token=`` or the
    ``TESSERA_TOKEN`` environment variable).
    """
    if isinstance(path, str) and path.startswith(("http://", "https://")):
        from tesseradb.server import RemoteDatabase

        if cluster is not None:
            raise InvalidArgumentError(
                "connect: cluster= is for a database directory; a served database "
                "runs its parallel work where the server runs"
            )
        return RemoteDatabase(path, token)  # type: ignore[return-value]
    executor = as_executor(cluster)  # checked before the database opens
    db = Database(
        path,
        read_only=read_only,
        memory_limit=memory_limit,
        storage=storage,
        storage_options=storage_options,
    )
    db.use(executor)
    return db


def _room_kind(target: str) -> Callable[[KindContext], Kind]:
    """The Kind class ``module:Class`` names, imported only when called."""
    module, _, name = target.partition(":")

    def make(context: KindContext) -> Kind:
        kind: Kind = getattr(importlib.import_module(module), name)(context)
        return kind

    return make


# databases still open, closed at interpreter exit while the writer threads
# still run (a __del__ during finalization could only wait for them for ever)
_OPEN: weakref.WeakSet[Database] = weakref.WeakSet()


@atexit.register
def _close_open_databases() -> None:
    for database in list(_OPEN):
        with contextlib.suppress(Exception):
            database.close()


class Database(
    SQLMethods,
    ArrayMethods,
    StreamMethods,
    CollectionMethods,
    AttachedMethods,
    AssocMethods,
    TransferMethods,
    SSDBMethods,
):
    """An open TesseraDB database. Use as a context manager, or call :meth:`close`.

    Each data model's typed methods (``create_array``, ``stream``, ``attach``, ...) come
    from its room (``tesseradb.arrays.ArrayMethods`` and the like)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        read_only: bool = False,
        memory_limit: int | str | None = None,
        storage: str | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        # (checked before anything opens)
        where = f"connect {os.fspath(path)!r}"
        asked = Storage(storage, storage_options, where)
        if asked.default is not None and not read_only:
            asked.default.check_reachable()  # a missing bucket or refused keys: nothing made
        if memory_limit is None and os.environ.get(MEMORY_LIMIT_VARIABLE):
            memory_limit = os.environ[MEMORY_LIMIT_VARIABLE]
            where += f" (the environment variable {MEMORY_LIMIT_VARIABLE})"
        self.memory_limit = duckdb_memory_limit(memory_limit, where)
        self.path = Path(path).expanduser().absolute()
        self.read_only = read_only
        self._lock = WriterLock(self.path) if not read_only else None
        create = self._prepare_directory()
        if self._lock is not None:
            self._lock.acquire()
        try:
            self.catalog = Catalog(
                self.path, read_only=read_only, create=create, sole_writer=not read_only
            )
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        try:
            self.storage = self._settle_storage(asked, storage_options, create, where)
        except BaseException:
            self.catalog.close()
            if self._lock is not None:
                self._lock.release()
            raise
        self._executors = ExecutorSlot()
        self._registry = registry = Registry(
            self.path,
            self.catalog,
            read_only,
            self._executors,
            self.memory_limit,
            self.storage,
        )
        self._engine = SQLEngine(
            registry,
            self.path / TABLE_STORE_FILE,
            read_only,
            writer_elsewhere=WriterLock(self.path).held_elsewhere,
            memory_limit=self.memory_limit,
        )
        for kind, target in registered_kinds().items():
            registry.declare(_room_kind(target), kind)
        tables = TablesKind.factory(self._engine, registry)
        registry.declare(tables, *PLAIN_KINDS)
        registry.on_drop.append(self._engine.forget_catalog)
        self._closed = False
        _OPEN.add(self)
        if not read_only:
            # a writer killed after writing plain tables left readers a snapshot behind
            self._engine.store.publish_if_behind(self._engine.connection)
            registry.settle_leftovers()  # and objects it had not finished making

    def _settle_storage(
        self, asked: Storage, options: dict[str, Any] | None, create: bool, where: str
    ) -> Storage:
        """The database's storage: what ``storage=`` asked when it is made, else what its
        catalog recorded then (asking for another is an error, not a silent move)."""
        recorded = self.catalog.setting(STORAGE_SETTING)
        if create:
            if asked.url is not None:
                self.catalog.record_setting(STORAGE_SETTING, asked.url)
            return asked
        if asked.url is not None and asked.url != recorded:
            kept = recorded if recorded is not None else "its own directory"
            raise InvalidArgumentError(
                f"{where}: the database keeps its bulk data in {kept}, not {asked.url}; "
                "give location= to a create call to put one object elsewhere"
            )
        return (
            asked
            if recorded is None or asked.url is not None
            else Storage(recorded, options, where)
        )

    def _prepare_directory(self) -> bool:
        """Check the path is (or may become) a database; return whether to create it."""
        path = self.path
        if path.exists() and not path.is_dir():
            raise NotADatabaseError(f"{path} is a file, not a TesseraDB database directory")
        if (path / CATALOG_FILE).exists():
            return False
        if self.read_only:
            if not path.exists():
                raise NotADatabaseError(f"no database at {path}: the directory does not exist")
            raise NotADatabaseError(
                f"{path} is not a TesseraDB database (it has no {CATALOG_FILE})"
            )
        if path.exists() and any(p.name != LOCK_FILE for p in path.iterdir()):
            raise NotADatabaseError(
                f"{path} is not a TesseraDB database: the directory is not empty and has no {CATALOG_FILE}"
            )
        path.mkdir(parents=True, exist_ok=True)
        return True

    # --- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        self._registry.close()  # streams write what is still in memory
        self._engine.close()
        self.catalog.close()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> Database:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if sys.is_finalizing():
            # the writer threads are frozen by now: waiting on them would hang;
            # _close_open_databases has closed everything that was still open
            return
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "read-write"
        return f"Database({str(self.path)!r}, {mode})"

    # --- where parallel work runs ---------------------------------------------------------
    def use(self, cluster: Any = None) -> Executor:
        """Run chunk- and file-parallel work on ``cluster`` from now on; returns the executor.

        ``cluster`` is a ``dask.distributed.Client`` (its workers must see the
        database's directory), an :class:`~tesseradb.executor.Executor`, or
        None for threads in this process (the default). Work already running
        finishes where it started.
        """
        self._check_open()
        executor = as_executor(cluster)
        self._executors.set(executor)
        return executor

    @property
    def executor(self) -> Executor:
        """Where chunk- and file-parallel work runs now (:meth:`use`)."""
        return self._executors.current

    @property
    def format_version(self) -> int:
        return self.catalog.format_version

    def _check_open(self) -> None:
        self._registry.check_open()

    # --- relations registered for this session ----------------------------------
    def register(self, name: str, data: Any) -> Relation:
        """Expose ``data`` to SQL as ``name`` until :meth:`unregister` or close.

        ``data`` is a :class:`Relation`, or anything Arrow can read (a pyarrow
        Table or RecordBatch, an object with ``__arrow_c_stream__``, a dict of
        columns), which becomes an :class:`ArrowRelation`. The name shares the
        database's namespace, so it may not be an object's name.
        """
        require_str(name, "name", "db.register")
        validate_name(name, "relation")
        relation = data if isinstance(data, Relation) else ArrowRelation(name, data)
        self._registry.register(name, relation)
        return relation

    def unregister(self, name: str) -> None:
        require_str(name, "name", "db.unregister")
        self._registry.unregister(name)

    # --- every object ---------------------------------------------------------------
    def relation(self, name: str) -> Relation | None:
        """The relation called ``name`` (case-insensitive), or None if there is none.

        Dotted names are tables of an object that holds several
        (``ptf.candidate`` of the attachment ``ptf``).
        """
        require_str(name, "name", "db.relation")
        self._check_open()
        return self._registry.relation(name)

    def tables(self) -> list[str]:
        """Names of the plain tables and views (those created with SQL)."""
        return [o.name for o in self.catalog.objects() if o.kind in PLAIN_KINDS]

    def create(self, kind: str, name: str, spec: dict[str, Any] | None = None) -> Any:
        """Create an object of any registered kind from its catalog ``spec`` (what the kind
        documents) and return it open; ``create_array``, ``create_stream`` and the other
        typed methods are shorthands that build the spec."""
        require_str(kind, "kind", "db.create")
        require_str(name, "name", "db.create")
        if spec is not None and not isinstance(spec, dict):
            raise InvalidArgumentError(f"db.create: spec is a dict, not {type(spec).__name__}")
        self._check_open()
        if kind in PLAIN_KINDS or kind not in registered_kinds():
            known = ", ".join(registered_kinds())
            raise InvalidArgumentError(
                f"db.create: kind is one of {known} (plain tables are made with SQL), not {kind!r}"
            )
        try:
            return self._registry.create(kind, name, dict(spec or {}))
        except TesseraError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as err:  # (made nothing)
            raise InvalidArgumentError(
                f"db.create: {spec!r:.200} is not the spec of a {kind} "
                f"({type(err).__name__}: {err}); the typed create_ methods build one"
            ) from None

    def object(self, name: str) -> Any:
        """The object called ``name``, of any kind, open (a plain table has no object:
        query it with SQL)."""
        require_str(name, "name", "db.object")
        self._check_open()
        return self._registry.get(name)

    def drop(self, name: str, missing_ok: bool = False) -> None:
        """Remove the object called ``name`` (of any kind, or a registered relation).

        ``missing_ok=True`` does nothing when there is no such object (a
        script that starts afresh each time it runs).
        """
        require_str(name, "name", "db.drop")
        require_bool(missing_ok, "missing_ok", "db.drop")
        self._check_open()
        if name.lower() in self._registry.session:
            self.unregister(name)
            return
        if missing_ok and self.catalog.get(name) is None:
            return
        self._registry.drop(name)

    def schema(self, name: str) -> pa.Schema:
        """The columns of the relation, table or view called ``name``."""
        require_str(name, "name", "db.schema")
        self._check_open()
        relation = self._registry.relation(name)
        if relation is not None:
            return relation.schema()
        obj = self.catalog.require(name.partition(".")[0] if "." in name else name)
        if obj.kind in PLAIN_KINDS:
            return self.sql(f"SELECT * FROM {quote_identifier(obj.name)} LIMIT 0").arrow().schema
        raise ObjectNotFoundError(f"{name!r} is a {obj.kind}, which this version cannot describe")

    def describe(self, name: str) -> dict[str, Any]:
        """One object: its name, kind and columns, and what its kind adds (an array's
        versions, a stream's records, an attachment's files and indexes, ...), as plain
        data; what ``tessera info PATH NAME``, the server and the console show."""
        require_str(name, "name", "db.describe")
        self._check_open()
        out = self._registry.details(name)
        try:
            out["schema"] = [{"name": f.name, "type": str(f.type)} for f in self.schema(name)]
        except TesseraError as err:
            out["schema_error"] = str(err)
        return out

    def info(self) -> DatabaseInfo:
        """The objects of the database with their kinds and sizes."""
        self._check_open()
        objects = self._registry.describe()
        total = sum(_size(p) for p in self.path.rglob("*"))
        return DatabaseInfo(self.path, self.format_version, self.read_only, objects, total)

    def check(self, repair: bool = False) -> CheckReport:
        """Verify every object's storage; with ``repair``, set aside what cannot be read.

        Streams: the call log and every committed segment read whole
        (lengths, checksums); arrays: every written chunk of the head version
        decoded (CRC-32C) and every older version opened; collections: the
        backend's integrity check and every object rebuilt; attachments: the
        files and every sidecar index; plain tables read whole and the catalog
        against the table store; files that belong to no object. With
        ``repair=True`` (a writable database) unreadable segments are moved
        aside, unreadable chunks dropped in a new version, indexes rebuilt and
        foreign files moved to ``quarantine/``; each finding says what was
        lost, and the rest stays queryable.
        """
        from tesseradb.checks import CheckReport, check_layout

        self._check_open()
        require_bool(repair, "repair", "db.check")
        if repair:
            self._registry.check_writable("repair the database")
        report = CheckReport(self.path, repair)
        findings, verified, directories, strays = self._registry.check(repair)
        report.findings.extend(findings)
        report.verified.extend(verified)
        report.findings.extend(check_layout(self.path, directories, strays, repair))
        return report


def _size(path: Path) -> int:
    """A file's size, 0 for a directory or a file removed meanwhile (the table store's
    writer replaces its snapshots while a reader lists them)."""
    try:
        return path.stat().st_size if path.is_file() else 0
    except FileNotFoundError:
        return 0
