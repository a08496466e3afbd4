"""The Assoc algebra against a dictionary-of-triples model (MATLAB D4M's rules)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tesseradb import _core
from tesseradb.assoc import Assoc, StartsWith, _assoc

KEYS = st.sampled_from(["a", "ab", "abc", "b", "ba", "c", "d", "é", ""])
NUMBERS = st.integers(-3, 3).map(float)
STRINGS = st.sampled_from(["x", "xy", "y", "z", "zz"])

Model = dict[tuple[str, str], Any]


def triples(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[str, str, Any]]]:
    return st.lists(st.tuples(KEYS.filter(bool), KEYS.filter(bool), values), max_size=25)


def model_of(ts: list[tuple[str, str, Any]], aggregate: Any = min) -> Model:
    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for r, c, v in ts:
        if v == "":
            continue
        groups[(r, c)].append(v)
    out = {k: aggregate(vs) for k, vs in groups.items()}
    return {k: v for k, v in out.items() if v != 0 and v != ""}


def build(ts: list[tuple[str, str, Any]], aggregate: Any = min) -> Assoc:
    if not ts:
        return Assoc([], [], [])
    rows, cols, vals = zip(*ts, strict=True)
    return Assoc(list(rows), list(cols), list(vals), aggregate)


def as_model(a: Assoc) -> Model:
    model = {(r, c): v for r, c, v in a.triples()}
    # canonical form: keys are exactly those in use, values never empty
    assert {r for r, _ in model} == set(a.row.tolist())
    assert {c for _, c in model} == set(a.col.tolist())
    assert list(a.row) == sorted(a.row.tolist())
    assert list(a.col) == sorted(a.col.tolist())
    if a.val is not None:
        assert set(a.val.tolist()) == set(model.values())
    assert all(v != 0 and v != "" for v in model.values())
    return model


def logical(m: Model) -> Model:
    return {k: 1.0 for k in m}


def is_text(m: Model) -> bool:
    return any(isinstance(v, str) for v in m.values())


def unify(a: Model, b: Model, strings_stay: bool) -> tuple[Model, Model]:
    if is_text(a) and is_text(b) and strings_stay:
        return a, b
    return (logical(a) if is_text(a) else a), (logical(b) if is_text(b) else b)


def clean(m: Model) -> Model:
    return {k: v for k, v in m.items() if v != 0 and v != ""}


def plus(a: Model, b: Model) -> Model:
    a, b = unify(a, b, True)
    if is_text(a) and is_text(b):
        return {k: max(v for v in (a.get(k), b.get(k)) if v is not None) for k in a.keys() | b}
    return clean({k: a.get(k, 0.0) + b.get(k, 0.0) for k in a.keys() | b})


def minus(a: Model, b: Model) -> Model:
    a, b = unify(a, b, True)
    if is_text(a) and is_text(b):
        return {k: (a.get(k) or b.get(k)) for k in a.keys() ^ b.keys()}
    return clean({k: a.get(k, 0.0) - b.get(k, 0.0) for k in a.keys() | b})


def and_(a: Model, b: Model) -> Model:
    a, b = unify(a, b, True)
    return clean({k: min(a[k], b[k]) for k in a.keys() & b.keys()})


def or_(a: Model, b: Model) -> Model:
    a, b = unify(a, b, True)
    return clean({k: min(v for v in (a.get(k), b.get(k)) if v is not None) for k in a.keys() | b})


def times(a: Model, b: Model) -> Model:
    a, b = unify(a, b, False)
    return clean({k: a[k] * b[k] for k in a.keys() & b.keys()})


def matmul(a: Model, b: Model) -> Model:
    a, b = unify(a, b, False)
    out: dict[tuple[str, str], float] = defaultdict(float)
    for (i, k), x in a.items():
        for (k2, j), y in b.items():
            if k == k2:
                out[(i, j)] += x * y
    return clean(dict(out))


def assoc_models(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[str, str, Any]]]:
    return triples(values)


EITHER = st.one_of(assoc_models(NUMBERS), assoc_models(STRINGS))


@settings(max_examples=80, deadline=None)
@given(triples(st.one_of(NUMBERS)), st.sampled_from([min, max, sum, "first", "last"]))
def test_construction_aggregates_like_the_model(ts: list[tuple[str, str, Any]], agg: Any) -> None:
    pick = {"first": lambda v: v[0], "last": lambda v: v[-1]}.get(agg, agg)  # type: ignore[arg-type]
    assert as_model(build(ts, agg)) == model_of(ts, pick)


@settings(max_examples=60, deadline=None)
@given(triples(STRINGS), st.sampled_from([min, max, "first", "last"]))
def test_string_values_aggregate_by_their_order(ts: list[tuple[str, str, Any]], agg: Any) -> None:
    pick = {"first": lambda v: v[0], "last": lambda v: v[-1]}.get(agg, agg)  # type: ignore[arg-type]
    assert as_model(build(ts, agg)) == model_of(ts, pick)


@settings(max_examples=60, deadline=None)
@given(triples(NUMBERS))
def test_a_callable_aggregate_sees_the_colliding_values(ts: list[tuple[str, str, Any]]) -> None:
    def spread(values: list[float]) -> float:
        return max(values) - min(values) + len(values)

    assert as_model(build(ts, spread)) == model_of(ts, spread)


OPS = {
    "+": (lambda x, y: x + y, plus),
    "-": (lambda x, y: x - y, minus),
    "&": (lambda x, y: x & y, and_),
    "|": (lambda x, y: x | y, or_),
    "*": (lambda x, y: x * y, times),
    "@": (lambda x, y: x @ y, matmul),
}


@settings(max_examples=150, deadline=None)
@given(EITHER, EITHER, st.sampled_from(sorted(OPS)))
def test_operators_follow_matlab_rules(
    ta: list[tuple[str, str, Any]], tb: list[tuple[str, str, Any]], op: str
) -> None:
    run, model = OPS[op]
    a, b = build(ta), build(tb)
    assert as_model(run(a, b)) == model(model_of(ta), model_of(tb))


@settings(max_examples=60, deadline=None)
@given(EITHER, EITHER)
def test_matmul_past_the_dense_row_limit_agrees(
    ta: list[tuple[str, str, Any]], tb: list[tuple[str, str, Any]]
) -> None:
    """B wider than the Rust kernel's dense row goes through scipy: the same answer."""
    a, b = build(ta), build(tb)
    kernel = _core.sparse_product
    calls = []

    def counted(*args: Any) -> Any:
        calls.append(1)
        return kernel(*args)

    with patch.object(_core, "sparse_product", counted):
        native = a @ b
        answered = len(calls)
        with patch.object(_assoc, "_DENSE_ROW_LIMIT", -1):  # every B is wider
            through_scipy = a @ b
    assert answered == 1 and len(calls) == 1  # the kernel made the first, not the second
    assert as_model(native) == as_model(through_scipy) == matmul(model_of(ta), model_of(tb))


@settings(max_examples=60, deadline=None)
@given(EITHER)
def test_transpose_sum_logical_sqin_sqout(ts: list[tuple[str, str, Any]]) -> None:
    a, m = build(ts), model_of(ts)
    assert as_model(a.T) == {(c, r): v for (r, c), v in m.items()}
    assert as_model(a.logical()) == logical(m)
    numeric = logical(m) if is_text(m) else m
    assert a.sum() == sum(numeric.values())
    down: dict[tuple[float, str], float] = defaultdict(float)
    across: dict[tuple[str, float], float] = defaultdict(float)
    for (r, c), v in numeric.items():
        down[(1.0, c)] += v
        across[(r, 1.0)] += v
    assert as_model(a.sum(0)) == clean(dict(down))
    assert as_model(a.sum(1)) == clean(dict(across))
    transposed = {(c, r): v for (r, c), v in m.items()}
    assert as_model(a.sqin()) == matmul(transposed, m)
    assert as_model(a.sqout()) == matmul(m, transposed)


def select(m: Model, rows: Any, cols: Any) -> Model:
    return {(r, c): v for (r, c), v in m.items() if rows(r) and cols(c)}


@settings(max_examples=100, deadline=None)
@given(EITHER, KEYS, KEYS, st.lists(KEYS.filter(bool), max_size=3), st.integers(0, 4))
def test_every_indexing_form_matches_the_model(
    ts: list[tuple[str, str, Any]], lo: str, hi: str, picks: list[str], at: int
) -> None:
    a, m = build(ts), model_of(ts)
    every = lambda _k: True  # noqa: E731
    assert as_model(a[:, :]) == m
    assert as_model(a[":", ":"]) == m
    if picks:
        wanted = set(picks)
        assert as_model(a["".join(p + "," for p in picks), :]) == select(
            m, wanted.__contains__, every
        )
        assert as_model(a[:, picks]) == select(m, every, wanted.__contains__)
        assert as_model(a[:, np.array(picks)]) == select(m, every, wanted.__contains__)
    # inclusive ranges, open at either end
    assert as_model(a[f"{lo},:,{hi},", :]) == select(
        m, lambda r: (not lo or r >= lo) and (not hi or r <= hi), every
    )
    if lo:
        assert as_model(a[:, f"{lo},:,"]) == select(m, every, lambda c: c >= lo)
        assert as_model(a[f"{lo}*,", :]) == select(m, lambda r: r.startswith(lo), every)
        assert as_model(a[StartsWith(f"{lo},{hi or lo},"), :]) == select(
            m, lambda r: r.startswith(lo) or r.startswith(hi or lo), every
        )
    rows = a.row.tolist()
    if at < len(rows):
        assert as_model(a[at, :]) == select(m, lambda r: r == rows[at], every)
        assert as_model(a[-1, :]) == select(m, lambda r: r == rows[-1], every)
        assert as_model(a[at:, :]) == select(m, lambda r: r in rows[at:], every)
        assert as_model(a[[at], :]) == select(m, lambda r: r == rows[at], every)


@settings(max_examples=60, deadline=None)
@given(triples(NUMBERS), st.integers(-3, 3))
def test_value_filters_keep_the_values(ts: list[tuple[str, str, Any]], x: int) -> None:
    a, m = build(ts), model_of(ts)
    assert as_model(a > x) == {k: v for k, v in m.items() if v > x}
    assert as_model(a == x) == {k: v for k, v in m.items() if v == x}
    assert as_model(a[a >= x]) == {k: v for k, v in m.items() if v >= x}
    assert as_model(a <= x) == {k: v for k, v in m.items() if v <= x}


@settings(max_examples=40, deadline=None)
@given(triples(STRINGS), STRINGS)
def test_string_filters(ts: list[tuple[str, str, Any]], s: str) -> None:
    a, m = build(ts), model_of(ts)
    assert as_model(a == s) == {k: v for k, v in m.items() if v == s}
    assert as_model(a < s) == {k: v for k, v in m.items() if v < s}


def cat_model(a: Model, b: Model, piece: Any) -> Model:
    out: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for (i, k), x in a.items():
        for (k2, j), y in b.items():
            if k == k2:
                out[(i, j)].append((k, piece(k, x, y)))
    return {key: "".join(p for _, p in sorted(parts)) for key, parts in out.items()}


def text(x: Any) -> str:
    if isinstance(x, str):
        return x
    return str(int(x)) if float(x).is_integer() else repr(float(x))


@settings(max_examples=60, deadline=None)
@given(EITHER, EITHER)
def test_catkeymul_and_catvalmul(
    ta: list[tuple[str, str, Any]], tb: list[tuple[str, str, Any]]
) -> None:
    a, b = build(ta), build(tb)
    ma, mb = model_of(ta), model_of(tb)
    assert as_model(a.catkeymul(b)) == cat_model(ma, mb, lambda k, _x, _y: k + ";")
    assert as_model(a.catvalmul(b)) == cat_model(ma, mb, lambda _k, x, y: f"{text(x)};{text(y)};")


def test_empty_results_are_empty_assocs() -> None:
    a = Assoc("a,", "b,", 1)
    b = Assoc("c,", "d,", 1)
    for result in (a & b, a * b, a @ b, a - a, a[a > 5], a["zz,", :], Assoc("", "", "")):
        assert result.nnz == 0 and result.shape == (0, 0)
        assert result.triples() == []
