"""Benchmark ``scaleout``: the executor seam on threads here and on Dask with 1 and 2 workers.

Four chunk- or file-parallel operations, each run with the same database
and data under three executors:

- ``tessera``: this process's threads (the default executor) (parallel triple ingest: forkserver
  processes of this machine, its default);
- ``tessera-dask-1``: a ``LocalCluster`` of one worker process of one thread;
- ``tessera-dask-2``: two worker processes of one thread each.

A worker here stands for a node of one core: its kernels' own thread pool
(``RAYON_NUM_THREADS``) and numpy's are set to one thread, so that one
worker uses one of this machine's two cores and two use both.

The cases: cooking a stored SS-DB cycle (an image per task), the PTF scan
aggregate over an attached file (a row range per task, partial aggregates
combined on the client), a regrid of a large 3-D array (a slab of output
rows per task) and parallel triple ingest of image slices (a share of the
slices per writer, merged as forks). Every system's answers are checked
against each other.

For the projection to more nodes (docs/scale-out.md), each Dask run also
records per task: the compute time the workers report, the bytes a task's
arguments and result take pickled (what crosses the network), and the
scheduler's round trip for an empty task.
"""

from __future__ import annotations

import contextlib
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.bench.runner import BenchContext
from tesseradb.executor import DaskExecutor, Threads

__all__ = ["SYSTEMS", "run"]

SYSTEMS = ("tessera", "tessera-dask-1", "tessera-dask-2")


class _MeasuredDask(DaskExecutor):
    """A Dask executor that, while ``counting``, counts its items and the pickled bytes of
    them and their results (pickling them once more here: not while a run is timed)."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.counting = False
        self.items = 0
        self.bytes = 0

    def _size(self, value: Any) -> int:
        import cloudpickle

        return len(cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def map(
        self, fn: Callable[[Any], Any], items: Sequence[Any], *, what: str, limit: int | None = None
    ) -> list[Any]:
        items = list(items)
        results = super().map(fn, items, what=what, limit=limit)
        if not self.counting:
            return results
        self.items += len(items)
        self.bytes += sum(self._size(i) for i in items) + sum(self._size(r) for r in results)
        self.bytes += self._size(fn) * len(items)
        return results

    def stream(
        self,
        fn: Callable[[Any], Any],
        items: Iterable[Any],
        *,
        what: str,
        window: int | None = None,
    ) -> Iterator[Any]:
        if not self.counting:
            yield from super().stream(fn, items, what=what, window=window)
            return
        seen: list[Any] = []
        for result in super().stream(fn, _seen(items, seen), what=what, window=window):
            self.bytes += self._size(result)
            yield result
        self.items += len(seen)
        self.bytes += sum(self._size(i) for i in seen) + self._size(fn) * len(seen)


def _seen(items: Iterable[Any], into: list[Any]) -> Iterator[Any]:
    for item in items:
        into.append(item)
        yield item


@contextlib.contextmanager
def _cluster(workers: int) -> Iterator[Any]:
    """A LocalCluster of ``workers`` one-thread worker processes, each one core's worth."""
    import dask
    from distributed import Client, LocalCluster

    # the kernels' pool and Icechunk's I/O runtime at one thread each (both are made when
    # first used, after the worker starts)
    one_core = {"RAYON_NUM_THREADS": "1", "TOKIO_WORKER_THREADS": "1"}
    # numpy's threads must be set before the worker starts (Dask's pre-spawn environment);
    # Dask's default there also sets MALLOC_TRIM_THRESHOLD_, which turns off glibc's adaptive
    # mmap threshold, so every large array a task makes is fresh pages faulted in one by
    # one: a worker cooked an SS-DB image with 45% more CPU than a thread here. Left out.
    spawn_environ = {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1}
    with dask.config.set(
        {"distributed.worker.daemon": False, "distributed.nanny.pre-spawn-environ": spawn_environ}
    ):
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            env=one_core,
        )
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _noop(i: int) -> int:
    return i


def _task_compute_seconds(client: Any, run: Callable[[], Any]) -> tuple[Any, float, int]:
    """``run()``'s answer, and the compute time and count of the Dask tasks the workers ran
    (a task may be a batch of the operation's items)."""
    from distributed import get_task_stream

    with get_task_stream(client) as stream:
        answer = run()
    seconds, count = 0.0, 0
    for task in stream.data:
        for part in task.get("startstops", ()):
            if part.get("action") == "compute":
                seconds += part["stop"] - part["start"]
                count += 1
    return answer, seconds, count


# --- the cases ---------------------------------------------------------------------------------
def _prepare(ctx: BenchContext, home: Path) -> dict[str, Any]:
    """Every case's data, made once with threads: an SS-DB cycle, a PTF file, a large array,
    image slices."""
    import numpy as np

    import tesseradb
    from tesseradb.datasets import ptf_file

    p = ctx.params
    ctx.progress(f"preparing: an SS-DB {p['ssdb']} cycle, a PTF file, a regrid array, slices")
    db = tesseradb.connect(home / "scale.tdb")
    run = db.ssdb("sky", config=p["ssdb"])
    run.load(cycles=1)
    ptf_file(home / "ptf.h5", int(p["candidates"]))
    db.attach(home / "ptf.h5", name="ptf")
    depth, side = int(p["regrid_depth"]), int(p["regrid_side"])
    big = db.create_array(
        "big",
        [
            {"name": "t", "end": depth, "chunk": 1},
            {"name": "y", "end": side, "chunk": 1024},
            {"name": "x", "end": side, "chunk": 1024},
        ],
        {"v": "float32"},
        level=1,
    )
    rng = np.random.default_rng(11)
    for t in range(depth):
        big[t : t + 1] = {"v": rng.standard_normal((1, side, side), dtype=np.float32)}
    slices = []
    n, size = int(p["slices"]), int(p["slice_size"])
    for s in range(n):
        path = home / f"slice{s:03d}.npy"
        np.save(path, rng.integers(0, 4096, (size, size)).astype(np.uint16))
        slices.append(path)
    return {"db": db, "run": run, "big": big, "slices": slices}


def _cases(
    ctx: BenchContext, data: dict[str, Any]
) -> dict[str, tuple[Callable[[], Any], Callable[[Any], Any], float, str]]:
    """case -> (the operation, what its answer is checked by, its amount, its unit).

    The check runs after the timed runs: an operation is timed alone.
    """
    import numpy as np

    from tesseradb.assoc import ImageSlice, parallel_ingest
    from tesseradb.bench.ptf import SCAN_QUERY

    db, run, big = data["db"], data["run"], data["big"]
    p = ctx.params
    sources = [ImageSlice(path, s) for s, path in enumerate(data["slices"])]
    size, n = int(p["slice_size"]), len(sources)
    images = len(run.config.images_of(0))
    pixels = images * run.config.size**2

    def cook() -> Any:
        cooked = run.cook_cycle(0)
        return sorted((at.image, len(c["x"]), int(c["npix"].sum())) for at, c in cooked)

    def scan() -> Any:
        result = db.sql(SCAN_QUERY)
        assert result.shortcut == "aggregate", "the scan aggregate must fold partials"
        return result.fetchall()

    def regrid() -> Any:
        out = big.regrid([1, "10:3", "10:3"])
        return float(np.nansum(out.v.values, dtype=np.float64))

    def ingest() -> Any:
        with contextlib.suppress(Exception):
            db.drop("vol")
        target = db.create_array(
            "vol",
            [
                {"name": "z", "end": n, "chunk": 1},
                {"name": "y", "end": size, "chunk": size},
                {"name": "x", "end": size, "chunk": size},
            ],
            {"v": "uint16"},
            level=1,
        )
        return parallel_ingest(db, target, sources, workers=2, merge="fork").cells

    def ingested(cells: Any) -> Any:
        return (cells, int(db.sql("SELECT sum(v) FROM vol").fetchone()[0]))

    def same(answer: Any) -> Any:
        return answer

    rows = int(p["candidates"])
    return {
        "cook_cycle": (cook, same, pixels, "pixels/s"),
        "attached_scan": (scan, same, rows, "candidates/s"),
        "regrid": (regrid, same, int(p["regrid_depth"]) * int(p["regrid_side"]) ** 2, "cells/s"),
        "triple_ingest": (ingest, ingested, n * size * size, "entries/s"),
    }


def run(ctx: BenchContext) -> None:
    import shutil

    home = Path(ctx.scratch or ".") / "scaleout"  # type: ignore[operator]
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    data = _prepare(ctx, home)
    db = data["db"]
    cases = _cases(ctx, data)
    answers: dict[str, dict[str, Any]] = {case: {} for case in cases}
    try:
        if ctx.wants("tessera"):
            db.use(Threads())
            for case, (fn, checked, amount, unit) in cases.items():
                answer = ctx.measure("tessera", case, fn, "per_second", unit, amount)
                answers[case]["tessera"] = checked(answer)
        for workers in (1, 2):
            system = f"tessera-dask-{workers}"
            if not ctx.wants(system):
                continue
            ctx.progress(f"{system}: starting a LocalCluster of {workers} worker(s)")
            with _cluster(workers) as client:
                measured = _MeasuredDask(client)
                db.use(measured)
                for case, (fn, checked, amount, unit) in cases.items():
                    answer = ctx.measure(system, case, fn, "per_second", unit, amount)
                    answers[case][system] = checked(answer)
                    # one more run, its tasks counted and timed by the workers
                    measured.items = measured.bytes = 0
                    start = time.perf_counter()
                    _, compute, count = _task_compute_seconds(client, fn)
                    wall = time.perf_counter() - start
                    measured.counting = True  # and again, counting the bytes it moves
                    fn()
                    measured.counting = False
                    # Dask tasks (the executor batches small items): what the model counts
                    tasks = max(count, 1)
                    ctx.record(system, f"{case}_tasks", [float(count)], "count", "tasks")
                    ctx.record(system, f"{case}_items", [float(measured.items)], "count", "items")
                    ctx.record(
                        system, f"{case}_bytes_per_task", [measured.bytes / tasks], "bytes", "bytes"
                    )
                    ctx.record(
                        system,
                        f"{case}_compute_per_task",
                        [compute / max(count, 1)],
                        "seconds",
                        "s",
                    )
                    ctx.record(system, f"{case}_wall", [wall], "seconds", "s")
                if workers == 2:
                    # Dask's own cost of a task: empty ones, one Dask task each
                    noop = list(range(int(ctx.params["noop_tasks"])))
                    start = time.perf_counter()
                    client.gather(client.map(_noop, noop, pure=False))
                    per = (time.perf_counter() - start) / len(noop)
                    ctx.record(system, "task_overhead", [per], "seconds", "s")
    finally:
        db.use(None)
        db.close()
    for case, by_system in answers.items():
        if len(by_system) > 1:
            ctx.check(case, by_system, digits=9)


register(
    Benchmark(
        name="scaleout",
        description="the executor seam: SS-DB cooking, an attached scan, a regrid and triple ingest on threads vs Dask with 1 and 2 workers",
        scales={
            "tiny": {
                "ssdb": "test",
                "candidates": 40_000,
                "regrid_depth": 4,
                "regrid_side": 1024,
                "slices": 8,
                "slice_size": 256,
                "noop_tasks": 100,
            },
            "small": {
                "ssdb": "very-small",
                "candidates": 1_000_000,
                "regrid_depth": 16,
                "regrid_side": 4096,
                "slices": 64,
                "slice_size": 1024,
                "noop_tasks": 1000,
            },
        },
        systems=SYSTEMS,
        run=run,
        default_scale="tiny",
        notes=(
            "a Dask worker is one process of one thread with RAYON_NUM_THREADS=1: a node of one core",
            "tessera's triple ingest uses forkserver processes, parallel_ingest's default",
        ),
    )
)
