"""The record engine's Rust kernels against numpy: packed kd-trees and the segment R*-tree."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesseradb import _core

VALUES = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.0, -1.0, 2.5, 1e300, -1e300]
values = st.one_of(st.sampled_from(VALUES), st.integers(-5, 5).map(float))
lower = st.one_of(st.just(-math.inf), values.filter(lambda v: not math.isnan(v)))
upper = st.one_of(st.just(math.nan), values.filter(lambda v: not math.isnan(v)))


def order_key(x: float) -> tuple[int, float]:
    """DuckDB's order: -0.0 is 0.0, NaN above every other value."""
    return (1, 0.0) if math.isnan(x) else (0, x + 0.0)


def reference(coords: np.ndarray, lo: list[float], hi: list[float]) -> list[int]:
    return [
        i
        for i, row in enumerate(coords.tolist())
        if all(order_key(lo[d]) <= order_key(v) <= order_key(hi[d]) for d, v in enumerate(row))
    ]


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, list[float], list[float], int]:
    dims = draw(st.integers(1, 9))
    n = draw(st.integers(0, 120))
    coords = np.array(
        draw(st.lists(st.lists(values, min_size=dims, max_size=dims), min_size=n, max_size=n)),
        dtype=np.float64,
    ).reshape(n, dims)
    lo = draw(st.lists(lower, min_size=dims, max_size=dims))
    hi = draw(st.lists(upper, min_size=dims, max_size=dims))
    return coords, lo, hi, draw(st.integers(0, 20))


@settings(max_examples=300, deadline=None)
@given(problems())
def test_kdtree_search_and_scan_equal_numpy(
    problem: tuple[np.ndarray, list[float], list[float], int],
) -> None:
    coords, lo, hi, first = problem
    tree = _core.KdTree(coords, first)
    records, left, right = tree.nodes()
    assert sorted(records.tolist()) == list(range(len(coords)))  # every record is a node once
    expected = reference(coords, lo, hi)
    assert tree.search(lo, hi).tolist() == expected
    assert tree.search(lo, hi, sequential=True).tolist() == expected
    rebuilt = _core.KdTree.from_parts(coords, records, left, right, first, [[0]])
    assert rebuilt.search(lo, hi).tolist() == expected and len(rebuilt) == len(coords)
    fences = -(-len(coords) // 64)  # (one key every 64 entries)
    assert rebuilt.orders == [[0]] and rebuilt.orders_nbytes == 4 * len(coords) + 8 * fences


@settings(max_examples=100, deadline=None)
@given(
    st.lists(problems(), min_size=1, max_size=5), st.sampled_from(["kdtree", "sequential", "auto"])
)
def test_many_segments_are_searched_and_gathered_together(
    segments: list[tuple[np.ndarray, list[float], list[float], int]], iterator: str
) -> None:
    dims = segments[0][0].shape[1]
    same = [p for p in segments if p[0].shape[1] == dims]
    lo, hi = same[0][1], same[0][2]
    orders = [[d] for d in range(dims)] + [list(range(dims))[::-1]]
    trees = [_core.KdTree(coords, first, orders) for coords, _, _, first in same]
    # probe each dimension for a value some records hold, and for one they may not
    probes = [(d, float(same[0][0][0, d])) for d in range(dims)] if len(same[0][0]) else []
    probes += [(d, 0.5) for d in range(dims)]
    which, rows, held, ways = _core.search_segments(trees, lo, hi, iterator, probes)
    # (key orders are weighed only in trees of more than 512 records: test_key_orders.py)
    assert ways == [{"kdtree": -1, "sequential": -2}.get(iterator, w) for w in ways]
    expected = [(k, r) for k, (coords, *_) in enumerate(same) for r in reference(coords, lo, hi)]
    assert list(zip(which.tolist(), rows.tolist(), strict=True)) == expected
    found = [same[k][0][r] for k, r in expected]
    # values compare as DuckDB's: NaN equals NaN, -0.0 equals 0.0
    assert held == [
        any(row[d] == v or (np.isnan(row[d]) and np.isnan(v)) for row in found) for d, v in probes
    ]
    # gathering the first key column of each segment by (segment, row) gives the same values
    columns = [np.ascontiguousarray(c[:, 0]).view(np.uint8) for c, *_ in same]
    values = _core.gather(columns, 8, which, rows).view(np.float64)
    wanted = [same[k][0][r, 0] for k, r in expected]
    np.testing.assert_array_equal(values, np.array(wanted, dtype=np.float64))


@settings(deadline=None)
@given(st.lists(st.text(max_size=6)), st.integers(1, 30))
def test_pad_strings_matches_numpy_fixed_width_bytes(texts: list[str], width: int) -> None:
    import pyarrow as pa

    column = pa.array(texts, pa.large_string())
    _, offsets, data = column.buffers()
    offsets_array = np.frombuffer(offsets, dtype=np.int64, count=len(texts) + 1)
    data_array = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    encoded = [t.encode() for t in texts]
    if any(len(e) > width for e in encoded):
        with pytest.raises(ValueError, match="longer than"):
            _core.pad_strings(offsets_array, data_array, width)
        return
    padded = _core.pad_strings(offsets_array, data_array, width)
    assert padded.tobytes() == np.array(encoded, dtype=f"S{width}").tobytes()


NUMERIC = ["<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8", "<f4", "<f8"]


@st.composite
def packed_records(draw: st.DrawFn) -> tuple[np.dtype, bytes]:
    """A packed record layout (numbers and NUL-padded text) and a buffer of its records."""
    kinds = draw(st.lists(st.one_of(st.sampled_from(NUMERIC), st.integers(1, 5)), max_size=6))
    dtype = np.dtype(
        [(f"f{i}", k if isinstance(k, str) else f"S{k}") for i, k in enumerate(kinds)]
        or [("x", "u1")]
    )
    n = draw(st.integers(0, 40))
    # mostly text-like bytes (ASCII, NULs, UTF-8 lead and continuation bytes), some random
    byte = st.one_of(st.sampled_from([0, 0, 65, 97, 0xC3, 0xA9, 0xFF]), st.integers(0, 255))
    return dtype, bytes(
        draw(st.lists(byte, min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
    )


@settings(max_examples=300, deadline=None)
@given(packed_records())
def test_unpack_records_matches_numpy_structured_reading(layout: tuple[np.dtype, bytes]) -> None:
    dtype, buffer = layout
    records = np.frombuffer(buffer, dtype=dtype)
    fields = [(dtype[name].itemsize, dtype[name].kind == "S") for name in dtype.names]
    bad = [
        (r, k)
        for r in range(len(records))
        for k, name in enumerate(dtype.names)
        if dtype[name].kind == "S" and not _utf8(records[name][r])
    ]
    columns, not_text = _core.unpack_records(np.frombuffer(buffer, np.uint8), fields)
    if bad:
        assert (columns, not_text) == ([], bad[0])
        return
    assert not_text is None
    for name, column in zip(dtype.names, columns, strict=True):
        if dtype[name].kind == "S":  # numpy's S drops trailing NULs too
            offsets, data = column
            texts = [bytes(data[offsets[i] : offsets[i + 1]]) for i in range(len(records))]
            assert texts == records[name].tolist()
        else:
            expected = records[name].astype(dtype[name].newbyteorder("="))
            assert column.view(expected.dtype).tobytes() == expected.tobytes()


def _utf8(value: bytes) -> bool:
    return value.decode("utf-8", "replace").encode() == value  # round-trips only if valid


@settings(max_examples=100, deadline=None)
@given(problems(), st.integers(1, 6), st.data())
def test_build_segments_groups_rows_and_builds_each_segment(
    problem: tuple[np.ndarray, list[float], list[float], int], count: int, data: st.DataObject
) -> None:
    coords, lo, hi, first = problem
    labels = np.array(
        data.draw(st.lists(st.integers(0, count - 1), min_size=len(coords), max_size=len(coords))),
        dtype=np.uint32,
    )
    initial = [(first + s) % coords.shape[1] for s in range(count)]
    order, bounds, built = _core.build_segments(coords, labels, initial)
    assert sorted(order.tolist()) == list(range(len(coords))) and len(built) == count
    for s, (tree, seg_lo, seg_hi) in enumerate(built):
        rows = order[bounds[s] : bounds[s + 1]]
        assert rows.tolist() == np.flatnonzero(labels == s).tolist()  # in row order
        own = coords[rows]
        assert tree.initial_dimension == initial[s]
        assert tree.search(lo, hi).tolist() == reference(own, lo, hi)
        for d in range(coords.shape[1]):
            keys = sorted(order_key(v) for v in own[:, d])
            if not keys:
                continue
            assert order_key(seg_hi[d]) == keys[-1]
            low = [k for k in keys if k[0] == 0]
            assert math.isnan(seg_lo[d]) if not low else order_key(seg_lo[d]) == low[0]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 9), st.lists(st.tuples(values, values), min_size=1, max_size=400), st.data())
def test_segment_tree_finds_every_overlapping_box(
    dims: int, pairs: list[tuple[float, float]], data: st.DataObject
) -> None:
    tree = _core.SegmentTree(dims)
    boxes = {}
    for i in range(0, len(pairs) - dims + 1, dims):
        corners = pairs[i : i + dims]
        lo = [min(a, b, key=order_key) for a, b in corners]
        hi = [max(a, b, key=order_key) for a, b in corners]
        tree.insert(i, lo, hi)
        boxes[i] = (lo, hi)
    assert len(tree) == len(boxes) and tree.dims == dims
    qlo = data.draw(st.lists(lower, min_size=dims, max_size=dims))
    qhi = data.draw(st.lists(upper, min_size=dims, max_size=dims))
    found = set(tree.query(qlo, qhi).tolist())
    for i, (lo, hi) in boxes.items():
        meets = all(
            order_key(lo[d]) <= order_key(qhi[d]) and order_key(qlo[d]) <= order_key(hi[d])
            for d in range(dims)
        )
        if meets:
            assert i in found
    if boxes:
        some = next(iter(boxes))
        assert tree.remove(some, *boxes[some]) and len(tree) == len(boxes) - 1


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.text(max_size=6), max_size=12), st.integers(0, 3)),
        min_size=1,
        max_size=4,
    ),
    st.data(),
)
def test_strings_are_gathered_as_arrow_takes_them(
    parts: list[tuple[list[str], int]], data: st.DataObject
) -> None:
    """``gather_strings`` against Arrow's take, over columns sliced (an array offset) and
    holding empty and non-ASCII strings."""
    import pyarrow as pa

    from tesseradb.records._segments import Segment

    columns = [pa.array(["x"] * skip + texts, pa.string()).slice(skip) for texts, skip in parts]
    picks = sorted(
        data.draw(
            st.lists(
                st.tuples(st.integers(0, len(columns) - 1), st.integers(0, 11)).filter(
                    lambda p: p[1] < len(columns[p[0]])
                ),
                max_size=30,
            )
        )
    )
    which = np.array([s for s, _ in picks], dtype=np.uint32)
    rows = np.array([r for _, r in picks], dtype=np.uint32)
    segments = [
        Segment(i, pa.record_batch([c], names=["s"]), None, [], [])  # type: ignore[arg-type]
        for i, c in enumerate(columns)
    ]
    found = _core.gather_strings([s.string_views("s") for s in segments], which, rows)
    assert found is not None
    offsets, text = found
    gathered = pa.StringArray.from_buffers(len(rows), pa.py_buffer(offsets), pa.py_buffer(text))
    assert gathered.to_pylist() == [columns[s][r].as_py() for s, r in picks]
    with pytest.raises(ValueError, match="outside string column"):
        _core.gather_strings(
            [s.string_views("s") for s in segments],
            np.array([0], np.uint32),
            np.array([len(columns[0])], np.uint32),
        )


def test_kernels_run_in_parallel_threads() -> None:
    rng = np.random.default_rng(3)
    coords = rng.normal(size=(200_000, 3))
    tree = _core.KdTree(coords)
    box = ([-0.5] * 3, [0.5] * 3)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: tree.search(*box), range(8)))
    expected = np.flatnonzero(((coords >= -0.5) & (coords <= 0.5)).all(axis=1))
    assert all(np.array_equal(r, expected) for r in results)


def test_bad_input_is_refused_clearly() -> None:
    coords = np.zeros((4, 2))
    tree = _core.KdTree(coords)
    records, left, right = tree.nodes()
    with pytest.raises(ValueError, match="2 lower and upper bounds"):
        tree.search([0.0], [1.0])
    with pytest.raises(
        ValueError, match="C-contiguous"
    ):  # Fortran order would read rows as columns
        _core.KdTree(np.asfortranarray(np.arange(8.0).reshape(4, 2)))
    with pytest.raises(ValueError, match="not a tree of these rows"):
        _core.KdTree.from_parts(coords, records, left + 9, right, 0)
    with pytest.raises(ValueError, match="one entry per row"):
        _core.KdTree.from_parts(np.zeros((5, 2)), records, left, right, 0)
    with pytest.raises(ValueError, match="dimensions"):
        _core.search_segments([tree], [0.0], [1.0])
    with pytest.raises(ValueError, match="iterator must be"):
        _core.search_segments([tree], [0.0, 0.0], [1.0, 1.0], "zigzag")
    with pytest.raises(ValueError, match="outside column"):
        _core.gather([np.zeros(8, np.uint8)], 8, np.zeros(1, np.uint32), np.ones(1, np.uint32))
    with pytest.raises(ValueError, match="1 to 9 dimensions"):
        _core.SegmentTree(10)
    with pytest.raises(ValueError, match="3 lower and upper bounds"):
        _core.SegmentTree(3).insert(1, [0.0], [1.0])
