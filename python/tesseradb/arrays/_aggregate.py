"""Native aggregates of an array: ``SELECT agg(attr), ... FROM array [WHERE ...]
[GROUP BY dims]`` answered from the chunks directly, without making rows.

Per chunk, a Rust fold or numpy reductions over the non-grouped axes give
partial states (exact integer sums, counts, min/max, moments); the partials are
combined into dense group accumulators, chunks in parallel on the database's
executor. Anything it cannot answer exactly returns None and runs in DuckDB.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.arrays._boxes import Box
from tesseradb.arrays._decode import reduce_box
from tesseradb.arrays._rows import (
    arrow_type,
    attribute_column,
    dim_columns,
    match,
    predicate_box,
    relation_schema,
)
from tesseradb.executor import shares

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import pyarrow as pa

    from tesseradb.arrays._array import Array
    from tesseradb.arrays._schema import ArraySchema, Attribute
    from tesseradb.sql.predicate import Predicate

__all__ = ["AGGREGATES", "aggregate"]

AGGREGATES = ("count", "sum", "avg", "min", "max", "stddev")
_MAX_GROUPS = 1 << 26  # dense group accumulators beyond this fall back to DuckDB


def aggregate(
    array: Array,
    items: Sequence[tuple[str, str, str | None]],
    group_by: Sequence[str],
    predicate: Predicate | None,
) -> pa.Table | None:
    """Answer ``SELECT items FROM array WHERE predicate GROUP BY group_by`` from the chunks.

    ``items`` are (output name, function, column) with function one of
    :data:`AGGREGATES` (column None for ``count(*)``) or ``"column"`` for a
    grouped dimension. Returns None when this path cannot answer (grouping
    by an attribute, too many groups); the caller then runs the SQL plainly.
    """
    import pyarrow as pa

    schema = array.schema
    full = relation_schema(schema)
    try:
        group_axes = [schema.dim_index(match(full, g)) for g in group_by]
    except (KeyError, ValueError):
        return None
    if len(set(group_axes)) != len(group_axes):
        return None
    resolved: list[tuple[str, str, Any]] = []
    for out, fn, col in items:
        if fn == "column":
            if col is None:
                return None
            try:
                axis = schema.dim_index(match(full, col))
            except (KeyError, ValueError):
                return None
            if axis not in group_axes:
                return None
            resolved.append((out, fn, axis))
        elif fn == "count" and col is None:
            resolved.append((out, fn, None))
        else:
            try:
                attr = schema.attribute(match(full, col)) if col is not None else None
            except (KeyError, ValueError):
                return None
            if attr is None:  # an aggregate over a dimension: leave it to DuckDB
                return None
            if fn not in AGGREGATES or (fn in ("sum", "avg", "stddev") and attr.dtype == "bool"):
                return None
            resolved.append((out, fn, attr))

    session = array._read_session()
    extent = array.extent(session)
    box, exact_box = predicate_box(schema, extent, predicate)
    groups_shape = tuple(box.shape[a] for a in group_axes) if box is not None else ()
    if math.prod(groups_shape) > _MAX_GROUPS:
        return None
    filter_cols: list[str] = []
    if predicate is not None and not predicate.is_true:
        for col in predicate:
            name = match(full, col)
            is_dim = name in schema.dim_names
            if not is_dim or not exact_box:
                filter_cols.append(name)
    attrs_used = {a.name: a for _, fn, a in resolved if fn not in ("column",) and a is not None}
    for name in filter_cols:
        if name not in schema.dim_names:
            attrs_used.setdefault(name, schema.attribute(name))
    regions = [] if box is None else array._written_parts(session, box)
    acc = _Accumulator(resolved, groups_shape)

    if group_axes and not regions:
        return pa.table({out: pa.array([], _result_type(fn, a)) for out, fn, a in resolved})
    if (
        group_axes
        or filter_cols
        or box is None
        or not _fold_in_rust(array, session, acc, box, regions)
    ):
        # a task's accumulator has no groups: it only knows what to compute
        plan = _PartialPlan(
            attrs_used, filter_cols, predicate, group_axes, box, _Accumulator(resolved, ())
        )
        task = functools.partial(_partial_aggregate, plan)
        for offset, part in array._fan_out(session, task, [r for _, r in regions], "aggregate"):
            acc.combine(offset, part)
    assert box is not None or not group_axes
    return pa.table(acc.finish(schema, box, group_axes))


@dataclass(frozen=True)
class _PartialPlan:
    """What every chunk task of one native aggregate shares."""

    attrs_used: dict[str, Any]  # attribute name -> Attribute, read per chunk
    filter_cols: list[str]  # columns the predicate tests cell by cell
    predicate: Any
    group_axes: list[int]
    box: Box | None
    acc: _Accumulator  # without group state: its partial() computes a chunk's part


def _partial_aggregate(plan: _PartialPlan, source: Any, region: Box) -> tuple[Any, Any]:
    """One chunk's partial aggregates over its part of the box: a task of :func:`aggregate`."""
    schema = source.schema
    session = source._read_session()
    data = {name: source._read_box(session, a, region) for name, a in plan.attrs_used.items()}
    mask = None
    if plan.filter_cols:
        mask = _filter_mask(schema, plan.predicate, plan.filter_cols, region, data)
    axes = tuple(i for i in range(schema.ndim) if i not in plan.group_axes)
    order = [*plan.group_axes]  # reduce the rest, then put group axes in group-by order
    box = plan.box
    assert box is not None
    offset = tuple(region.lo[a] - box.lo[a] for a in plan.group_axes)
    return offset, plan.acc.partial(data, mask, axes, order, region.shape)


def _fold_in_rust(
    array: Array,
    session: Any,
    acc: _Accumulator,
    box: Box,
    regions: Sequence[tuple[tuple[int, ...], Box]],
) -> bool:
    """Fold every attribute's chunks into ``acc`` in Rust (no cells are made); False if the
    attributes' encoding or the functions (``stddev``) need the numpy path.

    Only for one group (no GROUP BY) and no attribute filter: then a chunk's
    count, sum, min and max over its part of the box are all the query needs.
    """
    import numpy as np

    if acc.spread:
        return False
    if not regions:
        return True  # no written chunk in the box: no rows
    entries: dict[str, Any] = {}
    coords = [c for c, _ in regions]
    wanted = {
        name: any(fn in ("min", "max") and a is attr for _, fn, a in acc.items)
        for name, attr in acc.attrs.items()
    }
    # one Rust call folds the chunks in parallel in this process; on a cluster
    # each worker folds a share of them
    executor = array._executors.current
    groups = shares(coords, 2 * executor.workers if executor.remote else 1)
    task = functools.partial(_reduce_chunks, wanted, box)
    folded = array._fan_out(session, task, groups, "aggregate")
    for name, attr in acc.attrs.items():
        partials = []
        for share in folded:
            stored = share[name]
            if stored is None:
                return False
            found, failed = stored
            if failed is not None:
                raise array._corrupt(attr, *failed)
            partials += found
        entry = _fold_partials(attr, partials, wanted[name])
        if entry is not None:
            entries[name] = entry
    acc.combine((), {"rows": np.int64(sum(r.size for _, r in regions)), **entries})
    return True


def _reduce_chunks(
    wanted: dict[str, bool], box: Box, source: Any, coords: list[tuple[int, ...]]
) -> dict[str, Any]:
    """Each attribute's (count, sum, min, max, NaN seen) per chunk of ``coords``, reduced in
    Rust (:func:`reduce_box`; min and max where ``wanted``): a task of the native fold."""
    session = source._read_session()
    where = source._repo.where
    return {
        name: reduce_box(
            session,
            where,
            source._zarr(session, name),
            source.schema.attribute(name),
            box,
            coords,
            source.schema.chunk_shape,
            extremes,
        )
        for name, extremes in wanted.items()
    }


def _fold_partials(
    attr: Attribute, partials: Sequence[tuple[Any, ...]], extremes: bool
) -> dict[str, Any] | None:
    """One accumulator entry from the chunks' (count, sum, min, max, NaN seen); None if no
    cell counted. Integer sums arrive exact (Python ints) and stay exact."""
    import numpy as np

    live = [p for p in partials if p[0] > 0]
    if not live:
        return None
    columns = list(zip(*live, strict=True))
    if attr.numpy_dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):  # (inf or NaN: SQL's answer)
            total: Any = np.array(columns[1], dtype=np.float64).sum()
    else:
        total = sum(int(v) for v in columns[1])
    entry = {"count": np.int64(sum(columns[0])), "sum": total}
    if extremes:
        entry["min"] = np.array(columns[2], dtype=_minmax_dtype(attr)).min()
        entry["max"] = np.array(columns[3], dtype=_minmax_dtype(attr)).max()
        if attr.numpy_dtype.kind == "f":
            entry["nan"] = np.bool_(any(columns[4]))
    return entry


def _result_type(fn: str, attr: Any) -> pa.DataType:
    import pyarrow as pa

    if fn in ("column", "count"):
        return pa.int64()
    if fn in ("avg", "stddev"):
        return pa.float64()
    if fn == "sum":
        return _sum_type(attr)
    return arrow_type(attr)


def _sum_type(attr: Attribute) -> pa.DataType:
    """The type of ``sum(attr)`` as DuckDB gives it: DOUBLE for floats, HUGEINT (which
    Arrow holds as decimal128(38, 0)) for integers, so sums never wrap."""
    import pyarrow as pa

    return pa.float64() if attr.numpy_dtype.kind == "f" else pa.decimal128(38, 0)


def _filter_mask(
    schema: ArraySchema, predicate: Any, names: Sequence[str], region: Box, data: dict[str, Any]
) -> np.ndarray:
    import numpy as np
    import pyarrow as pa

    cols = {}
    coords = dim_columns(schema, region) if any(n in schema.dim_names for n in names) else None
    for name in names:
        if name in schema.dim_names:
            assert coords is not None
            cols[name] = pa.array(coords[schema.dim_index(name)])
        else:
            cols[name] = attribute_column(schema.attribute(name), data[name])
    batch = pa.RecordBatch.from_pydict(cols)
    from tesseradb.sql.predicate import Predicate

    sub = Predicate({k: v for k, v in predicate.items() if _same(k, names)})
    mask = sub.mask(batch)
    if mask is None:
        return np.ones(region.shape, dtype=bool)
    return np.asarray(mask.fill_null(False), dtype=bool).reshape(region.shape)


def _same(column: str, names: Sequence[str]) -> bool:
    return column.lower() in {n.lower() for n in names}


class _Accumulator:
    """Dense per-group partial aggregates combined over chunks.

    Count, sum, min and max per group; for ``stddev`` also the mean and the
    sum of squared deviations (M2), combined by Chan et al.'s parallel
    formula, which stays accurate where a sum of squares would not.
    """

    def __init__(
        self, items: Sequence[tuple[str, str, Any]], groups_shape: tuple[int, ...]
    ) -> None:
        import numpy as np

        self.items = items
        self.shape = groups_shape
        self.rows = np.zeros(groups_shape, dtype=np.int64)
        self.state: dict[str, dict[str, np.ndarray]] = {}
        for _, fn, attr in items:
            if fn == "column" or attr is None or attr.name in self.state:
                continue
            self.state[attr.name] = {
                "count": np.zeros(groups_shape, dtype=np.int64),
                # integer sums start in int64 and become Python ints (exact)
                # once they could overflow it: see _exact_sum and _add_sums
                "sum": np.zeros(groups_shape, dtype=_sum_dtype(attr)),
                "min": np.full(groups_shape, _top(attr), dtype=_minmax_dtype(attr)),
                "max": np.full(groups_shape, _bottom(attr), dtype=_minmax_dtype(attr)),
                "nan": np.zeros(groups_shape, dtype=bool),  # a NaN was seen (floats)
            }
        self.attrs = {
            attr.name: attr for _, fn, attr in items if fn != "column" and attr is not None
        }
        self.spread = {attr.name for _, fn, attr in items if fn == "stddev"}
        for name in self.spread:
            self.state[name]["mean"] = np.zeros(groups_shape, dtype=np.float64)
            self.state[name]["m2"] = np.zeros(groups_shape, dtype=np.float64)

    def partial(
        self,
        data: dict[str, np.ndarray],
        mask: np.ndarray | None,
        axes: tuple[int, ...],
        order: list[int],
        shape: tuple[int, ...],
    ) -> dict[str, Any]:
        import numpy as np

        def reduce(values: np.ndarray, how: str) -> np.ndarray:
            out = getattr(values, how)(axis=axes) if axes else values
            # the kept axes are in array order; put them in group-by order
            kept = sorted(order)
            return np.transpose(out, [kept.index(a) for a in order]) if len(order) > 1 else out

        rows_mask = mask if mask is not None else None
        part: dict[str, Any] = {
            "rows": reduce(rows_mask, "sum")
            if rows_mask is not None
            else _full_count(shape, axes, order)
        }
        for name, attr in self.attrs.items():
            v = data[name]
            valid = rows_mask
            null = attr.null_mask(v)
            if null is not None:
                valid = ~null if valid is None else valid & ~null
            entry = {}
            entry["count"] = (
                reduce(valid, "sum") if valid is not None else _full_count(shape, axes, order)
            )
            if attr.numpy_dtype.kind == "f":
                vv = v.astype(np.float64, copy=False)
                with np.errstate(over="ignore", invalid="ignore"):  # (inf or NaN: SQL's answer)
                    entry["sum"] = reduce(
                        np.where(valid, vv, 0) if valid is not None else vv, "sum"
                    )
            else:
                entry["sum"] = _exact_sum(v, valid, axes, lambda x: reduce(x, "sum"))
            mm = v.astype(_minmax_dtype(attr), copy=False)
            if attr.numpy_dtype.kind == "f":
                isnan = np.isnan(mm)
                nan_valid = isnan if valid is None else isnan & valid
                entry["nan"] = reduce(nan_valid, "any")
                real = ~isnan if valid is None else valid & ~isnan
                entry["min"] = reduce(np.where(real, mm, np.inf), "min")
                entry["max"] = reduce(np.where(real, mm, -np.inf), "max")
            else:
                entry["min"] = reduce(
                    np.where(valid, mm, _top(attr)) if valid is not None else mm, "min"
                )
                entry["max"] = reduce(
                    np.where(valid, mm, _bottom(attr)) if valid is not None else mm, "max"
                )
            if name in self.spread:
                count = np.maximum(entry["count"], 1)
                x = v.astype(np.float64, copy=False)
                total = reduce(np.where(valid, x, 0.0) if valid is not None else x, "sum")
                mean = total / count
                expanded = _expand(mean, axes, order, shape)
                dev = (x - expanded) ** 2
                entry["mean"] = mean
                entry["m2"] = reduce(np.where(valid, dev, 0.0) if valid is not None else dev, "sum")
            part[name] = entry
        return part

    def combine(self, offset: tuple[int, ...], part: dict[str, Any]) -> None:
        import numpy as np

        if not self.shape:
            where: Any = ()
        else:
            where = tuple(
                slice(o, o + n) for o, n in zip(offset, np.shape(part["rows"]), strict=True)
            )
        self.rows[where] += part["rows"]
        for name, entry in part.items():
            if name == "rows":
                continue
            st = self.state[name]
            if name in self.spread:
                n_a, n_b = st["count"][where], entry["count"]
                n = np.maximum(n_a + n_b, 1)
                delta = entry["mean"] - st["mean"][where]
                st["m2"][where] += entry["m2"] + delta**2 * n_a * n_b / n
                st["mean"][where] += delta * n_b / n
            st["count"][where] += entry["count"]
            _add_sums(st, where, entry["sum"])
            if "min" in entry:  # left out where no min or max is asked for
                st["min"][where] = np.minimum(st["min"][where], entry["min"])
                st["max"][where] = np.maximum(st["max"][where], entry["max"])
            if "nan" in entry:
                st["nan"][where] |= entry["nan"]

    def finish(
        self, schema: ArraySchema, box: Box | None, group_axes: Sequence[int]
    ) -> dict[str, Any]:
        """The result columns: one row per group that has rows (one row without grouping)."""
        import numpy as np
        import pyarrow as pa

        keys = np.nonzero(self.rows > 0) if group_axes else None
        out: dict[str, Any] = {}
        for name, fn, attr in self.items:
            if fn == "column":
                assert box is not None and keys is not None
                axis = attr
                first = box.lo[axis] + schema.world_shift(axis)
                out[name] = pa.array(keys[list(group_axes).index(axis)].astype(np.int64) + first)
                continue
            if fn == "count" and attr is None:
                out[name] = _column(self.rows, None, keys, pa.int64())
                continue
            st = self.state[attr.name]
            empty = st["count"] == 0
            if fn == "count":
                out[name] = _column(st["count"], None, keys, pa.int64())
            elif fn == "sum":
                out[name] = _column(st["sum"], empty, keys, _sum_type(attr))
            elif fn == "avg":
                with np.errstate(all="ignore"):
                    # as DuckDB: the sum made a double, then divided (Python ints too:
                    # dividing them exactly differs from DuckDB in the last bit past 2**53)
                    divisor = np.where(empty, 1, st["count"])
                    if st["sum"].dtype == object:
                        sums = np.array([float(v) for v in st["sum"].ravel()], np.float64)
                        avg = sums.reshape(st["sum"].shape) / divisor
                    else:
                        avg = st["sum"].astype(np.float64) / divisor
                out[name] = _column(avg, empty, keys, pa.float64())
            elif fn == "stddev":  # the sample standard deviation, as SQL's stddev
                few = st["count"] < 2
                with np.errstate(all="ignore"):
                    sd = np.sqrt(st["m2"] / np.where(few, 1, st["count"] - 1))
                out[name] = _column(sd, few, keys, pa.float64())
            else:
                values = st[fn]
                if attr.numpy_dtype.kind == "f":
                    values = values.copy()
                    if fn == "max":
                        values[st["nan"]] = np.nan  # NaN sorts above every number (DuckDB)
                    else:
                        # min stays +inf when every value was NaN; a real +inf
                        # also sets max to +inf, which tells the two apart
                        values[st["nan"] & (values == np.inf) & (st["max"] != np.inf)] = np.nan
                out[name] = _column(values.astype(attr.numpy_dtype), empty, keys, arrow_type(attr))
        return out


def _column(values: Any, empty: Any, keys: Any, arrow: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    if keys is not None:
        values = values[keys]
        empty = empty[keys] if empty is not None else None
    else:
        values = np.asarray(values).reshape(1)
        empty = np.asarray(empty).reshape(1) if empty is not None else None
    if arrow is not None and pa.types.is_decimal(arrow):
        # exact integers (int64 or Python ints) into decimal128(38, 0), as DuckDB's HUGEINT
        masked = empty if empty is not None else np.zeros(len(values), dtype=bool)
        return pa.array(
            [None if m else int(v) for v, m in zip(values.tolist(), masked.tolist(), strict=True)],
            type=arrow,
        )
    return pa.array(values, type=arrow, mask=empty)


_INT64_LIMIT = 1 << 63


def _exact_sum(values: Any, valid: Any, axes: tuple[int, ...], reduce: Any) -> Any:
    """The exact sums of integer ``values`` over ``axes`` (only ``valid`` cells).

    int64 when no sum can reach 2^63 (the largest magnitude times the cells
    summed into one group); otherwise each 64-bit value is split into its
    high and low 32 bits, both summed exactly in int64, and the sums are
    joined as Python ints (an object array), so nothing wraps.
    """
    import numpy as np

    cells = math.prod(values.shape[a] for a in axes) if axes else 1
    if values.size:
        low, high = int(values.min()), int(values.max())
        bound = max(abs(low), abs(high)) * cells
    else:
        bound = 0
    if bound < _INT64_LIMIT:
        wide = values.astype(np.int64, copy=False)
        return reduce(np.where(valid, wide, 0) if valid is not None else wide)
    if values.dtype.kind == "u":
        as_u = values.astype(np.uint64, copy=False)
        high_part = (as_u >> np.uint64(32)).astype(np.int64)
        low_part = (as_u & np.uint64(0xFFFFFFFF)).astype(np.int64)
    else:
        as_i = values.astype(np.int64, copy=False)
        high_part = as_i >> 32  # arithmetic shift: value = high * 2^32 + low, 0 <= low < 2^32
        low_part = as_i & 0xFFFFFFFF
    if valid is not None:
        high_part = np.where(valid, high_part, 0)
        low_part = np.where(valid, low_part, 0)
    highs, lows = reduce(high_part), reduce(low_part)
    return np.asarray(highs).astype(object) * (1 << 32) + np.asarray(lows).astype(object)


def _add_sums(state: dict[str, Any], where: Any, part: Any) -> None:
    """Add a chunk's sums into ``state["sum"]``, turning int64 sums into Python ints
    (an object array) before an addition could overflow them."""
    import numpy as np

    total = state["sum"]
    if total.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):  # (inf or NaN is SQL's answer)
            total[where] += part
        return
    if total.dtype != object:
        part_array = np.asarray(part)
        if part_array.dtype != object:
            # a bound on every sum so far: the largest magnitude of each part added
            bound = state.get("bound", 0) + int(np.abs(part_array).max(initial=0))
            if bound < _INT64_LIMIT:
                state["bound"] = bound
                total[where] += part_array
                return
        total = state["sum"] = total.astype(object)
    total[where] += np.asarray(part).astype(object) if np.ndim(part) else int(part)


def _expand(reduced: Any, axes: tuple[int, ...], order: list[int], shape: tuple[int, ...]) -> Any:
    """A per-group array (group-by order) broadcast back over a chunk of ``shape``."""
    import numpy as np

    kept = sorted(order)
    arr = np.transpose(reduced, [order.index(a) for a in kept]) if len(order) > 1 else reduced
    return np.expand_dims(arr, axes) if axes else arr


def _full_count(shape: tuple[int, ...], axes: tuple[int, ...], order: list[int]) -> Any:
    import numpy as np

    n = math.prod(shape[a] for a in axes)
    return np.full([shape[a] for a in order], n, dtype=np.int64) if order else np.int64(n)


def _sum_dtype(attr: Attribute) -> Any:
    """The dtype a sum of ``attr`` starts in (integers may become Python ints: _add_sums)."""
    import numpy as np

    return np.float64 if attr.numpy_dtype.kind == "f" else np.int64


def _minmax_dtype(attr: Attribute) -> Any:
    import numpy as np

    return (
        np.float64
        if attr.numpy_dtype.kind == "f"
        else (np.int64 if attr.dtype != "uint64" else np.uint64)
    )


def _top(attr: Attribute) -> Any:
    import numpy as np

    if attr.numpy_dtype.kind == "f":
        return np.inf
    return np.iinfo(_minmax_dtype(attr)).max


def _bottom(attr: Attribute) -> Any:
    import numpy as np

    if attr.numpy_dtype.kind == "f":
        return -np.inf
    return np.iinfo(_minmax_dtype(attr)).min
