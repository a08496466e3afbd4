"""Static analysis of a SQL text: which relations it reads, which of their
columns, which rows may match (a :class:`Predicate` per relation), and what
it writes.

The statement itself is never rewritten: DuckDB runs the user's text with
the user's parameters bound, and re-applies every filter. So everything
derived here only has to be a *superset*: when in doubt, a relation gets no
predicate and all its columns. The rules that keep it a superset:

- A predicate is derived per table reference from the WHERE clause and the
  ON clauses of inner joins of its own SELECT scope, after pushing NOT down
  (three-valued logic: ``NOT (x > 5)`` is ``x <= 5``, and neither holds for
  NULL). AND intersects, OR unions per column (a column restricted on only
  one side of an OR is dropped), anything not sargable is TRUE.
- On the NULL-supplying side of an outer join, a WHERE predicate is pushed
  only if it rejects NULLs; the ON clause of a LEFT JOIN is pushed to its
  right side only. ASOF and POSITIONAL joins, and sampled tables, get no
  pushdown (their answer depends on the rows that do not match).
- A relation read by several references gets the OR of their predicates.
- A column is requested if its name is mentioned anywhere in the text; any
  ``*`` (but ``count(*)``) or a table alias used as a value requests all.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tesseradb.sql.bounds import (
    Float32,
    NotPushable,
    ambiguity_point,
    compare_ranges,
    is_exact,
    like_prefix_range,
    parse_number,
    settled_ranges,
)
from tesseradb.sql.paths import JsonPath
from tesseradb.sql.predicate import ColumnDomain, Predicate, RangeSet, type_class
from tesseradb.sql.shortcuts import (
    AggregateQuery,
    AggregateShape,
    Lookup,
    LookupShape,
    aggregate_shape,
    lookup_shape,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

__all__ = ["Analysis", "Prepared", "RelationUse", "analyse", "normalise_placeholders", "prepare"]

# Positional `?` placeholders are renamed to this prefix plus their index, so
# that every placeholder in the parsed tree knows which parameter it is.
_POSITIONAL = "__tessera_p"
_NUMBERED = "__tessera_d"  # $1, $2, ...: 1-based positions


@dataclass
class RelationUse:
    """How one statement text reads one relation (all its references merged)."""

    name: str
    aliases: list[str] = field(default_factory=list)
    predicate: Predicate = field(default_factory=Predicate)
    columns: list[str] | None = None  # None: all columns
    notes: list[str] = field(default_factory=list)
    references: int = 0


@dataclass(frozen=True)
class EquiJoin:
    """``left.left_column = right.right_column`` between two relations, and which side
    may be narrowed to the other side's keys (a semi-join reduction)."""

    left: str  # lower-case relation names
    left_column: str
    right: str
    right_column: str
    reduce_left: bool
    reduce_right: bool


@dataclass
class Analysis:
    relations: dict[str, RelationUse]  # by lower-case relation name
    table_names: set[str]  # every other table name referenced (lower case, unqualified)
    writes: list[tuple[str, str]]  # (statement kind, target name) of DDL/DML
    is_query: bool  # every statement only reads
    parsed: bool  # sqlglot understood the text (otherwise no pushdown at all)
    parse_error: Exception | None = None
    equijoins: list[EquiJoin] = field(default_factory=list)
    # rows already read from a relation (semi-join keys), by relation: (predicate, table)
    prefetched: dict[str, tuple[Predicate, Any]] = field(default_factory=dict)
    # a single-relation aggregate query a relation may answer without rows
    aggregate_only: AggregateQuery | None = None
    # a single-relation selection of plain columns its scan answers without DuckDB
    lookup: Lookup | None = None
    statement_count: int = 1

    @property
    def count_only(self) -> tuple[str, str, Predicate] | None:
        """``SELECT count(*) FROM rel [WHERE w]``, w exactly a Predicate: (relation, column name, predicate).

        Such a count may be answered by the relation itself (an attached
        table from its bitmap indexes) when that is exact; see the engine.
        """
        query = self.aggregate_only
        if (
            query is None
            or query.group_by
            or query.order
            or query.ambiguous
            or len(query.items) != 1
        ):
            return None
        name, fn, column = query.items[0]
        if fn != "count" or column is not None:
            return None
        return query.relation, name, query.predicate


SchemaLookup = Callable[[str], "pa.Schema | None"]
ColumnsLookup = Callable[[str], "list[str] | None"]


def normalise_placeholders(text: str) -> str:
    """Rename every placeholder to the ``:name`` form, which sqlglot parses reliably.

    ``?`` becomes ``:__tessera_p<i>`` (its position), ``$1`` becomes
    ``:__tessera_d1`` and ``$name`` becomes ``:name``. (sqlglot's tokenizer
    fails on a ``$name`` followed later by an empty string ``''``.) Tokens
    come from DuckDB's own tokenizer, so a ``?`` or ``$`` inside a string, a
    dollar-quoted string or a comment stays as it is.
    """
    if "?" not in text and "$" not in text:
        return text
    import duckdb

    tokens = duckdb.tokenize(text)
    data = text.encode()  # DuckDB's token positions are byte offsets into the UTF-8 text
    out: list[bytes] = []
    pos = index = 0
    for i, (start, kind) in enumerate(tokens):
        if not str(kind).endswith("operator"):
            continue
        if data[start : start + 1] == b"?":
            out.append(data[pos:start])
            out.append(f":{_POSITIONAL}{index}".encode())
            pos, index = start + 1, index + 1
        elif (
            data[start : start + 1] == b"$"
            and i + 1 < len(tokens)
            and tokens[i + 1][0] == start + 1
        ):
            name = re.match(rb"[A-Za-z0-9_]+", data[start + 1 :])
            if name is None:
                continue
            word = name.group(0).decode()
            out.append(data[pos:start])
            out.append((f":{_NUMBERED}{word}" if word.isdigit() else f":{word}").encode())
            pos = start + 1 + len(word)
    out.append(data[pos:])
    return b"".join(out).decode()


def analyse(
    text: str, params: Any, schema_of: SchemaLookup, columns_of: ColumnsLookup | None = None
) -> Analysis:
    """Analyse ``text`` with ``params`` bound.

    ``schema_of(name)`` gives a relation's schema or ``None``; ``columns_of(name)``
    the column names of any other table (a plain table), or ``None`` if unknown.
    """
    return prepare(text, schema_of, columns_of).bind(params)


def prepare(
    text: str, schema_of: SchemaLookup, columns_of: ColumnsLookup | None = None
) -> Prepared:
    """What can be learnt of ``text`` without its parameters (see :class:`Prepared`)."""
    from sqlglot.errors import SqlglotError

    try:
        statements = _parse(text)
    except SqlglotError as err:
        return Prepared([], set(), [], is_query=False, parse_error=err)
    except (RecursionError, ValueError) as err:  # pathological nesting
        return Prepared([], set(), [], is_query=False, parse_error=err)
    analysers: list[_StatementAnalyser] = []
    others: set[str] = set()
    writes: list[tuple[str, str]] = []
    is_query = True
    for stmt in statements:
        is_query = is_query and _is_query(stmt)
        writes.extend(_write_targets(stmt))
        analyser = _StatementAnalyser(stmt, schema_of, columns_of, others)
        analyser.run()
        analysers.append(analyser)
    return Prepared(analysers, others, writes, is_query=is_query)


class Prepared:
    """The analysis of a text before its parameters are known.

    Parsing, scoping and resolving names (what each statement reads, which
    columns, which filters apply to which relation, the equi-joins) does not
    depend on the parameters and costs most of an analysis; ``bind`` then
    derives each relation's predicate from the recorded filters with the
    parameters' values. A statement run again with other values (a point
    query in a loop) is prepared once.
    """

    def __init__(
        self,
        analysers: list[_StatementAnalyser],
        others: set[str],
        writes: list[tuple[str, str]],
        is_query: bool,
        parse_error: Exception | None = None,
    ) -> None:
        self._analysers = analysers
        self.others = others
        self.writes = writes
        self.is_query = is_query
        self.parse_error = parse_error

    @property
    def parsed(self) -> bool:
        return self.parse_error is None

    def bind(self, params: Any) -> Analysis:
        """The analysis with ``params`` bound (objects of its own, free to change)."""
        if not self.parsed:
            return Analysis(
                {}, set(), [], is_query=False, parsed=False, parse_error=self.parse_error
            )
        relations: dict[str, RelationUse] = {}
        equijoins: list[EquiJoin] = []
        aggregate_only = lookup = None
        for analyser in self._analysers:
            bound = analyser.bound(params, relations)
            aggregate_only, lookup = bound.aggregate_only, bound.lookup
            equijoins.extend(analyser.equijoins)
        return Analysis(
            relations,
            set(self.others),
            list(self.writes),
            is_query=self.is_query,
            parsed=True,
            equijoins=equijoins,
            aggregate_only=aggregate_only if len(self._analysers) == 1 else None,
            lookup=lookup if len(self._analysers) == 1 else None,
            statement_count=len(self._analysers),
        )


class _QuietFallbacks(logging.Filter):
    """sqlglot warns when it reads a statement as an opaque command (``PREPARE``, ``RESET``):
    such a statement runs as DuckDB reads it, with no pushdown, which is no news to a user."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_QuietFallbacks())


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> tuple[exp.Expression, ...]:
    """The statements of ``text``, parsed once per distinct text (trees are only read)."""
    import sqlglot

    return tuple(s for s in sqlglot.parse(normalise_placeholders(text), read="duckdb") if s)


def _is_query(stmt: exp.Expression) -> bool:
    from sqlglot import exp

    query_types: tuple[type, ...] = (exp.Select, exp.Union, exp.Except, exp.Intersect, exp.Describe)
    return isinstance(stmt, query_types)


def _table_name(node: exp.Expression | None) -> str | None:
    from sqlglot import exp

    while isinstance(node, exp.Schema):
        node = node.this
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
        return node.name
    return None


def _source_name(table: exp.Table) -> str | None:
    """The name a table reference resolves by: ``t``, or ``a.t`` for a table of object ``a``."""
    name = _table_name(table)
    if name is None or table.args.get("catalog"):
        return None
    db = table.args.get("db")
    return f"{db.name}.{name}" if db is not None else name


def _write_targets(stmt: exp.Expression) -> list[tuple[str, str]]:
    from sqlglot import exp

    kinds: list[tuple[type, str]] = [
        (exp.Insert, "INSERT"),
        (exp.Update, "UPDATE"),
        (exp.Delete, "DELETE"),
        (exp.Drop, "DROP"),
        (exp.Create, "CREATE"),
        (exp.Alter, "ALTER"),
    ]
    for cls, kind in kinds:
        if isinstance(stmt, cls):
            name = _table_name(stmt.this)
            if kind in ("DROP", "CREATE"):
                object_kind = str(stmt.args.get("kind") or "").upper()
                if object_kind not in ("TABLE", "VIEW"):
                    return [(f"{kind} {object_kind}".strip(), name or "")]
                kind = f"{kind} {object_kind}"
            return [(kind, name or "")]
    return []


@dataclass
class _Source:
    alias: str  # lower case
    relation: str | None  # lower-case relation name if this source is a relation
    columns: dict[str, pa.DataType] | None  # lower name -> type, None if unknown
    null_supplying: bool = False
    blocked: bool = False  # no pushdown at all (ASOF right side, POSITIONAL, samples)
    renamed: bool = False  # `FROM rel AS r(a, b)`: its columns go by other names
    spelled: dict[str, str] = field(default_factory=dict)  # a relation's: lower -> its name
    names: list[str] = field(default_factory=list)  # a relation's columns in schema order


class _StatementAnalyser:
    """One statement's analysis: ``run`` resolves what it reads (no parameters needed) and
    records, in order, the steps that derive predicates and merge each reference into
    its relation's use; ``bound`` replays them with parameters on a copy."""

    def __init__(
        self,
        stmt: exp.Expression,
        schema_of: SchemaLookup,
        columns_of: ColumnsLookup | None,
        others: set[str],
    ) -> None:
        self.stmt = stmt
        self.params: Any = None
        self.schema_of = schema_of
        self.columns_of = columns_of
        self.equijoins: list[EquiJoin] = []
        self.aggregate_only: AggregateQuery | None = None
        self.lookup: Lookup | None = None
        # while deriving an aggregate query's WHERE: float comparisons taken as exact
        # but for one value per column (None: such comparisons are inexact)
        self._ambiguous: dict[str, set[float]] | None = None
        self.relations: dict[str, RelationUse] = {}
        self.others = others
        self._schemas: dict[str, pa.Schema | None] = {}
        self._steps: list[tuple[Callable[..., None], tuple[Any, ...]]] = []

    def bound(self, params: Any, relations: dict[str, RelationUse]) -> _StatementAnalyser:
        """A copy with ``params`` bound that has merged its references into ``relations``."""
        bound = copy.copy(self)
        bound.params = params
        bound.relations = relations
        bound.aggregate_only = bound.lookup = None
        bound._ambiguous = None
        for step, args in self._steps:
            step(bound, *args)
        return bound

    def schema(self, name: str) -> pa.Schema | None:
        key = name.lower()
        if key not in self._schemas:
            self._schemas[key] = self.schema_of(name)
        return self._schemas[key]

    def run(self) -> None:
        from sqlglot import exp
        from sqlglot.optimizer.scope import traverse_scope

        cte_names = {c.alias_or_name.lower() for c in self.stmt.find_all(exp.CTE)}
        mentioned, star = self._mentions()
        # A sample is drawn before WHERE applies: filtering first would change it.
        self.sampled = any(True for _ in self.stmt.find_all(exp.TableSample))
        seen: set[int] = set()
        try:
            scopes = traverse_scope(self.stmt)
        except Exception:  # sqlglot cannot scope every DuckDB construct: no pushdown
            scopes = []
        for scope in scopes:
            self._analyse_scope(scope, mentioned, star, seen)
        # Table references outside any analysed scope (DML targets, constructs
        # sqlglot does not scope) are read whole, with every column.
        for table in self.stmt.find_all(exp.Table):
            if id(table) in seen:
                continue
            name = _source_name(table)
            if name is None:
                continue
            if name.lower() in cte_names:
                continue
            if self.schema(name) is not None:
                note = "read whole: reference outside an analysed SELECT"
                self._steps.append((_StatementAnalyser._merge_use, (name, Predicate(), None, note)))
            else:
                self.others.add(name.lower())

    def _merge_use(
        self, name: str, pred: Predicate, columns: list[str] | None, note: str | None
    ) -> None:
        """Merge one reference into the relation's use: OR of predicates, union of columns."""
        key = name.lower()
        use = self.relations.get(key)
        if use is None:
            use = self.relations[key] = RelationUse(name=name, predicate=pred, columns=columns)
        else:
            use.predicate = use.predicate.or_(pred)
            if use.columns is None or columns is None:
                use.columns = None
            else:
                use.columns = use.columns + [c for c in columns if c not in use.columns]
        use.references += 1
        if note and note not in use.notes:
            use.notes.append(note)

    def _mentions(self) -> tuple[set[str], bool]:
        from sqlglot import exp

        mentioned: set[str] = set()
        star = False
        # Constructs that use columns without naming them: COLUMNS(...), #n,
        # PIVOT/UNPIVOT (the other columns group), DESCRIBE/SUMMARIZE, NATURAL joins.
        implicit: tuple[type, ...] = (
            exp.Columns,
            exp.PositionalColumn,
            exp.Pivot,
            exp.Describe,
            exp.Summarize,
        )
        for node in self.stmt.walk():
            if isinstance(node, implicit) or (
                isinstance(node, exp.Join)
                and "NATURAL"
                in (str(node.kind or "").upper(), str(node.args.get("method") or "").upper())
            ):
                star = True
            elif isinstance(node, exp.Column):
                if isinstance(node.this, exp.Star):
                    star = True
                else:
                    mentioned.add(node.name.lower())
            elif isinstance(node, exp.Star) and not isinstance(
                node.parent, (exp.Count, exp.Column)
            ):
                star = True
            elif isinstance(node, exp.Identifier) and not isinstance(
                node.parent, (exp.Column, exp.Table, exp.TableAlias)
            ):
                mentioned.add(node.name.lower())  # USING (...), struct keys, ...
        return mentioned, star

    # --- one SELECT scope ---------------------------------------------------
    def _analyse_scope(self, scope: Any, mentioned: set[str], star: bool, seen: set[int]) -> None:
        from sqlglot import exp

        select = scope.expression
        sources: dict[str, _Source] = {}
        for alias, source in scope.sources.items():
            if isinstance(source, exp.Table):
                seen.add(id(source))
                name = _source_name(source)
                qualified = name is not None and "." in name
                schema = None if name is None else self.schema(name)
                if schema is not None:
                    cols: dict[str, pa.DataType] = {}
                    spelled: dict[str, str] = {}
                    for f in schema:  # the first of names equal but for case
                        cols.setdefault(f.name.lower(), f.type)
                        spelled.setdefault(f.name.lower(), f.name)
                    src = _Source(alias.lower(), name.lower() if name else None, cols)
                    src.spelled, src.names = spelled, schema.names
                    table_alias = source.args.get("alias")
                    src.renamed = bool(table_alias is not None and table_alias.args.get("columns"))
                    src.blocked = self.sampled or src.renamed
                    sources[alias.lower()] = src
                else:
                    known = None
                    if name is not None and not qualified:
                        self.others.add(name.lower())
                        names = self.columns_of(name) if self.columns_of is not None else None
                        alias_node = source.args.get("alias")
                        if names is not None and not (
                            alias_node is not None and alias_node.args.get("columns")
                        ):
                            known = {c.lower(): None for c in names}
                    sources[alias.lower()] = _Source(alias.lower(), None, known)  # type: ignore[arg-type]
            else:  # a derived table or CTE: its output names, if it has no star
                named = None
                inner = getattr(source, "expression", None)
                if isinstance(inner, exp.Select) and not any(
                    isinstance(e, exp.Star)
                    or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
                    for e in inner.expressions
                ):
                    named = {n.lower(): None for n in inner.named_selects}
                sources[alias.lower()] = _Source(alias.lower(), None, named)  # type: ignore[arg-type]

        relation_sources = [s for s in sources.values() if s.relation]
        if not relation_sources:
            return
        if not isinstance(select, exp.Select):
            for src in relation_sources:
                note = "not a plain SELECT: read whole"
                self._steps.append(
                    (_StatementAnalyser._merge, (src, Predicate(), mentioned, star, note))
                )
            return
        if select.args.get("sample"):
            for src in sources.values():
                src.blocked = True
        self._shortcuts(select, sources)

        where = select.args.get("where")
        filters: list[exp.Expression] = [where.this] if where is not None else []
        on_pushed: dict[str, list[exp.Expression]] = {}
        # ON clauses whose equalities may narrow only the given side (None: either)
        equi_on: list[tuple[exp.Expression, str | None]] = []
        joins = select.args.get("joins") or []
        order = _source_order(select)  # aliases in FROM/JOIN order
        for join in joins:
            alias = join.this.alias_or_name.lower() if join.this is not None else ""
            side = str(join.side or "").upper()
            kind = str(join.kind or "").upper()
            method = str(join.args.get("method") or "").upper()
            on = join.args.get("on")
            if method in ("ASOF", "POSITIONAL") or kind in ("ASOF", "POSITIONAL"):
                if method == "POSITIONAL" or kind == "POSITIONAL":
                    for src in sources.values():
                        src.blocked = True
                elif alias in sources:
                    sources[alias].blocked = True
                continue
            if kind not in (
                "",
                "INNER",
                "CROSS",
                "OUTER",
                "SEMI",
                "ANTI",
                "NATURAL",
            ) or method not in ("", "NATURAL"):
                for src in sources.values():
                    src.blocked = True
                continue
            earlier = order[: order.index(alias)] if alias in order else []
            if side == "LEFT":
                if alias in sources:
                    sources[alias].null_supplying = True
                if on is not None:
                    on_pushed.setdefault(alias, []).append(on)
                    equi_on.append((on, alias))
            elif side == "RIGHT":
                for a in earlier:
                    sources[a].null_supplying = True
            elif side == "FULL":
                for a in [*earlier, alias]:
                    if a in sources:
                        sources[a].null_supplying = True
            elif kind in ("SEMI", "ANTI"):
                if on is not None:
                    on_pushed.setdefault(alias, []).append(on)
                    equi_on.append((on, None if kind == "SEMI" else alias))
            elif on is not None:
                filters.append(on)

        for f in filters:
            self._find_equijoins(f, sources, None)
        for on, only in equi_on:
            self._find_equijoins(on, sources, only)

        self._steps.append(
            (
                _StatementAnalyser._derive_and_merge,
                (relation_sources, sources, filters, on_pushed, mentioned, star),
            )
        )

    def _derive_and_merge(
        self,
        relation_sources: list[_Source],
        sources: dict[str, _Source],
        filters: list[exp.Expression],
        on_pushed: dict[str, list[exp.Expression]],
        mentioned: set[str],
        star: bool,
    ) -> None:
        """Each relation's predicate in one SELECT scope (with the parameters bound)."""
        for src in relation_sources:
            if src.blocked:
                note = "no pushdown: ASOF/POSITIONAL join or sample"
                self._merge(src, Predicate(), mentioned, star, note)
                continue
            pred = Predicate()
            for f in filters:
                pred = pred.and_(self._derive(f, src, sources, negate=False)[0])
            if src.null_supplying and not _rejects_nulls(pred):
                pred = Predicate()
            for f in on_pushed.get(src.alias, []):
                pred = pred.and_(self._derive(f, src, sources, negate=False)[0])
            self._merge(src, pred, mentioned, star, None)

    def _shortcuts(self, select: exp.Select, sources: dict[str, _Source]) -> None:
        """Recognise a statement a relation may answer without DuckDB: a single-relation
        aggregate query (:class:`AggregateQuery`: an array folds its chunks) or a
        selection of plain columns (:class:`Lookup`: the scan's rows, filtered).
        The WHERE clause is derived when the parameters are bound; see the engine.
        """
        if select is not self.stmt or len(sources) != 1:
            return
        src = next(iter(sources.values()))
        if src.relation is None or src.blocked or src.renamed or src.columns is None:
            return
        where = select.args.get("where")
        where = None if where is None else where.this

        def column(node: exp.Expression) -> str:
            return self._column_of(node, src, sources)[0]

        shape = aggregate_shape(select, src.relation, column)
        if shape is not None:
            self._steps.append((_StatementAnalyser._bind_shortcut, (shape, where, src, sources)))
            return

        def orderable(name: str) -> bool:  # orders on which pyarrow's sort and DuckDB's agree
            return type_class(src.columns[name.lower()]) in ("int", "string", "bool")  # type: ignore[index]

        lookup = lookup_shape(select, src.relation, src.names, column, orderable)
        if lookup is not None:
            self._steps.append((_StatementAnalyser._bind_shortcut, (lookup, where, src, sources)))

    def _bind_shortcut(
        self,
        shape: AggregateShape | LookupShape,
        where: exp.Expression | None,
        src: _Source,
        sources: dict[str, _Source],
    ) -> None:
        """The shortcut's query with the WHERE clause derived (see :meth:`_shortcuts`)."""
        query = shape.query(where, lambda node: self._derive_exact(node, src, sources))
        if isinstance(shape, AggregateShape):
            self.aggregate_only = query  # type: ignore[assignment]
        else:
            self.lookup = query  # type: ignore[assignment]

    def _derive_exact(
        self, node: exp.Expression, src: _Source, sources: dict[str, _Source]
    ) -> tuple[Predicate, bool, tuple[tuple[str, tuple[float, ...]], ...]]:
        """``_derive`` for a query a relation may answer itself: float comparisons count
        as exact but for their ambiguity points, returned per column."""
        self._ambiguous = {}
        try:
            pred, exact = self._derive(node, src, sources, negate=False)
            ambiguous = tuple(sorted((c, tuple(sorted(v))) for c, v in self._ambiguous.items()))
        finally:
            self._ambiguous = None
        return pred, exact, ambiguous

    def _atom_is_exact(
        self, node: exp.Expression, src: _Source, sources: dict[str, _Source]
    ) -> bool:
        from sqlglot import exp

        try:
            comparison = self._comparison(node, src, sources)
            if comparison is not None:
                return self._exact_but_for(*comparison)
            if isinstance(node, exp.Between):
                column, ctype = self._column_of(node.this, src, sources)
                low = self._exact_but_for(column, ctype, ">=", self._literal(node.args["low"]))
                high = self._literal(node.args["high"])
                return low and self._exact_but_for(column, ctype, "<=", high)
            if isinstance(node, exp.In):
                _, ctype = self._column_of(node.this, src, sources)
                values = [self._literal(e, allow_null=True) for e in node.expressions]
                return all(v is None or is_exact(ctype, v) for v in values)
            if isinstance(node, exp.Like):
                pattern = self._literal(node.expression)
                return isinstance(pattern, str) and not any(ch in pattern for ch in "%_\\")
        except NotPushable:
            return False
        return isinstance(node, (exp.Is, exp.Column))

    def _exact_but_for(self, column: str, ctype: pa.DataType, op: str, value: Any) -> bool:
        """Whether ``column op value`` maps to exact bounds; while deriving an aggregate
        query, a float comparison counts as exact but for its ambiguity point, and as
        exact when every reading of the constant gives that point the same outcome."""
        if is_exact(ctype, value):
            return True
        point = ambiguity_point(ctype, value) if self._ambiguous is not None else None
        if point is None:
            return False
        if settled_ranges(ctype, op, value) is not None:
            return True  # compare_ranges gives these ranges: they decide the point too
        assert self._ambiguous is not None
        self._ambiguous.setdefault(column, set()).add(point)
        return True

    def _find_equijoins(
        self, node: exp.Expression, sources: dict[str, _Source], only: str | None
    ) -> None:
        """Record ``a.x = b.y`` conjuncts between two relations (semi-join candidates)."""
        from sqlglot import exp

        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            self._find_equijoins(node.this, sources, only)
            self._find_equijoins(node.expression, sources, only)
            return
        if not isinstance(node, exp.EQ):
            return
        ends = []
        for side in (node.this, node.expression):
            owner = None
            for src in sources.values():
                if src.relation is None or src.blocked:
                    continue
                try:
                    column, ctype = self._column_of(side, src, sources)
                except NotPushable:
                    continue
                owner = (src, column, ctype)
                break
            if owner is None:
                return
            ends.append(owner)
        (a, col_a, type_a), (b, col_b, type_b) = ends
        if (
            a.alias == b.alias
            or type_class(type_a) != type_class(type_b)
            or type_class(type_a) is None
        ):
            return
        assert a.relation is not None and b.relation is not None
        self.equijoins.append(
            EquiJoin(
                a.relation,
                col_a,
                b.relation,
                col_b,
                only in (None, a.alias),
                only in (None, b.alias),
            )
        )

    def _merge(
        self, src: _Source, pred: Predicate, mentioned: set[str], star: bool, note: str | None
    ) -> None:
        assert src.relation is not None and src.columns is not None
        columns: list[str] | None
        if star or src.renamed or (src.alias in mentioned and src.alias not in src.columns):
            columns = None  # `*`, or the alias used as a value (a struct of the row)
        else:
            columns = [n for n in src.names if n.lower() in mentioned]
        self._merge_use(src.relation, pred, columns, note)
        use = self.relations[src.relation.lower()]
        if src.alias not in use.aliases:
            use.aliases.append(src.alias)

    # --- predicate derivation ---------------------------------------------
    def _derive(
        self, node: exp.Expression, src: _Source, sources: dict[str, _Source], negate: bool
    ) -> tuple[Predicate, bool]:
        """A predicate implied by ``node`` for ``src``'s rows, and whether it says exactly as
        much (worked out only while deriving an aggregate query's WHERE: else False)."""
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self._derive(node.this, src, sources, negate)
        if isinstance(node, exp.Not):
            return self._derive(node.this, src, sources, not negate)
        if isinstance(node, (exp.And, exp.Or)):
            left, left_exact = self._derive(node.this, src, sources, negate)
            right, right_exact = self._derive(node.expression, src, sources, negate)
            if isinstance(node, exp.And) != negate:
                return left.and_(right), left_exact and right_exact
            # a union is exact on one column, or when one side matches nothing
            same_column = len(left) == 1 and set(left) == set(right)
            exact = left_exact and right_exact and (left.is_false or right.is_false or same_column)
            return left.or_(right), exact
        if isinstance(node, exp.Boolean):
            return (Predicate() if bool(node.this) != negate else _FALSE), True
        try:
            pred = self._atom(node, src, sources, negate)
        except NotPushable:
            return Predicate(), False
        # exactness matters only to an aggregate a relation may answer (_derive_exact)
        return pred, self._ambiguous is not None and self._atom_is_exact(node, src, sources)

    def _column_of(
        self, node: exp.Expression, src: _Source, sources: dict[str, _Source]
    ) -> tuple[str, pa.DataType]:
        from sqlglot import exp

        while isinstance(node, exp.Paren):
            node = node.this
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            raise NotPushable
        if node.args.get("db") or node.args.get("catalog"):
            raise NotPushable
        name = node.name.lower()
        assert src.columns is not None
        if name not in src.columns:
            raise NotPushable
        qualifier = node.table.lower() if node.table else ""
        if qualifier:
            if qualifier != src.alias:
                raise NotPushable
        else:
            for other in sources.values():
                if other is src:
                    continue
                if other.columns is None or name in other.columns:
                    raise NotPushable  # ambiguous, or maybe another source's column
        if name not in src.spelled:
            raise NotPushable
        return src.spelled[name], src.columns[name]

    def _comparison(
        self,
        node: exp.Expression,
        src: _Source,
        sources: dict[str, _Source],
        operand: Callable[[exp.Expression, _Source, dict[str, _Source]], tuple[str, pa.DataType]]
        | None = None,
    ) -> tuple[str, pa.DataType, str, Any] | None:
        """(column, type, operator, literal) of ``column op literal`` in either order
        (``5 < col`` is ``col > 5``); None if ``node`` is no comparison. ``operand``
        finds the column (by default a plain column of ``src``)."""
        op = _comparison_op(node)
        if op is None:
            return None
        operand = operand or self._column_of
        try:
            column, ctype = operand(node.this, src, sources)
            value = self._literal(node.expression)
        except NotPushable:
            column, ctype = operand(node.expression, src, sources)
            value = self._literal(node.this)
            op = _FLIPPED[op]
        return column, ctype, op, value

    def _operand(
        self, node: exp.Expression, src: _Source, sources: dict[str, _Source]
    ) -> tuple[str, pa.DataType]:
        """A plain column of ``src``, or a value inside one of its JSON columns (a
        :class:`JsonPath`, whose key stands as the column; its type is what DuckDB
        compares: the text, or the number it is cast to)."""
        try:
            return self._column_of(node, src, sources)
        except NotPushable:
            path = self._json_path(node, src, sources)
        import pyarrow as pa

        kinds = {None: pa.string(), "int": pa.int64(), "float": pa.float64()}
        return path.key, kinds[path.cast]

    def _json_path(
        self, node: exp.Expression, src: _Source, sources: dict[str, _Source]
    ) -> JsonPath:
        """``col->>'$.a.b'`` (or ``json_extract_string``), optionally cast to a number, and
        ``col->'$.a'`` cast to a number, on a JSON column ``col`` of ``src``."""
        import pyarrow as pa
        from sqlglot import exp

        while isinstance(node, exp.Paren):
            node = node.this
        cast = None
        if isinstance(node, exp.Cast):  # TryCast too: a failed cast is NULL, never a match
            cast = _numeric_casts().get(node.to.this)
            if cast is None:
                raise NotPushable
            node = node.this
            while isinstance(node, exp.Paren):
                node = node.this
        if isinstance(node, exp.JSONExtractScalar):
            operator = "->>"
        elif isinstance(node, exp.JSONExtract) and cast is not None:
            operator = "->"
        else:
            raise NotPushable
        column, ctype = self._column_of(node.this, src, sources)
        path = node.expression
        if not isinstance(ctype, pa.JsonType) or not isinstance(path, exp.JSONPath):
            raise NotPushable
        parts = path.expressions
        if not parts or not isinstance(parts[0], exp.JSONPathRoot):
            raise NotPushable
        steps: list[str | int] = []
        for part in parts[1:]:
            key = isinstance(part, exp.JSONPathKey) and isinstance(part.this, str)
            if not key and not (isinstance(part, exp.JSONPathSubscript) and type(part.this) is int):
                raise NotPushable  # a wildcard, a slice, a negative or computed subscript
            steps.append(part.this)
        try:
            return JsonPath(column, tuple(steps), operator, cast)
        except ValueError as err:  # a key JsonPath does not spell plainly
            raise NotPushable from err

    def _atom(
        self, node: exp.Expression, src: _Source, sources: dict[str, _Source], negate: bool
    ) -> Predicate:
        from sqlglot import exp

        comparison = self._comparison(node, src, sources, self._operand)
        if comparison is not None:
            col, ctype, op, value = comparison
            if negate:
                op = _NEGATED[op]
            return Predicate.on(col, ColumnDomain.values(compare_ranges(ctype, op, value)))
        if isinstance(node, exp.Between):
            if node.args.get("symmetric"):
                raise NotPushable
            col, ctype = self._operand(node.this, src, sources)
            lo = compare_ranges(ctype, ">=", self._literal(node.args["low"]))
            hi = compare_ranges(ctype, "<=", self._literal(node.args["high"]))
            ranges = lo.intersect(hi)
            if negate:
                if not (
                    is_exact(ctype, self._literal(node.args["low"]))
                    and is_exact(ctype, self._literal(node.args["high"]))
                ):
                    raise NotPushable
                ranges = ranges.complement()
            return Predicate.on(col, ColumnDomain.values(ranges))
        if isinstance(node, exp.In):
            if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
                raise NotPushable
            col, ctype = self._operand(node.this, src, sources)
            values = [self._literal(e, allow_null=True) for e in node.expressions]
            present = [v for v in values if v is not None]
            if negate:
                if len(present) < len(values):  # NOT IN (..., NULL) is never TRUE
                    return _FALSE_ON(col)
                if not all(is_exact(ctype, v) for v in present):
                    raise NotPushable
                ranges = RangeSet.everything()
                for v in present:
                    ranges = ranges.intersect(compare_ranges(ctype, "!=", v))
                return Predicate.on(col, ColumnDomain.values(ranges))
            ranges = RangeSet()
            for v in present:
                ranges = ranges.union(compare_ranges(ctype, "=", v))
            return Predicate.on(col, ColumnDomain.values(ranges))
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise NotPushable
            col, _ = self._column_of(node.this, src, sources)
            return Predicate.on(col, ColumnDomain.not_null() if negate else ColumnDomain.is_null())
        if isinstance(node, exp.Column):
            col, ctype = self._column_of(node, src, sources)
            if type_class(ctype) != "bool":
                raise NotPushable
            return Predicate.on(col, ColumnDomain.values(RangeSet.points([0 if negate else 1])))
        if isinstance(node, exp.Like) and not negate:
            col, ctype = self._column_of(node.this, src, sources)
            pattern = self._literal(node.expression)
            if type_class(ctype) != "string" or not isinstance(pattern, str):
                raise NotPushable
            return Predicate.on(col, ColumnDomain.values(like_prefix_range(pattern)))
        raise NotPushable

    def _literal(self, node: exp.Expression, allow_null: bool = False) -> Any:
        """The Python value of a literal or bound parameter; raises NotPushable otherwise."""
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self._literal(node.this, allow_null)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return node.this
            return parse_number(node.this)
        if isinstance(node, exp.Neg):
            value = self._literal(node.this)
            if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
                raise NotPushable
            return -value
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Null):
            if allow_null:
                return None
            raise NotPushable
        if isinstance(node, (exp.Placeholder, exp.Parameter)):
            value = self._param(node)
            if value is None and not allow_null:
                raise NotPushable
            return value
        if isinstance(node, exp.Cast):
            target = node.to.sql(dialect="duckdb").upper()
            if target in ("DOUBLE", "FLOAT8", "REAL", "FLOAT", "FLOAT4"):
                value = self._literal(node.this)
                if isinstance(value, (int, Decimal, float)) and not isinstance(value, bool):
                    return float(value) if target in ("DOUBLE", "FLOAT8") else Float32(float(value))
            if target in ("VARCHAR", "TEXT", "STRING"):
                value = self._literal(node.this)
                if isinstance(value, str):
                    return value
        raise NotPushable

    def _param(self, node: exp.Expression) -> Any:
        name = node.name
        params = self.params
        try:
            if name.startswith(_POSITIONAL):
                value = params[int(name[len(_POSITIONAL) :])]
            elif name.startswith(_NUMBERED):
                value = params[int(name[len(_NUMBERED) :]) - 1]
            elif isinstance(params, Mapping):
                value = params[name]
            else:
                raise NotPushable
        except (KeyError, IndexError, TypeError) as err:
            raise NotPushable from err
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):
            value = value.item()  # numpy scalar
        if isinstance(value, bool | int | float | str | Decimal) or value is None:
            return value
        raise NotPushable


_FLIPPED = {"=": "=", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


@functools.cache
def _numeric_casts() -> dict[Any, str]:
    """sqlglot's number types by the class of value a cast to them gives: a signed
    integer type ``int``, any other number ``float`` (unsigned and 128-bit integers
    go past int64; decimals and floats are fractional)."""
    from sqlglot import exp

    t = exp.DataType.Type
    signed = (t.TINYINT, t.SMALLINT, t.MEDIUMINT, t.INT, t.BIGINT)
    others = (t.UTINYINT, t.USMALLINT, t.UINT, t.UBIGINT, t.INT128, t.UINT128)
    fractional = (t.FLOAT, t.DOUBLE, t.DECIMAL)
    return {**dict.fromkeys(signed, "int"), **dict.fromkeys(others + fractional, "float")}


def _comparison_op(node: exp.Expression) -> str | None:
    """``=``, ``!=``, ``<``, ... for a comparison node, None for anything else."""
    from sqlglot import exp

    operators: dict[type[exp.Expression], str] = {
        exp.EQ: "=",
        exp.NEQ: "!=",
        exp.GT: ">",
        exp.GTE: ">=",
        exp.LT: "<",
        exp.LTE: "<=",
    }
    return operators.get(type(node))


_NEGATED = {"=": "!=", "!=": "=", ">": "<=", ">=": "<", "<": ">=", "<=": ">"}
_FALSE = Predicate.false()


def _source_order(select: exp.Select) -> list[str]:
    from_ = select.args.get("from") or select.args.get("from_")
    order = (
        [from_.this.alias_or_name.lower()] if from_ is not None and from_.this is not None else []
    )
    for join in select.args.get("joins") or []:
        if join.this is not None:
            order.append(join.this.alias_or_name.lower())
    return order


def _FALSE_ON(column: str) -> Predicate:
    return Predicate.on(column, ColumnDomain(RangeSet(), False))


def _rejects_nulls(pred: Predicate) -> bool:
    return any(not dom.nulls for dom in pred.values())
