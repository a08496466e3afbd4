"""Parallel triple ingest (D4M's) with writers on a Dask cluster equals it with processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tesseradb
from tesseradb.assoc import ImageSlice, parallel_ingest


@pytest.mark.parametrize("merge", ["fork", "union"])
def test_parallel_ingest_on_dask_equals_processes(tmp_path: Path, client: Any, merge: str) -> None:
    rng = np.random.default_rng(7)
    slices = []
    for i in range(6):
        path = tmp_path / f"slice{i}.npy"
        np.save(path, rng.integers(0, 4096, (64, 96)).astype(np.uint16))
        slices.append(ImageSlice(path, i))
    answers = []
    for cluster in (None, client):
        with tesseradb.connect(tmp_path / f"{merge}{cluster is None}.tdb", cluster=cluster) as db:
            arr = db.create_array(
                "vol",
                [
                    {"name": "z", "end": 6, "chunk": 1},
                    {"name": "y", "end": 64, "chunk": 64},
                    {"name": "x", "end": 96, "chunk": 96},
                ],
                {"v": "uint16"},
            )
            done = parallel_ingest(db, arr, slices, workers=3, merge=merge)
            answers.append((done.cells, done.workers, len(arr.versions()), arr.read()["v"]))
    (cells, workers, versions, values), (rcells, rworkers, rversions, rvalues) = answers
    assert (rcells, rworkers, rversions) == (cells, workers, versions) == (6 * 64 * 96, 3, 2)
    np.testing.assert_array_equal(rvalues, values)
