"""Boxes: the hyper-rectangles arrays are read, written and iterated by.

A :class:`Box` holds, per dimension, a half-open range of *positions*
(0-based offsets from the dimension's start, as Zarr indexes), plus the axes
a numpy-style key dropped by naming one index (``arr[3, :, :]``). Users speak
in indexes (from each dimension's ``start``); this module converts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.errors import ArrayBoundsError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from tesseradb.arrays._schema import ArraySchema

__all__ = ["ArrayBoundsError", "Box", "chunk_grid", "parse_key"]


@dataclass(frozen=True)
class Box:
    lo: tuple[int, ...]
    hi: tuple[int, ...]  # exclusive
    dropped: tuple[int, ...] = ()  # axes indexed by a single integer

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(h - lo for lo, h in zip(self.lo, self.hi, strict=True))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def empty(self) -> bool:
        return any(h <= lo for lo, h in zip(self.lo, self.hi, strict=True))

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(lo, h) for lo, h in zip(self.lo, self.hi, strict=True))

    def intersect(self, other: Box) -> Box:
        lo = tuple(max(a, b) for a, b in zip(self.lo, other.lo, strict=True))
        hi = tuple(max(lo_, min(a, b)) for lo_, a, b in zip(lo, self.hi, other.hi, strict=True))
        return Box(lo, hi, self.dropped)

    def relative_to(self, outer: Box) -> tuple[slice, ...]:
        """Where this box lies inside ``outer``, as slices of an array over ``outer``."""
        return tuple(
            slice(lo - o, h - o) for lo, h, o in zip(self.lo, self.hi, outer.lo, strict=True)
        )

    def grow(self, width: Sequence[int], limit: Sequence[int]) -> Box:
        """The box widened by ``width`` cells per side, clipped to ``[0, limit)``."""
        lo = tuple(max(0, a - w) for a, w in zip(self.lo, width, strict=True))
        hi = tuple(min(n, b + w) for b, w, n in zip(self.hi, width, limit, strict=True))
        return Box(lo, hi)

    def indexes(self, schema: ArraySchema) -> tuple[slice, ...]:
        """The box as a key in indexes (positions plus each dimension's start)."""
        return tuple(
            slice(lo + d.start, hi + d.start)
            for lo, hi, d in zip(self.lo, self.hi, schema.dims, strict=True)
        )

    def world_coords(self, schema: ArraySchema) -> dict[str, Any]:
        """Each dimension's world coordinates over the box, by dimension name."""
        return {
            d.name: schema.world_axis(axis, lo, hi)
            for axis, (d, lo, hi) in enumerate(zip(schema.dims, self.lo, self.hi, strict=True))
        }

    def squeeze(self, data: Any) -> Any:
        """``data`` (shaped like the box) without the axes the key named by one index."""
        if not self.dropped:
            return data
        return data.reshape([n for i, n in enumerate(self.shape) if i not in self.dropped])


def whole(extent: Sequence[int]) -> Box:
    return Box(tuple(0 for _ in extent), tuple(extent))


def parse_key(
    key: Any, schema: ArraySchema, extent: Sequence[int], name: str, growing: bool = False
) -> Box:
    """The :class:`Box` of a numpy-style key in indexes (``None``/``...``: everything).

    ``key`` is an int, a slice (step 1), a tuple of those, or a dict from
    dimension name to an int or a ``(lo, hi)`` pair / slice. With ``growing``
    (a write), the unbounded dimension may reach past its current extent.
    """
    ndim = schema.ndim
    if key is None or key is Ellipsis:
        parts: list[Any] = [slice(None)] * ndim
    elif isinstance(key, dict):
        parts = [slice(None)] * ndim
        for dim, part in key.items():
            axis = schema.dim_index(dim)
            parts[axis] = slice(*part) if isinstance(part, tuple) else part
    else:
        parts = list(key) if isinstance(key, tuple) else [key]
        if Ellipsis in parts:
            at = parts.index(Ellipsis)
            parts[at : at + 1] = [slice(None)] * (ndim - len(parts) + 1)
        if len(parts) > ndim:
            raise ArrayBoundsError(
                f"array {name!r} has {ndim} dimensions; the key has {len(parts)} parts"
            )
        parts += [slice(None)] * (ndim - len(parts))
    lo, hi, dropped = [], [], []
    for axis, (part, dim, n) in enumerate(zip(parts, schema.dims, extent, strict=True)):
        limit: int | None = dim.end - dim.start if dim.end is not None else n
        if growing and not dim.bounded:
            limit = None
        if isinstance(part, slice):
            if part.step not in (None, 1):
                raise ArrayBoundsError(
                    f"array {name!r}, dimension {dim.name!r}: steps are not supported ({part})"
                )
            a = dim.start if part.start is None else _index(part.start, dim.name, name)
            b = dim.start + n if part.stop is None else _index(part.stop, dim.name, name)
            a, b = a - dim.start, b - dim.start
            if a < 0 or (limit is not None and b > limit) or b < a:
                raise ArrayBoundsError(_outside(name, dim, part.start, part.stop, n))
        else:
            i = _index(part, dim.name, name) - dim.start
            if i < 0 or (limit is not None and i >= limit) or (limit is None and i < 0):
                raise ArrayBoundsError(_outside(name, dim, part, None, n))
            a, b = i, i + 1
            dropped.append(axis)
        lo.append(a)
        hi.append(b)
    return Box(tuple(lo), tuple(hi), tuple(dropped))


def _index(value: Any, dim: str, name: str) -> int:
    import numpy as np

    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise ArrayBoundsError(
        f"array {name!r}, dimension {dim!r}: indexes are integers, not {value!r}"
    )


def _outside(name: str, dim: Any, a: Any, b: Any, extent: int) -> str:
    end = dim.end if dim.end is not None else dim.start + extent
    what = f"{a}" if b is None else f"{a}:{b}"
    grow = "" if dim.bounded else " (unbounded: only writes may reach past the end)"
    return f"array {name!r}, dimension {dim.name!r}: {what} is outside [{dim.start}, {end}){grow}"


def chunk_grid(box: Box, chunks: Sequence[int]) -> Iterator[tuple[tuple[int, ...], Box]]:
    """The chunks (grid coordinates and their part of ``box``) that ``box`` touches, in C order."""
    import itertools

    if box.empty:
        return
    ranges = [
        range(lo // c, (hi - 1) // c + 1) for lo, hi, c in zip(box.lo, box.hi, chunks, strict=True)
    ]
    for coords in itertools.product(*ranges):
        part = Box(
            tuple(max(lo, i * c) for lo, i, c in zip(box.lo, coords, chunks, strict=True)),
            tuple(min(hi, (i + 1) * c) for hi, i, c in zip(box.hi, coords, chunks, strict=True)),
        )
        yield coords, part


def chunk_box(coords: Sequence[int], chunks: Sequence[int], extent: Sequence[int]) -> Box:
    """The cells of chunk ``coords``, clipped to the array's extent."""
    return Box(
        tuple(i * c for i, c in zip(coords, chunks, strict=True)),
        tuple(min(n, (i + 1) * c) for i, c, n in zip(coords, chunks, extent, strict=True)),
    )
