"""The objectstore benchmark at its tiny scale: every case runs, through the proxy, and
every system agrees."""

from __future__ import annotations

import pytest

from tesseradb.bench import run_benchmark


@pytest.mark.bench
def test_objectstore_tiny_runs_every_case_and_agrees() -> None:
    report = run_benchmark("objectstore", "tiny", repeat=1, warmup=0)
    cases = {(m.system, m.case): m for m in report.results}
    for label in ("0ms", "20ms"):
        for system in ("tessera", "zarr"):
            for case in ("array_write", "array_read_full", "array_read_slab"):
                assert (system, f"{case}_{label}") in cases, (system, case, label)
        for case in ("array_read_full", "array_read_slab", "array_sql_box"):
            assert ("xarray", f"{case}_{label}") in cases, (case, label)
        for system in ("tessera", "download", "h5py-fsspec"):
            assert (system, f"ptf_first_q1_{label}") in cases
            assert cases[(system, f"requests_ptf_first_q1_{label}")].value >= 1
            assert cases[(system, f"bytes_ptf_first_q1_{label}")].value > 0
        for system in ("tessera", "download"):
            assert (system, f"ptf_first_q3_{label}") in cases
        for system in ("tessera", "parquet"):
            assert (system, f"stream_range_first_{label}") in cases
            assert cases[(system, f"requests_stream_range_first_{label}")].value >= 1
        assert ("tessera", f"array_sql_box_{label}") in cases
        # a warm statement over the attached file asks the bucket only whether it changed
        assert cases[("tessera", f"requests_ptf_q1_warm_{label}")].value == 1
    assert report.agree, [c for c in report.checks if not c.agree]
