"""Arrays in the crash matrix (:mod:`tesseradb.testing.crash`): each API call fills a random
box of one 64 x 64 array with the call's number (one commit), and each load makes an array
of its own (``l<call>``, from a .npy file) that must be whole or absent. Readers of arrays
are Icechunk's snapshots, tested in tests/arrays: the boxes overlap, so a reader has no
simple whole-call invariant here."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

__all__ = ["ArrayCrashModel"]

SIDE = 64  # the array is SIDE x SIDE cells, chunks of 16 x 16


class ArrayCrashModel:
    loads = True
    reads = False

    def create(self, db: Any) -> None:
        dims = [{"name": d, "end": SIDE, "chunk": 16} for d in ("x", "y")]
        db.create_array("a", dims, {"v": "int64"})

    def batch_size(self, seed: int, call: int) -> int:
        x0, x1, y0, y1 = self.box(seed, call)
        return (x1 - x0) * (y1 - y0)

    def box(self, seed: int, call: int) -> tuple[int, int, int, int]:
        """The box (x0, x1, y0, y1) that call ``call`` fills with the value ``call``."""
        rng = random.Random(seed * 1_000_003 + call)
        x0, y0 = rng.randrange(SIDE), rng.randrange(SIDE)
        return x0, rng.randint(x0 + 1, SIDE), y0, rng.randint(y0 + 1, SIDE)

    def write(self, db: Any, seed: int, call: int, n: int) -> bool:
        import numpy as np

        x0, x1, y0, y1 = self.box(seed, call)
        db.array("a")[x0:x1, y0:y1] = {"v": np.full((x1 - x0, y1 - y0), call, dtype=np.int64)}
        return True

    def loaded_cells(self, seed: int, call: int) -> Any:
        """The cells load call ``call`` loads (into its own array ``l<call>``)."""
        import numpy as np

        rng = np.random.default_rng(seed * 1_000_003 + call)
        return rng.integers(0, 1000, size=(8, 8), dtype=np.int64)

    def load_file(self, folder: Path, seed: int, call: int, n: int) -> tuple[Path, str]:
        import numpy as np

        path = folder / f"call{call}.npy"
        np.save(path, self.loaded_cells(seed, call))
        return path, f"l{call}"

    def read(self, db: Any) -> list[tuple[int, int]]:
        raise NotImplementedError("arrays have no reader in the crash matrix")

    def initial_base(self) -> Any:
        import numpy as np

        return np.zeros((SIDE, SIDE), dtype=np.int64)  # the cells before any writer

    def verify(self, db: Any, seed: int, rounds: Any, tally: Any, base: Any) -> Any:
        import numpy as np

        last = rounds[-1]
        cells = db.array("a")[:, :]["v"]
        # the array must be the state after some prefix of this writer's calls (earlier
        # writers' kept calls are in ``base``), at least up to the last durable one:
        # replay the calls to find which
        grid = base.copy()
        states = {0: grid.copy()}
        for call in last.started:
            if call in last.loads:
                continue  # (a load makes an array of its own: checked below)
            x0, x1, y0, y1 = self.box(seed, call)
            grid[x0:x1, y0:y1] = call
            states[call] = grid.copy()
        matched = [c for c, s in states.items() if np.array_equal(s, cells)]
        last_durable = max((c for c in last.durable if c not in last.loads), default=0)
        arrays = set(db.arrays())
        for call in last.loads:
            name = f"l{call}"
            if name not in arrays:
                if call in last.durable:
                    tally.durable_lost += 1
                    tally.problems.append(f"the acknowledged load of {name} is missing")
                continue
            if not np.array_equal(db.array(name)[:, :]["value"], self.loaded_cells(seed, call)):
                tally.torn += 1
                tally.problems.append(f"the array {name} a load made is not whole")
        if not matched:
            tally.torn += 1
            tally.problems.append("the array matches no prefix of the writes")
        elif max(matched) < last_durable:
            tally.durable_lost += 1
            tally.problems.append(f"the array is at call {max(matched)}, < acked {last_durable}")
        return cells.copy()  # the next writer continues from the array as it is
