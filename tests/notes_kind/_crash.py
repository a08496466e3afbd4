"""``notes`` in the crash matrix: each call adds a batch of notes tagged with the call (one
whole-file replacement, durable); loads append text files."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any


class NotesCrashModel:
    loads = True
    reads = True

    def create(self, db: Any) -> None:
        db.create("notes", "n")

    def batch_size(self, seed: int, call: int) -> int:
        return random.Random(seed * 1_000_003 + call).randint(1, 50)

    def write(self, db: Any, seed: int, call: int, n: int) -> bool:
        db.object("n").add([f"{call} {j}" for j in range(n)], call)
        return True

    def load_file(self, folder: Path, seed: int, call: int, n: int) -> tuple[Path, str]:
        path = folder / f"call{call}.txt"
        path.write_text("".join(f"{call} {j}\n" for j in range(n)))
        return path, "n"

    def _calls(self, db: Any) -> list[tuple[int, int, int]]:
        # (a loaded note has call 0: its call is the line's first word)
        rows: list[tuple[int, int, int]] = db.sql(
            "SELECT split_part(line, ' ', 1)::BIGINT AS c, count(*), count(DISTINCT line) "
            "FROM n GROUP BY c"
        ).fetchall()
        return rows

    def read(self, db: Any) -> list[tuple[int, int]]:
        return [(call, n) for call, n, _ in self._calls(db)]

    def initial_base(self) -> Any:
        return None

    def verify(self, db: Any, seed: int, rounds: Any, tally: Any, base: Any) -> Any:
        tally.check_batches(self._calls(db), {c for r in rounds for c in r.durable}, self, seed)
        return base
