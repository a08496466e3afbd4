"""db.load from and db.export to s3:// URLs equal the same with local files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tesseradb
from tesseradb.errors import CancelledError, ExportError, LoadError
from tesseradb.progress import Cancel
from tesseradb.storage import Location, resolve_credentials
from tests.servers import S3Bucket


def _bucket(bucket: S3Bucket, folder: str = "") -> Location:
    url = f"{bucket.url}/{folder}" if folder else bucket.url
    return Location(url, resolve_credentials(bucket.options, "test"))


def test_loads_from_a_bucket_equal_local_loads(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    volume = np.random.default_rng(2).random((6, 20, 30), dtype=np.float32)
    np.save(inputs / "volume.npy", volume)
    for part in range(3):
        pq.write_table(
            pa.table({"t": np.arange(100.0) + 100 * part, "v": np.full(100, part)}),
            inputs / f"part_{part}.parquet",
        )
    (inputs / "people.jsonl").write_text('{"name": "ada", "age": 36}\n{"name": "bo", "age": 7}\n')
    lab = _bucket(s3_bucket, "inputs")
    for file in inputs.iterdir():
        lab.write(file.name, file.read_bytes())
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        pairs = [
            (str(inputs / "volume.npy"), f"{s3_bucket.url}/inputs/volume.npy", {}),
            (
                str(inputs / "part_*.parquet"),
                f"{s3_bucket.url}/inputs/part_*.parquet",
                {"kind": "table"},
            ),
            (str(inputs / "people.jsonl"), f"{s3_bucket.url}/inputs/people.jsonl", {}),
        ]
        for number, (local, remote, options) in enumerate(pairs):
            here = db.load(local, into=f"here{number}", **options)
            seen: list[object] = []
            there = db.load(remote, into=f"there{number}", progress=seen.append, **options)
            assert (there.kind, there.items, there.files) == (here.kind, here.items, here.files)
            assert seen  # the download and the load reported progress
        np.testing.assert_array_equal(db.array("there0")[0:6, 0:20, 0:30]["value"], volume)
        for number in range(2):
            assert (
                db.sql(f"SELECT * FROM there{number} ORDER BY ALL").fetchall()
                == db.sql(f"SELECT * FROM here{number} ORDER BY ALL").fetchall()
            )
        assert db.collection("there2").count() == 2
        with pytest.raises(LoadError, match="no such object"):
            db.load(f"{s3_bucket.url}/inputs/missing.npy", into="nothing")
        with pytest.raises(LoadError, match="matches no object"):
            db.load(f"{s3_bucket.url}/inputs/*.fits", into="nothing")
        assert db.catalog.get("nothing") is None


def test_a_cancelled_download_keeps_nothing(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    big = tmp_path / "big.npy"
    np.save(big, np.zeros((64, 1024, 1024), dtype=np.uint8))  # 64 MiB: several pieces
    _bucket(s3_bucket).upload(big, "big.npy")
    cancel = Cancel()

    def stop_at_first(event: object) -> None:
        if getattr(event, "done", 0):
            cancel.cancel()

    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        with pytest.raises(CancelledError):
            db.load(f"{s3_bucket.url}/big.npy", into="big", progress=stop_at_first, cancel=cancel)
        assert db.catalog.get("big") is None
    import tempfile

    assert not list(Path(tempfile.gettempdir()).glob("tessera-download-*/big.npy"))


def test_exports_to_a_bucket(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        img = db.create_array(
            "img",
            [{"name": "y", "end": 40, "chunk": 16}, {"name": "x", "end": 30, "chunk": 16}],
            {"v": "float64"},
        )
        img[0:40, 0:30] = {"v": np.arange(1200.0).reshape(40, 30)}
        db.sql("CREATE TABLE plain AS SELECT range AS i, range * 0.5 AS f FROM range(500)")
        store = f"{s3_bucket.url}/out/img.zarr"
        done = db.export("img", store)
        assert done.target == store
        table = f"{s3_bucket.url}/out/plain.parquet"
        db.export("plain", table)
        with pytest.raises(ExportError, match="exists; to replace it"):
            db.export("plain", table)
        db.sql("INSERT INTO plain VALUES (1000, 1.5)")
        db.export("plain", table, overwrite=True)
        # read back through the bucket: the store as an array, the table as rows
        back = db.load(store, into="img_back")
        assert back.items == 1200
        np.testing.assert_array_equal(db.array("img_back")[0:40, 0:30]["v"], img[0:40, 0:30]["v"])
        rows = db.load(table, into="plain_back", kind="table")
        assert rows.items == 501
    out = _bucket(s3_bucket, "out")
    assert any(o.path.startswith("img.zarr/") for o in out.list())
    assert not any(o.path.endswith(".partial") for o in out.list())


def test_the_command_line_loads_and_exports_with_the_aws_environment(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    import os
    import subprocess
    import sys

    tessera = str(Path(sys.executable).with_name("tessera"))
    options = s3_bucket.options
    env = {**os.environ, **s3_bucket.endpoint.environment()}
    np.save(tmp_path / "grid.npy", np.arange(24.0).reshape(4, 6))
    _bucket(s3_bucket).upload(tmp_path / "grid.npy", "in/grid.npy")
    db = str(tmp_path / "db")

    def run(*args: str) -> str:
        done = subprocess.run(
            [tessera, *args], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        return done.stdout

    run("init", db, "--storage", f"{s3_bucket.url}/lab")
    assert "created array grid" in run("load", db, f"{s3_bucket.url}/in/grid.npy")
    assert any(o.path.startswith("lab/arrays/grid-") for o in _bucket(s3_bucket).list())
    run("export", db, "SELECT sum(value) AS total FROM grid", f"{s3_bucket.url}/out/total.csv")
    assert _bucket(s3_bucket, "out").read("total.csv").decode().split() == ["total", "276.0"]
    failed = subprocess.run(
        [tessera, "load", db, "s3://no-such-bucket-anywhere/x.npy"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert failed.returncode != 0 and "the bucket does not exist" in failed.stderr
    assert "Traceback" not in failed.stderr and options["secret_access_key"] not in failed.stderr
