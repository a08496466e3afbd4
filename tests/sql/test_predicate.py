"""The predicate algebra against brute force: union, intersection, complement,
pruning by min/max and the Arrow mask all agree with evaluating value by value."""

from __future__ import annotations

import math

import pyarrow as pa
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tesseradb.sql.predicate import ColumnDomain, Interval, Predicate, RangeSet

VALUES = [-math.inf, -3.0, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, math.inf, math.nan]
bounds = st.one_of(
    st.none(), st.sampled_from([-3.0, -1.0, 0.0, 1.0, 2.0, 3.0, math.inf, -math.inf])
)


@st.composite
def intervals(draw: st.DrawFn) -> Interval:
    return Interval(draw(bounds), draw(bounds), draw(st.booleans()), draw(st.booleans()))


range_sets = st.lists(intervals(), max_size=4).map(RangeSet.of)


def members(rs: RangeSet) -> set[str]:
    return {repr(v) for v in VALUES if rs.contains(v)}


@settings(max_examples=300, deadline=None)
@given(range_sets, range_sets)
def test_union_intersection_complement_match_brute_force(a: RangeSet, b: RangeSet) -> None:
    universe = {repr(v) for v in VALUES}
    assert members(a.union(b)) == members(a) | members(b)
    assert members(a.intersect(b)) == members(a) & members(b)
    assert members(a.complement()) == universe - members(a)
    assert members(a.complement().complement()) == members(a)


@settings(max_examples=300, deadline=None)
@given(
    range_sets, st.lists(st.one_of(st.none(), st.sampled_from(VALUES)), max_size=12), st.booleans()
)
def test_mask_matches_row_by_row_evaluation(
    ranges: RangeSet, column: list[float | None], nulls: bool
) -> None:
    pred = Predicate.on("x", ColumnDomain(ranges, nulls))
    table = pa.table({"x": pa.array(column, pa.float64())})
    mask = pred.mask(table)
    got = [True] * len(column) if mask is None else mask.to_pylist()
    assert got == [pred.matches({"x": v}) for v in column]


@settings(max_examples=300, deadline=None)
@given(range_sets, st.lists(st.sampled_from(VALUES), min_size=1, max_size=8), st.integers(0, 2))
def test_min_max_pruning_never_drops_a_matching_block(
    ranges: RangeSet, block: list[float], nulls: int
) -> None:
    pred = Predicate.on("x", ColumnDomain(ranges, False))
    finite = [v for v in block if not math.isnan(v)]
    lo = min(finite) if finite else math.inf
    hi = math.nan if any(math.isnan(v) for v in block) else max(finite)
    if any(pred.matches({"x": v}) for v in block):
        assert pred.may_match("x", lo, hi, nulls)


def test_nan_sorts_above_infinity_as_in_duckdb() -> None:
    above = Predicate.on("x", ColumnDomain.values(RangeSet.of([Interval(math.inf, None, True)])))
    assert above.matches({"x": math.nan}) and above.matches({"x": math.inf})
    below = Predicate.on("x", ColumnDomain.values(RangeSet.of([Interval(None, math.inf)])))
    assert not below.matches({"x": math.nan})
    zero = Predicate.isin("x", [0.0])
    assert zero.mask(pa.table({"x": [-0.0, 0.0, 1.0]})).to_pylist() == [True, True, False]


def test_algebra_and_text() -> None:
    a = Predicate.between("x", 1, 5)
    b = Predicate.isin("y", ["p", "q"])
    both = a.and_(b)
    assert str(both) == "x >= 1 and <= 5 and y in ('p', 'q')"
    assert a.or_(b).is_true  # different columns: nothing implied
    assert a.and_(Predicate.between("x", 7, 9)).is_false
    assert str(Predicate.false()) == "false" and Predicate.false().or_(a) == a
    assert str(Predicate.on("x", ColumnDomain.is_null())) == "x is null"
    assert Predicate().is_true and len(both) == 2 and set(both) == {"x", "y"}
    assert both.domain("X") is not None  # columns match case-insensitively


def test_mask_of_strings_bools_and_missing_columns() -> None:
    table = pa.table({"s": ["a", "b", None, "é"], "b": [True, False, None, True]})
    assert Predicate.between("s", "a", "b").mask(table).to_pylist() == [True, True, False, False]
    assert Predicate.on("s", ColumnDomain.is_null()).mask(table).to_pylist() == [
        False,
        False,
        True,
        False,
    ]
    assert Predicate.isin("b", [1]).mask(table).to_pylist() == [True, False, False, True]
    assert Predicate.between("nope", 1, 2).mask(table) is None  # unknown column restricts nothing
    assert Predicate.between("s", 1, 2).mask(table) is None  # incomparable bound restricts nothing


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-50, 50), min_size=0, max_size=200),
    st.lists(st.one_of(st.none(), st.integers(-60, 60)), max_size=40),
    bounds,
    bounds,
)
def test_large_key_sets_match_brute_force(
    keys: list[int], column: list[int | None], lo: float | None, hi: float | None
) -> None:
    """Key sets (semi-join IN-sets) agree with membership, alone and intersected with ranges."""
    keyed = Predicate.isin("x", keys)
    ranged = Predicate.on("x", ColumnDomain.values(RangeSet.of([Interval(lo, hi)])))
    for pred in (keyed, keyed.and_(ranged)):
        table = pa.table({"x": pa.array(column, pa.int64())})
        mask = pred.mask(table)
        got = [True] * len(column) if mask is None else mask.to_pylist()
        assert got == [pred.matches({"x": v}) for v in column]
        assert got == [
            v is not None and v in set(keys) and (pred is keyed or ranged.matches({"x": v}))
            for v in column
        ]
        for a in range(-60, 61, 7):
            if any(pred.matches({"x": v}) for v in range(a, a + 7)):
                assert pred.may_match("x", a, a + 6)


def test_key_sets_stay_numpy_and_print_short() -> None:
    import numpy as np

    pred = Predicate.isin("id", np.arange(1000, 0, -1))
    dom = pred.domain("id")
    assert dom is not None and dom.keys is not None and dom.keys[0] == 1 and len(dom.keys) == 1000
    assert str(pred).startswith("id in (1, 2, 3") and "1000 values" in str(pred)
    assert not pred.may_match("id", 2000, 3000) and pred.may_match("id", 500, 500)
    both = pred.and_(Predicate.isin("id", np.arange(990, 1100)))
    assert list(both.domain("id").keys) == list(range(990, 1001))


NUMERIC_TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float32", "float64"]
numeric_bounds = st.one_of(
    st.none(),
    st.integers(-(2**65), 2**65),
    st.sampled_from([-300, -1, 0, 1, 127, 128, 255, 256, 2**63 - 1, 2**63, 2**64 - 1]),
    st.floats(allow_nan=False, allow_infinity=True),  # (the analysis never bounds by NaN)
    st.sampled_from([-0.0, 0.5, 1e20, True]),
)
text_bounds = st.one_of(st.none(), st.sampled_from(["1", "a"]))


@st.composite
def numeric_domains(draw: st.DrawFn) -> ColumnDomain:
    import numpy as np

    shape = draw(st.sampled_from(["ranges", "points", "keys", "keys_and_range"]))
    # one class of bounds a domain (numeric keys with numeric ranges)
    bound = numeric_bounds
    if not shape.startswith("keys"):
        bound = draw(st.sampled_from([numeric_bounds] * 4 + [text_bounds]))
    if shape == "points":
        points = draw(st.lists(bound.filter(lambda v: v is not None), max_size=6))
        return ColumnDomain(RangeSet.points(points), draw(st.booleans()))
    ranges = RangeSet.of(
        [
            Interval(draw(bound), draw(bound), draw(st.booleans()), draw(st.booleans()))
            for _ in range(draw(st.integers(1, 3)))
        ]
        if shape != "keys"
        else [Interval(None, None)]
    )
    if shape == "ranges":
        return ColumnDomain(ranges, draw(st.booleans()))
    key_type = draw(st.sampled_from(["int64", "uint64", "float64"]))
    if key_type == "float64":
        keys = draw(st.lists(st.floats(-300, 300) | st.just(math.nan), min_size=1, max_size=80))
    else:
        lo = 0 if key_type == "uint64" else -(2**63)
        hi = 2**64 - 1 if key_type == "uint64" else 2**63 - 1
        keys = draw(
            st.lists(st.integers(max(lo, -300), 300) | st.integers(lo, hi), min_size=1, max_size=80)
        )
    domain = ColumnDomain.key_set(np.asarray(keys, dtype=key_type))
    return ColumnDomain(ranges.intersect(domain.ranges), False, domain.keys)


@settings(max_examples=600, deadline=None)
@given(
    numeric_domains(),
    st.sampled_from(NUMERIC_TYPES),
    st.lists(st.integers(-300, 300) | st.floats(-1e3, 1e3) | st.just(math.nan), max_size=40),
)
def test_numpy_masks_equal_arrow_masks_and_row_by_row(
    dom: ColumnDomain, type_name: str, drawn: list[float]
) -> None:
    """The numpy mask of a numeric column without NULLs is Arrow's mask, value for value,
    and what evaluating each row gives; where numpy is unsure it leaves it to Arrow."""
    import numpy as np

    from tesseradb.sql._masks import numpy_domain_mask
    from tesseradb.sql.predicate import _arrow_domain_mask, _Incomparable, type_class

    dtype = np.dtype(type_name)
    if dtype.kind == "f":
        values = np.asarray(drawn, dtype=dtype)
    else:
        info = np.iinfo(dtype)
        ints = [int(v) for v in drawn if not math.isnan(v) and info.min <= int(v) <= info.max]
        values = np.asarray([*ints, info.min, info.max], dtype=dtype)
    if dom.is_empty:
        return  # a predicate holding it is false before any mask (Predicate.is_false)
    array = pa.array(values)
    kind = type_class(array.type)
    fast = numpy_domain_mask(array, dom, kind)
    event("numpy answered" if fast is not None else "left to Arrow")
    if fast is None:
        return
    got = fast.tolist()
    try:
        arrow = _arrow_domain_mask(array, dom, kind)
    except _Incomparable:
        arrow = "incomparable"
    expected = [True] * len(values) if arrow is None else arrow
    assert arrow != "incomparable", "numpy answered where Arrow cannot compare"
    if not isinstance(expected, list):
        expected = expected.to_pylist()
    assert got == expected
    pred = Predicate.on("x", dom)
    assert got == [pred.matches({"x": v}) for v in array.to_pylist()]


def test_key_sets_holding_nan_keep_blocks_holding_nan() -> None:
    """Found by the semi-join property test: a block of NULLs and NaN (min and max
    NaN) was pruned by the key set {NaN}, and the join that DuckDB answers with a row
    answered none."""
    import numpy as np

    nan = math.nan
    keyed = Predicate.isin("x", np.array([nan]), distinct=True)
    assert keyed.may_match("x", nan, nan, null_count=3)
    assert keyed.may_match("x", -1.0, nan)
    assert not keyed.may_match("x", -1.0, 5.0)  # (no NaN in the block)
    mixed = Predicate.isin("x", np.array([1.0, nan]))
    assert mixed.may_match("x", 2.0, nan) and mixed.may_match("x", 0.5, 1.5)
    assert not Predicate.isin("x", np.arange(70) / 100).may_match("x", 2.0, nan)  # (all below)
