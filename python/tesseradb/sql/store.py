"""The table store: the database's DuckDB file of plain tables, and the snapshots that
other processes read.

DuckDB lets one process open a database file for writing and no other process open it
meanwhile, not even to read; and a process reading it keeps the writer out. So the
writing process attaches ``tables.duckdb`` for as long as its database is open, and
*publishes snapshots*: a copy of the file and its WAL, taken while no statement writes,
under ``tables.snapshots/``. A read-only database attaches the newest snapshot, and a
newer one at its next statement once one appears. A reader therefore never makes the
writer fail or wait (but for the copy), a busy writer never locks readers out, and
every reader sees the tables as they were after some committed statement: consistent,
at most ``PUBLISH_PERIOD`` (or ten copies' time, for a large store) behind a busy
writer, and current once the writer is idle or closed.

A snapshot is ``tables.<generation>.duckdb`` (with its ``.wal`` if there was one) and
``tables.<generation>.json``, which names the size and time of the files it was copied
from. A reader that finds the newest snapshot older than the store while no writer
holds the database (a writer was killed between a write and its next snapshot) copies
the store for itself, into a directory of its own, and checks that nothing changed
while it copied.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._snapshots import (
    FileSnapshots,
    identity,
    link_snapshot,
    private_directory,
    wal_of,
)
from tesseradb.errors import DatabaseLockedError, TableStoreError

if TYPE_CHECKING:
    import duckdb

__all__ = ["PUBLISH_PERIOD", "SNAPSHOTS", "STORE_ALIAS", "TableStore", "store_objects"]

STORE_ALIAS = "tessera_store"
SNAPSHOTS = "tables.snapshots"  # the directory of published snapshots, beside the store
# a busy writer publishes at most this often (and at most a tenth of its time copying)
PUBLISH_PERIOD = 0.2
# how long a reader whose catalog names a table its snapshot lacks waits for a newer one
SNAPSHOT_WAIT = 5.0
# how long a statement that must read the newest snapshot (its session's own writes, or
# a table the older one lacked) waits for the statements still reading the older one
FRESH_WAIT = 60.0


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class TableStore:
    """The table store of one open database, attached to the engine's DuckDB instance.

    ``writer_elsewhere()`` says whether another process holds the database's writer lock
    (a read-only database asks it before copying the store for itself).
    """

    def __init__(
        self,
        path: Path,
        read_only: bool,
        writer_elsewhere: Callable[[], bool] = lambda: False,
        lock_timeout: float = 10.0,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self.writer_elsewhere = writer_elsewhere
        self.lock_timeout = lock_timeout
        self.snapshots = path.parent / SNAPSHOTS
        self._published = FileSnapshots(path, self.snapshots, "tables")
        self.before_detach: Callable[[], None] = lambda: None  # the engine drops its cursors
        # the path a file is attached by: a reader attaches a snapshot through links of
        # its own (a restricted instance through links in its private directory)
        self.present: Callable[[Path], Path] = self._linked if read_only else lambda p: p
        self.attachments = 0  # times attached so far (what was learnt of it may be stale)
        self._attached: str | None = None  # the file attached (a snapshot, for readers)
        # what was attached: the store's inode (writer), or what a reader's choice of
        # file depended on (the newest snapshot, and the store's identity for its own copy)
        self._source: Any = None
        self._users = 0
        self._fresh_waiting = 0  # statements waiting for the old attachment's users to end
        mutex = threading.RLock()
        self._lock = threading.Condition(mutex)
        # the publishing thread sleeps on a condition of its own (over the same lock):
        # woken by every statement's end, it would take the GIL from the next statement
        # while that one runs in DuckDB, which cost a `SELECT 1` a third of its time
        self._publisher_wake = threading.Condition(mutex)
        # held around each statement run on the base connection itself (ATTACH, DETACH,
        # the engine's views): it refuses a second call while one runs
        self.base_lock = threading.RLock()
        # the write gate: statements that may write run in it together, a copy alone
        self._writing = 0
        self._copying = False
        self._copy_waiting = False
        self._publishing = False  # one thread takes a copy at a time (see _publish_quiet)
        # the writer's publishing
        self._changed = False
        self._closing = False
        self._publisher: threading.Thread | None = None
        self._last_publish = 0.0
        self._publish_period = PUBLISH_PERIOD
        self.damage: str | None = None  # why the store cannot be attached, if it cannot
        self._private: Path | None = None  # a reader's own directory (copies, stand-in)
        self._chosen = ""  # what a reader attached: snapshot, private (copy) or empty
        self._copies = 0
        self._seen_published = False  # (see published_once)

    @property
    def exists(self) -> bool:
        return self.path.exists()

    # --- statements --------------------------------------------------------------------
    @contextmanager
    def attached(
        self, con: duckdb.DuckDBPyConnection, refresh: bool = True, fresh: bool = False
    ) -> Iterator[bool]:
        """The store attached (as ``tessera_store``) for the duration of the block.

        A read-only database attaches the newest snapshot (``refresh``: a newer one
        than the one attached, if no statement uses the old one; ``fresh``: the newest
        one, waiting up to FRESH_WAIT for the statements that use the old one, and
        holding new ones back meanwhile: a statement retried because its snapshot lacked
        a table, or one of a session that has written since it last read, must not be
        given the old snapshot while others keep it in use; TableStoreError if they keep
        it that long). Yields whether the store holds the database's tables (False: a read-only
        database without any, given an empty stand-in).
        """
        with self._lock:
            if fresh and self._attached is not None and self._stale():
                self._fresh_waiting += 1
                try:
                    deadline = time.monotonic() + FRESH_WAIT
                    while self._users and time.monotonic() < deadline:
                        self._lock.wait(deadline - time.monotonic())
                    if self._users:
                        # (the old snapshot would answer without what the statement needs)
                        raise TableStoreError(
                            f"the table store's newest snapshot in {self.snapshots} could "
                            f"not be attached: statements kept the older one for "
                            f"{FRESH_WAIT:.0f} s; try again"
                        )
                finally:
                    self._fresh_waiting -= 1
                    self._lock.notify_all()
            else:
                while self._fresh_waiting:  # (one waits to refresh: it goes first)
                    self._lock.wait()
            if self._users == 0 and self._attached is not None and refresh and self._stale():
                self._detach(con)
            if self._attached is None:
                tried = self._damage_key()  # (taken first: a change meanwhile shows later)
                try:
                    self._attach(con)
                except TableStoreError as err:
                    # statements that do not need the plain tables still run; those that
                    # do are told why (see the engine); the file is tried again once changed
                    self.damage = str(err)
                    self._attach_empty(con)
                    self._chosen = "empty"
                    self._source = tried
            self._users += 1
            available = self._chosen != "empty"
        try:
            yield available
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._lock.notify_all()

    @contextmanager
    def writing(self, may_write: bool) -> Iterator[None]:
        """Run a statement that ``may_write`` the store inside the write gate: a snapshot
        is never copied while one runs. Marks the store changed afterwards."""
        if not may_write or self.read_only:
            yield
            return
        with self._lock:
            while self._copying or self._copy_waiting:
                self._lock.wait()
            self._writing += 1
        try:
            yield
        finally:
            with self._lock:
                self._writing -= 1
                self._mark_changed()
                self._lock.notify_all()

    def _stale(self) -> bool:
        """(lock held) Whether what is attached is no longer what a statement should read:
        a store replaced or removed behind the writer's back, or a newer snapshot."""
        return self._source_key() != self._source

    def _source_key(self) -> Any:
        """What the choice of the attached file depended on."""
        if self.damage is not None:
            return self._damage_key()
        if not self.read_only:
            return _inode(self.path)
        newest = self._published.newest()
        if self._chosen == "snapshot":
            return newest
        # the reader's own copy of the store, or an empty stand-in: the store counts too
        return newest, identity(self.path), identity(wal_of(self.path))

    def _damage_key(self) -> Any:
        return identity(self.path), identity(wal_of(self.path)), self._published.newest()

    # --- attaching ---------------------------------------------------------------------
    def _attach(self, con: duckdb.DuckDBPyConnection) -> None:
        """(lock held)"""
        self.damage = None
        if not self.read_only:
            self._attach_file(con, self.path, read_only=False)
            self._chosen = "store"
            self._source = self._source_key()
            if self._publisher is None:
                self._publisher = threading.Thread(
                    target=self._publish_loop, name="tessera-table-store", daemon=True
                )
                self._publisher.start()
            if not self._published.current():
                self._mark_changed()  # (a writer killed after a write left no snapshot of it)
            return
        for attempt in range(100):  # (the writer may delete a snapshot before it is linked)
            if attempt:
                time.sleep(min(0.001 * attempt, 0.05))  # (while the writer publishes)
            # what the choice depends on, taken before it: a snapshot published meanwhile
            # must make what is attached stale (taken after, it hid the newer snapshot
            # from a retry that needed it)
            around = (self._published.newest(), identity(self.path), identity(wal_of(self.path)))
            source = self._reader_source()
            if source is None:
                self._attach_empty(con)
                self._chosen = "empty"
            else:
                try:
                    self._attach_file(con, source, read_only=True)
                except FileNotFoundError:
                    continue
                self._chosen = "snapshot" if source.parent == self.snapshots else "private"
            # (a snapshot: the one attached, which is stale once a newer one is published)
            self._source = source if self._chosen == "snapshot" else around
            return
        raise TableStoreError(f"the table store's snapshots in {self.snapshots} keep vanishing")

    def _attach_empty(self, con: duckdb.DuckDBPyConnection) -> None:
        """(a read-only database without plain tables) An empty store of its own, read-only
        as the real one would be."""
        import duckdb

        empty = self._private_directory() / "empty.duckdb"
        if not empty.exists():
            duckdb.connect(str(empty)).close()
        self._attach_file(con, empty, read_only=True)

    def _linked(self, path: Path) -> Path:
        """A published snapshot as links of this reader's (whole with its WAL whatever
        the writer removes meanwhile: :func:`link_snapshot`)."""
        if path.parent != self.snapshots:
            return path  # (the reader's own copy, or its empty stand-in)
        links = self._private_directory() / "snapshot"
        links.mkdir(exist_ok=True)
        return link_snapshot(path, links)

    def _private_directory(self) -> Path:
        if self._private is None:
            self._private = private_directory("tessera-tables-")
        return self._private

    def _attach_file(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool) -> None:
        import duckdb

        if read_only and not path.exists():
            raise FileNotFoundError(path)
        presented = self.present(path)
        # (links of this reader's own hold the snapshot whole whatever the writer removes
        # meanwhile: only a snapshot attached by its own path can vanish under the attach)
        vanishes = read_only and presented == path
        quoted = str(presented).replace("'", "''")
        mode = " (READ_ONLY)" if read_only else ""
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            if vanishes and not path.exists():
                raise FileNotFoundError(path)
            try:
                with self.base_lock:
                    con.execute(f"ATTACH '{quoted}' AS {STORE_ALIAS}{mode}")
                break
            except duckdb.IOException as err:
                if vanishes and not path.exists():
                    raise FileNotFoundError(path) from None
                if "lock" not in str(err).lower():
                    raise TableStoreError(
                        f"the table store {self.path} cannot be opened: "
                        f"{str(err).removeprefix('IO Error: ')} (the plain tables live there; "
                        "restore it from a backup, or move it aside to start with no tables)"
                    ) from None
                if time.monotonic() > deadline:
                    holder = re.search(r"PID (\d+)", str(err))
                    who = f"process {holder.group(1)}" if holder else "another process"
                    raise DatabaseLockedError(
                        f"the table store {path} is in use by {who}; "
                        f"gave up after {self.lock_timeout:.0f} s"
                    ) from err
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
            except duckdb.Error as err:  # a file DuckDB recognises but cannot read
                raise TableStoreError(f"the table store {path} cannot be read: {err}") from None
        self._attached = str(path)
        self.attachments += 1

    def _detach(self, con: duckdb.DuckDBPyConnection) -> None:
        """(lock held, no user)"""
        self.before_detach()
        self._attached = None
        self._source = None
        with self.base_lock:
            con.execute(f"DETACH {STORE_ALIAS}")

    def release(self, con: duckdb.DuckDBPyConnection) -> None:
        """Detach now if no statement is using the store (it is attached again when next
        needed): for a test that opens the file itself."""
        with self._lock:
            if self._attached is not None and not self._users:
                self._detach(con)

    def close(self, con: duckdb.DuckDBPyConnection | None) -> None:
        """Detach, and (the writer) publish what readers have not seen yet."""
        with self._lock:
            self._closing = True
            publisher = self._publisher
            self._lock.notify_all()
            self._publisher_wake.notify_all()
        if publisher is not None:
            publisher.join()
        with self._lock:
            if self._attached is not None and con is not None:
                with contextlib.suppress(Exception):
                    self._detach(con)  # (DuckDB checkpoints the file as it lets go)
            if not self.read_only and self.path.exists() and not self._published.current():
                with contextlib.suppress(OSError):
                    self._published.publish()
            if self._private is not None:
                shutil.rmtree(self._private, ignore_errors=True)
                self._private = None

    def published_once(self) -> bool:
        """Whether readers have a snapshot of the store (or there is no store to read).
        Once they have, they always have one (a publish removes the older snapshots only
        after the newer is whole), so that is not looked up again: a restricted session
        asks before every query."""
        if self._seen_published:
            return True
        if self._published.newest() is not None:
            self._seen_published = True
            return True
        return not self.path.exists()

    def wait_for_newer(self, timeout: float) -> bool:
        """(a reader) Wait until a snapshot newer than the one attached is published;
        whether one was."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._stale():
                    return True
            time.sleep(0.02)
        return False

    # --- the writer publishes ------------------------------------------------------------
    def publish_now(self, con: duckdb.DuckDBPyConnection) -> None:
        """Publish a snapshot now if the store changed since the last (tests, and a writer
        opened on a store whose last writer was killed)."""
        with self._lock:
            if self._closing:
                return
            if self._attached is None:
                self._attach(con)
            failure = self._publish_quiet()  # (if changed, after any copy under way)
        if failure is not None:
            # (a restricted session reads its own writes from the snapshot: not a stale one)
            raise TableStoreError(
                f"could not publish the table store's snapshot in {self.snapshots}: {failure}"
            )

    def publish_if_behind(self, connection: Callable[[], duckdb.DuckDBPyConnection]) -> None:
        """(the writer, as it opens) Publish a snapshot, in a thread of its own, if the
        newest one is behind the store: the last writer was killed before it published."""
        if not self.path.exists() or self._published.current():
            return

        def publish() -> None:
            with contextlib.suppress(Exception):  # (the database may close meanwhile)
                with self._lock:
                    if self._closing:
                        return
                self.publish_now(connection())

        threading.Thread(target=publish, name="tessera-table-store-catchup", daemon=True).start()

    def _mark_changed(self) -> None:
        """(lock held) The store changed since the last snapshot: wake the publishing
        thread if it sleeps until a change (while a change waits, it wakes by itself)."""
        if not self._changed:
            self._changed = True
            self._publisher_wake.notify_all()

    def _publish_loop(self) -> None:
        with self._lock:
            while not self._closing:
                if not self._changed:
                    self._publisher_wake.wait()
                    continue
                wait = self._last_publish + self._publish_period - time.monotonic()
                if wait > 0:
                    self._publisher_wake.wait(wait)
                    continue
                self._publish_quiet()

    def _publish_quiet(self) -> OSError | None:
        """(lock held) Copy the store once no statement writes it, holding new ones back;
        the error that stopped the copy, if one did. One copy at a time: the publishing
        thread and writers publishing for restricted sessions may both get here, and two
        copies at once undo each other's files."""
        while self._publishing:  # (the waits below release the lock)
            self._lock.wait()
        if not self._changed:
            return None  # (the copy just taken began after the last write ended: it has it)
        failure = None
        self._publishing = True
        try:
            # statements that write go first for a while; then new ones wait for the copy
            polite = time.monotonic() + 1.0
            while self._writing and time.monotonic() < polite:
                self._lock.wait(max(polite - time.monotonic(), 0.001))
            self._copy_waiting = True
            try:
                while self._writing:
                    self._lock.wait()
                self._copying = True
            finally:
                self._copy_waiting = False
            self._changed = False
            began = time.monotonic()
            self._lock.release()  # statements that only read go on while files are copied
            try:
                self._published.publish()
            except OSError as err:
                failure = err
            finally:
                self._lock.acquire()
                self._copying = False
                if failure is not None:
                    self._mark_changed()  # (a full disk, say: tried later; readers read older)
        finally:
            self._publishing = False
            self._lock.notify_all()
        took = time.monotonic() - began
        self._last_publish = time.monotonic()
        self._publish_period = max(PUBLISH_PERIOD, 10 * took)
        return failure

    # --- a reader's source ----------------------------------------------------------------
    def _reader_source(self) -> Path | None:
        """The file a read-only database attaches: the newest snapshot; its own copy of the
        store when that snapshot is behind the store and no writer will publish a newer
        one; None when there are no plain tables at all."""
        newest = self._published.newest()
        if not self.path.exists():
            # no store, no tables: a snapshot of a store that has since gone is not served
            # (the catalog then names tables the store lacks: damage, as it should say)
            return None
        if newest is not None and self._published.current():
            return newest
        if self.writer_elsewhere():
            return newest  # the writer publishes what it has written soon
        self._copies += 1
        private = self._published.copy_into(self._private_directory(), self._copies)
        if private is None or self.writer_elsewhere():
            return newest  # (the store changed while copied: a writer has started, publishes)
        return private


def store_objects(cursor: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, list[str]]]:
    """The plain tables and views of the store attached to ``cursor``: name -> (kind, column
    names)."""
    rows = cursor.execute(
        "WITH objects AS ("
        "  SELECT table_name AS name, 'table' AS kind FROM duckdb_tables()"
        "  WHERE database_name = $db AND schema_name = 'main'"
        "  UNION ALL SELECT view_name, 'view' FROM duckdb_views()"
        "  WHERE database_name = $db AND schema_name = 'main' AND NOT internal),"
        " cols AS (SELECT table_name AS name, list(column_name ORDER BY column_index) AS columns"
        "  FROM duckdb_columns() WHERE database_name = $db AND schema_name = 'main' GROUP BY table_name)"
        " SELECT objects.name, kind, coalesce(columns, []) FROM objects LEFT JOIN cols USING (name)",
        {"db": STORE_ALIAS},
    ).fetchall()
    return {name: (kind, list(columns)) for name, kind, columns in rows}
