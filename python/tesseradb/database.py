"""The database: a directory holding the catalog, the table store and each data model's files.

``Database`` opens or creates the directory, holds the writer lock, and is
the one namespace every object is found in: it answers the SQL engine's
questions about names and wires the subpackages together.

Layout of a database directory::

    catalog.sqlite   the catalog (SQLite, WAL): objects, kinds, specs, format version
    tables.duckdb    plain tables and views created with SQL (DuckDB's own file)
    write.lock       the writer lock (flock); its content names the holder
    attached/<name>/ sidecar bitmap indexes of an attachment
    streams/<name>/  the segment files of a record stream
    arrays/<name>/   an array's Icechunk repository (repo/) and commit lock
    documents/       the embedded document backends (documents.sqlite, documents.duckdb)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._lock import LOCK_FILE, WriterLock
from tesseradb.catalog import CATALOG_FILE, Catalog, CatalogObject, validate_name
from tesseradb.errors import (
    DatabaseClosedError,
    InvalidArgumentError,
    NotADatabaseError,
    ObjectExistsError,
    ObjectNotFoundError,
    ReadOnlyError,
    TesseraError,
    require_text,
)
from tesseradb.sql.engine import Explain, SQLEngine
from tesseradb.sql.relation import ArrowRelation, Relation
from tesseradb.sql.result import Result

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime
    from types import TracebackType

    import pyarrow as pa

    from tesseradb.arrays import Array
    from tesseradb.attached import Attachment
    from tesseradb.checks import CheckReport, Finding, Verified
    from tesseradb.documents import Collection, DocumentStore
    from tesseradb.records import Stream

__all__ = ["Database", "DatabaseInfo", "ObjectInfo", "connect"]

TABLE_STORE_FILE = "tables.duckdb"
ATTACHED_KIND = "attached"
STREAM_KIND = "stream"
ARRAY_KIND = "array"
COLLECTION_KIND = "collection"
PLAIN_KINDS = ("table", "view")


@dataclass(frozen=True)
class ObjectInfo:
    """One object of the database as :meth:`Database.info` lists it."""

    name: str
    kind: str
    rows: int | None
    bytes: int | None
    created: str | None
    modified: str | None


@dataclass(frozen=True)
class DatabaseInfo:
    path: Path
    format_version: int
    read_only: bool
    objects: list[ObjectInfo]
    bytes: int  # the whole directory on disk


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (embedded quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def connect(path: str | os.PathLike[str], read_only: bool = False) -> Database:
    """Open the database directory at ``path``, creating it if needed (unless ``read_only``)."""
    return Database(path, read_only=read_only)


def _require_str(value: object, what: str, where: str) -> None:
    """Refuse a non-text argument at the door, naming it (not an AttributeError inside)."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{where}: {what} must be a str, not {type(value).__name__}")
    require_text(value, what, where)


def _require_bool(value: object, what: str, where: str) -> None:
    """A flag is True or False: ``repair="false"`` must not mean yes."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{where}: {what} must be True or False, not {value!r}")


def _require_params(params: object, where: str) -> None:
    if params is not None and (
        isinstance(params, (str, bytes)) or not isinstance(params, (list, tuple, dict))
    ):
        raise InvalidArgumentError(
            f"{where}: params are a list (for ?) or a dict (for $name), not {type(params).__name__}"
        )


def _iso(moment: datetime | None) -> str | None:
    """``moment`` as the catalog writes times (UTC, milliseconds)."""
    from datetime import UTC

    return None if moment is None else moment.astimezone(UTC).isoformat(timespec="milliseconds")


# databases still open, closed at interpreter exit while the writer threads
# still run (a __del__ during finalization could only wait for them for ever)
_OPEN: weakref.WeakSet[Database] = weakref.WeakSet()


@atexit.register
def _close_open_databases() -> None:
    for database in list(_OPEN):
        with contextlib.suppress(Exception):
            database.close()


class Database:
    """An open TesseraDB database. Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: str | os.PathLike[str], read_only: bool = False) -> None:
        self.path = Path(path).expanduser().absolute()
        self.read_only = read_only
        self._lock = WriterLock(self.path) if not read_only else None
        create = self._prepare_directory()
        if self._lock is not None:
            self._lock.acquire()
        try:
            self.catalog = Catalog(self.path, read_only=read_only, create=create)
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        self._registered: dict[str, Relation] = {}
        self._registered_lock = threading.Lock()
        self._attachments: dict[str, Any] = {}  # open Attachment objects by lower name
        self._streams: dict[str, Stream] = {}  # open streams by lower name
        self._arrays: dict[str, Array] = {}  # arrays open at their head, by lower name
        self._documents: DocumentStore | None = None  # opened with the first collection
        self._engine = SQLEngine(self, self.path / TABLE_STORE_FILE, read_only)
        self._touched: dict[str, float] = {}  # name -> when _modified last wrote it
        self._closed = False
        _OPEN.add(self)

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
        for attachment in self._attachments.values():
            attachment.close()
        for stream in self._streams.values():
            stream.close()  # writes what is still in memory
        if self._documents is not None:
            self._documents.close()
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

    @property
    def format_version(self) -> int:
        return self.catalog.format_version

    # --- SQL ------------------------------------------------------------------------
    def sql(self, text: str, params: Any = None) -> Result:
        """Run SQL (DuckDB's dialect) over every relation and plain table of the database.

        ``params`` binds ``?`` placeholders (a sequence) or ``$name`` ones (a
        mapping); values are never pasted into the statement's text.
        """
        _require_str(text, "the SQL text", "db.sql")
        _require_params(params, "db.sql")
        self._check_open()
        return self._engine.execute(text, params)

    def interrupt(self) -> None:
        """Cancel the SQL statements running now; each raises InterruptedStatementError and
        keeps nothing (call it from another thread, or a signal handler)."""
        self._engine.interrupt()

    def explain(self, text: str, params: Any = None) -> Explain:
        """What ``text`` would read from each relation: the predicate pushed down and the columns."""
        _require_str(text, "the SQL text", "db.explain")
        _require_params(params, "db.explain")
        self._check_open()
        return self._engine.explain(text, params)

    # --- relations registered for this session ----------------------------------
    def register(self, name: str, data: Any) -> Relation:
        """Expose ``data`` to SQL as ``name`` until :meth:`unregister` or close.

        ``data`` is a :class:`Relation`, or anything Arrow can read (a pyarrow
        Table or RecordBatch, an object with ``__arrow_c_stream__``, a dict of
        columns), which becomes an :class:`ArrowRelation`. The name shares the
        database's namespace, so it may not be an object's name.
        """
        _require_str(name, "name", "db.register")
        validate_name(name, "relation")
        if self.catalog.get(name) is not None:
            raise ObjectExistsError(
                f"cannot register {name!r}: the database has an object of that name"
            )
        relation = data if isinstance(data, Relation) else ArrowRelation(name, data)
        with self._registered_lock:
            if name.lower() in self._registered:
                raise ObjectExistsError(
                    f"a relation named {name!r} is already registered; unregister it first"
                )
            self._registered[name.lower()] = relation
        return relation

    def unregister(self, name: str) -> None:
        _require_str(name, "name", "db.unregister")
        with self._registered_lock:
            if self._registered.pop(name.lower(), None) is None:
                raise ObjectNotFoundError(f"no registered relation named {name!r}")

    # --- the namespace (also what the SQL engine asks) ---------------------------
    def relation(self, name: str) -> Relation | None:
        """The relation called ``name`` (case-insensitive), or None if there is none.

        Dotted names are tables of an object that holds several
        (``ptf.candidate`` of the attachment ``ptf``).
        """
        _require_str(name, "name", "db.relation")
        registered = self._registered.get(name.lower())
        if registered is not None:
            return registered
        stream = self._streams.get(name.lower())
        if stream is not None:
            return stream
        array = self._arrays.get(name.lower())
        if array is not None:
            return array.relation
        if "." not in name:
            obj = self.catalog.get(name)
            if obj is not None and obj.kind == STREAM_KIND:
                return self.stream(obj.name)
            if obj is not None and obj.kind == ARRAY_KIND:
                return self.array(obj.name).relation
            if obj is not None and obj.kind == COLLECTION_KIND:
                from tesseradb.documents._relation import CollectionRelation

                return CollectionRelation(self.collection(obj.name))
            return None
        owner, _, table = name.partition(".")
        attachment = self._attachments.get(owner.lower())  # open already: no catalog read
        if attachment is None:
            obj = self.catalog.get(owner)
            if obj is None or obj.kind != ATTACHED_KIND:
                return None
            attachment = self.attached(obj.name)
        lower = {t.lower(): t for t in attachment.tables()}
        if table.lower() in lower:
            return attachment.table(lower[table.lower()])
        return None

    def kind_of(self, name: str) -> str | None:
        _require_str(name, "name", "db.kind_of")
        if name.lower() in self._registered:
            return "relation"
        obj = self.catalog.get(name)
        if obj is None and "." in name and self.relation(name) is not None:
            return "attached table"
        return obj.kind if obj is not None else None

    def known_names(self) -> list[str]:
        names = {o.name for o in self.catalog.objects()} | {
            r.name for r in self._registered.values()
        }
        for obj in self.catalog.objects(ATTACHED_KIND):
            names |= {f"{obj.name}.{t}" for t in obj.spec.get("tables", {})}
        return sorted(names)

    def columns_of(self, name: str) -> list[str] | None:
        obj = self.catalog.get(name)
        if obj is None or obj.kind not in PLAIN_KINDS or "columns" not in obj.spec:
            return None
        return list(obj.spec["columns"])

    def sync_tables(
        self, tables: dict[str, tuple[str, list[str]]], written: Sequence[str] = ()
    ) -> None:
        self.catalog.sync_kinds(
            PLAIN_KINDS, {n: (kind, {"columns": cols}) for n, (kind, cols) in tables.items()}
        )
        known = {n.lower(): n for n in tables}
        for name in written:
            if name.lower() in known:
                self._modified(known[name.lower()], at_once=True)

    def _modified(self, name: str, at_once: bool = False) -> None:
        """Record that ``name`` changed (ObjectInfo.modified): at most once a second per
        object, so that a stream of small writes does not become catalog writes."""
        import time

        now = time.monotonic()
        if self.read_only or (not at_once and now - self._touched.get(name, -2.0) < 1.0):
            return
        self._touched[name] = now
        with contextlib.suppress(ObjectNotFoundError):
            self.catalog.touch(name)

    def tables(self) -> list[str]:
        """Names of the plain tables and views (those created with SQL)."""
        return [o.name for o in self.catalog.objects() if o.kind in PLAIN_KINDS]

    def drop(self, name: str, missing_ok: bool = False) -> None:
        """Remove the object called ``name`` (of any kind, or a registered relation).

        ``missing_ok=True`` does nothing when there is no such object (a
        script that starts afresh each time it runs).
        """
        _require_str(name, "name", "db.drop")
        _require_bool(missing_ok, "missing_ok", "db.drop")
        self._check_open()
        if name.lower() in self._registered:
            self.unregister(name)
            return
        if missing_ok and self.catalog.get(name) is None:
            return
        obj = self.catalog.require(name)
        if self.read_only:
            raise ReadOnlyError(f"cannot drop {name!r}: the database is open read-only")
        if obj.kind in PLAIN_KINDS:
            self.sql(f"DROP {obj.kind.upper()} {quote_identifier(obj.name)}")
            return
        if obj.kind == ATTACHED_KIND:
            self.detach(obj.name)
            return
        if obj.kind == STREAM_KIND:
            self._drop_stream(obj.name)
            return
        if obj.kind == ARRAY_KIND:
            self._drop_array(obj.name)
            return
        if obj.kind == COLLECTION_KIND:
            self._drop_collection(obj.name)
            return
        raise ObjectNotFoundError(f"{name!r} is a {obj.kind}; this version cannot drop that kind")

    # --- attached files -----------------------------------------------------------
    def attach(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        threads: int | None = None,
        batch_bytes: int | None = None,
        stale_index: str = "rebuild",
    ) -> Attachment:
        """Attach HDF5 (or NetCDF4) files in place: every table in them becomes ``<name>.<table>``.

        ``path`` is a file or a glob of files with the same layout (one table
        over all of them, with a ``_file`` column). Nothing is copied and the
        files are never written. ``threads`` and ``batch_bytes`` (about 32 MB)
        shape scans; ``stale_index`` is ``rebuild`` or ``bypass``: what to do
        with an index whose file changed since it was built.
        """
        from tesseradb.attached._attachment import attach_spec

        self._check_open()
        self._check_writable("attach files")
        if stale_index not in ("rebuild", "bypass"):
            raise InvalidArgumentError(
                f"stale_index must be 'rebuild' or 'bypass', not {stale_index!r}"
            )
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentError(
                f"db.attach: path must be a file name or glob (a str or path), not {type(path).__name__}"
            )
        text = os.fspath(path)
        if not isinstance(text, str):
            raise InvalidArgumentError(f"db.attach: path must be text, not {type(text).__name__}")
        if name is not None:
            _require_str(name, "name", "db.attach")
        if name is None:
            stem = Path(text).name.split(".")[0]
            name = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "attached"
            if name[0].isdigit():
                name = f"f_{name}"
        validate_name(name, "attachment")
        options = {"threads": threads, "batch_bytes": batch_bytes, "stale_index": stale_index}
        spec = attach_spec(text, options)
        self.catalog.create(name, ATTACHED_KIND, spec)
        return self.attached(name)

    def attached(self, name: str) -> Attachment:
        """The attachment called ``name``: its tables, indexes and slab reads."""
        _require_str(name, "name", "db.attached")
        from tesseradb.attached._attachment import Attachment

        self._check_open()
        obj = self.catalog.require(name, ATTACHED_KIND)
        key = obj.name.lower()
        with self._registered_lock:
            if key not in self._attachments:
                self._attachments[key] = Attachment(
                    obj.name, obj.spec, self.path / "attached" / obj.name, self.read_only
                )
            return self._attachments[key]

    def detach(self, name: str) -> None:
        """Forget an attachment and delete its sidecar indexes (the files are untouched)."""
        _require_str(name, "name", "db.detach")
        import shutil

        self._check_open()
        self._check_writable(f"detach {name!r}")
        obj = self.catalog.require(name, ATTACHED_KIND)
        with self._registered_lock:
            attachment = self._attachments.pop(obj.name.lower(), None)
        if attachment is not None:
            attachment.close()
        self.catalog.drop(obj.name)
        self._engine.forget_catalog(obj.name)
        shutil.rmtree(self.path / "attached" / obj.name, ignore_errors=True)

    def create_index(
        self,
        table: str,
        columns: str | Sequence[str],
        kind: str = "bitmap",
        *,
        edges: Sequence[float] | None = None,
        count: int | None = None,
        precision: int | None = None,
        exact: bool = False,
        encoding: str = "equality",
        threads: int | None = None,
    ) -> None:
        """Build bitmap indexes on columns of an attached table (``db.create_index("ptf.candidate", ["mag"])``).

        Bins come from explicit ``edges``, ``count`` equal-weight bins,
        ``precision`` significant digits, or ``exact`` values; by default
        exact for up to 100,000 distinct values, else 1,000 equal-weight bins.
        ``encoding`` is ``equality`` or ``range``. Indexes are sidecar files
        under the database directory; the attached files are never changed.
        """
        _require_str(table, "table", "db.create_index")
        from tesseradb.attached._attachment import AttachError
        from tesseradb.attached._bitmap import Binning

        self._check_open()
        self._check_writable("create an index")
        if kind != "bitmap":
            raise InvalidArgumentError(
                f"unknown index kind {kind!r}: attached tables have bitmap indexes"
            )
        owner, _, part = table.partition(".")
        if not part:
            raise AttachError(
                f"index {table!r}: name a table of an attachment, as in ptf.candidate"
            )
        for option, value in (("count", count), ("precision", precision), ("threads", threads)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidArgumentError(
                    f"index on {table!r}: {option} must be a whole number >= 1, not {value!r}"
                )
        if edges is not None and (
            isinstance(edges, (str, bytes))
            or not isinstance(edges, (list, tuple))
            or not all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in edges)
        ):
            raise InvalidArgumentError(
                f"index on {table!r}: edges must be a list of numbers, not {edges!r}"
            )
        chosen = [
            k
            for k, v in (
                ("edges", edges),
                ("count", count),
                ("precision", precision),
                ("exact", exact or None),
            )
            if v is not None
        ]
        if len(chosen) > 1:
            raise InvalidArgumentError(f"choose one binning, not {' and '.join(chosen)}")
        binning = Binning(
            kind=chosen[0] if chosen else "auto",
            edges=tuple(edges or ()),
            count=count or 0,
            precision=precision or 0,
        )
        attachment = self.attached(owner)
        relation = attachment.table(part)  # validates the table name
        names = [columns] if isinstance(columns, str) else columns
        if not isinstance(names, (list, tuple)) or not all(isinstance(c, str) for c in names):
            raise InvalidArgumentError(
                f"index on {table!r}: columns is a column name or a list of them, not {columns!r}"
            )
        specs = attachment.create_index(relation.layout.name, names, binning, encoding, threads)
        obj = self.catalog.require(attachment.name, ATTACHED_KIND)
        self.catalog.update_spec(obj.name, {**obj.spec, "indexes": specs})
        attachment.spec["indexes"] = specs

    # --- record streams ---------------------------------------------------------------
    def create_stream(self, name: str, descriptor: Any, **options: Any) -> Stream:
        """Create a record stream (MDDS) whose records ``descriptor`` describes.

        ``descriptor`` is the paper's XML record descriptor, the same as a dict
        or JSON text, or a :class:`RecordDescriptor`. ``options`` are those of
        :class:`StreamOptions`: ``max_chunk_records``, ``segment_bytes``,
        ``scheme`` (``random`` or ``kdtree``), ``overpacking``, ``iterator``
        (``kdtree`` or ``sequential``), ``cache_bytes``, ``writer_threads``,
        ``writer_period_ms``, ``compression`` (``zstd`` or ``none``), ``seed``.
        """
        _require_str(name, "name", "db.create_stream")
        from tesseradb.records import RecordDescriptor, StreamOptions

        self._check_open()
        self._check_writable("create a stream")
        validate_name(name, "stream")
        parsed = RecordDescriptor.parse(descriptor)
        settings = StreamOptions.from_dict(options)
        self.catalog.create(
            name, STREAM_KIND, {"descriptor": parsed.to_dict(), "options": settings.to_dict()}
        )
        return self.stream(name)

    def stream(self, name: str) -> Stream:
        """The record stream called ``name``: ingest, flush, range queries."""
        _require_str(name, "name", "db.stream")
        from tesseradb.records import RecordDescriptor, Stream, StreamOptions

        self._check_open()
        key = name.lower()
        with self._registered_lock:
            if key not in self._streams:
                obj = self.catalog.require(name, STREAM_KIND)
                self._streams[key] = Stream(
                    obj.name,
                    RecordDescriptor.from_dict(obj.spec["descriptor"]),
                    StreamOptions.from_dict(obj.spec["options"]),
                    self.path / "streams" / obj.name,
                    self.read_only,
                )
            return self._streams[key]

    def streams(self) -> list[str]:
        """Names of the record streams."""
        return [o.name for o in self.catalog.objects(STREAM_KIND)]

    def _drop_stream(self, name: str) -> None:
        import shutil

        with self._registered_lock:
            stream = self._streams.pop(name.lower(), None)
        if stream is not None:
            stream.close(flush=False)
        self.catalog.drop(name)
        shutil.rmtree(self.path / "streams" / name, ignore_errors=True)

    # --- arrays ----------------------------------------------------------------------
    def create_array(
        self,
        name: str,
        dims: Any,
        attrs: Any,
        *,
        origin: Sequence[int] | None = None,
        codec: str = "zstd",
        level: int = 3,
        metadata: dict[str, Any] | None = None,
    ) -> Array:
        """Create an array with named ``dims`` and ``attrs`` (SciDB's model on Zarr v3/Icechunk).

        ``dims`` are :class:`~tesseradb.arrays.Dimension` or dicts (``name``,
        ``start``, ``end`` exclusive or None for the one unbounded dimension,
        ``chunk``, ``overlap``); ``attrs`` are
        :class:`~tesseradb.arrays.Attribute`, dicts (``name``, ``dtype``,
        ``fill``, ``nullable``) or a mapping of name to dtype. ``origin`` puts
        the array in a world coordinate system (world = index + origin).
        ``codec`` is ``zstd`` (default), ``blosc`` or ``none``, at ``level``.
        """
        _require_str(name, "name", "db.create_array")
        import shutil

        from tesseradb.arrays import ArraySchema
        from tesseradb.arrays._repository import ArrayRepository

        self._check_open()
        self._check_writable("create an array")
        validate_name(name, "array")
        schema = ArraySchema.build(dims, attrs, origin, codec, level, metadata)
        existing = self.catalog.get(name)
        if existing is not None:
            raise ObjectExistsError(
                f"cannot create array {name!r}: {existing.name!r} already exists (a {existing.kind})"
            )
        directory = self.path / "arrays" / name
        if directory.exists():  # left by a crash between repository and catalog
            shutil.rmtree(directory)
        try:
            ArrayRepository.create(name, directory).initialise(schema)
            self.catalog.create(name, ARRAY_KIND, {"schema": schema.to_dict()})
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return self.array(name)

    def array(self, name: str, version: str | None = None, as_of: datetime | None = None) -> Array:
        """The array called ``name``; at a past ``version`` (snapshot id) or ``as_of`` a time: read-only."""
        _require_str(name, "name", "db.array")
        from tesseradb.arrays import Array, ArraySchema
        from tesseradb.arrays._repository import ArrayRepository

        self._check_open()
        key = name.lower()
        if version is None and as_of is None and key in self._arrays:
            return self._arrays[key]
        obj = self.catalog.require(name, ARRAY_KIND)
        schema = ArraySchema.from_dict(obj.spec["schema"])
        if version is not None or as_of is not None:
            head = self.array(obj.name)
            return Array(obj.name, schema, head._repo, True, version, as_of)
        with self._registered_lock:
            if key not in self._arrays:
                repo = ArrayRepository(obj.name, self.path / "arrays" / obj.name)
                array = Array(obj.name, schema, repo, self.read_only)
                array._database = weakref.ref(self)  # for operators' into=
                self._arrays[key] = array
            return self._arrays[key]

    def arrays(self) -> list[str]:
        """Names of the arrays."""
        return [o.name for o in self.catalog.objects(ARRAY_KIND)]

    def merge(self, arrays: Sequence[str | Array], into: str) -> Array:
        """One new array ``into`` holding the written cells of ``arrays``; later arrays win.

        The inputs must have the same dimensions (by name) and attributes;
        the result spans their union in world coordinates.
        """
        _require_str(into, "into", "db.merge")
        from tesseradb.arrays._operators import merge_arrays

        self._check_open()
        self._check_writable("merge arrays")
        inputs = [a if not isinstance(a, str) else self.array(a) for a in arrays]
        return merge_arrays(self, inputs, into)

    def _drop_array(self, name: str) -> None:
        import shutil

        self._check_writable(f"drop {name!r}")
        with self._registered_lock:
            self._arrays.pop(name.lower(), None)
        self.catalog.drop(name)
        shutil.rmtree(self.path / "arrays" / name, ignore_errors=True)

    # --- documents -------------------------------------------------------------------
    def _document_store(self) -> DocumentStore:
        from tesseradb.documents import DocumentStore

        with self._registered_lock:
            if self._documents is None:
                self._documents = DocumentStore(
                    self.path / "documents", self.read_only, on_write=self._modified
                )
            return self._documents

    def create_collection(
        self, name: str, backend: str | None = None, mapping: str | None = None
    ) -> Collection:
        """Create a JSON collection (Argo) on ``backend`` under ``mapping``.

        ``backend`` is ``sqlite`` or ``duckdb`` (files inside the database
        directory) or a server URL (``postgresql://user@host:port/db``,
        ``mysql://user:password@host:port/db``); ``mapping`` is ``argo1`` (one
        vertical table) or ``argo3`` (a table per JSON type). Both default to
        the best embedded configuration measured by ``tessera bench nobench``.
        """
        _require_str(name, "name", "db.create_collection")
        from tesseradb.documents import DEFAULT_BACKEND, DEFAULT_MAPPING

        self._check_open()
        self._check_writable("create a collection")
        validate_name(name, "collection")
        backend = backend or DEFAULT_BACKEND
        mapping = mapping or DEFAULT_MAPPING
        store = self._document_store()
        store.check_options(backend, mapping)
        existing = self.catalog.get(name)
        if existing is not None:
            raise ObjectExistsError(
                f"cannot create collection {name!r}: {existing.name!r} already exists (a {existing.kind})"
            )
        collection = store.open(name, backend, mapping, create=True)
        try:
            collection.create()
        except BaseException:
            store.forget(name)
            raise
        try:
            self.catalog.create(name, COLLECTION_KIND, {"backend": backend, "mapping": mapping})
        except BaseException:
            collection.drop()
            store.forget(name)
            raise
        return collection

    def collection(self, name: str) -> Collection:
        """The JSON collection called ``name``: insert, load, find, Argo/SQL."""
        _require_str(name, "name", "db.collection")
        from tesseradb.errors import UnknownCollectionError

        self._check_open()
        try:
            obj = self.catalog.require(name, COLLECTION_KIND)
        except ObjectNotFoundError as err:
            raise UnknownCollectionError(str(err), err.suggestions) from None
        collection = self._document_store().open(obj.name, obj.spec["backend"], obj.spec["mapping"])
        collection.upgrade()  # a collection made before the delta tables
        return collection

    def collections(self) -> list[str]:
        """Names of the JSON collections."""
        return [o.name for o in self.catalog.objects(COLLECTION_KIND)]

    def argo(self, text: str, params: Any = None) -> list[dict[str, Any]]:
        """Run one Argo/SQL statement; its result objects (in objid order unless ORDER BY).

        ``INSERT INTO c OBJECT {...}`` creates ``c`` on the default backend if
        it does not exist, as Argo does. ``params`` binds ``?`` (a sequence)
        or ``:name`` (a mapping) placeholders. Each statement is one
        transaction on the collection's backend.
        """
        if not isinstance(text, str):  # (a lone surrogate is named by the statement's parser)
            raise InvalidArgumentError(
                f"db.argo: the Argo/SQL text must be a str, not {type(text).__name__}"
            )
        _require_params(params, "db.argo")
        from tesseradb.documents import parse_statement
        from tesseradb.documents._argosql import Insert, Select

        self._check_open()
        statement = parse_statement(text, params)
        if isinstance(statement, Insert) and self.catalog.get(statement.collection) is None:
            self.create_collection(statement.collection)
        collection = self.collection(statement.collection)
        other = None
        if isinstance(statement, Select) and statement.join is not None:
            other = self.collection(statement.join.collection)
        return collection.run(statement, other)

    def _drop_collection(self, name: str) -> None:
        from tesseradb.errors import DocumentBackendError

        self._check_writable(f"drop {name!r}")
        try:
            collection = self.collection(name)
        except DocumentBackendError:  # its backend file is gone: only the name is left
            self.catalog.drop(name)
            return
        collection.drop()
        self._document_store().forget(name)
        self.catalog.drop(name)

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot {what}: the database is open read-only")

    def schema(self, name: str) -> pa.Schema:
        """The columns of the relation, table or view called ``name``."""
        _require_str(name, "name", "db.schema")
        self._check_open()
        relation = self.relation(name)
        if relation is not None:
            return relation.schema()
        obj = self.catalog.require(name.partition(".")[0] if "." in name else name)
        if obj.kind in PLAIN_KINDS:
            return self.sql(f"SELECT * FROM {quote_identifier(obj.name)} LIMIT 0").arrow().schema
        raise ObjectNotFoundError(f"{name!r} is a {obj.kind}, which this version cannot describe")

    # --- checking ---------------------------------------------------------------
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
        _require_bool(repair, "repair", "db.check")
        if repair:
            self._check_writable("repair the database")
        report = CheckReport(self.path, repair)
        objects = self.catalog.objects()
        for obj in objects:
            if obj.kind == STREAM_KIND:
                self._check_stream(obj.name, obj.spec, repair, report)
            elif obj.kind == ARRAY_KIND:
                self._check_object(
                    obj.name, "array", report, lambda o=obj: self._check_array(o.name, repair)
                )
            elif obj.kind == ATTACHED_KIND:
                self._check_object(
                    obj.name,
                    "attachment",
                    report,
                    lambda o=obj: self.attached(o.name).check(repair),
                )
            elif obj.kind == COLLECTION_KIND:
                self._check_object(
                    obj.name, "collection", report, lambda o=obj: self.collection(o.name).check()
                )
        if any(o.kind == COLLECTION_KIND for o in objects):
            self._check_document_backends(report)
        self._check_tables(objects, repair, report)
        report.findings.extend(check_layout(self.path, {o.name: o.kind for o in objects}, repair))
        return report

    @staticmethod
    def _check_object(
        name: str,
        kind: str,
        report: CheckReport,
        check: Callable[[], tuple[list[Finding], Verified]],
    ) -> None:
        from tesseradb.checks import Finding

        try:
            findings, verified = check()
        except TesseraError as err:  # the object cannot even be opened
            report.findings.append(Finding(name, kind, str(err)))
            return
        report.findings.extend(findings)
        report.verified.append(verified)

    def _check_array(self, name: str, repair: bool) -> tuple[list[Finding], Verified]:
        from tesseradb.arrays import check_array

        if not (self.path / "arrays" / name).is_dir():
            from tesseradb.checks import Finding, Verified

            return [
                Finding(
                    name,
                    f"directory arrays/{name}",
                    "is missing",
                    action="restore it from a backup, or drop the array",
                )
            ], Verified(name, "array", "nothing to read")
        with self._registered_lock:
            self._arrays.pop(name.lower(), None)  # reopen at the head after a repair
        return check_array(self.array(name), repair)

    def _check_document_backends(self, report: CheckReport) -> None:
        from tesseradb.checks import Finding

        for backend in self._document_store().open_backends():
            try:
                problems = backend.integrity_problems()
            except TesseraError as err:
                problems = [str(err)]
            for problem in problems:
                report.findings.append(
                    Finding("(documents)", f"backend {backend.describe()}", problem)
                )

    def _check_tables(
        self, objects: Sequence[CatalogObject], repair: bool, report: CheckReport
    ) -> None:
        """Plain tables: each read whole, and the catalog's ``objects`` against the table store."""
        from tesseradb.checks import Finding, Verified

        catalog = {o.name.lower(): o.name for o in objects if o.kind in PLAIN_KINDS}
        if not catalog and not self._engine.store.exists:
            return
        try:
            stored = self._engine.store_tables()
        except TesseraError as err:
            report.findings.append(Finding("(tables)", TABLE_STORE_FILE, str(err)))
            return
        present = {n.lower(): n for n in stored}
        for key in sorted(set(catalog) ^ set(present)):
            where = "the catalog" if key in catalog else "the table store"
            other = "the table store" if key in catalog else "the catalog"
            report.findings.append(
                Finding(
                    catalog.get(key) or present[key],
                    "catalog entry" if key in catalog else TABLE_STORE_FILE,
                    f"is in {where} but not in {other}",
                    action="catalog brought in line with the table store" if repair else "",
                    repaired=repair,
                )
            )
        if repair and set(catalog) != set(present):
            self.sync_tables(stored)
        rows = 0
        for name, (kind, _) in sorted(stored.items()):
            if kind != "table":
                continue
            try:
                rows += self._engine.read_whole(name)
            except TesseraError as err:
                report.findings.append(Finding(name, f"table in {TABLE_STORE_FILE}", str(err)))
        tables = sum(1 for kind, _ in stored.values() if kind == "table")
        report.verified.append(
            Verified("(tables)", "table store", f"{tables} table(s), {rows:,} rows read whole")
        )

    def _check_stream(
        self, name: str, spec: dict[str, Any], repair: bool, report: CheckReport
    ) -> None:
        from tesseradb.records import RecordDescriptor, check_stream

        stream = self._streams.get(name.lower())
        if stream is not None and not self.read_only:
            stream.flush()  # what is in memory is checked on disk too
        directory = self.path / "streams" / name
        if not directory.is_dir():
            from tesseradb.checks import Finding

            report.findings.append(Finding(name, f"directory streams/{name}", "is missing"))
            return
        descriptor = RecordDescriptor.from_dict(spec["descriptor"])
        findings, verified = check_stream(name, descriptor, directory, repair)
        report.findings.extend(findings)
        report.verified.append(verified)
        if stream is not None and any(f.repaired for f in findings):
            stream.reload()  # serve what repair kept

    # --- information ------------------------------------------------------------
    def info(self) -> DatabaseInfo:
        """The objects of the database with their kinds and sizes."""
        self._check_open()
        table_rows = self._table_rows()
        objects = []
        for obj in self.catalog.objects():
            rows = table_rows.get(obj.name.lower()) if obj.kind in PLAIN_KINDS else None
            size = None
            if obj.kind == ATTACHED_KIND:
                size = sum(i.get("size", 0) for i in obj.spec.get("identities", []))
                objects.append(
                    ObjectInfo(obj.name, obj.kind, None, size, obj.created, obj.modified)
                )
                for table, counts in obj.spec.get("rows", {}).items():
                    objects.append(
                        ObjectInfo(
                            f"{obj.name}.{table}", "attached table", sum(counts), None, None, None
                        )
                    )
                continue
            modified = obj.modified
            if obj.kind == STREAM_KIND:
                stream = self.stream(obj.name)
                rows, size = stream.num_records, stream.bytes_on_disk
                # the call log grows with every committed ingest call
                modified = max(modified, _iso(stream.last_commit) or "")
            if obj.kind == ARRAY_KIND:
                array = self.array(obj.name)
                rows, size = array.relation.estimate(None).rows, array.bytes_on_disk
                versions = array.versions()
                if versions:
                    modified = max(modified, _iso(versions[0].time) or "")
            if obj.kind == COLLECTION_KIND:
                rows = self.collection(obj.name).count()
            objects.append(ObjectInfo(obj.name, obj.kind, rows, size, obj.created, modified))
        for rel in self._registered.values():
            est = rel.estimate(None)
            objects.append(
                ObjectInfo(rel.name, "relation (this session)", est.rows, est.bytes, None, None)
            )
        total = sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())
        return DatabaseInfo(self.path, self.format_version, self.read_only, objects, total)

    def _table_rows(self) -> dict[str, int]:
        if not self.tables():
            return {}
        rows = self._engine.store_query(
            "SELECT table_name, estimated_size FROM duckdb_tables() "
            "WHERE database_name = current_database() AND schema_name = 'main'"
        )
        return {name.lower(): int(count) for name, count in rows}

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseClosedError(f"database {self.path} is closed")
