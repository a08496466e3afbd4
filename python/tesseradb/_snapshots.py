"""Published copies of a DuckDB file, for readers in other processes.

DuckDB lets one process open a database file for writing and no other process open it
meanwhile, not even to read; and a process reading it keeps the writer out. So a writer
that must not be stopped by readers (the table store, the document backend on DuckDB)
copies its file and WAL, while no statement writes, into a directory of snapshots, and
readers open the newest snapshot read-only instead of the file itself.

A snapshot is ``<stem>.<generation>.duckdb`` (with its ``.wal`` if there was one) and
``<stem>.<generation>.json``, which names the identity (inode, size, time) of the files
it was copied from, so anyone can tell whether it is current. The main file is renamed
into place last: a snapshot is whole once it is there. A generation is never used twice.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from tesseradb._durable import fsync_path

__all__ = [
    "FileSnapshots",
    "Identity",
    "Publisher",
    "identity",
    "link_snapshot",
    "private_directory",
    "wal_of",
]

Identity = tuple[int, int, int] | None  # (inode, size, mtime_ns) of a file, None if absent


def identity(path: Path) -> Identity:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def wal_of(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


class FileSnapshots:
    """The snapshots of the DuckDB file ``source`` kept in ``directory``.

    The writer calls :meth:`publish` while no statement writes the file; readers open
    :meth:`newest`, or (when it is behind the file and no writer will publish a newer
    one) a copy of their own from :meth:`copy_into`.
    """

    def __init__(self, source: Path, directory: Path, stem: str) -> None:
        self.source = source
        self.directory = directory
        self.stem = stem
        self._whole = re.compile(rf"{re.escape(stem)}\.(\d{{12}})\.duckdb")
        self._any = re.compile(
            rf"{re.escape(stem)}\.(\d{{12}})\.(?:duckdb|duckdb\.wal|json)(?:\.tmp)?"
        )

    def source_identity(self) -> dict[str, Identity]:
        return {"store": identity(self.source), "wal": identity(wal_of(self.source))}

    # --- the writer ----------------------------------------------------------------------
    def publish(self) -> None:
        """Copy the file (and its WAL) as the next snapshot; drop the older ones. The
        caller makes sure no statement writes the file meanwhile. Publishes of one
        directory run one at a time: a second would remove the first's files as strays."""
        with _publishing(self.directory):
            self._publish()

    def _publish(self) -> None:
        self.directory.mkdir(exist_ok=True)
        for stray in self.directory.glob(f"{self.stem}.*.tmp"):  # what a killed writer left
            stray.unlink(missing_ok=True)
        # a killed publish may have left some of its files (its WAL, its manifest) under
        # their final names, without the main file: their generation is not used again
        existing = self.generations(every_file=True)
        generation = (max(existing) + 1) if existing else 1
        base = self.directory / f"{self.stem}.{generation:012d}"
        source, wal = self.source, wal_of(self.source)
        began = time.time_ns()
        copied_from = self.source_identity()
        copied = base.with_name(base.name + ".duckdb.tmp")
        unchanged = self._unchanged_main_file(copied_from["store"])
        if unchanged is None or not _linked_or_not(unchanged, copied):
            shutil.copyfile(source, copied)
            fsync_path(copied)
        if copied_from["wal"] is not None:
            copied_wal = base.with_name(base.name + ".duckdb.wal.tmp")
            shutil.copyfile(wal, copied_wal)
            fsync_path(copied_wal)
            copied_wal.replace(base.with_name(base.name + ".duckdb.wal"))
        manifest = base.with_name(base.name + ".json.tmp")
        manifest.write_text(json.dumps({"generation": generation, "began": began, **copied_from}))
        fsync_path(manifest)
        manifest.replace(base.with_name(base.name + ".json"))
        copied.replace(base.with_name(base.name + ".duckdb"))  # last: readers look for this
        for name in os.listdir(self.directory):  # every older generation, whole or not
            found = self._any.fullmatch(name)
            if found is not None and int(found.group(1)) != generation:
                (self.directory / name).unlink(missing_ok=True)

    def _unchanged_main_file(self, now: Identity) -> Path | None:
        """The newest snapshot's main file if the source's main file is still what it was
        copied from, else None. Between checkpoints DuckDB writes only the WAL, so a
        writer publishing after each small write would otherwise copy the whole store
        each time (a second per write at 1 GB). Unchanged means the same inode, size and
        modification time as recorded, and a time recorded well before that copy began:
        a write after it (even in the same tick of the file system's coarse clock) then
        shows as a newer time. The file's DuckDB headers (its checkpoint count) must
        match too."""
        newest = self.newest()
        manifest = None if newest is None else _manifest(newest)
        if newest is None or manifest is None or now is None:
            return None
        recorded, began = manifest.get("store"), manifest.get("began")
        if recorded is None or not isinstance(began, int) or tuple(recorded) != now:
            return None
        if now[2] >= began - _CLOCK_MARGIN_NS:
            return None  # (modified just before that copy: a later write may hide)
        headers = _headers(newest)
        if headers is None or headers != _headers(self.source):
            return None
        return newest

    # --- anyone --------------------------------------------------------------------------
    def generations(self, every_file: bool = False) -> list[int]:
        """The generations of the published snapshots (``every_file``: of any file a
        publish left, whole or not)."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        pattern = self._any if every_file else self._whole
        return [int(m.group(1)) for n in names if (m := pattern.fullmatch(n))]

    def newest(self) -> Path | None:
        generations = self.generations()
        if not generations:
            return None
        return self.directory / f"{self.stem}.{max(generations):012d}.duckdb"

    def current(self) -> bool:
        """Whether the newest snapshot was copied from the file as it is now."""
        newest = self.newest()
        manifest = None if newest is None else _manifest(newest)
        if manifest is None:
            return False
        now = self.source_identity()
        return all(
            (tuple(manifest[k]) if manifest.get(k) is not None else None) == now[k] for k in now
        )

    # --- a reader without a current snapshot ---------------------------------------------
    def copy_into(self, directory: Path, number: int) -> Path | None:
        """A copy of the file (and WAL) in ``directory`` (a reader's own), numbered
        ``number``; None if the file changed while it was copied (a writer is at work:
        it publishes). Earlier copies there are removed (one still open stays readable)."""
        for old in directory.glob(f"{self.stem}.*"):
            old.unlink(missing_ok=True)
        target = directory / f"{self.stem}.{number}.duckdb"
        before = self.source_identity()
        try:
            shutil.copyfile(self.source, target)
            if before["wal"] is not None:
                shutil.copyfile(wal_of(self.source), wal_of(target))
        except OSError:
            return None
        return target if self.source_identity() == before else None


def link_snapshot(path: Path, directory: Path) -> Path:
    """The snapshot ``path`` (or any other DuckDB file) as hard links in ``directory``, its
    WAL with it, for a reader to attach: the writer removes an older generation's files
    one by one once a newer one is whole, and a reader attaching the files themselves
    could get the main file without its WAL (then it reads a store that lacks what the
    WAL held). A link keeps the file whatever the writer removes. Raises
    FileNotFoundError when the generation went away first (list the snapshots again).
    Earlier links in ``directory`` are removed."""
    link = directory / path.name
    wal, wal_link = wal_of(path), wal_of(link)
    if link.exists():
        return link  # (made whole before: links are made WAL first, main file last)
    for old in directory.iterdir():
        if old.is_file() or old.is_symlink():
            old.unlink(missing_ok=True)
    expects_wal = wal.exists()
    if _SNAPSHOT.fullmatch(path.name):  # a published one: its manifest says
        manifest = _manifest(path)
        if manifest is None:
            raise FileNotFoundError(path)  # (the generation is being removed)
        expects_wal = manifest.get("wal") is not None
    try:
        if expects_wal:
            _link(wal, wal_link)
        _link(path, link)
    except FileNotFoundError:
        wal_link.unlink(missing_ok=True)
        raise
    return link


def private_directory(prefix: str) -> Path:
    """A temporary directory of this process's (named with its pid), after removing those
    of the same prefix whose process is gone: a reader killed with SIGKILL leaves its
    links behind, and a link keeps a whole snapshot's space."""
    import tempfile

    root = Path(tempfile.gettempdir())
    for old in root.glob(f"{prefix}*-*"):
        pid = old.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # (another user's process)
    return True


_CLOCK_MARGIN_NS = 50_000_000  # (file times tick coarsely: a few ms, more on some mounts)
_HEADER_BYTES = 3 * 4096  # DuckDB's file header and its two database headers


def _headers(path: Path) -> bytes | None:
    try:
        with path.open("rb") as file:
            return file.read(_HEADER_BYTES)
    except OSError:
        return None


def _linked_or_not(source: Path, target: Path) -> bool:
    """Whether ``target`` is now a hard link to ``source`` (a published file no one
    writes: snapshots are attached read-only)."""
    try:
        target.hardlink_to(source)
    except OSError:
        return False
    return True


def _link(source: Path, target: Path) -> None:
    try:
        target.hardlink_to(source)
    except FileNotFoundError:
        raise
    except OSError:  # (another file system: a symbolic link, which does not keep it)
        target.symlink_to(source)


_SNAPSHOT = re.compile(r".+\.\d{12}\.duckdb")
# one publish at a time per directory in this process (one writer process per file)
_PUBLISHING: dict[Path, threading.Lock] = {}
_PUBLISHING_LOCK = threading.Lock()


def _publishing(directory: Path) -> threading.Lock:
    with _PUBLISHING_LOCK:
        return _PUBLISHING.setdefault(directory.resolve(), threading.Lock())


def _manifest(snapshot: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads(snapshot.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


class Publisher:
    """The writer's thread that publishes a snapshot a while after its file changed: at
    most every ``period`` seconds, and spending at most a tenth of its time copying.

    ``quiet()`` is a context in which no statement writes the file (the writer's own lock,
    say); it is held for the copy alone.
    """

    def __init__(
        self,
        snapshots: FileSnapshots,
        quiet: Callable[[], AbstractContextManager[Any]],
        name: str,
        period: float = 0.2,
    ) -> None:
        self.snapshots = snapshots
        self._quiet = quiet
        self._least_period = period
        self._period = period
        self._changed = False
        self._closing = False
        self._last = 0.0
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def changed(self) -> None:
        """The file changed (or may have): publish it soon."""
        with self._wake:
            self._changed = True
            self._wake.notify_all()

    def stop(self) -> None:
        """Stop publishing (the caller publishes what is left once it closed the file)."""
        with self._wake:
            self._closing = True
            self._wake.notify_all()
        self._thread.join()

    def _loop(self) -> None:
        with self._wake:
            while not self._closing:
                if not self._changed:
                    self._wake.wait()
                    continue
                wait = self._last + self._period - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                self._changed = False
                self._wake.release()  # (writers mark changes while the copy is taken)
                took = 0.0
                try:
                    with self._quiet():
                        began = time.monotonic()
                        try:
                            self.snapshots.publish()
                        finally:
                            took = time.monotonic() - began
                except OSError:
                    self._changed = True  # (a full disk, say: tried again later)
                finally:
                    self._wake.acquire()
                self._last = time.monotonic()
                self._period = max(self._least_period, 10 * took)
