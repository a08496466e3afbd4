"""A Dask cluster whose workers cannot see the database directory gets the same answers.

The two workers run in their own mount namespace (``unshare -m``) with an empty
tmpfs mounted over the folder that holds the database and the local copies of the
files, and in another working directory: a worker that tried to read the directory
would find nothing. Arrays and attached files in the bucket are reached by the tasks
through the location and credentials they carry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import tesseradb
from tesseradb.storage import Location, resolve_credentials
from tests.servers import S3Bucket

distributed = pytest.importorskip("distributed", reason="these tests need dask.distributed")
ROOT = Path(__file__).resolve().parents[2]


def _can_hide_folders() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs none /mnt"], capture_output=True
    )
    return probe.returncode == 0


@pytest.fixture
def blind_workers(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """A client of a cluster whose two workers see an empty ``hidden`` folder."""
    if not _can_hide_folders():
        pytest.skip("unshare -m (a private mount namespace) is not permitted here")
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    elsewhere = tmp_path / "worker-home"
    elsewhere.mkdir()
    with distributed.LocalCluster(
        n_workers=0, processes=True, dashboard_address=":0", scheduler_port=0
    ) as cluster:
        command = (
            f"mount -t tmpfs none {hidden} && exec {sys.executable} -m distributed.cli.dask_worker "
            f"{cluster.scheduler_address} --nthreads 1 --no-dashboard "
            f"--local-directory {elsewhere}"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        workers = [
            subprocess.Popen(
                ["unshare", "-m", "sh", "-c", command],
                cwd=elsewhere,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            for _ in range(2)
        ]
        try:
            with distributed.Client(cluster) as client:
                client.wait_for_workers(2, timeout=120)
                yield client, hidden
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    worker.kill()


def _listing(folder: str) -> list[str]:
    return sorted(os.listdir(folder))


def _chunk_total(view: Any) -> tuple[Any, float]:
    return view.coords, float(view.core_data()["v"].sum())


def _answers(db: tesseradb.Database) -> dict[str, Any]:
    grid = db.array("grid")
    return {
        "map_chunks": sorted(grid.map_chunks(_chunk_total, overlap=1)),
        "regrid": grid.regrid([4, 5]).v.values.round(9).tolist(),
        "sql": db.sql("SELECT count(*), sum(i), min(v), max(v) FROM grid WHERE y < 70").fetchall(),
        "sql_groups": db.sql(
            "SELECT x // 10 AS band, count(*), sum(i) FROM grid GROUP BY band ORDER BY band"
        ).fetchall(),
        "attached": db.sql(
            "SELECT count(*), sum(code), min(mag), max(mag) FROM h.t WHERE code <> 3"
        ).fetchall(),
        "attached_files": db.sql(
            "SELECT _file, count(*) FROM h.t GROUP BY _file ORDER BY _file"
        ).fetchall(),
    }


def test_workers_without_the_directory_answer_as_threads(
    tmp_path: Path, s3_bucket: S3Bucket, blind_workers: tuple[Any, Path]
) -> None:
    client, hidden = blind_workers
    # the workers really see nothing of the folder this test writes into
    (tmp_path / "hidden" / "marker").write_text("the workers cannot see this")
    assert list(client.run(_listing, str(hidden)).values()) == [[], []]
    files = hidden / "files"
    files.mkdir()
    rng = np.random.default_rng(3)
    location = Location(f"{s3_bucket.url}/survey", resolve_credentials(s3_bucket.options, "t"))
    for part in range(3):
        path = files / f"obs{part}.h5"
        with h5py.File(path, "w") as f:
            n = 20_000 + part
            f.create_dataset("t/code", data=rng.integers(0, 7, n).astype(np.int16), chunks=(4096,))
            f.create_dataset("t/mag", data=rng.uniform(10, 30, n), chunks=(4096,))
        location.write(path.name, path.read_bytes())
    path = hidden / "db"
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options) as db:
        grid = db.create_array(
            "grid",
            [
                {"name": "y", "end": 120, "chunk": 32, "overlap": 1},
                {"name": "x", "end": 90, "chunk": 32},
            ],
            {"v": "float64", "i": "int32"},
        )
        grid[0:120, 0:90] = {
            "v": rng.normal(size=(120, 90)),
            "i": rng.integers(-1000, 1000, (120, 90)).astype(np.int32),
        }
        db.attach(f"{s3_bucket.url}/survey/obs*.h5", name="h")
        db.create_index("h.t", ["code", "mag"])  # (in the bucket: the workers read them there)
        here = _answers(db)
        db.use(client)
        started = time.monotonic()
        there = _answers(db)
        assert time.monotonic() - started < 120
        ran = [
            str(e[0])
            for w in client.run(lambda dask_worker: list(dask_worker.state.log)).values()
            for e in w
        ]
        assert any(t.startswith("_each") for t in ran), ran  # the work ran on the workers
        db.use(None)
    for key, value in here.items():
        assert there[key] == value, key
