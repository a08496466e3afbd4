"""Array operators: aggregate, regrid, apply and overlay (SciDB's operators, SS-DB §III).

Each reads chunk by chunk (in parallel threads where the work is per chunk)
and returns an ``xarray.Dataset`` in world coordinates, or writes a new
array with ``into=``.
"""

from __future__ import annotations

import ast
import functools
import math
from collections import abc
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from tesseradb.arrays._boxes import Box
from tesseradb.errors import OperatorError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy as np
    import xarray as xr

    from tesseradb.arrays._array import Array

__all__ = ["OperatorError", "aggregate", "apply", "overlay_arrays", "parse_factor", "regrid"]


# --- aggregate ------------------------------------------------------------------------
def aggregate(
    array: Array, fn: str, attrs: Sequence[str] | str | None, by: Sequence[str] | str, box: Box
) -> xr.Dataset:
    """``fn`` (count, sum, avg, min, max, stddev) of ``attrs`` over the written cells of ``box``.

    Grouped by the dimensions ``by`` (dense over the box on those
    dimensions; groups without cells hold NaN, or 0 for count). Computed by
    the same chunk-parallel reductions as SQL's native aggregates.
    """
    import numpy as np
    import xarray as xr

    from tesseradb.arrays._aggregate import AGGREGATES
    from tesseradb.arrays._aggregate import aggregate as aggregate_chunks

    if fn not in AGGREGATES:
        raise OperatorError(f"unknown aggregate {fn!r}; one of {', '.join(AGGREGATES)}")
    schema = array.schema
    by_names = [by] if isinstance(by, str) else list(by)
    axes = [schema.dim_index(b) for b in by_names]
    chosen = array._attrs(attrs)
    pred = _box_predicate(array, box)
    items = [(schema.dims[a].name, "column", schema.dims[a].name) for a in axes]
    items += [(a.name, fn, a.name) for a in chosen]
    table = aggregate_chunks(array, items, [schema.dims[a].name for a in axes], pred)
    if table is None:  # too many groups for dense accumulators
        raise OperatorError(f"aggregate by {by_names}: too many groups")
    world = box.world_coords(schema)
    coords = {schema.dims[a].name: world[schema.dims[a].name] for a in axes}
    shape = tuple(box.shape[a] for a in axes)
    where = tuple(
        table.column(schema.dims[a].name).to_numpy() - coords[schema.dims[a].name][0] for a in axes
    )
    data = {}
    for attr in chosen:
        column = table.column(attr.name)
        if fn == "count":
            dense = np.zeros(shape, dtype=np.int64)
            values = column.to_numpy()
        elif fn == "sum" and attr.numpy_dtype.kind != "f":
            dense, values = _exact_sums(column, shape, len(table) == math.prod(shape))
        else:
            dense = np.full(shape, np.nan, dtype=np.float64)
            values = column.cast("double").fill_null(np.nan).to_numpy()
        if axes:
            dense[where] = values
        elif len(values):
            dense = values.reshape(())
        data[attr.name] = ([schema.dims[a].name for a in axes], dense)
    return xr.Dataset(data, coords=coords, attrs={"aggregate": fn})


def _exact_sums(column: Any, shape: tuple[int, ...], every_group: bool) -> tuple[Any, Any]:
    """An empty dense result and the values for integer sums (SQL's HUGEINT, exact).

    int64 when every group has cells and every sum fits in it; otherwise
    Python ints in an object array, with None for groups without cells.
    """
    import numpy as np

    values = column.to_pylist()
    limit = 1 << 63
    if every_group and all(v is not None and -limit <= v < limit for v in values):
        return np.zeros(shape, dtype=np.int64), np.array(values, dtype=np.int64)
    dense = np.full(shape, None, dtype=object)
    return dense, np.array([*values, None], dtype=object)[:-1]  # keeps ints as objects


def _box_predicate(array: Array, box: Box) -> Any:
    """The predicate (world coordinates) selecting exactly ``box``, for the chunk reductions."""
    from tesseradb.sql.predicate import Predicate

    if box.empty:
        return Predicate.false()
    schema = array.schema
    pred = Predicate()
    for axis, dim in enumerate(schema.dims):
        shift = schema.world_shift(axis)
        pred = pred.and_(
            Predicate.between(dim.name, box.lo[axis] + shift, box.hi[axis] - 1 + shift)
        )
    return pred


# --- regrid ------------------------------------------------------------------------------
def parse_factor(value: Any, dim: str) -> Fraction:
    """A regrid factor (input cells per output cell): a number, ``(10, 3)``, ``"10:3"`` or a Fraction."""
    try:
        if isinstance(value, str):
            num, _, den = value.partition(":")
            factor = Fraction(int(num), int(den or 1))
        elif isinstance(value, tuple):
            factor = Fraction(int(value[0]), int(value[1]))
        elif isinstance(value, float):
            factor = Fraction(value).limit_denominator(1000)
        else:
            factor = Fraction(value)
    except (ValueError, ZeroDivisionError, TypeError, IndexError):
        raise OperatorError(
            f"regrid factor of dimension {dim!r}: {value!r} is not a ratio"
        ) from None
    if factor < 1:
        raise OperatorError(
            f"regrid factor of dimension {dim!r} is {value!r}; it must be at least 1 (cells in per cell out)"
        )
    return factor


@functools.lru_cache(maxsize=32)  # exact Fraction arithmetic per cell: worth keeping
def _weights(n: int, factor: Fraction) -> Any:
    """Sparse (out x n) matrix: how much of input cell i the output cell k covers."""
    import numpy as np
    from scipy import sparse

    out = math.ceil(n / factor)
    rows, cols, vals = [], [], []
    for k in range(out):
        lo, hi = k * factor, min(Fraction(n), (k + 1) * factor)
        for i in range(math.floor(lo), math.ceil(hi)):
            w = min(hi, Fraction(i + 1)) - max(lo, Fraction(i))
            if w > 0:
                rows.append(k)
                cols.append(i)
                vals.append(float(w))
    return sparse.csr_matrix((np.asarray(vals), (rows, cols)), shape=(out, n))


def _csr(matrix: Any) -> tuple[Any, Any, Any]:
    """A scipy CSR matrix as the (indptr, indices, weights) the Rust kernel takes."""
    import numpy as np

    m = matrix.tocsr()
    return (
        np.ascontiguousarray(m.indptr, np.int64),
        np.ascontiguousarray(m.indices, np.int64),
        np.ascontiguousarray(m.data, np.float64),
    )


def _apply_weights(data: np.ndarray, weights: Sequence[Any]) -> np.ndarray:
    """Contract every axis of ``data`` with its weight matrix (out x in)."""
    import numpy as np

    out = data
    for axis, w in enumerate(weights):
        moved = np.moveaxis(out, axis, 0)
        flat = moved.reshape(moved.shape[0], -1)
        reduced = np.asarray(w @ flat)
        out = np.moveaxis(reduced.reshape((w.shape[0], *moved.shape[1:])), 0, axis)
    return out


def regrid(
    array: Array,
    factors: Sequence[Any],
    box: Box,
    attrs: Sequence[str] | str | None = None,
    method: str = "mean",
    rows_per_slab: int | None = None,
) -> xr.Dataset:
    """Block averages of ``box``: each output cell is the area-weighted mean of the input it covers.

    ``factors`` give input cells per output cell per dimension; integer
    factors make plain block means (edge blocks average the cells they
    have), others (SS-DB's 10:3) weigh each input cell by the fraction of it
    the output cell covers. NULL cells (nullable attributes) carry no
    weight. The box is read in slabs along the first dimension, so memory
    holds a slab per attribute being worked on (up to four at once), not the box.
    """
    import numpy as np
    import xarray as xr

    if method != "mean":
        raise OperatorError(f"unknown regrid method {method!r}; this version has 'mean'")
    schema = array.schema
    if isinstance(factors, (str, bytes)) or not isinstance(factors, abc.Sequence):
        raise OperatorError(
            f"regrid of array {array.name!r} needs a list of {schema.ndim} factors (one per "
            f"dimension: {', '.join(schema.dim_names)}), got {factors!r}"
        )
    if len(factors) != schema.ndim:
        raise OperatorError(
            f"regrid needs {schema.ndim} factors (one per dimension), got {len(factors)}"
        )
    fr = [parse_factor(f, d.name) for f, d in zip(factors, schema.dims, strict=True)]
    shape = box.shape
    weights = [_weights(n, f) for n, f in zip(shape, fr, strict=True)]
    out_shape = tuple(w.shape[0] for w in weights)
    session = array._read_session()
    cells_per_row = max(1, math.prod(shape[1:]))
    # slabs of up to 16M input cells, and at least two per worker so that every
    # worker (thread or Dask worker) has work: output rows per slab
    executor = array._executors.current
    rows = rows_per_slab or max(1, math.ceil(fr[0]) * max(1, (1 << 24) // cells_per_row))
    out_rows = max(1, int(rows / fr[0]))
    if rows_per_slab is None:
        out_rows = min(out_rows, max(1, -(-out_shape[0] // (2 * executor.workers))))
    chosen = array._attrs(attrs)
    slabs = [
        (attr.name, k, min(out_shape[0], k + out_rows))
        for attr in chosen
        for k in range(0, out_shape[0], out_rows)
    ]
    plan = _RegridPlan(box, tuple(shape), weights, fr[0])
    parts = array._fan_out(session, functools.partial(_regrid_slab, plan), slabs, "regrid")
    results = {a.name: np.full(out_shape, np.nan, dtype=np.float64) for a in chosen}
    for (name, k, k2), rows_out in zip(slabs, parts, strict=True):
        results[name][k:k2] = rows_out
    data = {a.name: (schema.dim_names, results[a.name]) for a in chosen}
    coords = {}
    for axis, dim in enumerate(schema.dims):
        first = math.floor((box.lo[axis] + schema.world_shift(axis)) / fr[axis])
        coords[dim.name] = np.arange(first, first + out_shape[axis], dtype=np.int64)
    return xr.Dataset(data, coords=coords, attrs={"regrid": [str(f) for f in fr]})


@dataclass(frozen=True)
class _RegridPlan:
    """What every slab task of one regrid shares: the box and the weights of each axis."""

    box: Box
    shape: tuple[int, ...]
    weights: list[Any]  # per axis, (output cells x input cells) sparse matrices
    factor0: Fraction  # input cells per output cell along the first axis


def _regrid_slab(plan: _RegridPlan, source: Any, slab_rows: tuple[str, int, int]) -> Any:
    """Output rows [k, k2) of one attribute: a task of :func:`regrid`.

    They need input rows [floor(k f), ceil(k2 f)) of the box.
    """
    import numpy as np

    from tesseradb import _core

    name, k, k2 = slab_rows
    attr = source.schema.attribute(name)
    session = source._read_session()
    box, shape, weights = plan.box, plan.shape, plan.weights
    first = math.floor(k * plan.factor0)
    last = min(shape[0], math.ceil(k2 * plan.factor0))
    slab = Box((box.lo[0] + first, *box.lo[1:]), (box.lo[0] + last, *box.hi[1:]))
    w0 = weights[0][k:k2, first:last]
    csr = [_csr(w) for w in (w0, *weights[1:])] if len(shape) == 3 else []
    if not attr.nullable and csr:
        # no NULL cells: the weights separate, and Rust contracts each stored
        # chunk as it decodes it, never making the slab
        fused = source._regrid_box(session, attr, slab, csr)
        if fused is not None:
            return fused
    values = source._read_box(session, attr, slab)
    null = attr.null_mask(values)
    if null is None and csr and values.dtype.kind in "iuf":
        return _core.regrid_block(np.ascontiguousarray(values), csr)
    values = values.astype(np.float64)
    valid = np.ones(values.shape, dtype=np.float64)
    if null is not None:
        valid[null] = 0.0
        values[null] = 0.0
    num = _apply_weights(values, [w0, *weights[1:]])
    den = _apply_weights(valid, [w0, *weights[1:]])
    with np.errstate(all="ignore"):
        return np.where(den > 0, num / den, np.nan)


# --- apply ----------------------------------------------------------------------------------
_FUNCTIONS = (
    "abs", "sqrt", "exp", "log", "log10", "log2", "sin", "cos", "tan", "arcsin", "arccos",
    "arctan", "arctan2", "floor", "ceil", "round", "minimum", "maximum", "where", "isnan",
    "hypot", "clip",
)  # fmt: skip
_BINARY = {
    ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "true_divide",
    ast.FloorDiv: "floor_divide", ast.Mod: "mod", ast.Pow: "power",
    ast.BitAnd: "logical_and", ast.BitOr: "logical_or",
}  # fmt: skip
_COMPARE = {
    ast.Eq: "equal", ast.NotEq: "not_equal", ast.Lt: "less", ast.LtE: "less_equal",
    ast.Gt: "greater", ast.GtE: "greater_equal",
}  # fmt: skip


def compile_expression(
    text: str, names: Sequence[str]
) -> tuple[Callable[[dict[str, Any]], Any], set[str]]:
    """A per-cell expression over attribute and dimension names as a numpy function, and the names it uses.

    Arithmetic, comparisons, ``and``/``or``/``not``, numbers and the numpy
    functions in ``_FUNCTIONS``; anything else (attributes of objects,
    subscripts, other calls) is refused: the text is never ``eval``'d.
    """
    import numpy as np

    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise OperatorError(
            f"apply: cannot parse {text!r}: {err.msg} at column {err.offset}"
        ) from None
    known = {n.lower(): n for n in names}
    used: set[str] = set()

    def build(node: ast.AST) -> Callable[[dict[str, Any]], Any]:
        if isinstance(node, ast.Expression):
            return build(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            value = node.value
            return lambda env: value
        if isinstance(node, ast.Name):
            if node.id.lower() not in known:
                raise OperatorError(
                    f"apply: unknown name {node.id!r} in {text!r}; names are {', '.join(names)}"
                )
            key = known[node.id.lower()]
            used.add(key)
            return lambda env: env[key]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            ufunc = getattr(np, _BINARY[type(node.op)])
            left, right = build(node.left), build(node.right)
            return lambda env: ufunc(left(env), right(env))
        if isinstance(node, ast.UnaryOp):
            operand = build(node.operand)
            if isinstance(node.op, ast.USub):
                return lambda env: np.negative(operand(env))
            if isinstance(node.op, ast.UAdd):
                return operand
            if isinstance(node.op, ast.Not):
                return lambda env: np.logical_not(operand(env))
        if isinstance(node, ast.BoolOp):
            parts = [build(v) for v in node.values]
            combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or

            def boolean(env: dict[str, Any]) -> Any:
                result = parts[0](env)
                for part in parts[1:]:
                    result = combine(result, part(env))
                return result

            return boolean
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            terms = [build(node.left)] + [build(c) for c in node.comparators]
            ops = [getattr(np, _COMPARE[type(op)]) for op in node.ops]

            def compare(env: dict[str, Any]) -> Any:
                values = [t(env) for t in terms]
                result = ops[0](values[0], values[1])
                for i in range(1, len(ops)):
                    result = np.logical_and(result, ops[i](values[i], values[i + 1]))
                return result

            return compare
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            fn = getattr(np, node.func.id)
            args = [build(a) for a in node.args]
            return lambda env: fn(*[a(env) for a in args])
        raise OperatorError(
            f"apply: {ast.unparse(node)!r} is not allowed in an expression ({text!r}); "
            f"use arithmetic, comparisons and {', '.join(_FUNCTIONS)}"
        )

    return build(tree), used


def apply(
    array: Array,
    expression: str | Callable[[dict[str, Any]], Any],
    box: Box,
    name: str = "value",
    workers: int | None = None,
) -> tuple[dict[tuple[int, ...], tuple[Box, np.ndarray]], Any]:
    """The derived attribute per written chunk of ``box``: {chunk: (its part of the box, values)}.

    ``expression`` is text over attribute and dimension names (dimensions are
    world coordinates) or a function of a dict of those arrays. Runs chunk by
    chunk in parallel threads.
    """
    import numpy as np

    schema = array.schema
    if isinstance(expression, str):
        fn, names = compile_expression(expression, schema.dim_names + schema.attr_names)
        used = [a for a in schema.attrs if a.name in names]
    else:
        fn = expression
        used = list(schema.attrs)
    session = array._read_session()
    parts = array._written_parts(session, box)
    task = functools.partial(_apply_part, fn, [a.name for a in used])
    results = array._fan_out(session, task, [p for _, p in parts], "apply", workers)
    dtype = np.result_type(*results) if results else np.dtype(np.float64)
    return {c: (p, r) for (c, p), r in zip(parts, results, strict=True)}, dtype


def _apply_part(
    fn: Callable[[dict[str, Any]], Any], used: Sequence[str], source: Any, part: Box
) -> np.ndarray:
    """The derived attribute over one written chunk's part of the box: a task of :func:`apply`."""
    import numpy as np

    schema = source.schema
    session = source._read_session()
    env: dict[str, Any] = {n: source._read_box(session, schema.attribute(n), part) for n in used}
    for axis, (dim_name, world) in enumerate(part.world_coords(schema).items()):
        shape = [1] * schema.ndim
        shape[axis] = part.shape[axis]
        env[dim_name] = world.reshape(shape)
    return np.broadcast_to(np.asarray(fn(env)), part.shape)


# --- overlay ----------------------------------------------------------------------------------
def create_beside(array: Array, into: str, dims: Any, attrs: Any, origin: Any) -> Array:
    """A new array ``into`` in ``array``'s database, compressed as ``array`` is."""
    from tesseradb.arrays._schema import ArraySchema
    from tesseradb.errors import TesseraError

    siblings = array._siblings
    if siblings is None:
        raise TesseraError(f"array {array.name!r}: into= needs the array's database to be open")
    schema = ArraySchema.build(dims, attrs, origin, array.schema.codec, array.schema.level, None)
    return siblings.create("array", into, {"schema": schema.to_dict()})  # type: ignore[no-any-return]


def overlay_arrays(inputs: Sequence[Array], into: str) -> Array:
    """A new array ``into`` with the written cells of ``inputs``; cells of later arrays win.

    Dimensions must match by name and attributes by name and type. The result
    spans the union of the inputs' world extents (its origin is their lowest
    corner, its indexes start at 0); chunking is the first input's. A NULL
    cell (a nullable attribute's fill) does not overwrite a value.
    """
    import numpy as np

    if not inputs:
        raise OperatorError("overlay needs at least one array")
    first = inputs[0].schema
    for other in inputs[1:]:
        if [d.name.lower() for d in other.schema.dims] != [d.name.lower() for d in first.dims]:
            raise OperatorError(
                f"overlay: array {other.name!r} has dimensions {other.schema.dim_names}, "
                f"array {inputs[0].name!r} has {first.dim_names}"
            )
        mine = {(a.name.lower(), a.dtype) for a in other.schema.attrs}
        if mine != {(a.name.lower(), a.dtype) for a in first.attrs}:
            raise OperatorError(
                f"overlay: arrays {inputs[0].name!r} and {other.name!r} have different attributes"
            )
    extents = [a.extent() for a in inputs]
    lo = [min(a.schema.world_shift(i) for a in inputs) for i in range(first.ndim)]
    hi = [
        max(a.schema.world_shift(i) + e[i] for a, e in zip(inputs, extents, strict=True))
        for i in range(first.ndim)
    ]
    dims = [
        {"name": d.name, "start": 0, "end": max(1, h - lo_), "chunk": d.chunk, "overlap": d.overlap}
        for d, lo_, h in zip(first.dims, lo, hi, strict=True)
    ]
    attrs = [a.to_dict() for a in first.attrs]
    nullable = [a.name for a in first.attrs if a.nullable]
    out = create_beside(inputs[0], into, dims, attrs, lo)
    try:
        with out.transaction(f"overlay of {', '.join(a.name for a in inputs)}"):
            for source in inputs:
                shift = [source.schema.world_shift(i) - lo[i] for i in range(first.ndim)]
                for view in source.chunks(attrs=None, overlap=0):
                    key = tuple(
                        slice(s.start - d.start + sh, s.stop - d.start + sh)
                        for s, d, sh in zip(view.core, source.schema.dims, shift, strict=True)
                    )
                    # a NULL does not overwrite: what is there already shows through
                    below = out.read(key, nullable) if nullable else {}
                    values = {}
                    for attr in first.attrs:
                        incoming = view.data[_name_in(view.data, attr.name)]
                        null = attr.null_mask(incoming)
                        if null is not None:
                            incoming = np.where(null, below[attr.name], incoming)
                        values[attr.name] = incoming
                    out[key] = values
    except BaseException:
        out._siblings.drop(into)  # type: ignore[union-attr]
        raise
    return out


def _name_in(data: dict[str, Any], name: str) -> str:
    lower = {k.lower(): k for k in data}
    return lower[name.lower()]
