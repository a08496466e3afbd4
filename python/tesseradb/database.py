"""The database: a directory holding the catalog, the table store and each data model's files.

``Database`` is the hall: it opens or creates the directory, holds the
writer lock and offers the user's API. What each data model is and does
lives in its room (``arrays``, ``records``, ``documents``, ``attached``,
the SQL engine's plain tables), each reached through its
:class:`~tesseradb.kinds.Kind`; the registry (``_registry.py``) keeps the
kinds, the one cache of open objects, and answers the SQL engine's
questions about names.

Layout of a database directory::

    catalog.sqlite   the catalog (SQLite, WAL): objects, kinds, specs, format version
    tables.duckdb    plain tables and views created with SQL (DuckDB's own file)
    write.lock       the writer lock (flock); its content names the holder
    attached/<name>/ sidecar bitmap indexes of an attachment
    streams/<name>/  the segment files of a record stream
    arrays/<name>/   an array's Icechunk repository (repo/) and commit lock
    documents/       the embedded document backends (documents.sqlite, documents.duckdb,
                     documents.snapshots/ for readers of the DuckDB one)
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

from tesseradb._lock import LOCK_FILE, WriterLock
from tesseradb._registry import Registry
from tesseradb._sqltext import quote_identifier
from tesseradb.catalog import CATALOG_FILE, Catalog, validate_name
from tesseradb.errors import (
    InvalidArgumentError,
    NotADatabaseError,
    ObjectNotFoundError,
    TesseraError,
    require_bool,
    require_params,
    require_str,
)
from tesseradb.executor import Executor, ExecutorSlot, as_executor
from tesseradb.kinds import KINDS, Kind, KindContext, ObjectInfo, registered_kinds
from tesseradb.sql.engine import Explain, SQLEngine, SQLSession
from tesseradb.sql.relation import ArrowRelation, Relation
from tesseradb.sql.result import Result
from tesseradb.sql.tables import PLAIN_KINDS, TablesKind

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime
    from types import TracebackType

    import pyarrow as pa

    from tesseradb.arrays import Array
    from tesseradb.assoc import AssocTable
    from tesseradb.attached import Attachment
    from tesseradb.checks import CheckReport
    from tesseradb.documents import Collection
    from tesseradb.progress import Cancel, ProgressLike
    from tesseradb.records import Stream
    from tesseradb.transfer import Exported, Loaded

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
) -> Database:
    """Open the database directory at ``path``, creating it if needed (unless ``read_only``).

    ``cluster`` (a ``dask.distributed.Client``) runs chunk- and file-parallel
    work on its workers instead of this process's threads (:meth:`Database.use`).
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
    db = Database(path, read_only=read_only)
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


class Session:
    """A SQL session of its own on an open database (:meth:`Database.session`): what
    DuckDB keeps per connection (settings, prepared statements, temporary tables,
    ``USE``, an open transaction) is this session's alone."""

    def __init__(self, database: Database, session: SQLSession) -> None:
        self.database = database
        self._session = session

    def sql(
        self,
        text: str,
        params: Any = None,
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> Result:
        """As :meth:`Database.sql`, in this session."""
        self._check_open()
        return self.database._sql(text, params, progress, cancel, self._session, "session.sql")

    def stream_sql(
        self,
        text: str,
        sink: Callable[[pa.RecordBatchReader], Any],
        params: Any = None,
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
        exact: bool = False,
    ) -> Result:
        """As :meth:`Database.stream_sql`, in this session; ``exact`` hands the rows over
        in the lossless Arrow form :meth:`Result.exact_arrow` gives."""
        self._check_open()
        return self.database._sql(
            text, params, progress, cancel, self._session, "session.stream_sql", sink, exact
        )

    def explain(self, text: str, params: Any = None) -> Explain:
        """As :meth:`Database.explain`, under this session's settings."""
        self._check_open()
        return self.database._explain(text, params, self._session, "session.explain")

    def _check_open(self) -> None:
        from tesseradb.errors import DatabaseClosedError

        if self._session.closed:
            raise DatabaseClosedError("this SQL session is closed")

    def close(self) -> None:
        """End the session (an open transaction is rolled back)."""
        if not self.database._closed:
            self.database._engine.close_session(self._session)
        self._session.closed = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
            self.catalog = Catalog(
                self.path, read_only=read_only, create=create, sole_writer=not read_only
            )
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        self._executors = ExecutorSlot()
        self._registry = registry = Registry(self.path, self.catalog, read_only, self._executors)
        self._engine = SQLEngine(
            registry,
            self.path / TABLE_STORE_FILE,
            read_only,
            writer_elsewhere=WriterLock(self.path).held_elsewhere,
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

    # --- SQL ------------------------------------------------------------------------
    def sql(
        self,
        text: str,
        params: Any = None,
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> Result:
        """Run SQL (DuckDB's dialect) over every relation and plain table of the database.

        ``params`` binds ``?`` placeholders (a sequence) or ``$name`` ones (a
        mapping); values are never pasted into the statement's text.
        ``progress`` (True: a bar on stderr; or a callable taking a
        :class:`~tesseradb.progress.ProgressEvent`) reports DuckDB's progress
        in percent; ``cancel`` (a :class:`~tesseradb.progress.Cancel`) stops
        the statement, which then keeps nothing.

        Calls share one session, as the statements of one DuckDB connection do:
        ``SET``, ``PREPARE``, temporary tables, ``USE`` and a transaction begun
        with ``BEGIN`` last until changed, ended or the database is closed
        (:meth:`session` gives a session of its own).
        """
        return self._sql(text, params, progress, cancel, None, "db.sql")

    def stream_sql(
        self,
        text: str,
        sink: Callable[[pa.RecordBatchReader], Any],
        params: Any = None,
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> Result:
        """Run a query and hand its rows to ``sink`` as an Arrow reader, batch by batch, while
        it runs (rows are never gathered in memory: what an export of a big result uses).
        ``progress`` and ``cancel`` are as for :meth:`sql`. Returns a Result without rows
        that says how the statement was answered (``scan_stats``, ``shortcut``)."""
        return self._sql(text, params, progress, cancel, None, "db.stream_sql", sink)

    def session(self, restricted: bool = False) -> Session:
        """A SQL session of its own, as a DuckDB connection's ``cursor()`` is: its settings,
        prepared statements, temporary tables and transactions are apart from those of
        :meth:`sql` and of every other session. Close it (or use it as a context manager)
        when done; an open transaction is then rolled back.

        ``restricted``: its queries run in a DuckDB instance where no file, extension or
        setting can be reached (what a served user without the admin right gets), over
        the newest snapshot of the plain tables (:mod:`tesseradb.sql.instance`).
        """
        require_bool(restricted, "restricted", "db.session")
        self._check_open()
        return Session(self, self._engine.new_session("session", restricted))

    def _sql(
        self,
        text: str,
        params: Any,
        progress: ProgressLike,
        cancel: Cancel | None,
        session: SQLSession | None,
        where: str,
        sink: Callable[[pa.RecordBatchReader], Any] | None = None,
        exact: bool = False,
    ) -> Result:
        require_str(text, "the SQL text", where)
        require_params(params, where)
        self._check_open()
        if progress is None and cancel is None:
            return self._engine.execute(text, params, sink=sink, session=session, exact=exact)
        from tesseradb.progress import tracker

        with tracker("SQL statement", 100, "percent", progress, cancel, where) as watch:
            return self._engine.execute(
                text, params, sink=sink, watch=watch, session=session, exact=exact
            )

    def interrupt(self) -> None:
        """Cancel the SQL statements running now; each raises InterruptedStatementError and
        keeps nothing (call it from another thread, or a signal handler)."""
        self._engine.interrupt()

    def explain(self, text: str, params: Any = None) -> Explain:
        """What ``text`` would read from each relation: the predicate pushed down and the columns."""
        return self._explain(text, params, None, "db.explain")

    def _explain(self, text: str, params: Any, session: SQLSession | None, where: str) -> Explain:
        require_str(text, "the SQL text", where)
        require_params(params, where)
        self._check_open()
        return self._engine.explain(text, params, session)

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
        total = sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())
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

    # --- attached files -----------------------------------------------------------
    def attach(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        threads: int | None = None,
        batch_bytes: int | None = None,
        stale_index: str = "rebuild",
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> Attachment:
        """Attach HDF5 (or NetCDF4) files in place: every table in them becomes ``<name>.<table>``.

        ``path`` is a file or a glob of files with the same layout (one table
        over all of them, with a ``_file`` column). Nothing is copied and the
        files are never written. ``threads`` and ``batch_bytes`` (about 32 MB)
        shape scans; ``stale_index`` is ``rebuild`` or ``bypass``: what to do
        with an index whose file changed since it was built. ``progress`` counts
        the files inspected; ``cancel`` stops the attach, which keeps nothing.
        """
        self._check_open()
        return self._registry.kind("attached").attach(  # type: ignore[attr-defined, no-any-return]
            path, name, threads, batch_bytes, stale_index, progress, cancel
        )

    def attached(self, name: str) -> Attachment:
        """The attachment called ``name``: its tables, indexes and slab reads."""
        require_str(name, "name", "db.attached")
        attachment: Attachment = self._registry.get(name, "attached")
        return attachment

    def detach(self, name: str) -> None:
        """Forget an attachment and delete its sidecar indexes (the files are untouched)."""
        require_str(name, "name", "db.detach")
        self._check_open()
        self._registry.check_writable(f"detach {name!r}")
        self._registry.drop(self.catalog.require(name, "attached").name)

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
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> None:
        """Build bitmap indexes on columns of an attached table (``db.create_index("ptf.candidate", ["mag"])``).

        Bins come from explicit ``edges``, ``count`` equal-weight bins,
        ``precision`` significant digits, or ``exact`` values; by default
        exact for up to 100,000 distinct values, else 1,000 equal-weight bins.
        ``encoding`` is ``equality`` or ``range``. Indexes are sidecar files
        under the database directory; the attached files are never changed.
        ``progress`` counts the (column, file) indexes built; ``cancel`` stops the
        build before any index is saved, so the old indexes stay.
        """
        self._check_open()
        self._registry.kind("attached").create_index(  # type: ignore[attr-defined]
            table,
            columns,
            kind,
            edges,
            count,
            precision,
            exact,
            encoding,
            threads,
            progress,
            cancel,
        )

    # --- associative tables (D4M) ----------------------------------------------------------
    def create_assoc_table(
        self, name: str, transpose: bool = True, degrees: bool = True, text: bool = False
    ) -> AssocTable:
        """Create a persistent associative table in D4M 2.0's schema.

        It keeps its triples in row order (``Tedge``) and, with ``transpose``,
        in column order (``TedgeT``); with ``degrees`` the column degrees
        summed on insert (``TedgeDeg``); with ``text`` raw texts by row key
        (``TedgeTxt``). See docs/assoc.md.
        """
        require_str(name, "name", "db.create_assoc_table")
        self._check_open()
        self._registry.check_writable("create an associative table")
        spec = self._registry.kind("assoc").new_spec(name, transpose, degrees, text)  # type: ignore[attr-defined]
        table: AssocTable = self._registry.create("assoc", name, spec)
        return table

    def assoc_table(self, name: str) -> AssocTable:
        """The associative table called ``name``: put, T[rows, cols], T.T, T.deg, T.txt."""
        require_str(name, "name", "db.assoc_table")
        table: AssocTable = self._registry.get(name, "assoc")
        return table

    def assoc_tables(self) -> list[str]:
        """Names of the associative tables."""
        return [o.name for o in self.catalog.objects("assoc")]

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
        require_str(name, "name", "db.create_stream")
        self._check_open()
        self._registry.check_writable("create a stream")
        spec = self._registry.kind("stream").new_spec(name, descriptor, options)
        stream: Stream = self._registry.create("stream", name, spec)
        return stream

    def stream(self, name: str) -> Stream:
        """The record stream called ``name``: ingest, flush, range queries."""
        require_str(name, "name", "db.stream")
        stream: Stream = self._registry.get(name, "stream")
        return stream

    def streams(self) -> list[str]:
        """Names of the record streams."""
        return [o.name for o in self.catalog.objects("stream")]

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
        require_str(name, "name", "db.create_array")
        self._check_open()
        self._registry.check_writable("create an array")
        spec = self._registry.kind("array").new_spec(  # type: ignore[attr-defined]
            name, dims, attrs, origin, codec, level, metadata
        )
        array: Array = self._registry.create("array", name, spec)
        return array

    def array(self, name: str, version: str | None = None, as_of: datetime | None = None) -> Array:
        """The array called ``name``; at a past ``version`` (snapshot id) or ``as_of`` a time: read-only."""
        require_str(name, "name", "db.array")
        head: Array = self._registry.get(name, "array")
        if version is None and as_of is None:
            return head
        return head.at(version, as_of)

    def arrays(self) -> list[str]:
        """Names of the arrays."""
        return [o.name for o in self.catalog.objects("array")]

    def overlay(self, arrays: Sequence[str | Array], into: str) -> Array:
        """One new array ``into`` holding the written cells of ``arrays`` laid over each
        other: later arrays win, a NULL does not overwrite a value.

        The inputs must have the same dimensions (by name) and attributes;
        the result spans their union in world coordinates. (Forks of one
        array are brought together by :meth:`Array.merge` instead.)
        """
        require_str(into, "into", "db.overlay")
        from tesseradb.arrays import overlay_arrays

        self._check_open()
        self._registry.check_writable("overlay arrays")
        inputs = [a if not isinstance(a, str) else self.array(a) for a in arrays]
        return overlay_arrays(inputs, into)

    # --- documents -------------------------------------------------------------------
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
        require_str(name, "name", "db.create_collection")
        self._check_open()
        self._registry.check_writable("create a collection")
        spec = self._registry.kind("collection").new_spec(name, backend, mapping)
        collection: Collection = self._registry.create("collection", name, spec)
        return collection

    def collection(self, name: str) -> Collection:
        """The JSON collection called ``name``: insert, load, find, Argo/SQL."""
        require_str(name, "name", "db.collection")
        self._check_open()
        return self._registry.kind("collection").collection(name)  # type: ignore[attr-defined, no-any-return]

    def collections(self) -> list[str]:
        """Names of the JSON collections."""
        return [o.name for o in self.catalog.objects("collection")]

    def argo(self, text: str, params: Any = None) -> list[dict[str, Any]]:
        """Run one Argo/SQL statement; its result objects (in objid order unless ORDER BY).

        ``INSERT INTO c OBJECT {...}`` creates ``c`` on the default backend if
        it does not exist, as Argo does. ``params`` binds ``?`` (a sequence)
        or ``:name`` (a mapping) placeholders. Each statement is one
        transaction on the collection's backend.
        """
        self._check_open()
        return self._registry.kind("collection").argo(text, params)  # type: ignore[attr-defined, no-any-return]

    # --- getting data in and out ------------------------------------------------------
    def load(
        self,
        source: str | os.PathLike[str],
        into: str | None = None,
        kind: str | None = None,
        *,
        format: str | None = None,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
        **options: Any,
    ) -> Loaded:
        """Load a file, a Zarr store or a glob of files into ``into`` (by default named after
        the files), made when it does not exist and appended to otherwise; all or nothing.

        ``kind`` is ``array`` (FITS, TIFF, NetCDF/HDF5, Zarr, npy/npz), ``stream``
        (CSV, Parquet, Arrow IPC, packed binary), ``collection`` (JSON, JSON
        lines) or ``table`` (CSV, Parquet, JSON, Arrow IPC through DuckDB's
        readers); by default the target's kind, or the one the format suggests.
        ``format`` overrides the format the file names suggest. Arrays take
        ``along`` (the dimension a glob's files stack on, new, or the files'
        first one to concatenate), ``dims``, ``chunks``, ``variables``, ``hdu``,
        ``attr``, ``threads``; streams ``descriptor``, ``index``, ``header``.
        ``progress`` and ``cancel`` as in :mod:`tesseradb.progress`.
        docs/load-export.md shows every format.
        """
        from tesseradb.transfer import load

        self._check_open()
        self._registry.check_writable("load data")
        if into is not None:
            require_str(into, "into", "db.load")
        return load(
            self,
            self._registry,
            source,
            into,
            kind,
            format=format,
            progress=progress,
            cancel=cancel,
            **options,
        )

    def export(
        self,
        source: str,
        target: str | os.PathLike[str],
        *,
        format: str | None = None,
        params: Any = None,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
        **options: Any,
    ) -> Exported:
        """Write an object (by name) or a query's rows (SQL text) to the file ``target``.

        Arrays go to Zarr v3 (a directory ending ``.zarr``, with world
        coordinates as CF coordinates), NetCDF (``.nc``), FITS (``.fits``) or
        ``.npy``; collections to JSON lines; tables, streams, attached tables
        and any query to Parquet, CSV, JSON lines or Arrow IPC (``.arrow``).
        ``format`` overrides the format the target's name suggests. An
        existing target is refused unless ``overwrite=True``; a failed or
        cancelled export leaves no target behind.
        """
        from tesseradb.transfer import export

        require_str(source, "source", "db.export")
        require_params(params, "db.export")
        self._check_open()
        return export(
            self,
            self._registry,
            source,
            target,
            format=format,
            params=params,
            progress=progress,
            cancel=cancel,
            **options,
        )

    # --- SS-DB --------------------------------------------------------------------------
    def ssdb(
        self, run: str, config: str | None = None, params: str = "medium", seed: int = 0
    ) -> Any:
        """The SS-DB run called ``run`` (a :class:`tesseradb.ssdb.Run`): its images,
        observations, groups and queries.

        With ``config`` (``test``, ``tiny``, ``very-small``, ``small``, ...) a new,
        empty run is made with the ``params`` set (``easy``, ``medium``, ``hard``);
        ``run.load()`` then ingests, cooks and groups it. docs/ssdb.md explains it.
        """
        require_str(run, "run", "db.ssdb")
        from tesseradb.ssdb import Run

        self._check_open()
        if config is None:
            return Run.open(self, run)
        validate_name(run, "SS-DB run")
        return Run.create(self, run, config, params, seed)
