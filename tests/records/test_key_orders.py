"""A stream's ``indexes``: per-segment key orders searched instead of the kd-tree where
the search estimates that cheaper, checked against DuckDB over the same records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.errors import InvalidArgumentError
from tests.records.test_stream import reference

# GHCN's shape: an element code with few values, its value, a place, a time
DESCRIPTOR = {
    "fields": [
        {"name": "id", "type": "int64"},
        {"name": "e", "type": "uint32"},
        {"name": "v", "type": "int32"},
        {"name": "lat", "type": "float"},
        {"name": "lon", "type": "double"},
        {"name": "t", "type": "epoch_t"},
    ],
    "index": ["e", "lat", "lon", "v", "t"],
}
INDEXES = [["e", "v"], ["e", "lat"], ["E", "lon", "lat"]]


def records(n: int, seed: int, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    lon = rng.integers(-50, 50, n).astype(np.float64) / 4
    lon[rng.random(n) < 0.02] = np.nan
    lon[rng.random(n) < 0.02] = -0.0
    return pa.table(
        {
            "id": np.arange(start, start + n, dtype=np.int64),
            "e": rng.integers(1, 6, n).astype(np.uint32),
            "v": rng.integers(-1000, 1000, n).astype(np.int32),
            "lat": (rng.integers(-80, 80, n) / 2).astype(np.float32),
            "lon": lon,
            "t": np.sort(rng.integers(0, 10**6, n)),
        }
    )


conditions = st.one_of(
    st.builds(lambda e, v: f"e = {e} AND v > {v}", st.integers(0, 6), st.integers(-1100, 1100)),
    st.builds(
        lambda e, a, b: f"e = {e} AND v BETWEEN {a} AND {b}",
        st.integers(1, 5),
        st.integers(-1000, 1000),
        st.integers(-1000, 1000),
    ),
    st.builds(
        lambda e, a, b: f"e = {e} AND lat >= {a / 2} AND lat < {b / 2}",
        st.integers(1, 5),
        st.integers(-80, 80),
        st.integers(-80, 80),
    ),
    st.builds(
        lambda e, x, a: f"e = {e} AND lon = {x} AND lat > {a / 2}",
        st.integers(1, 5),
        st.sampled_from(["0.0", "-0.0", "'NaN'::DOUBLE", "2.25", "-12.5"]),
        st.integers(-80, 80),
    ),
    st.builds(lambda e: f"e = {e} AND lon > 0", st.integers(1, 5)),
    st.builds(lambda v: f"v < {v}", st.integers(-1000, 1000)),
    st.builds(
        lambda e, t: f"e IN ({e}, {e + 1}) AND t < {t}", st.integers(1, 5), st.integers(0, 10**6)
    ),
)
selects = st.sampled_from(
    [
        "SELECT count(*), sum(id) FROM s WHERE {}",
        "SELECT avg(v), min(lat), max(t) FROM s WHERE {}",
        "SELECT id, v FROM s WHERE {} ORDER BY id LIMIT 50",
    ]
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(0, 6000),
    seed=st.integers(0, 2**16),
    segment_bytes=st.sampled_from([4096, 1 << 16, 1 << 20]),
    queries=st.lists(st.tuples(selects, conditions), min_size=1, max_size=6),
)
def test_sql_over_an_indexed_stream_equals_duckdb_before_and_after_reopening(
    tmp_path_factory: pytest.TempPathFactory,
    n: int,
    seed: int,
    segment_bytes: int,
    queries: list[tuple[str, str]],
) -> None:
    path = tmp_path_factory.mktemp("stream") / "db"
    table = records(n, seed)
    texts = [select.format(condition) for select, condition in queries]
    with tesseradb.connect(path) as db:
        stream = db.create_stream(
            "s", DESCRIPTOR, segment_bytes=segment_bytes, max_chunk_records=2500, indexes=INDEXES
        )
        stream.ingest(table.slice(0, n // 3))
        stream.ingest(table.slice(n // 3))  # (segments of two calls, each with its orders)
        for text in texts:  # from memory, partly before the writer has run
            assert db.sql(text).fetchall() == reference(table, text), text
    with tesseradb.connect(path, read_only=True) as db:  # orders rebuilt from the files
        for text in texts:
            assert db.sql(text).fetchall() == reference(table, text), text


def test_a_pinned_and_bounded_query_goes_through_its_index(tmp_path: Path) -> None:
    table = records(40_000, 7)
    query = "SELECT count(*), sum(id) FROM s WHERE e = 3 AND v > 990"
    want = reference(table, query)
    assert want[0][0] > 0
    with tesseradb.connect(tmp_path / "db") as db:
        indexed = db.create_stream("s", DESCRIPTOR, indexes=INDEXES)
        indexed.ingest(table)
        assert db.sql(query).fetchall() == want
        assert indexed.searches.get("index (e, v)", 0) >= 1, indexed.searches
        notes = [n for r in db.explain(query).relations for n in r.notes]
        assert any("auto iterator, indexes (e, v), (e, lat), (E, lon, lat)" in n for n in notes)
        assert "kdtree" not in indexed.searches and "sequential" not in indexed.searches
        # the MDDS iterators named explicitly keep their meaning: no index
        plain = db.create_stream("p", DESCRIPTOR, indexes=INDEXES, iterator="kdtree")
        plain.ingest(table)
        assert db.sql(query.replace("FROM s", "FROM p")).fetchall() == want
        assert set(plain.searches) == {"kdtree"}
        db.stream("s").flush()
    with tesseradb.connect(tmp_path / "db") as db:
        stream = db.stream("s")
        assert stream.options.indexes == (("e", "v"), ("e", "lat"), ("E", "lon", "lat"))
        assert db.sql(query).fetchall() == want
        assert stream.searches.get("index (e, v)", 0) >= 1, stream.searches


@pytest.mark.parametrize(
    ("indexes", "match"),
    [
        ([["t", "id"]], r"'id' is not one of the indexing fields \(e, lat, lon, v, t\)"),
        ([["nope"]], "'nope' is not one of the indexing fields"),
        ([["e", "v", "E"]], r"stream index \['e', 'v', 'E'\] names 'E' twice"),
        ([["e"], ["e"]], r"stream index \['e'\] is given twice"),
        ([[]], "must be a list of lists of field names"),
        (["e"], "must be a list of lists of field names"),
        ("e", "must be a list of lists of field names"),
        ([["e", 3]], "must be a list of lists of field names"),
    ],
)
def test_bad_indexes_are_clear_errors_and_create_nothing(
    tmp_path: Path, indexes: object, match: str
) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        with pytest.raises(InvalidArgumentError, match=match):
            db.create_stream("s", DESCRIPTOR, indexes=indexes)
        assert db.streams() == []


# --- ORDER BY ... LIMIT read from the key orders (SegmentStore.top) -----------------------
top_conditions = st.one_of(
    st.just(""),
    st.builds(lambda e: f"WHERE e = {e}", st.integers(0, 6)),
    st.builds(
        lambda e, v: f"WHERE e = {e} AND v > {v}", st.integers(1, 5), st.integers(-1100, 1100)
    ),
    st.builds(
        lambda e, a: f"WHERE e = {e} AND lat >= {a / 2}", st.integers(1, 5), st.integers(-80, 80)
    ),
    st.builds(
        lambda e, x: f"WHERE e = {e} AND lon = {x}",
        st.integers(1, 5),
        st.sampled_from(["0.0", "-0.0", "'NaN'::DOUBLE", "2.25"]),
    ),
    st.builds(lambda e, i: f"WHERE e = {e} AND id % 3 = {i}", st.integers(1, 5), st.integers(0, 2)),
    st.builds(lambda e: f"WHERE e IN ({e}, {e + 1})", st.integers(1, 5)),
)


@st.composite
def top_queries(draw: st.DrawFn) -> str:
    """``ORDER BY`` a field ``LIMIT k``, with a last key that settles every tie, so that
    the answer is one list of rows: rows left out at the threshold would change it."""
    order = draw(st.sampled_from(["v", "lat", "lon", "e", "t", "id"]))
    direction = draw(st.sampled_from(["", " DESC", " ASC"]))
    where = draw(top_conditions)
    limit = draw(st.integers(1, 40))
    offset = draw(st.sampled_from(["", " OFFSET 3"]))
    if draw(st.booleans()):
        other = "e" if order != "e" else "v"
        head = f"SELECT DISTINCT {order} AS o, {other} FROM s"
        keys = f"o{direction}, {other}"
    else:
        head = f"SELECT {order}, id, v FROM s"
        keys = f"{order}{direction}, id"
    return f"{head} {where} ORDER BY {keys} LIMIT {limit}{offset}"


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(0, 5000),
    seed=st.integers(0, 2**16),
    segment_bytes=st.sampled_from([4096, 1 << 16]),
    texts=st.lists(top_queries(), min_size=1, max_size=6),
)
def test_order_by_limit_over_an_indexed_stream_equals_duckdb(
    tmp_path_factory: pytest.TempPathFactory,
    n: int,
    seed: int,
    segment_bytes: int,
    texts: list[str],
) -> None:
    path = tmp_path_factory.mktemp("stream") / "db"
    table = records(n, seed)
    with tesseradb.connect(path) as db:
        stream = db.create_stream(
            "s", DESCRIPTOR, segment_bytes=segment_bytes, max_chunk_records=2000, indexes=INDEXES
        )
        stream.ingest(table.slice(0, n // 2))
        stream.ingest(table.slice(n // 2))
        for text in texts:
            _assert_answers_as_duckdb(db, table, text)
    with tesseradb.connect(path, read_only=True) as db:
        for text in texts:
            _assert_answers_as_duckdb(db, table, text)


def _assert_answers_as_duckdb(db: tesseradb.Database, table: pa.Table, text: str) -> None:
    """Values and Arrow types as DuckDB's over a native table of the same records, whether
    the engine finished the statement (``shortcut == "top"``) or DuckDB did."""
    import duckdb

    got = db.sql(text).arrow()
    con = duckdb.connect()
    con.register("source", table)
    con.execute("CREATE TABLE s AS SELECT * FROM source")
    want = con.sql(text).to_arrow_table()
    con.close()
    assert got.schema == want.schema, text
    assert _nan_as_text(got.to_pylist()) == _nan_as_text(want.to_pylist()), text


def _nan_as_text(rows: list[dict[str, object]]) -> list[list[object]]:
    """Rows comparable with ``==`` where they hold NaN (NaN != NaN), and -0.0 told
    from 0.0 (which ``==`` takes as equal)."""
    return [
        [
            "NaN" if v != v else ("-0.0" if isinstance(v, float) and str(v) == "-0.0" else v)
            for v in row.values()
        ]
        for row in rows
    ]


def test_order_by_limit_reads_the_first_records_of_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GHCN's Q10 shape takes the top path (the rows handed to DuckDB are those of the
    three highest values, not every match); a residual condition, or an iterator that
    keeps MDDS's meaning, leaves the statement to the scan."""
    from tesseradb.records._segments import SegmentStore

    given_rows: list[int | None] = []
    top = SegmentStore.top

    def spy(self: SegmentStore, *args: object) -> pa.Table | None:
        rows = top(self, *args)  # type: ignore[arg-type]
        given_rows.append(None if rows is None else rows.num_rows)
        return rows

    monkeypatch.setattr(SegmentStore, "top", spy)
    table = records(40_000, 11)
    q10 = "SELECT DISTINCT e, v FROM s WHERE e = 3 ORDER BY v DESC LIMIT 3"
    with tesseradb.connect(tmp_path / "db") as db:
        indexed = db.create_stream("s", DESCRIPTOR, indexes=INDEXES, segment_bytes=1 << 16)
        indexed.ingest(table)
        assert indexed.num_segments > 4
        answer = db.sql(q10)
        assert answer.fetchall() == reference(table, q10)
        assert answer.shortcut == "top"  # (finished by the engine: no DuckDB statement)
        (rows,) = given_rows
        assert rows is not None and 3 <= rows < 100  # (8,000 records have e = 3)
        assert indexed.searches.get("index (e, v)", 0) >= 1
        notes = [n for r in db.explain(q10).relations for n in r.notes]
        assert any(n.startswith("ORDER BY v LIMIT 3: only the first rows") for n in notes), notes
        # a condition the WHERE does not settle exactly: the walk cannot count rows, the
        # scan runs
        residual = "SELECT id, v FROM s WHERE e = 3 AND id % 2 = 0 ORDER BY v DESC, id LIMIT 5"
        assert db.sql(residual).fetchall() == reference(table, residual)
        assert given_rows == [rows]
        # one the predicate holds but the box does not (an IN-set): the same
        in_set = "SELECT id, v FROM s WHERE e IN (3, 4) ORDER BY v DESC, id LIMIT 5"
        assert db.sql(in_set).fetchall() == reference(table, in_set)
        assert given_rows[-1] is None
        # the iterators that keep MDDS's meaning never read an index
        plain = db.create_stream("p", DESCRIPTOR, indexes=INDEXES, iterator="kdtree")
        plain.ingest(table)
        text = q10.replace("FROM s", "FROM p")
        assert db.sql(text).fetchall() == reference(table, q10)
        assert given_rows[-1] is None and "index (e, v)" not in plain.searches
        calls = len(given_rows)
        # no order sorted on lat once e is left open: the scan runs
        text = "SELECT lat, id FROM s ORDER BY lat DESC, id LIMIT 4"
        assert db.sql(text).fetchall() == reference(table, text)
        assert len(given_rows) == calls + 1 and given_rows[-1] is None
        # NaN among the first rows of a float key: DuckDB finishes the statement
        nan = "SELECT lon, id FROM s WHERE e = 3 ORDER BY lon DESC, id LIMIT 3"  # (NaN first)
        answer = db.sql(nan)
        assert _nan_as_text(answer.arrow().to_pylist()) == _nan_as_text(
            [{"lon": lon, "id": i} for lon, i in reference(table, nan)]
        )
        assert answer.shortcut is None and (given_rows[-1] or 0) >= 3  # (every NaN: ties)
