"""The ptf benchmark at its tiny scale: every case measured, every answer agreeing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tesseradb.bench import run_benchmark
from tesseradb.datasets import PTF_SCHEMA, ptf_file

pytestmark = [pytest.mark.bench, pytest.mark.server]


def test_ptf_tiny_runs_and_agrees(postgres_server: object) -> None:
    report = run_benchmark("ptf", "tiny", repeat=2, warmup=0)
    cases = {(m.system, m.case) for m in report.results}
    for case in (
        "first_answer",
        "index_build",
        "q1_warm",
        "q2_warm",
        "q3_warm",
        "scan_1t",
        "scan_2t",
        "scan_operator_1t",
        "scan_operator_2t",
        "bytes_read_q1",
    ):
        assert ("tessera", case) in cases
    for system in ("postgresql", "duckdb"):
        assert (system, "first_answer") in cases and (system, "q3_warm") in cases
    assert ("postgresql", "index_build") in cases
    assert {c.case for c in report.checks} == {"q1", "q2", "q3", "scan"}
    assert report.agree, [c.detail for c in report.checks if not c.agree]


def test_generator_has_the_real_schema_and_the_query_windows(tmp_path: Path) -> None:
    import h5py

    windows = ptf_file(tmp_path / "p.h5", 20_000)
    with h5py.File(tmp_path / "p.h5") as f:
        assert [len(f[t]) for t in ("subtraction", "candidate", "rb_classifier")] == [51, 48, 9]
        for table, columns in PTF_SCHEMA.items():
            for name, dtype in columns:
                assert f[table][name].dtype.str == dtype
        ujd = f["subtraction/ujd"][:]
        assert f["candidate/sub_id"].shape == (20_000,)
    hour, night, week = (
        ((ujd >= a) & (ujd <= b)).mean() for a, b in (windows["q1"], windows["q2"], windows["q3"])
    )
    assert hour <= night <= week and week > 0
