"""``ORDER BY c LIMIT k`` over one relation, narrowed to the rows an index gives first.

``SELECT DISTINCT station_id, elevation FROM s WHERE element_id = x ORDER BY
elevation DESC LIMIT 3`` (MDDS's GHCN Q10) needs only the matching rows with
the three highest elevations, ties included; a B-tree on ``(element_id,
elevation)`` reads them from the end of ``element_id = x``. A relation that
can do the same (:class:`~tesseradb.sql.relation.Ranking`: a stream's key
orders) is asked for those rows, and DuckDB runs the statement over them
instead of over every match: the answer is the same, since every row that
could be in it is among them.

This module recognises the shape (:func:`top_shape`, before the parameters
are known), binds its exact WHERE (:class:`TopShape`) and hands the rows to
the statement's scan (:func:`narrow_to_top`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tesseradb.sql.bounds import NotPushable
from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import Ranking, can

if TYPE_CHECKING:
    from sqlglot import exp

    from tesseradb.sql.analysis import Analysis
    from tesseradb.sql.relation import Namespace
    from tesseradb.sql.shortcuts import DeriveExact

__all__ = ["TOP_MAX_COUNT", "TopQuery", "TopShape", "narrow_to_top", "top_shape"]

# the largest LIMIT (plus OFFSET) narrowed: the rows are gathered in memory, where a
# scan would stream them
TOP_MAX_COUNT = 10_000
# the parts of a SELECT that make its rows other than the first rows in an order
_NOT_A_TOP = (
    "joins",
    "group",
    "having",
    "qualify",
    "with",
    "laterals",
    "windows",
    "sample",
    "into",
    "kind",
    "pivots",
)


@dataclass(frozen=True)
class TopQuery:
    """``SELECT [DISTINCT] <columns> FROM rel WHERE <predicate> ORDER BY <order> [DESC],
    ... LIMIT <count>`` (``count`` includes an OFFSET), the predicate exactly the WHERE
    clause and ``order`` one of the relation's columns."""

    relation: str
    order: str
    descending: bool
    count: int
    distinct: bool
    predicate: Predicate


@dataclass(frozen=True)
class TopShape:
    """A :class:`TopQuery` before its WHERE clause is derived with the parameters' values."""

    relation: str
    order: str
    descending: bool
    count: int
    distinct: bool

    def query(self, where: exp.Expression | None, derive_exact: DeriveExact) -> TopQuery | None:
        """The query with ``where`` derived, or None unless its predicate is exact
        everywhere: a row the WHERE drops must not count towards the LIMIT."""
        pred = Predicate()
        if where is not None:
            pred, exact, ambiguous = derive_exact(where)
            if not exact or ambiguous:
                return None
        return TopQuery(self.relation, self.order, self.descending, self.count, self.distinct, pred)


def top_shape(
    select: exp.Select,
    relation: str,
    column_of: Callable[[exp.Expression], str],
) -> TopShape | None:
    """``select`` as a :class:`TopShape` over ``relation``, or None.

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
    if offset is not None:
        skipped = _integer(offset.expression) if isinstance(offset, exp.Offset) else None
        if skipped is None:
            return None
        count += skipped
    if not 0 < count <= TOP_MAX_COUNT:
        return None
    distinct = select.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        return None
    ordered = select.args.get("order")
    if ordered is None or not ordered.expressions:
        return None
    first = ordered.expressions[0]
    target = first.this
    if (
        not isinstance(target, exp.Column)
        or isinstance(target.this, exp.Star)
        or first.args.get("nulls_first")
        or first.args.get("with_fill")
    ):
        return None  # (sqlglot reads DuckDB's default, NULLS LAST, as False)
    try:
        outputs: dict[str, str] = {}
        star = False
        for item in select.expressions:
            alias = item.alias if isinstance(item, exp.Alias) else None
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Star) and not any(node.args.values()) and alias is None:
                star = True
            elif isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                outputs.setdefault((alias or node.name).lower(), column_of(node))
            else:
                return None
        if not target.table and target.name.lower() in outputs:
            order = outputs[target.name.lower()]
        else:
            order = column_of(target)
    except NotPushable:
        return None
    if distinct is not None and not star and order not in outputs.values():
        return None
    return TopShape(relation, order, bool(first.args.get("desc")), count, distinct is not None)


def _integer(node: exp.Expression | None) -> int | None:
    from sqlglot import exp

    if isinstance(node, exp.Literal) and not node.is_string and node.is_int:
        return int(node.this)
    return None


def narrow_to_top(namespace: Namespace, analysis: Analysis) -> None:
    """Give the statement's scan of a :class:`TopQuery`'s relation only the rows its
    order gives first (:meth:`~tesseradb.sql.relation.Ranking.top`), where the relation
    can; DuckDB then runs the statement over those."""
    query = analysis.top
    if query is None:
        return
    key = query.relation.lower()
    use = analysis.relations.get(key)
    if use is None or use.references != 1 or key in analysis.prefetched:
        return  # (read twice, a subquery's read would be narrowed too)
    relation = namespace.relation(use.name)
    if relation is None or not can(relation, Ranking):
        return
    columns: Sequence[str] | None = use.columns
    rows = relation.top(
        columns, query.predicate, query.order, query.descending, query.count, query.distinct
    )
    if rows is None:
        return
    analysis.prefetched[key] = (use.predicate, rows)
    use.notes.append(
        f"top: the first {query.count} in {query.order}'s order "
        f"({'descending' if query.descending else 'ascending'}), "
        f"{rows.num_rows} rows, from an index"
    )
