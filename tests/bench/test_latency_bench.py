"""The latency benchmark at its tiny scale: every case runs and every system agrees."""

from __future__ import annotations

import pytest

from tesseradb.bench import run_benchmark
from tesseradb.bench.latency import KINDS


@pytest.mark.bench
def test_latency_tiny_runs_every_case_and_agrees() -> None:
    report = run_benchmark("latency", "tiny", repeat=1, warmup=0)
    cases = {(m.system, m.case) for m in report.results}
    for system in ("tessera", "duckdb", "sqlite"):
        assert (system, "select_1") in cases
        for kind in KINDS:
            for query in ("point", "range"):
                assert (system, f"{query}_{kind}") in cases, (system, query, kind)
    assert ("tessera", "point_collection_sql") in cases
    assert ("tessera", "point_collection_argo") in cases
    assert report.agree, [c for c in report.checks if not c.agree]
