"""The embedded document backends: SQLite and DuckDB files in the database's folder.

SQLite runs in WAL mode with a checkpointer thread; DuckDB is written by one
process and read by others through published snapshots (``tesseradb._snapshots``).
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tesseradb._limits import limit_bytes
from tesseradb._snapshots import FileSnapshots, Publisher, identity, wal_of
from tesseradb.documents._backends import DUCKDB_SNAPSHOTS, Backend, ColumnTypes
from tesseradb.errors import DocumentBackendError

__all__ = ["DuckDBBackend", "SQLiteBackend"]


class SQLiteBackend(Backend):
    kind = "sqlite"
    table_options = " WITHOUT ROWID"
    keeps_negative_zero = False
    types = ColumnTypes("INTEGER", "TEXT", "TEXT", "REAL", "INTEGER", "INTEGER", "INTEGER")

    # The page cache without a memory limit (it also bounds the sorter that builds a bulk
    # load's indexes), and the memory map's size, which SQLite caps at its compile-time
    # limit (2 GiB on Debian).
    CACHE_BYTES = 256 << 20
    MAP_BYTES = 1 << 40

    def __init__(
        self, path: Path, read_only: bool = False, memory_limit: str | None = None
    ) -> None:
        super().__init__(read_only)
        self._path = path
        # Under the database's memory limit: a quarter of it for the page cache and half
        # for mapped pages (those are the file's, which the kernel drops under pressure,
        # but they count in the process's resident memory).
        limit = None if memory_limit is None else limit_bytes(memory_limit)
        self.cache_bytes = self.CACHE_BYTES if limit is None else min(self.CACHE_BYTES, limit // 4)
        self.map_bytes = self.MAP_BYTES if limit is None else limit // 2
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = self._connect()
            if not read_only:
                self._con.execute("PRAGMA journal_mode=WAL")
            self._checkpointer = None if read_only else _Checkpointer(path)
            if self._checkpointer is not None:
                self._con.execute("PRAGMA wal_autocheckpoint=0")
                # the log is cut back to this size whenever it starts over (after a
                # checkpoint), rather than keep the size of the biggest transaction
                self._con.execute(f"PRAGMA journal_size_limit={_Checkpointer.LOG_BYTES}")
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
        con.execute(f"PRAGMA cache_size=-{self.cache_bytes // 1024}")  # (in KiB when < 0)
        # Pages read through a memory map rather than a read() call each: fetching
        # 1,000 NoBench objects scattered over a 3.4 GB file, 30 -> 25 ms.
        con.execute(f"PRAGMA mmap_size={self.map_bytes}")
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
        if self._checkpointer is not None and self._writing:  # (a read leaves the log as it was)
            self._checkpointer.committed()

    def _rollback(self) -> None:
        super()._rollback()
        # A big transaction (a bulk load) that spilled past the page cache wrote its pages
        # into the log; rolled back (a cancel, bad input), they stay there, gigabytes of
        # nothing, until the log starts over. Give that space back now.
        if self._checkpointer is not None and self._checkpointer.log_bytes() > self.LOG_LEFT:
            self._checkpointer.truncate(self._con)

    # the log a rollback may leave behind (one past it is truncated at once)
    LOG_LEFT = 64 << 20

    def after_bulk_load(self, tables: Sequence[str]) -> None:
        # A bulk load wrote the whole database into the log, and every later read
        # would look its pages up there until a checkpoint has copied them back:
        # the load does that itself, before it returns. The load has committed: a
        # checkpoint that fails (readers in the way, a full disk: the database file
        # grows by what the log holds while the log is still there) loses nothing and
        # must not report the load as failed; the log is checkpointed after a later
        # commit, or at close.
        if self._checkpointer is not None:
            with self._lock:
                self._checkpointer.truncate(self._con)

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
        self._checkpointing = threading.Lock()  # one checkpoint at a time (truncate)
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name="tessera-sqlite-checkpoint", daemon=True
        )
        self._thread.start()

    def truncate(self, con: sqlite3.Connection) -> None:
        """Checkpoint the whole log on ``con`` and cut it to nothing, after the thread's
        own checkpoint if one runs: two at once, one is refused as busy, and the log of a
        10M-object load stayed at 28 GB until close when the thread's PASSIVE checkpoint,
        woken by the load's commit, held the log while the load's TRUNCATE gave up.
        A checkpoint that fails (readers in the way, a full disk) loses nothing."""
        with self._checkpointing, contextlib.suppress(sqlite3.Error):
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def log_bytes(self) -> int:
        try:
            return self._log.stat().st_size
        except OSError:
            return 0

    def committed(self) -> None:
        """Called after each commit: wake the thread if the log has grown past its bound."""
        if self.log_bytes() > self.LOG_BYTES:
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
                with self._checkpointing, contextlib.suppress(sqlite3.Error):
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
    types = ColumnTypes(
        "BIGINT", "VARCHAR", "VARCHAR", "DOUBLE", "BIGINT", "BOOLEAN", "SMALLINT", "BLOB"
    )
    # statements that never change the file (anything else marks it changed)
    _READS = frozenset({"SELECT", "WITH", "BEGIN", "COMMIT", "ROLLBACK", "EXPLAIN", "DESCRIBE"})
    # how long a reader waits for the writer's first snapshot before copying the file
    FIRST_SNAPSHOT_WAIT = 5.0

    def __init__(
        self,
        path: Path,
        read_only: bool = False,
        writer_elsewhere: Callable[[], bool] = lambda: False,
        memory_limit: str | None = None,
    ) -> None:
        super().__init__(read_only)
        self._path = path
        self._memory_limit = memory_limit  # DuckDB's setting (tesseradb._limits)
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
            config = {} if self._memory_limit is None else {"memory_limit": self._memory_limit}
            return duckdb.connect(str(file), read_only=read_only, config=config)
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
