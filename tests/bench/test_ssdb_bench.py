"""The ssdb benchmark at its test configuration: every case measured, the three
systems agreeing on every query; a short disk refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tesseradb.bench import run_benchmark
from tesseradb.errors import BenchmarkError

pytestmark = [pytest.mark.bench, pytest.mark.server]


def test_ssdb_test_config_runs_and_agrees(postgres_server: object, tmp_path: Path) -> None:
    report = run_benchmark(
        "ssdb", "test", repeat=1, warmup=0, options={"params": "easy", "workdir": tmp_path}
    )
    cases = {(m.system, m.case) for m in report.results}
    for system in ("tessera", "postgresql", "numpy"):
        for case in ("load", "cook", "group", "load_cook_group", "cook_pixels", "queries_total"):
            assert (system, case) in cases, (system, case)
        for q in range(1, 10):
            assert (system, f"q{q}") in cases
    assert ("tessera", "bytes_stored") in cases
    assert {c.case for c in report.checks} == {f"q{q}" for q in range(1, 10)}
    assert report.agree, [c.detail for c in report.checks if not c.agree]
    # --workdir keeps the run: a second run resumes it (nothing left to load)
    again = run_benchmark(
        "ssdb",
        "test",
        ["numpy"],
        repeat=1,
        warmup=0,
        options={"params": "easy", "workdir": tmp_path},
    )
    assert again.params.get("tessera_resumed_after_cycle") == 2
    assert again.agree


def test_unknown_names_and_a_short_disk_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(Exception, match="unknown SS-DB parameter set 'brutal'"):
        run_benchmark("ssdb", "test", [], options={"params": "brutal", "workdir": tmp_path})
    with pytest.raises(BenchmarkError, match="no scale 'gigantic'"):
        run_benchmark("ssdb", "gigantic", [])
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10**9, 10**9, 10**6))
    with pytest.raises(BenchmarkError, match="GB of disk needed"):
        run_benchmark("ssdb", "test", [], options={"workdir": tmp_path})
    assert not (tmp_path / "ssdb-test-medium" / "tessera.tdb").exists()


def test_the_small_configuration_asks_disk_for_tessera_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At ``small`` the peers do not run, so their copies are not counted: half the raw
    size is enough (the check once asked for all three systems' 247 GB)."""
    import shutil
    from collections import namedtuple

    import tesseradb
    from tesseradb.ssdb import config

    raw = config("small").raw_bytes
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(raw, 0, int(raw * 0.51)))

    class Started(Exception):
        pass

    def connect(*_args: object, **_kwargs: object) -> None:
        raise Started  # past the disk check: stop before 99 GB are generated

    monkeypatch.setattr(tesseradb, "connect", connect)
    with pytest.raises(Started):
        run_benchmark("ssdb", "small", options={"workdir": tmp_path})
