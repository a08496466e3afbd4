"""Arrays whose repositories live in an S3 bucket (a real S3 HTTP server on loopback).

What was acknowledged is what a reopened database, a reader and a writer killed with
SIGKILL leave behind, checked against a numpy model; the local directory stays small;
a drop deletes the array's objects; credentials never show.
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
import pytest

import tesseradb
from tesseradb.errors import InvalidArgumentError, StorageError
from tesseradb.storage import Location, resolve_credentials
from tests.servers import S3Bucket

DIMS = [{"name": "y", "end": 40, "chunk": 16}, {"name": "x", "end": 30, "chunk": 16}]


def _objects(bucket: S3Bucket, url: str) -> list[str]:
    location = Location(url, resolve_credentials(bucket.options, "test"))
    return [o.path for o in location.list()]


def _local_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_an_array_in_the_database_storage_keeps_what_was_written(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    path = tmp_path / "db"
    storage = f"{s3_bucket.url}/archive"
    rng = np.random.default_rng(7)
    model = np.zeros((40, 30))
    with tesseradb.connect(path, storage=storage, storage_options=s3_bucket.options) as db:
        img = db.create_array("img", DIMS, {"v": "float64"})
        for _ in range(4):  # boxes across chunk edges, each its own version
            y, x = rng.integers(0, 30), rng.integers(0, 20)
            box = rng.normal(size=(10, 10))
            img.write((int(y), int(x)), {"v": box})
            model[y : y + 10, x : x + 10] = box
        first = img.versions()[-2].id  # the first write's version
        location = db.catalog.get("img").spec["location"]
        assert location.startswith(f"{storage}/arrays/img-")
        np.testing.assert_array_equal(img[:, :]["v"], model)
    # the bulk data is in the bucket; the directory holds the catalog and a lock file
    assert not (path / "arrays" / "img" / "repo").exists()
    assert any("/chunks/" in p or p.startswith("manifests/") for p in _objects(s3_bucket, location))

    with tesseradb.connect(path, storage_options=s3_bucket.options) as db:
        img = db.array("img")
        np.testing.assert_array_equal(img[:, :]["v"], model)
        (total,) = db.sql("SELECT sum(v) FROM img").fetchone()
        assert total == pytest.approx(model.sum())
        assert len(img.versions()) == 5  # created and four writes
        assert db.array("img", version=first)[:, :]["v"].any()
        assert db.describe("img")["location"] == location
        report = db.check()
        assert report.ok, report
    with tesseradb.connect(path, read_only=True, storage_options=s3_bucket.options) as reader:
        np.testing.assert_array_equal(reader.array("img")[:, :]["v"], model)


def test_a_dropped_array_leaves_no_objects(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    with tesseradb.connect(
        tmp_path / "db", storage=s3_bucket.url, storage_options=s3_bucket.options
    ) as db:
        db.create_array("a", DIMS, {"v": "int32"})[0:5, 0:5] = {"v": np.ones((5, 5), np.int32)}
        location = db.catalog.get("a").spec["location"]
        assert _objects(s3_bucket, location)
        db.drop("a")
        assert _objects(s3_bucket, location) == []
        db.create_array("a", DIMS, {"v": "int32"})  # the name is free again, in a new prefix
        assert db.catalog.get("a").spec["location"] != location
        assert db.array("a")[:, :]["v"].sum() == 0


def test_one_array_elsewhere_and_the_rest_local(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    target = f"{s3_bucket.url}/one/img.icechunk"
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        local = db.create_array("local", DIMS, {"v": "int64"})
        remote = db.create_array("remote", DIMS, {"v": "int64"}, location=target)
        local[0:3, 0:3] = {"v": np.full((3, 3), 2)}
        remote[0:3, 0:3] = {"v": np.full((3, 3), 5)}
        assert db.catalog.get("remote").spec["location"] == target
        assert "location" not in db.catalog.get("local").spec
        rows = db.sql(
            "SELECT l.v + r.v FROM local l JOIN remote r USING (y, x) WHERE l.y < 3 AND l.x < 3"
        ).fetchall()
        assert rows == [(7,)] * 9
        # a location that holds objects already is refused, and nothing is made
        with pytest.raises(StorageError, match="already holds objects"):
            db.create_array("again", DIMS, {"v": "int64"}, location=target)
        assert "again" not in db.arrays()


def test_one_stream_and_one_associative_table_elsewhere(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    """create_stream and create_assoc_table take a location of their own too."""
    import pyarrow as pa

    from tesseradb.storage import Location, resolve_credentials

    descriptor = {"fields": [{"name": "k", "type": "int64"}], "index": ["k"]}
    streams_at = f"{s3_bucket.url}/one/stream"
    tables_at = f"{s3_bucket.url}/one/assoc"
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        stream = db.create_stream("s", descriptor, location=streams_at, segment_bytes=65_536)
        stream.ingest(pa.table({"k": np.arange(50_000)}), durable=True)
        table = db.create_assoc_table("t", location=tables_at)
        table.put_triples(["a", "b"], ["x", "y"], [1.0, 2.0])
        assert db.catalog.get("s").spec["location"] == streams_at
        assert db.catalog.get("t").spec["location"] == tables_at
        for where in (streams_at, tables_at):
            assert list(Location(where, resolve_credentials(s3_bucket.options, "t")).list())
        with pytest.raises(StorageError, match="already holds objects"):
            db.create_stream("again", descriptor, location=streams_at)
        with pytest.raises(StorageError, match="already holds objects"):
            db.create_assoc_table("again", location=tables_at)
        assert "again" not in [o.name for o in db.catalog.objects()]
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        assert db.sql("SELECT count(*), sum(k) FROM s").fetchone() == (50_000, 1_249_975_000)
        assert {(r, c): v for r, c, v in db.assoc_table("t")[:, :].triples()} == {
            ("a", "x"): 1.0,
            ("b", "y"): 2.0,
        }


def test_the_recorded_storage_is_kept(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options):
        pass
    with pytest.raises(InvalidArgumentError, match="keeps its bulk data in s3://"):
        tesseradb.connect(path, storage=f"{s3_bucket.url}/other", storage_options=s3_bucket.options)
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options) as db:
        assert db.storage.url == s3_bucket.url
    local = tmp_path / "local"
    tesseradb.connect(local).close()
    with pytest.raises(InvalidArgumentError, match="keeps its bulk data in its own directory"):
        tesseradb.connect(local, storage=s3_bucket.url, storage_options=s3_bucket.options)


@pytest.mark.parametrize(
    ("storage", "error", "message"),
    [
        ("gs://bucket/x", StorageError, "unknown storage scheme gs://"),
        ("ftp://host/x", StorageError, "unknown storage scheme ftp://"),
        ("s3://x/y", InvalidArgumentError, "not a valid S3 bucket name"),
        ("s3://key:secret@bucket-name/y", InvalidArgumentError, "carries no credentials"),
        ("s3://no-such-bucket-here/y", StorageError, "the bucket does not exist"),
    ],
)
def test_a_bad_storage_url_makes_nothing(
    tmp_path: Path, s3_bucket: S3Bucket, storage: str, error: type[Exception], message: str
) -> None:
    path = tmp_path / "db"
    with pytest.raises(error, match=message) as caught:
        tesseradb.connect(path, storage=storage, storage_options=s3_bucket.options)
    assert "secret" not in str(caught.value)
    assert not path.exists()


def test_an_unreachable_endpoint_is_a_storage_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    options = {
        "endpoint_url": f"http://127.0.0.1:{port}",
        "access_key_id": "k",
        "secret_access_key": "s3cr3t-value",
    }
    started = time.monotonic()
    with pytest.raises(StorageError, match=f"127.0.0.1:{port}") as caught:
        tesseradb.connect(tmp_path / "db", storage="s3://some-bucket", storage_options=options)
    assert time.monotonic() - started < 30  # retried with backoff, then given up
    assert "s3cr3t-value" not in str(caught.value)
    assert not (tmp_path / "db").exists()


def test_credentials_never_show(
    tmp_path: Path, s3_bucket: S3Bucket, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    secret = s3_bucket.options["secret_access_key"]
    path = tmp_path / "db"
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options) as db:
        db.create_array("a", DIMS, {"v": "int8"})
        db.drop("a")
        db.create_array("a", DIMS, {"v": "int8"})
        shown = [repr(db.storage.default), repr(db.storage.credentials), str(db.describe("a"))]
        assert not any(secret in text for text in shown)
    for file in path.rglob("*"):
        if file.is_file():
            assert secret.encode() not in file.read_bytes(), file
    with pytest.raises(
        InvalidArgumentError, match="storage option 'secret_access_key' must be a str"
    ) as caught:
        tesseradb.connect(path, storage_options={**s3_bucket.options, "secret_access_key": 12345})
    assert "12345" not in str(caught.value)
    with pytest.raises(InvalidArgumentError, match="unknown storage option"):
        tesseradb.connect(path, storage_options={"password": secret})
    assert secret not in caplog.text  # (DEBUG: every logger, every record)


def test_credentials_from_the_environment_and_a_profile(
    tmp_path: Path, s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = s3_bucket.options
    monkeypatch.setenv("AWS_ENDPOINT_URL", options["endpoint_url"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", options["access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options["secret_access_key"])
    monkeypatch.setenv("AWS_REGION", options["region"])
    with tesseradb.connect(tmp_path / "env", storage=s3_bucket.url) as db:
        db.create_array("a", DIMS, {"v": "int8"})[0, 0] = {"v": np.int8(3)}
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.delenv(name)
    (tmp_path / "credentials").write_text(
        "[lab]\naws_access_key_id = {access_key_id}\naws_secret_access_key = {secret_access_key}\n".format(
            **options
        )
    )
    (tmp_path / "config").write_text(
        "[profile lab]\nregion = {region}\nendpoint_url = {endpoint_url}\n".format(**options)
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "lab")
    with tesseradb.connect(tmp_path / "env") as db:
        assert db.array("a")[0, 0]["v"] == 3
    monkeypatch.setenv("AWS_PROFILE", "nobody")
    with pytest.raises(InvalidArgumentError, match="the AWS profile 'nobody' is in neither"):
        tesseradb.connect(tmp_path / "env")


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, tesseradb
    db = tesseradb.connect(sys.argv[1])
    arr = db.array("k")
    i = 0
    while True:
        i += 1
        arr[0:40, 0:30] = {"v": np.full((40, 30), i, dtype=np.int64)}
        print(i, flush=True)
    """
)


def test_sigkill_mid_upload_keeps_every_acknowledged_write(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options) as db:
        db.create_array("k", DIMS, {"v": "int64"})
    options = s3_bucket.options
    env = {**os.environ, **s3_bucket.endpoint.environment()}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    acknowledged = 0
    deadline = time.monotonic() + 60
    while acknowledged < 3 and time.monotonic() < deadline:
        acknowledged = int(proc.stdout.readline() or acknowledged)
    time.sleep(0.03 * (os.getpid() % 5))  # land somewhere inside a later upload
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert acknowledged >= 3
    with tesseradb.connect(path, storage_options=options) as db:
        arr = db.array("k")
        values = arr[:, :]["v"]
        assert values.min() == values.max() >= acknowledged  # one whole version, never a mix
        arr[0, 0] = {"v": np.int64(-1)}  # and the array takes new writes
        assert arr[0, 0]["v"] == -1
        assert db.check().ok


def test_a_task_opens_the_bucket_without_the_database_directory(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    import pickle

    path = tmp_path / "db"
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options) as db:
        img = db.create_array("img", DIMS, {"v": "float64"})
        img[0:40, 0:30] = {"v": np.arange(1200.0).reshape(40, 30)}
        from tesseradb.arrays._handles import ArraySnapshot

        # what the executor sends a Dask worker with each per-chunk task
        snapshot = ArraySnapshot(img.name, img.schema, img._repo, img._read_session())
        sent = pickle.dumps(snapshot)
    # (the database is closed and its directory gone: the task has only the bucket)
    import shutil

    shutil.rmtree(path)
    task = pickle.loads(sent)
    np.testing.assert_array_equal(task[:, :]["v"], np.arange(1200.0).reshape(40, 30))


def test_the_server_never_shows_credentials(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    import httpx

    from tesseradb.server import ServerThread, Users, parse_rights

    secret = s3_bucket.options["secret_access_key"]
    key_id = s3_bucket.options["access_key_id"]
    with tesseradb.connect(
        tmp_path / "db", storage=s3_bucket.url, storage_options=s3_bucket.options
    ) as db:
        db.create_array("img", DIMS, {"v": "float32"})[0:4, 0:4] = {"v": np.ones((4, 4), "f4")}
        token = Users(db.path).add("admin", parse_rights(["admin"]))
        server = ServerThread(db, statement_seconds=5.0)
        try:
            with httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
            ) as client:
                answers = [
                    client.get("/objects"),
                    client.get("/objects/img"),
                    client.get("/info") if client.get("/info").status_code == 200 else None,
                    client.post("/sql", json={"sql": "SELECT * FROM img LIMIT 3"}),
                    client.post("/sql", json={"sql": "SELECT * FROM no_such_table"}),
                ]
        finally:
            server.stop()
    shown = [a.text for a in answers if a is not None]
    assert any("s3://" in text for text in shown)  # the location is shown ...
    assert not any(secret in text or key_id in text for text in shown)  # ... its keys never


def test_check_reads_the_bucket_and_says_what_it_could_not_reach(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    import obstore

    path = tmp_path / "db"
    values = np.random.default_rng(1).normal(size=4000)
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options) as db:
        db.create_array("a", [{"name": "i", "end": 4000, "chunk": 1000}], {"v": "float64"})
        db.array("a")[0:4000] = {"v": values}
        location = Location(db.catalog.get("a").spec["location"], db.storage.credentials)
        assert db.check().ok
    unreachable = {**s3_bucket.options, "endpoint_url": "http://127.0.0.1:9"}
    with tesseradb.connect(path, storage_options=unreachable) as db:
        report = db.check()
        assert not report.ok
        assert "the endpoint cannot be reached" in str(report.findings[0])
        assert unreachable["secret_access_key"] not in str(report.findings[0])
    # a chunk object deleted behind the database's back: found, named, repaired to fill
    # (a chunk of 1,000 random doubles stays about 8,000 bytes compressed; the dimension's
    # coordinates, 0..3999 in one chunk, compress to other sizes)
    sizes = {o.path: o.size for o in location.list() if o.path.startswith("chunks/")}
    data = [path for path, size in sizes.items() if 7_500 <= size <= 8_200]
    assert len(data) == 4, sizes
    chunk = data[0]
    obstore.delete(location.store(), chunk)
    with tesseradb.connect(path, storage_options=s3_bucket.options) as db:
        report = db.check()
        assert not report.ok
        assert "NoSuchKey" in str(report.findings[0]) and "chunk (" in str(report.findings[0])
        db.check(repair=True)
        after = db.array("a")[0:4000]["v"]
        kept = after != 0
        assert kept.sum() == 3000  # one chunk lost (now the fill value), the rest intact
        np.testing.assert_array_equal(after[kept], values[kept])
        assert db.check().ok
