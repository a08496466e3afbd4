"""Reading a box of one attribute by decoding its stored chunks in Rust.

zarr-python decodes each chunk a read touches into a new buffer of the whole
chunk and copies the wanted part out, one chunk per task of its event loop.
For the encodings TesseraDB writes (little-endian ``bytes``, then ``zstd`` or
nothing, then ``crc32c``) :func:`read_box` fetches the chunks' stored bytes
from the Icechunk session in one batch and ``_core.decode_chunks`` decodes
them in parallel with the GIL released, each only as far as the box's last
cell, straight into the result. Any other encoding returns None and the
caller reads through zarr-python.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tesseradb._cache import ByteBudgetCache
from tesseradb.arrays._boxes import Box, chunk_grid
from tesseradb.arrays._repository import icechunk_reason
from tesseradb.errors import StorageError
from tesseradb.storage import explain, is_url, transport_failure

if TYPE_CHECKING:
    import numpy as np


def chunk_codec(array: Any) -> tuple[str, bool] | None:
    """(codec, checksum) for ``_core.decode_chunks`` if it can read ``array``'s chunks, else None."""
    from zarr.codecs import BytesCodec, Crc32cCodec, ZstdCodec

    if sys.byteorder != "little":
        return None
    codecs = list(array.metadata.codecs)
    if not codecs or not isinstance(codecs[0], BytesCodec):
        return None
    if codecs[0].endian is not None and codecs[0].endian.value != "little":
        return None
    rest = codecs[1:]
    checksum = bool(rest) and isinstance(rest[-1], Crc32cCodec)
    if checksum:
        rest = rest[:-1]
    if not rest:
        return "raw", checksum
    if len(rest) == 1 and isinstance(rest[0], ZstdCodec):
        return "zstd", checksum
    return None


class PayloadCache(ByteBudgetCache[tuple[str, str, str], "np.ndarray"]):
    """Stored chunk bytes of committed snapshots, least recently used dropped past a byte budget.

    A snapshot never changes, so (repository, snapshot, key) always names the
    same bytes: repeated reads skip Icechunk's fetch (~0.25 ms per chunk on a
    local disk, more than decoding a well-compressed chunk) the way a
    database's buffer pool skips its disk. Sessions with uncommitted writes
    are never cached. A chunk over an eighth of the budget is not kept.
    """

    def __init__(self, budget: int) -> None:
        super().__init__(budget, largest=budget // 8)


PAYLOADS = PayloadCache(256 << 20)

# Decoded chunks of committed snapshots, for reads of a few chunks (a point or a small
# range: decoding a chunk was most of such a read once its stored bytes were cached).
# Keyed like PAYLOADS, plus the cell type; the value is the whole chunk's bytes.
DECODED: ByteBudgetCache[tuple[str, str, str, str], np.ndarray] = ByteBudgetCache(
    256 << 20, largest=32 << 20
)
# reads of at most this many chunks keep (and use) whole decoded chunks; larger reads
# decode each chunk only as far as they need it, straight into their result
DECODED_READ_CHUNKS = 4

# Chunk fetches in flight at once for one read. Unbounded, a full read of a 64 MiB
# array in a bucket sent 256 requests together and took 1.5 s; 64 at a time took
# 0.85 s: past a few dozen, more connections only contend (for the client's sockets
# and the endpoint's threads) instead of adding bandwidth.
FETCH_CONCURRENCY = 64


def bound_chunk_caches(memory_limit: int) -> None:
    """Keep this process's two chunk caches within an eighth of ``memory_limit`` bytes
    each (a database opened with ``memory_limit``); the lowest bound asked for stays."""
    for cache in (PAYLOADS, DECODED):
        cache.shrink_to(memory_limit // 8)


def clear_chunk_cache() -> None:
    """Drop every cached stored and decoded chunk (later reads fetch from the repositories
    again)."""
    PAYLOADS.clear()
    DECODED.clear()


def fetch_chunks(session: Any, where: str, keys: Sequence[str]) -> list[np.ndarray | None]:
    """The stored bytes of each key in ``session`` of the repository at ``where`` as a uint8
    array (None for a chunk never written), from :data:`PAYLOADS` or fetched concurrently.
    Arrays, not bytes: they view the store's buffers, where bytes would copy them."""
    import asyncio

    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    snapshot = str(session.snapshot_id) if session.read_only else None
    found: list[np.ndarray | None] = [None] * len(keys)
    missing = list(range(len(keys)))
    if snapshot is not None:
        for i, key in enumerate(keys):
            found[i] = PAYLOADS.get((where, snapshot, key))
        missing = [i for i in missing if found[i] is None]
    if not missing:
        return found
    prototype = default_buffer_prototype()

    limit = asyncio.Semaphore(FETCH_CONCURRENCY)

    async def one(key: str) -> Any:
        async with limit:
            return await session.store.get(key, prototype)

    async def fetch() -> list[Any]:
        return await asyncio.gather(*(one(keys[i]) for i in missing))

    for i, buffer in zip(missing, sync(fetch()), strict=True):
        if buffer is not None:
            found[i] = buffer.as_numpy_array()
            if snapshot is not None:
                PAYLOADS.put((where, snapshot, keys[i]), found[i])
    return found


def chunk_keys(array: Any, chunks: Sequence[Sequence[int]]) -> list[str]:
    """The store keys of ``chunks`` (grid coordinates) of the Zarr ``array``."""
    prefix = f"{array.path}/" if array.path else ""
    return [prefix + array.metadata.encode_chunk_key(tuple(c)) for c in chunks]


def stored_chunks(
    session: Any, where: str, array: Any, chunks: Sequence[tuple[int, ...]]
) -> tuple[list[np.ndarray | None], tuple[tuple[int, ...], str] | None]:
    """The stored bytes of each of ``chunks`` (grid coordinates) of the Zarr ``array``, and
    None, or ([], (chunk, reason)) for a chunk whose file is missing or cut short."""
    import icechunk

    keys = chunk_keys(array, chunks)
    try:
        return fetch_chunks(session, where, keys), None
    except icechunk.IcechunkError:
        pass
    # one fetch failed: find which, one by one, to name it
    for coords, key in zip(chunks, keys, strict=True):
        try:
            fetch_chunks(session, where, [key])
        except icechunk.IcechunkError as err:
            if is_url(where) and transport_failure(str(err)):
                # the store was not reached or refused: nothing says the chunk is damaged
                raise StorageError(
                    f"cannot read chunk {tuple(coords)} of the array at {where}: "
                    f"{explain(icechunk_reason(err))}"
                ) from None
            return [], (tuple(coords), f"its file cannot be read: {icechunk_reason(err)}")
    return [], (tuple(chunks[0]), "its file could not be read (the error did not recur)")


def read_box(
    session: Any,
    where: str,
    array: Any,
    fill: Any,
    dtype: np.dtype[Any],
    box: Box,
    chunk_shape: Sequence[int],
) -> tuple[np.ndarray, tuple[tuple[int, ...], str] | None] | None:
    """The cells of ``box`` and None, or (partial result, (chunk, reason)) for a chunk that
    cannot be decoded; None when this path cannot read ``array``'s encoding."""
    import numpy as np

    from tesseradb import _core

    codec = chunk_codec(array)
    if codec is None:
        return None
    out = np.empty(box.shape, dtype=dtype)
    parts = list(chunk_grid(box, chunk_shape))
    if session.read_only and len(parts) <= DECODED_READ_CHUNKS:
        # a few chunks of a committed snapshot: each decoded whole once and kept
        wholes, failure = _decoded_chunks(session, where, array, dtype, chunk_shape, codec, parts)
        for (coords, part), whole in zip(parts, wholes, strict=True):
            if whole is None:  # never written (or past a failure): the fill value
                out[part.relative_to(box)] = fill
                continue
            cells = whole.view(dtype).reshape(tuple(chunk_shape))
            origin = Box(tuple(c * n for c, n in zip(coords, chunk_shape, strict=True)), part.hi)
            out[part.relative_to(box)] = cells[part.relative_to(origin)]
        return out, failure
    payloads, unreadable = stored_chunks(session, where, array, [c for c, _ in parts])
    if unreadable is not None:
        return out, unreadable
    stored: list[tuple[np.ndarray, list[int]]] = []
    for (coords, part), payload in zip(parts, payloads, strict=True):
        if payload is None:  # never written: the fill value
            out[part.relative_to(box)] = fill
        else:
            stored.append((payload, list(coords)))
    layout = _core.ChunkLayout(
        list(chunk_shape), list(box.lo), list(box.hi), out.dtype.itemsize, *codec
    )
    failed = _core.decode_chunks(stored, layout, out.reshape(-1).view(np.uint8))
    if failed is not None:
        index, reason = failed
        return out, (tuple(stored[index][1]), reason)
    return out, None


def _decoded_chunks(
    session: Any,
    where: str,
    array: Any,
    dtype: np.dtype[Any],
    chunk_shape: Sequence[int],
    codec: tuple[str, bool],
    parts: list[tuple[tuple[int, ...], Box]],
) -> tuple[list[np.ndarray | None], tuple[tuple[int, ...], str] | None]:
    """Each of ``parts``' chunks decoded whole (its bytes; None: never written), from
    :data:`DECODED` or decoded now and kept there; and the first chunk that cannot be
    read or decoded, with why (the chunks from it on are then None)."""
    import numpy as np

    from tesseradb import _core

    snapshot = str(session.snapshot_id)
    keys = chunk_keys(array, [c for c, _ in parts])
    kind = np.dtype(dtype).str
    wholes: list[np.ndarray | None] = [DECODED.get((where, snapshot, k, kind)) for k in keys]
    missing = [i for i, whole in enumerate(wholes) if whole is None]
    if not missing:
        return wholes, None
    payloads, unreadable = stored_chunks(session, where, array, [parts[i][0] for i in missing])
    if unreadable is not None:
        return [None] * len(parts), unreadable
    itemsize = np.dtype(dtype).itemsize
    for i, payload in zip(missing, payloads, strict=True):
        if payload is None:
            continue  # never written
        coords = parts[i][0]
        origin = [c * n for c, n in zip(coords, chunk_shape, strict=True)]
        end = [o + n for o, n in zip(origin, chunk_shape, strict=True)]
        whole = np.empty(math.prod(chunk_shape) * itemsize, dtype=np.uint8)
        layout = _core.ChunkLayout(list(chunk_shape), origin, end, itemsize, *codec)
        failed = _core.decode_chunks([(payload, list(coords))], layout, whole)
        if failed is not None:
            return [w if j < i else None for j, w in enumerate(wholes)], (coords, failed[1])
        DECODED.put((where, snapshot, keys[i], kind), whole)
        wholes[i] = whole
    return wholes, None


def reduce_box(
    session: Any,
    where: str,
    array: Any,
    attr: Any,
    box: Box,
    chunks: Sequence[tuple[int, ...]],
    chunk_shape: Sequence[int],
    extremes: bool,
) -> tuple[list[tuple[Any, ...]], tuple[tuple[int, ...], str] | None] | None:
    """(count, sum, min, max, NaN seen) of the non-NULL cells of each of ``chunks``' part of
    ``box``, reduced in Rust without making the cells (min, max and NaN seen only with
    ``extremes``); (_, (chunk, reason)) for a chunk that cannot be decoded; None when this
    path cannot read ``array``'s encoding."""
    import numpy as np

    from tesseradb import _core

    codec = chunk_codec(array)
    if codec is None:
        return None
    payloads, unreadable = stored_chunks(session, where, array, chunks)
    if unreadable is not None:
        return [], unreadable
    stored = [(p, list(c)) for p, c in zip(payloads, chunks, strict=True) if p is not None]
    # a chunk written for other attributes only holds this one's fill value
    unwritten = [list(c) for p, c in zip(payloads, chunks, strict=True) if p is None]
    dtype = attr.numpy_dtype
    null = np.asarray(attr.fill, dtype=dtype).tobytes() if attr.nullable else None
    geometry = (list(chunk_shape), list(box.lo), list(box.hi), dtype.itemsize)
    layout = _core.ChunkLayout(*geometry, *codec)
    partials, failed = _core.reduce_chunks(stored, layout, dtype.kind, null, extremes)
    if failed is not None:
        index, reason = failed
        return [], (tuple(stored[index][1]), reason)
    if unwritten:
        fill = np.full(tuple(chunk_shape), attr.fill, dtype=dtype).reshape(-1).view(np.uint8)
        raw = _core.ChunkLayout(*geometry, "raw", False)
        filled, _ = _core.reduce_chunks(
            [(fill, c) for c in unwritten], raw, dtype.kind, null, extremes
        )
        partials += filled
    return partials, None


def regrid_box(
    session: Any,
    where: str,
    array: Any,
    dtype: np.dtype[Any],
    box: Box,
    chunk_shape: Sequence[int],
    weights: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray | None, tuple[tuple[int, ...], str] | None] | None:
    """The area-weighted regrid of a 3-D ``box`` of a non-nullable attribute by the three
    axes' CSR ``weights``, each stored chunk decoded and contracted in Rust without
    materialising the box: (result, None), or (None, (chunk, reason)) for a chunk that
    cannot be decoded; None when this path cannot (another encoding, an unwritten chunk)."""
    from tesseradb import _core

    codec = chunk_codec(array)
    if codec is None or dtype.kind not in "biuf" or len(chunk_shape) != 3:
        return None
    coords = [c for c, _ in chunk_grid(box, chunk_shape)]
    payloads, unreadable = stored_chunks(session, where, array, coords)
    if unreadable is not None:
        return None, unreadable
    if any(p is None for p in payloads):
        return None  # an unwritten chunk holds the fill value: the plain path makes it
    stored = [(p, list(c)) for p, c in zip(payloads, coords, strict=True)]
    layout = _core.ChunkLayout(
        list(chunk_shape), list(box.lo), list(box.hi), dtype.itemsize, *codec
    )
    result, failed = _core.regrid_chunks(stored, layout, dtype.kind, list(weights))
    if failed is not None:
        index, reason = failed
        return None, (tuple(stored[index][1]), reason)
    return result, None
