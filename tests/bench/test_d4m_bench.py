"""The d4m benchmark at its tiny scale: every case runs and every system agrees."""

from __future__ import annotations

import importlib.util

import pytest

from tesseradb.bench import run_benchmark


@pytest.mark.bench
def test_d4m_tiny_runs_every_case_and_agrees() -> None:
    # python-graphblas is a peer where it is installed (it is not in the bench extra)
    peers = ["scipy"] + (["graphblas"] if importlib.util.find_spec("graphblas") else [])
    report = run_benchmark("d4m", "tiny", peers=peers, repeat=1, warmup=0)
    cases = {(m.system, m.case) for m in report.results}
    for system in ("tessera", *peers):
        assert (system, "assoc_construct") in cases
    assert ("scipy", "assoc_matmul") in cases and ("tessera", "assoc_matmul") in cases
    for case in ("table_put", "table_row_lookup", "table_col_lookup"):
        assert ("tessera", case) in cases
    checks = {c.case for c in report.checks}
    assert checks == {"assoc_construct", "assoc_matmul", "table_row_lookup"}
    assert report.agree, [c for c in report.checks if not c.agree]
