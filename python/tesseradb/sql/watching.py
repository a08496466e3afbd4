"""Progress of running statements: one thread polls DuckDB's query progress for every
watched statement, reports it to the statement's tracker, and interrupts a statement
whose operation was cancelled."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from tesseradb.progress import Tracker

__all__ = ["watching"]

# how often a watched statement's progress is read from DuckDB
_WATCH_PERIOD = 0.2


@contextmanager
def watching(cursor: duckdb.DuckDBPyConnection, watch: Tracker | None) -> Iterator[None]:
    """Report ``cursor``'s query progress (percent) to ``watch`` while the block runs, and
    interrupt the statement if ``watch``'s operation is cancelled."""
    if watch is None:
        yield
        return
    entry = _WATCHER.add(cursor, watch)
    try:
        yield
    finally:
        _WATCHER.remove(entry)


class _Watcher:
    """One thread polling every watched statement's progress (a thread per statement cost
    a served point query a millisecond of its few)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, list[Any]] = {}  # id -> [cursor, watch, percent reported]
        self._ids = 0
        self._thread: threading.Thread | None = None

    def add(self, cursor: duckdb.DuckDBPyConnection, watch: Tracker) -> int:
        with self._lock:
            self._ids += 1
            self._entries[self._ids] = [cursor, watch, 0]
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._poll, name="tessera-sql-progress", daemon=True
                )
                self._thread.start()
            return self._ids

    def remove(self, entry: int) -> None:
        with self._lock:
            self._entries.pop(entry, None)

    def _poll(self) -> None:
        from tesseradb.errors import CancelledError

        while True:
            time.sleep(_WATCH_PERIOD)
            # under the lock: once remove() returns, its statement gets no more events
            with self._lock:
                for key, entry in list(self._entries.items()):
                    cursor, watch, reported = entry
                    try:
                        percent = cursor.query_progress()
                    except Exception:
                        continue  # no statement running on the cursor yet, or it has just ended
                    try:
                        step = int(percent or 0) - reported  # (-1 while DuckDB cannot tell)
                        if step > 0:
                            entry[2] = reported + step
                            watch.advance(step)
                        else:
                            watch.check()
                    except CancelledError:
                        with contextlib.suppress(Exception):
                            cursor.interrupt()
                        del self._entries[key]


_WATCHER = _Watcher()
