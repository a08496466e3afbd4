"""Plain tables in the crash matrix (:mod:`tesseradb.testing.crash`): each call is one
``db.sql`` text of two INSERTs (both or neither); loads append CSV files."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

__all__ = ["TableCrashModel"]


class TableCrashModel:
    loads = True
    reads = True

    def create(self, db: Any) -> None:
        db.sql("CREATE TABLE t (batch BIGINT, j BIGINT)")

    def batch_size(self, seed: int, call: int) -> int:
        return random.Random(seed * 1_000_003 + call).randint(1, 3000)

    def write(self, db: Any, seed: int, call: int, n: int) -> bool:
        half = n // 2
        db.sql(
            f"INSERT INTO t SELECT {call}, range FROM range({half}); "
            f"INSERT INTO t SELECT {call}, range FROM range({half}, {n})"
        )
        return True

    def load_file(self, folder: Path, seed: int, call: int, n: int) -> tuple[Path, str]:
        path = folder / f"call{call}.csv"
        path.write_text("batch,j\n" + "".join(f"{call},{j}\n" for j in range(n)))
        return path, "t"

    def read(self, db: Any) -> list[tuple[int, int]]:
        rows: list[tuple[int, int]] = db.sql(
            "SELECT batch, count(*) FROM t GROUP BY batch"
        ).fetchall()
        return rows

    def initial_base(self) -> Any:
        return None

    def verify(self, db: Any, seed: int, rounds: Any, tally: Any, base: Any) -> Any:
        rows = db.sql("SELECT batch, count(*), count(DISTINCT j) FROM t GROUP BY batch")
        tally.check_batches(rows.fetchall(), {c for r in rounds for c in r.durable}, self, seed)
        return base
