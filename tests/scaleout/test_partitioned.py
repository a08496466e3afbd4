"""Partitioned streams (MDDS Figure 1): partitions ingested by their own owners, queries fanned out."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import tesseradb
from tesseradb.errors import InvalidArgumentError, ObjectExistsError
from tesseradb.partitioned import PartitionedStream

DESCRIPTOR = {
    "fields": [
        {"name": "t", "type": "int64"},
        {"name": "lat", "type": "double"},
        {"name": "lon", "type": "double"},
        {"name": "n", "type": "int32"},
    ],
    "index": ["lat", "lon"],
}


def _batch(seed: int, n: int = 20_000) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "t": np.arange(n, dtype=np.int64) + seed * n,
            "lat": rng.uniform(40.5, 41.0, n),
            "lon": rng.uniform(-74.3, -73.7, n),
            "n": rng.integers(1, 7, n).astype(np.int32),
        }
    )


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by("t")


@pytest.mark.parametrize("where", ["threads", "dask"])
def test_partitions_answer_as_one_stream(tmp_path: Path, where: str, request: Any) -> None:
    cluster = request.getfixturevalue("client") if where == "dask" else None
    batches = [_batch(s) for s in range(5)]
    with tesseradb.connect(tmp_path / "one.tdb") as db:
        one = db.create_stream("taxi", DESCRIPTOR)
        for b in batches:
            one.ingest(b)
        want = _sorted(one.range(lat=(40.7, 40.75), lon=(-74.0, -73.9)))
        want_n = _sorted(one.range(["t", "n"], n=(2, 3)))
    with PartitionedStream.create(tmp_path / "parts", "taxi", DESCRIPTOR, 3, cluster) as parts:
        assert sum(parts.ingest(b) for b in batches) == 100_000
        counts = parts.records_per_partition()
        assert sum(counts) == parts.num_records == 100_000
        assert max(counts) - min(counts) <= 2  # the dealer's runs balance the partitions
        assert _sorted(parts.range(lat=(40.7, 40.75), lon=(-74.0, -73.9))).equals(want)
        parts.flush()
    # every partition is a database of its own, with its writer lock held by its owner
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == [
        "part-0",
        "part-1",
        "part-2",
        "partitions.json",
    ]
    with PartitionedStream.open(tmp_path / "parts", cluster) as again:
        assert again.num_records == 100_000
        assert _sorted(again.range(["t", "n"], n=(2, 3))).equals(want_n)


def test_owners_live_on_the_workers(tmp_path: Path, client: Any) -> None:
    with PartitionedStream.create(tmp_path / "p", "s", DESCRIPTOR, 2, client) as parts:
        parts.ingest(_batch(1))
        # each worker process holds one partition's writer lock: the client cannot write it
        with pytest.raises(tesseradb.errors.DatabaseLockedError):
            tesseradb.connect(tmp_path / "p" / "part-0")
        holders = client.run(
            lambda dask_worker: sorted(type(a).__name__ for a in dask_worker.state.actors.values())
        )
        assert sorted(holders.values()) == [["PartitionOwner"], ["PartitionOwner"]]


def test_queries_while_ingesting(tmp_path: Path) -> None:
    with PartitionedStream.create(tmp_path / "p", "s", DESCRIPTOR, 2) as parts:
        seen: list[int] = []
        stop = threading.Event()

        def query() -> None:
            while not stop.is_set():
                seen.append(parts.range(["t"], lat=(40.5, 41.0)).num_rows)

        reader = threading.Thread(target=query)
        reader.start()
        for s in range(6):
            parts.ingest(_batch(s, 5000))
        stop.set()
        reader.join()
        assert seen == sorted(seen)  # a query sees whole calls, never fewer records later
        assert parts.range(["t"], lat=(40.5, 41.0)).num_rows == 30_000


def test_bad_input_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="partitions must be a positive int"):
        PartitionedStream.create(tmp_path / "a", "s", DESCRIPTOR, 0)
    with pytest.raises(tesseradb.errors.DescriptorError):
        PartitionedStream.create(tmp_path / "b", "s", {"fields": []}, 2)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    with pytest.raises(InvalidArgumentError, match="no partitioned stream"):
        PartitionedStream.open(tmp_path / "c")
    with (
        PartitionedStream.create(tmp_path / "d", "s", DESCRIPTOR, 1) as parts,
        pytest.raises(InvalidArgumentError, match="pyarrow Table"),
    ):
        parts.ingest([1, 2, 3])
    with pytest.raises(ObjectExistsError):
        PartitionedStream.create(tmp_path / "d", "s", DESCRIPTOR, 1)
