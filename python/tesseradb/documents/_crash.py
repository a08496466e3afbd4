"""Collections in the crash matrix (:mod:`tesseradb.testing.crash`): each call inserts a batch
of objects tagged with the call (one transaction); loads append JSON lines files."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

__all__ = ["CollectionCrashModel"]


class CollectionCrashModel:
    loads = True
    reads = True

    def create(self, db: Any) -> None:
        db.create_collection("c")

    def batch_size(self, seed: int, call: int) -> int:
        # (fewer than the others: an object is several rows, and each reopen counts them all)
        return random.Random(seed * 1_000_003 + call).randint(1, 300)

    def write(self, db: Any, seed: int, call: int, n: int) -> bool:
        db.collection("c").insert_many([{"batch": call, "j": j} for j in range(n)])
        return True

    def load_file(self, folder: Path, seed: int, call: int, n: int) -> tuple[Path, str]:
        path = folder / f"call{call}.jsonl"
        path.write_text("".join(json.dumps({"batch": call, "j": j}) + "\n" for j in range(n)))
        return path, "c"

    def read(self, db: Any) -> list[tuple[int, int]]:
        # Argo/SQL counts on the backend, rebuilding nothing
        found = db.argo("SELECT batch, COUNT(*) FROM c GROUP BY batch")
        return [(d["batch"], d["count(*)"]) for d in found]

    def initial_base(self) -> Any:
        return 0  # the objects the earlier writers left

    def verify(self, db: Any, seed: int, rounds: Any, tally: Any, base: Any) -> Any:
        # counted on the backend, nothing rebuilt: this writer's calls one by one, and the
        # earlier writers' through the total (``base`` objects) (a count only: Argo/SQL's
        # MIN/MAX/SUM join every value of their key per item, and grow quadratic on SQLite)
        found = db.argo(
            "SELECT batch, COUNT(*) FROM c WHERE batch >= ? GROUP BY batch",
            [rounds[-1].first_call],
        )
        rows = [(d["batch"], d["count(*)"], d["count(*)"]) for d in found]
        total = db.collection("c").count()
        if total != base + sum(n for _, n, _ in rows):
            tally.durable_lost += 1
            tally.problems.append(
                f"{total} objects, where earlier writers left {base} and this one "
                f"{sum(n for _, n, _ in rows)}"
            )
        tally.check_batches(rows, set(rounds[-1].durable), self, seed)
        return total
