"""Single-relation aggregate queries a relation may answer from its storage.

``SELECT count(*), min(x) FROM rel WHERE <exact predicate> GROUP BY g``
needs no rows when the relation can fold its storage (an array's chunks, a
stream's found records) or count from an index (an attached table's
bitmaps). This module recognises such statements; the statement analysis
(``analysis.py``) supplies the columns and the exact WHERE predicate, and
the engine asks the relation (``Aggregating``, ``Counting``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tesseradb.sql.bounds import NotPushable
from tesseradb.sql.predicate import Predicate

if TYPE_CHECKING:
    from sqlglot import exp

__all__ = ["AggregateQuery", "AggregateShape", "aggregate_shape"]


@dataclass(frozen=True)
class AggregateQuery:
    """``SELECT items FROM rel [WHERE w] [GROUP BY columns] [ORDER BY outputs]``, w exactly a Predicate.

    ``items`` are (output name as DuckDB names it, function, column): the
    function is ``count`` (column None for ``count(*)``), ``sum``, ``avg``,
    ``min``, ``max``, or ``column`` for a grouping column shown as is.
    ``order`` is (output name, descending) pairs.
    """

    relation: str
    items: tuple[tuple[str, str, str | None], ...]
    group_by: tuple[str, ...]
    predicate: Predicate
    order: tuple[tuple[str, bool], ...] = ()
    # (column, values): the predicate is exact except for rows holding one of these
    # values in that column, where a float literal's meaning depends on the precision
    # DuckDB compares in (see ambiguity_point); a relation answering the query must
    # give up when a candidate row holds one
    ambiguous: tuple[tuple[str, tuple[float, ...]], ...] = ()


@dataclass(frozen=True)
class AggregateShape:
    """What a single-relation aggregate statement computes, before its WHERE clause is
    derived with the parameters' values (see :func:`aggregate_shape`)."""

    relation: str
    items: tuple[tuple[str, str, str | None], ...]
    group_by: tuple[str, ...]
    order: tuple[tuple[str, bool], ...]

    def query(
        self,
        where: exp.Expression | None,
        derive_exact: Callable[
            [exp.Expression], tuple[Predicate, bool, tuple[tuple[str, tuple[float, ...]], ...]]
        ],
    ) -> AggregateQuery | None:
        """The query with ``where`` derived (its predicate, whether exact, its ambiguity
        points), or None when the predicate is not exact."""
        if where is None:
            pred, exact, ambiguous = Predicate(), True, ()
        else:
            pred, exact, ambiguous = derive_exact(where)
        if not exact:
            return None
        return AggregateQuery(self.relation, self.items, self.group_by, pred, self.order, ambiguous)


_FUNCTIONS = {
    "Count": "count",
    "Sum": "sum",
    "Avg": "avg",
    "Min": "min",
    "Max": "max",
    "Stddev": "stddev",
    "StddevSamp": "stddev",
}


def aggregate_shape(
    select: exp.Select, relation: str, column_of: Callable[[exp.Expression], str]
) -> AggregateShape | None:
    """``select`` as an aggregate over ``relation``, or None if it is not one.

    ``column_of`` names the relation's column an expression is (raising
    :class:`NotPushable` if it is none).
    """
    from sqlglot import exp

    if any(
        select.args.get(k)
        for k in ("joins", "having", "qualify", "distinct", "limit", "offset", "with", "laterals")
    ):
        return None
    try:
        group_by: list[str] = []
        group = select.args.get("group")
        if group is not None:
            if set(group.args) - {"expressions"} and any(
                group.args.get(k) for k in set(group.args) - {"expressions"}
            ):
                return None  # ROLLUP, CUBE, GROUPING SETS, GROUP BY ALL
            group_by = [column_of(e) for e in group.expressions]
        items: list[tuple[str, str, str | None]] = []
        for item in select.expressions:
            alias = item.alias if isinstance(item, exp.Alias) else None
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Column):
                name = column_of(node)
                if name.lower() not in {g.lower() for g in group_by}:
                    return None
                items.append((alias or node.name, "column", name))
                continue
            fn = _FUNCTIONS.get(type(node).__name__)
            if fn is None or node.args.get("expressions") or isinstance(node.this, exp.Distinct):
                return None
            if fn == "count" and isinstance(node.this, exp.Star):
                items.append((alias or "count_star()", "count", None))
                continue
            name = column_of(node.this)
            spelled = node.sql_name().lower() if fn == "stddev" else fn
            items.append((alias or f"{spelled}({node.this.name})", fn, name))
        order: list[tuple[str, bool]] = []
        ordered = select.args.get("order")
        outputs = {out.lower(): out for out, _, _ in items}
        for key in ordered.expressions if ordered is not None else []:
            target = key.this
            if (
                not isinstance(target, exp.Column)
                or target.table
                or target.name.lower() not in outputs
            ):
                return None
            if key.args.get("nulls_first") and not key.args.get("desc"):
                return None  # explicit NULLS FIRST on ascending order: leave it to DuckDB
            order.append((outputs[target.name.lower()], bool(key.args.get("desc"))))
    except NotPushable:
        return None
    if not items or len({out for out, _, _ in items}) != len(items):
        return None  # a relation's answer is keyed by output name: DuckDB repeats a name
    return AggregateShape(relation, tuple(items), tuple(group_by), tuple(order))
