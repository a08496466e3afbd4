"""Processes: the Rust kernels work in a forked child (their thread pool is per process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The parent runs in an interpreter of its own: a pytest worker may hold other
# libraries' threads (TileDB's, say) that make fork() unsafe for reasons that
# are not ours.
_PARENT = textwrap.dedent(
    """
    import multiprocessing
    import sys

    import numpy as np
    import pyarrow as pa

    import tesseradb


    def count_in_child(path, queue):
        with tesseradb.connect(path, read_only=True) as db:
            queue.put(db.sql("SELECT count(*) FROM s WHERE a < 0.5").fetchall())


    if __name__ == "__main__":
        path, method = sys.argv[1], sys.argv[2]
        rng = np.random.default_rng(0)
        with tesseradb.connect(path) as db:
            stream = db.create_stream(
                "s",
                {"fields": [{"name": "a", "type": "double"}], "index": ["a"]},
                segment_bytes=4096,
            )
            stream.ingest(pa.table({"a": rng.random(50_000)}), durable=True)
            expected = db.sql("SELECT count(*) FROM s WHERE a < 0.5").fetchall()  # pool started
            context = multiprocessing.get_context(method)
            queue = context.Queue()
            child = context.Process(target=count_in_child, args=(path, queue))
            child.start()
            child.join(60)
            if child.is_alive():
                child.kill()
                sys.exit(f"the {method} child hung")
            if child.exitcode != 0:
                sys.exit(f"the {method} child exited with {child.exitcode}")
            got = queue.get(timeout=5)
            if got != expected:
                sys.exit(f"the {method} child counted {got}, the parent {expected}")
    """
)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_child_process_queries_a_stream_under_every_start_method(
    tmp_path: Path, method: str
) -> None:
    # Regression: rayon's global pool does not survive fork(); a forked child's
    # first parallel kernel (a kd-tree search here) waited for ever.
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "db"), method],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
