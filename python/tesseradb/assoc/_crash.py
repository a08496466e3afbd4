"""Associative tables in the crash matrix (:mod:`tesseradb.testing.crash`): each call puts a
row of triples (row key: the call; column keys 0 .. n-1), one run; no loads."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

__all__ = ["AssocCrashModel"]


class AssocCrashModel:
    loads = False
    reads = True

    def create(self, db: Any) -> None:
        db.create_assoc_table("a")

    def batch_size(self, seed: int, call: int) -> int:
        return random.Random(seed * 1_000_003 + call).randint(1, 3000)

    def write(self, db: Any, seed: int, call: int, n: int) -> bool:
        import numpy as np

        table = db.assoc_table("a")
        table.put_triples(np.full(n, float(call)), np.arange(n, dtype=np.float64), 1.0)
        return True

    def load_file(self, folder: Path, seed: int, call: int, n: int) -> tuple[Path, str]:
        raise NotImplementedError("associative tables are not loaded by db.load")

    def read(self, db: Any) -> list[tuple[int, int]]:
        rows: list[tuple[int, int]] = db.sql(
            "SELECT row::BIGINT, count(*) FROM a GROUP BY row"
        ).fetchall()
        return rows

    def initial_base(self) -> Any:
        return None

    def verify(self, db: Any, seed: int, rounds: Any, tally: Any, base: Any) -> Any:
        rows = db.sql("SELECT row::BIGINT, count(*), count(DISTINCT col) FROM a GROUP BY row")
        tally.check_batches(rows.fetchall(), {c for r in rounds for c in r.durable}, self, seed)
        return base
