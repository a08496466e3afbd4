"""An ingest call larger than memory (a big CSV file, an iterator of parts) is written as it
is read and committed at its end as a chain of call-log records: memory stays bounded,
the call stays all or nothing for every reader, and after kill -9 (issue 24)."""

from __future__ import annotations

import itertools
import os
import signal
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import tesseradb
from tesseradb.errors import CancelledError, TesseraError
from tesseradb.progress import Cancel
from tesseradb.records import _csv, _stream
from tesseradb.records._calls import (
    CONTINUED,
    CONTINUES,
    HEADER_SIZE,
    CallLog,
    CallRecord,
    chain,
)

from .test_atomic_calls import DESCRIPTOR

PART = 20_000  # records per part of a call
STAGE = 256 << 10  # the bound in these tests: a call of more than ~6 parts is staged


@pytest.fixture(autouse=True)
def small_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stream, "STAGE_BYTES", STAGE)


def part(call: int, index: int) -> pa.Table:
    k = np.arange(index * PART, (index + 1) * PART)
    return pa.table({"call": np.full(PART, call), "k": k, "v": (k * 7919 % 1000) * 0.5})


def make(path: Path, segment_bytes: int = 16_384) -> tesseradb.Database:
    db = tesseradb.connect(path)
    db.create_stream("s", DESCRIPTOR, segment_bytes=segment_bytes)
    return db


def rows(db: tesseradb.Database) -> list[tuple[int, int, float]]:
    return db.sql("SELECT call, k, v FROM s ORDER BY call, k").fetchall()


def expected(calls: dict[int, int]) -> list[tuple[int, int, float]]:
    tables = [part(call, i) for call, parts in sorted(calls.items()) for i in range(parts)]
    table = pa.concat_tables(tables)
    return sorted(zip(*(table.column(c).to_pylist() for c in ("call", "k", "v")), strict=True))


def log_records(path: Path) -> list[CallRecord]:
    return CallLog(path / "streams" / "s").read_new("s")


def segment_files(path: Path) -> set[str]:
    return {p.name for p in (path / "streams" / "s").glob("*.seg")}


def test_a_call_past_the_bound_goes_to_disk_as_it_comes_and_is_seen_only_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db"
    db = make(path)
    stream = db.stream("s")
    stream.ingest(part(0, 0), durable=True)
    on_disk_while_reading = []

    def parts() -> Iterator[pa.Table]:
        for i in range(20):
            yield part(1, i)
            on_disk_while_reading.append(len(segment_files(path)))
            # nothing of the call is served before it ends, here or in another process
            assert db.sql("SELECT count(*) FROM s WHERE call = 1").scalar() == 0

    assert stream.ingest(parts()) == 20 * PART
    assert on_disk_while_reading[-1] > on_disk_while_reading[0] > 1  # written as it came
    assert rows(db) == expected({0: 1, 1: 20})
    records = log_records(path)
    assert records[0].flags == 0  # the first call: one record
    assert [r.flags & CONTINUES for r in records[1:-1]] == [CONTINUES] * (len(records) - 2)
    assert records[-1].flags == CONTINUED
    assert sum(r.records for r in records[1:]) == 20 * PART
    db.close()
    with tesseradb.connect(path, read_only=True) as again:
        assert rows(again) == expected({0: 1, 1: 20})
        assert again.check().ok


def test_a_small_iterator_call_is_published_as_any_other(tmp_path: Path) -> None:
    path = tmp_path / "db"
    small = part(0, 0).slice(0, 2000)  # 48 KB a part, under the bound together
    with make(path) as db:
        assert db.stream("s").ingest(iter([small, small]), durable=True) == 4000
        assert [(r.records, r.flags) for r in log_records(path)] == [(4000, 0)]
        assert db.sql("SELECT count(*) FROM s").scalar() == 4000


def test_other_calls_take_ids_between_the_runs_and_both_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with make(path) as db:
        stream = db.stream("s")

        def parts() -> Iterator[pa.Table]:
            for i in range(20):
                yield part(1, i)
                if i == 10:  # another call, published while this one is staged
                    stream.ingest(part(2, 0), durable=True)

        stream.ingest(parts())
        assert rows(db) == expected({1: 20, 2: 1})
        runs = [r for r in log_records(path) if r.flags]
        # the runs of call 1 leave a gap of ids where call 2's segments went
        assert any(b.first > a.first + a.count for a, b in itertools.pairwise(runs))
    with tesseradb.connect(path) as db:
        assert rows(db) == expected({1: 20, 2: 1})


def test_a_big_csv_file_is_read_in_bounded_memory_with_byte_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_csv, "CSV_BLOCK_BYTES", 1 << 20)  # the 8 MB file in 8 blocks
    path = tmp_path / "db"
    table = pa.concat_tables([part(3, i) for i in range(15)])
    csv = tmp_path / "records.csv"
    pacsv.write_csv(table, csv)
    events = []
    with make(path) as db:
        stream = db.stream("s")
        assert stream.ingest(csv, progress=events.append) == 15 * PART
        assert rows(db) == expected({3: 15})
        assert len(log_records(path)) > 1  # staged: a chain
    assert all(e.unit == "bytes" for e in events)
    assert [e.done for e in events] == sorted(e.done for e in events)
    assert events[-1].finished and events[-1].done == events[-1].total == csv.stat().st_size


def test_a_cancel_mid_call_keeps_nothing_and_removes_its_files(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with make(path) as db:
        stream = db.stream("s")
        stream.ingest(part(0, 0), durable=True)
        before = segment_files(path)
        cancel = Cancel()

        def parts() -> Iterator[pa.Table]:
            for i in range(20):
                if i == 12:
                    assert len(segment_files(path)) > len(before)  # some were staged
                    cancel.cancel()
                yield part(1, i)

        with pytest.raises(CancelledError):
            stream.ingest(parts(), cancel=cancel)
        assert segment_files(path) == before
        assert rows(db) == expected({0: 1})
        stream.ingest(part(2, 0))  # still usable
        assert rows(db) == expected({0: 1, 2: 1})


def test_a_bad_late_part_keeps_nothing(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with make(path) as db:
        stream = db.stream("s")

        def parts() -> Iterator[pa.Table]:
            for i in range(15):
                yield part(1, i)
            yield pa.table({"call": [1], "k": [1]})  # no v

        with pytest.raises(TesseraError, match="v"):
            stream.ingest(parts())
        assert segment_files(path) == set()
        assert db.sql("SELECT count(*) FROM s").scalar() == 0


def test_memory_stays_bounded_whatever_the_call_size(tmp_path: Path) -> None:
    """A 96 MB call (uncompressed records) grows the process by a fraction of that."""

    from tesseradb.bench.runner import resident_bytes as rss

    with make(tmp_path / "db", segment_bytes=1 << 20) as db:
        stream = db.stream("s")
        parts_count = (96 << 20) // (PART * 24)
        stream.ingest(iter([part(0, i) for i in range(3)]))  # warm up the allocator
        start = rss()
        peak = start

        def parts() -> Iterator[pa.Table]:
            nonlocal peak
            for i in range(parts_count):
                yield part(1, i)
                peak = max(peak, rss())

        assert stream.ingest(parts()) == parts_count * PART
        assert peak - start < 32 << 20, f"grew by {(peak - start) >> 20} MB"


CHILD = textwrap.dedent(
    """
    import sys, time, numpy as np, pyarrow as pa, tesseradb
    from tesseradb.records import _stream
    _stream.STAGE_BYTES = 256 << 10
    db = tesseradb.connect(sys.argv[1])
    stream = db.stream("s")
    stop_at = int(sys.argv[2])

    def parts():
        for i in range(20):
            k = np.arange(i * 20000, (i + 1) * 20000)
            yield pa.table({"call": np.full(20000, 1), "k": k, "v": (k * 7919 % 1000) * 0.5})
            if i == stop_at:
                print("staged", flush=True)
                time.sleep(60)

    stream.ingest(parts())
    print("committed", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("stop_at", [12, -1])
def test_kill_9_mid_call_loses_it_whole_and_after_commit_keeps_it(
    tmp_path: Path, stop_at: int
) -> None:
    path = tmp_path / "db"
    with make(path) as db:
        db.stream("s").ingest(part(0, 0), durable=True)
    before = segment_files(path)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(stop_at)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    said = child.stdout.readline().strip()
    assert said == ("staged" if stop_at >= 0 else "committed")
    if stop_at >= 0:
        assert len(segment_files(path)) > len(before)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    with tesseradb.connect(path) as db:
        assert not db.stream("s").problems
        if stop_at >= 0:
            assert rows(db) == expected({0: 1})
            assert segment_files(path) == before  # the staged files were removed
        else:
            assert rows(db) == expected({0: 1, 1: 20})
        assert db.check().ok


# --- the call log's chains ----------------------------------------------------------------
def test_a_chain_is_read_only_once_its_last_part_is_in_the_log(tmp_path: Path) -> None:
    log = CallLog(tmp_path)
    log.create([CallRecord(1, 1, 10)])
    log.read_new("s")
    parts = chain([(2, 3, 30), (7, 2, 20), (10, 1, 5)])
    log.append(parts[:2])
    reader = CallLog(tmp_path)
    assert reader.read_new("s") == [CallRecord(1, 1, 10)]  # the chain is not whole yet
    log.append(parts[2:])
    assert reader.read_new("s") == parts
    assert not reader.damaged


def test_a_chain_cut_short_by_a_crash_is_a_torn_tail(tmp_path: Path) -> None:
    log = CallLog(tmp_path)
    log.create([CallRecord(1, 1, 10)])
    log.read_new("s")
    log.append(chain([(2, 3, 30), (7, 2, 20)])[:1])  # the crash came before the rest
    reader = CallLog(tmp_path)
    assert reader.read_new("s") == [CallRecord(1, 1, 10)]
    assert reader.size() > reader.offset
    reader.cut_torn_tail()
    assert reader.size() == reader.offset


@pytest.mark.parametrize("damaged", [0, 1, 2])
def test_a_chain_missing_a_damaged_part_is_not_served_at_all(tmp_path: Path, damaged: int) -> None:
    log = CallLog(tmp_path)
    log.create([CallRecord(1, 1, 10), *chain([(2, 3, 30), (7, 2, 20), (10, 1, 5)])])
    log.read_new("s")
    log.append([CallRecord(11, 1, 7)])
    data = bytearray(log.path.read_bytes())
    data[HEADER_SIZE + 32 * (1 + damaged) + 20] ^= 0xFF  # a byte of the part's record count
    log.path.write_bytes(bytes(data))
    reader = CallLog(tmp_path)
    assert reader.read_new("s") == [CallRecord(1, 1, 10), CallRecord(11, 1, 7)]
    assert reader.damaged


def test_a_version_1_log_becomes_version_2_with_its_first_chain(tmp_path: Path) -> None:
    log = CallLog(tmp_path)
    # as TesseraDB wrote it before chains: a 16-byte header, then the records
    log.path.write_bytes(struct.pack("<8sII", b"TSDBCALL", 1, 32) + CallRecord(1, 1, 10).encode())
    old = CallLog(tmp_path)
    assert old.read_new("s") == [CallRecord(1, 1, 10)]
    assert old.version == 1
    old.append(chain([(2, 1, 5), (3, 1, 5)]))
    assert int.from_bytes(log.path.read_bytes()[8:12], "little") == 2
    assert CallLog(tmp_path).read_new("s")[1:] == chain([(2, 1, 5), (3, 1, 5)])
