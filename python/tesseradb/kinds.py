"""The contract every data model implements once: a :class:`Kind`.

The database (the *hall*) knows its data models only through this
contract. Each subpackage (a *room*: ``arrays``, ``records``,
``documents``, ``attached``, and the SQL engine's plain tables) exports a
kind class; the database makes one instance of each when it opens, hands it
a :class:`KindContext`, and from then on creating, opening, dropping,
listing and checking an object of any kind are lookups in one registry and
one cache of open objects. A room never imports the database: what it needs
from it (its directory, whether it is read-only, how to say an object
changed, how to open or create a sibling object) is in the context.

Adding a data model is writing one kind (see docs/contributing.md, "Adding a
data model") and listing it in :data:`KINDS` (or, from another package, in its
``tesseradb.kinds`` entry points).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tesseradb._lifetime import Lifetime
from tesseradb.executor import ExecutorSlot, default_slot
from tesseradb.storage import Storage

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.progress import Tracker
    from tesseradb.sql.relation import Relation
    from tesseradb.storage import Location

__all__ = [
    "DatabaseMethods",
    "Describing",
    "KeptInStorage",
    "Kind",
    "KindBase",
    "KindContext",
    "LoadRequest",
    "Loading",
    "ObjectInfo",
    "OpenObjects",
    "registered_kinds",
]

# The data models every database serves: catalog kind -> "module:KindClass". A room is
# imported when its kind is first needed, so that opening a database stays cheap. (Plain
# tables are the SQL engine's, made with it: not listed.)
KINDS: dict[str, str] = {
    "array": "tesseradb.arrays:ArrayKind",
    "stream": "tesseradb.records:StreamKind",
    "collection": "tesseradb.documents:CollectionKind",
    "attached": "tesseradb.attached:AttachedKind",
    "assoc": "tesseradb.assoc:AssocTableKind",
}
ENTRY_POINTS = "tesseradb.kinds"  # the entry-point group through which packages add kinds


@functools.cache
def registered_kinds() -> dict[str, str]:
    """:data:`KINDS` and the kinds other installed packages add through their
    ``tesseradb.kinds`` entry points (``name = "module:KindClass"``); read once per process
    (``registered_kinds.cache_clear()`` reads them again)."""
    from importlib.metadata import entry_points

    found = dict(KINDS)
    for point in entry_points(group=ENTRY_POINTS):
        found.setdefault(point.name, point.value)
    return found


@dataclass(frozen=True)
class ObjectInfo:
    """One object of the database as :meth:`Database.info` lists it."""

    name: str
    kind: str
    rows: int | None
    bytes: int | None
    created: str | None
    modified: str | None


class OpenObjects(Protocol):
    """The database's one cache of open objects, as a kind may use it."""

    def get(self, name: str, kind: str | None = None) -> Any:
        """The open object called ``name`` (opened now if it is not yet); with ``kind``, an
        ObjectNotFoundError if it is of another kind."""
        ...

    def peek(self, name: str) -> Any | None:
        """The object called ``name`` if it is open already, else None (nothing is opened)."""
        ...

    def forget(self, name: str) -> None:
        """Drop ``name`` from the cache (without closing it); the next ``get`` reopens it."""
        ...

    def create(self, kind: str, name: str, spec: dict[str, Any]) -> Any:
        """Create an object of ``kind`` (catalog entry and storage) and return it open."""
        ...

    def drop(self, name: str) -> None:
        """Remove the object called ``name``, of any kind."""
        ...

    def update_spec(self, name: str, spec: dict[str, Any]) -> None:
        """Record an object's new catalog spec (an attachment's new indexes)."""
        ...

    def registered(self, name: str) -> bool:
        """Whether a relation is registered under ``name`` for this database's SQL."""
        ...

    def register_temporary(self, name: str, relation: Relation) -> None:
        """Show ``relation`` to this database's SQL as ``name`` until it closes (replacing
        one registered before under that name; in no catalog)."""
        ...


@dataclass(frozen=True)
class KindContext:
    """What the database hands each kind when it opens."""

    path: Path  # the database directory
    read_only: bool
    objects: OpenObjects
    on_write: Callable[[str], None]  # "this object changed" (ObjectInfo.modified)
    # where chunk- and file-parallel work runs (threads, or a Dask cluster after db.use)
    executors: ExecutorSlot = field(default_factory=default_slot)
    # whether the database is still open: every handle a kind gives out asks it first
    lifetime: Lifetime = field(default_factory=Lifetime)
    # DuckDB's memory_limit for every DuckDB instance a kind opens (None: DuckDB's default)
    memory_limit: str | None = None
    # where new objects' bulk data goes (the directory, or an object store) and the
    # credentials every remote location is reached with
    storage: Storage = field(default_factory=lambda: Storage(None, None, "storage"))


@runtime_checkable
class Kind(Protocol):
    """A data model, as the database sees it (one instance per open database).

    ``spec`` is the JSON-able dict the catalog keeps for each object; the
    typed user methods (``db.create_array`` ...) build it with the room's own
    validation and hand it to the database, which calls ``create`` and then
    writes the catalog entry. ``open`` is called once per object and the
    result is cached until the object is dropped or the database closes.
    """

    name: str  # the catalog's name for the kind ("array")
    aliases: tuple[str, ...]  # further catalog kinds served by the same instance ("view")
    directory: str | None  # the kind's folder under the database directory, if it has one

    def create(self, name: str, spec: dict[str, Any]) -> None:
        """Make the object's storage from its spec; on failure leave nothing behind."""
        ...

    def open(self, name: str, spec: dict[str, Any]) -> Any:
        """The object, ready to use (its catalog ``name`` spelled as created)."""
        ...

    def relations(self, opened: Any) -> Mapping[str, Relation]:
        """The relations an open object exposes to SQL: ``""`` for the object's own name,
        a table name for the dotted ``<object>.<table>``."""
        ...

    def relation_names(self, name: str, spec: dict[str, Any]) -> list[str]:
        """The names ``relations`` would give, from the spec alone (nothing is opened):
        for suggestions in error messages."""
        ...

    def close(self, opened: Any) -> None:
        """Release what an open object holds (the database is closing or dropping it)."""
        ...

    def drop(self, name: str, spec: dict[str, Any], opened: Any | None) -> None:
        """Delete the object's storage (the database removes the catalog entry after)."""
        ...

    def describe(self, objects: Sequence[CatalogObject]) -> list[ObjectInfo]:
        """Rows, bytes and times of these objects of this kind, for ``db.info()``."""
        ...

    def check(
        self, objects: Sequence[CatalogObject], repair: bool
    ) -> tuple[list[Finding], list[Verified]]:
        """Verify these objects' storage (``tessera check``); with ``repair``, set aside
        what cannot be read and say what was lost."""
        ...

    def strays(self, names: Collection[str]) -> list[tuple[Path, str]]:
        """Entries of the kind's directory that belong to none of the objects ``names``
        (as the catalog holds them), each with what is wrong: ``tessera check``
        reports them and its repair moves them to quarantine."""
        ...

    def shutdown(self) -> None:
        """Close what the kind shares between its objects (the database is closing)."""
        ...


# --- capabilities a kind may have, each a protocol the hall tests with isinstance ----------
@dataclass(frozen=True)
class LoadRequest:
    """One ``db.load`` (or ``tessera load``) into an object of a kind that loads."""

    files: list[str]  # the files (a glob expanded, in order); a directory is a store
    format: str  # their format, one the kind loads
    name: str  # the object loaded into
    exists: bool  # it exists (the load appends) or the load makes it
    watch: Tracker  # progress in bytes of input, and the load's cancel
    options: dict[str, Any]  # the kind's own load options (Loading.load_options)
    database: Any  # the database's user API, for a kind whose load is statements


@runtime_checkable
class Loading(Protocol):
    """A kind ``db.load`` writes into: the formats it reads and how.

    The load makes the object when it does not exist (within the registry's
    ``provisionally``: whole or gone, also across a kill) and appends otherwise,
    all or nothing per call.
    """

    # file name endings -> the format they mean, for the formats this kind loads
    load_suffixes: Mapping[str, str]
    # formats that load into this kind when neither the target nor ``kind=`` says
    load_defaults: frozenset[str]
    load_options: frozenset[str]  # the keyword options a load into this kind takes
    load_unit: str  # what a load counts ("cells", "records", "objects", "rows")

    def load(self, request: LoadRequest) -> tuple[int, str]:
        """Load the files; the items loaded and the object's schema as text."""
        ...


@dataclass(frozen=True)
class ExportRequest:
    """One ``db.export`` (or ``tessera export``) of an object its kind writes itself."""

    path: str  # where to write: beside the target, renamed into place once whole
    format: str  # one of the kind's export formats
    watch: Tracker  # progress (the kind may set its unit and total), and the cancel
    options: dict[str, Any]  # the kind's own export options (Exporting.export_options)
    database: Any  # the database's user API, for a kind whose export is a query


@runtime_checkable
class Exporting(Protocol):
    """A kind that writes its objects to files in formats of its own (an array to Zarr,
    a collection to JSON lines). Any object SQL reads is also written as rows
    (Parquet, CSV, JSON, Arrow) unless ``export_rows`` says it is not rows."""

    export_suffixes: Mapping[str, str]  # file name endings -> the formats it writes
    export_options: frozenset[str]  # the keyword options an export of it takes
    export_unit: str  # what an export counts ("cells", "objects")
    export_rows: bool  # whether its objects may also be written as rows

    def export(self, name: str, opened: Any, request: ExportRequest) -> int:
        """Write the object ``name`` (open: ``opened``) to ``request.path``; the items."""
        ...


@runtime_checkable
class Describing(Protocol):
    """A kind that says more about one object than its ``db.info()`` row: what
    ``db.describe(name)``, ``tessera info PATH NAME``, the server's ``/objects/{name}``
    and the console show (plain JSON-able data)."""

    def details(self, name: str, opened: Any) -> dict[str, Any]:
        """What the kind adds about its object ``name`` (``opened``: the open object)."""
        ...


class DatabaseMethods:
    """The base of the mixins through which each layer gives :class:`tesseradb.database.
    Database` its typed methods (``tesseradb.arrays.ArrayMethods``, ...): what they use of
    the database."""

    _registry: Any  # the database's registry (kinds, open objects)
    catalog: Any

    def _check_open(self) -> None:
        raise NotImplementedError  # (the Database's)


def iso(moment: Any) -> str | None:
    """``moment`` (a datetime) as the catalog writes times (UTC, milliseconds)."""
    from datetime import UTC

    return None if moment is None else moment.astimezone(UTC).isoformat(timespec="milliseconds")


class KindBase:
    """What most kinds share: a kind states its names and overrides what differs.

    ``describe`` and ``check`` go object by object through ``describe_one``
    and ``check_one``; an object that cannot even be opened for its check is
    a finding, not an exception.
    """

    name: str
    label: str  # what a finding calls one object ("array", "attachment")
    aliases: tuple[str, ...] = ()
    directory: str | None = None

    def __init__(self, context: KindContext) -> None:
        self.context = context

    def check_writable(self, what: str) -> None:
        """Refuse to ``what`` (a ReadOnlyError) when the database is open read-only."""
        if self.context.read_only:
            from tesseradb.errors import ReadOnlyError

            raise ReadOnlyError(f"cannot {what}: the database is open read-only")

    def folder(self, name: str) -> Path:
        """The object's own folder under the kind's directory."""
        assert self.directory is not None
        return self.context.path / self.directory / name

    def create(self, name: str, spec: dict[str, Any]) -> None:
        pass  # storage made on first use

    def relation_names(self, name: str, spec: dict[str, Any]) -> list[str]:
        return [name]

    def close(self, opened: Any) -> None:
        pass  # nothing held between calls

    def shutdown(self) -> None:
        pass  # nothing shared between objects

    def strays(self, names: Collection[str]) -> list[tuple[Path, str]]:
        """Each object has a folder of its own named after it: anything else is a stray."""
        known = {n.lower() for n in names}
        return self.entries_not(
            lambda child: child.name.lower() in known,
            f"is not the directory of any {self.label} in the catalog",
        )

    def entries_not(self, belongs: Callable[[Path], bool], problem: str) -> list[tuple[Path, str]]:
        """The entries of the kind's directory that do not ``belong``, each with ``problem``
        (or the directory itself, if it is not one)."""
        if self.directory is None:
            return []
        folder = self.context.path / self.directory
        if not folder.exists():
            return []
        if not folder.is_dir():
            return [(folder, "should be a directory")]
        return [(child, problem) for child in sorted(folder.iterdir()) if not belongs(child)]

    def describe(self, objects: Sequence[CatalogObject]) -> list[ObjectInfo]:
        return [info for obj in objects for info in self.describe_one(obj)]

    def describe_one(self, obj: CatalogObject) -> list[ObjectInfo]:
        raise NotImplementedError

    def check(
        self, objects: Sequence[CatalogObject], repair: bool
    ) -> tuple[list[Finding], list[Verified]]:
        from tesseradb.checks import Finding
        from tesseradb.errors import TesseraError

        findings: list[Finding] = []
        verified: list[Verified] = []
        for obj in objects:
            try:
                found, ok = self.check_one(obj, repair)
            except TesseraError as err:  # the object cannot even be opened
                findings.append(Finding(obj.name, self.label, str(err)))
                continue
            findings.extend(found)
            if ok is not None:
                verified.append(ok)
        return findings, verified

    def check_one(self, obj: CatalogObject, repair: bool) -> tuple[list[Finding], Verified | None]:
        """Findings about one object, and what was verified (None: nothing could be read)."""
        raise NotImplementedError


class KeptInStorage(KindBase):
    """A kind whose objects keep their bulk data in the database's storage when it has one
    (docs/storage.md): the spec's ``location_key`` holds the object's own prefix, decided
    before its catalog entry is written, and dropping the object deletes what is there."""

    location_key = "location"  # (the spec's key: attachments keep only indexes there)

    def placed(
        self, name: str, spec: dict[str, Any], location: str | None = None
    ) -> dict[str, Any]:
        """``spec`` with where the new object's bulk data goes: ``location`` when its create
        call asked for one (an empty ``s3://`` prefix: a StorageError when it holds
        objects), else a fresh prefix under the database's storage when it has one (every
        object the database makes: by its create call, a load, an operator's ``into=``).
        A spec placed already is kept as it is."""
        if location is None and self.location_key in spec:
            return spec
        assert self.directory is not None  # (a kind that keeps data has a folder of its own)
        where = f"create {self.label} {name!r}"
        url = self.context.storage.place(self.directory, name, location, where)
        return spec if url is None else {**spec, self.location_key: url}

    def stored_location(self, spec: dict[str, Any]) -> Location | None:
        """Where the object's bulk data is in a bucket; None when it is in its folder."""
        url = spec.get(self.location_key)
        return self.context.storage.at(url) if url else None

    def delete_stored(self, name: str, spec: dict[str, Any]) -> None:
        """Delete the object's objects in the bucket. The object is gone from the catalog
        either way, so what cannot be deleted is logged, never raised: nothing reads it
        again, and `tessera check` lists it."""
        import logging

        from tesseradb.errors import TesseraError

        location = self.stored_location(spec)
        if location is None:
            return
        try:
            location.delete_all()
        except TesseraError as err:
            logging.getLogger(f"tesseradb.{self.name}").warning(
                "%s %r: its objects in %s were not all deleted: %s",
                self.label,
                name,
                location.url,
                err,
            )
