"""Record streams in a database: SQL answers, persistence, reopening, CSV, faults, concurrency."""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.errors import ReadOnlyError
from tesseradb.records import CSVError, DescriptorError, StreamOptions

DESCRIPTOR = {
    "fields": [
        {"name": "id", "type": "int64"},
        {"name": "tag", "type": "char", "array_len": 4},
        {"name": "t", "type": "epoch_t"},
        {"name": "x", "type": "double"},
        {"name": "y", "type": "float"},
        {"name": "n", "type": "uint8"},
    ],
    "index": ["x", "y", "t", "n"],
}
XS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.5, -2.0, 1e300]


def records(n: int, seed: int = 0, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    x = rng.integers(-5, 5, n).astype(np.float64)
    x[rng.random(n) < 0.1] = rng.choice(XS, int((rng.random(n) < 0.1).sum()) or 1)[:1]
    return pa.table(
        {
            "id": np.arange(start, start + n, dtype=np.int64),
            "tag": pa.array([["", "a", "bb", "dddd"][i % 4] for i in range(n)], pa.string()),
            "t": rng.integers(1_356_998_400, 1_388_534_400, n),
            "x": x,
            "y": rng.normal(0, 3, n).astype(np.float32),
            "n": rng.integers(0, 7, n).astype(np.uint8),
        }
    )


QUERIES = [
    "SELECT count(*), sum(id) FROM s WHERE x BETWEEN -2 AND 1.5",
    "SELECT count(*), sum(id) FROM s WHERE x > 0 AND y <= 1 AND n IN (1, 2, 6)",
    "SELECT count(*) FROM s WHERE x = 'NaN'::DOUBLE OR x > 1e299",
    "SELECT avg(n), count(*) FROM s WHERE t >= 1360000000 AND t < 1370000000 AND y > -1",
    "SELECT tag, count(*) FROM s WHERE n <= 2 AND x >= -0.0 GROUP BY tag ORDER BY tag",
    "SELECT id FROM s WHERE x BETWEEN 1 AND 2 AND y BETWEEN 0 AND 1 AND tag = 'a' ORDER BY id",
    "SELECT count(*) FROM s WHERE id < 100",
    "SELECT count(*) FROM s",
]


def reference(table: pa.Table, query: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.register("source", table)
    con.execute("CREATE TABLE s AS SELECT * FROM source")
    rows = con.execute(query).fetchall()
    con.close()
    return rows


@pytest.fixture
def db(tmp_path: Path) -> Any:
    database = tesseradb.connect(tmp_path / "db")
    yield database
    database.close()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(0, 3000),
    seed=st.integers(0, 2**16),
    scheme=st.sampled_from(["random", "kdtree"]),
    iterator=st.sampled_from(["kdtree", "sequential"]),
    chunk=st.sampled_from([100, 1000, 100_000]),
)
def test_sql_over_a_stream_equals_duckdb_before_and_after_reopening(
    tmp_path_factory: pytest.TempPathFactory,
    n: int,
    seed: int,
    scheme: str,
    iterator: str,
    chunk: int,
) -> None:
    path = tmp_path_factory.mktemp("stream") / "db"
    table = records(n, seed)
    options = {"scheme": scheme, "iterator": iterator, "max_chunk_records": chunk}
    with tesseradb.connect(path) as db:
        stream = db.create_stream("s", DESCRIPTOR, segment_bytes=4096, seed=seed, **options)
        half = n // 2
        stream.ingest(table.slice(0, half))
        stream.ingest(table.slice(half))
        for query in QUERIES:  # served from memory, partly before the writer has run
            assert db.sql(query).fetchall() == reference(table, query), query
    with tesseradb.connect(path, read_only=True) as db:  # from the segment files
        assert db.stream("s").num_records == n and not db.stream("s").problems
        for query in QUERIES:
            assert db.sql(query).fetchall() == reference(table, query), query


def test_ingest_forms_flush_explain_range_and_info(db: Any) -> None:
    stream = db.create_stream("s", DESCRIPTOR, segment_bytes=8192, writer_period_ms=10_000)
    table = records(5000, 3)
    assert stream.ingest(table.slice(0, 1000)) == 1000
    assert stream.ingest(table.slice(1000, 1000).to_batches()[0]) == 1000
    structured = np.zeros(1000, dtype=stream.descriptor.numpy_dtype)
    part = table.slice(2000, 1000)
    for name in part.column_names:
        values = part.column(name).to_pylist()
        structured[name] = [v.encode() for v in values] if name == "tag" else values
    assert stream.ingest(structured) == 1000
    assert stream.ingest(structured.tobytes()) == 1000
    assert stream.unwritten_segments > 0  # the writer sleeps for 10 s: nothing is on disk yet
    stream.flush()
    assert stream.unwritten_segments == 0 and stream.bytes_on_disk > 0
    assert len(list((db.path / "streams" / "s").glob("*.seg"))) == stream.num_segments
    assert stream.ingest(table.slice(4000), durable=True) == 1000
    assert stream.unwritten_segments == 0
    assert db.sql("SELECT count(*) FROM s").scalar() == 5000
    explained = str(db.explain("SELECT * FROM s WHERE t < 1357000000 AND x > 100"))
    assert "segments inspected:" in explained and f"of {stream.num_segments}" in explained
    got = stream.range(["id"], x=(1, 2), n=(None, 3))
    expected = [
        r["id"]
        for part in (table.slice(0, 3000), table.slice(2000, 1000), table.slice(4000))
        for r in part.to_pylist()
        if 1 <= r["x"] <= 2 and r["n"] <= 3
    ]
    assert sorted(got.column("id").to_pylist()) == sorted(expected)
    with pytest.raises(ValueError, match="no field 'z'"):
        stream.range(z=(0, 1))
    info = {o.name: o for o in db.info().objects}
    assert info["s"].kind == "stream" and info["s"].rows == 5000 and info["s"].bytes > 0
    assert db.schema("s").names == [f["name"] for f in DESCRIPTOR["fields"]]
    assert db.streams() == ["s"]


def test_segments_read_back_go_through_the_bounded_cache(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.create_stream("s", DESCRIPTOR, segment_bytes=4096, cache_bytes=60_000)
        db.stream("s").ingest(records(20_000, 1), durable=True)
    with tesseradb.connect(path) as db:
        stream = db.stream("s")
        for _ in range(3):
            assert db.sql("SELECT count(*) FROM s WHERE x >= 0").scalar() > 0
        stats = stream.cache_stats()
        assert stats["bytes"] <= 60_000 and stats["evictions"] > 0 and stats["misses"] > 0


def test_reopening_rebuilds_the_index_and_refuses_damaged_segments(tmp_path: Path) -> None:
    path = tmp_path / "db"
    table = records(4000, 2)
    with tesseradb.connect(path) as db:
        db.create_stream("s", DESCRIPTOR, segment_bytes=8192, scheme="kdtree")
        db.stream("s").ingest(table)
    files = sorted((path / "streams" / "s").glob("*.seg"))
    assert len(files) > 2
    torn = files[0]
    torn.write_bytes(torn.read_bytes()[:-10])  # as if cut short
    (path / "streams" / "s" / "000000099999.seg.tmp").write_bytes(b"half a write")
    flipped = files[1]
    data = bytearray(flipped.read_bytes())
    data[-100] ^= 0xFF  # a flipped bit in the records: found by the checksum on load
    flipped.write_bytes(bytes(data))
    with tesseradb.connect(path) as db:
        stream = db.stream("s")
        assert len(stream.problems) == 1 and "torn" in stream.problems[0]
        assert not list((path / "streams" / "s").glob("*.tmp"))
        # a query that needs a damaged segment fails naming it, never answers without it
        with pytest.raises(tesseradb.records.SegmentFileError, match=r"torn|checksum"):
            db.sql("SELECT count(*) FROM s").fetchall()
        report = db.check()
        assert not report.ok and {f.part.split()[1] for f in report.findings} == {
            str(int(torn.stem)),
            str(int(flipped.stem)),
        }
        repaired = db.check(repair=True)  # sets the two aside; the rest answers again
        assert repaired.ok and len(repaired.findings) == 2
        lost = sum(int(f.lost.split()[0].replace(",", "")) for f in repaired.findings)
        assert all("records" in f.lost for f in repaired.findings)
    with tesseradb.connect(path) as db:
        stream = db.stream("s")
        kept = stream.num_records
        assert not stream.problems and kept == 4000 - lost and 0 < kept < 4000
        assert db.sql("SELECT count(*) FROM s").scalar() == kept
        assert db.check().ok
        stream.ingest(records(10, 9, start=10_000), durable=True)  # and it takes new data
        assert db.sql("SELECT count(*) FROM s WHERE id >= 10000").scalar() == 10
    quarantined = sorted(p.name for p in (path / "streams" / "s" / "quarantine").iterdir())
    assert quarantined == sorted([torn.name, flipped.name])


def test_csv_ingest_with_and_without_header_and_from_file_objects(db: Any, tmp_path: Path) -> None:
    stream = db.create_stream("s", DESCRIPTOR)
    table = records(3000, 4)
    plain = tmp_path / "plain.csv"
    lines = [
        ",".join(str(v) if not isinstance(v, float) else repr(v) for v in row.values())
        for row in table.to_pylist()
    ]
    plain.write_text("\n".join(lines) + "\n")
    assert stream.ingest(plain) == 3000
    headed = tmp_path / "headed.csv"
    header = "n,tag,id,t,x,y"  # any order: the header names the fields
    order = header.split(",")
    body = [
        ",".join(repr(r[c]) if isinstance(r[c], float) else str(r[c]) for c in order)
        for r in table.to_pylist()
    ]
    headed.write_text(header + "\n" + "\n".join(body) + "\n")
    assert stream.ingest(str(headed)) == 3000
    with open(plain, "rb") as f:
        assert stream.ingest(f) == 3000
    assert stream.ingest(io.StringIO("\n".join(lines[:5]) + "\n")) == 5
    expected = reference(
        table, "SELECT count(*), sum(id), sum(x) FILTER (WHERE isfinite(x)) FROM s"
    )
    got = db.sql(
        "SELECT count(*), sum(id), sum(x) FILTER (WHERE isfinite(x)) FROM s WHERE id >= 0"
    ).fetchall()
    assert got[0][0] == 3 * expected[0][0] + 5
    assert got[0][1] == 3 * expected[0][1] + sum(range(5))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1,a,1357000000,1.0,2.0", r"line 3: 5 fields, the record has 6"),
        ("1,a,1357000000,one,2.0,3", r"line 3, field 'x': 'one' is not a number"),
        (
            "1,abcde,1357000000,1.0,2.0,3",
            r"line 3, field 'tag': 'abcde' is 5 bytes, longer than its array_len of 4",
        ),
        ("1,a,1357000000,1.0,2.0,300", r"line 3, field 'n': 300 is outside the range of uint8"),
        ("1,a,,1.0,2.0,3", r"line 3, field 't': '' is not an integer"),
    ],
)
def test_a_bad_csv_row_names_line_and_field_and_nothing_is_kept(
    db: Any, tmp_path: Path, line: str, message: str
) -> None:
    stream = db.create_stream("s", DESCRIPTOR)
    path = tmp_path / "bad.csv"
    good = "0,x,1357000000,0.5,0.5,1\n1,y,1357000001,0.5,0.5,1\n"
    path.write_text(good + line + "\n" + good)
    with pytest.raises(CSVError, match=message):
        stream.ingest(path)
    assert stream.num_records == 0 and stream.num_segments == 0
    assert db.sql("SELECT count(*) FROM s").scalar() == 0


def test_bad_input_leaves_the_stream_as_it_was(db: Any) -> None:
    stream = db.create_stream("s", DESCRIPTOR)
    stream.ingest(records(10))
    with pytest.raises(DescriptorError, match="not whole records"):
        stream.ingest(b"\0" * (stream.descriptor.record_size * 3 + 1))
    with pytest.raises(DescriptorError, match="no column 'tag'"):
        stream.ingest(records(5).drop_columns(["tag"]))
    with pytest.raises(DescriptorError, match=r"'x' .* does not fit double"):
        stream.ingest(records(5).set_column(3, "x", pa.array(["a"] * 5)))
    with pytest.raises(DescriptorError, match="unknown type 'int128'"):
        db.create_stream("u", {"fields": [{"name": "a", "type": "int128"}], "index": ["a"]})
    with pytest.raises(DescriptorError, match="indexing fields are numeric"):
        db.create_stream(
            "u", {"fields": [{"name": "a", "type": "char", "array_len": 2}], "index": ["a"]}
        )
    with pytest.raises(ValueError, match="scheme must be one of"):
        db.create_stream("u", DESCRIPTOR, scheme="zorder")
    with pytest.raises(ValueError, match="unknown stream options"):
        db.create_stream("u", DESCRIPTOR, chunk=5)
    assert stream.num_records == 10 and db.streams() == ["s"]


def test_read_only_databases_read_streams_and_refuse_ingest(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.create_stream("s", DESCRIPTOR).ingest(records(100))
    with tesseradb.connect(path, read_only=True) as db:
        assert db.sql("SELECT count(*) FROM s").scalar() == 100
        with pytest.raises(ReadOnlyError):
            db.stream("s").ingest(records(1))
    with tesseradb.connect(path) as db:
        db.drop("s")
        assert not (path / "streams" / "s").exists() and db.streams() == []


def test_feeders_and_queries_run_concurrently_and_see_whole_ingests(db: Any) -> None:
    desc = {
        "fields": [{"name": "k", "type": "double"}, {"name": "call", "type": "int64"}],
        "index": ["k"],
    }
    stream = db.create_stream(
        "c", desc, max_chunk_records=500, segment_bytes=2000, writer_period_ms=5
    )
    per_call, calls = 1000, 30
    stop = threading.Event()
    errors: list[str] = []

    def feed(worker: int) -> None:
        rng = np.random.default_rng(worker)
        for c in range(calls):
            stream.ingest(
                pa.table({"k": rng.random(per_call), "call": np.full(per_call, worker * 1000 + c)})
            )

    def query() -> None:
        while not stop.is_set():
            rows = db.sql("SELECT call, count(*) FROM c WHERE k >= 0 GROUP BY call").fetchall()
            partial = [r for r in rows if r[1] != per_call]
            if partial:
                errors.append(f"partial ingest calls were visible: {partial[:3]}")

    threads = [threading.Thread(target=query) for _ in range(2)]
    feeders = [threading.Thread(target=feed, args=(w,)) for w in range(2)]
    for t in threads + feeders:
        t.start()
    for t in feeders:
        t.join()
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    stream.flush()
    assert db.sql("SELECT count(*), count(DISTINCT call) FROM c").fetchall() == [
        (2 * calls * per_call, 2 * calls)
    ]


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, pyarrow as pa, tesseradb
    db = tesseradb.connect(sys.argv[1])
    desc = {"fields": [{"name": "id", "type": "int64"}, {"name": "v", "type": "double"}],
            "index": ["v"]}
    stream = db.create_stream("k", desc, segment_bytes=16384, writer_period_ms=1)
    call = 0
    while True:
        n = 5000
        ids = np.arange(call * n, (call + 1) * n)
        stream.ingest(pa.table({"id": ids, "v": ids * 0.5}))
        if call % 3 == 0:
            stream.flush()
            print(f"confirmed {(call + 1) * n}", flush=True)
        call += 1
    """
)


def test_sigkill_during_ingest_keeps_what_flush_confirmed(tmp_path: Path) -> None:
    path = tmp_path / "db"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True
    )
    confirmed = 0
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while confirmed < 60_000 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("confirmed"):
            confirmed = int(line.split()[1])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert confirmed >= 60_000
    with tesseradb.connect(path) as db:
        stream = db.stream("k")
        assert not stream.problems
        have = db.sql("SELECT count(*) FROM k WHERE id < ?", [confirmed]).scalar()
        assert have == confirmed  # every confirmed record is there
        total, distinct = db.sql("SELECT count(*), count(DISTINCT id) FROM k").fetchall()[0]
        assert total == distinct  # nothing served twice or torn
        stream.ingest(pa.table({"id": [-1], "v": [0.0]}), durable=True)
        assert db.sql("SELECT count(*) FROM k WHERE id = -1").scalar() == 1


def test_options_round_trip_through_the_catalog(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.create_stream("s", DESCRIPTOR, scheme="kdtree", overpacking=2.0, iterator="sequential")
    with tesseradb.connect(path) as db:
        options = db.stream("s").options
        assert options == StreamOptions(scheme="kdtree", overpacking=2.0, iterator="sequential")


def test_a_bad_row_in_a_text_file_object_is_located_too(db: Any) -> None:
    stream = db.create_stream("s", DESCRIPTOR)
    source = io.StringIO("0,x,1357000000,0.5,0.5,1\n1,a,1357000000,x,2.0,3\n")
    with pytest.raises(CSVError, match=r"line 2, field 'x': 'x' is not a number"):
        stream.ingest(source)
    assert not source.closed and stream.num_records == 0


def _same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> bool:
    """Rows equal, floats to 1e-9 relative (sums may add in another order), NaN equal to NaN."""

    def close(a: Any, b: Any) -> bool:
        if isinstance(a, float) and isinstance(b, float):
            return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)
        return bool(a == b) and type(a) is type(b)

    return len(got) == len(want) and all(
        len(g) == len(w) and all(close(a, b) for a, b in zip(g, w, strict=True))
        for g, w in zip(got, want, strict=True)
    )


literals = st.decimals(-8, 8, places=3, allow_nan=False).map(lambda d: f"{d:f}")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(0, 2000),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_aggregates_answered_by_the_stream_equal_duckdb(
    tmp_path_factory: pytest.TempPathFactory, n: int, seed: int, data: st.DataObject
) -> None:
    table = records(n, seed)
    lits = data.draw(st.lists(literals, min_size=4, max_size=4))
    # some values exactly at a literal's float32 or double image: the ambiguous rows
    y = table.column("y").to_numpy().copy()
    x = table.column("x").to_numpy().copy()
    if n:
        y[:: max(1, n // 7)] = np.float32(float(lits[0]))
        x[:: max(1, n // 5)] = float(lits[2])
    table = table.set_column(3, "x", pa.array(x)).set_column(4, "y", pa.array(y, pa.float32()))
    fn = data.draw(st.sampled_from(["count(*)", "avg(n)", "min(y)", "max(x)", "sum(y)", "avg(t)"]))
    op = data.draw(st.sampled_from(["<", "<=", ">", ">=", "="]))
    query = (
        f"SELECT {fn}, count(*) FROM s WHERE y {op} {lits[0]} AND y <= {lits[1]} "
        f"AND x BETWEEN {lits[2]} AND {lits[3]}"
    )
    with tesseradb.connect(tmp_path_factory.mktemp("stream") / "db") as db:
        db.create_stream("s", DESCRIPTOR, segment_bytes=4096, seed=seed).ingest(table)
        assert _same(db.sql(query).fetchall(), reference(table, query)), query


def test_the_stream_answers_box_aggregates_and_leaves_ambiguous_ones_to_sql(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tesseradb.records import Stream

    answered: list[bool] = []
    original = Stream.aggregate

    def spy(self: Any, *args: Any) -> Any:
        table = original(self, *args)
        answered.append(table is not None)
        return table

    monkeypatch.setattr(Stream, "aggregate", spy)
    table = records(5000, 3)
    db.create_stream("s", DESCRIPTOR, segment_bytes=4096).ingest(table)
    query = "SELECT avg(n), max(y), count(*) FROM s WHERE y > 0.1 AND y < 2.35 AND x > -1.5"
    assert _same(db.sql(query).fetchall(), reference(table, query))
    assert answered == [True]
    # a record holding float32(0.1), which lies above 0.1: whether it is above the
    # literal depends on DuckDB's precision, so SQL answers
    y = table.column("y").to_numpy().copy()
    y[7] = np.float32(0.1)
    table = table.set_column(4, "y", pa.array(y, pa.float32()))
    db.drop("s")
    db.create_stream("s", DESCRIPTOR, segment_bytes=4096).ingest(table)
    assert _same(db.sql(query).fetchall(), reference(table, query))
    assert answered == [True, False]
    # at least 0.1 it is under every precision: the stream answers
    at_least = query.replace("y > 0.1", "y >= 0.1")
    assert _same(db.sql(at_least).fetchall(), reference(table, at_least))
    assert answered == [True, False, True]
    # float32(-0.001) lies below -0.001, so it is above it under no precision: the
    # stream answers, and must leave that record out
    y[8] = np.float32(-0.001)
    x = table.column("x").to_numpy().copy()
    x[8] = 0.0  # inside the other conditions
    table = table.set_column(4, "y", pa.array(y, pa.float32())).set_column(3, "x", pa.array(x))
    db.drop("s")
    db.create_stream("s", DESCRIPTOR, segment_bytes=4096).ingest(table)
    above = query.replace("y > 0.1", "y > -0.001")
    assert _same(db.sql(above).fetchall(), reference(table, above))
    assert answered == [True, False, True, True]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"segment_bytes": "big"}, "segment_bytes must be a number, not str 'big'"),
        ({"scheme": 3}, "scheme must be a string"),
        ({"writer_threads": True}, "writer_threads must be a number"),
        ({"seed": 1.5}, "seed must be an integer"),
        ({"writer_threads": 0}, "writer_threads must be at least 1"),
        ({"colour": "red"}, "unknown stream options"),
    ],
)
def test_bad_stream_options_are_clear_errors(
    tmp_path: Path, options: dict[str, object], match: str
) -> None:
    from tesseradb.errors import InvalidArgumentError

    with tesseradb.connect(tmp_path / "db") as db:
        with pytest.raises(InvalidArgumentError, match=match):
            db.create_stream(
                "s", {"fields": [{"name": "a", "type": "double"}], "index": ["a"]}, **options
            )
        assert db.streams() == []


@pytest.mark.parametrize(
    ("columns", "bounds", "match"),
    [
        (5, {}, "must be a list of field names"),
        (["nope"], {}, "has no field 'nope'"),
        (None, {"a": "x"}, r"a pair \(lo, hi\)"),
        (None, {"a": ("1", 2)}, "ends that are numbers or None"),
        (None, {"zz": (1, 2)}, "has no field 'zz'"),
    ],
)
def test_bad_range_arguments_are_clear_errors(
    tmp_path: Path, columns: object, bounds: dict[str, object], match: str
) -> None:
    from tesseradb.errors import InvalidArgumentError

    with tesseradb.connect(tmp_path / "db") as db:
        stream = db.create_stream(
            "s", {"fields": [{"name": "a", "type": "double"}], "index": ["a"]}
        )
        with pytest.raises(InvalidArgumentError, match=match):
            stream.range(columns, **bounds)  # type: ignore[arg-type]


def test_a_corrupt_table_store_is_named_and_the_rest_stays_queryable(tmp_path: Path) -> None:
    from tesseradb.errors import TableStoreError

    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE TABLE t (a INTEGER)")
        db.create_stream("s", {"fields": [{"name": "a", "type": "double"}], "index": ["a"]})
    store = tmp_path / "db" / "tables.duckdb"
    store.write_bytes(b"\0" * store.stat().st_size)
    with tesseradb.connect(tmp_path / "db") as db:
        with pytest.raises(TableStoreError, match=r"tables\.duckdb cannot be opened"):
            db.sql("SELECT * FROM t").fetchall()
        assert db.sql("SELECT count(*) FROM s").fetchall() == [(0,)]


OPEN_BOUNDS = [
    "x > 0",
    "x < 0",
    "x > -0.0 AND x < 1.5",
    "x > 1.5",
    "x < 1e300 AND x > -2",
    "x > 1e300",
    "x > 'inf'::DOUBLE",
    "x < '-inf'::DOUBLE",
    "n > 2 AND n < 5",
    "y > -1 AND y < 1",
    "x > 1 AND y < 0 AND n > 0",
    "x > 1.5 AND x < 1.5000000000000002",  # (no double between the two)
]


@pytest.mark.parametrize("condition", OPEN_BOUNDS)
def test_open_bounds_the_search_settles_answer_as_duckdb(db: Any, condition: str) -> None:
    """An open bound on a float or small-integer indexing field is closed one double
    inward and settled by the box search alone (no filter after it): records exactly
    at the bound, at -0.0, +-inf and NaN must come out as DuckDB has them."""
    table = records(3000, 11)
    x = table.column("x").to_numpy().copy()
    x[:8] = [0.0, -0.0, 1.5, 1e300, math.inf, -math.inf, math.nan, -2.0]
    table = table.set_column(3, "x", pa.array(x))
    db.create_stream("s", DESCRIPTOR, segment_bytes=4096).ingest(table)
    from tesseradb.records._segments import SegmentStore

    left: list[Any] = []
    residual = SegmentStore._residual

    def spy(self: Any, predicate: Any, segments: Any) -> Any:
        left.append(residual(self, predicate, segments))
        return left[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SegmentStore, "_residual", spy)
        for query in (
            f"SELECT count(*), sum(id), min(y), max(n) FROM s WHERE {condition}",
            f"SELECT id FROM s WHERE {condition} ORDER BY id",
        ):
            result = db.sql(query)
            assert _same(result.fetchall(), reference(table, query)), query
            if query.startswith("SELECT count(*)"):
                # (the stream answers but where the condition is pushed down widened,
                # not exactly: a cast literal, and 'x > 1e300' pushed as 'x >= 1e300')
                answered = condition not in ("x > 1e300", "x > 'inf'::DOUBLE", "x < '-inf'::DOUBLE")
                assert (result.shortcut == "aggregate") == answered, query
    if condition.endswith("1.5000000000000002"):  # (the box is empty: nothing is searched)
        assert left == []
    elif "inf" not in condition:  # (an infinite bound is left to the filter)
        assert left and all(p is None or not len(p) for p in left), left
