"""The in-memory segment engine: index answers equal a linear scan, for both iterators."""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesseradb.records import DescriptorError, RecordDescriptor
from tesseradb.records._segments import SegmentStore, _boxes_within, _boxes_within_numpy
from tesseradb.sql.predicate import ColumnDomain, Interval, Predicate, RangeSet

FLOATS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.5, -2.0, 3e38]
INTS = [0, 1, -1, 7, 2**62, -(2**62)]


@st.composite
def streams(draw: st.DrawFn) -> tuple[RecordDescriptor, pa.Table]:
    kinds = draw(
        st.lists(
            st.sampled_from(["int64", "int32", "float", "double", "epoch_t"]),
            min_size=1,
            max_size=4,
        )
    )
    fields = [{"name": "rid", "type": "int64"}, {"name": "tag", "type": "char", "array_len": 3}]
    fields += [{"name": f"d{i}", "type": k} for i, k in enumerate(kinds)]
    index = [f"d{i}" for i in range(len(kinds))]
    descriptor = RecordDescriptor.parse({"fields": fields, "index": draw(st.permutations(index))})
    n = draw(st.integers(0, 300))
    columns: dict[str, Any] = {
        "rid": np.arange(n),
        "tag": [["a", "bb", ""][i % 3] for i in range(n)],
    }
    for i, kind in enumerate(kinds):
        if kind in ("float", "double"):
            pool = st.one_of(st.sampled_from(FLOATS), st.integers(-4, 4).map(float))
            values = draw(st.lists(pool, min_size=n, max_size=n))
            columns[f"d{i}"] = pa.array(values, pa.float32() if kind == "float" else pa.float64())
        else:
            pool = st.one_of(
                st.sampled_from(INTS if kind != "int32" else [0, 1, -1, 2**31 - 1]),
                st.integers(-4, 4),
            )
            columns[f"d{i}"] = pa.array(
                draw(st.lists(pool, min_size=n, max_size=n)),
                pa.int32() if kind == "int32" else pa.int64(),
            )
    return descriptor, pa.table(columns)


@st.composite
def predicates(draw: st.DrawFn, descriptor: RecordDescriptor) -> Predicate:
    pred = Predicate()
    bound = st.one_of(st.none(), st.sampled_from([-4, -1, 0, 1, 2, 4, 2**62, math.inf, -math.inf]))
    for name in draw(st.lists(st.sampled_from([*descriptor.index, "rid"]), max_size=3)):
        if draw(st.booleans()):
            iv = Interval(draw(bound), draw(bound), draw(st.booleans()), draw(st.booleans()))
            pred = pred.and_(Predicate.on(name, ColumnDomain.values(RangeSet.of([iv]))))
        else:
            keys = draw(st.lists(st.integers(-4, 4), min_size=1, max_size=100))
            pred = pred.and_(Predicate.isin(name, keys))
    return pred


def plain_answer(table: pa.Table, pred: Predicate) -> list[int]:
    rows = table.to_pylist()
    return sorted(r["rid"] for r in rows if pred.matches(r))


@settings(max_examples=100, deadline=None)
@given(stream=streams(), data=st.data())
def test_index_answers_equal_a_linear_scan(
    stream: tuple[RecordDescriptor, pa.Table], data: st.DataObject
) -> None:
    descriptor, table = stream
    chunk, size = data.draw(st.integers(8, 120)), data.draw(st.integers(400, 4000))
    scheme = data.draw(st.sampled_from(["random", "kdtree"]))
    stores = [
        SegmentStore(descriptor, chunk, size, iterator=it, seed=1, scheme=scheme)
        for it in ("kdtree", "sequential", "auto")
    ]
    cut = data.draw(st.integers(0, table.num_rows))
    for store in stores:
        store.ingest(table.slice(0, cut))
        store.ingest(table.slice(cut))  # two ingest calls, one stream
        assert store.num_records == table.num_rows
    for _ in range(3):
        pred = data.draw(predicates(descriptor))
        wanted = plain_answer(table, pred)
        kd, seq, auto = (
            sorted((r["rid"], r) for b in store.scan(None, pred) for r in b.to_pylist())
            for store in stores
        )
        # the kd-tree finds what looking at every record finds, and so does the choice
        assert [r for r, _ in kd] == [r for r, _ in seq] == [r for r, _ in auto]
        # a superset is allowed (a bound a column cannot compare with restricts nothing);
        # the reference filter on what came back is exactly the answer
        assert sorted(r for r, row in kd if pred.matches(row)) == wanted, str(pred)


@settings(max_examples=25, deadline=None)
@given(
    lo=st.integers(0, 9), width=st.integers(0, 9), x_lo=st.floats(-1, 1), x_width=st.floats(0, 2)
)
def test_auto_iterator_answers_equal_numpy_on_large_segments(
    lo: int, width: int, x_lo: float, x_width: float
) -> None:
    """Segments big enough (thousands of records) that ``auto`` looks at every
    record for wide boxes and descends the tree for narrow ones: both equal numpy."""
    descriptor = RecordDescriptor.parse(
        {
            "fields": [
                {"name": "e", "type": "int32"},
                {"name": "x", "type": "double"},
                {"name": "y", "type": "double"},
            ],
            "index": ["e", "x", "y"],
        }
    )
    rng = np.random.default_rng(7)
    n = 20_000
    table = pa.table(
        {
            "e": rng.integers(0, 10, n).astype(np.int32),
            "x": rng.uniform(-1, 1, n),
            "y": rng.uniform(-1, 1, n),
        }
    )
    store = SegmentStore(descriptor, n, 1 << 20, iterator="auto", scheme="kdtree")
    store.ingest(table)
    pred = Predicate.on(
        "e", ColumnDomain.values(RangeSet.of([Interval(lo, lo + width, True, True)]))
    ).and_(
        Predicate.on(
            "x", ColumnDomain.values(RangeSet.of([Interval(x_lo, x_lo + x_width, True, True)]))
        )
    )
    found = sorted((r["e"], r["x"], r["y"]) for b in store.scan(None, pred) for r in b.to_pylist())
    e, x, y = (table.column(c).to_numpy() for c in "exy")
    hit = (e >= lo) & (e <= lo + width) & (x >= x_lo) & (x <= x_lo + x_width)
    assert found == sorted(zip(e[hit].tolist(), x[hit].tolist(), y[hit].tolist(), strict=True))


def test_segments_are_pruned_by_the_r_tree() -> None:
    descriptor = RecordDescriptor.parse(
        {
            "fields": [{"name": "t", "type": "epoch_t"}, {"name": "v", "type": "double"}],
            "index": ["t"],
        }
    )
    store = SegmentStore(descriptor, max_chunk_records=1000, segment_bytes=16_000)
    for hour in range(24):  # time-ordered chunks, as a sensor sends them
        t = np.arange(hour * 1000, (hour + 1) * 1000)
        store.ingest(pa.table({"t": t, "v": t * 0.5}))
    pred = Predicate.between("t", 5_000, 5_999)
    inspected = store.segment_ids(store.query_box(pred))
    assert len(inspected) < store.num_segments / 10
    assert sum(b.num_rows for b in store.scan(None, pred)) == 1000


def test_kdtree_scheme_makes_segments_that_overlap_less() -> None:
    descriptor = RecordDescriptor.parse(
        {
            "fields": [{"name": "x", "type": "double"}, {"name": "y", "type": "double"}],
            "index": ["x", "y"],
        }
    )
    rng = np.random.default_rng(11)
    table = pa.table({"x": rng.uniform(0, 100, 20_000), "y": rng.uniform(0, 100, 20_000)})

    def segments_met(store: SegmentStore) -> float:
        # how many segments a small query box meets, on average
        boxes = [
            store.segment_ids(
                store.query_box(
                    Predicate.between("x", a, a + 1).and_(Predicate.between("y", a, a + 1))
                )
            )
            for a in range(0, 100, 7)
        ]
        return sum(len(b) for b in boxes) / len(boxes)

    random_store = SegmentStore(descriptor, 10_000, 16_000, scheme="random", seed=1)
    kd_store = SegmentStore(descriptor, 10_000, 16_000, scheme="kdtree", overpacking=1.0)
    random_store.ingest(table)
    kd_store.ingest(table)
    assert segments_met(kd_store) < segments_met(random_store) / 5
    assert random_store.num_records == kd_store.num_records == 20_000
    with pytest.raises(ValueError, match="scheme"):
        SegmentStore(descriptor, scheme="zorder")


def test_bad_records_are_refused_and_nothing_is_kept() -> None:
    descriptor = RecordDescriptor.parse(
        {
            "fields": [
                {"name": "x", "type": "int32"},
                {"name": "s", "type": "char", "array_len": 2},
            ],
            "index": ["x"],
        }
    )
    store = SegmentStore(descriptor)
    with pytest.raises(DescriptorError, match="no column 's'"):
        store.ingest(pa.table({"x": [1]}))
    with pytest.raises(DescriptorError, match="'x' has a NULL at row 1"):
        store.ingest(pa.table({"x": [1, None], "s": ["a", "b"]}))
    with pytest.raises(DescriptorError, match="'s' at row 1 is longer than its array_len of 2"):
        store.ingest(pa.table({"x": [1, 2], "s": ["ab", "abc"]}))
    with pytest.raises(DescriptorError, match="does not fit int32"):
        store.ingest(pa.table({"x": [2**40], "s": ["a"]}))
    with pytest.raises(DescriptorError, match="pyarrow Table"):
        store.ingest([1, 2])
    assert store.num_records == 0 and store.num_segments == 0


_TEXT_PIECES = st.lists(
    st.tuples(
        st.lists(st.text(alphabet="ab\x00\u00e9", max_size=6), max_size=8),
        st.integers(0, 8),
        st.integers(0, 8),
    ),
    max_size=4,
)


@given(pieces=_TEXT_PIECES, limit=st.integers(0, 6), large=st.booleans())
@settings(max_examples=300, deadline=None)
def test_text_checks_read_the_buffers_as_arrow_reads_the_rows(
    pieces: list[tuple[list[str], int, int]], limit: int, large: bool
) -> None:
    """The ingest checks for NUL characters and over-long text look at the string
    buffers directly (sliced pieces included); they name the same first row as
    Arrow's row-by-row functions."""
    import pyarrow.compute as pc

    from tesseradb.records._conform import _first_too_long, _first_with_nul

    type_ = pa.large_string() if large else pa.string()
    arrays = []
    for values, start, length in pieces:
        start = min(start, len(values))
        arrays.append(pa.array(values, type_).slice(start, length))
    column = pa.chunked_array(arrays, type_)
    has_nul = pc.match_substring(column, "\x00")
    expected_nul = pc.index(has_nul, True).as_py() if pc.any(has_nul).as_py() else None
    assert _first_with_nul(column) == expected_nul
    too_long = pc.greater(pc.binary_length(column), limit)
    expected_long = pc.index(too_long, True).as_py() if pc.any(too_long).as_py() else None
    assert _first_too_long(column, limit) == expected_long


def test_queries_during_ingest_see_whole_segments() -> None:
    descriptor = RecordDescriptor.parse(
        {
            "fields": [{"name": "k", "type": "int64"}, {"name": "batch", "type": "int64"}],
            "index": ["k"],
        }
    )
    store = SegmentStore(descriptor, max_chunk_records=500, segment_bytes=4000)
    stop = threading.Event()
    errors: list[str] = []

    def feed(worker: int) -> None:
        for b in range(40):
            store.ingest(pa.table({"k": np.arange(500), "batch": np.full(500, worker * 100 + b)}))

    def query() -> None:
        while not stop.is_set():
            counts: dict[int, int] = {}
            for batch in store.scan(None, None):
                for b in batch.column("batch").to_pylist():
                    counts[b] = counts.get(b, 0) + 1
            if any(c != 500 for c in counts.values()):
                errors.append(f"a partial ingest was visible: {counts}")

    readers = [threading.Thread(target=query) for _ in range(2)]
    writers = [threading.Thread(target=feed, args=(w,)) for w in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors
    assert store.num_records == 2 * 40 * 500


def test_numpy_structured_arrays_and_packed_binary_records() -> None:
    descriptor = RecordDescriptor.parse(
        {
            "fields": [
                {"name": "id", "type": "char", "array_len": 4},
                {"name": "t", "type": "epoch_t"},
                {"name": "x", "type": "float"},
                {"name": "n", "type": "uint16"},
            ],
            "index": ["t", "x"],
        }
    )
    records = np.zeros(5, dtype=descriptor.numpy_dtype)
    records["id"] = [b"ab", b"cdef", b"", b"g", b"hi"]
    records["t"] = np.arange(5) + 1_700_000_000
    records["x"] = [0.5, -1.0, np.nan, 2.0, 3.5]
    records["n"] = [1, 2, 3, 4, 65535]
    assert descriptor.record_size == 4 + 8 + 4 + 2 == records.itemsize  # packed, as on the wire
    for source in (
        records,
        records.tobytes(),
        bytearray(records.tobytes()),
        memoryview(records.tobytes()),
    ):
        store = SegmentStore(descriptor)
        assert sum(s.num_records for s in store.ingest(source)) == 5
        rows = sorted(
            (
                r
                for b in store.scan(None, Predicate.between("t", 1_700_000_001, 1_700_000_004))
                for r in b.to_pylist()
            ),
            key=lambda r: r["t"],
        )
        assert [(r["id"], r["n"]) for r in rows] == [("cdef", 2), ("", 3), ("g", 4), ("hi", 65535)]
    store = SegmentStore(descriptor)
    with pytest.raises(
        DescriptorError, match="91 bytes is not whole records: each record is 18 bytes"
    ):
        store.ingest(records.tobytes() + b"\0")
    bad = records.copy()
    bad["id"][2] = b"\xff\xfe"
    with pytest.raises(DescriptorError, match="record 2: char field 'id' is not UTF-8"):
        store.ingest(bad.tobytes())
    with pytest.raises(DescriptorError, match="no field 'n'"):
        store.ingest(np.zeros(2, dtype=[("id", "S4"), ("t", "<i8"), ("x", "<f4")]))
    assert store.num_records == 0


BOUNDS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.5, -2.0]


@settings(max_examples=200, deadline=None)
@given(
    dims=st.integers(1, 4),
    data=st.data(),
)
def test_boxes_within_in_python_equals_numpy(dims: int, data: st.DataObject) -> None:
    from types import SimpleNamespace

    box = st.lists(st.sampled_from(BOUNDS), min_size=dims, max_size=dims)
    segments = [
        SimpleNamespace(lo=data.draw(box), hi=data.draw(box))
        for _ in range(data.draw(st.integers(1, 8)))
    ]
    lo, hi = data.draw(box), data.draw(box)
    got = _boxes_within(segments, lo, hi)  # type: ignore[arg-type]
    assert got == _boxes_within_numpy(segments, lo, hi).tolist()  # type: ignore[arg-type]
    # and by definition: each bound admits the segment's extreme (NaN above +inf)
    for seg, inside in zip(segments, got, strict=True):

        def order(v: float) -> tuple[int, float]:
            return (1, 0.0) if math.isnan(v) else (0, v)

        want = all(
            order(q_lo) <= order(s_lo) and order(s_hi) <= order(q_hi)
            for q_lo, q_hi, s_lo, s_hi in zip(lo, hi, seg.lo, seg.hi, strict=True)
        )
        assert inside == want
