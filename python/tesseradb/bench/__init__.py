"""Benchmarks as a product feature: the papers' workloads against real peers, in one run.

``tessera bench NAME --scale S`` runs a registered :class:`Benchmark`; each
measures every selected system on the same data, checks that all of them
returned the same answers, and writes the JSON shape of ARCHITECTURE.md plus
a markdown table.
"""

from __future__ import annotations

from tesseradb.bench.peers import PEERS, Peer
from tesseradb.bench.registry import BENCHMARKS, Benchmark, get_benchmark, register
from tesseradb.bench.runner import BenchContext, BenchReport, Measurement, run_benchmark

__all__ = [
    "BENCHMARKS",
    "PEERS",
    "BenchContext",
    "BenchReport",
    "Benchmark",
    "Measurement",
    "Peer",
    "get_benchmark",
    "register",
    "run_benchmark",
]
