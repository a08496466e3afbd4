"""The database's writer lock: one writing process at a time, readers unlimited.

An exclusive ``flock`` on ``write.lock`` in the database directory. The
kernel drops it when the holder exits, even by ``kill -9``, so a stale file
never blocks anyone; the file's content only says who holds it, for the
error message of the next writer.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from tesseradb.errors import DatabaseLockedError

LOCK_FILE = "write.lock"
# how long a writer waits out a holder that names nobody (a reader's instant probe)
_PROBE_GRACE = 1.0


class WriterLock:
    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + _PROBE_GRACE
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # a holder that has not written its name yet is a reader asking whether a
                # writer is there (held_elsewhere), or a writer that has just taken it
                if not self.holder() and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
            os.close(fd)
            holder = self.holder()
            raise DatabaseLockedError(
                f"database {self.path.parent} is open for writing by {_describe(holder)}; "
                f"open it with read_only=True to read, or close the other writer",
                holder,
            ) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join(sys.argv)[:200],
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd

    def held_elsewhere(self) -> bool:
        """Whether another process (or another database of this one) writes the database
        now. Asked by readers: the lock is taken shared for an instant, which a writer
        starting just then waits out (see ``acquire``)."""
        if self._fd is not None:
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return False  # no writer has ever opened the database
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # (closing lets go of a lock taken)
        return False

    def holder(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.path.read_text() or "{}"))
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "another process"
    pid = holder.get("pid")
    me = " (this process)" if pid == os.getpid() else ""
    return (
        f"process {pid}{me} on {holder.get('host', '?')} since {holder.get('since', '?')}"
        f" ({holder.get('command', '?')})"
    )
