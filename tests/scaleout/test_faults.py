"""Faults on a Dask cluster: a worker killed mid-task is retried and the answer is whole; a
task that kills every worker, or a cluster lost mid-operation, commits nothing."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pytest

import tesseradb
from tesseradb.assoc import parallel_ingest
from tesseradb.errors import ClusterError

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow


def _slow_source(i: int, delay: float) -> tuple[Any, Any]:
    time.sleep(delay)
    rows = np.arange(100, dtype=np.int64)
    return (np.full(100, i), rows), rows.astype(np.float64) + i


def _suicide(i: int) -> tuple[Any, Any]:
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


def _slow_sum(view: Any) -> float:
    time.sleep(0.4)
    return float(view.core_data()["v"].sum())


@pytest.fixture
def own_client() -> Iterator[Any]:
    """A cluster of its own (its workers get killed), retrying a killed task once only."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        client = distributed.Client(cluster)
        try:
            yield client
        finally:
            client.close()
            cluster.close()


def _target(db: tesseradb.Database) -> Any:
    return db.create_array(
        "vol",
        [{"name": "i", "end": 8, "chunk": 1}, {"name": "r", "end": 100, "chunk": 100}],
        {"v": "float64"},
    )


def _kill_one_worker_after(client: Any, seconds: float) -> threading.Thread:
    pids = list(client.run(os.getpid).values())

    def kill() -> None:
        time.sleep(seconds)
        os.kill(pids[0], signal.SIGKILL)

    thread = threading.Thread(target=kill)
    thread.start()
    return thread


def test_a_worker_killed_mid_ingest_is_retried_and_the_version_is_whole(
    tmp_path: Path, own_client: Any
) -> None:
    with tesseradb.connect(tmp_path / "k.tdb", cluster=own_client) as db:
        arr = _target(db)
        sources = [functools.partial(_slow_source, i, 1.0) for i in range(8)]
        killer = _kill_one_worker_after(own_client, 1.5)
        done = parallel_ingest(db, arr, sources, workers=8)
        killer.join()
        assert done.cells == 800
        assert len(arr.versions()) == 2  # created, then the one ingest
        expected = np.arange(100.0)[None, :] + np.arange(8)[:, None]
        np.testing.assert_array_equal(arr.read()["v"], expected)
        assert db.check().ok


def test_a_worker_killed_mid_map_chunks_gives_the_whole_answer(
    tmp_path: Path, own_client: Any
) -> None:
    with tesseradb.connect(tmp_path / "m.tdb") as db:
        arr = _target(db)
        arr[0:8, 0:100] = {"v": np.arange(800.0).reshape(8, 100)}
        local = arr.map_chunks(_slow_sum)
        db.use(own_client)
        killer = _kill_one_worker_after(own_client, 0.6)
        remote = arr.map_chunks(_slow_sum)
        killer.join()
        assert remote == local


def test_a_task_that_kills_its_workers_commits_nothing(tmp_path: Path, own_client: Any) -> None:
    with tesseradb.connect(tmp_path / "s.tdb", cluster=own_client) as db:
        arr = _target(db)
        head = arr.version
        with pytest.raises(ClusterError, match=r"killed every worker.*nothing was committed"):
            parallel_ingest(db, arr, [functools.partial(_suicide, 0)], workers=1)
        assert arr.version == head and len(arr.versions()) == 1
        assert db.check().ok


def test_a_cluster_lost_mid_operation_is_a_clear_error_and_nothing_changes(
    tmp_path: Path,
) -> None:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    client = distributed.Client(cluster)
    try:
        with tesseradb.connect(tmp_path / "l.tdb", cluster=client) as db:
            arr = _target(db)
            arr[0:8, 0:100] = {"v": np.ones((8, 100))}
            head = arr.version
            closer = threading.Timer(1.5, cluster.close)
            closer.start()
            sources = [functools.partial(_slow_source, i, 1.0) for i in range(8)]
            with pytest.raises(ClusterError, match=r"is lost .*nothing was committed"):
                parallel_ingest(db, arr, sources, workers=8)
            closer.join()
            assert arr.version == head
            with pytest.raises(ClusterError, match="is lost"):
                arr.aggregate("sum")
            db.use(None)  # back to threads: the database works as before
            assert float(arr.aggregate("sum").v) == 800.0
            assert db.check().ok
    finally:
        client.close()
        cluster.close()
