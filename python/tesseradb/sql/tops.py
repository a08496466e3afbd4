"""``ORDER BY c LIMIT k`` over one relation, narrowed to the rows an index gives first.

``SELECT DISTINCT station_id, elevation FROM s WHERE element_id = x ORDER BY
elevation DESC LIMIT 3`` (MDDS's GHCN Q10) needs only the matching rows with
the three highest elevations, ties included; a B-tree on ``(element_id,
elevation)`` reads them from the end of ``element_id = x``. A relation that
can do the same (:class:`~tesseradb.sql.relation.Ranking`: a stream's key
orders) is asked for those rows, and the statement is finished over them
instead of over every match: the answer is the same, since every row that
could be in it is among them.

This module recognises the shape (:func:`top_shape`, before the parameters
are known), binds its exact WHERE (:class:`TopShape`), and asks the relation
for the rows and finishes the statement over them, itself where it can be
exact, else by handing them to DuckDB as the statement's scan
(:func:`answer_top`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tesseradb.sql.bounds import NotPushable
from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import Ranking, ScanStats, can
from tesseradb.sql.result import Result
from tesseradb.sql.shortcuts import (
    NOT_ROWS_AS_READ,
    as_duckdb_gives,
    exact_where,
    order_key,
    passes_through_duckdb,
    selected_columns,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

    from tesseradb.sql.analysis import Analysis
    from tesseradb.sql.relation import Namespace
    from tesseradb.sql.shortcuts import DeriveExact

__all__ = ["TOP_MAX_COUNT", "TopAnswer", "TopQuery", "TopShape", "answer_top", "top_shape"]

# the largest LIMIT (plus OFFSET) narrowed: the rows are gathered in memory, where a
# scan would stream them
TOP_MAX_COUNT = 10_000
# the parts of a SELECT that make its rows other than the first rows in an order: those
# that make them other than rows as read, but for the order's own DISTINCT and LIMIT
_NOT_A_TOP = (
    "joins",
    "pivots",
    *(k for k in NOT_ROWS_AS_READ if k not in ("distinct", "limit", "offset")),
)


@dataclass(frozen=True)
class TopQuery:
    """``SELECT [DISTINCT] <columns> FROM rel WHERE <predicate> ORDER BY <order> [DESC],
    ... LIMIT <count>`` (``count`` includes an OFFSET), the predicate exactly the WHERE
    clause and ``order`` one of the relation's columns.

    ``answer`` is the statement as the engine may finish it over the rows itself,
    or None where only DuckDB can (an ``ORDER BY`` expression, a name given twice).
    """

    relation: str
    order: str
    descending: bool
    count: int
    distinct: bool
    predicate: Predicate
    answer: TopAnswer | None = None


@dataclass(frozen=True)
class TopAnswer:
    """What finishing a :class:`TopQuery` over its rows takes: ``columns`` (the
    relation's column, output name), every ``ORDER BY`` key as (the relation's column,
    descending), NULLs last as DuckDB sorts by default, and the rows to skip."""

    columns: tuple[tuple[str, str], ...]
    keys: tuple[tuple[str, bool], ...]
    offset: int


@dataclass(frozen=True)
class TopShape:
    """A :class:`TopQuery` before its WHERE clause is derived with the parameters' values."""

    relation: str
    order: str
    descending: bool
    count: int
    distinct: bool
    answer: TopAnswer | None

    def query(self, where: exp.Expression | None, derive_exact: DeriveExact) -> TopQuery | None:
        """The query with ``where`` derived, or None unless its predicate is exact
        everywhere: a row the WHERE drops must not count towards the LIMIT."""
        pred = exact_where(where, derive_exact)
        if pred is None:
            return None
        return TopQuery(
            self.relation,
            self.order,
            self.descending,
            self.count,
            self.distinct,
            pred,
            self.answer,
        )


def top_shape(
    select: exp.Select,
    relation: str,
    names: Sequence[str],
    column_of: Callable[[exp.Expression], str],
) -> TopShape | None:
    """``select`` as a :class:`TopShape` over ``relation`` (whose columns are
    ``names``), or None.

    Only plain columns (or a bare ``*``) are selected: an expression could
    make a row into none or several (``unnest``) or depend on other rows.
    The first ``ORDER BY`` key is a column of the relation, without explicit
    ``NULLS FIRST``; the rest may be anything, as the rows given hold every
    tie of the first. ``LIMIT`` and ``OFFSET`` are integer literals; under
    ``DISTINCT`` (not ``DISTINCT ON``) the first key is a selected column, so
    that rows of different values in it are different rows.
    """
    from sqlglot import exp

    if any(select.args.get(k) for k in _NOT_A_TOP):
        return None
    limit, offset = select.args.get("limit"), select.args.get("offset")
    count = _integer(limit.expression) if isinstance(limit, exp.Limit) else None
    if count is None or limit.args.get("limit_options") is not None:
        return None
    skipped = 0
    if offset is not None:
        found = _integer(offset.expression) if isinstance(offset, exp.Offset) else None
        if found is None:
            return None
        skipped = found
    if not 0 < count + skipped <= TOP_MAX_COUNT:
        return None
    distinct = select.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        return None
    ordered = select.args.get("order")
    if ordered is None or not ordered.expressions:
        return None
    try:
        columns = selected_columns(select, names, column_of)
        if columns is None:
            return None
        outputs: dict[str, str] = {}
        for source, out in columns:
            outputs.setdefault(out.lower(), source)
        keys = [order_key(key, outputs, column_of) for key in ordered.expressions]
    except NotPushable:
        return None
    if keys[0] is None:
        return None
    order, descending = keys[0]
    selected = {source for source, _ in columns}
    if distinct is not None and order not in selected:
        return None
    plain = [k for k in keys if k is not None]
    answer = None
    if (
        len(plain) == len(keys)
        and len(outputs) == len(columns)
        # (under DISTINCT, DuckDB also orders by a key it does not select, its own way)
        and (distinct is None or all(c in selected for c, _ in plain))
    ):
        answer = TopAnswer(tuple(columns), tuple(plain), skipped)
    return TopShape(relation, order, descending, count + skipped, distinct is not None, answer)


def _integer(node: exp.Expression | None) -> int | None:
    from sqlglot import exp

    if isinstance(node, exp.Literal) and not node.is_string and node.is_int:
        return int(node.this)
    return None


def answer_top(namespace: Namespace, analysis: Analysis) -> Result | None:
    """A :class:`TopQuery` answered over the rows its relation's order gives first
    (:meth:`~tesseradb.sql.relation.Ranking.top`), where the relation can give them.

    The engine finishes the statement itself (distinct rows, sorted with NULLs
    last, the offset and limit taken) where it can do so exactly as DuckDB
    would: plain columns and keys of types that come out of DuckDB as they went
    in, and no NaN or -0.0 in a float column (whose grouping and sorting DuckDB
    settles its own way). Otherwise the rows become the statement's scan
    (prefetched) and DuckDB runs it over them; None then, as when the relation
    cannot give them.
    """
    query = analysis.top
    if query is None:
        return None
    key = query.relation.lower()
    use = analysis.relations.get(key)
    if use is None or use.references != 1 or key in analysis.prefetched:
        return None  # (read twice, a subquery's read would be narrowed too)
    relation = namespace.relation(use.name)
    if relation is None or not can(relation, Ranking):
        return None
    columns: Sequence[str] | None = use.columns
    rows = relation.top(
        columns, query.predicate, query.order, query.descending, query.count, query.distinct
    )
    if rows is None:
        return None
    analysis.prefetched[key] = (use.predicate, rows)
    use.notes.append(
        f"top: the first {query.count} in {query.order}'s order "
        f"({'descending' if query.descending else 'ascending'}), "
        f"{rows.num_rows} rows, from an index"
    )
    finished = None if query.answer is None else _finish(query, query.answer, rows)
    if finished is None:
        return None
    return Result(finished, {relation.name: ScanStats(1, 1, rows.num_rows)}, shortcut="top")


def _finish(query: TopQuery, answer: TopAnswer, rows: pa.Table) -> pa.Table | None:
    """The statement's answer over ``rows``, as DuckDB gives it, or None where the engine
    cannot be sure to give exactly that (see :func:`answer_top`)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.types as pt

    sources = list(dict.fromkeys(c for c, _ in answer.columns))
    for name in dict.fromkeys([*sources, *(c for c, _ in answer.keys)]):
        column = rows.column(name)
        if not passes_through_duckdb(column.type) or isinstance(column.type, pa.JsonType):
            return None
        if pt.is_floating(column.type):
            values = column.to_numpy()  # (NULLs would come out as NaN: refused either way)
            if np.isnan(values).any() or (np.signbit(values) & (values == 0)).any():
                return None
    table = rows
    if query.distinct:
        table = table.group_by(sources, use_threads=False).aggregate([])
    order = [(c, "descending" if desc else "ascending", "at_end") for c, desc in answer.keys]
    table = table.sort_by(order)  # NULLs last either way, as DuckDB by default
    table = table.slice(answer.offset, query.count - answer.offset)
    return pa.Table.from_arrays(
        [as_duckdb_gives(table.column(c)) for c, _ in answer.columns],
        names=[out for _, out in answer.columns],
    )
