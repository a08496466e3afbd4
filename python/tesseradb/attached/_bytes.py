"""The bytes of an attached file: a local file, or an object in a bucket read in place.

:class:`LocalBytes` reads with ``pread``. :class:`RemoteBytes` reads an S3 object with
ranged GETs, each pinned to the entity tag the file had when it was opened (``If-Match``),
so an object replaced mid-read fails the read instead of mixing two versions. Small
reads (HDF5's superblock, object headers, B-trees and heaps) go through a shared
block cache keyed by URL, entity tag and block, bounded in bytes: metadata and chunk
indexes are fetched once per file version, not once per query. Large reads (column
data) go straight to the store; the scan's threads issue them concurrently.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tesseradb._cache import ByteBudgetCache
from tesseradb.errors import AttachedFileError

if TYPE_CHECKING:
    from tesseradb.storage import Location

__all__ = [
    "BLOCK_CACHE",
    "LocalBytes",
    "RemoteBytes",
    "RemoteFile",
    "bound_block_cache",
    "clear_remote_cache",
    "opening_identity",
    "remote_identity",
    "warm_object_headers",
]

BLOCK = 256 << 10  # the unit of cached small reads
LARGE = 4 * BLOCK  # reads at least this long bypass the cache
# A file up to this size is fetched whole when first opened, in ranged GETs of at least
# PART bytes, at most PARTS of them at once: HDF5 keeps each dataset's header beside its
# data, so discovering a file's tables touches blocks all over it, one round trip each,
# where a few parallel GETs bring all (and a file of one PART comes in one request)
WHOLE = 64 << 20
PART = 16 << 20
PARTS = 8
# A larger file's object headers are fetched together once their addresses are known from
# their group's links (warm_object_headers): at most this many GETs in flight, and the
# next block too when a header starts this close to a block's end
HEADER_FETCHES = 16
HEADER_REACH = 8 << 10
# ... and at most this many blocks (64 MiB) for one level: past it (a group of thousands of
# datasets spread over a huge file) the rest are read as HDF5 asks, not all fetched at once
HEADER_BLOCKS = 256


class LocalBytes:
    """A local file's bytes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size  # (files are opened anew for each statement)

    def pread(self, size: int, offset: int) -> bytes:
        return os.pread(self.fd, size, offset)

    def readinto(self, target: memoryview, offset: int) -> int:
        return os.preadv(self.fd, [target], offset)

    def close(self) -> None:
        os.close(self.fd)


# blocks of remote files by (URL, entity tag, block number): a version's bytes never change
BLOCK_CACHE: ByteBudgetCache[tuple[str, str, int], bytes] = ByteBudgetCache(4 * WHOLE)


def _keep_blocks(url: str, etag: str | None, first: int, data: bytes) -> None:
    """Cache ``data``, a file's bytes from the start of block ``first`` on, block by block
    (a short last block only where the file ends)."""
    for i in range(-(-len(data) // BLOCK)):
        BLOCK_CACHE.put((url, etag or "", first + i), data[i * BLOCK : (i + 1) * BLOCK])


def bound_block_cache(memory_limit: int) -> None:
    """Keep the process's block cache within an eighth of ``memory_limit`` bytes (a
    database opened with ``memory_limit``); the lowest bound asked for stays."""
    BLOCK_CACHE.shrink_to(memory_limit // 8)


def clear_remote_cache() -> None:
    """Forget every cached block of files in buckets (later reads fetch them again)."""
    BLOCK_CACHE.clear()


def remote_identity(location: Location, key: str) -> dict[str, Any]:
    """What identifies an object's current content: its URL, size and entity tag."""
    try:
        found = location.head(key)
    except FileNotFoundError:
        raise AttachedFileError(f"attached file {location.url}/{key} no longer exists") from None
    return {"path": f"{location.url}/{key}", "size": found.size, "etag": found.etag}


def opening_identity(location: Location, key: str) -> dict[str, Any]:
    """What identifies an object's current content (as :func:`remote_identity`), learnt
    from one plain GET instead of a HEAD: the answer's size and entity tag belong to the
    body it carries. A file of up to WHOLE bytes is kept whole in the block cache, so it
    is attached with this one request; of a larger one the first PART bytes are kept and
    the rest of the answer is dropped unread."""
    import obstore

    url = f"{location.url}/{key}"
    try:
        got = obstore.get(location.store(), key)
        size, etag = int(got.meta["size"]), got.meta.get("e_tag")
        keep = size if size <= WHOLE else min(size, PART)
        pieces, have = [], 0
        for piece in got.stream(min_chunk_size=BLOCK):
            pieces.append(bytes(piece))
            have += len(pieces[-1])
            if have >= keep:
                break
        data = b"".join(pieces)[:keep]
    except Exception:  # (whatever went wrong, the HEAD says it with the right error)
        return remote_identity(location, key)
    if len(data) != keep:  # (cut short: a whole file, or whole blocks, or nothing)
        return remote_identity(location, key)
    _keep_blocks(url, etag, 0, data)
    return {"path": url, "size": size, "etag": etag}


class RemoteBytes:
    """An S3 object's bytes as of entity tag ``etag`` (a changed object fails every read)."""

    def __init__(self, location: Location, key: str, size: int, etag: str | None) -> None:
        self.location = location
        self.key = key
        self.size = size
        self.etag = etag
        self.url = f"{location.url}/{key}"

    def _get(self, start: int, end: int) -> bytes:
        import obstore

        from tesseradb.storage import storage_error

        end = min(end, self.size)
        if end <= start:
            return b""
        options: dict[str, Any] = {"range": (start, end)}
        if self.etag:
            options["if_match"] = self.etag
        try:
            return bytes(obstore.get(self.location.store(), self.key, options=options).bytes())  # type: ignore[arg-type]
        except Exception as err:
            if type(err).__name__ == "PreconditionError":
                raise AttachedFileError(
                    f"attached file {self.url} was replaced while it was being read; "
                    "nothing of it was answered (run the statement again)"
                ) from None
            if isinstance(err, FileNotFoundError) or type(err).__name__ == "NotFoundError":
                raise AttachedFileError(f"attached file {self.url} no longer exists") from None
            raise storage_error(err, self.location, "read", self.key) from None

    def prefetch(self) -> None:
        """Bring a small file's blocks into the cache at once (concurrent ranged GETs);
        a larger file is read block by block as asked."""
        if self.size > WHOLE:
            return
        blocks = -(-self.size // BLOCK)
        missing = [
            b for b in range(blocks) if BLOCK_CACHE.get((self.url, self.etag or "", b)) is None
        ]
        if not missing:
            return
        per_part = max(-(-len(missing) // PARTS), PART // BLOCK)
        self._fetch_runs([missing[i : i + per_part] for i in range(0, len(missing), per_part)])

    def warm(self, offsets: Iterable[int]) -> None:
        """Bring the blocks holding ``offsets`` (object headers a reader is about to open)
        into the cache together: one round trip for all, not one per header."""
        wanted: set[int] = set()
        for offset in offsets:
            if 0 <= offset < self.size:
                wanted.add(offset // BLOCK)
                if (
                    offset % BLOCK > BLOCK - HEADER_REACH
                    and (offset // BLOCK + 1) * BLOCK < self.size
                ):
                    wanted.add(offset // BLOCK + 1)
        missing = sorted(
            b for b in wanted if BLOCK_CACHE.get((self.url, self.etag or "", b)) is None
        )[:HEADER_BLOCKS]
        runs: list[list[int]] = []
        for b in missing:  # (adjacent blocks in one GET)
            if runs and runs[-1][-1] == b - 1:
                runs[-1].append(b)
            else:
                runs.append([b])
        self._fetch_runs(runs, HEADER_FETCHES)

    def _fetch_runs(self, runs: list[list[int]], at_once: int = PARTS) -> None:
        """Fetch each run of blocks with one ranged GET, ``at_once`` GETs in flight."""
        if not runs:
            return

        def fetch(run: list[int]) -> None:
            # (a run may skip cached blocks: fetched from its first to its last block)
            first, last = run[0], run[-1]
            _keep_blocks(self.url, self.etag, first, self._get(first * BLOCK, (last + 1) * BLOCK))

        from tesseradb.executor import Threads

        # (the first error, if any, is raised here)
        Threads(at_once).map(fetch, runs, what=f"reading {self.url}")

    def pread(self, size: int, offset: int) -> bytes:
        if size <= 0 or offset >= self.size:
            return b""
        end = min(offset + size, self.size)
        first, last = offset // BLOCK, (end - 1) // BLOCK
        if end - offset >= LARGE:
            cached = [
                BLOCK_CACHE.get((self.url, self.etag or "", b)) for b in range(first, last + 1)
            ]
            if any(block is None for block in cached):
                return self._get(offset, end)  # (column data: straight from the store)
            parts: list[bytes] = cached  # type: ignore[assignment]
        else:
            parts = [self._block(b) for b in range(first, last + 1)]
        joined = parts[0] if len(parts) == 1 else b"".join(parts)
        skip = offset - first * BLOCK
        return joined[skip : skip + (end - offset)]

    def _block(self, index: int) -> bytes:
        key = (self.url, self.etag or "", index)
        found = BLOCK_CACHE.get(key)
        if found is None:
            found = self._get(index * BLOCK, (index + 1) * BLOCK)
            BLOCK_CACHE.put(key, found)
        return found

    def readinto(self, target: memoryview, offset: int) -> int:
        data = self.pread(target.nbytes, offset)
        target[: len(data)] = data
        return len(data)

    def close(self) -> None:
        pass  # (nothing is held open: each read is its own request)


def warm_object_headers(file: Any, source: RemoteBytes) -> None:
    """Fetch the object headers of every group and dataset in the HDF5 ``file`` (open over
    ``source``) a level of the hierarchy at a time, before they are read one by one.

    A large file keeps each dataset's header beside its data, blocks apart, and h5py
    reads them in turn: a round trip each. A group's links name the address of each
    member's header without reading it, so all the members' headers of a level come in
    one round of concurrent GETs.
    """
    import h5py

    level = [file]
    seen: set[int] = set()
    while level:
        members = []
        for group in level:
            for name in group:
                info = group.id.links.get_info(name.encode())
                if info.type == h5py.h5l.TYPE_HARD and info.u not in seen:
                    seen.add(info.u)
                    members.append((group, name, info.u))
        source.warm(address for _, _, address in members)
        level = [
            found for group, name, _ in members if isinstance(found := group.get(name), h5py.Group)
        ]


class RemoteFile(io.RawIOBase):
    """A read-only file object over :class:`RemoteBytes`, for ``h5py.File(fileobj)``."""

    def __init__(self, source: RemoteBytes) -> None:
        super().__init__()
        self.source = source
        self._position = 0
        source.prefetch()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.source.size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        got = self.source.readinto(view, self._position)
        self._position += got
        return got
