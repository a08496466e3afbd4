"""Streams in the crash matrix (:mod:`tesseradb.testing.crash`): each call ingests a batch of
records tagged with the call, every other API call durably; loads append CSV files."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

__all__ = ["StreamCrashModel"]


class StreamCrashModel:
    loads = True
    reads = True

    def create(self, db: Any) -> None:
        descriptor = {
            "fields": [{"name": "batch", "type": "int64"}, {"name": "j", "type": "int64"}],
            "index": ["batch", "j"],
        }
        db.create_stream("s", descriptor, segment_bytes=4096)  # (small: many segments)

    def batch_size(self, seed: int, call: int) -> int:
        return random.Random(seed * 1_000_003 + call).randint(1, 3000)

    def write(self, db: Any, seed: int, call: int, n: int) -> bool:
        import numpy as np
        import pyarrow as pa

        records = pa.table(
            {"batch": pa.array([call] * n, pa.int64()), "j": np.arange(n, dtype=np.int64)}
        )
        durable = (call // 3) % 2 == 0  # (of the API's calls, every other one)
        db.stream("s").ingest(records, durable=durable)
        return durable

    def load_file(self, folder: Path, seed: int, call: int, n: int) -> tuple[Path, str]:
        path = folder / f"call{call}.csv"
        path.write_text("batch,j\n" + "".join(f"{call},{j}\n" for j in range(n)))
        return path, "s"

    def read(self, db: Any) -> list[tuple[int, int]]:
        rows: list[tuple[int, int]] = db.sql(
            "SELECT batch, count(*) FROM s GROUP BY batch"
        ).fetchall()
        return rows

    def initial_base(self) -> Any:
        return None

    def verify(self, db: Any, seed: int, rounds: Any, tally: Any, base: Any) -> Any:
        rows = db.sql("SELECT batch, count(*), count(DISTINCT j) FROM s GROUP BY batch")
        tally.check_batches(rows.fetchall(), {c for r in rounds for c in r.durable}, self, seed)
        return base
