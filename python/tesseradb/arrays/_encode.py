"""Writing a box of one attribute by encoding its whole chunks in Rust.

zarr-python encodes each chunk of a write as a task of its event loop, with
a copy of the chunk at each codec; a 400 MB write spent most of its time
there rather than in zstd. For the encodings :func:`chunk_codec` knows,
:func:`write_box` has ``_core.encode_chunks`` gather and compress every chunk
the box covers whole in parallel, with the GIL released, and stores the
payloads through the Icechunk session in one batch. A chunk the box covers
only in part keeps its other cells, so it goes through zarr-python, which
reads, patches and rewrites it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb.arrays._boxes import Box, chunk_grid
from tesseradb.arrays._decode import chunk_codec

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    import numpy as np


def write_box(
    session: Any, array: Any, values: np.ndarray, box: Box, chunk_shape: Sequence[int]
) -> None:
    """Write ``values`` (shaped like ``box``) into the Zarr ``array`` of a writable ``session``."""
    import numpy as np

    codec = chunk_codec(array)
    dtype = np.dtype(array.dtype)
    if codec is None or dtype.kind not in "biuf" or box.empty:
        array[box.slices] = values
        return
    extent = array.shape
    whole: list[list[int]] = []
    for coords, part in chunk_grid(box, chunk_shape):
        start = [c * n for c, n in zip(coords, chunk_shape, strict=True)]
        end = [min(s + n, e) for s, n, e in zip(start, chunk_shape, extent, strict=True)]
        if list(part.lo) == start and list(part.hi) == end:
            whole.append(list(coords))
        else:  # the chunk's other cells are kept: zarr reads, patches and rewrites it
            array[part.slices] = values[part.relative_to(box)]
    if not whole:
        return
    cells = np.ascontiguousarray(values, dtype=dtype.newbyteorder("<"))
    payloads = _core_encode(array, codec, cells, box, chunk_shape, whole, dtype)
    prefix = f"{array.path}/" if array.path else ""
    keys = [prefix + array.metadata.encode_chunk_key(tuple(c)) for c in whole]
    _store_all(session, keys, payloads)


def _core_encode(
    array: Any,
    codec: tuple[str, bool],
    cells: np.ndarray,
    box: Box,
    chunk_shape: Sequence[int],
    whole: list[list[int]],
    dtype: np.dtype[Any],
) -> list[bytes]:
    import numpy as np

    from tesseradb import _core

    level = _zstd_level(array)
    fill = np.asarray(array.metadata.fill_value, dtype=cells.dtype).tobytes()
    return _core.encode_chunks(
        cells.reshape(-1).view(np.uint8),
        list(chunk_shape),
        list(box.lo),
        list(box.hi),
        dtype.itemsize,
        codec[0],
        codec[1],
        level,
        fill,
        whole,
    )


def _store_all(session: Any, keys: list[str], payloads: list[bytes]) -> None:
    import asyncio

    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    buffer = default_buffer_prototype().buffer

    async def store() -> None:
        await asyncio.gather(
            *(
                session.store.set(k, buffer.from_bytes(p))
                for k, p in zip(keys, payloads, strict=True)
            )
        )

    sync(store())


def scatter_cells(
    session: Any,
    where: str,
    array: Any,
    positions: np.ndarray,
    values: np.ndarray,
    chunk_shape: Sequence[int],
    written: Collection[tuple[int, ...]],
) -> tuple[tuple[int, ...], str] | bool | None:
    """Write cells at ``positions`` (n x ndim, 0-based, inside the array) of the Zarr
    ``array``, whose chunks ``written`` are stored: the Rust kernel buckets the cells by
    chunk (a counting sort), patches each touched chunk (its stored cells decoded, or the
    fill value) and encodes it; the payloads are stored in one batch. False when this
    path cannot (another encoding or dtype); (chunk, reason) for a stored chunk that
    cannot be decoded; None when done."""
    import numpy as np

    from tesseradb import _core
    from tesseradb.arrays._decode import stored_chunks

    codec = chunk_codec(array)
    dtype = np.dtype(array.dtype)
    if codec is None or dtype.kind not in "biuf":
        return False
    extent = list(array.shape)
    pos = np.ascontiguousarray(positions, dtype=np.int64)
    existing: list[tuple[np.ndarray, list[int]]] = []
    if written:  # else every touched chunk starts from the fill value: nothing to fetch
        touched = [tuple(c) for c in _core.triple_chunks(pos, list(chunk_shape), extent)]
        stored = [c for c in touched if c in written]
        payloads, unreadable = stored_chunks(session, where, array, stored)
        if unreadable is not None:
            return unreadable
        existing = [(p, list(c)) for p, c in zip(payloads, stored, strict=True) if p is not None]
    cells = np.ascontiguousarray(values, dtype=dtype.newbyteorder("<"))
    level = _zstd_level(array)
    fill = np.asarray(array.metadata.fill_value, dtype=cells.dtype).tobytes()
    coords, out, failed = _core.scatter_chunks(
        pos, cells.reshape(-1).view(np.uint8), list(chunk_shape), extent,
        dtype.itemsize, codec[0], codec[1], level, fill, existing,
    )  # fmt: skip
    if failed is not None:
        index, reason = failed
        return tuple(existing[index][1]), reason
    prefix = f"{array.path}/" if array.path else ""
    _store_all(session, [prefix + array.metadata.encode_chunk_key(tuple(c)) for c in coords], out)
    return None


def _zstd_level(array: Any) -> int:
    from zarr.codecs import ZstdCodec

    return next((c.level for c in array.metadata.codecs if isinstance(c, ZstdCodec)), 0)
