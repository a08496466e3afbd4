"""An array's cells as rows: the relation's schema (dimension columns in world
coordinates, then the attributes; a nullable attribute's fill value reads as NULL),
the box a predicate on dimensions prunes chunks to, and the scan's batches, chunk by
chunk, filtered with Arrow compute."""

from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from tesseradb.arrays._boxes import Box

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import numpy as np
    import pyarrow as pa

    from tesseradb.arrays._array import Array
    from tesseradb.arrays._schema import ArraySchema, Attribute, Dimension
    from tesseradb.sql.predicate import Predicate

__all__ = [
    "arrow_type",
    "attribute_column",
    "dim_columns",
    "estimate_rows",
    "match",
    "predicate_box",
    "relation_schema",
    "scan_batches",
]


def arrow_type(attr: Attribute) -> pa.DataType:
    import pyarrow as pa

    return pa.bool_() if attr.dtype == "bool" else pa.from_numpy_dtype(attr.numpy_dtype)


def relation_schema(schema: ArraySchema) -> pa.Schema:
    """The array's columns as a relation: its dimensions, then its attributes."""
    return _relation_schema(schema.dims, schema.attrs)


@functools.lru_cache(maxsize=256)
def _relation_schema(dims: tuple[Dimension, ...], attrs: tuple[Attribute, ...]) -> pa.Schema:
    # (made once per layout: a point query asked for it six times, 6 µs each)
    import pyarrow as pa

    fields = [pa.field(d.name, pa.int64(), nullable=False) for d in dims]
    fields += [pa.field(a.name, arrow_type(a), nullable=a.nullable) for a in attrs]
    return pa.schema(fields)


def predicate_box(
    schema: ArraySchema, extent: Sequence[int], predicate: Predicate | None
) -> tuple[Box | None, bool]:
    """The positions the predicate's dimension domains allow (None: nothing), and whether exactly.

    Exact means each dimension's domain is one interval, so the box alone
    decides the dimension predicates.
    """
    lo = [0] * schema.ndim
    hi = list(extent)
    exact = True
    if predicate is None or predicate.is_true:
        return Box(tuple(lo), tuple(hi)), True
    if predicate.is_false:
        return None, True
    for axis, dim in enumerate(schema.dims):
        dom = predicate.domain(dim.name)
        if dom is None:
            continue
        hull = dom.ranges.hull()
        if hull is None:
            return None, True
        intervals = list(dom.ranges)
        if dom.keys is not None or len(intervals) != 1:
            exact = False
        shift = schema.world_shift(axis)  # world = position + shift
        try:
            if hull.lo is not None:
                first = math.ceil(hull.lo) if hull.lo_inclusive else math.floor(hull.lo) + 1
                lo[axis] = max(lo[axis], first - shift)
            if hull.hi is not None:
                if isinstance(hull.hi, float) and math.isnan(hull.hi):
                    pass
                else:
                    last = math.floor(hull.hi) if hull.hi_inclusive else math.ceil(hull.hi) - 1
                    hi[axis] = min(hi[axis], last - shift + 1)
        except (TypeError, ValueError, OverflowError):
            exact = False  # not a number (a string bound): DuckDB decides
            continue
        if hi[axis] <= lo[axis]:
            return None, True
    return Box(tuple(lo), tuple(hi)), exact


def dim_columns(schema: ArraySchema, region: Box) -> list[np.ndarray]:
    """World coordinates of every cell of ``region`` in C order, one int64 array per dimension."""
    import numpy as np

    shape = region.shape
    out = []
    for axis, values in enumerate(region.world_coords(schema).values()):
        inner = math.prod(shape[axis + 1 :])
        outer = math.prod(shape[:axis])
        out.append(np.tile(np.repeat(values, inner), outer))
    return out


def attribute_column(attr: Attribute, values: np.ndarray) -> pa.Array:
    import pyarrow as pa

    flat = values.reshape(-1)
    return pa.array(flat, type=arrow_type(attr), mask=attr.null_mask(flat))


def scan_batches(
    array: Array, columns: Sequence[str] | None, predicate: Predicate | None
) -> Iterator[pa.RecordBatch]:
    """Batches (one per chunk part) of a superset of the cells matching ``predicate``; exact here."""
    import pyarrow as pa

    schema = array.schema
    full = relation_schema(schema)
    session = array._read_session()
    extent = array.extent(session)
    box, _ = predicate_box(schema, extent, predicate)
    if box is None:
        return
    wanted = [full.field(c).name for c in columns] if columns is not None else full.names
    needed = list(wanted)
    if predicate is not None:
        for col in predicate:
            name = full.field(match(full, col)).name
            if name not in needed:
                needed.append(name)
    dim_names = {d.name for d in schema.dims}
    regions = array._written_parts(session, box)

    def make(region: Box) -> pa.RecordBatch:
        coords = dim_columns(schema, region) if dim_names & set(needed) else None
        cols = {}
        for name in needed:
            if name in dim_names:
                assert coords is not None
                cols[name] = pa.array(coords[schema.dim_index(name)])
            else:
                attr = schema.attribute(name)
                cols[name] = attribute_column(attr, array._read_box(session, attr, region))
        batch = (
            pa.RecordBatch.from_arrays(
                list(cols.values()), schema=pa.schema([full.field(n) for n in cols])
            )
            if cols
            else _count_only_batch(region.size)
        )
        if predicate is not None and not predicate.is_true:
            batch = predicate.filter(batch)
        return batch.select(wanted) if cols else batch

    parts = [r for _, r in regions]
    if len(parts) == 1:  # a point or a small box: no thread to start for one chunk
        batch = make(parts[0])
        if batch.num_rows:
            yield batch
        return
    with ThreadPoolExecutor(2) as pool:  # decode the next chunk while this one is consumed
        for batch in pool.map(make, parts):
            if batch.num_rows:
                yield batch


def _count_only_batch(rows: int) -> pa.RecordBatch:
    """A batch of ``rows`` rows and no columns (``count(*)`` needs no column)."""
    import pyarrow as pa

    return pa.record_batch([pa.nulls(rows)], names=["_"]).select([])


def match(schema: pa.Schema, column: str) -> str:
    lower = column.lower()
    for name in schema.names:
        if name.lower() == lower:
            return name
    raise KeyError(column)


def estimate_rows(array: Array, predicate: Predicate | None) -> tuple[int, int, int]:
    """(cells in the written chunks the predicate's box touches, chunks touched, chunks written)."""
    session = array._read_session()
    extent = array.extent(session)
    written = array._written(session, list(array.schema.attrs))
    box, _ = predicate_box(array.schema, extent, predicate)
    parts = [] if box is None else array._written_parts(session, box)
    return sum(p.size for _, p in parts), len(parts), len(written)
