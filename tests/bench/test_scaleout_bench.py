"""The scaleout benchmark at its tiny scale: every case on every executor, answers agreeing."""

from __future__ import annotations

import pytest

from tesseradb.bench import run_benchmark

pytestmark = [pytest.mark.bench, pytest.mark.slow]

CASES = ("cook_cycle", "attached_scan", "regrid", "triple_ingest")


def test_scaleout_tiny_runs_and_agrees() -> None:
    pytest.importorskip("distributed")
    report = run_benchmark("scaleout", "tiny", repeat=1, warmup=0)
    cases = {(m.system, m.case): m for m in report.results}
    for system in ("tessera", "tessera-dask-1", "tessera-dask-2"):
        for case in CASES:
            assert (system, case) in cases
    for system in ("tessera-dask-1", "tessera-dask-2"):
        for case in CASES:
            # what the projection in docs/scale-out.md is made from
            assert cases[(system, f"{case}_tasks")].value >= 1
            assert cases[(system, f"{case}_bytes_per_task")].value > 0
            assert cases[(system, f"{case}_compute_per_task")].value > 0
    assert cases[("tessera-dask-2", "task_overhead")].value > 0
    assert {c.case for c in report.checks} == set(CASES)
    assert report.agree, [c.detail for c in report.checks if not c.agree]
