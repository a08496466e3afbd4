"""The d4m benchmark at its tiny scale: every case runs and every system agrees."""

from __future__ import annotations

import pytest

from tesseradb.bench import run_benchmark

PEERS = ["scipy", "graphblas", "tiledb", "npy", "tiff"]  # the bench extra installs them all


@pytest.mark.bench
def test_d4m_tiny_runs_every_case_and_agrees() -> None:
    report = run_benchmark("d4m", "tiny", peers=PEERS, repeat=1, warmup=0)
    cases = {(m.system, m.case) for m in report.results}
    for system in ("tessera", "graphblas", "scipy"):
        assert (system, "assoc_construct") in cases
    assert ("scipy", "assoc_matmul") in cases and ("tessera", "assoc_matmul") in cases
    for case in ("table_put", "table_row_lookup", "table_col_lookup"):
        assert ("tessera", case) in cases
    # the paper's volume: triple ingest with one and two writers (both merges), dense blocks
    for case in ("triples_p1", "triples_p2", "triples_p2_fork", "dense_blocks"):
        assert ("tessera", case) in cases
    assert ("tiledb", "triples_p1") in cases and ("tiledb", "dense_blocks") in cases
    # sub-volumes against per-slice files and TileDB (tiny boxes span 10 to 12 slices)
    for system in ("tessera", "tiff", "npy", "tiledb"):
        assert (system, "subvolume") in cases
    assert ("tessera", "subvolume_blocks") in cases  # the block-deep chunks
    checks = {c.case for c in report.checks}
    assert checks == {
        "assoc_construct",
        "assoc_matmul",
        "table_row_lookup",
        "triples_p2",
        "triples_p2_fork",
        "dense_blocks",
        "subvolume",
    }
    assert report.agree, [c for c in report.checks if not c.agree]
