"""Running a benchmark: repeated timings, agreement checks, machine facts, JSON and markdown."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import math
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from tesseradb.bench.peers import peer
from tesseradb.bench.registry import Benchmark, get_benchmark
from tesseradb.errors import BenchmarkError
from tesseradb.progress import Cancel, ProgressLike

__all__ = [
    "BenchContext",
    "BenchReport",
    "Measurement",
    "canonical",
    "machine_info",
    "peak_memory",
    "resident_bytes",
    "run_benchmark",
]

Progress = Callable[[str], None]


@dataclass
class Measurement:
    """One result row: a system's timings of one case (``value`` is the median)."""

    system: str
    case: str
    metric: str  # seconds | per_second | bytes
    unit: str
    value: float
    runs: list[float]
    min: float
    max: float


@dataclass
class Check:
    case: str
    agree: bool
    systems: list[str]
    detail: str = ""


@dataclass
class BenchReport:
    benchmark: str
    scale: str
    params: dict[str, Any]
    machine: dict[str, Any]
    results: list[Measurement] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        return all(c.agree for c in self.checks)

    def value(self, system: str, case: str) -> float:
        for m in self.results:
            if m.system == system and m.case == case:
                return m.value
        raise KeyError((system, case))

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "scale": self.scale,
            "params": self.params,
            "machine": self.machine,
            "results": [asdict(m) for m in self.results],
            "checks": [asdict(c) for c in self.checks],
        }

    def to_markdown(self) -> str:
        lines = [
            f"# Benchmark `{self.benchmark}` at scale `{self.scale}`",
            "",
            f"Machine: {self.machine.get('cpu', '?')}, {self.machine.get('cores', '?')} cores, "
            f"{self.machine.get('memory_gib', '?')} GiB; Python {self.machine.get('python', '?')}.",
            f"Parameters: {', '.join(f'{k}={v}' for k, v in self.params.items())}.",
            "",
            "| case | system | metric | median | min | max | runs | vs tessera |",
            "|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for m in self.results:
            ratio = ""
            try:
                base = self.value("tessera", m.case)
                if m.system != "tessera" and base and m.value:
                    # how many times better tessera is (above 1: tessera wins)
                    better = m.value / base if m.metric in ("seconds", "bytes") else base / m.value
                    ratio = f"{better:.2f}x"
            except KeyError:
                pass
            lines.append(
                f"| {m.case} | {m.system} | {m.metric} ({m.unit}) | {_fmt(m.value)} | {_fmt(m.min)} | "
                f"{_fmt(m.max)} | {len(m.runs)} | {ratio} |"
            )
        lines += ["", "Agreement checks:", ""]
        for c in self.checks:
            mark = "agree" if c.agree else f"DISAGREE {c.detail}"
            lines.append(f"- `{c.case}`: {mark} ({', '.join(c.systems)})")
        lines.append("")
        lines.append(
            "The last column is the peer's figure over tessera's (seconds, bytes) or tessera's over the peer's (rates): above 1 means tessera is better."
        )
        return "\n".join(lines) + "\n"


def _fmt(value: float) -> str:
    if value == 0 or not math.isfinite(value):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


class BenchContext:
    """What a benchmark function gets: parameters, selected systems, and the measuring tools."""

    def __init__(
        self,
        report: BenchReport,
        systems: Sequence[str],
        repeat: int,
        warmup: int,
        progress: Progress,
    ) -> None:
        self.report = report
        self.params = report.params
        self.scale = report.scale
        self.systems = list(systems)
        self.repeat = repeat
        self.warmup = warmup
        self.progress = progress
        self.steps: ProgressLike = None  # each measured case's runs (tesseradb.progress)
        self.cancel: Cancel | None = None
        self.scratch: Path | None = None
        self.options: dict[str, Any] = {}  # a benchmark's own settings (ssdb: params, workdir)

    def wants(self, system: str) -> bool:
        return system in self.systems

    def measure(
        self,
        system: str,
        case: str,
        fn: Callable[[], Any],
        metric: str = "seconds",
        unit: str = "s",
        amount: float | None = None,
        repeat: int | None = None,
        warmup: int | None = None,
    ) -> Any:
        """Time ``fn`` ``repeat`` times after ``warmup`` runs; return its last answer.

        For a ``per_second`` metric, ``amount`` (records, bytes, ...) is divided by each time.
        """
        from tesseradb.progress import tracker

        self.progress(f"{case}: {system}")
        answer = None
        warmups = self.warmup if warmup is None else warmup
        repeats = self.repeat if repeat is None else repeat
        task = f"{case}: {system}"
        runs = []
        with tracker(task, warmups + repeats, "runs", self.steps, self.cancel, "bench") as watch:
            watch.advance(0)
            for _ in range(warmups):
                answer = None
                answer = fn()
                watch.advance()
            for _ in range(repeats):
                # (the last answer is let go first: held, a large one made every run
                # allocate, and fault in, fresh memory beside it)
                answer = None
                start = time.perf_counter()
                answer = fn()
                elapsed = time.perf_counter() - start
                runs.append(
                    amount / elapsed if metric == "per_second" and amount is not None else elapsed
                )
                watch.advance()
        self.record(system, case, runs, metric, unit)
        return answer

    def record(
        self, system: str, case: str, runs: list[float], metric: str = "seconds", unit: str = "s"
    ) -> None:
        if not runs:
            raise BenchmarkError(f"case {case} for {system}: no runs")
        self.report.results.append(
            Measurement(
                system, case, metric, unit, statistics.median(runs), runs, min(runs), max(runs)
            )
        )

    def check(self, case: str, answers: dict[str, Any], digits: int = 9) -> bool:
        """Record whether every system's answer to ``case`` is the same.

        Rows are compared as sets (sorted); floats agree within a relative
        ``10**-digits`` (use 6 where the data is single precision: a server
        may print a float4 with fewer digits than it holds).
        """
        rows = {system: canonical(answer, digits) for system, answer in answers.items()}
        exact = {system: _in_order(_normal(answer)) for system, answer in answers.items()}
        first = next(iter(exact))
        agree = all(_close(exact[s], exact[first], 10.0**-digits) for s in exact)
        detail = "" if agree else "; ".join(f"{s}: {str(v)[:200]}" for s, v in rows.items())
        self.report.checks.append(Check(case, agree, sorted(answers), detail))
        return agree


def _normal(answer: Any) -> Any:
    """Like :func:`canonical` but with floats unrounded and rows in their given order."""
    if hasattr(answer, "fetchall"):
        answer = answer.fetchall()
    if isinstance(answer, Decimal):
        return int(answer) if answer == answer.to_integral_value() else float(answer)
    if isinstance(answer, float) and math.isnan(answer):
        return "NaN"
    if isinstance(answer, (list, tuple)):
        return type(answer)(_normal(a) for a in answer)
    return answer


def _in_order(exact: Any) -> Any:
    """A list of rows sorted by their rounded forms, so that equal answers line up."""
    if isinstance(exact, list) and all(isinstance(r, tuple) for r in exact):
        return sorted(exact, key=lambda row: repr(canonical(row)))
    return exact


def _close(a: Any, b: Any, tolerance: float) -> bool:
    numbers = (float, int)
    if (
        (isinstance(a, float) or isinstance(b, float))
        and isinstance(a, numbers)
        and isinstance(b, numbers)
    ):
        return math.isclose(float(a), float(b), rel_tol=tolerance, abs_tol=1e-12)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y, tolerance) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def canonical(answer: Any, digits: int = 9) -> Any:
    """A comparable form of an answer: rows sorted, floats rounded, NaN and -0.0 normalised."""
    if hasattr(answer, "fetchall"):
        answer = answer.fetchall()
    if isinstance(answer, float):
        if math.isnan(answer):
            return "NaN"
        return float(f"{answer:.{digits}g}") + 0.0
    if isinstance(answer, Decimal):
        return (
            int(answer)
            if answer == answer.to_integral_value()
            else canonical(float(answer), digits)
        )
    if isinstance(answer, (list, tuple)):
        items = [canonical(a, digits) for a in answer]
        if isinstance(answer, list) and all(isinstance(i, tuple) for i in items):
            return sorted(items, key=repr)
        return type(answer)(items) if isinstance(answer, tuple) else items
    if isinstance(answer, dict):
        return {k: canonical(v, digits) for k, v in sorted(answer.items())}
    return answer


def machine_info() -> dict[str, Any]:
    import duckdb
    import pyarrow

    import tesseradb

    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tesseradb": tesseradb.__version__,
        "duckdb": duckdb.__version__,
        "pyarrow": pyarrow.__version__,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


# how often peak_memory samples the resident size (a load lasts seconds to minutes)
RSS_PERIOD = 0.02


def resident_bytes() -> int:
    """This process's resident memory (bytes)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _give_back_freed_memory() -> None:
    """Return memory freed by earlier work to the system before a measurement starts.

    Without this, a block that allocates no more than an earlier one freed
    reuses those pages and its resident memory does not grow at all.
    """
    gc.collect()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: growth is measured from what is resident
        pass


@contextmanager
def peak_memory() -> Iterator[list[int]]:
    """The peak growth of resident memory over the block (sampled), in ``result[0]``.

    The base is taken after freed memory is given back to the system, so the
    growth is what the block itself holds at its peak.
    """
    _give_back_freed_memory()
    base = resident_bytes()
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(RSS_PERIOD):
            peak[0] = max(peak[0], resident_bytes() - base)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()
        peak[0] = max(peak[0], resident_bytes() - base)


def run_benchmark(
    name: str,
    scale: str | None = None,
    peers: Sequence[str] | None = None,
    repeat: int = 5,
    warmup: int = 1,
    progress: Progress | None = None,
    scratch: Path | None = None,
    options: dict[str, Any] | None = None,
    steps: ProgressLike = None,
    cancel: Cancel | None = None,
) -> BenchReport:
    """Run benchmark ``name`` at ``scale`` for tessera and ``peers`` (default: all its systems).

    ``progress`` is told each step's name; ``steps`` gets each measured case's
    runs as :class:`tesseradb.progress.ProgressEvent` s, and ``cancel`` stops
    the run at the next of them (a ``CancelledError``; nothing is reported).
    """
    bench: Benchmark = get_benchmark(name)
    scale = scale or bench.default_scale
    if scale not in bench.scales:
        raise BenchmarkError(
            f"benchmark {name} has no scale {scale!r}; scales: {', '.join(bench.scales)}"
        )
    systems = (
        ["tessera", *[p for p in bench.systems if p != "tessera"]]
        if peers is None
        else ["tessera", *peers]
    )
    unknown = [s for s in systems if s not in bench.systems]
    if unknown:
        raise BenchmarkError(
            f"benchmark {name} has no system {', '.join(unknown)}; systems: {', '.join(bench.systems)}"
        )
    for system in systems:
        why = peer(system).unavailable()
        if why:
            raise BenchmarkError(f"system {system} cannot run here: {why}")
    report = BenchReport(name, scale, dict(bench.scales[scale]), machine_info())
    ctx = BenchContext(report, systems, repeat, warmup, progress or (lambda _msg: None))
    ctx.options = dict(options or {})
    ctx.steps, ctx.cancel = steps, cancel
    import tempfile

    with tempfile.TemporaryDirectory(prefix=f"tessera-bench-{name}-", dir=scratch) as tmp:
        ctx.scratch = Path(tmp)
        bench.run(ctx)
    return report


def write_report(report: BenchReport, json_path: Path | None, md_path: Path | None) -> None:
    if json_path is not None:
        json_path.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    if md_path is not None:
        md_path.write_text(report.to_markdown())
