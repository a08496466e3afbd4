"""The crash matrix: writers killed with SIGKILL at random moments, then every promise checked.

For each data model a writer subprocess does random work on one database,
printing ``start i`` before and ``ack i`` (``ack i durable`` where the call
promised durability) after each call. Every third call loads a file with
``db.load`` and every third with ``tessera load`` (the command, in a process of
its own) instead of the data model's own API: into the stream, collection or
plain table the others write (a load appends, durably), or as a new array of
its own (``l<call>``, whole or absent); associative tables have no loads. The parent kills it with SIGKILL at a
random moment, reopens the database as a restarted application would, and
checks that every acknowledged durable call is present, that no call is
served in part (each call writes a batch whose size the parent can
recompute from the seed), and that ``db.check()`` finds nothing wrong. Then
it starts the next writer on the same database, N times.

Run ``scripts/crash-matrix`` for long runs; tests/test_crash_matrix.py runs
a few rounds of each model in ``make test``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MODELS", "Round", "Tally", "run_matrix"]

MODELS = ("stream", "array", "collection", "table", "assoc")
ARRAY_SIDE = 64  # the array is ARRAY_SIDE x ARRAY_SIDE cells, chunks of 16 x 16


def batch_size(seed: int, call: int, model: str) -> int:
    """How many records/rows/objects call ``call`` of the writer seeded ``seed`` writes
    (collections fewer: an object is several rows, and each reopen counts them all)."""
    return random.Random(seed * 1_000_003 + call).randint(1, 300 if model == "collection" else 3000)


def array_box(seed: int, call: int) -> tuple[int, int, int, int]:
    """The box (x0, x1, y0, y1) that array call ``call`` fills with the value ``call``."""
    rng = random.Random(seed * 1_000_003 + call)
    x0, y0 = rng.randrange(ARRAY_SIDE), rng.randrange(ARRAY_SIDE)
    return x0, rng.randint(x0 + 1, ARRAY_SIDE), y0, rng.randint(y0 + 1, ARRAY_SIDE)


# --- the writer (runs in the child process) -----------------------------------------
def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def load_kind(model: str, call: int) -> str | None:
    """How call ``call`` is made: ``db.load``, ``tessera load``, or None (the API)."""
    if model == "assoc":
        return None
    return {0: None, 1: "db.load", 2: "tessera load"}[call % 3]


def load_target(model: str, call: int) -> str:
    """The object a load call writes: the model's own, or (arrays) one of its own."""
    return {"stream": "s", "collection": "c", "table": "t"}.get(model, f"l{call}")


def load_cells(seed: int, call: int) -> Any:
    """The cells an array load call loads (its own array ``l<call>``)."""
    import numpy as np

    rng = np.random.default_rng(seed * 1_000_003 + call)
    return rng.integers(0, 1000, size=(8, 8), dtype=np.int64)


def _load_file(model: str, folder: Path, seed: int, call: int, n: int) -> Path:
    """The file a load call loads: the call's batch as CSV, JSON lines or .npy."""
    import json

    import numpy as np

    if model == "array":
        path = folder / f"call{call}.npy"
        np.save(path, load_cells(seed, call))
    elif model == "collection":
        path = folder / f"call{call}.jsonl"
        path.write_text("".join(json.dumps({"batch": call, "j": j}) + "\n" for j in range(n)))
    else:
        path = folder / f"call{call}.csv"
        path.write_text("batch,j\n" + "".join(f"{call},{j}\n" for j in range(n)))
    return path


def writer(model: str, path: str, seed: int, first_call: int) -> None:
    """Write calls first_call, first_call + 1, ... for ever (until killed)."""
    import shutil
    import tempfile

    import numpy as np
    import pyarrow as pa

    import tesseradb

    folder = Path(tempfile.mkdtemp(prefix="crash-loads-"))
    tessera = shutil.which("tessera") or str(Path(sys.executable).with_name("tessera"))
    db = tesseradb.connect(path)
    if model == "stream":
        stream = db.stream("s")
    elif model == "array":
        array = db.array("a")
    elif model == "collection":
        collection = db.collection("c")
    elif model == "assoc":
        table = db.assoc_table("a")
    _say("ready")
    call = first_call
    while True:
        n = batch_size(seed, call, model)
        _say(f"start {call}")
        durable = ""
        how = load_kind(model, call)
        if how is not None:
            source = _load_file(model, folder, seed, call, n)
            kind = "array" if model == "array" else model
            if how == "db.load":
                db.load(str(source), into=load_target(model, call), kind=kind)
            else:  # the command opens the database itself: this process lets go of it
                db.close()
                run = subprocess.run(
                    [tessera, "load", path, str(source), "--into", load_target(model, call)],
                    capture_output=True,
                    text=True,
                )
                if run.returncode != 0:
                    raise RuntimeError(f"tessera load failed: {run.stdout}{run.stderr}")
                db = tesseradb.connect(path)
                if model == "stream":
                    stream = db.stream("s")
                elif model == "array":
                    array = db.array("a")
                elif model == "collection":
                    collection = db.collection("c")
            source.unlink()
            durable = " durable"  # (a load that returned is on disk)
        elif model == "stream":
            records = pa.table(
                {"batch": pa.array([call] * n, pa.int64()), "j": np.arange(n, dtype=np.int64)}
            )
            durable_call = (call // 3) % 2 == 0  # (of the API's calls, every other one)
            stream.ingest(records, durable=durable_call)
            durable = " durable" if durable_call else ""
        elif model == "array":
            x0, x1, y0, y1 = array_box(seed, call)
            array[x0:x1, y0:y1] = {"v": np.full((x1 - x0, y1 - y0), call, dtype=np.int64)}
            durable = " durable"
        elif model == "collection":
            collection.insert_many([{"batch": call, "j": j} for j in range(n)])
            durable = " durable"
        elif model == "assoc":  # row key: the call; column keys: 0 .. n-1
            table.put_triples(np.full(n, float(call)), np.arange(n, dtype=np.float64), 1.0)
            durable = " durable"
        else:  # two statements in one call: both or neither
            half = n // 2
            db.sql(
                f"INSERT INTO t SELECT {call}, range FROM range({half}); "
                f"INSERT INTO t SELECT {call}, range FROM range({half}, {n})"
            )
            durable = " durable"
        _say(f"ack {call}{durable}")
        call += 1


def reader(model: str, path: str, seed: int) -> None:
    """Read the batches for ever while a writer works (another process, read-only), saying
    ``torn <call> <seen> <size>`` for any call seen in part and ``read`` after each pass."""
    import tesseradb

    db = tesseradb.connect(path, read_only=True)
    while True:
        if model == "stream":
            rows = db.sql("SELECT batch, count(*) FROM s GROUP BY batch").fetchall()
        elif model == "collection":  # Argo/SQL counts on the backend, rebuilding nothing
            found = db.argo("SELECT batch, COUNT(*) FROM c GROUP BY batch")
            rows = [(d["batch"], d["count(*)"]) for d in found]
        elif model == "assoc":
            rows = db.sql("SELECT row::BIGINT, count(*) FROM a GROUP BY row").fetchall()
        else:
            rows = db.sql("SELECT batch, count(*) FROM t GROUP BY batch").fetchall()
        for batch, seen in rows:
            if seen != batch_size(seed, batch, model):
                _say(f"torn {batch} {seen} {batch_size(seed, batch, model)}")
        _say("read")


# --- the parent ---------------------------------------------------------------------
@dataclass
class Round:
    """One writer's life: what it started and acknowledged before it was killed."""

    first_call: int
    started: list[int] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    durable: list[int] = field(default_factory=list)
    reads: int = 0  # passes of the reader in another process while the writer worked
    torn_reads: list[str] = field(default_factory=list)


@dataclass
class Tally:
    """What the matrix found for one model."""

    model: str
    kills: int = 0
    calls_acknowledged: int = 0
    durable_acknowledged: int = 0
    loads_acknowledged: int = 0  # of them, calls made by db.load or tessera load
    durable_lost: int = 0
    torn: int = 0
    live_reads: int = 0
    torn_reads: int = 0
    check_findings: int = 0
    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{self.model}: {self.kills} kills, {self.calls_acknowledged} calls acknowledged "
            f"({self.durable_acknowledged} durable, {self.loads_acknowledged} loads), "
            f"{self.durable_lost} durable calls lost, "
            f"{self.torn} torn after reopening, {self.live_reads} reads during writes "
            f"({self.torn_reads} torn), {self.check_findings} check findings"
        )


def create(model: str, path: Path) -> None:
    import tesseradb

    with tesseradb.connect(path) as db:
        if model == "stream":
            descriptor = {
                "fields": [{"name": "batch", "type": "int64"}, {"name": "j", "type": "int64"}],
                "index": ["batch", "j"],
            }
            db.create_stream("s", descriptor, segment_bytes=4096)
        elif model == "array":
            dims = [{"name": d, "end": ARRAY_SIDE, "chunk": 16} for d in ("x", "y")]
            db.create_array("a", dims, {"v": "int64"})
        elif model == "collection":
            db.create_collection("c")
        elif model == "assoc":
            db.create_assoc_table("a")
        else:
            db.sql("CREATE TABLE t (batch BIGINT, j BIGINT)")


def _spawn(function: str, *args: Any) -> subprocess.Popen[str]:
    code = f"from tesseradb.testing.crash import {function}; {function}{args!r}"
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # (its group is killed: a `tessera load` it runs too)
    )


def _follow(
    child: subprocess.Popen[str], on_line: Callable[[str, list[str]], None]
) -> threading.Thread:
    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            word, *rest = line.split()
            on_line(word, rest)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _kill(child: subprocess.Popen[str], thread: threading.Thread) -> str | None:
    """SIGKILL the child and what it runs; if it had already ended by itself, why (its
    exit status and the end of what it wrote to stderr)."""
    ended = child.poll()
    with contextlib.suppress(ProcessLookupError):  # (its group may be gone with it)
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    thread.join(10)
    why = None
    if ended is not None and child.stderr is not None:
        why = f"exit status {ended}: {child.stderr.read()[-2000:]}"
    for pipe in (child.stdout, child.stderr):
        if pipe is not None:
            pipe.close()
    return why


def _wait_for_the_lock(path: Path) -> None:
    """Wait until no process holds the database's writer lock: a ``tessera load`` the killed
    writer ran dies with its group, but may not have exited yet when the writer has."""
    from tesseradb._lock import WriterLock

    lock = WriterLock(path)
    deadline = time.monotonic() + 30
    while lock.held_elsewhere():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path}: the writer lock is still held 30 s after the kill")
        time.sleep(0.01)


def live_round(model: str, path: Path, seed: int, first_call: int, rng: random.Random) -> Round:
    """Start a writer (and a reader in another process), let it work for a random while,
    kill it with SIGKILL."""
    state = Round(first_call)
    ready = threading.Event()

    def on_writer(word: str, rest: list[str]) -> None:
        if word == "ready":
            ready.set()
        elif word == "start":
            state.started.append(int(rest[0]))
        elif word == "ack":
            state.acked.append(int(rest[0]))
            if rest[1:] == ["durable"]:
                state.durable.append(int(rest[0]))

    def on_reader(word: str, rest: list[str]) -> None:
        if word == "read":
            state.reads += 1
        elif word == "torn":
            state.torn_reads.append(f"a reader saw {rest[1]} of call {rest[0]}'s {rest[2]}")

    writer_process = _spawn("writer", model, str(path), seed, first_call)
    writer_thread = _follow(writer_process, on_writer)
    if not ready.wait(60):
        why = _kill(writer_process, writer_thread)
        raise RuntimeError(f"the {model} writer did not start ({why or 'no answer in 60 s'})")
    # arrays: snapshot isolation is Icechunk's, tested in tests/arrays; their
    # writes' boxes overlap, so a reader has no simple whole-call invariant
    reader_process = _spawn("reader", model, str(path), seed) if model != "array" else None
    reader_thread = _follow(reader_process, on_reader) if reader_process else None
    # kill at a random moment after the first call is done, so that every round has
    # something to keep (on a loaded machine a writer may take a while to get there)
    # (and after the reader's first pass: a reader pays for its imports on its first
    # query, and a fast writer's round would otherwise end before any pass)
    deadline = time.monotonic() + 60
    while (
        (not state.acked or (reader_process is not None and state.reads == 0))
        and time.monotonic() < deadline
        and writer_process.poll() is None
    ):
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 1.5))
    writer_ended = _kill(writer_process, writer_thread)
    _wait_for_the_lock(path)
    reader_ended = None
    if reader_process is not None and reader_thread is not None:
        reader_ended = _kill(reader_process, reader_thread)
    # a writer or reader that stopped by itself failed: its own error is the finding
    if writer_ended is not None:
        raise RuntimeError(f"the {model} writer stopped before it was killed ({writer_ended})")
    if reader_ended is not None:
        raise RuntimeError(f"the {model} reader stopped before it was killed ({reader_ended})")
    return state


def verify(
    model: str,
    path: Path,
    seed: int,
    rounds: list[Round],
    tally: Tally,
    base: Any,
    full_check: bool = True,
) -> Any:
    """Reopen and check every promise against everything the writers started. ``base`` is
    what the earlier writers left (an array's cells, a collection's object count); what
    this writer left is returned."""
    import numpy as np

    import tesseradb

    durable = {c for r in rounds for c in r.durable}
    with tesseradb.connect(path) as db:
        if model == "array":
            cells = db.array("a")[:, :]["v"]
            # the array must be the state after some prefix of this writer's calls
            # (earlier writers' kept calls are in ``base``), at least up to the last
            # durable one: replay the calls to find which
            grid = base.copy()
            states = {0: grid.copy()}
            for call in rounds[-1].started:
                if load_kind(model, call) is not None:
                    continue  # (a load makes an array of its own: checked below)
                x0, x1, y0, y1 = array_box(seed, call)
                grid[x0:x1, y0:y1] = call
                states[call] = grid.copy()
            matched = [c for c, s in states.items() if np.array_equal(s, cells)]
            last_durable = max(
                (c for c in rounds[-1].durable if load_kind(model, c) is None), default=0
            )
            arrays = set(db.arrays())
            for call in rounds[-1].started:
                if load_kind(model, call) is None:
                    continue
                name = load_target(model, call)
                if name not in arrays:
                    if call in rounds[-1].durable:
                        tally.durable_lost += 1
                        tally.problems.append(f"the acknowledged load of {name} is missing")
                    continue
                loaded = db.array(name)[:, :]["value"]
                if not np.array_equal(loaded, load_cells(seed, call)):
                    tally.torn += 1
                    tally.problems.append(f"the array {name} a load made is not whole")
            if not matched:
                tally.torn += 1
                tally.problems.append("the array matches no prefix of the writes")
            elif max(matched) < last_durable:
                tally.durable_lost += 1
                tally.problems.append(
                    f"the array is at call {max(matched)}, < acked {last_durable}"
                )
            base = cells.copy()  # the next writer continues from the array as it is
        else:
            if model == "stream":
                rows = db.sql(
                    "SELECT batch, count(*), count(DISTINCT j) FROM s GROUP BY batch"
                ).fetchall()
            elif model == "collection":
                # counted on the backend, nothing rebuilt: this writer's calls one by
                # one, and the earlier writers' through the total (``base`` objects)
                # (a count only: Argo/SQL's MIN/MAX/SUM join every value of their key
                # per item, and grow quadratic on SQLite; see the issue notes)
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
                base = total
                durable = set(rounds[-1].durable)
            elif model == "assoc":
                rows = db.sql(
                    "SELECT row::BIGINT, count(*), count(DISTINCT col) FROM a GROUP BY row"
                ).fetchall()
            else:
                rows = db.sql(
                    "SELECT batch, count(*), count(DISTINCT j) FROM t GROUP BY batch"
                ).fetchall()
            present = {int(b): (int(n), int(d)) for b, n, d in rows}
            for batch, (n, distinct) in present.items():
                if n != batch_size(seed, batch, model) or distinct != n:
                    tally.torn += 1
                    tally.problems.append(
                        f"call {batch}: {n} of {batch_size(seed, batch, model)} served"
                    )
            for call in durable:
                if call not in present:
                    tally.durable_lost += 1
                    tally.problems.append(f"durable call {call} is missing")
        report = db.check() if full_check else None
        if report is not None and not report.ok:
            tally.check_findings += len(report.damaged)
            tally.problems += [str(f) for f in report.damaged]
    return base


def run_matrix(
    model: str,
    path: Path,
    kills: int,
    seed: int = 1,
    progress: Callable[[Tally], Any] | None = None,
) -> Tally:
    """Kill ``kills`` writers of ``model`` on a new database at ``path``; what was found."""
    import numpy as np

    rng = random.Random(seed)
    create(model, path)
    tally = Tally(model)
    rounds: list[Round] = []
    next_call = 1
    # what the next verify builds on: an array's cells, a collection's object count
    base: Any = np.zeros((ARRAY_SIDE, ARRAY_SIDE), dtype=np.int64) if model == "array" else 0
    for _ in range(kills):
        state = live_round(model, path, seed, next_call, rng)
        rounds.append(state)
        tally.kills += 1
        tally.calls_acknowledged += len(state.acked)
        tally.loads_acknowledged += sum(1 for c in state.acked if load_kind(model, c) is not None)
        tally.durable_acknowledged += len(state.durable)
        tally.live_reads += state.reads
        tally.torn_reads += len(state.torn_reads)
        tally.problems += state.torn_reads
        # db.check() reads everything, so its cost grows with the database: every
        # tenth reopen and the last (the promises above are checked every time)
        full = tally.kills % 10 == 0 or tally.kills == kills
        base = verify(model, path, seed, rounds, tally, base, full)
        next_call = max([next_call - 1, *state.started]) + 1
        if progress is not None:
            progress(tally)
    return tally
