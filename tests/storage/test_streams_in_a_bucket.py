"""Record streams whose sealed segments live in an S3 bucket; the call log stays local.

What a durable ingest acknowledged is what a reopened database, a reader in another
process and a writer killed with SIGKILL leave behind; every call is whole or absent;
a missing segment object is named, never answered around.
"""

from __future__ import annotations

import os
import signal
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
from tesseradb.storage import Location
from tests.servers import S3Bucket

DESCRIPTOR = {
    "fields": [
        {"name": "call", "type": "int64"},
        {"name": "k", "type": "int64"},
        {"name": "v", "type": "double"},
    ],
    "index": ["v", "k"],
}
CALL = 20_000


def _call(call: int) -> pa.Table:
    k = np.arange(CALL)
    return pa.table({"call": np.full(CALL, call), "k": k, "v": (k * 7919 % 1000) * 0.5 + call})


def _make(path: Path, bucket: S3Bucket) -> tesseradb.Database:
    db = tesseradb.connect(path, storage=bucket.url, storage_options=bucket.options)
    db.create_stream("s", DESCRIPTOR, segment_bytes=65_536, writer_period_ms=1)
    return db


def test_segments_in_the_bucket_answer_as_local_ones(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    query = "SELECT call, count(*), sum(k), min(v), max(v) FROM {} WHERE v BETWEEN 100 AND 300 GROUP BY call ORDER BY call"
    with _make(tmp_path / "db", s3_bucket) as db:
        stream = db.stream("s")
        for call in range(4):
            stream.ingest(_call(call), durable=call % 2 == 1)
        stream.flush()
        location = db.describe("s")["location"]
        assert location.startswith(f"{s3_bucket.url}/streams/s-")
        expected = db.sql(query.format("s")).fetchall()
        assert [row[0] for row in expected] == [0, 1, 2, 3]
    # no segment file in the folder: the log is local, the segments are objects
    folder = tmp_path / "db" / "streams" / "s"
    assert folder.is_dir() and not list(folder.glob("*.seg"))
    objects = [o.path for o in Location(location, db.storage.credentials).list()]
    assert objects and all(p.endswith(".seg") for p in objects)
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        assert db.sql(query.format("s")).fetchall() == expected
        assert db.stream("s").num_records == 4 * CALL
        assert db.check().ok
    with tesseradb.connect(
        tmp_path / "db", read_only=True, storage_options=s3_bucket.options
    ) as reader:
        assert reader.sql(query.format("s")).fetchall() == expected
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        db.drop("s")
    assert list(Location(location, db.storage.credentials).list()) == []


def test_a_missing_segment_object_is_named_and_never_answered_around(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    import obstore

    with _make(tmp_path / "db", s3_bucket) as db:
        db.stream("s").ingest(_call(0), durable=True)
        location = Location(db.describe("s")["location"], db.storage.credentials)
    victim = sorted(o.path for o in location.list())[0]
    obstore.delete(location.store(), victim)
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        stream = db.stream("s")
        assert any(victim in p and "missing" in p for p in stream.problems)
        with pytest.raises(SegmentFileError, match="missing"):
            db.sql("SELECT count(*) FROM s").fetchall()
        report = db.check()
        assert not report.ok and any(victim in str(f) for f in report.findings)


def test_header_copies_open_a_stream_without_a_request_per_segment(
    tmp_path: Path, s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder keeps each segment's header as written; a reopen reads no header from
    the bucket, and a copy is used only for the object it was made from."""
    import obstore

    from tesseradb.records import _files

    fetched: list[int] = []
    real = _files.RemoteSegments._fetch_header

    def counted(self: _files.RemoteSegments, segment_id: int) -> object:
        fetched.append(segment_id)
        return real(self, segment_id)

    monkeypatch.setattr(_files.RemoteSegments, "_fetch_header", counted)
    query = "SELECT call, count(*), sum(k), max(v) FROM s GROUP BY call ORDER BY call"
    with _make(tmp_path / "db", s3_bucket) as db:
        for call in range(3):
            db.stream("s").ingest(_call(call), durable=True)
        expected = db.sql(query).fetchall()
        location = Location(db.describe("s")["location"], db.storage.credentials)
    copies = tmp_path / "db" / "streams" / "s" / "headers"
    segments = sorted(o.path for o in location.list())
    assert len(list(copies.iterdir())) == len(segments) > 3
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        assert db.sql(query).fetchall() == expected
        assert fetched == []  # every header from its copy
        assert db.check().ok
    # a damaged copy and a replaced object are read from the bucket again
    first, second = sorted(copies.iterdir())[:2]
    first.write_bytes(b"not a copy")
    stored = location.read(segments[1])
    obstore.put(location.store(), segments[1], stored[:-1] + bytes([stored[-1] ^ 1]))
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        db.stream("s")
        assert sorted(fetched) == [int(first.name), int(second.name)]
        # (the replaced object is refused as damaged when read, never answered around)
        assert not db.check().ok
    # a read-only database reads the copies and writes none
    for copy in copies.iterdir():
        copy.unlink()
    fetched.clear()
    with tesseradb.connect(
        tmp_path / "db", read_only=True, storage_options=s3_bucket.options
    ) as reader:
        reader.stream("s")
        assert len(fetched) == len(segments)
    assert list(copies.iterdir()) == []


WRITER = textwrap.dedent(
    f"""
    import sys, numpy as np, pyarrow as pa, tesseradb
    db = tesseradb.connect(sys.argv[1])
    stream = db.stream("s")
    call = 0
    while True:
        k = np.arange({CALL})
        table = pa.table({{"call": np.full({CALL}, call), "k": k, "v": (k * 7919 % 1000) * 0.5 + call}})
        durable = call % 2 == 0
        stream.ingest(table, durable=durable)
        if durable:
            print(f"durable {{call}}", flush=True)
        call += 1
    """
)


def test_sigkill_keeps_every_acknowledged_call_whole(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    path = tmp_path / "db"
    _make(path, s3_bucket).close()
    env = {**os.environ, **s3_bucket.endpoint.environment()}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert writer.stdout is not None
    durable: list[int] = []
    deadline = time.monotonic() + 90
    while len(durable) < 3 and time.monotonic() < deadline:
        line = writer.stdout.readline()
        if line:
            durable.append(int(line.split()[1]))
    time.sleep(0.02 * (os.getpid() % 5))  # land somewhere inside a later call's uploads
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert len(durable) >= 3
    with tesseradb.connect(path, storage_options=s3_bucket.options) as db:
        stream = db.stream("s")
        assert not stream.problems
        counts = dict(db.sql("SELECT call, count(*) FROM s GROUP BY call").fetchall())
        assert all(n == CALL for n in counts.values()), counts  # nothing torn
        assert set(durable) <= set(counts)  # every acknowledged durable call is there
        assert db.check().ok
        # and it takes new calls
        stream.ingest(_call(999), durable=True)
        assert db.sql("SELECT count(*) FROM s WHERE call = 999").scalar() == CALL


def test_a_partitioned_stream_keeps_each_partition_s_segments_in_the_bucket(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    from tesseradb.errors import StorageError
    from tesseradb.partitioned import PartitionedStream
    from tesseradb.storage import resolve_credentials

    calls = [_call(c) for c in range(3)]
    model = pa.concat_tables(calls)
    expected = sorted(
        (r["call"], r["k"]) for r in model.filter(pa.compute.less(model["v"], 150.0)).to_pylist()
    )
    url = f"{s3_bucket.url}/taxi"
    folder = tmp_path / "parts"
    with PartitionedStream.create(
        folder, "s", DESCRIPTOR, 2, storage=url, storage_options=s3_bucket.options
    ) as parts:
        for table in calls:
            parts.ingest(table)
        parts.flush()
        got = parts.range(["call", "k"], v=(0.0, 149.999))
        assert sorted(zip(got["call"].to_pylist(), got["k"].to_pylist(), strict=True)) == expected
    assert "taxi" in (folder / "partitions.json").read_text()
    assert s3_bucket.options["secret_access_key"] not in (folder / "partitions.json").read_text()
    stored = [o.path for o in Location(url, resolve_credentials(s3_bucket.options, "t")).list()]
    for k in range(2):
        assert any(p.startswith(f"part-{k}/streams/s-") for p in stored)
        assert not list((folder / f"part-{k}").rglob("*.seg"))  # (segments only in the bucket)
    with PartitionedStream.open(folder, storage_options=s3_bucket.options) as parts:
        assert parts.num_records == 3 * CALL
        got = parts.range(["call", "k"], v=(0.0, 149.999))
        assert sorted(zip(got["call"].to_pylist(), got["k"].to_pylist(), strict=True)) == expected
    wrong = {**s3_bucket.options, "endpoint_url": "http://127.0.0.1:9"}
    with pytest.raises(StorageError, match=r"127\.0\.0\.1:9"):
        PartitionedStream.create(
            tmp_path / "x", "s", DESCRIPTOR, 2, storage=url, storage_options=wrong
        )
    assert not (tmp_path / "x").exists()
