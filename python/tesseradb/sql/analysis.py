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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tesseradb.sql.bounds import NotPushable
from tesseradb.sql.derivation import (
    NUMBERED,
    POSITIONAL,
    PredicateDerivation,
    Source,
    rejects_nulls,
)
from tesseradb.sql.joins import JoinQuery, JoinShape, join_shape
from tesseradb.sql.predicate import Predicate, type_class
from tesseradb.sql.shortcuts import (
    AggregateQuery,
    AggregateShape,
    Lookup,
    LookupShape,
    aggregate_shape,
    lookup_shape,
)
from tesseradb.sql.tops import TopQuery, TopShape, top_shape

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

__all__ = ["Analysis", "Prepared", "RelationUse", "analyse", "normalise_placeholders", "prepare"]


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
    # an inner equi-join of relations the engine answers without DuckDB
    join: JoinQuery | None = None
    # ORDER BY ... LIMIT over one relation, whose scan may give only the first rows
    top: TopQuery | None = None
    statement_count: int = 1

    def drop_shortcuts(self) -> None:
        """Leave the statement to DuckDB: no aggregate, lookup or join answered here (a
        shortcut added above must be dropped here too)."""
        self.aggregate_only = None
        self.lookup = None
        self.join = None
        self.top = None

    @property
    def count_only(self) -> tuple[str, str, Predicate] | None:
        """``SELECT count(*) FROM rel [WHERE w]``, w exactly a Predicate: (relation, column name, predicate).

        Such a count may be answered by the relation itself (an attached
        table from its bitmap indexes) when that is exact; see the engine.
        """
        query = self.aggregate_only
        if (
            query is None
            or query.finish
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
            out.append(f":{POSITIONAL}{index}".encode())
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
            out.append((f":{NUMBERED}{word}" if word.isdigit() else f":{word}").encode())
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
        aggregate_only = lookup = join = top = None
        for analyser in self._analysers:
            bound = analyser.bound(params, relations)
            aggregate_only, lookup, join = bound.aggregate_only, bound.lookup, bound.join
            top = bound.top
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
            join=join if len(self._analysers) == 1 else None,
            top=top if len(self._analysers) == 1 else None,
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


class _StatementAnalyser(PredicateDerivation):
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
        self.join: JoinQuery | None = None
        self.top: TopQuery | None = None
        # while deriving an aggregate query's WHERE: float comparisons taken as exact
        # but for one value per column (None: such comparisons are inexact)
        self._ambiguous: dict[str, set[float]] | None = None
        # each condition's predicate, by (condition, source, negated), for one binding
        # (the pushdown and a shortcut derive the same WHERE: see PredicateDerivation)
        self._atoms: dict[tuple[int, int, int, bool], Any] = {}
        self._operands: dict[tuple[str, int, int, int], Any] = {}  # (shared by every binding)
        self.relations: dict[str, RelationUse] = {}
        self.others = others
        self._schemas: dict[str, pa.Schema | None] = {}
        self._steps: list[tuple[Callable[..., None], tuple[Any, ...]]] = []

    def bound(self, params: Any, relations: dict[str, RelationUse]) -> _StatementAnalyser:
        """A copy with ``params`` bound that has merged its references into ``relations``."""
        bound = copy.copy(self)
        bound.params = params
        bound.relations = relations
        bound.aggregate_only = bound.lookup = bound.join = bound.top = None
        bound._ambiguous = None
        bound._atoms = {}
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
        sources: dict[str, Source] = {}
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
                    src = Source(alias.lower(), name.lower() if name else None, cols)
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
                        if names is not None and None in names:
                            names = None  # (a view bound later: DuckDB does not know them yet)
                        alias_node = source.args.get("alias")
                        if names is not None and not (
                            alias_node is not None and alias_node.args.get("columns")
                        ):
                            known = {c.lower(): None for c in names}
                    sources[alias.lower()] = Source(alias.lower(), None, known)  # type: ignore[arg-type]
            else:  # a derived table or CTE: its output names, if it has no star
                named = None
                inner = getattr(source, "expression", None)
                if isinstance(inner, exp.Select) and not any(
                    isinstance(e, exp.Star)
                    or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
                    for e in inner.expressions
                ):
                    named = {n.lower(): None for n in inner.named_selects}
                sources[alias.lower()] = Source(alias.lower(), None, named)  # type: ignore[arg-type]

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
        relation_sources: list[Source],
        sources: dict[str, Source],
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
                pred = pred.and_(self.derive(f, src, sources, negate=False)[0])
            if src.null_supplying and not rejects_nulls(pred):
                pred = Predicate()
            for f in on_pushed.get(src.alias, []):
                pred = pred.and_(self.derive(f, src, sources, negate=False)[0])
            self._merge(src, pred, mentioned, star, None)

    def _shortcuts(self, select: exp.Select, sources: dict[str, Source]) -> None:
        """Recognise a statement a relation may answer without DuckDB: a single-relation
        aggregate query (:class:`AggregateQuery`: an array folds its chunks) or a
        selection of plain columns (:class:`Lookup`: the scan's rows, filtered), or,
        over several relations, an inner equi-join (:class:`JoinShape`: their rows,
        filtered and joined). The WHERE clause is derived when the parameters are
        bound; see the engine.
        """
        if select is not self.stmt:
            return
        if len(sources) > 1:
            self._join_shortcut(select, sources)
            return
        src = next(iter(sources.values()))
        if src.relation is None or src.blocked or src.renamed or src.columns is None:
            return
        where = select.args.get("where")
        where = None if where is None else where.this

        def column(node: exp.Expression) -> str:
            return self.column_of(node, src, sources)[0]

        shape = aggregate_shape(select, src.relation, column)
        if shape is not None:
            self._steps.append((_StatementAnalyser._bind_shortcut, (shape, where, src, sources)))
            return

        def orderable(name: str) -> bool:  # orders on which pyarrow's sort and DuckDB's agree
            ctype = src.columns.get(name.lower())  # type: ignore[union-attr]
            return ctype is not None and type_class(ctype) in ("int", "string", "bool")

        def path(node: exp.Expression) -> str:  # a value inside a JSON column, as text
            found = self._json_path(node, src, sources)
            if found.cast is not None:
                raise NotPushable
            return found.key

        lookup = lookup_shape(select, src.relation, src.names, column, orderable, path)
        if lookup is not None:
            self._steps.append((_StatementAnalyser._bind_shortcut, (lookup, where, src, sources)))
            return
        top = top_shape(select, src.relation, src.names, column)
        if top is not None:
            self._steps.append((_StatementAnalyser._bind_shortcut, (top, where, src, sources)))

    def _join_shortcut(self, select: exp.Select, sources: dict[str, Source]) -> None:
        """Recognise an inner equi-join of relations the engine answers itself
        (:class:`JoinShape`); its WHERE is derived per relation when bound."""
        from sqlglot import exp

        order = _source_order(select)
        if len(order) != len(sources) or set(order) != set(sources):
            return
        ordered = [sources[alias] for alias in order]
        if any(s.relation is None or s.blocked or s.renamed or s.columns is None for s in ordered):
            return

        def resolve(node: exp.Expression) -> tuple[int, str]:
            if not isinstance(node, exp.Column):
                raise NotPushable
            found = []
            for i, src in enumerate(ordered):
                try:
                    found.append((i, self.column_of(node, src, sources)[0]))
                except NotPushable:
                    continue
            if len(found) != 1:
                raise NotPushable
            return found[0]

        shape = join_shape(
            select,
            order,
            [s.relation for s in ordered],  # type: ignore[misc]
            [s.columns for s in ordered],  # type: ignore[misc]
            resolve,
        )
        if shape is not None:
            self._steps.append((_StatementAnalyser._bind_join, (shape, ordered, sources)))

    def _bind_join(
        self, shape: JoinShape, ordered: list[Source], sources: dict[str, Source]
    ) -> None:
        """The join with each relation's conditions derived (see :meth:`_join_shortcut`)."""
        self.join = shape.query(lambda node, i: self.derive_exact(node, ordered[i], sources))

    def _bind_shortcut(
        self,
        shape: AggregateShape | LookupShape | TopShape,
        where: exp.Expression | None,
        src: Source,
        sources: dict[str, Source],
    ) -> None:
        """The shortcut's query with the WHERE clause derived (see :meth:`_shortcuts`)."""
        query = shape.query(where, lambda node: self.derive_exact(node, src, sources))
        if isinstance(shape, AggregateShape):
            self.aggregate_only = query  # type: ignore[assignment]
        elif isinstance(shape, TopShape):
            self.top = query  # type: ignore[assignment]
        else:
            self.lookup = query  # type: ignore[assignment]

    def _find_equijoins(
        self, node: exp.Expression, sources: dict[str, Source], only: str | None
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
                    column, ctype = self.column_of(side, src, sources)
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
        self, src: Source, pred: Predicate, mentioned: set[str], star: bool, note: str | None
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


def _source_order(select: exp.Select) -> list[str]:
    from_ = select.args.get("from") or select.args.get("from_")
    order = (
        [from_.this.alias_or_name.lower()] if from_ is not None and from_.this is not None else []
    )
    for join in select.args.get("joins") or []:
        if join.this is not None:
            order.append(join.this.alias_or_name.lower())
    return order
