"""Small inner equi-joins of relations answered by the engine itself, without DuckDB.

SDS/Q's PTF query joins three attached tables on their ids, each narrowed by
its own conditions, and returns a few hundred rows. DuckDB spends about 2 ms
planning and running such a join over even a few thousand rows, where the
rows themselves (found through bitmap indexes and the semi-join keys) are
read in less: PostgreSQL answers the same from its B-trees in 0.6 ms. A
statement of that shape,

    SELECT <plain columns> FROM a JOIN b ON b.x = a.y [JOIN c ON ...]
    WHERE <conditions, each on one relation, exactly a predicate> [ORDER BY <columns>]

is answered here: each relation's rows (read as the statement's scan would
read them, semi-join keys included) are filtered by its exact predicate,
joined on integer or string keys by sorting (NULL never matches), and the
selected columns taken, sorted and named as DuckDB names them. Only columns
that come out of DuckDB as they went in are selected, as in a lookup; more
than ``LOOKUP_MAX_ROWS`` rows read from a relation or joined leave the
statement to DuckDB. Tests compare every answer with DuckDB's over the
same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.sql.bounds import NotPushable
from tesseradb.sql.predicate import Predicate, type_class
from tesseradb.sql.relation import ScanStats
from tesseradb.sql.result import Result
from tesseradb.sql.shortcuts import (
    LOOKUP_MAX_ROWS,
    NOT_ROWS_AS_READ,
    as_duckdb_gives,
    exact_rows,
    passes_through_duckdb,
)

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from sqlglot import exp

    from tesseradb.sql.analysis import Analysis
    from tesseradb.sql.relation import Namespace

__all__ = ["JoinQuery", "JoinShape", "answer_join", "join_shape"]

# (source, column) of a column reference: the source's position in FROM/JOIN order
Ref = tuple[int, str]
# derives one WHERE conjunct for one source: (predicate, exact, ambiguity points)
DeriveFor = Callable[[Any, int], tuple[Predicate, bool, tuple[Any, ...]]]


@dataclass(frozen=True)
class JoinQuery:
    """A join with each relation's WHERE derived: ``sources`` are relation keys in
    FROM/JOIN order with their exact ``predicates``; ``joins`` (earlier source, its
    column, joined source, its column), the joined source being the next one each time;
    ``columns`` (source, column, output name); ``order`` (source, column, descending)."""

    sources: tuple[str, ...]
    predicates: tuple[Predicate, ...]
    joins: tuple[tuple[int, str, int, str], ...]
    columns: tuple[tuple[int, str, str], ...]
    order: tuple[tuple[int, str, bool], ...]

    def needed(self, source: int) -> list[str]:
        """The columns of ``source`` the join reads (selected, keys, predicate, order)."""
        names = [c for s, c, _ in self.columns if s == source]
        for left, left_column, right, right_column in self.joins:
            names += [left_column] if left == source else []
            names += [right_column] if right == source else []
        names += [c for s, c, _ in self.order if s == source]
        names += list(self.predicates[source])
        return list(dict.fromkeys(names))


@dataclass(frozen=True)
class JoinShape:
    """A :class:`JoinQuery` before its WHERE clause is derived: ``conjuncts`` are the
    WHERE's conjuncts with the source each is on."""

    sources: tuple[str, ...]
    joins: tuple[tuple[int, str, int, str], ...]
    columns: tuple[tuple[int, str, str], ...]
    order: tuple[tuple[int, str, bool], ...]
    conjuncts: tuple[tuple[int, Any], ...]

    def query(self, derive: DeriveFor) -> JoinQuery | None:
        """The query with each conjunct derived, or None unless every one is exact."""
        predicates = [Predicate() for _ in self.sources]
        for source, conjunct in self.conjuncts:
            predicate, exact, ambiguous = derive(conjunct, source)
            if not exact or ambiguous:
                return None
            predicates[source] = predicates[source].and_(predicate)
        return JoinQuery(self.sources, tuple(predicates), self.joins, self.columns, self.order)


def join_shape(
    select: exp.Select,
    aliases: Sequence[str],
    relations: Sequence[str],
    types: Sequence[dict[str, pa.DataType]],
    resolve: Callable[[exp.Expression], Ref],
) -> JoinShape | None:
    """``select`` as a join the engine answers, or None.

    ``aliases`` are the sources in FROM/JOIN order, each a relation (``relations``,
    whose columns have ``types``: lower name -> type), none twice; ``resolve`` gives
    the (source, column) a column reference names, or raises NotPushable.
    """
    from sqlglot import exp

    joins_in = select.args.get("joins") or []
    if not joins_in or any(select.args.get(k) for k in NOT_ROWS_AS_READ):
        return None
    if len(set(relations)) < len(relations):
        return None  # (one relation twice: its uses are merged, its rows read once)
    position = {alias: i for i, alias in enumerate(aliases)}
    try:
        joins = []
        for join in joins_in:
            joined = position.get(join.this.alias_or_name.lower() if join.this else "")
            on = join.args.get("on")
            on = on.unnest() if on is not None else None
            if (
                joined is None
                or str(join.side or "") != ""
                or str(join.kind or "").upper() not in ("", "INNER")
                or join.args.get("method")
                or join.args.get("using")
                or not isinstance(on, exp.EQ)
            ):
                return None
            ends = [resolve(side.unnest()) for side in (on.this, on.expression)]
            ends.sort(key=lambda ref: ref[0] == joined)  # (the joined source's end last)
            (earlier, earlier_column), (this, this_column) = ends
            if this != joined or earlier >= joined:
                return None
            classes = {_key_class(types[s][c.lower()]) for s, c in ends}
            if len(classes) != 1 or None in classes:
                return None  # (floats compare NaN and -0.0 their own way; mixed types cast)
            joins.append((earlier, earlier_column, joined, this_column))
        columns = []
        for item in select.expressions:
            alias = item.alias if isinstance(item, exp.Alias) else None
            node = item.this if isinstance(item, exp.Alias) else item
            if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
                return None
            source, column = resolve(node)
            columns.append((source, column, alias or column))
        conjuncts = []
        where = select.args.get("where")
        for conjunct in _conjuncts(where.this) if where is not None else []:
            if conjunct.find(exp.Select, exp.Star):
                return None
            sources = {resolve(c)[0] for c in conjunct.find_all(exp.Column)}
            if len(sources) != 1:
                return None  # (a condition across relations, or on none)
            conjuncts.append((sources.pop(), conjunct))
        outputs: dict[str, list[Ref]] = {}
        for s, c, name in columns:
            outputs.setdefault(name.lower(), []).append((s, c))
        order = []
        ordered = select.args.get("order")
        for key in ordered.expressions if ordered is not None else []:
            target = key.this
            if not isinstance(target, exp.Column) or key.args.get("nulls_first"):
                return None  # (sqlglot reads DuckDB's default, NULLS LAST, as False)
            if not target.table and target.name.lower() in outputs:
                named = outputs[target.name.lower()]
                if len(named) > 1:
                    return None  # (DuckDB binds an alias before a column, or finds it ambiguous)
                source, column = named[0]
            else:
                source, column = resolve(target)
            if type_class(types[source][column.lower()]) not in ("int", "string", "bool"):
                return None  # (pyarrow and DuckDB sort these alike)
            order.append((source, column, bool(key.args.get("desc"))))
    except NotPushable:
        return None
    return JoinShape(tuple(relations), tuple(joins), tuple(columns), tuple(order), tuple(conjuncts))


def answer_join(namespace: Namespace, analysis: Analysis) -> Result | None:
    """The join's answer computed here (see the module), or None to let DuckDB run it.

    Run after the semi-join reduction: each relation is read under the predicate the
    statement's scan would have (its keys included), reusing rows already read for
    the keys, then filtered by its exact predicate.
    """
    import pyarrow as pa

    query = analysis.join
    if query is None:
        return None
    uses = [analysis.relations.get(key) for key in query.sources]
    relations = [None if use is None else namespace.relation(use.name) for use in uses]
    # everything that declines the join is checked before any relation is read
    for source, (key, use, relation) in enumerate(zip(query.sources, uses, relations, strict=True)):
        if use is None or relation is None:
            return None
        schema = relation.schema()
        if not all(
            schema.get_field_index(c) >= 0 and passes_through_duckdb(schema.field(c).type)
            for c in query.needed(source)
        ):
            return None
        if key not in analysis.prefetched:  # (a large relation, by its estimate)
            estimated = relation.estimate(None if use.predicate.is_true else use.predicate).rows
            if estimated is not None and estimated > LOOKUP_MAX_ROWS:
                return None
    tables: list[pa.Table] = []
    stats: dict[str, ScanStats] = {}
    for source, key in enumerate(query.sources):
        use, relation = uses[source], relations[source]
        assert use is not None and relation is not None
        needed = query.needed(source)
        read_for_keys = analysis.prefetched.get(key)  # (the semi-join's rows, if it suits)
        prefetched = (
            read_for_keys[1]
            if read_for_keys is not None
            and read_for_keys[0] == use.predicate
            and set(needed) <= set(read_for_keys[1].schema.names)
            else None
        )
        read = exact_rows(relation, needed, use.predicate, query.predicates[source], prefetched)
        if read is None:
            return None
        tables.append(read[0])
        stats[relation.name] = read[1]
    rows = _joined_rows(tables, query.joins)
    if rows is None:
        return None
    if query.order:
        order = _order(tables, rows, query.order).to_numpy()
        rows = [r[order] for r in rows]
    taken = {}  # one take a source (a take a column cost 4 µs each)
    for source in dict.fromkeys(s for s, _, _ in query.columns):
        wanted = list(dict.fromkeys(c for s, c, _ in query.columns if s == source))
        taken[source] = tables[source].select(wanted).take(rows[source])
    columns = [as_duckdb_gives(taken[s].column(c)) for s, c, _ in query.columns]
    table = pa.Table.from_arrays(columns, names=[name for _, _, name in query.columns])
    return Result(table, stats, shortcut="join")


def _joined_rows(
    tables: list[pa.Table], joins: Sequence[tuple[int, str, int, str]]
) -> list[np.ndarray] | None:
    """Per source, the row of each joined row (equal positions belong together); None
    when there would be more than ``LOOKUP_MAX_ROWS`` of them or a key is not
    comparable here."""
    import numpy as np

    rows = [np.arange(tables[0].num_rows)]
    for earlier, earlier_column, joined, joined_column in joins:
        left = _keys(tables[earlier].column(earlier_column).take(rows[earlier]))
        right = _keys(tables[joined].column(joined_column))
        if left is None or right is None:
            return None
        matched_left, matched_right = _equal_pairs(left, right)
        if len(matched_left) > LOOKUP_MAX_ROWS:
            return None
        rows = [r[matched_left] for r in rows] + [matched_right]
    return rows


def _keys(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray] | None:
    """(positions of the non-NULL keys, their values as numpy compares them), or None."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    positions = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False))
    values = column.drop_null()
    if _key_class(column.type) in ("int", "bool"):
        try:  # (every integer type compares as its value: int64 holds all but uint64's top)
            values = pc.cast(values, pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    return positions, values.to_numpy(zero_copy_only=False)


def _equal_pairs(
    left: tuple[np.ndarray, np.ndarray], right: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Every (left row, right row) whose keys are equal, in left's row order."""
    import numpy as np

    (left_rows, left_keys), (right_rows, right_keys) = left, right
    by_key = np.argsort(right_keys, kind="stable")
    ordered = right_keys[by_key]
    first = np.searchsorted(ordered, left_keys, "left")
    counts = np.searchsorted(ordered, left_keys, "right") - first
    total = int(counts.sum())
    starts = np.repeat(first, counts)
    within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(left_rows, counts), right_rows[by_key[starts + within]]


def _order(
    tables: list[pa.Table], rows: list[np.ndarray], order: Sequence[tuple[int, str, bool]]
) -> pa.Array:
    """The joined rows' positions sorted by the ORDER BY keys, NULLs last as DuckDB's default."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = pa.table(
        {f"k{i}": tables[s].column(c).take(rows[s]) for i, (s, c, _) in enumerate(order)}
    )
    return pc.sort_indices(
        keys,
        sort_keys=[
            (f"k{i}", "descending" if d else "ascending", "at_end")
            for i, (_, _, d) in enumerate(order)
        ],
    )


def _key_class(arrow_type: pa.DataType) -> str | None:
    """How a join key compares here: ``int``, ``bool`` (as 0 and 1), ``string``, or None."""
    kind = type_class(arrow_type)
    return kind if kind in ("int", "bool", "string") else None


def _conjuncts(node: exp.Expression) -> list[Any]:
    """The conjuncts of a WHERE, through parentheses at every level (sqlglot's
    ``flatten`` stops at a parenthesised AND)."""
    from sqlglot import exp

    bare = node.unnest()
    if isinstance(bare, exp.And):
        return _conjuncts(bare.this) + _conjuncts(bare.expression)
    return [bare]
