"""The crash matrix: writers killed with SIGKILL at random moments, then every promise checked.

For each data model a writer subprocess does random work on one database,
printing ``start i`` before and ``ack i`` (``ack i durable`` where the call
promised durability) after each call. Where the model loads, every third call
loads a file with ``db.load`` and every third with ``tessera load`` (the
command, in a process of its own) instead of the data model's own API. The
parent kills it with SIGKILL at a random moment, reopens the database as a
restarted application would, and checks that every acknowledged durable call
is present, that no call is served in part, and that ``db.check()`` finds
nothing wrong. Then it starts the next writer on the same database, N times.

What each model writes, reads and checks is its own: a kind that takes part
has a ``crash_model()`` (the :class:`CrashModel` here), in its room's
``_crash.py``; :data:`MODELS` lists them from the registered kinds.

Run ``scripts/crash-matrix`` for long runs; tests/test_crash_matrix.py runs
a few rounds of each model in ``make test``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "MODELS",
    "CrashModel",
    "Round",
    "Tally",
    "crash_model",
    "load_kind",
    "run_matrix",
    "verify",
]


class CrashModel(Protocol):
    """One data model in the crash matrix."""

    loads: bool  # whether a third of its calls are db.load and a third tessera load
    reads: bool  # whether a reader in another process checks calls are never seen in part

    def create(self, db: Any) -> None:
        """Make the object(s) the writers write."""
        ...

    def batch_size(self, seed: int, call: int) -> int:
        """How many records/rows/objects call ``call`` of the writer seeded ``seed`` writes."""
        ...

    def write(self, db: Any, seed: int, call: int, n: int) -> bool:
        """Make call ``call`` through the model's own API; whether it promised durability."""
        ...

    def load_file(self, folder: Path, seed: int, call: int, n: int) -> tuple[Path, str]:
        """(Models that load) the file call ``call`` loads, and the object it loads into."""
        ...

    def read(self, db: Any) -> list[tuple[int, int]]:
        """(Models with readers) one pass: (call, how much of it is seen) for every call."""
        ...

    def initial_base(self) -> Any:
        """What :meth:`verify` builds on before any writer ran."""
        ...

    def verify(self, db: Any, seed: int, rounds: list[Round], tally: Tally, base: Any) -> Any:
        """Check every promise of the writers' ``rounds`` on the reopened ``db`` into
        ``tally``; what the next verify builds on (an array's cells, an object count)."""
        ...


def _models() -> dict[str, str]:
    """Catalog kind -> ``module:Class`` of every kind with a crash model."""
    from tesseradb.kinds import registered_kinds

    targets = {**registered_kinds(), "table": "tesseradb.sql.tables:TablesKind"}
    found = {}
    for kind, target in targets.items():
        module, _, name = target.partition(":")
        if hasattr(getattr(importlib.import_module(module), name), "crash_model"):
            found[kind] = target
    return found


MODELS = tuple(_models())  # (those of this package; crash_model() finds any registered)


def crash_model(model: str) -> CrashModel:
    """The crash model of the kind called ``model``."""
    module, _, name = _models()[model].partition(":")
    made: CrashModel = getattr(importlib.import_module(module), name).crash_model()
    return made


def load_kind(model: CrashModel, call: int) -> str | None:
    """How call ``call`` is made: ``db.load``, ``tessera load``, or None (the API)."""
    if not model.loads:
        return None
    return {0: None, 1: "db.load", 2: "tessera load"}[call % 3]


# --- the writer and the reader (each runs in a child process) ------------------------------
def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def writer(kind: str, path: str, seed: int, first_call: int) -> None:
    """Write calls first_call, first_call + 1, ... for ever (until killed)."""
    import shutil

    import tesseradb

    model = crash_model(kind)
    # (beside the database, in the test's own directory: this process ends by SIGKILL)
    folder = Path(f"{path}-loads")
    folder.mkdir(exist_ok=True)
    tessera = shutil.which("tessera") or str(Path(sys.executable).with_name("tessera"))
    db = tesseradb.connect(path)
    _say("ready")
    call = first_call
    while True:
        n = model.batch_size(seed, call)
        _say(f"start {call}")
        how = load_kind(model, call)
        if how is None:
            durable = model.write(db, seed, call, n)
        else:
            source, target = model.load_file(folder, seed, call, n)
            if how == "db.load":
                db.load(str(source), into=target, kind=kind)
            else:  # the command opens the database itself: this process lets go of it
                db.close()
                run = subprocess.run(
                    [tessera, "load", path, str(source), "--into", target],
                    capture_output=True,
                    text=True,
                )
                if run.returncode != 0:
                    raise RuntimeError(f"tessera load failed: {run.stdout}{run.stderr}")
                db = tesseradb.connect(path)
            source.unlink()
            durable = True  # (a load that returned is on disk)
        _say(f"ack {call}{' durable' if durable else ''}")
        call += 1


def reader(kind: str, path: str, seed: int) -> None:
    """Read the calls for ever while a writer works (another process, read-only), saying
    ``torn <call> <seen> <size>`` for any call seen in part and ``read`` after each pass."""
    import tesseradb

    model = crash_model(kind)
    db = tesseradb.connect(path, read_only=True)
    while True:
        for call, seen in model.read(db):
            if seen != model.batch_size(seed, call):
                _say(f"torn {call} {seen} {model.batch_size(seed, call)}")
        _say("read")


# --- the parent ---------------------------------------------------------------------
@dataclass
class Round:
    """One writer's life: what it started and acknowledged before it was killed."""

    first_call: int
    started: list[int] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    durable: list[int] = field(default_factory=list)
    loads: list[int] = field(default_factory=list)  # the started calls that were loads
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

    def check_batches(
        self,
        present: Iterable[tuple[int, int, int]],
        durable: Iterable[int],
        model: CrashModel,
        seed: int,
    ) -> None:
        """The check of a model whose every call writes a batch of distinct items: each
        batch ``present`` as (call, items, distinct items) is whole, and every durable
        call is there."""
        found = {int(call): (int(n), int(distinct)) for call, n, distinct in present}
        for call, (n, distinct) in found.items():
            if n != model.batch_size(seed, call) or distinct != n:
                self.torn += 1
                self.problems.append(f"call {call}: {n} of {model.batch_size(seed, call)} served")
        for call in durable:
            if call not in found:
                self.durable_lost += 1
                self.problems.append(f"durable call {call} is missing")


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
    made = crash_model(model)
    ready = threading.Event()

    def on_writer(word: str, rest: list[str]) -> None:
        if word == "ready":
            ready.set()
        elif word == "start":
            state.started.append(int(rest[0]))
            if load_kind(made, int(rest[0])) is not None:
                state.loads.append(int(rest[0]))
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
    reader_process = _spawn("reader", model, str(path), seed) if made.reads else None
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
    """Reopen and check every promise against everything the writers started (the model's
    own checks, then ``db.check()``); what the next verify builds on."""
    import tesseradb

    with tesseradb.connect(path) as db:
        base = crash_model(model).verify(db, seed, rounds, tally, base)
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
    import tesseradb

    rng = random.Random(seed)
    made = crash_model(model)
    with tesseradb.connect(path) as db:
        made.create(db)
    tally = Tally(model)
    rounds: list[Round] = []
    next_call = 1
    base = made.initial_base()
    for _ in range(kills):
        state = live_round(model, path, seed, next_call, rng)
        rounds.append(state)
        tally.kills += 1
        tally.calls_acknowledged += len(state.acked)
        tally.loads_acknowledged += sum(1 for c in state.acked if load_kind(made, c) is not None)
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
