"""Deriving predicates from SQL conditions: what a WHERE or ON clause implies for the
rows of one table reference.

Everything derived is a *superset* of the rows the condition lets through (see
``analysis.py`` for the rules that keep it so): NOT is pushed down with
three-valued logic, AND intersects, OR unions per column, a comparison maps
its constant to bounds in the column's own type (``bounds.py``), and anything
not sargable is TRUE. For a query a relation may answer itself, the derivation
also says whether the predicate is *exact*.
"""

from __future__ import annotations

import functools
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

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

__all__ = ["NUMBERED", "POSITIONAL", "PredicateDerivation", "Source", "rejects_nulls"]

# Positional `?` placeholders are renamed to this prefix plus their index, so
# that every placeholder in the parsed tree knows which parameter it is.
POSITIONAL = "__tessera_p"
NUMBERED = "__tessera_d"  # $1, $2, ...: 1-based positions


@dataclass
class Source:
    alias: str  # lower case
    relation: str | None  # lower-case relation name if this source is a relation
    columns: dict[str, pa.DataType] | None  # lower name -> type, None if unknown
    null_supplying: bool = False
    blocked: bool = False  # no pushdown at all (ASOF right side, POSITIONAL, samples)
    renamed: bool = False  # `FROM rel AS r(a, b)`: its columns go by other names
    spelled: dict[str, str] = field(default_factory=dict)  # a relation's: lower -> its name
    names: list[str] = field(default_factory=list)  # a relation's columns in schema order


class PredicateDerivation:
    """Derives predicates for a statement's table references (a mixin of the statement
    analyser): ``params`` are the bound parameters; ``_ambiguous`` is, while deriving an
    aggregate query's WHERE, the float comparisons taken as exact but for one value per
    column (None: such comparisons are inexact)."""

    params: Any
    _ambiguous: dict[str, set[float]] | None
    # each atom's predicate (or the NotPushable it raised) by (ids of the condition, the
    # source and its scope's sources, negated), for one binding of the parameters: a WHERE
    # is derived for the pushdown and again for a shortcut, and an atom's predicate does
    # not depend on which
    _atoms: dict[tuple[int, int, int, bool], Any]
    # what a column reference or path resolves to (or the NotPushable it raised), by
    # (how, ids of the expression, the source and its scope's sources): it depends on the
    # statement alone, so every binding of the parameters shares it
    _operands: dict[tuple[str, int, int, int], Any]

    def _resolved(
        self,
        how: str,
        resolve: Callable[[exp.Expression, Source, dict[str, Source]], tuple[str, pa.DataType]],
        node: exp.Expression,
        src: Source,
        sources: dict[str, Source],
    ) -> tuple[str, pa.DataType]:
        key = (how, id(node), id(src), id(sources))
        found = self._operands.get(key)
        if found is None:
            try:
                found = resolve(node, src, sources)
            except NotPushable:
                found = NotPushable
            self._operands[key] = found
        if found is NotPushable:
            raise NotPushable
        return found  # type: ignore[no-any-return]

    def derive_exact(
        self, node: exp.Expression, src: Source, sources: dict[str, Source]
    ) -> tuple[Predicate, bool, tuple[tuple[str, tuple[float, ...]], ...]]:
        """``derive`` for a query a relation may answer itself: float comparisons count
        as exact but for their ambiguity points, returned per column."""
        self._ambiguous = {}
        try:
            pred, exact = self.derive(node, src, sources, negate=False)
            ambiguous = tuple(sorted((c, tuple(sorted(v))) for c, v in self._ambiguous.items()))
        finally:
            self._ambiguous = None
        return pred, exact, ambiguous

    def _atom_is_exact(self, node: exp.Expression, src: Source, sources: dict[str, Source]) -> bool:
        from sqlglot import exp

        try:
            comparison = self._comparison(node, src, sources, self._exact_operand)
            if comparison is not None:
                return self._exact_but_for(*comparison)
            if isinstance(node, exp.Between):
                column, ctype = self._exact_operand(node.this, src, sources)
                low = self._exact_but_for(column, ctype, ">=", self._literal(node.args["low"]))
                high = self._literal(node.args["high"])
                return low and self._exact_but_for(column, ctype, "<=", high)
            if isinstance(node, exp.In):
                _, ctype = self._exact_operand(node.this, src, sources)
                values = [self._literal(e, allow_null=True) for e in node.expressions]
                return all(v is None or is_exact(ctype, v) for v in values)
            if isinstance(node, exp.Like):
                pattern = self._literal(node.expression)
                return isinstance(pattern, str) and not any(ch in pattern for ch in "%_\\")
        except NotPushable:
            return False
        return isinstance(node, (exp.Is, exp.Column))

    def _exact_operand(
        self, node: exp.Expression, src: Source, sources: dict[str, Source]
    ) -> tuple[str, pa.DataType]:
        """:meth:`_operand` where its key stands for exactly this expression's values.

        A path key stands for a class of expressions (every integer cast shares
        one key), so only the one member a relation computes exactly counts:
        the text (``->>``), or that text cast (``CAST``, not ``TRY_CAST``)
        to BIGINT or DOUBLE. See ``tesseradb.sql.relation.PathReading``.
        """
        return self._resolved("exact", self._resolve_exact_operand, node, src, sources)

    def _resolve_exact_operand(
        self, node: exp.Expression, src: Source, sources: dict[str, Source]
    ) -> tuple[str, pa.DataType]:
        from sqlglot import exp

        try:
            return self.column_of(node, src, sources)
        except NotPushable:
            pass
        bare = node
        while isinstance(bare, exp.Paren):
            bare = bare.this
        if isinstance(bare, exp.Cast):
            t = exp.DataType.Type
            if isinstance(bare, exp.TryCast) or bare.to.this not in (t.BIGINT, t.DOUBLE):
                raise NotPushable
            bare = bare.this
            while isinstance(bare, exp.Paren):
                bare = bare.this
        if not isinstance(bare, exp.JSONExtractScalar):
            raise NotPushable  # (``->`` cast: a JSON true casts to 1)
        return self._operand(node, src, sources)

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

    def derive(
        self, node: exp.Expression, src: Source, sources: dict[str, Source], negate: bool
    ) -> tuple[Predicate, bool]:
        """A predicate implied by ``node`` for ``src``'s rows, and whether it says exactly as
        much (worked out only while deriving an aggregate query's WHERE: else False)."""
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.derive(node.this, src, sources, negate)
        if isinstance(node, exp.Not):
            return self.derive(node.this, src, sources, not negate)
        if isinstance(node, (exp.And, exp.Or)):
            left, left_exact = self.derive(node.this, src, sources, negate)
            right, right_exact = self.derive(node.expression, src, sources, negate)
            if isinstance(node, exp.And) != negate:
                return left.and_(right), left_exact and right_exact
            # a union is exact on one column, or when one side matches nothing
            same_column = len(left) == 1 and set(left) == set(right)
            exact = left_exact and right_exact and (left.is_false or right.is_false or same_column)
            return left.or_(right), exact
        if isinstance(node, exp.Boolean):
            return (Predicate() if bool(node.this) != negate else _FALSE), True
        key = (id(node), id(src), id(sources), negate)
        pred = self._atoms.get(key)
        if pred is None:
            try:
                pred = self._atom(node, src, sources, negate)
            except NotPushable:
                pred = NotPushable
            self._atoms[key] = pred
        if pred is NotPushable:
            return Predicate(), False
        # exactness matters only to an aggregate a relation may answer (derive_exact)
        return pred, self._ambiguous is not None and self._atom_is_exact(node, src, sources)

    def column_of(
        self, node: exp.Expression, src: Source, sources: dict[str, Source]
    ) -> tuple[str, pa.DataType]:
        """The relation column (as its schema spells it) and type ``node`` names in
        ``src``; NotPushable for anything else (another source's, ambiguous, unknown)."""
        return self._resolved("column", self._column_of, node, src, sources)

    def _column_of(
        self, node: exp.Expression, src: Source, sources: dict[str, Source]
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
        src: Source,
        sources: dict[str, Source],
        operand: Callable[[exp.Expression, Source, dict[str, Source]], tuple[str, pa.DataType]]
        | None = None,
    ) -> tuple[str, pa.DataType, str, Any] | None:
        """(column, type, operator, literal) of ``column op literal`` in either order
        (``5 < col`` is ``col > 5``); None if ``node`` is no comparison. ``operand``
        finds the column (by default a plain column of ``src``)."""
        op = _comparison_op(node)
        if op is None:
            return None
        operand = operand or self.column_of
        try:
            column, ctype = operand(node.this, src, sources)
            value = self._literal(node.expression)
        except NotPushable:
            column, ctype = operand(node.expression, src, sources)
            value = self._literal(node.this)
            op = _FLIPPED[op]
        return column, ctype, op, value

    def _operand(
        self, node: exp.Expression, src: Source, sources: dict[str, Source]
    ) -> tuple[str, pa.DataType]:
        """A plain column of ``src``, or a value inside one of its JSON columns (a
        :class:`JsonPath`, whose key stands as the column; its type is what DuckDB
        compares: the text, or the number it is cast to)."""
        return self._resolved("operand", self._resolve_operand, node, src, sources)

    def _resolve_operand(
        self, node: exp.Expression, src: Source, sources: dict[str, Source]
    ) -> tuple[str, pa.DataType]:
        try:
            return self.column_of(node, src, sources)
        except NotPushable:
            path = self._json_path(node, src, sources)
        import pyarrow as pa

        kinds = {None: pa.string(), "int": pa.int64(), "float": pa.float64()}
        return path.key, kinds[path.cast]

    def _json_path(self, node: exp.Expression, src: Source, sources: dict[str, Source]) -> JsonPath:
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
        column, ctype = self.column_of(node.this, src, sources)
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
        self, node: exp.Expression, src: Source, sources: dict[str, Source], negate: bool
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
            col, _ = self.column_of(node.this, src, sources)
            return Predicate.on(col, ColumnDomain.not_null() if negate else ColumnDomain.is_null())
        if isinstance(node, exp.Column):
            col, ctype = self.column_of(node, src, sources)
            if type_class(ctype) != "bool":
                raise NotPushable
            return Predicate.on(col, ColumnDomain.values(RangeSet.points([0 if negate else 1])))
        if isinstance(node, exp.Like) and not negate:
            col, ctype = self.column_of(node.this, src, sources)
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
            if name.startswith(POSITIONAL):
                value = params[int(name[len(POSITIONAL) :])]
            elif name.startswith(NUMBERED):
                value = params[int(name[len(NUMBERED) :]) - 1]
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


def _FALSE_ON(column: str) -> Predicate:
    return Predicate.on(column, ColumnDomain(RangeSet(), False))


def rejects_nulls(pred: Predicate) -> bool:
    return any(not dom.nulls for dom in pred.values())
