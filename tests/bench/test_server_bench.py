"""The server benchmark at its test scale: every case runs for tessera and its peers, and the
systems agree (point answers, download rows, every acknowledged write of the mix stored)."""

from __future__ import annotations

import pytest

from tesseradb.bench import run_benchmark


@pytest.mark.bench
@pytest.mark.server
@pytest.mark.slow
def test_server_test_scale_runs_every_case_and_agrees() -> None:
    report = run_benchmark("server", "test", repeat=1, warmup=0)
    found = {(m.system, m.case) for m in report.results}
    for case in ("query_small", "arrow_download"):
        assert ("tessera", case) in found and ("duckdb", case) in found, case
    assert ("tessera", "query_small_in_process") in found
    for system in ("tessera", "postgresql"):
        for case in (
            "queries_32_clients",
            "queries_32_clients_p50",
            "queries_32_clients_p99",
            "ingest_pgwire",
        ):
            assert (system, case) in found, (system, case)
            assert report.value(system, case) > 0
    assert {c.case for c in report.checks} == {
        "query_small",
        "arrow_download",
        "queries_32_clients_writes",
        "queries_32_clients_errors",
        "ingest_pgwire",
    }
    for case in ("query_small_pgwire", "query_small_flight", "arrow_download_flight"):
        assert ("tessera", case) in found, case
    assert report.agree, [c for c in report.checks if not c.agree]
