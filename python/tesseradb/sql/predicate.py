"""Predicates pushed down to relations: per-column value domains.

A :class:`Predicate` is a conjunction over columns; each column carries a
:class:`ColumnDomain`: a :class:`RangeSet` (a union of disjoint intervals;
IN-sets are unions of points) that non-NULL values must fall in, and whether
NULLs pass. This is the whole vocabulary a relation has to understand.

Order and equality follow DuckDB exactly, because DuckDB re-applies every
filter after the scan and a scan may only ever return a *superset* of the
matching rows:

- numbers compare by value; strings compare by their UTF-8 bytes (which is
  the order of Python's ``str`` comparison on code points);
- a float NaN sorts above ``+inf`` and equals itself, so an interval that is
  unbounded above contains NaN and no other interval does;
- ``-0.0`` equals ``0.0``;
- a NULL never satisfies a comparison; only the domain's ``nulls`` flag
  lets NULLs through.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.sql._masks import numpy_domain_mask

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ColumnDomain", "Interval", "Predicate", "RangeSet", "type_class"]

Bound = Any  # int | float | str: one type class per column, never mixed


@dataclass(frozen=True)
class Interval:
    """An interval of values; ``None`` is an open end (unbounded).

    An interval unbounded above also contains float NaN (DuckDB's order puts
    NaN above every other value).
    """

    lo: Bound = None
    hi: Bound = None
    lo_inclusive: bool = True
    hi_inclusive: bool = True

    def __post_init__(self) -> None:
        # An open end has no inclusivity: normalise so equal intervals compare equal.
        if self.lo is None and not self.lo_inclusive:
            object.__setattr__(self, "lo_inclusive", True)
        if self.hi is None and not self.hi_inclusive:
            object.__setattr__(self, "hi_inclusive", True)

    @classmethod
    def point(cls, value: Bound) -> Interval:
        return cls(value, value, True, True)

    @property
    def is_point(self) -> bool:
        return (
            self.lo is not None and self.lo == self.hi and self.lo_inclusive and self.hi_inclusive
        )

    @property
    def is_empty(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        if self.lo > self.hi:
            return True
        return self.lo == self.hi and not (self.lo_inclusive and self.hi_inclusive)

    def contains(self, value: Bound) -> bool:
        """Whether a non-NULL ``value`` lies in the interval (NaN-aware)."""
        if isinstance(value, float) and math.isnan(value):
            return self.hi is None
        if self.lo is not None and (
            value < self.lo or (value == self.lo and not self.lo_inclusive)
        ):
            return False
        return not (
            self.hi is not None
            and (value > self.hi or (value == self.hi and not self.hi_inclusive))
        )

    def overlaps(self, lo: Bound, hi: Bound) -> bool:
        """Whether any value in the closed range ``[lo, hi]`` lies in the interval."""
        if self.hi is not None and (lo > self.hi or (lo == self.hi and not self.hi_inclusive)):
            return False
        return not (
            self.lo is not None and (hi < self.lo or (hi == self.lo and not self.lo_inclusive))
        )

    def __str__(self) -> str:
        if self.is_point:
            return f"= {self.lo!r}"
        parts = []
        if self.lo is not None:
            parts.append(f"{'>=' if self.lo_inclusive else '>'} {self.lo!r}")
        if self.hi is not None:
            parts.append(f"{'<=' if self.hi_inclusive else '<'} {self.hi!r}")
        return " and ".join(parts) if parts else "any"


def _lower_key(iv: Interval) -> tuple[int, Bound, int]:
    # Sort key of a lower bound: -inf first; at equal values inclusive first.
    if iv.lo is None:
        return (0, 0, 0)
    return (1, iv.lo, 0 if iv.lo_inclusive else 1)


def _upper_before_lower(a: Interval, b: Interval) -> bool:
    """Whether interval ``a`` ends strictly before ``b`` begins, with no point shared."""
    if a.hi is None or b.lo is None:
        return False
    if a.hi < b.lo:
        return True
    return a.hi == b.lo and not (a.hi_inclusive and b.lo_inclusive)


def _max_upper(a: Interval, b: Interval) -> tuple[Bound, bool]:
    if a.hi is None or b.hi is None:
        return None, True
    if a.hi > b.hi:
        return a.hi, a.hi_inclusive
    if b.hi > a.hi:
        return b.hi, b.hi_inclusive
    return a.hi, a.hi_inclusive or b.hi_inclusive


@dataclass(frozen=True)
class RangeSet:
    """A union of disjoint intervals, kept sorted and merged."""

    intervals: tuple[Interval, ...] = ()

    @classmethod
    def of(cls, intervals: Iterable[Interval]) -> RangeSet:
        items = sorted((iv for iv in intervals if not iv.is_empty), key=_lower_key)
        merged: list[Interval] = []
        for iv in items:
            if merged and not _upper_before_lower(merged[-1], iv):
                prev = merged[-1]
                hi, hi_inc = _max_upper(prev, iv)
                merged[-1] = Interval(prev.lo, hi, prev.lo_inclusive, hi_inc)
            else:
                merged.append(iv)
        return cls(tuple(merged))

    @classmethod
    def everything(cls) -> RangeSet:
        return cls((Interval(),))

    @classmethod
    def points(cls, values: Iterable[Bound]) -> RangeSet:
        return cls.of(Interval.point(v) for v in values)

    @property
    def is_empty(self) -> bool:
        return not self.intervals

    @property
    def is_everything(self) -> bool:
        return len(self.intervals) == 1 and self.intervals[0] == Interval()

    def point_values(self) -> list[Bound] | None:
        """The values if every interval is a single point (an IN-set), else ``None``."""
        if self.intervals and all(iv.is_point for iv in self.intervals):
            return [iv.lo for iv in self.intervals]
        return None

    def union(self, other: RangeSet) -> RangeSet:
        return RangeSet.of(self.intervals + other.intervals)

    def intersect(self, other: RangeSet) -> RangeSet:
        out: list[Interval] = []
        for a in self.intervals:
            for b in other.intervals:
                lo_a, lo_b = _lower_key(a), _lower_key(b)
                low = a if lo_a >= lo_b else b
                if a.hi is None:
                    high = b
                elif b.hi is None:
                    high = a
                elif a.hi != b.hi:
                    high = a if a.hi < b.hi else b
                else:
                    high = a if not a.hi_inclusive else b
                iv = Interval(low.lo, high.hi, low.lo_inclusive, high.hi_inclusive)
                if not iv.is_empty:
                    out.append(iv)
        return RangeSet.of(out)

    def complement(self) -> RangeSet:
        """Every non-NULL value not in this set."""
        out: list[Interval] = []
        lo: Bound = None
        lo_inc = True
        open_below = True
        for iv in self.intervals:
            if iv.lo is not None:
                out.append(
                    Interval(lo if not open_below else None, iv.lo, lo_inc, not iv.lo_inclusive)
                )
            if iv.hi is None:
                return RangeSet.of(out)
            lo, lo_inc, open_below = iv.hi, not iv.hi_inclusive, False
        out.append(Interval(None if open_below else lo, None, lo_inc, True))
        return RangeSet.of(out)

    def contains(self, value: Bound) -> bool:
        return any(iv.contains(value) for iv in self.intervals)

    def overlaps(self, lo: Bound, hi: Bound) -> bool:
        return any(iv.overlaps(lo, hi) for iv in self.intervals)

    def hull(self) -> Interval | None:
        if not self.intervals:
            return None
        first, last = self.intervals[0], self.intervals[-1]
        return Interval(first.lo, last.hi, first.lo_inclusive, last.hi_inclusive)

    def __iter__(self) -> Iterator[Interval]:
        return iter(self.intervals)

    def __str__(self) -> str:
        values = self.point_values()
        if values is not None:
            return f"= {values[0]!r}" if len(values) == 1 else f"in {_short_list(values)}"
        return (
            " or ".join(f"({iv})" if len(self.intervals) > 1 else str(iv) for iv in self.intervals)
            or "none"
        )


def _short_list(values: list[Bound], limit: int = 8) -> str:
    shown = ", ".join(repr(v) for v in values[:limit])
    more = f", … ({len(values)} values)" if len(values) > limit else ""
    return f"({shown}{more})"


# IN-sets larger than this are kept as a sorted numpy array (``ColumnDomain.keys``)
# rather than as one interval per value: semi-joins hand over 10^5 and more keys.
LARGE_IN_SET = 64


class ColumnDomain:
    """The values one column may take: non-NULL values in ``ranges`` (and, if
    ``keys`` is set, among ``keys``, a sorted array of distinct values), NULL if
    ``nulls``.
    """

    __slots__ = ("keys", "nulls", "ranges")

    def __init__(
        self, ranges: RangeSet | None = None, nulls: bool = True, keys: Any = None
    ) -> None:
        self.ranges = RangeSet.everything() if ranges is None else ranges
        self.nulls = nulls
        self.keys = keys

    @classmethod
    def is_null(cls) -> ColumnDomain:
        return cls(RangeSet(), True)

    @classmethod
    def not_null(cls) -> ColumnDomain:
        return cls(RangeSet.everything(), False)

    @classmethod
    def values(cls, ranges: RangeSet) -> ColumnDomain:
        """Values in ``ranges``; NULL excluded, as for any comparison."""
        return cls(ranges, False)

    @classmethod
    def key_set(cls, keys: Any, distinct: bool = False) -> ColumnDomain:
        """Values among ``keys`` (an array-like), NULL excluded: a large IN-set.

        ``distinct`` says the keys have no duplicates already (a sort then suffices).
        """
        import numpy as np

        unique = np.sort(np.asarray(keys)) if distinct else np.unique(np.asarray(keys))
        small = len(unique) <= LARGE_IN_SET and not _holds_nan(unique)  # (NaN is no point)
        if small or unique.dtype.kind not in "iufUS":
            return cls.values(RangeSet.points(unique.tolist()))
        finite = unique[~np.isnan(unique)] if unique.dtype.kind == "f" else unique
        hull = (
            RangeSet.of(
                [
                    Interval(
                        finite[0].item(), None if len(finite) < len(unique) else finite[-1].item()
                    )
                ]
            )
            if len(finite)
            else RangeSet.everything()
        )
        return cls(hull, False, unique)

    @property
    def is_unrestricted(self) -> bool:
        return self.nulls and self.ranges.is_everything and self.keys is None

    @property
    def is_empty(self) -> bool:
        return not self.nulls and (
            self.ranges.is_empty or (self.keys is not None and len(self.keys) == 0)
        )

    def intersect(self, other: ColumnDomain) -> ColumnDomain:
        import numpy as np

        if self.keys is not None and other.keys is not None:
            keys = np.intersect1d(self.keys, other.keys)
        else:
            keys = self.keys if self.keys is not None else other.keys
        return ColumnDomain(self.ranges.intersect(other.ranges), self.nulls and other.nulls, keys)

    def union(self, other: ColumnDomain) -> ColumnDomain:
        """A domain holding both (with key sets, possibly more: unions only over-approximate)."""
        import numpy as np

        keys = None
        if self.keys is not None and other.keys is not None:
            keys = np.union1d(self.keys, other.keys)
        elif self.keys is not None and other.ranges.is_empty:
            keys = self.keys
        elif other.keys is not None and self.ranges.is_empty:
            keys = other.keys
        return ColumnDomain(self.ranges.union(other.ranges), self.nulls or other.nulls, keys)

    def contains(self, value: Bound | None) -> bool:
        if value is None:
            return self.nulls
        if not self.ranges.contains(value):
            return False
        return self.keys is None or _in_keys(self.keys, value)

    def overlaps(self, lo: Bound, hi: Bound) -> bool:
        """Whether any non-NULL value in ``[lo, hi]`` can be in the domain."""
        if not self.ranges.overlaps(lo, hi):
            return False
        if self.keys is None:
            return True
        import numpy as np

        try:
            first = np.searchsorted(self.keys, lo, side="left")
        except TypeError:
            return True
        return bool(first < len(self.keys) and self.keys[first] <= hi)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ColumnDomain):
            return NotImplemented
        if (self.keys is None) != (other.keys is None):
            return False
        if self.keys is not None:
            import numpy as np

            if not np.array_equal(self.keys, other.keys):
                return False
        return self.ranges == other.ranges and self.nulls == other.nulls

    def __hash__(self) -> int:
        return hash((self.ranges, self.nulls, None if self.keys is None else len(self.keys)))

    def __repr__(self) -> str:
        return f"ColumnDomain({self})"

    def __str__(self) -> str:
        if self.keys is not None:
            text = f"in {_short_list(self.keys.tolist())}"
        elif self.ranges.is_empty:
            return "is null" if self.nulls else "none"
        else:
            text = "is not null" if self.ranges.is_everything else str(self.ranges)
        return f"({text} or is null)" if self.nulls else text


def _holds_nan(values: Any) -> bool:
    """Whether ``values`` (a list or numpy array) hold a float NaN: an interval cannot be
    NaN (its bounds compare false with it), so such sets stay ``ColumnDomain.keys``."""
    import numpy as np

    if isinstance(values, np.ndarray):
        return values.dtype.kind == "f" and bool(np.isnan(values).any())
    return any(isinstance(v, float) and math.isnan(v) for v in values)


def _in_keys(keys: Any, value: Bound) -> bool:
    import numpy as np

    if isinstance(value, float) and math.isnan(value):
        return bool(keys.dtype.kind == "f" and np.isnan(keys).any())
    try:
        i = np.searchsorted(keys, value)
    except TypeError:
        return False
    return bool(i < len(keys) and keys[i] == value)


class Predicate(Mapping[str, ColumnDomain]):
    """A conjunction of per-column domains; the empty predicate matches every row.

    Column names are kept as the relation spells them; a relation matches
    them to its columns case-insensitively, as SQL does.
    """

    __slots__ = ("_domains", "_false")

    def __init__(self, domains: Mapping[str, ColumnDomain] | None = None) -> None:
        self._domains = {k: v for k, v in (domains or {}).items() if not v.is_unrestricted}
        self._false = any(d.is_empty for d in self._domains.values())

    # --- construction -----------------------------------------------------
    @classmethod
    def true(cls) -> Predicate:
        return cls()

    @classmethod
    def false(cls) -> Predicate:
        """The predicate no row satisfies (``WHERE false``)."""
        pred = cls()
        pred._false = True
        return pred

    @classmethod
    def on(cls, column: str, domain: ColumnDomain) -> Predicate:
        return cls({column: domain})

    @classmethod
    def between(cls, column: str, lo: Bound, hi: Bound) -> Predicate:
        """``lo <= column <= hi`` (either end may be ``None``)."""
        return cls.on(column, ColumnDomain.values(RangeSet.of([Interval(lo, hi)])))

    @classmethod
    def isin(cls, column: str, values: Iterable[Bound], distinct: bool = False) -> Predicate:
        """``column IN values``; large sets are kept as a sorted numpy array.

        ``distinct`` says the values have no duplicates already.
        """
        values = list(values) if not hasattr(values, "__array__") else values
        if len(values) > LARGE_IN_SET or _holds_nan(values):  # type: ignore[arg-type]
            return cls.on(column, ColumnDomain.key_set(values, distinct))
        if hasattr(values, "tolist"):
            values = values.tolist()  # numpy scalars become Python values
        return cls.on(column, ColumnDomain.values(RangeSet.points(values)))

    # --- Mapping ------------------------------------------------------------
    def __getitem__(self, column: str) -> ColumnDomain:
        return self._domains[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._domains)

    def __len__(self) -> int:
        return len(self._domains)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Predicate)
            and self._domains == other._domains
            and self._false == other._false
        )

    def __hash__(self) -> int:
        return hash((self._false, tuple(sorted(self._domains.items(), key=lambda kv: kv[0]))))

    # --- algebra ------------------------------------------------------------
    @property
    def is_true(self) -> bool:
        return not self._domains and not self._false

    @property
    def is_false(self) -> bool:
        """Whether no row can match (some column's domain is empty)."""
        return self._false

    def and_(self, other: Predicate) -> Predicate:
        if self._false or other._false:
            return Predicate.false()
        out = dict(self._domains)
        for col, dom in other._domains.items():
            out[col] = out[col].intersect(dom) if col in out else dom
        return Predicate(out)

    def or_(self, other: Predicate) -> Predicate:
        """The tightest per-column predicate implied by ``self OR other``."""
        if self.is_false:
            return other
        if other.is_false:
            return self
        return Predicate(
            {c: d.union(other._domains[c]) for c, d in self._domains.items() if c in other._domains}
        )

    def restricted_to(self, keep: Callable[[str], bool]) -> Predicate:
        """This predicate on the columns ``keep`` accepts only (so a superset of it)."""
        if self._false or all(keep(c) for c in self._domains):
            return self
        return Predicate({c: d for c, d in self._domains.items() if keep(c)})

    def domain(self, column: str) -> ColumnDomain | None:
        """The domain of ``column`` (matched case-insensitively), or ``None``."""
        if column in self._domains:
            return self._domains[column]
        low = column.lower()
        for name, dom in self._domains.items():
            if name.lower() == low:
                return dom
        return None

    def may_match(self, column: str, lo: Bound, hi: Bound, null_count: int = 0) -> bool:
        """Whether a block whose non-NULL ``column`` values lie in ``[lo, hi]`` can match.

        For pruning by min/max statistics (zone maps, bounding boxes). ``lo``
        and ``hi`` of ``None`` mean the block has no non-NULL values.
        """
        if self._false:
            return False
        dom = self.domain(column)
        if dom is None:
            return True
        if null_count and dom.nulls:
            return True
        if lo is None or hi is None:
            return False
        if isinstance(hi, float) and math.isnan(hi):
            hi = math.inf  # a block holding NaN reaches above every finite bound
            # (and holds NaN, which a half-line up takes in, and so do keys holding NaN)
            if any(iv.hi is None for iv in dom.ranges) and (
                dom.keys is None or _holds_nan(dom.keys)
            ):
                return True
        return dom.overlaps(lo, hi)

    def matches(self, row: Mapping[str, Any]) -> bool:
        """Evaluate on one row (a mapping of column to value): the plain, reference answer."""
        if self._false:
            return False
        lowered = {k.lower(): v for k, v in row.items()}
        for col, dom in self._domains.items():
            if col.lower() in lowered and not dom.contains(lowered[col.lower()]):
                return False
        return True

    # --- evaluation on Arrow data ------------------------------------------
    def mask(self, data: pa.RecordBatch | pa.Table) -> pa.ChunkedArray | pa.Array | None:
        """A boolean mask of the rows of ``data`` that may match, or ``None`` for all rows.

        Columns the data does not have, or whose type cannot be compared with
        the domain's bounds, do not restrict (a superset is always allowed).
        """
        return self._mask(data, exact=False)

    def _mask(self, data: pa.RecordBatch | pa.Table, exact: bool) -> Any:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._false:
            return pa.array([False] * data.num_rows, pa.bool_())
        names = {n.lower(): n for n in data.schema.names}
        result = None
        for col, dom in self._domains.items():
            actual = names.get(col.lower())
            try:
                if actual is None:
                    raise _Incomparable(col)
                column_mask = _domain_mask(data.column(actual), dom)
            except _Incomparable:
                if exact:
                    raise
                continue  # a superset may let the column's every row through
            if column_mask is None:
                continue
            if result is None:
                result = column_mask
            elif isinstance(result, np.ndarray) and isinstance(column_mask, np.ndarray):
                result &= column_mask
            else:
                result = pc.and_(_as_arrow(result), _as_arrow(column_mask))
        return None if result is None else _as_arrow(result)

    def filter(self, data: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
        mask = self.mask(data)
        return data if mask is None else data.filter(mask)

    def filter_exactly(self, data: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table | None:
        """The rows of ``data`` that match, exactly as SQL decides (NULL never matches a
        comparison); None when some column cannot be compared exactly here (a type or
        bound ``mask`` would let through)."""
        try:
            mask = self._mask(data, exact=True)
        except _Incomparable:
            return None
        return data if mask is None else data.filter(mask)

    def __repr__(self) -> str:
        return f"Predicate({self})"

    def __str__(self) -> str:
        if self._false:
            return "false"
        if not self._domains:
            return "true"
        return " and ".join(f"{col} {dom}" for col, dom in self._domains.items())


def type_class(arrow_type: pa.DataType) -> str | None:
    """The comparison class of an Arrow type: ``int``, ``float``, ``string``, ``bool`` or ``None``.

    Only these classes are pushed down; any other type (temporal, decimal,
    nested) is left entirely to DuckDB.
    """
    import pyarrow.types as pt

    if pt.is_boolean(arrow_type):
        return "bool"
    if pt.is_integer(arrow_type):
        return "int"
    if pt.is_floating(arrow_type):
        return "float"
    if pt.is_string(arrow_type) or pt.is_large_string(arrow_type) or pt.is_string_view(arrow_type):
        return "string"
    return None


class _Incomparable(Exception):
    """A column that cannot be compared with its domain here (its type, or a bound of
    another class): a superset lets it through, an exact filter gives up."""


def _domain_mask(array: Any, dom: ColumnDomain) -> Any:
    """The rows of ``array`` in ``dom``: a numpy mask where numpy is sure, else Arrow's."""
    kind = type_class(array.type)
    if kind is None:
        raise _Incomparable(array.type)
    fast = numpy_domain_mask(array, dom, kind)
    return fast if fast is not None else _arrow_domain_mask(array, dom, kind)


def _arrow_domain_mask(array: Any, dom: ColumnDomain, kind: str) -> Any:
    """The mask with Arrow's compute functions: every type class, NULLs and errors."""
    import pyarrow as pa
    import pyarrow.compute as pc

    # the errors of comparing a column with a bound it cannot be compared with
    incomparable = (
        pa.ArrowInvalid,
        pa.ArrowNotImplementedError,
        pa.ArrowTypeError,
        TypeError,
        OverflowError,
    )
    if dom.keys is not None:
        try:
            mask = _keys_mask(array, dom.keys, kind)
            if not dom.ranges.is_everything:
                # a bool column's ranges are over 0 and 1, compared as integers
                compared = array if kind != "bool" else pc.cast(array, pa.int8())
                mask = pc.and_(
                    mask, _ranges_mask(compared, dom.ranges, "int" if kind == "bool" else kind)
                )
        except incomparable as err:
            raise _Incomparable(err) from None
        return _nulls_as(mask, array, dom.nulls)
    if dom.ranges.is_everything:
        return pc.is_valid(array) if not dom.nulls else None
    if dom.ranges.is_empty:  # only NULLs can pass, if any
        return pc.is_null(array) if dom.nulls else pc.and_(pc.is_null(array), pa.scalar(False))
    if kind == "bool":
        array = pc.cast(array, pa.int8())  # False < True, compared as 0 < 1
        kind = "int"
    try:
        mask = _ranges_mask(array, dom.ranges, kind)
    except incomparable as err:
        raise _Incomparable(err) from None  # a bound this column cannot compare with
    return _nulls_as(mask, array, dom.nulls)


def _as_arrow(mask: Any) -> Any:
    """A mask as Arrow (numpy's boolean masks come from ``numpy_domain_mask``)."""
    import numpy as np
    import pyarrow as pa

    return pa.array(mask, pa.bool_()) if isinstance(mask, np.ndarray) else mask


def _nulls_as(mask: Any, array: Any, nulls: bool) -> Any:
    """``mask`` with the rows where ``array`` is NULL set to ``nulls`` (a column without
    NULLs gives a mask without them: each compute call costs a point query 10 µs)."""
    import pyarrow.compute as pc

    return mask if array.null_count == 0 else pc.fill_null(mask, nulls)


def _null_where_null(array: Any, mask: Any) -> Any:
    """``mask``, NULL where ``array`` is NULL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if array.null_count == 0:
        return mask
    return pc.if_else(pc.is_null(array), pa.scalar(None, pa.bool_()), mask)


def _keys_mask(array: Any, keys: Any, kind: str) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if kind == "float":
        array = pc.cast(array, pa.float64()) if array.type != pa.float64() else array
        values = np.asarray(keys, dtype=np.float64)
        nan = bool(np.isnan(values).any())
        values = values[~np.isnan(values)]
        if (values == 0).any():
            values = np.concatenate([values, [0.0, -0.0]])  # hashing tells -0.0 from 0.0
        mask = _null_where_null(array, pc.is_in(array, value_set=pa.array(values)))
        return pc.or_(mask, pc.is_nan(array)) if nan else mask
    if kind == "string" and keys.dtype.kind not in "US":
        raise TypeError("numeric keys cannot match a string column")
    if kind in ("int", "bool") and keys.dtype.kind not in "iub":
        raise TypeError("these keys cannot match an integer column")
    value_set = pa.array(keys) if kind == "string" else pa.array(keys).cast(array.type, safe=False)
    return _null_where_null(array, pc.is_in(array, value_set=value_set))


def _scalar(value: Bound, kind: str, arrow_type: Any) -> Any:
    import pyarrow as pa

    # A bound of another class than the column (a string for a number, ...)
    # raises TypeError, and the column then restricts nothing.
    if kind == "float" and isinstance(value, (int, float)):
        return pa.scalar(float(value), pa.float64())
    if kind == "int" and isinstance(value, int):
        return pa.scalar(value, arrow_type)  # out of the type's range raises: no restriction
    if kind == "string" and isinstance(value, str):
        return pa.scalar(value, pa.string())
    raise TypeError(f"a {type(value).__name__} bound cannot be compared with a {kind} column")


def _ranges_mask(array: Any, ranges: RangeSet, kind: str) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if kind == "float" and array.type != pa.float64():
        array = pc.cast(array, pa.float64())  # compare float32 exactly, in double
    values = ranges.point_values()
    if values is not None:
        nan_points = [v for v in values if isinstance(v, float) and math.isnan(v)]
        finite = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
        if kind == "float" and any(v == 0 for v in finite):
            finite += [0.0, -0.0]  # a hash lookup tells -0.0 from 0.0; DuckDB does not
        value_type = {"float": pa.float64(), "string": pa.string()}.get(kind, array.type)
        mask = _null_where_null(array, pc.is_in(array, value_set=pa.array(finite, type=value_type)))
        if nan_points:
            mask = pc.or_(mask, pc.is_nan(array))
        return mask
    mask = None
    for iv in ranges:
        part = None
        if iv.lo is not None:
            cmp = pc.greater_equal if iv.lo_inclusive else pc.greater
            part = cmp(array, _scalar(iv.lo, kind, array.type))
        if iv.hi is not None:
            cmp = pc.less_equal if iv.hi_inclusive else pc.less
            upper = cmp(array, _scalar(iv.hi, kind, array.type))
            part = upper if part is None else pc.and_(part, upper)
        elif kind == "float" and part is not None:
            part = pc.or_(part, pc.is_nan(array))  # NaN sorts above everything
        if part is None:  # unbounded both ways: every non-NULL value, NULL stays NULL
            part = pc.if_else(pc.is_valid(array), pa.scalar(True), pa.scalar(None, pa.bool_()))
        mask = part if mask is None else pc.or_(mask, part)
    return mask
