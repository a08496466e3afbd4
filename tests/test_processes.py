"""Processes: the Rust kernels work in a forked child (their thread pool is per process)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import tesseradb


def _count_in_child(path: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    with tesseradb.connect(path, read_only=True) as db:
        queue.put(db.sql("SELECT count(*) FROM s WHERE a < 0.5").fetchall())


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_child_process_queries_a_stream_under_every_start_method(
    tmp_path: Path, method: str
) -> None:
    # Regression: rayon's global pool does not survive fork(); a forked child's
    # first parallel kernel (a kd-tree search here) waited for ever.
    rng = np.random.default_rng(0)
    with tesseradb.connect(tmp_path / "db") as db:
        stream = db.create_stream(
            "s",
            {"fields": [{"name": "a", "type": "double"}], "index": ["a"]},
            segment_bytes=4096,
        )
        stream.ingest(pa.table({"a": rng.random(50_000)}), durable=True)
        expected = db.sql("SELECT count(*) FROM s WHERE a < 0.5").fetchall()  # pool started
        context = multiprocessing.get_context(method)
        queue = context.Queue()
        child = context.Process(target=_count_in_child, args=(str(tmp_path / "db"), queue))
        child.start()
        child.join(60)
        if child.is_alive():
            child.kill()
            pytest.fail(f"the {method} child hung")
        assert child.exitcode == 0
        assert queue.get(timeout=5) == expected
