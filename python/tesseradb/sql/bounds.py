"""Which values of a column may satisfy ``column op literal``: the ranges a comparison
pushes down, and whether they are exact.

Kept apart from the statement analysis because it changes for other
reasons: the rules follow how DuckDB compares a column of each type with a
literal (an integer column with a fraction or a number past 2^53, a
single-precision column with a double literal, strings by their bytes,
``LIKE`` by its literal prefix). A superset is always allowed, a subset
never; ``is_exact`` says when the ranges say exactly as much as the
comparison, which native aggregates need.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from tesseradb.sql.predicate import Interval, RangeSet, type_class

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "Float32",
    "NotPushable",
    "ambiguity_point",
    "compare_ranges",
    "is_exact",
    "like_prefix_range",
    "parse_number",
    "settled_ranges",
]


class NotPushable(Exception):
    """A sub-expression the analysis does not understand: it restricts nothing."""


_MAX_EXACT_FLOAT_INT = 2**53


class Float32(float):
    """A literal cast to FLOAT (single precision) in the statement."""


def parse_number(text: str) -> int | Decimal:
    if re.fullmatch(r"[0-9]+", text):
        return int(text)
    try:
        return Decimal(text)
    except InvalidOperation as err:
        raise NotPushable from err


def is_exact(ctype: pa.DataType, value: Any) -> bool:
    """Whether comparing ``value`` with a column of ``ctype`` maps to exact bounds."""
    kind = type_class(ctype)
    if kind == "string":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return False
    if kind == "int":
        return isinstance(value, int) or (
            _finite(value)
            and Fraction(value).denominator == 1
            and abs(value) < _MAX_EXACT_FLOAT_INT
        )
    if kind == "float":
        if isinstance(value, float) and math.isnan(value):
            return False
        candidates = _float_candidates(ctype, value)
        return len(candidates) == 1 and (
            not _finite(value) or Fraction(candidates[0]) == Fraction(value)
        )
    return False


def ambiguity_point(ctype: pa.DataType, value: Any) -> float | None:
    """For a float column compared with a number that does not map to one exact bound:
    the only column value the comparison's outcome may depend on, or None.

    The comparison constant is the literal itself, its double ``d``, or
    ``d`` rounded to the column's float type (which one depends on how
    DuckDB types the literal). All of them lie within half a double step
    of the literal, and ``d`` rounded to the column type is the nearest
    column value to ``d``: no other value of the column type lies between
    them, so a row whose value differs from that one compares the same way
    under every reading.
    """
    import numpy as np
    import pyarrow as pa

    if type_class(ctype) != "float" or isinstance(value, bool):
        return None
    if not isinstance(value, (int, float, Decimal)):
        return None
    try:
        as_double = float(value)
    except OverflowError:
        return None
    if not math.isfinite(as_double):
        return None
    if ctype == pa.float64():
        return as_double
    if ctype == pa.float32():
        with np.errstate(over="ignore"):
            point = float(np.float32(as_double))
        return point if math.isfinite(point) else None
    return None


def settled_ranges(ctype: pa.DataType, op: str, value: Any) -> RangeSet | None:
    """The exact ranges of ``column op value`` for a float column where the literal maps
    to no one bound but every reading agrees on the one value that matters; else None.

    The readings are the constants DuckDB might compare with (the literal, its double,
    the double rounded to the column's type); the value that matters is the column
    value nearest the literal (``ambiguity_point``), the only one lying among them.
    On the side of the literal it lies on, an ordering comparison agrees under every
    reading (the taxi queries' bounds: ``lat <= 40.77351738`` whose float is
    40.77351760... is ambiguous, ``lon <= -73.87998030`` whose float is
    -73.87998199... is not), and the point is then simply in or out.
    """
    if op not in ("<", "<=", ">", ">=") or is_exact(ctype, value):
        return None
    point = ambiguity_point(ctype, value)
    if point is None:
        return None
    at = Fraction(point)
    compare = {"<": at.__lt__, "<=": at.__le__, ">": at.__gt__, ">=": at.__ge__}[op]
    readings = {Fraction(value), *(Fraction(c) for c in _float_candidates(ctype, value))}
    outcomes = {compare(c) for c in readings}
    if len(outcomes) != 1:
        return None
    holds = outcomes.pop()
    if op in (">", ">="):
        return RangeSet.of([Interval(point, None, holds, True)])
    return RangeSet.of([Interval(None, point, True, holds)])


def _finite(value: Any) -> bool:
    return not (isinstance(value, (float, Decimal)) and not math.isfinite(float(value)))


def _float_candidates(ctype: pa.DataType, value: Any) -> list[float]:
    """The doubles DuckDB might compare a float column against for ``value``."""
    import numpy as np
    import pyarrow as pa

    try:
        as_double = float(value)
    except OverflowError as err:
        raise NotPushable from err
    single = isinstance(value, Float32) or ctype == pa.float32() or ctype == pa.float16()
    values = {as_double}
    if single:
        with np.errstate(over="ignore"):
            values.add(float(np.float32(as_double)))
    return sorted(values)


def compare_ranges(ctype: pa.DataType, op: str, value: Any) -> RangeSet:
    """The set of non-NULL column values ``v`` for which ``v op value`` may be TRUE."""
    kind = type_class(ctype)
    if kind is None:
        raise NotPushable
    if kind == "string":
        if not isinstance(value, str):
            raise NotPushable
        return _ranges_for(op, value, value, exact=True)
    if kind == "bool":
        if not isinstance(value, bool) or op not in ("=", "!="):
            raise NotPushable
        point = RangeSet.points([int(value)])
        return point if op == "=" else point.complement().intersect(RangeSet.of([Interval(0, 1)]))
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise NotPushable
    if isinstance(value, float) and math.isnan(value):
        raise NotPushable
    if kind == "float":
        settled = settled_ranges(ctype, op, value)
        if settled is not None:
            return settled
        candidates = _float_candidates(ctype, value)
        return _ranges_for(op, candidates[0], candidates[-1], exact=is_exact(ctype, value))
    # integer column
    low, high = _int_range(ctype)
    clipped = _integer_ranges(op, value).intersect(RangeSet.of([Interval(low, high)]))
    # Inclusive bounds at the type's own limits are no bounds at all: show and prune them
    # as open (an exclusive one, as in `x != <lowest>`, still excludes that value).
    return RangeSet.of(
        Interval(
            None if iv.lo == low and iv.lo_inclusive else iv.lo,
            None if iv.hi == high and iv.hi_inclusive else iv.hi,
            iv.lo_inclusive,
            iv.hi_inclusive,
        )
        for iv in clipped
    )


def _ranges_for(op: str, low: Any, high: Any, exact: bool) -> RangeSet:
    """Ranges for ``v op value`` where value lies in ``[low, high]`` (equal when exact)."""
    if op == "=":
        return RangeSet.of([Interval(low, high)])
    if op == "!=":
        return RangeSet.of([Interval(low, high)]).complement() if exact else RangeSet.everything()
    if op in (">", ">="):
        return RangeSet.of([Interval(low, None, op == ">=" or not exact, True)])
    return RangeSet.of([Interval(None, high, True, op == "<=" or not exact)])


def _integer_ranges(op: str, value: int | float | Decimal) -> RangeSet:
    if isinstance(value, int):
        n = value
        exact = True
    else:
        if not _finite(value):
            positive = float(value) > 0
            below = RangeSet.everything()  # every integer is below +inf
            if op in ("<", "<=", "!="):
                return below if positive else (RangeSet() if op != "!=" else below)
            if op in (">", ">="):
                return RangeSet() if positive else below
            return RangeSet()
        frac = Fraction(value)
        if abs(frac) >= _MAX_EXACT_FLOAT_INT:
            # DuckDB may compare in double here; rounding makes bounds fuzzy.
            return RangeSet.everything() if op != "=" else _widened_point(frac)
        if frac.denominator == 1:
            n, exact = int(frac), True
        else:
            floor, ceil = math.floor(frac), math.ceil(frac)
            if op == "=":
                return RangeSet()
            if op == "!=":
                return RangeSet.everything()
            if op in (">", ">="):
                return RangeSet.of([Interval(ceil, None)])
            return RangeSet.of([Interval(None, floor)])
    del exact
    if op == "=":
        return RangeSet.points([n])
    if op == "!=":
        return RangeSet.points([n]).complement()
    if op == ">":
        return RangeSet.of([Interval(n + 1, None)])
    if op == ">=":
        return RangeSet.of([Interval(n, None)])
    if op == "<":
        return RangeSet.of([Interval(None, n - 1)])
    return RangeSet.of([Interval(None, n)])


def _widened_point(frac: Fraction) -> RangeSet:
    width = abs(frac) // 2**50 + 2
    return RangeSet.of([Interval(math.floor(frac) - width, math.ceil(frac) + width)])


def _int_range(ctype: pa.DataType) -> tuple[int, int]:
    import pyarrow as pa

    if pa.types.is_boolean(ctype):
        return 0, 1
    bits = ctype.bit_width
    if pa.types.is_unsigned_integer(ctype):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def like_prefix_range(pattern: str) -> RangeSet:
    """Strings that may match a LIKE ``pattern``: those starting with its literal prefix."""
    prefix = []
    for ch in pattern:
        if ch in "%_\\":
            break
        prefix.append(ch)
    text = "".join(prefix)
    if len(text) == len(pattern):
        return RangeSet.points([text])  # no wildcard: LIKE is equality
    if not text:
        return RangeSet.everything()
    last = text[-1]
    if ord(last) >= 0x10FFFF:
        return RangeSet.of([Interval(text, None)])
    successor = ord(last) + 1
    if 0xD800 <= successor <= 0xDFFF:  # skip surrogates, which are not valid text
        successor = 0xE000
    upper = text[:-1] + chr(successor)
    return RangeSet.of([Interval(text, upper, True, False)])
