"""One array's Icechunk repository: sessions, commits, versions and the written-chunk listing.

Each array is its own repository (``arrays/<name>/repo``) with one Zarr
group whose arrays are the attributes (vertical storage), so xarray or
zarr-python can open it directly. Icechunk's local-filesystem storage is not
safe for concurrent commits, so commits take the array's lock file
(``arrays/<name>/commit.lock``, an exclusive ``flock``): a commit based on an
old snapshot then fails with Icechunk's conflict check instead of racing.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb.errors import (
    ArrayConflictError,
    ArrayCorruptError,
    InvalidArgumentError,
    ProcessStartError,
    StorageError,
    VersionNotFoundError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    import icechunk

    from tesseradb.arrays._schema import ArraySchema
    from tesseradb.storage import Location

__all__ = [
    "ArrayConflictError",
    "ArrayRepository",
    "Version",
    "VersionNotFoundError",
]

BRANCH = "main"
REPO_DIR = "repo"
LOCK_FILE = "commit.lock"
# rewritten (new random bytes) before and after every commit, under the commit lock: a
# reader keeps the branch's head while this file is as it saw it (see ArrayRepository.head)
HEAD_MARK = "head.mark"


# The process that first used Icechunk. Its Rust runtime's I/O threads do not
# survive fork(): in a child forked after that, every Icechunk call waits for
# them for ever, so arrays refuse to work there instead of hanging.
_icechunk_process: int | None = None


def _check_process(name: str) -> None:
    global _icechunk_process
    pid = os.getpid()
    if _icechunk_process is None:
        _icechunk_process = pid
        atexit.register(_let_icechunk_threads_return)
    elif _icechunk_process != pid:
        raise ProcessStartError(
            f"array {name!r}: this process was forked (multiprocessing's 'fork' start method, "
            "the default on Linux before Python 3.14) from one that had already used arrays, "
            "and Icechunk's I/O threads do not survive a fork. Start the workers with the "
            "'forkserver' or 'spawn' method, e.g. ProcessPoolExecutor(mp_context="
            "multiprocessing.get_context('forkserver'))"
        )


def _let_icechunk_threads_return() -> None:
    """At exit, give Icechunk's threads a moment to return from handing over their last
    results.

    An Icechunk thread hands an async result to asyncio with ``call_soon_threadsafe``,
    whose write to the loop's wake-up socket releases the GIL; the awaiting code can go
    on, and the process end, before the thread has taken the GIL back. A thread that
    asks for the GIL once the interpreter is finalizing is ended with ``pthread_exit``
    (Python before 3.14), whose unwinding through Rust frames aborts the process: a
    script that had finished its work exited with SIGABRT now and then on a loaded
    machine. Sleeping here, before finalization, releases the GIL to such a thread.
    """
    import time

    time.sleep(0.05)


@dataclass(frozen=True)
class Version:
    """One committed version of an array."""

    id: str
    time: datetime
    message: str


def _quiet_icechunk() -> None:
    import icechunk

    # Icechunk warns on every local-filesystem repository that concurrent
    # commits are unsafe; commits here are serialised by the lock file.
    icechunk.set_logs_filter("error")


class ArrayRepository:
    """``directory`` is the array's local folder (its commit lock, and its repository unless
    the array lives in an object store at ``location``)."""

    def __init__(self, name: str, directory: Path, location: Location | None = None) -> None:
        self.name = name
        self.directory = directory
        self.location = location
        self._thread_lock = threading.Lock()
        self._repo: icechunk.Repository | None = None
        self._chunk_cache: dict[tuple[str, str], frozenset[tuple[int, ...]]] = {}
        # Snapshots never change, so a read-only session of the head and the
        # Zarr arrays opened in a snapshot serve every read until a commit
        # moves the head: no session and metadata reads per chunk or query.
        self._cache_lock = threading.Lock()
        self._head_session: tuple[str, icechunk.Session] | None = None
        self._open_arrays: dict[tuple[str, str], Any] = {}
        # the branch's head, and the head mark's bytes when it was looked up
        self._head: tuple[str, bytes] | None = None

    # --- opening --------------------------------------------------------------
    @property
    def repo(self) -> icechunk.Repository:
        _check_process(self.name)
        if self._repo is None:
            import icechunk

            _quiet_icechunk()
            storage = self._storage()
            if self.location is None and not (self.directory / REPO_DIR).is_dir():
                raise ArrayCorruptError(
                    f"array {self.name!r}: its repository {self.directory / REPO_DIR} is missing"
                )
            # (asked of obstore, not Icechunk: an unreachable endpoint fails in well under a
            # second there, where Icechunk's own retries take tens of seconds)
            if self.location is not None and self.location.is_empty():
                raise ArrayCorruptError(
                    f"array {self.name!r}: its repository {self.where} is missing"
                )
            with self.damage("its repository"):
                self._repo = icechunk.Repository.open(storage, self._config())
        return self._repo

    @property
    def where(self) -> str:
        """Where the repository is: its URL, or its folder."""
        return self.location.url if self.location is not None else str(self.directory / REPO_DIR)

    def _storage(self) -> Any:
        import icechunk

        if self.location is not None:
            return self.location.icechunk_storage()
        return icechunk.local_filesystem_storage(str(self.directory / REPO_DIR))

    def _config(self) -> Any:
        return self.location.icechunk_config() if self.location is not None else None

    @contextlib.contextmanager
    def damage(self, part: str) -> Iterator[None]:
        """Turn Icechunk's and Zarr's errors on reading ``part`` into :class:`ArrayCorruptError`."""
        import icechunk
        import zarr.errors

        try:
            yield
        except (icechunk.IcechunkError, zarr.errors.BaseZarrError) as err:
            if isinstance(err, (icechunk.ConflictError, icechunk.RebaseFailedError)):
                raise
            if self.location is not None:
                unreachable = transport_problem(
                    err, self.location, f"read {part} of array {self.name!r} at"
                )
                if unreachable is not None:
                    raise unreachable from None
            raise ArrayCorruptError(
                f"array {self.name!r}: {part} cannot be read ({icechunk_reason(err)}); "
                "`tessera check` lists what is damaged"
            ) from None

    @classmethod
    def create(
        cls, name: str, directory: Path, location: Location | None = None
    ) -> ArrayRepository:
        import icechunk

        _check_process(name)
        _quiet_icechunk()
        directory.mkdir(parents=True, exist_ok=False)
        made = cls(name, directory, location)
        storage = made._storage()
        if location is None:
            made._repo = icechunk.Repository.create(storage)
        else:
            with location.failures("create the repository of array " + repr(name) + " at"):
                made._repo = icechunk.Repository.create(storage, made._config())
        return made

    def initialise(self, schema: ArraySchema) -> None:
        """Lay out the Zarr group (one array per attribute) and commit it as the first version."""
        import zarr
        from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec

        session = self.writable()
        group = zarr.group(
            store=session.store, attributes={"tessera": schema.to_dict()}, zarr_format=3
        )
        shape = tuple(0 if d.end is None else d.end - d.start for d in schema.dims)
        compressors: Any = {
            "zstd": [ZstdCodec(level=schema.level)],
            "blosc": [BloscCodec(cname="zstd", clevel=min(9, max(0, schema.level)))],
            "none": [],
        }[schema.codec]
        # a CRC-32C per chunk (a standard Zarr v3 codec): damaged chunk bytes
        # are an error naming the chunk, never silently wrong values
        compressors = [*compressors, Crc32cCodec()]
        for attr in schema.attrs:
            group.create_array(
                attr.name,
                shape=shape,
                chunks=schema.chunk_shape,
                dtype=attr.dtype,
                fill_value=attr.fill,
                compressors=compressors,
                dimension_names=schema.dim_names,
                attributes={"nullable": attr.nullable},
                # a written chunk is stored even when it holds only fill
                # values: SQL shows the cells of every written chunk
                config={"write_empty_chunks": True},
            )
        # each dimension's world coordinates as a coordinate variable, so that
        # xr.open_zarr on the repository (without TesseraDB) shows world coordinates
        for axis, dim in enumerate(schema.dims):
            coordinate = group.create_array(
                dim.name,
                shape=(shape[axis],),
                chunks=(max(dim.chunk, 1 << 16),),
                dtype="int64",
                compressors=compressors,
                dimension_names=[dim.name],
                attributes={"tessera": "world coordinates of dimension " + dim.name},
            )
            if shape[axis]:
                coordinate[:] = schema.world_axis(axis, 0, shape[axis])
        self.commit(session, "create array")

    def coordinate_array(self, session: icechunk.Session, dim: str) -> Any | None:
        """The coordinate variable of dimension ``dim``, or None in a repository made before
        arrays had them (their direct opens show indexes, not world coordinates)."""
        import zarr
        import zarr.errors

        try:
            mode = "r" if session.read_only else "r+"
            return zarr.open_array(session.store, path=dim, mode=mode, zarr_format=3)
        except (FileNotFoundError, KeyError, zarr.errors.BaseZarrError):
            return None

    # --- sessions and commits ---------------------------------------------------
    def writable(self) -> icechunk.Session:
        with self.damage("its head version"):
            return self.repo.writable_session(BRANCH)

    def readonly(
        self, version: str | None = None, as_of: datetime | None = None
    ) -> icechunk.Session:
        import icechunk

        if version is not None and not isinstance(version, str):
            raise InvalidArgumentError(
                f"array {self.name!r}: version must be a version id (a str), "
                f"not {type(version).__name__}"
            )
        if as_of is not None:
            if not isinstance(as_of, datetime):
                raise InvalidArgumentError(
                    f"array {self.name!r}: as_of must be a datetime, not {type(as_of).__name__}"
                )
            if as_of.tzinfo is None:
                as_of = as_of.astimezone()  # naive means local time, as everywhere in Python
        try:
            if version is not None:
                return self.repo.readonly_session(snapshot_id=version)
            if as_of is not None:
                return self.repo.readonly_session(branch=BRANCH, as_of=as_of)
        except (icechunk.IcechunkError, ValueError) as err:
            what = f"version {version!r}" if version is not None else f"version as of {as_of}"
            raise VersionNotFoundError(
                f"array {self.name!r} has no {what} ({icechunk_reason(err)})"
            ) from None
        head = self.head()
        with self._cache_lock:
            if self._head_session is None or self._head_session[0] != head:
                with self.damage(f"version {head}"):
                    self._head_session = (head, self.repo.readonly_session(snapshot_id=head))
            return self._head_session[1]

    def zarr_array(self, session: icechunk.Session, attr: str) -> Any:
        """The Zarr array of ``attr`` in ``session`` (opened once per read-only snapshot)."""
        import zarr

        _check_process(self.name)
        key = (str(session.snapshot_id), attr)
        if session.read_only:
            with self._cache_lock:
                cached = self._open_arrays.get(key)
            if cached is not None:
                return cached
        with self.damage(f"attribute {attr!r}"):
            array = zarr.open_array(
                session.store, path=attr, mode="r" if session.read_only else "r+", zarr_format=3
            )
        # write_empty_chunks is a runtime setting, not stored: a written chunk
        # must be stored even when it holds only fill values (SQL shows it)
        array = array.with_config({"write_empty_chunks": True})
        if session.read_only:
            with self._cache_lock:
                if len(self._open_arrays) > 1024:
                    self._open_arrays.clear()
                self._open_arrays[key] = array
        return array

    @contextlib.contextmanager
    def commit_lock(self) -> Iterator[None]:
        """Held around everything that may move the branch: the head mark is rewritten
        as it is taken and before it is let go (see :meth:`head`)."""
        with self._thread_lock:
            fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._remark()  # (a reader's kept head must not outlive what follows)
                try:
                    yield
                finally:
                    # (the mark already changed above: readers look the head up again
                    # even if this one fails)
                    with contextlib.suppress(OSError):
                        self._remark()
            finally:
                os.close(fd)  # closing drops the flock

    def _remark(self) -> None:
        """(commit lock held) Give the head mark new bytes: every kept head is looked up
        again."""
        if self.location is not None:
            return  # (an object store's branch is looked up every time)
        path = self.directory / HEAD_MARK
        spare = path.with_name(f"{HEAD_MARK}.{os.getpid()}.{threading.get_ident()}")
        try:
            spare.write_bytes(os.urandom(16))
            os.replace(spare, path)
        except OSError as err:
            with contextlib.suppress(OSError):
                spare.unlink()
            raise StorageError(
                f"array {self.name!r}: cannot write its head mark {path}: {err.strerror or err}; "
                "nothing was committed"
            ) from None

    def _mark(self) -> bytes | None:
        """The head mark's bytes; None where there is none (an array no commit has
        marked yet, or one in an object store)."""
        if self.location is not None:
            return None
        try:
            return (self.directory / HEAD_MARK).read_bytes()
        except OSError:
            return None

    def _commit_under_way(self) -> bool:
        """Whether a commit (of any process) holds the commit lock now."""
        try:
            fd = os.open(self.directory / LOCK_FILE, os.O_RDONLY)
        except OSError:
            return True  # (no lock file: nothing to go by)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # (and the shared lock with it)
        return False

    def undo(self, version: str, previous: str) -> bool:
        """Put the branch back at ``previous`` if its head is still ``version`` (nothing was
        committed after it); whether it did."""
        with self.commit_lock():
            if self.head() != version:
                return False
            self.repo.reset_branch(BRANCH, previous)
            return True

    def commit(self, session: icechunk.Session, message: str) -> str:
        """Commit ``session`` atomically; :class:`ArrayConflictError` if the branch moved meanwhile."""
        import icechunk

        with self.commit_lock():
            try:
                # a writer that began before another's commit is rebased onto
                # it when they touched different chunks; same chunks conflict
                return str(
                    session.commit(message, rebase_with=icechunk.ConflictDetector(), rebase_tries=3)
                )
            except (icechunk.ConflictError, icechunk.RebaseFailedError) as err:
                session.discard_changes()
                raise ArrayConflictError(
                    f"array {self.name!r} was changed by another writer after this write began; "
                    f"nothing of it was committed ({err}). Write again, or use fork/merge "
                    "to combine parallel writers into one version"
                ) from None

    def head(self) -> str:
        """The snapshot the branch points at.

        Looking it up reads the branch from storage through Icechunk's runtime (160 µs, half
        of a point query on an array). A local repository's head is kept instead while
        its head mark holds the bytes it held when the head was looked up: every commit,
        of any process, rewrites the mark as it takes the commit lock and before it lets
        go, so a commit done since, or one a killed process left half-way, shows as new
        bytes. A head looked up while a commit held the lock is not kept.
        """
        mark = self._mark()
        kept = self._head
        if mark is not None and kept is not None and kept[1] == mark:
            return kept[0]
        settled = mark is not None and not self._commit_under_way()
        with self.damage(f"its branch {BRANCH!r}"):
            head = str(self.repo.lookup_branch(BRANCH))
        if settled and self._mark() == mark:
            assert mark is not None
            self._head = (head, mark)
        return head

    def versions(self) -> list[Version]:
        """Every version, newest first (the repository's own first snapshot is left out)."""
        out = []
        with self.damage("its version history"):
            for info in self.repo.ancestry(branch=BRANCH):
                if info.parent_id is None:  # "Repository initialized": before the array existed
                    continue
                out.append(Version(str(info.id), info.written_at, info.message))
        return out

    # --- chunks ------------------------------------------------------------------
    def written_chunks(self, session: icechunk.Session, attr: str) -> frozenset[tuple[int, ...]]:
        """Grid coordinates of the chunks of ``attr`` that were ever written in this snapshot.

        Cached per snapshot (snapshots never change); a writable session with
        changes is listed afresh.
        """
        from zarr.core.sync import sync

        _check_process(self.name)
        key = (str(session.snapshot_id), attr)
        cacheable = session.read_only or not session.has_uncommitted_changes
        if cacheable and key in self._chunk_cache:
            return self._chunk_cache[key]

        async def collect() -> frozenset[tuple[int, ...]]:
            return frozenset([tuple(c) async for c in session.chunk_coordinates(f"/{attr}")])

        with self.damage(f"the chunk list of attribute {attr!r}"):
            chunks = sync(collect())
        if cacheable:
            if len(self._chunk_cache) > 256:
                self._chunk_cache.clear()
            self._chunk_cache[key] = chunks
        return chunks

    def bytes_on_disk(self) -> int:
        if self.location is not None:
            return self.location.total_size()
        return sum(p.stat().st_size for p in (self.directory / REPO_DIR).rglob("*") if p.is_file())


def chunk_error(err: BaseException) -> bool:
    """Whether ``err`` raised by a zarr read means damaged stored bytes (not a usage error)."""
    import icechunk

    if isinstance(err, (icechunk.IcechunkError,)):
        return True
    text = f"{type(err).__name__} {err}".lower()
    return any(
        w in text
        for w in ("zstd", "decompress", "blosc", "corrupt", "checksum", "codec", "frame", "buffer")
    )


def transport_problem(err: BaseException, location: Location, operation: str) -> Exception | None:
    """A StorageError when ``err`` says the store could not be reached or refused (not that
    stored bytes are damaged), else None."""
    from tesseradb.storage import storage_error, transport_failure

    if not transport_failure(str(err)):
        return None
    return storage_error(err, location, operation)


def icechunk_reason(err: BaseException) -> str:
    """The first lines of an Icechunk error, without its Rust span trace."""
    lines: list[str] = []
    for line in str(err).splitlines():
        text = line.strip().removeprefix("x ").removeprefix("`-> ").strip()
        if not text or text.startswith(("|", "context")):
            if lines:
                break
            continue
        lines.append(text)
    # the root cause is the last "-> " line of the chain (an S3 error code, say)
    causes = [ln.strip().split("-> ", 1)[1] for ln in str(err).splitlines() if "-> " in ln]
    if causes and causes[-1] not in lines[:2]:
        return "; ".join([*lines[:1], causes[-1]])
    return "; ".join(lines[:2]) or type(err).__name__
