"""The arrays benchmark at its tiny scale: every case runs and every system agrees."""

from __future__ import annotations

import numpy as np
import pytest

from tesseradb.bench import run_benchmark
from tesseradb.bench.arrays import IMAGE_ATTRS, sky_image


@pytest.mark.bench
def test_arrays_tiny_runs_every_case_and_agrees() -> None:
    report = run_benchmark("arrays", "tiny", repeat=1, warmup=0)
    cases = {(m.system, m.case) for m in report.results}
    for system in ("tessera", "zarr", "tiledb"):
        for case in ("write_dense", "read_full", "read_slab"):
            assert (system, case) in cases, (system, case)
    for system in ("tessera", "duckdb"):
        assert (system, "sql_avg_box") in cases and (system, "bytes_on_disk") in cases
    assert ("tessera", "put_triples") in cases
    assert report.agree, [c for c in report.checks if not c.agree]


def test_images_are_deterministic_int32_with_eleven_attributes() -> None:
    a, b = sky_image(64, seed=3), sky_image(64, seed=3)
    assert list(a) == IMAGE_ATTRS
    for name in IMAGE_ATTRS:
        assert a[name].dtype == np.int32 and a[name].shape == (64, 64)
        np.testing.assert_array_equal(a[name], b[name])
    assert a["v1"].max() > a["v1"].mean() + 100  # stars stand above the sky
