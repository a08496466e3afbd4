"""JSON collections as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

A collection's catalog spec is ``{"backend": ..., "mapping": ...}``; its
rows live on that backend (``documents/documents.<backend>`` for the
embedded ones), shared by every collection on it.
"""

from __future__ import annotations

from collections.abc import Collection as Names
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._lock import WriterLock
from tesseradb.documents._backends import DUCKDB_FILE, DUCKDB_SNAPSHOTS, SQLITE_FILE
from tesseradb.documents._collection import Collection
from tesseradb.documents._export import export_collection
from tesseradb.documents._load import JSON_SUFFIXES, load_collection
from tesseradb.documents._relation import CollectionRelation
from tesseradb.documents._store import DocumentStore
from tesseradb.errors import DocumentBackendError, TesseraError
from tesseradb.kinds import ExportRequest, KindBase, KindContext, LoadRequest, ObjectInfo

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.relation import Relation

__all__ = ["CollectionKind"]

# the files of the embedded backends (with their journals), all the kind's directory holds
BACKEND_FILES = {
    *(SQLITE_FILE + end for end in ("", "-wal", "-shm", "-journal")),
    *(DUCKDB_FILE + end for end in ("", ".wal")),
    DUCKDB_SNAPSHOTS,  # what readers in other processes read (a directory)
}


class CollectionKind(KindBase):
    name = "collection"
    label = "collection"
    directory = "documents"
    # Loading: JSON lines, or JSON files of objects (documents/_load.py)
    load_suffixes = JSON_SUFFIXES
    load_defaults = frozenset(JSON_SUFFIXES.values())
    load_options: frozenset[str] = frozenset()
    load_unit = "objects"
    # Exporting: JSON lines or a JSON array of the objects (documents/_export.py); as rows
    # (its objid and doc columns) in the other formats
    export_suffixes = JSON_SUFFIXES
    export_options: frozenset[str] = frozenset()
    export_unit = "objects"
    export_rows = True

    @staticmethod
    def crash_model() -> Any:
        """What this kind's writers do in the crash matrix (tesseradb.testing.crash)."""
        from tesseradb.documents._crash import CollectionCrashModel

        return CollectionCrashModel()

    def __init__(self, context: KindContext) -> None:
        super().__init__(context)
        self._store: DocumentStore | None = None  # opened with the first collection

    @property
    def store(self) -> DocumentStore:
        if self._store is None:
            self._store = DocumentStore(
                self.context.path / "documents",
                self.context.read_only,
                on_write=self.context.on_write,
                writer_elsewhere=WriterLock(self.context.path).held_elsewhere,
                memory_limit=self.context.memory_limit,
            )
        return self._store

    def create(self, name: str, spec: dict[str, Any]) -> None:
        self.store.check_options(spec["backend"], spec["mapping"])
        collection = self.store.open(name, spec["backend"], spec["mapping"], create=True)
        try:
            collection._create()
        except BaseException:
            self.store.forget(name)
            raise

    def new_spec(self, name: str, backend: str | None, mapping: str | None) -> dict[str, Any]:
        """The catalog spec of a new collection (the defaults: the best embedded
        configuration measured by ``tessera bench nobench``)."""
        from tesseradb.catalog import validate_name
        from tesseradb.documents._store import DEFAULT_BACKEND, DEFAULT_MAPPING

        validate_name(name, "collection")
        return {"backend": backend or DEFAULT_BACKEND, "mapping": mapping or DEFAULT_MAPPING}

    def argo(self, text: str, params: Any, into: str | None = None) -> list[dict[str, Any]]:
        """What ``db.argo`` does: one Argo/SQL statement (an INSERT into a collection that
        does not exist creates it, as Argo does); with ``into``, a SELECT's results also
        become the temporary collection of that name."""
        from tesseradb.documents._argosql import Insert, Select, parse_statement
        from tesseradb.errors import InvalidArgumentError, require_params

        if not isinstance(text, str):  # (a lone surrogate is named by the statement's parser)
            raise InvalidArgumentError(
                f"db.argo: the Argo/SQL text must be a str, not {type(text).__name__}"
            )
        require_params(params, "db.argo")

        statement = parse_statement(text, params)
        if into is not None:
            self._check_temporary_name(into, statement)
        if isinstance(statement, Insert) and not self._exists(statement.collection):
            self.check_writable("create a collection")
            spec = self.new_spec(statement.collection, None, None)
            self.context.objects.create(self.name, statement.collection, spec)
        collection = self.collection(statement.collection)
        other = None
        if isinstance(statement, Select) and statement.join is not None:
            other = self.collection(statement.join.collection)
        results = collection._run(statement, other)
        if into is not None:
            self._keep_results(into, results)
        return results

    # --- temporary collections (Argo/SQL results kept for the next statements) -----
    def _check_temporary_name(self, name: Any, statement: Any) -> None:
        """``into=`` names a collection for a SELECT's results: not a stored object's name,
        nor a relation registered otherwise (a temporary one is replaced)."""
        from tesseradb.catalog import validate_name
        from tesseradb.documents._argosql import Select
        from tesseradb.errors import DocumentError, ObjectExistsError, require_str

        require_str(name, "into", "db.argo")
        validate_name(name, "collection")
        if not isinstance(statement, Select):
            raise DocumentError(
                f"db.argo: into={name!r} keeps the results of a SELECT; this statement is "
                f"a {type(statement).__name__.upper()}"
            )
        if self._stored(name):
            raise ObjectExistsError(
                f"db.argo: into={name!r} names an object of the database; temporary results "
                "need a name of their own"
            )
        if name.lower() not in self.store.temporaries and self.context.objects.registered(name):
            raise ObjectExistsError(
                f"db.argo: into={name!r} names a relation registered with db.register"
            )

    def _keep_results(self, name: str, results: list[dict[str, Any]]) -> None:
        """Keep ``results`` as the temporary collection ``name``: Argo/SQL and ``db.sql``
        read it until the database closes (in no catalog, in no other process)."""
        made = self.store.make_temporary(name, results)
        self.context.objects.register_temporary(name, CollectionRelation(made))

    def collection(self, name: str) -> Collection:
        """The collection called ``name`` (UnknownCollectionError, with suggestions): a
        temporary one first, as SQL's temporary tables hide stored ones."""
        from tesseradb.errors import ObjectNotFoundError, UnknownCollectionError

        if self._store is not None and name.lower() in self._store.temporaries:
            return self._store.temporaries[name.lower()]
        try:
            found: Collection = self.context.objects.get(name, self.name)
        except ObjectNotFoundError as err:
            raise UnknownCollectionError(str(err), err.suggestions) from None
        return found

    def _exists(self, name: str) -> bool:
        if self._store is not None and name.lower() in self._store.temporaries:
            return True
        return self._stored(name)

    def _stored(self, name: str) -> bool:
        from tesseradb.errors import ObjectNotFoundError

        try:
            self.context.objects.get(name)
        except ObjectNotFoundError:
            return False
        return True

    def load(self, request: LoadRequest) -> tuple[int, str]:
        objects = self.context.objects
        if request.exists:
            collection = objects.get(request.name)
        else:
            spec = self.new_spec(request.name, None, None)
            collection = objects.create(self.name, request.name, spec)
        return load_collection(request, collection)

    def strays(self, names: Names[str]) -> list[tuple[Path, str]]:
        """Collections share the backends' files: anything else in the folder is a stray."""
        return self.entries_not(
            lambda child: child.name in BACKEND_FILES,
            "is not a file of an embedded document backend",
        )

    def open(self, name: str, spec: dict[str, Any]) -> Collection:
        collection = self.store.open(name, spec["backend"], spec["mapping"])
        collection._catch_up()  # (a reader of snapshots made before the collection)
        collection._upgrade()  # a collection made before the delta tables
        return collection

    def export(self, name: str, opened: Collection, request: ExportRequest) -> int:
        return export_collection(
            request.database, name, request.path, request.format, request.watch
        )

    def details(self, name: str, opened: Collection) -> dict[str, Any]:
        return {"objects": opened.count()}

    def relations(self, opened: Collection) -> Mapping[str, Relation]:
        return {"": CollectionRelation(opened)}

    def drop(self, name: str, spec: dict[str, Any], opened: Collection | None) -> None:
        if opened is None:
            try:
                opened = self.open(name, spec)
            except DocumentBackendError:  # its backend file is gone: only the name is left
                return
        opened._drop()
        self.store.forget(name)

    def describe_one(self, obj: CatalogObject) -> list[ObjectInfo]:
        rows = self.context.objects.get(obj.name).count()
        return [ObjectInfo(obj.name, self.name, rows, None, obj.created, obj.modified)]

    def check_one(self, obj: CatalogObject, repair: bool) -> tuple[list[Finding], Verified]:
        checked: tuple[list[Finding], Verified] = self.context.objects.get(obj.name).check()
        return checked

    def check(
        self, objects: Sequence[CatalogObject], repair: bool
    ) -> tuple[list[Finding], list[Verified]]:
        """Each collection, then each backend's own integrity check (once, not per collection)."""
        from tesseradb.checks import Finding

        findings, verified = super().check(objects, repair)
        if objects:
            for backend in self.store.open_backends():
                try:
                    problems = backend.integrity_problems()
                except TesseraError as err:
                    problems = [str(err)]
                findings.extend(
                    Finding("(documents)", f"backend {backend.describe()}", p) for p in problems
                )
        return findings, verified

    def shutdown(self) -> None:
        if self._store is not None:
            self._store.close()
