"""The registry of benchmarks: name, scales, systems, and the function that runs it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tesseradb.errors import BenchmarkError

if TYPE_CHECKING:
    from tesseradb.bench.runner import BenchContext

__all__ = ["BENCHMARKS", "Benchmark", "get_benchmark", "register"]


@dataclass(frozen=True)
class Benchmark:
    name: str
    description: str
    scales: dict[str, dict[str, Any]]  # scale name -> parameters
    systems: tuple[str, ...]  # `tessera` first, then the peers
    run: Callable[[BenchContext], None]
    default_scale: str = "tiny"
    notes: tuple[str, ...] = field(default_factory=tuple)


BENCHMARKS: dict[str, Benchmark] = {}

# Benchmark modules register themselves on import; they load only when asked for.
_MODULES = {
    "pushdown": "tesseradb.bench.pushdown",
    "ptf": "tesseradb.bench.ptf",
    "mdds": "tesseradb.bench.mdds",
    "arrays": "tesseradb.bench.arrays",
    "nobench": "tesseradb.bench.nobench",
    "latency": "tesseradb.bench.latency",
    "ssdb": "tesseradb.bench.ssdb",
    "d4m": "tesseradb.bench.d4m",
    "load": "tesseradb.bench.load",
    "server": "tesseradb.bench.server",
    "scaleout": "tesseradb.bench.scaleout",
    "objectstore": "tesseradb.bench.objectstore",
}


def register(benchmark: Benchmark) -> Benchmark:
    from tesseradb.bench.peers import peer

    for system in benchmark.systems:
        peer(system)  # every system a benchmark names is a registered peer
    BENCHMARKS[benchmark.name] = benchmark
    return benchmark


def available() -> list[str]:
    return sorted(set(_MODULES) | set(BENCHMARKS))


def get_benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS and name in _MODULES:
        importlib.import_module(_MODULES[name])
    if name not in BENCHMARKS:
        raise BenchmarkError(f"no benchmark named {name!r}; available: {', '.join(available())}")
    return BENCHMARKS[name]
