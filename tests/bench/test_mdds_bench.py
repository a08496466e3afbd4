"""The mdds benchmark at its tiny scale, and its generators against the paper's descriptions."""

from __future__ import annotations

import numpy as np
import pytest

from tesseradb.bench import run_benchmark
from tesseradb.bench.mdds import GHCN_QUERIES, TAXI_QUERIES, off_query_bounds
from tesseradb.datasets import GHCN_DESCRIPTOR, TAXI_DESCRIPTOR, element_code, ghcn, taxi
from tesseradb.records import RecordDescriptor


@pytest.mark.bench
@pytest.mark.server
def test_mdds_tiny_runs_every_case_and_agrees(postgres_server: object) -> None:
    report = run_benchmark("mdds", "tiny", repeat=1, warmup=0)
    cases = {(m.system, m.case) for m in report.results}
    for case in (
        "ingest",
        "ingest_binary_1t",
        "ingest_csv_2t",
        "ingest_queries_0ms",
        "ingest_queries_10ms",
        "ingest_queries_100ms",
        "durable_ingest",
        "bytes_on_disk",
        "overlap_random",
        "overlap_kdtree",
        "ghcn_ingest",
        "ghcn_ingest_indexed",
        "ghcn_q8_no_indexes",
    ):
        assert ("tessera", case) in cases, case
    assert ("disk", "disk_write") in cases
    for system in ("tessera", "sqlite", "duckdb", "postgresql"):
        assert (system, "taxi_q16") in cases and (system, "ghcn_q10") in cases
        assert (system, "bytes_on_disk") in cases and (system, "ingest") in cases
    assert len(report.checks) == 26
    # GHCN's stream without the appendix's indexes answered each query too
    assert {"tessera", "tessera_no_indexes"} <= set(report.checks[-1].systems)
    assert report.agree, [c.detail for c in report.checks if not c.agree]


def test_the_queries_are_the_papers() -> None:
    assert len(TAXI_QUERIES) == 16 and len(GHCN_QUERIES) == 10
    assert "pickup_latitude >= 40.7645342324 AND" in TAXI_QUERIES[0]
    assert "trip_time_in_secs <= 3600;" in TAXI_QUERIES[15]
    assert GHCN_QUERIES[9].startswith("SELECT distinct station_id, elevation FROM mdds_table")


def test_generators_follow_the_listings_and_are_deterministic() -> None:

    trips = taxi(50_000, seed=3)
    assert trips.equals(taxi(50_000, seed=3))
    assert trips.schema == RecordDescriptor.parse(TAXI_DESCRIPTOR).arrow_schema
    counts = np.bincount(trips.column("passenger_count").to_numpy(), minlength=7)[1:] / 50_000
    assert abs(counts[0] - 0.71) < 0.01 and abs(counts[1] - 0.13) < 0.01
    assert trips.column("trip_time_in_secs").to_numpy().max() <= 10_800
    times = trips.column("pickup_datetime").to_numpy()
    assert (np.diff(times) >= 0).all() and times.min() >= 1_356_998_400
    lat = trips.column("pickup_latitude").to_numpy()
    manhattan = ((lat > 40.70) & (lat < 40.88)).mean()
    assert manhattan > 0.7 and 0.003 < (lat == 0).mean() < 0.02
    assert {len(m) for m in trips.column("medallion").to_pylist()[:100]} == {32}
    obs = ghcn(50_000, seed=3)
    assert obs.schema == RecordDescriptor.parse(GHCN_DESCRIPTOR).arrow_schema
    assert (np.diff(obs.column("time").to_numpy()) >= 0).all()
    assert element_code("SNOW") == 1397641047 and element_code("TMIN") == 1414351182
    assert (obs.column("element_id").to_numpy() == element_code("SNOW")).mean() > 0.05


def test_values_on_float32_images_of_bounds_are_moved_off_them() -> None:
    import pyarrow as pa

    image = float(np.float32(40.7645342324))  # below the bound: FLOAT and DOUBLE disagree here
    table = pa.table({"pickup_latitude": pa.array([image, 40.0], pa.float32())})
    moved = off_query_bounds(table, TAXI_QUERIES).column("pickup_latitude").to_pylist()
    assert moved[0] < image and moved[1] == 40.0
