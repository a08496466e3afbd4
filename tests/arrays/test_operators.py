"""Operators against plain numpy: aggregate, regrid (integer and 10:3), apply, between, overlay."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.arrays._operators import OperatorError


@pytest.fixture
def grid(db: tesseradb.Database) -> Any:
    arr = db.create_array(
        "g",
        [
            {"name": "t", "end": 3, "chunk": 1},
            {"name": "y", "end": 20, "chunk": 7},
            {"name": "x", "end": 30, "chunk": 8},
        ],
        {"v": "int32", "w": {"dtype": "float64", "nullable": True}},
        origin=(0, 100, 200),
    )
    rng = np.random.default_rng(3)
    v = rng.integers(0, 100, (3, 20, 30)).astype(np.int32)
    w = np.where(rng.random((3, 20, 30)) < 0.2, np.nan, rng.standard_normal((3, 20, 30)))
    arr[...] = {"v": v, "w": w}
    return arr, v, w


def test_aggregate_matches_numpy(grid: Any) -> None:
    arr, v, w = grid
    assert float(arr.aggregate("avg", "v")["v"]) == pytest.approx(v.mean())
    by_t = arr.aggregate("sum", ["v", "w"], by="t")
    np.testing.assert_array_equal(by_t["v"].values, v.sum(axis=(1, 2)))
    np.testing.assert_allclose(by_t["w"].values, np.nansum(w, axis=(1, 2)))
    by_yx = arr.aggregate("stddev", "w", by=["x", "y"])  # group order as given
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy on cells with < 2 values
        expected = np.nanstd(w, axis=0, ddof=1).T
    np.testing.assert_allclose(by_yx["w"].values, expected, equal_nan=True)
    assert list(by_yx["x"].values[:2]) == [200, 201]
    view = arr.between((slice(1, 3), slice(5, 12), slice(None)))
    np.testing.assert_array_equal(
        view.aggregate("max", "v", by="y")["v"].values, v[1:3, 5:12].max(axis=(0, 2))
    )
    np.testing.assert_array_equal(
        view.aggregate("count", "w")["w"].values, np.isfinite(w[1:3, 5:12]).sum()
    )
    with pytest.raises(OperatorError, match="unknown aggregate"):
        arr.aggregate("median", "v")


def _area_reference(data: np.ndarray, num: int, den: int) -> np.ndarray:
    """Mean over output cells of num/den input cells: upsample by den, then block-mean by num."""
    up = np.repeat(np.repeat(data, den, axis=0), den, axis=1)
    pad = [(0, (-n) % num) for n in up.shape]
    weights = np.pad(np.ones_like(up), pad)
    up = np.pad(up, pad)
    shape = (up.shape[0] // num, num, up.shape[1] // num, num)
    return up.reshape(shape).sum(axis=(1, 3)) / weights.reshape(shape).sum(axis=(1, 3))


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(num=st.integers(1, 5), den=st.integers(1, 3))
def test_regrid_is_the_area_weighted_mean(grid: Any, num: int, den: int) -> None:
    arr, v, _ = grid
    if num < den:
        num, den = den, num
    got = arr.regrid(
        [1, f"{num}:{den}", f"{num}:{den}"], attrs="v", box=(0, slice(None), slice(None))
    )
    expected = _area_reference(v[0].astype(np.float64), num, den)
    np.testing.assert_allclose(got["v"].values[0], expected, rtol=1e-12)


def test_regrid_ssdb_ten_to_three_and_nulls(grid: Any, db: tesseradb.Database) -> None:
    arr, v, w = grid
    got = arr.regrid([1, "10:3", "10:3"])
    assert got["v"].shape == (3, 6, 9)
    np.testing.assert_allclose(got["v"].values[2], _area_reference(v[2].astype(float), 10, 3))
    # NULL cells carry no weight: the mean of the others
    block = arr.regrid([3, 20, 30], attrs="w")["w"].values
    assert block.shape == (1, 1, 1)
    assert block[0, 0, 0] == pytest.approx(np.nanmean(w))
    out = arr.regrid([1, 2, 2], attrs="v", into="g_small")
    assert out.shape == (3, 10, 15)
    np.testing.assert_allclose(out[0, 0, 0]["v"], v[0, 0:2, 0:2].mean())
    assert db.sql("SELECT min(y), min(x) FROM g_small").fetchall() == [(50, 100)]
    with pytest.raises(OperatorError, match="at least 1"):
        arr.regrid([1, "1:2", 1])


def test_apply_expressions_and_functions(grid: Any, db: tesseradb.Database) -> None:
    arr, v, _w = grid
    got = arr.apply("sqrt(v * v + 1) + x - y", name="d")
    yy, xx = np.meshgrid(np.arange(100, 120), np.arange(200, 230), indexing="ij")
    np.testing.assert_allclose(got["d"].values, np.sqrt(v.astype(float) ** 2 + 1) + xx - yy)
    flags = arr.apply(lambda env: env["v"] > 50, name="big", into="g_big")
    np.testing.assert_array_equal(flags[:, :, :]["big"], v > 50)
    assert db.sql("SELECT count(*) FROM g_big WHERE big").fetchall() == [(int((v > 50).sum()),)]
    for bad in ("__import__('os')", "v.real", "open('x')", "v[0]"):
        with pytest.raises(OperatorError, match=r"not allowed|unknown name"):
            arr.apply(bad)


def test_overlay_later_arrays_win_and_nulls_do_not(db: tesseradb.Database) -> None:
    a = db.create_array(
        "a",
        [{"name": "x", "end": 6, "chunk": 3}],
        {"v": {"dtype": "float64", "nullable": True}},
        origin=(0,),
    )
    b = db.create_array(
        "b",
        [{"name": "x", "end": 6, "chunk": 3}],
        {"v": {"dtype": "float64", "nullable": True}},
        origin=(4,),
    )
    a[0:6] = np.array([1, 2, 3, 4, 5, 6], dtype=float)
    b[0:3] = np.array([10, np.nan, 30])
    m = db.overlay(["a", "b"], into="ab")
    assert m.shape == (10,)
    np.testing.assert_array_equal(m[0:7]["v"], [1, 2, 3, 4, 10, 6, 30])
    assert db.sql("SELECT x, v FROM ab WHERE x >= 4 AND x < 7 ORDER BY x").fetchall() == [
        (4, 10.0),
        (5, 6.0),
        (6, 30.0),
    ]
    c = db.create_array("c", [{"name": "x", "end": 6}], {"u": "int8"})
    with pytest.raises(OperatorError, match="different attributes"):
        db.overlay([a, c], into="bad")
    assert "bad" not in db.arrays()


@settings(max_examples=60, deadline=None)
@given(
    st.tuples(st.integers(1, 7), st.integers(1, 23), st.integers(1, 23)),
    st.tuples(*[st.sampled_from(["1", "2", "10:3", "7:2", "3"])] * 3),
    st.sampled_from(["int32", "uint8", "float32", "float64", "int64"]),
    st.integers(0, 2**32 - 1),
)
def test_regrid_kernel_matches_the_weights_applied_in_numpy(
    shape: tuple[int, int, int], factors: tuple[str, str, str], dtype: str, seed: int
) -> None:
    """The Rust regrid (arrays without NULL cells) against the plain weighted means."""
    import numpy as np

    from tesseradb import _core
    from tesseradb.arrays._operators import _apply_weights, _csr, _weights, parse_factor

    rng = np.random.default_rng(seed)
    values = (rng.normal(0, 1000, shape)).astype(dtype)
    weights = [_weights(n, parse_factor(f, "d")) for n, f in zip(shape, factors, strict=True)]
    got = _core.regrid_block(np.ascontiguousarray(values), [_csr(w) for w in weights])
    as_float = values.astype(np.float64)
    want = _apply_weights(as_float, weights) / _apply_weights(np.ones_like(as_float), weights)
    scale = float(np.abs(as_float).max()) or 1.0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale)


@settings(max_examples=20, deadline=None)
@given(
    st.tuples(st.integers(1, 4), st.integers(1, 9), st.integers(1, 9)),
    st.tuples(st.integers(1, 5), st.integers(1, 40), st.integers(1, 40)),
    st.tuples(*[st.sampled_from(["1", "2", "10:3", "7:2"])] * 3),
    st.sampled_from(["int32", "uint16", "float32", "int64"]),
    st.data(),
)
def test_regrid_from_stored_chunks_matches_numpy_and_answers(
    chunk: tuple[int, int, int],
    shape: tuple[int, int, int],
    factors: tuple[str, str, str],
    dtype: str,
    data: st.DataObject,
) -> None:
    """A regrid of a stored box is contracted chunk by chunk in Rust (asserted), and equals
    the weights applied in numpy to the box read back; an unwritten chunk (fill values)
    takes the plain path and is right too."""
    import tempfile

    from tesseradb import _core
    from tesseradb.arrays._operators import _apply_weights, _weights, parse_factor

    lo = [data.draw(st.integers(0, n - 1)) for n in shape]
    hi = [data.draw(st.integers(a + 1, n)) for a, n in zip(lo, shape, strict=True)]
    partial = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = rng.integers(0, 60_000, shape).astype(dtype)
    with tempfile.TemporaryDirectory() as where:
        db = tesseradb.connect(f"{where}/r.tdb")
        dims = [
            {"name": n, "end": s, "chunk": c}
            for n, s, c in zip(("t", "y", "x"), shape, chunk, strict=True)
        ]
        arr = db.create_array("r", dims, {"v": dtype})
        unwritten = partial and shape[0] > chunk[0]
        if unwritten:  # only the first row of chunks along t is written; the rest hold 0
            arr[: chunk[0]] = values[: chunk[0]]
            values[chunk[0] :] = 0
        else:
            arr[...] = values
        calls: list[int] = []
        fused = _core.regrid_chunks
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_core, "regrid_chunks", lambda *a: calls.append(1) or fused(*a))
            box = tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))
            got = arr.regrid(list(factors), box=box, attrs="v")["v"].values
        db.close()
    cells = values[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))].astype(np.float64)
    weights = [_weights(n, parse_factor(f, "d")) for n, f in zip(cells.shape, factors, strict=True)]
    want = _apply_weights(cells, weights) / _apply_weights(np.ones_like(cells), weights)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    # the shortcut answers when every chunk the box touches is stored; otherwise the box's
    # slabs (a task each) whose chunks are all stored may take it and the others are read,
    # and the answer is the same (above)
    if not unwritten or hi[0] <= chunk[0]:
        assert calls
