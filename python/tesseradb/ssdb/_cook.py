"""F1, cooking raw pixels into observations: the Rust kernel, whole or per chunk.

Cooking a chunk with a halo of D1 keeps exactly the observations of the
whole image whose center lies in the chunk's core: an observation is never
wider or taller than D1 (wider ones are dropped, as the paper bounds them),
so one centred in the core lies wholly inside the halo, and a cut piece
that reaches the halo's edge is wider than D1 and dropped. Every sum is
taken in world coordinates, in integers where the reference uses doubles,
so the two give the same numbers bit for bit (tested).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tesseradb.errors import InvalidArgumentError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from tesseradb.arrays import Array

__all__ = ["OBSERVATION_COLUMNS", "cook", "cook_image", "observations_table"]

# what cook() returns, in order (polygon: list of {x, y} in world coordinates)
OBSERVATION_COLUMNS = [
    "obs_id",
    "x",
    "y",
    "pixelsum",
    "avgdist",
    "npix",
    "xmin",
    "ymin",
    "xmax",
    "ymax",
    "polygon",
]
_SCALARS = ["x", "y", "pixelsum", "avgdist", "npix", "xmin", "ymin", "xmax", "ymax"]


def _int(value: Any, name: str, low: int | None = None) -> int:
    import numbers

    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise InvalidArgumentError(f"ssdb.cook: {name} must be an integer, not {value!r}")
    if low is not None and value < low:
        raise InvalidArgumentError(f"ssdb.cook: {name} must be at least {low}, not {value}")
    return int(value)


def _kernel(
    pixels: np.ndarray,
    threshold: int,
    d1: int,
    d2: int,
    origin: tuple[int, int],
    core: tuple[int, int, int, int] | None = None,
) -> dict[str, np.ndarray]:
    import numpy as np

    from tesseradb import _core

    pix = np.ascontiguousarray(pixels, dtype=np.int32)
    return dict(_core.ssdb_cook(pix, threshold, d1, d2, origin, core))


def _checked_pixels(pixels: Any) -> np.ndarray:
    import numpy as np

    array = np.asarray(pixels)
    if array.ndim != 2:
        raise InvalidArgumentError(
            f"ssdb.cook: pixels must be a 2-D array (rows, columns), not {array.ndim}-D"
        )
    if array.dtype.kind not in "iub":
        raise InvalidArgumentError(
            f"ssdb.cook: pixels must hold integers (pix values), not {array.dtype}"
        )
    if array.size and (array.min() < -(2**31) or array.max() > 2**31 - 1):
        raise InvalidArgumentError("ssdb.cook: pix values must fit in int32")
    return array


def _origin(origin: Any) -> tuple[int, int]:
    if not isinstance(origin, Sequence) or isinstance(origin, str) or len(origin) != 2:
        raise InvalidArgumentError(f"ssdb.cook: origin must be (x0, y0), not {origin!r}")
    return _int(origin[0], "origin x0"), _int(origin[1], "origin y0")


def cook(
    pixels: Any,
    threshold: int = 1000,
    d1: int = 50,
    d2: int = 50,
    origin: Sequence[int] = (0, 0),
) -> pa.Table:
    """Observations (SS-DB's F1) in a 2-D array of ``pix`` values.

    Pixels at or above ``threshold`` that touch (8-connectivity) form an
    observation; those wider or taller than ``d1`` or whose boundary polygon
    has more than ``d2`` vertices are dropped. Pixel ``[row, col]`` lies at
    world ``(x0 + col, y0 + row)``. A pyarrow Table with
    :data:`OBSERVATION_COLUMNS`, in the order each observation's first pixel
    is met in raster order.
    """
    array = _checked_pixels(pixels)
    columns = _kernel(
        array,
        _int(threshold, "threshold"),
        _int(d1, "d1", 1),
        _int(d2, "d2", 1),
        _origin(origin),
    )
    return observations_table(columns)


def observations_table(columns: dict[str, np.ndarray], first_id: int = 0) -> pa.Table:
    """The kernel's columns as the observation table, ids from ``first_id``."""
    import numpy as np
    import pyarrow as pa

    n = len(columns["x"])
    points = pa.StructArray.from_arrays(
        [pa.array(columns["poly_x"], pa.int64()), pa.array(columns["poly_y"], pa.int64())],
        names=["x", "y"],
    )
    polygon = pa.ListArray.from_arrays(pa.array(columns["poly_offsets"], pa.int32()), points)
    data: dict[str, Any] = {"obs_id": pa.array(np.arange(first_id, first_id + n, dtype=np.int64))}
    for name in _SCALARS:
        data[name] = pa.array(columns[name])
    data["polygon"] = polygon
    return pa.table(data)


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Chunks' observations as one set of columns in first-pixel raster order."""
    import numpy as np

    scalar_names = [k for k in parts[0] if not k.startswith("poly_")]
    merged = {k: np.concatenate([p[k] for p in parts]) for k in scalar_names}
    xs = np.concatenate([p["poly_x"] for p in parts])
    ys = np.concatenate([p["poly_y"] for p in parts])
    starts, ends = [], []
    base = 0
    for p in parts:
        off = p["poly_offsets"]
        starts.append(off[:-1] + base)
        ends.append(off[1:] + base)
        base += int(off[-1])
    start, end = np.concatenate(starts), np.concatenate(ends)
    order = np.lexsort((merged["first_x"], merged["first_y"]))
    merged = {k: v[order] for k, v in merged.items()}
    start, end = start[order], end[order]
    lengths = end - start
    offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    take = np.repeat(start - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
    merged["poly_offsets"] = offsets
    merged["poly_x"] = xs[take]
    merged["poly_y"] = ys[take]
    return merged


def cook_image(
    array: Array,
    image: int,
    origin: tuple[int, int],
    threshold: int,
    d1: int,
    d2: int,
    box: tuple[int, int, int, int] | None = None,
    workers: int | None = None,
) -> dict[str, np.ndarray]:
    """F1 over image ``image`` of a raw array (image, y, x), chunk by chunk in parallel.

    The image's ``pix`` is read once (its chunks decoded in parallel), then
    each chunk is cooked with a halo of ``d1`` in its own thread and keeps the
    observations centred in its core (module doc). Reading each chunk with
    its halo separately would decode every chunk up to nine times. ``box``
    (row0, row1, col0, col1, half-open) cooks only that part of the image, as
    if it were the whole image (Q2's slab): halos stop at its edges.
    """
    from concurrent.futures import ThreadPoolExecutor

    _, height, width = array.shape
    r0, r1, c0, c1 = box if box is not None else (0, height, 0, width)
    pix = array.read((slice(image, image + 1), slice(r0, r1), slice(c0, c1)), "pix")["pix"][0]
    side_y, side_x = array.schema.chunk_shape[1:]
    windows = []
    for top in range(r0 - r0 % side_y, r1, side_y):
        for left in range(c0 - c0 % side_x, c1, side_x):
            core = (max(top, r0), min(top + side_y, r1), max(left, c0), min(left + side_x, c1))
            windows.append(core)

    def one(core: tuple[int, int, int, int]) -> dict[str, np.ndarray]:
        top, bottom = max(r0, core[0] - d1), min(r1, core[1] + d1)
        left, right = max(c0, core[2] - d1), min(c1, core[3] + d1)
        part = pix[top - r0 : bottom - r0, left - c0 : right - c0]
        world_core = (
            origin[0] + core[2],
            origin[1] + core[0],
            origin[0] + core[3],
            origin[1] + core[1],
        )
        return _kernel(part, threshold, d1, d2, (origin[0] + left, origin[1] + top), world_core)

    with ThreadPoolExecutor(workers or min(len(windows), os.cpu_count() or 1)) as pool:
        parts = list(pool.map(one, windows))
    return _concat(parts)
