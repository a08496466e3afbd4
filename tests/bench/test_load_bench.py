"""The load benchmark at its test scale: every case runs for tessera and its peer, the loaded
data agree, and the memory of each load is reported."""

from __future__ import annotations

import pytest

from tesseradb.bench import run_benchmark

CASES = {
    "fits_glob": "xarray",
    "netcdf_grid": "xarray",
    "csv_stream": "duckdb",
    "jsonl_collection": "postgresql",
}


@pytest.mark.bench
@pytest.mark.server
@pytest.mark.slow
def test_load_test_scale_runs_every_case_and_agrees() -> None:
    # (the `test` scale, not `tiny`: tiny's 30 s would push the suite past its budget)
    report = run_benchmark("load", "test", repeat=1, warmup=0)
    found = {(m.system, m.case) for m in report.results}
    for case, peer in CASES.items():
        assert ("tessera", case) in found and (peer, case) in found, case
        assert ("tessera", f"{case}_memory") in found
        assert report.value("tessera", case) > 0
    assert {c.case for c in report.checks} == set(CASES)
    assert report.agree, [c for c in report.checks if not c.agree]
