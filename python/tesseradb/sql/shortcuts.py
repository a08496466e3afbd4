"""Statements a relation may answer without DuckDB: the native shortcuts.

- ``SELECT count(*), min(x) FROM rel WHERE <exact predicate> GROUP BY g``
  needs no rows when the relation can fold its storage (an array's chunks,
  a stream's found records) or count from an index (an attached table's
  bitmaps): an :class:`AggregateQuery`.
- ``SELECT a, b AS c FROM rel WHERE <exact predicate> [ORDER BY ...]`` is
  the rows the relation's scan finds, filtered by the predicate exactly as
  SQL would, with nothing left for DuckDB to compute: a :class:`Lookup`.
  A point query then costs a scan of a few rows, not a statement in
  DuckDB.

This module recognises such statements (their shape is known before the
parameters are); the statement analysis (``analysis.py``) supplies the
columns and the exact WHERE predicate, and the engine asks the relation
(``Aggregating``, ``Counting``) or filters its scan.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tesseradb.sql.bounds import NotPushable
from tesseradb.sql.paths import JsonPath
from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import (
    Aggregating,
    Counting,
    PathReading,
    Relation,
    RelationScan,
    ScanStats,
    can,
)
from tesseradb.sql.result import Result

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

    from tesseradb.sql.analysis import Analysis
    from tesseradb.sql.relation import Namespace

# a WHERE clause -> its predicate, whether that is exact, and per column the values at
# which a float literal's reading matters (see bounds.ambiguity_point)
DeriveExact = Callable[
    ["exp.Expression"], tuple[Predicate, bool, tuple[tuple[str, tuple[float, ...]], ...]]
]

__all__ = [
    "AggregateQuery",
    "AggregateShape",
    "Lookup",
    "LookupShape",
    "aggregate_shape",
    "answer_aggregate",
    "answer_count",
    "answer_lookup",
    "exact_where",
    "lookup_shape",
    "order_key",
    "selected_columns",
]

# A lookup (a selection the engine answers from the scan) is for small answers: once a
# scan has given more rows than this, the statement runs in DuckDB (where it can be
# interrupted) with a fresh scan; the rows read so far are the most a lookup wastes.
LOOKUP_MAX_ROWS = 65_536
# the parts of a SELECT that make its rows other than rows read (and filtered, joined,
# sorted): a statement with any of them is no lookup and no join the engine answers
NOT_ROWS_AS_READ = (
    "group",
    "having",
    "qualify",
    "distinct",
    "limit",
    "offset",
    "with",
    "laterals",
    "windows",
    "sample",
    "into",
    "kind",
)
# a lookup reading paths filters this many rows or fewer one by one, in Python
_ROW_BY_ROW = 16


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
    # the statement's columns when some are an aggregate divided by a number (see
    # Quotient); empty: the items' outputs as they are
    finish: tuple[tuple[str, Quotient | None], ...] = ()


@dataclass(frozen=True)
class Quotient:
    """``agg / number`` (or ``number / agg``): ``item`` is the aggregate's output among
    the query's items, ``number`` the literal's value. DuckDB divides as DOUBLE whatever
    the operands' types (``/`` is float division); so does :meth:`apply`."""

    item: str
    number: float
    aggregate_first: bool

    def apply(self, values: pa.ChunkedArray) -> pa.ChunkedArray | None:
        """The quotients of ``values`` (the aggregate's), or None where DuckDB would not
        divide as DOUBLE: a FLOAT minimum or maximum is divided as FLOAT there."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not (pa.types.is_integer(values.type) or pa.types.is_float64(values.type)):
            return None
        # (an integer past 2**53 rounds to the nearest DOUBLE, as DuckDB's cast does)
        doubles = values.cast(pa.float64(), safe=False)
        number = pa.scalar(self.number, pa.float64())
        return pc.divide(doubles, number) if self.aggregate_first else pc.divide(number, doubles)


@dataclass(frozen=True)
class AggregateShape:
    """What a single-relation aggregate statement computes, before its WHERE clause is
    derived with the parameters' values (see :func:`aggregate_shape`)."""

    relation: str
    items: tuple[tuple[str, str, str | None], ...]
    group_by: tuple[str, ...]
    order: tuple[tuple[str, bool], ...]
    finish: tuple[tuple[str, Quotient | None], ...] = ()

    def query(
        self,
        where: exp.Expression | None,
        derive_exact: DeriveExact,
    ) -> AggregateQuery | None:
        """The query with ``where`` derived (its predicate, whether exact, its ambiguity
        points), or None when the predicate is not exact."""
        if where is None:
            pred, exact, ambiguous = Predicate(), True, ()
        else:
            pred, exact, ambiguous = derive_exact(where)
        if not exact or any(JsonPath.parse(column) for column in pred):
            return None  # (only a lookup reads values inside JSON columns: PathReading)
        return AggregateQuery(
            self.relation, self.items, self.group_by, pred, self.order, ambiguous, self.finish
        )


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
        finish: list[tuple[str, Quotient | None]] = []
        for item in select.expressions:
            alias = item.alias if isinstance(item, exp.Alias) else None
            node = item.this if isinstance(item, exp.Alias) else item
            quotient = _quotient(node, column_of, len(items))
            if quotient is not None:
                (output, fn, column), divided, named = quotient
                items.append((output, fn, column))
                finish.append((alias or named, divided))
                continue
            if isinstance(node, exp.Column):
                name = column_of(node)
                if name.lower() not in {g.lower() for g in group_by}:
                    return None
                items.append((alias or node.name, "column", name))
                finish.append((items[-1][0], None))
                continue
            fn = _FUNCTIONS.get(type(node).__name__)
            if fn is None or node.args.get("expressions") or isinstance(node.this, exp.Distinct):
                return None
            if fn == "count" and isinstance(node.this, exp.Star):
                items.append((alias or "count_star()", "count", None))
                finish.append((items[-1][0], None))
                continue
            name = column_of(node.this)
            spelled = node.sql_name().lower() if fn == "stddev" else fn
            items.append((alias or f"{spelled}({node.this.name})", fn, name))
            finish.append((items[-1][0], None))
        if all(divided is None for _, divided in finish):
            finish = []
        order: list[tuple[str, bool]] = []
        ordered = select.args.get("order")
        if finish and ordered is not None:
            return None  # (an order over a quotient: DuckDB sorts)
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
    if finish and len({out.lower() for out, _ in finish}) != len(finish):
        return None
    return AggregateShape(relation, tuple(items), tuple(group_by), tuple(order), tuple(finish))


# the aggregates whose quotient by a number the shortcut computes: their values are
# DOUBLE or integers below 2**53 whose conversion to DOUBLE is exact or correctly
# rounded on both sides (an integer sum is a HUGEINT, left to DuckDB)
_DIVIDED = frozenset({"avg", "min", "max", "count"})
# a number as DuckDB writes it back in a column's name: no sign, exponent or leading zeros
_PLAIN_NUMBER = re.compile(r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")


def _quotient(
    node: exp.Expression, column_of: Callable[[exp.Expression], str], index: int
) -> tuple[tuple[str, str, str | None], Quotient, str] | None:
    """``agg(col) / number`` or ``number / agg(col)``: the aggregate as a hidden item,
    the division, and the column's name as DuckDB gives it (``(avg(x) / 10)``); None
    for anything else."""
    from sqlglot import exp

    if not isinstance(node, exp.Div) or node.args.get("typed") or node.args.get("safe"):
        return None
    left, right = node.this, node.expression
    aggregate_first = isinstance(right, exp.Literal)
    number, aggregate = (right, left) if aggregate_first else (left, right)
    if not isinstance(number, exp.Literal) or number.is_string:
        return None
    if not _PLAIN_NUMBER.fullmatch(number.this) or float(number.this) == 0:
        return None
    fn = _FUNCTIONS.get(type(aggregate).__name__)
    if fn not in _DIVIDED or aggregate.args.get("expressions"):
        return None
    if isinstance(aggregate.this, exp.Distinct):
        return None
    if fn == "count" and isinstance(aggregate.this, exp.Star):
        column, spelled = None, "count_star()"
    elif isinstance(aggregate.this, exp.Star):
        return None
    else:
        column = column_of(aggregate.this)
        spelled = f"{fn}({aggregate.this.name})"
    hidden = f"__tessera_quotient_{index}"
    named = f"({spelled} / {number.this})" if aggregate_first else f"({number.this} / {spelled})"
    return (hidden, fn, column), Quotient(hidden, float(number.this), aggregate_first), named


# --- lookups ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lookup:
    """``SELECT <columns> FROM rel WHERE <predicate> [ORDER BY <keys>]``, the predicate
    exactly the WHERE clause.

    ``columns`` are (the relation's column, output name); ``order`` is
    (the relation's column, descending), NULLs last as DuckDB sorts by
    default; ``needed`` every column to scan (outputs, predicate, order).
    """

    relation: str
    columns: tuple[tuple[str, str], ...]
    predicate: Predicate
    order: tuple[tuple[str, bool], ...]

    @property
    def needed(self) -> list[str]:
        names = [c for c, _ in self.columns] + [c for c, _ in self.order] + list(self.predicate)
        return list(dict.fromkeys(names))


@dataclass(frozen=True)
class LookupShape:
    """A :class:`Lookup` before its WHERE clause is derived with the parameters' values."""

    relation: str
    columns: tuple[tuple[str, str], ...]
    order: tuple[tuple[str, bool], ...]

    def query(
        self,
        where: exp.Expression | None,
        derive_exact: DeriveExact,
    ) -> Lookup | None:
        """The lookup with ``where`` derived, or None unless its predicate is exact
        everywhere (no value at which a float literal's reading matters)."""
        pred = exact_where(where, derive_exact)
        return None if pred is None else Lookup(self.relation, self.columns, pred, self.order)


def exact_where(where: exp.Expression | None, derive_exact: DeriveExact) -> Predicate | None:
    """``where`` (None: no WHERE) as a predicate that is exactly it, with no value at
    which a float literal's reading matters; None where it is not."""
    if where is None:
        return Predicate()
    pred, exact, ambiguous = derive_exact(where)
    return pred if exact and not ambiguous else None


def lookup_shape(
    select: exp.Select,
    relation: str,
    names: Sequence[str],
    column_of: Callable[[exp.Expression], str],
    orderable: Callable[[str], bool],
    path_of: Callable[[exp.Expression], str] | None = None,
) -> LookupShape | None:
    """``select`` as a lookup in ``relation`` (whose columns are ``names``), or None.

    Only plain columns (or a bare ``*``) are selected, each output name once,
    and, where ``path_of`` is given, values inside a JSON column under an alias
    (``doc->>'s' AS s``: ``path_of`` gives the key of that
    :class:`~tesseradb.sql.paths.JsonPath`, or raises NotPushable);
    ``ORDER BY`` keys are selected or relation columns that ``orderable``
    accepts (whose order pyarrow and DuckDB agree on), without explicit
    ``NULLS FIRST/LAST``. Anything else (expressions, joins, grouping,
    ``DISTINCT``, ``LIMIT``, windows) is left to DuckDB.
    """

    if any(select.args.get(k) for k in ("joins", *NOT_ROWS_AS_READ)):
        return None
    try:
        columns = selected_columns(select, names, column_of, path_of)
        if columns is None:
            return None
        outputs = {out.lower(): source for source, out in columns}
        if not columns or len(outputs) != len(columns):
            return None  # no output, or a name twice (DuckDB would rename one)
        order: list[tuple[str, bool]] = []
        ordered = select.args.get("order")
        for key in ordered.expressions if ordered is not None else []:
            found = order_key(key, outputs, column_of)
            if found is None or not orderable(found[0]):
                return None
            order.append(found)
    except NotPushable:
        return None
    return LookupShape(relation, tuple(columns), tuple(order))


def selected_columns(
    select: exp.Select,
    names: Sequence[str],
    column_of: Callable[[exp.Expression], str],
    path_of: Callable[[exp.Expression], str] | None = None,
) -> list[tuple[str, str]] | None:
    """The select list as (the relation's column, output name) pairs, a bare ``*`` as
    every one of ``names``; with ``path_of``, a value inside a JSON column under an alias
    as its :class:`~tesseradb.sql.paths.JsonPath` key. None for anything else (an
    expression); ``column_of`` and ``path_of`` may raise NotPushable."""
    from sqlglot import exp

    columns: list[tuple[str, str]] = []
    for item in select.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Star) and not any(node.args.values()) and alias is None:
            columns.extend((n, n) for n in names)
            continue
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            name = column_of(node)
        elif path_of is not None and alias:  # (DuckDB's own name for it is its text)
            name = path_of(node)
        else:
            return None
        columns.append((name, alias or name))
    return columns


def order_key(
    key: exp.Expression, outputs: Mapping[str, str], column_of: Callable[[exp.Expression], str]
) -> tuple[str, bool] | None:
    """An ``ORDER BY`` key as (the relation's column, descending), NULLs last, or None for
    anything else (an expression, explicit ``NULLS FIRST/LAST``): an unqualified name is
    first an output's (``outputs``: lower-case output name -> the relation's column), as
    DuckDB reads it."""
    from sqlglot import exp

    target = key.this
    if (
        not isinstance(target, exp.Column)
        or isinstance(target.this, exp.Star)
        or key.args.get("nulls_first")
        or key.args.get("with_fill")
    ):
        return None  # (sqlglot reads DuckDB's default, NULLS LAST, as False)
    if not target.table and target.name.lower() in outputs:
        return outputs[target.name.lower()], bool(key.args.get("desc"))
    return column_of(target), bool(key.args.get("desc"))


def answer_count(namespace: Namespace, analysis: Analysis) -> Result | None:
    """``SELECT count(*) FROM rel [WHERE ...]`` answered by the relation, when it can say exactly.

    Only when the WHERE clause is exactly the derived predicate (the
    analysis checks) and the relation knows the count without reading
    rows (an attached table whose bitmap indexes settle it).
    """
    import pyarrow as pa

    if analysis.count_only is None:
        return None
    key, name, predicate = analysis.count_only
    relation = namespace.relation(key)
    if not can(relation, Counting):
        return None
    rows = relation.count(predicate)
    if rows is None:
        return None
    return Result(
        pa.table({name: pa.array([rows], pa.int64())}),
        {relation.name: ScanStats()},
        shortcut="count",
    )


def answer_aggregate(namespace: Namespace, analysis: Analysis) -> Result | None:
    """A single-relation aggregate query answered by the relation's ``aggregate``.

    The relation computes it from its storage (an array's chunks, folded
    in Rust or reduced with numpy; a stream's found records) or returns None, and the
    statement then runs as usual. ``ambiguous`` gives, per column, the
    values at which the WHERE is not exact (see ``AggregateQuery``); a
    relation that finds a candidate row holding one, or cannot look,
    returns None. Tests check both paths give the same answers.
    """
    query = analysis.aggregate_only
    if query is None:
        return None
    relation = namespace.relation(query.relation)
    if not can(relation, Aggregating):
        return None
    table = relation.aggregate(
        list(query.items),
        list(query.group_by),
        None if query.predicate.is_true else query.predicate,
        dict(query.ambiguous),
    )
    if table is None:
        return None
    if query.finish:
        import pyarrow as pa

        columns = {}
        for name, divided in query.finish:
            column = table.column(name if divided is None else divided.item)
            if divided is not None:
                column = divided.apply(column)
                if column is None:
                    return None
            columns[name] = column
        table = pa.table(columns)
    if query.order:
        table = table.sort_by(
            [(name, "descending" if desc else "ascending") for name, desc in query.order]
        )
    return Result(table, {relation.name: ScanStats()}, shortcut="aggregate")


def answer_lookup(namespace: Namespace, analysis: Analysis) -> Result | None:
    """A selection of plain columns under an exact predicate, answered from the relation's
    scan: its rows filtered by the predicate (Arrow compute, with SQL's semantics),
    sorted as asked, renamed; no statement in DuckDB.

    Only for columns of types that come out of DuckDB as they went in (integers,
    floats, booleans; strings and JSON come out as ``string``), so the answer is the
    one DuckDB would give, Arrow types included; tests compare the two. A scan that
    gives more than ``LOOKUP_MAX_ROWS`` rows is abandoned to DuckDB.

    Values inside a JSON column (selected, or in the WHERE) come from the
    relation's ``read_paths`` (:class:`PathReading`), which gives them as DuckDB
    computes them or declines.
    """
    import pyarrow as pa

    query = analysis.lookup
    if query is None:
        return None
    relation = namespace.relation(query.relation)
    if relation is None:
        return None
    types = {f.name: f.type for f in relation.schema()}
    paths = [c for c in query.needed if c not in types]
    if paths:
        read = _read_paths(relation, query, types)
        if read is None:
            return None
        table, stats = read
    else:
        if not all(passes_through_duckdb(types[c]) for c in query.needed):
            return None
        read = exact_rows(relation, query.needed, query.predicate, query.predicate)
        if read is None:
            return None
        table, stats = read
    if query.order:
        keys = [(c, "descending" if desc else "ascending", "at_end") for c, desc in query.order]
        table = table.sort_by(keys)  # NULLs last either way, as DuckDB by default
    columns = [as_duckdb_gives(table.column(c)) for c, _ in query.columns]
    table = pa.Table.from_arrays(columns, names=[out for _, out in query.columns])
    return Result(table, {relation.name: stats}, shortcut="lookup")


def exact_rows(
    relation: Relation,
    columns: Sequence[str],
    scan_predicate: Predicate,
    exact: Predicate,
    prefetched: pa.Table | None = None,
) -> tuple[pa.Table, ScanStats] | None:
    """The rows of ``relation``'s scan (``columns`` under ``scan_predicate``, or the
    ``prefetched`` rows read under it) that ``exact`` matches as SQL decides, and what
    was read; None for a column Arrow cannot compare as SQL does, or a scan past
    ``LOOKUP_MAX_ROWS`` rows (the statement then runs in DuckDB)."""
    import pyarrow as pa

    scan = RelationScan(relation, columns, scan_predicate)
    scan.prefetched = prefetched
    batches = []
    for batch in scan.reader():
        kept = exact.filter_exactly(batch)
        if kept is None or scan.stats.rows > LOOKUP_MAX_ROWS:
            return None
        batches.append(kept)
    return pa.Table.from_batches(batches, scan.schema()), scan.stats


def _read_paths(
    relation: Relation, query: Lookup, types: dict[str, pa.DataType]
) -> tuple[pa.Table, ScanStats] | None:
    """The rows of a lookup that needs values inside JSON columns, filtered exactly, and
    what was read; None where the relation declines or a value cannot be compared here."""
    import pyarrow as pa

    if not can(relation, PathReading):
        return None
    if len({c.lower() for c in query.needed}) < len(query.needed):
        return None  # (columns are matched by name without case: two paths may differ in it)
    if not all(passes_through_duckdb(types[c]) for c in query.needed if c in types):
        return None
    table = relation.read_paths(
        query.needed, None if query.predicate.is_true else query.predicate, LOOKUP_MAX_ROWS
    )
    if table is None:
        return None
    stats = ScanStats(scans=1, batches=1, rows=table.num_rows)
    if table.num_rows <= _ROW_BY_ROW:
        # the relation's values are Python's ints, floats and strings, compared with the
        # predicate's bounds as SQL compares them; Arrow compute costs more on a few rows
        rows = table.to_pylist()
        matching = [i for i, row in enumerate(rows) if query.predicate.matches(row)]
        if len(matching) < table.num_rows:
            kept = table.take(pa.array(matching, pa.int64()))
        else:
            kept = table
    else:
        kept = query.predicate.filter_exactly(table)
    return None if kept is None else (kept, stats)


def passes_through_duckdb(arrow_type: pa.DataType) -> bool:
    """Whether DuckDB gives a column of this type back with the same values and type (a
    string type, or JSON text, comes back as ``string`` holding the same text)."""
    import pyarrow as pa
    import pyarrow.types as pt

    return (
        pt.is_integer(arrow_type)
        or pt.is_float32(arrow_type)
        or pt.is_float64(arrow_type)
        or pt.is_boolean(arrow_type)
        or pt.is_string(arrow_type)
        or pt.is_large_string(arrow_type)
        or pt.is_string_view(arrow_type)
        or isinstance(arrow_type, pa.JsonType)
    )


def as_duckdb_gives(column: pa.ChunkedArray) -> pa.ChunkedArray:
    import pyarrow as pa
    import pyarrow.types as pt

    if isinstance(column.type, pa.JsonType):
        column = pa.chunked_array([c.storage for c in column.chunks], column.type.storage_type)
    if pt.is_large_string(column.type) or pt.is_string_view(column.type):
        return column.cast(pa.string())
    return column
