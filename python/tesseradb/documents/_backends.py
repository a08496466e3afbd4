"""The relational backends collections live on: SQLite, DuckDB, PostgreSQL, MySQL/MariaDB.

A :class:`Backend` hides what differs between them (driver, parameter
style, column types, bulk insert, the one regular-expression test the
mappings need) behind one small interface; the mappings write portable SQL
with ``?`` placeholders. Every statement of a collection runs inside
:meth:`Backend.transaction`, which serialises use of the one connection.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import sqlite3
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from tesseradb._snapshots import FileSnapshots, Publisher, identity, wal_of
from tesseradb.documents._keys import DEFAULT_LIMITS, DocumentLimits
from tesseradb.errors import DocumentBackendError, ReadOnlyError

__all__ = [
    "DUCKDB_FILE",
    "DUCKDB_SNAPSHOTS",
    "EMBEDDED_BACKENDS",
    "SQLITE_FILE",
    "Backend",
    "ColumnTypes",
    "open_backend",
]

EMBEDDED_BACKENDS = ("sqlite", "duckdb")
# the embedded backends' files, in the database's documents/ folder
SQLITE_FILE = "documents.sqlite"
DUCKDB_FILE = "documents.duckdb"
# what readers in other processes open instead of DUCKDB_FILE (tesseradb._snapshots)
DUCKDB_SNAPSHOTS = "documents.snapshots"


@dataclass(frozen=True)
class ColumnTypes:
    """The SQL types of the mapping columns on one backend."""

    objid: str
    key: str  # keystr: compared by code point, indexable
    text: str  # valstr
    double: str
    bigint: str
    boolean: str
    small: str

    def of(self, column: str) -> str:
        """The type of one of the mapping's value columns."""
        return {
            "valstr": self.text,
            "valnum": self.double,
            "valint": self.bigint,
            "valbool": self.boolean,
            "valkind": self.small,
        }[column]


class Backend(ABC):
    """One connection to a relational backend holding collections."""

    kind: str
    types: ColumnTypes
    # DDL inside a transaction is rolled back with it (MariaDB commits at DDL), so
    # a bulk load may drop and rebuild indexes without giving up atomicity.
    transactional_ddl = True
    # Tables with PRIMARY KEY (objid, keystr): one attribute of an object is one key
    # lookup and no separate objid index is kept (a flattened key is unique in its
    # object). SQLite (WITHOUT ROWID) and InnoDB also store rows in that order, so
    # an object's rows sit together. DuckDB's keys are costly ART indexes: not there.
    keyed_by_object = True
    # Reads rows from an index alone when it holds every column asked for (SQLite,
    # PostgreSQL): argo3's key indexes then carry whole rows. DuckDB scans columns
    # (its ART indexes serve point lookups only); MariaDB's string indexes are
    # prefixes, which cover nothing, and its keys have no room for more columns.
    covering_indexes = True
    # ``keystr = ?`` is a seek in an index that leads with keystr. DuckDB's ART
    # indexes are not used for a prefix of their columns: there it is a scan.
    seeks_by_key = True
    # The text pack_rows makes of a double reads back as the same double. Where it
    # does not (SQLite), rows holding doubles that are not integers are fetched
    # as plain rows beside the packed ones.
    packs_doubles = True
    # Rows whose values one tuple of insert_rows may hold, one after another.
    rows_per_insert = 1
    # What one document may hold here (checked at the door of every ingest path).
    limits: DocumentLimits = DEFAULT_LIMITS
    table_options = ""
    # reads snapshots a writer in another process publishes, not the live data
    reads_snapshots = False

    def __init__(self, read_only: bool = False) -> None:
        self.read_only = read_only
        self._lock = threading.RLock()
        self._depth = 0
        self._writing = False  # the open transaction may write

    # --- what subclasses provide ---------------------------------------------------
    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Execute one statement; its rows (empty for statements without)."""

    def _begin(self) -> None:
        self._run("BEGIN", ())

    def _commit(self) -> None:
        self._run("COMMIT", ())

    def _rollback(self) -> None:
        self._run("ROLLBACK", ())

    @abstractmethod
    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        """Insert many rows at once (inside the current transaction).

        Each tuple holds one row, or up to :attr:`rows_per_insert` rows' values
        one after another.
        """

    @abstractmethod
    def element_suffix(self, start: int) -> str:
        """SQL true where ``keystr`` from (1-based) position ``start`` on is ``<digits>]``."""

    @abstractmethod
    def table_exists(self, table: str) -> bool: ...

    @abstractmethod
    def close(self) -> None: ...

    def index_column(self, column: str) -> str:
        """How ``column`` appears in CREATE INDEX (MariaDB needs a prefix length on TEXT)."""
        return column

    def drop_index_sql(self, index: str, table: str) -> str:
        return f"DROP INDEX {index}"

    def describe(self) -> str:
        return self.kind

    def integrity_problems(self) -> list[str]:
        """What the backend's own integrity check reports ([] when whole, or when it has
        none: DuckDB verifies its block checksums as it reads, servers their own pages)."""
        return []

    def typed_null(self, column: str) -> str:
        """A NULL standing for ``column`` in a branch of a UNION that lacks it."""
        return "NULL"

    def pack_rows(self) -> str | None:
        """An aggregate packing rows into one JSON text for ``_core.rebuild_packed_documents``.

        It reads the columns of ``ROW_COLUMNS`` by name. Each row becomes
        ``[objid, keystr, ord, valstr, valnum, valint, valbool, valkind]``
        with ``valnum`` as the double's exact decimal text
        and ``valbool`` as 0 or 1. Packing in the backend makes a fetch of many
        rows one string per table instead of a tuple of Python objects per
        row, which costs more than the backend's whole lookup. None: the
        backend returns plain rows (MariaDB, whose JSON aggregates are capped
        by ``group_concat_max_len``).
        """
        return None

    def after_bulk_load(self, tables: Sequence[str]) -> None:  # noqa: B027 - nothing by default
        """Called once a bulk load into ``tables`` (which rebuilt their indexes) has committed."""

    @contextlib.contextmanager
    def twin_reader(self) -> Iterator[Callable[[str, Sequence[Any]], list[tuple[Any, ...]]] | None]:
        """A second connection reading what the open read-only transaction reads, or None.

        It lets a big fetch run as two halves at once, on both cores. It must
        only be used from another thread while this transaction is open, and
        only inside the block. None where the backend has no such thing.
        """
        yield None

    # --- shared --------------------------------------------------------------------
    def _before_statement(self) -> None:  # noqa: B027 - nothing by default
        """(lock held, no transaction open) Called before each statement or transaction."""

    def wait_for_newer(self, timeout: float) -> bool:
        """(a reader of snapshots) Wait until a snapshot newer than the one read is
        published; whether one was (its next statement reads it)."""
        return False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            if not self._depth:
                self._before_statement()
            try:
                return self._run(sql, params)
            except Exception as err:
                if isinstance(err, DocumentBackendError):
                    raise
                raise self._failed(err) from err

    def _failed(self, err: Exception) -> DocumentBackendError:
        """The error to raise for a statement the backend refused."""
        return DocumentBackendError(f"{self.describe()}: {err}")

    @contextlib.contextmanager
    def transaction(self, write: bool = False) -> Iterator[Backend]:
        """One transaction (nested calls join the outer one); rolled back on any exception."""
        if write and self.read_only:
            raise ReadOnlyError(f"{self.describe()}: the database is open read-only")
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self
                finally:
                    self._depth -= 1
                return
            self._before_statement()
            self._begin()
            self._depth = 1
            self._writing = write
            try:
                yield self
            except BaseException:
                self._depth = 0
                with contextlib.suppress(Exception):
                    self._rollback()
                raise
            self._depth = 0
            try:
                self._commit()
            except Exception as err:
                with contextlib.suppress(Exception):
                    self._rollback()
                raise DocumentBackendError(f"{self.describe()}: commit failed: {err}") from err


class SQLiteBackend(Backend):
    kind = "sqlite"
    table_options = " WITHOUT ROWID"
    types = ColumnTypes("INTEGER", "TEXT", "TEXT", "REAL", "INTEGER", "INTEGER", "INTEGER")

    def __init__(self, path: Path, read_only: bool = False) -> None:
        super().__init__(read_only)
        self._path = path
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = self._connect()
            if not read_only:
                self._con.execute("PRAGMA journal_mode=WAL")
            self._checkpointer = None if read_only else _Checkpointer(path)
            if self._checkpointer is not None:
                self._con.execute("PRAGMA wal_autocheckpoint=0")
            self._con.execute("PRAGMA synchronous=NORMAL")
            # a helper thread for the sorter, which builds indexes after bulk loads (one
            # 17M-row index of a 1M-object NoBench load: 25 s -> 21 s)
            self._con.execute("PRAGMA threads=2")
        except sqlite3.Error as err:  # (a damaged or foreign file)
            raise DocumentBackendError(
                f"the document backend {path} cannot be opened: {err} (the collections on "
                "it live there; restore it from a backup, or drop them)"
            ) from None
        self._twin: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        """A connection set up for reading as every connection of the backend reads."""
        if self.read_only:
            con = sqlite3.connect(
                f"file:{self._path}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        else:
            con = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        # LIKE is case-sensitive in Argo/SQL, as on the other backends.
        con.execute("PRAGMA case_sensitive_like=ON")
        con.execute("PRAGMA cache_size=-262144")  # 256 MiB
        # Pages read through a memory map rather than a read() call each (SQLite
        # caps the map at its compile-time limit, 2 GiB on Debian): fetching 1,000
        # NoBench objects scattered over a 3.4 GB file, 30 -> 25 ms.
        con.execute(f"PRAGMA mmap_size={1 << 40}")
        return con

    @contextlib.contextmanager
    def twin_reader(self) -> Iterator[Callable[[str, Sequence[Any]], list[tuple[Any, ...]]] | None]:
        # The twin sees what this connection sees only when no commit can land
        # between their two snapshots: this connection's own writes wait for its
        # lock, held by the caller's transaction, and the database's writer lock
        # keeps every other process from writing. A read-only database has a writer
        # elsewhere, and a write transaction has changes the twin cannot see.
        if self.read_only or self._writing or not self._depth:
            yield None
            return
        if self._twin is None:
            self._twin = self._connect()
        twin = self._twin

        def execute(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            try:
                return twin.execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as err:
                raise self._failed(err) from err

        twin.execute("BEGIN")
        try:
            yield execute
        finally:
            twin.execute("COMMIT")

    def _run(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._con.execute(sql, tuple(params)).fetchall()

    def _commit(self) -> None:
        super()._commit()
        if self._checkpointer is not None:
            self._checkpointer.committed()

    def after_bulk_load(self, tables: Sequence[str]) -> None:
        # A bulk load wrote the whole database into the log, and every later read
        # would look its pages up there until a checkpoint has copied them back:
        # the load does that itself, before it returns.
        with self._lock:
            self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # Rows per INSERT statement of a bulk insert. The sqlite3 module's own work per
    # executed statement (binding checks, step, reset) cost more than SQLite's
    # insert itself: 1.25 us a row one by one, 0.57 us in statements of 100 rows,
    # against 0.19 us for SQLite copying the rows itself. The flattening kernel
    # hands over tuples of 100 rows' values, so they need no regrouping.
    rows_per_insert = 100

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        width = len(columns)
        row_marks = f"({', '.join('?' * width)})"
        insert = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "

        def run_inserts(rows_each: int, tuples: Sequence[tuple[Any, ...]]) -> None:
            if tuples:
                self._con.executemany(insert + ", ".join([row_marks] * rows_each), tuples)

        step = self.rows_per_insert
        with self._lock:
            # runs of tuples holding the same number of rows: one statement each
            for length, run in itertools.groupby(rows, len):
                tuples = list(run)
                if length == width:  # single rows (the Python flattening's, an UPDATE's)
                    whole = len(tuples) - len(tuples) % step
                    run_inserts(
                        step,
                        [
                            tuple(itertools.chain.from_iterable(tuples[i : i + step]))
                            for i in range(0, whole, step)
                        ],
                    )
                    tuples = tuples[whole:]
                run_inserts(length // width, tuples)

    # SQLite's JSON renders doubles with 15 digits, and even its printf('%!.17g')
    # is not exact near the ends of the range (1.7976931348623157e308 comes out
    # as ...55e308): its doubles arrive as plain rows.
    packs_doubles = False

    def pack_rows(self) -> str | None:
        # valnum left out: packs_doubles is False (integers travel as valint)
        return (
            "json_group_array(json_array(objid, keystr, ord, valstr, NULL, valint, valbool, "
            "valkind))"
        )

    def integrity_problems(self) -> list[str]:
        with self.transaction():
            rows = self.execute("PRAGMA quick_check")
        return [str(r[0]) for r in rows if r[0] != "ok"]

    def element_suffix(self, start: int) -> str:
        start_param = int(start)  # our own integer, never query text
        return (
            f"substr(keystr, {start_param}) GLOB '[0-9]*]' "
            f"AND rtrim(substr(keystr, {start_param}), ']') NOT GLOB '*[^0-9]*'"
        )

    def table_exists(self, table: str) -> bool:
        rows = self.execute("SELECT 1 FROM sqlite_master WHERE name = ?", [table.strip('"')])
        return bool(rows)

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        if self._twin is not None:
            self._twin.close()
        self._con.close()  # the last connection to close checkpoints what is left


class _Checkpointer:
    """Copies the SQLite write-ahead log back into the database file on a thread of its own.

    SQLite's automatic checkpoint runs inside the COMMIT that crosses its
    threshold: inserting 100 NoBench objects into 100,000 dirtied ~3,400
    index pages, and the checkpoint (copying them into the database file and
    fsyncing it) was 190 of that insert's 270 ms. Here the committing
    connection only appends to the log, which keeps the transaction durable
    (a committed transaction in the log survives a killed process and is
    replayed on open); a PASSIVE checkpoint, which never blocks the writer or
    readers, runs on this thread's own connection once the log has grown
    past ``LOG_BYTES``, as PostgreSQL's checkpointer does beside its WAL.
    """

    LOG_BYTES = 64 << 20

    def __init__(self, path: Path) -> None:
        self._path = path
        self._log = Path(f"{path}-wal")
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name="tessera-sqlite-checkpoint", daemon=True
        )
        self._thread.start()

    def committed(self) -> None:
        """Called after each commit: wake the thread if the log has grown past its bound."""
        with contextlib.suppress(OSError):
            if self._log.stat().st_size > self.LOG_BYTES:
                self._wake.set()

    def _run(self) -> None:
        con = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                # a failed checkpoint is retried at the next wake; the log keeps the data
                with contextlib.suppress(sqlite3.Error):
                    con.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            con.close()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()


class DuckDBBackend(Backend):
    """A DuckDB file, ``documents.duckdb``, held by the writing process.

    DuckDB lets no other process open a file one process writes, and a process reading
    it keeps the writer out; so the writer publishes snapshots of it (a while after each
    change, as the table store does) and a read-only database reads the newest snapshot,
    moving to a newer one at its next statement. A reader thus never makes the writer
    fail or wait, and sees the collections as they were after some commit, at most a
    moment behind a busy writer. When the newest snapshot is behind the file and no
    writer will publish (one was killed), a reader copies the file for itself.
    """

    kind = "duckdb"
    keyed_by_object = False
    covering_indexes = False
    seeks_by_key = False
    types = ColumnTypes("BIGINT", "VARCHAR", "VARCHAR", "DOUBLE", "BIGINT", "BOOLEAN", "SMALLINT")
    # statements that never change the file (anything else marks it changed)
    _READS = frozenset({"SELECT", "WITH", "BEGIN", "COMMIT", "ROLLBACK", "EXPLAIN", "DESCRIBE"})
    # how long a reader waits for the writer's first snapshot before copying the file
    FIRST_SNAPSHOT_WAIT = 5.0

    def __init__(
        self,
        path: Path,
        read_only: bool = False,
        writer_elsewhere: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(read_only)
        self._path = path
        self._snapshots = FileSnapshots(path, path.parent / DUCKDB_SNAPSHOTS, "documents")
        self._writer_elsewhere = writer_elsewhere
        self._publisher: Publisher | None = None
        self._private: Path | None = None  # a reader's own directory, for its copies
        self._copies = 0
        self._source: Any = None  # (a reader) what the choice of its file depended on
        self.reads_snapshots = read_only
        if read_only:
            self._reading = self._reader_file()  # the file the connection reads
            self._con = self._connect(self._reading, read_only=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._con = self._connect(path, read_only=False)
        self._publisher = Publisher(self._snapshots, lambda: self._lock, "tessera-documents")
        if not self._snapshots.current():  # (a writer killed before it published)
            self._publisher.changed()

    def _connect(self, file: Path, read_only: bool) -> Any:
        import duckdb

        try:
            return duckdb.connect(str(file), read_only=read_only)
        except duckdb.Error as err:  # (a damaged or foreign file)
            raise DocumentBackendError(
                f"the document backend {self._path} cannot be opened: {err} (the collections "
                "on it live there; restore it from a backup, or drop them)"
            ) from None

    def describe(self) -> str:
        return f"duckdb ({self._path})"

    # --- a reader's file -------------------------------------------------------------------
    def _reader_file(self) -> Path:
        """The newest snapshot, or a copy of the file of this process's own when that is
        behind the file (and no writer is about to publish a newer one)."""
        if not self._path.is_file():
            raise DocumentBackendError(f"the document backend {self._path} is missing")
        deadline = time.monotonic() + self.FIRST_SNAPSHOT_WAIT
        while True:
            newest = self._snapshots.newest()
            if newest is not None and (
                self._snapshots.current() or self._writer_elsewhere()
            ):  # (the writer publishes what it has written in a moment)
                chosen = newest
            else:
                self._copies += 1
                chosen = self._snapshots.copy_into(self._private_directory(), self._copies)
            if chosen is not None:
                self._source = self._source_key(chosen)
                return chosen
            # the file changed while it was copied: a writer is at work and will publish
            if time.monotonic() > deadline:
                raise DocumentBackendError(
                    f"the document backend {self._path} is being written by another "
                    "process that has not published a snapshot of it yet; try again"
                )
            time.sleep(0.02)

    def _source_key(self, chosen: Path) -> Any:
        newest = self._snapshots.newest()
        if chosen.parent == self._snapshots.directory:
            return newest
        return newest, identity(self._path), identity(wal_of(self._path))

    def wait_for_newer(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._source is not None and self._source_key(self._reading) != self._source:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def _private_directory(self) -> Path:
        if self._private is None:
            self._private = Path(tempfile.mkdtemp(prefix="tessera-documents-"))
        return self._private

    def _before_statement(self) -> None:
        if not self.read_only or self._source is None:
            return
        if self._source_key(self._reading) == self._source:
            return
        for _ in range(100):  # (the writer may drop a snapshot between listing and opening)
            file = self._reader_file()
            try:
                con = self._connect(file, read_only=True)
            except DocumentBackendError:
                if file.exists():
                    raise
                continue
            self._con.close()
            self._con, self._reading = con, file
            return
        raise DocumentBackendError(f"the snapshots of {self._path} keep vanishing")

    # --- the writer's changes ---------------------------------------------------------------
    def _changed(self) -> None:
        if self._publisher is not None:
            self._publisher.changed()

    def _run(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        if sql.lstrip().split(None, 1)[0].upper() not in self._READS:
            self._changed()  # (published once the statement's transaction lets go)
        return self._con.execute(sql, list(params)).fetchall()

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        import pyarrow as pa

        if not rows:
            return
        arrays = list(zip(*rows, strict=True))
        batch = pa.table({c: pa.array(a) for c, a in zip(columns, arrays, strict=True)})
        self.insert_arrow(table, batch)

    def insert_arrow(self, table: str, batch: Any) -> None:
        """Insert an Arrow table whose columns are named as the target's."""
        with self._lock:
            self._changed()
            self._con.register("argo_batch", batch)
            try:
                names = ", ".join(batch.column_names)
                self._con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM argo_batch")
            finally:
                self._con.unregister("argo_batch")

    def pack_rows(self) -> str | None:
        # DuckDB casts a DOUBLE to its shortest exact decimal
        return (
            "CAST(json_group_array(json_array(objid, keystr, ord, valstr, "
            "CAST(valnum AS VARCHAR), valint, CAST(valbool AS INTEGER), valkind)) AS VARCHAR)"
        )

    def element_suffix(self, start: int) -> str:
        start_param = int(start)  # our own integer, never query text
        return f"regexp_full_match(substr(keystr, {start_param}), '[0-9]+\\]')"

    def table_exists(self, table: str) -> bool:
        rows = self.execute(
            "SELECT 1 FROM duckdb_tables() WHERE table_name = ? AND database_name = current_database()",
            [table.strip('"')],
        )
        return bool(rows)

    def close(self) -> None:
        if self._publisher is not None:
            self._publisher.stop()
        self._con.close()  # (DuckDB checkpoints the file as it lets go)
        if not self.read_only and self._path.exists() and not self._snapshots.current():
            with contextlib.suppress(OSError):
                self._snapshots.publish()
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None


class _ServerBackend(Backend):
    """PostgreSQL and MariaDB: DB-API drivers with ``%s`` placeholders."""

    def __init__(self, url: str, read_only: bool = False) -> None:
        super().__init__(read_only)
        self.url = url
        self._con: Any = None

    def describe(self) -> str:
        parsed = urlparse(self.url)
        return f"{self.kind} at {parsed.hostname}:{parsed.port}/{parsed.path.lstrip('/')}"

    def _run(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        # Every literal is a parameter, so '%' only appears where we put it.
        text = sql.replace("%", "%%").replace("?", "%s")
        with self._con.cursor() as cur:
            cur.execute(text, tuple(params))
            if cur.description is None:
                return []
            return list(cur.fetchall())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._con.close()


class PostgresBackend(_ServerBackend):
    kind = "postgresql"
    # A string sits in a btree index beside its key (keystr, valstr, ...), and a
    # btree entry holds at most 2,704 bytes: a longer pair would fail at insert, or
    # pass only when PostgreSQL can compress it, so the door refuses it plainly.
    # Its text holds no U+0000 either.
    limits = DocumentLimits(key_and_string_bytes=2_600, nul=False)
    types = ColumnTypes(
        "BIGINT",
        'TEXT COLLATE "C"',
        'TEXT COLLATE "C"',
        "DOUBLE PRECISION",
        "BIGINT",
        "BOOLEAN",
        "SMALLINT",
    )

    def __init__(self, url: str, read_only: bool = False) -> None:
        import psycopg

        super().__init__(url, read_only)
        try:
            self._con = psycopg.connect(url, autocommit=True)
        except psycopg.Error as err:
            raise DocumentBackendError(f"cannot connect to {self.describe()}: {err}") from err

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        with (
            self._lock,
            self._con.cursor() as cur,
            cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)

    def after_bulk_load(self, tables: Sequence[str]) -> None:
        # Until autovacuum gets to them the new tables have no statistics, and the
        # planner guessed half of a table for any objid IN (...) and scanned it
        # all: fetching 100 objects of 20,000 took 30 ms instead of under 1.
        for table in tables:
            self.execute(f"ANALYZE {table}")

    def typed_null(self, column: str) -> str:
        # PostgreSQL types a UNION column pair by pair: a pair of NULLs would become
        # text and then clash with the boolean or number branch.
        return "CAST(NULL AS " + self.types.of(column).removesuffix(' COLLATE "C"') + ")"

    def pack_rows(self) -> str | None:
        # float8 text is the shortest exact decimal (extra_float_digits >= 1, the
        # default since PostgreSQL 12); ::text so that psycopg leaves the JSON as text
        return (
            "CAST(json_agg(json_build_array(objid, keystr, ord, valstr, CAST(valnum AS TEXT), "
            "valint, CAST(valbool AS INTEGER), valkind)) AS TEXT)"
        )

    def element_suffix(self, start: int) -> str:
        start_param = int(start)  # our own integer, never query text
        return f"substr(keystr, {start_param}) ~ '^[0-9]+\\]$'"

    def table_exists(self, table: str) -> bool:
        return bool(self.execute("SELECT to_regclass(?) IS NOT NULL", [table])[0][0])


class MariaDBBackend(_ServerBackend):
    kind = "mariadb"
    # valstr is TEXT (65,535 bytes); keystr VARCHAR(512) holds the default key limit
    limits = DocumentLimits(string_bytes=65_535)
    transactional_ddl = False
    covering_indexes = False
    _COLLATE = "CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
    types = ColumnTypes(
        "BIGINT",
        f"VARCHAR(512) {_COLLATE}",  # with valstr(255): under InnoDB's 3072-byte index key
        f"TEXT {_COLLATE}",
        "DOUBLE",
        "BIGINT",
        "BOOLEAN",
        "SMALLINT",
    )

    def __init__(self, url: str, read_only: bool = False) -> None:
        import pymysql

        super().__init__(url, read_only)
        parsed = urlparse(url)
        try:
            self._con = pymysql.connect(
                host=parsed.hostname or "localhost",
                port=parsed.port or 3306,
                user=unquote(parsed.username or ""),
                password=unquote(parsed.password or ""),
                database=parsed.path.lstrip("/") or None,
                charset="utf8mb4",
                autocommit=True,
            )
        except pymysql.Error as err:
            raise DocumentBackendError(f"cannot connect to {self.describe()}: {err}") from err
        # ANSI_QUOTES: "name" is an identifier, as on the other backends.
        self._run("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')", ())

    def _begin(self) -> None:
        self._con.begin()

    def _commit(self) -> None:
        self._con.commit()

    def _rollback(self) -> None:
        self._con.rollback()

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        marks = ", ".join(["%s"] * len(columns))
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
        with self._lock, self._con.cursor() as cur:
            for start in range(0, len(rows), 5000):  # pymysql folds each batch into one statement
                cur.executemany(sql, rows[start : start + 5000])

    def index_column(self, column: str) -> str:
        return f"{column}(255)" if column == "valstr" else column

    def drop_index_sql(self, index: str, table: str) -> str:
        return f"DROP INDEX {index} ON {table}"

    def element_suffix(self, start: int) -> str:
        start_param = int(start)  # our own integer, never query text
        return f"substr(keystr, {start_param}) REGEXP '^[0-9]+[]]$'"

    def table_exists(self, table: str) -> bool:
        rows = self.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
            [table.strip('"')],
        )
        return bool(rows)


def open_backend(
    spec: str,
    directory: Path,
    read_only: bool = False,
    writer_elsewhere: Callable[[], bool] = lambda: False,
) -> Backend:
    """The backend named by ``spec``: ``sqlite``, ``duckdb`` (files in ``directory``) or a URL.

    ``writer_elsewhere()`` says whether another process writes the database (a reader of
    the DuckDB file then reads the snapshots it publishes)."""
    if spec == "sqlite":
        return SQLiteBackend(directory / SQLITE_FILE, read_only)
    if spec == "duckdb":
        return DuckDBBackend(directory / DUCKDB_FILE, read_only, writer_elsewhere)
    scheme = urlparse(spec).scheme.lower()
    if scheme in ("postgresql", "postgres"):
        return PostgresBackend(spec, read_only)
    if scheme in ("mysql", "mariadb"):
        return MariaDBBackend(spec.replace("mariadb://", "mysql://", 1), read_only)
    raise DocumentBackendError(
        f"unknown document backend {spec!r}: use 'sqlite', 'duckdb', "
        "'postgresql://user@host:port/db' or 'mysql://user@host:port/db'"
    )
