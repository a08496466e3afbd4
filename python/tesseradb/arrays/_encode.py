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

from tesseradb.arrays._boxes import Box, chunk_box, chunk_grid
from tesseradb.arrays._decode import chunk_codec, chunk_keys, stored_chunks

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    import numpy as np


def write_box(
    session: Any, array: Any, values: np.ndarray, box: Box, chunk_shape: Sequence[int]
) -> None:
    """Write ``values`` (shaped like ``box``) into the Zarr ``array`` of a writable ``session``."""
    import numpy as np

    from tesseradb import _core

    codec = chunk_codec(array)
    if codec is None or np.dtype(array.dtype).kind not in "biuf" or box.empty:
        array[box.slices] = values
        return
    whole: list[list[int]] = []
    for coords, part in chunk_grid(box, chunk_shape):
        cells_of_chunk = chunk_box(coords, chunk_shape, array.shape)
        if (part.lo, part.hi) == (cells_of_chunk.lo, cells_of_chunk.hi):
            whole.append(list(coords))
        else:  # the chunk's other cells are kept: zarr reads, patches and rewrites it
            array[part.slices] = values[part.relative_to(box)]
    if not whole:
        return
    cells, (itemsize, level, fill) = _cells_and_encoding(array, values)
    layout = _core.ChunkLayout(list(chunk_shape), list(box.lo), list(box.hi), itemsize, *codec)
    payloads = _core.encode_chunks(cells, layout, level, fill, whole)
    store_payloads(session, chunk_keys(array, whole), payloads)


def _cells_and_encoding(
    array: Any, values: np.ndarray
) -> tuple[np.ndarray, tuple[int, int, bytes]]:
    """``values`` as little-endian bytes of the array's dtype, and how its chunks are
    encoded: (itemsize, zstd level, the fill value's bytes)."""
    import numpy as np
    from zarr.codecs import ZstdCodec

    dtype = np.dtype(array.dtype).newbyteorder("<")
    cells = np.ascontiguousarray(values, dtype=dtype)
    level = next((c.level for c in array.metadata.codecs if isinstance(c, ZstdCodec)), 0)
    fill = np.asarray(array.metadata.fill_value, dtype=dtype).tobytes()
    encoding = (dtype.itemsize, level, fill)
    return cells.reshape(-1).view(np.uint8), encoding


def store_payloads(session: Any, keys: list[str], payloads: list[bytes]) -> None:
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


def scatter_supported(array: Any) -> bool:
    """Whether :func:`scatter_cells` can write the Zarr ``array`` (its encoding and dtype)."""
    import numpy as np

    return chunk_codec(array) is not None and np.dtype(array.dtype).kind in "biuf"


def scatter_cells(
    session: Any,
    where: str,
    array: Any,
    cells: Any,
    values: np.ndarray,
    written: Collection[tuple[int, ...]],
) -> tuple[tuple[int, ...], str] | None:
    """Write ``values`` at the ``cells`` (a ``_core.TripleCells``: cells bucketed by
    chunk) of the Zarr ``array`` (which :func:`scatter_supported`), whose chunks
    ``written`` are stored: the Rust kernel patches each touched chunk (its stored
    cells decoded, or the fill value) and encodes it; the payloads are stored in one
    batch. (chunk, reason) for a stored chunk that cannot be decoded; None when done."""
    from tesseradb import _core

    codec = chunk_codec(array)
    assert codec is not None, "scatter_cells of an encoding the kernel does not write"
    existing: list[tuple[np.ndarray, list[int]]] = []
    if written:  # else every touched chunk starts from the fill value: nothing to fetch
        stored = [c for c in map(tuple, cells.chunks) if c in written]
        payloads, unreadable = stored_chunks(session, where, array, stored)
        if unreadable is not None:
            return unreadable
        existing = [(p, list(c)) for p, c in zip(payloads, stored, strict=True) if p is not None]
    flat, (itemsize, level, fill) = _cells_and_encoding(array, values)
    extent = list(array.shape)
    layout = _core.ChunkLayout(list(array.chunks), [0] * len(extent), extent, itemsize, *codec)
    coords, out, failed = cells.scatter(flat, layout, level, fill, existing)
    if failed is not None:
        index, reason = failed
        return tuple(existing[index][1]), reason
    store_payloads(session, chunk_keys(array, coords), out)
    return None
