"""An ingest call is all or nothing for every reader: this process, other processes, and
after kill -9; missing and damaged segments are named, never answered around (issue 18)."""

from __future__ import annotations

import io
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import tesseradb
from tesseradb.errors import SegmentFileError
from tesseradb.records._calls import HEADER_SIZE, _header

DESCRIPTOR = {
    "fields": [
        {"name": "call", "type": "int64"},
        {"name": "k", "type": "int64"},
        {"name": "v", "type": "double"},
    ],
    "index": ["v", "k"],
}
CALL = 50_000  # records per ingest call

WRITER = textwrap.dedent(
    f"""
    import sys, numpy as np, pyarrow as pa, tesseradb
    db = tesseradb.connect(sys.argv[1])
    stream = db.stream("s")
    durable_every = int(sys.argv[2])
    call = 0
    while True:
        k = np.arange({CALL})
        table = pa.table({{"call": np.full({CALL}, call), "k": k, "v": (k * 7919 % 1000) * 0.5}})
        durable = durable_every > 0 and call % durable_every == 0
        stream.ingest(table, durable=durable)
        if durable:
            print(f"durable {{call}}", flush=True)
        call += 1
    """
)


def make_stream(path: Path) -> None:
    with tesseradb.connect(path) as db:
        # small segments: one call is many segment files, written one after another
        db.create_stream("s", DESCRIPTOR, segment_bytes=16_384, writer_period_ms=1)


def start_writer(path: Path, durable_every: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(durable_every)],
        stdout=subprocess.PIPE,
        text=True,
    )


def per_call(db: tesseradb.Database) -> dict[int, int]:
    return dict(db.sql("SELECT call, count(*) FROM s GROUP BY call").fetchall())


def test_a_reader_in_another_process_sees_whole_calls_only(tmp_path: Path) -> None:
    path = tmp_path / "db"
    make_stream(path)
    writer = start_writer(path, durable_every=0)
    seen = set()
    try:
        with tesseradb.connect(path, read_only=True) as db:
            deadline = time.monotonic() + 60
            while len(seen) < 4 and time.monotonic() < deadline:
                counts = per_call(db)
                # every call the reader sees, it sees whole
                assert all(n == CALL for n in counts.values()), counts
                total = db.sql("SELECT count(*) FROM s").scalar()
                assert total % CALL == 0
                seen.add(len(counts))
                assert not db.stream("s").problems
    finally:
        writer.kill()
        writer.wait()
    assert len(seen) >= 4  # and it saw the stream grow: new calls reach a read-only reader


@pytest.mark.parametrize("durable_every", [0, 3])
def test_after_kill_9_durable_calls_are_whole_and_the_rest_whole_or_gone(
    tmp_path: Path, durable_every: int
) -> None:
    path = tmp_path / "db"
    make_stream(path)
    writer = start_writer(path, durable_every)
    durable = []
    assert writer.stdout is not None
    if durable_every:
        while len(durable) < 3:
            durable.append(int(writer.stdout.readline().split()[1]))
    else:
        time.sleep(1.5)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    with tesseradb.connect(path) as db:
        stream = db.stream("s")
        assert not stream.problems
        counts = per_call(db)
        assert all(n == CALL for n in counts.values()), counts  # nothing torn
        assert set(durable) <= set(counts)  # every acknowledged durable call is there
        assert db.check().ok
        assert not list((path / "streams" / "s").glob("*.tmp"))


def ingest_calls(path: Path, calls: int) -> list[Path]:
    make_stream(path)
    with tesseradb.connect(path) as db:
        stream = db.stream("s")
        for call in range(calls):
            k = np.arange(2000)
            v = (k % 100) * 1.0 + call * 1000  # calls apart in v: their segments' boxes too
            stream.ingest(pa.table({"call": np.full(2000, call), "k": k, "v": v}))
    return sorted((path / "streams" / "s").glob("*.seg"))


def test_a_deleted_segment_is_named_in_problems_and_no_query_answers_without_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db"
    files = ingest_calls(path, 3)
    files[0].unlink()
    with tesseradb.connect(path) as db:
        stream = db.stream("s")
        assert len(stream.problems) == 1 and "is missing" in stream.problems[0]
        assert files[0].name in stream.problems[0]
        # its box is unknown, so any query might need it: every query says so
        for sql in ("SELECT count(*) FROM s", "SELECT count(*) FROM s WHERE v > 2500"):
            with pytest.raises(SegmentFileError, match=r"is missing.*check --repair"):
                db.sql(sql).fetchall()
        report = db.check(repair=True)
        assert report.ok and len(report.findings) == 1
        assert report.findings[0].lost.endswith("records")
        assert db.sql("SELECT count(*) FROM s WHERE call > 0").scalar() == 4000
        assert db.sql("SELECT count(*) FROM s").scalar() < 6000


def test_a_flipped_bit_fails_only_the_queries_that_need_its_segment(tmp_path: Path) -> None:
    path = tmp_path / "db"
    files = ingest_calls(path, 3)
    data = bytearray(files[-1].read_bytes())  # a segment of the last call (v >= 2000)
    data[-50] ^= 0x01
    files[-1].write_bytes(bytes(data))
    with tesseradb.connect(path) as db:
        assert db.sql("SELECT count(*) FROM s WHERE v < 1500").scalar() == 4000  # not needed
        with pytest.raises(SegmentFileError, match=r"checksum.*check --repair"):
            db.sql("SELECT count(*) FROM s WHERE v >= 2000").fetchall()
        assert any("checksum" in p for p in db.stream("s").problems)


def test_a_damaged_header_box_is_found_on_open(tmp_path: Path) -> None:
    """A flipped bit in a box would send queries past the segment: the header's CRC finds it."""
    path = tmp_path / "db"
    files = ingest_calls(path, 2)
    data = bytearray(files[0].read_bytes())
    lo = struct.unpack_from("<d", data, 64 + 8 + 8)[0]
    struct.pack_into("<d", data, 64 + 8 + 8, lo + 1e6)  # the box's first minimum moves
    files[0].write_bytes(bytes(data))
    with tesseradb.connect(path) as db:
        assert any("header's checksum" in p for p in db.stream("s").problems)
        with pytest.raises(SegmentFileError):
            db.sql("SELECT count(*) FROM s WHERE v < 10").fetchall()


def test_a_damaged_call_log_record_is_reported_and_its_segments_kept(tmp_path: Path) -> None:
    path = tmp_path / "db"
    files = ingest_calls(path, 3)
    log = path / "streams" / "s" / "calls.log"
    data = bytearray(log.read_bytes())
    data[HEADER_SIZE + 32 + 3] ^= 0xFF  # the second call's record
    log.write_bytes(bytes(data))
    with tesseradb.connect(path) as db:
        problems = db.stream("s").problems
        assert any("record 1 of its call log" in p for p in problems)
        assert any("belong to no committed call" in p for p in problems)
        assert all(f.exists() for f in files)  # a writer never removes what may be committed
        # never answered around: a query that may need the unvouched segments is refused,
        # one whose box misses them (each call's v is apart) answers
        with pytest.raises(SegmentFileError, match="belong to no committed call"):
            db.sql("SELECT DISTINCT call FROM s ORDER BY call").fetchall()
        assert db.sql("SELECT DISTINCT call FROM s WHERE v < 500").fetchall() == [(0,)]
        report = db.check(repair=True)
        assert report.ok
        lost = [int(f.lost.split()[0].replace(",", "")) for f in report.findings if f.lost]
        assert sum(lost) == 2000  # the damaged record's call, segment by segment
        assert db.sql("SELECT count(*) FROM s").scalar() == 4000


def test_a_call_log_cut_short_is_damage_not_a_crash(tmp_path: Path) -> None:
    """A log shorter than its checkpoint lost committed records: its segments are never
    removed as a crash's leftovers, never served around, and repair says what is lost."""
    path = tmp_path / "db"
    files = ingest_calls(path, 5)
    log = path / "streams" / "s" / "calls.log"
    log.write_bytes(log.read_bytes()[: HEADER_SIZE + 2 * 32])  # three whole records cut
    with tesseradb.connect(path) as db:
        assert any("cut short" in p for p in db.stream("s").problems)
        assert all(f.exists() for f in files)
        with pytest.raises(SegmentFileError):
            db.sql("SELECT count(*) FROM s").fetchall()
        report = db.check(repair=True)
        assert report.ok
        lost = sum(int(f.lost.split()[0].replace(",", "")) for f in report.findings if f.lost)
        assert lost == 3 * 2000
        assert db.sql("SELECT count(*) FROM s").scalar() == 4000
    assert len(list(path.rglob("quarantine/*.seg"))) == len(files) - len(
        [f for f in files if f.exists()]
    )


def test_a_lost_call_log_is_made_again_from_the_segments(tmp_path: Path) -> None:
    path = tmp_path / "db"
    ingest_calls(path, 2)
    (path / "streams" / "s" / "calls.log").unlink()
    with tesseradb.connect(path) as db:
        assert any("call log was missing" in p for p in db.stream("s").problems)
        assert db.sql("SELECT count(*) FROM s").scalar() == 4000


def test_a_torn_last_log_record_is_a_call_that_never_committed(tmp_path: Path) -> None:
    path = tmp_path / "db"
    ingest_calls(path, 2)
    log = path / "streams" / "s" / "calls.log"
    data = log.read_bytes()
    # the append of the second call's record was cut short by a crash: the header it
    # wrote still says one record before it
    log.write_bytes(_header(1) + data[HEADER_SIZE:-5])
    with tesseradb.connect(path, read_only=True) as db:
        assert db.sql("SELECT DISTINCT call FROM s").fetchall() == [(0,)]
    with tesseradb.connect(path) as db:
        assert db.sql("SELECT DISTINCT call FROM s").fetchall() == [(0,)]
        assert not db.stream("s").problems
        assert log.stat().st_size == HEADER_SIZE + 32  # cut off; the second call's files removed
        assert db.check().ok


def test_a_database_left_open_at_exit_writes_its_calls_and_exits(tmp_path: Path) -> None:
    # Regression: Database.__del__ during interpreter shutdown waited for writer
    # threads that were already frozen, and the process never ended.
    make_stream(tmp_path / "db")
    script = textwrap.dedent(
        """
        import sys, pyarrow as pa, tesseradb
        db = tesseradb.connect(sys.argv[1])
        db.stream("s").ingest(pa.table({"call": [1, 1], "k": [1, 2], "v": [0.5, 1.5]}))
        """
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "db")], check=True, timeout=60)
    with tesseradb.connect(tmp_path / "db", read_only=True) as db:
        assert db.sql("SELECT count(*) FROM s").fetchall() == [(2,)]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("call,k,v\n1,1,1e400\n", "line 2, field 'v': 1e400 is outside the range of double"),
        ("call,k,v\n1,1,2\n1,99999999999999999999,2\n", "line 3, field 'k'"),
        ("call,k,v\n1,1,\n", "line 2, field 'v'"),
    ],
)
def test_csv_values_out_of_range_are_refused_not_stored(
    tmp_path: Path, text: str, where: str
) -> None:
    make_stream(tmp_path / "db")
    with tesseradb.connect(tmp_path / "db") as db:
        stream = db.stream("s")
        stream.ingest(pa.table({"call": [0], "k": [0], "v": [0.0]}))
        with pytest.raises(tesseradb.errors.CSVError, match=where):
            stream.ingest(io.StringIO(text))
        assert db.sql("SELECT count(*) FROM s").fetchall() == [(1,)]
        # explicit infinities and NaN are values the user wrote, and kept
        stream.ingest(io.StringIO("call,k,v\n1,1,inf\n1,2,-Infinity\n1,3,nan\n"))
        assert db.sql("SELECT count(*) FROM s WHERE isinf(v) OR isnan(v)").fetchall() == [(3,)]


def test_float32_overflow_from_arrow_is_refused(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        stream = db.create_stream("f", {"fields": [{"name": "x", "type": "float"}], "index": ["x"]})
        with pytest.raises(tesseradb.errors.DescriptorError, match="outside the range of float"):
            stream.ingest(pa.table({"x": [1.0, 1e39]}))
        assert stream.num_records == 0
