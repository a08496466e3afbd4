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


class WriterLock:
    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
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
