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

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.errors import InvalidArgumentError
from tesseradb.executor import Executor, Threads

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


def _windows(
    r0: int, r1: int, c0: int, c1: int, side_y: int, side_x: int
) -> list[tuple[int, int, int, int]]:
    """The stored chunks' parts of rows [r0, r1) x columns [c0, c1): (top, bottom, left, right)."""
    windows = []
    for top in range(r0 - r0 % side_y, r1, side_y):
        for left in range(c0 - c0 % side_x, c1, side_x):
            windows.append(
                (max(top, r0), min(top + side_y, r1), max(left, c0), min(left + side_x, c1))
            )
    return windows


@dataclass(frozen=True)
class _Cooking:
    """What every window of one cook shares: F1's parameters and the cooked rectangle."""

    threshold: int
    d1: int
    d2: int
    rect: tuple[int, int, int, int]  # rows [r0, r1) x columns [c0, c1) of the image
    sides: tuple[int, int]  # the raw array's chunk side in rows and columns


def _window_part(
    how: _Cooking, pix: np.ndarray, core: tuple[int, int, int, int]
) -> tuple[tuple[int, int, int, int], int, int, np.ndarray]:
    """A window's core, the row and column of its halo's corner, and its pixels with the halo
    (``pix`` holds the cooked rectangle)."""
    r0, r1, c0, c1 = how.rect
    top, bottom = max(r0, core[0] - how.d1), min(r1, core[1] + how.d1)
    left, right = max(c0, core[2] - how.d1), min(c1, core[3] + how.d1)
    return core, top, left, pix[top - r0 : bottom - r0, left - c0 : right - c0]


def _cook_window(
    how: _Cooking,
    origin: tuple[int, int],
    window: tuple[tuple[int, int, int, int], int, int, np.ndarray],
) -> dict[str, np.ndarray]:
    """F1 over one window with its halo, keeping the observations centred in its core."""
    core, top, left, part = window
    world_core = (
        origin[0] + core[2],
        origin[1] + core[0],
        origin[0] + core[3],
        origin[1] + core[1],
    )
    return _kernel(
        part, how.threshold, how.d1, how.d2, (origin[0] + left, origin[1] + top), world_core
    )


def _cook_whole_image(how: _Cooking, origins: list[tuple[int, int]], view: Any) -> Any:
    """A task of :func:`cook_images`: one image (read by the task), its windows one by one."""
    pix = view.data["pix"][0]
    origin = origins[view.coords[0]]  # the image's place in the list of boxes
    windows = _windows(*how.rect, *how.sides)
    return _concat([_cook_window(how, origin, _window_part(how, pix, w)) for w in windows])


def cook_images(
    array: Array,
    origins: dict[int, tuple[int, int]],
    threshold: int,
    d1: int,
    d2: int,
    workers: int | None = None,
) -> list[dict[str, np.ndarray]]:
    """F1 over whole images of a raw array (image, y, x), an image per parallel task.

    ``origins`` maps each image to cook to the world coordinates of its pixel
    [0, 0]. Each task (a thread, or a Dask worker when the database uses a
    cluster) reads its image's ``pix`` once and cooks its chunks with halos of
    ``d1`` one after another, exactly as :func:`cook_image` does; results in
    the order of ``origins``.
    """
    _, height, width = array.shape
    side_y, side_x = array.schema.chunk_shape[1:]
    how = _Cooking(threshold, d1, d2, (0, height, 0, width), (side_y, side_x))
    boxes = [(slice(i, i + 1), slice(0, height), slice(0, width)) for i in origins]
    task = functools.partial(_cook_whole_image, how, list(origins.values()))
    return array.map_boxes(task, boxes, "pix", workers)


def cook_image(
    array: Array,
    image: int,
    origin: tuple[int, int],
    threshold: int,
    d1: int,
    d2: int,
    box: tuple[int, int, int, int] | None = None,
    workers: int | None = None,
    executor: Executor | None = None,
) -> dict[str, np.ndarray]:
    """F1 over image ``image`` of a raw array (image, y, x), chunk by chunk in parallel.

    The image's ``pix`` is read once (its chunks decoded in parallel), then
    each chunk is cooked with a halo of ``d1`` as its own task (through
    ``executor``, threads by default) and keeps the observations centred in
    its core (module doc). Reading each chunk with its halo separately would
    decode every chunk up to nine times. ``box`` (row0, row1, col0, col1,
    half-open) cooks only that part of the image, as if it were the whole
    image (Q2's slab): halos stop at its edges.
    """
    _, height, width = array.shape
    rect = box if box is not None else (0, height, 0, width)
    r0, r1, c0, c1 = rect
    pix = array.read((slice(image, image + 1), slice(r0, r1), slice(c0, c1)), "pix")["pix"][0]
    side_y, side_x = array.schema.chunk_shape[1:]
    how = _Cooking(threshold, d1, d2, (r0, r1, c0, c1), (side_y, side_x))
    windows = [_window_part(how, pix, w) for w in _windows(*rect, *how.sides)]
    run = executor or Threads(workers or min(len(windows), os.cpu_count() or 1))
    parts = run.map(
        functools.partial(_cook_window, how, origin),
        windows,
        what=f"cooking image {image} of array {array.name!r}",
        limit=workers,
    )
    return _concat(parts)
