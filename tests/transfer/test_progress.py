"""Progress and cancel: monotone events ending at 100%, and a cancel per long operation that
keeps nothing and leaves the database usable; the load and export commands."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import tesseradb
from tesseradb.cli import app
from tesseradb.errors import CancelledError, InvalidArgumentError
from tesseradb.progress import Cancel, ProgressEvent


def _cancel_after_first_event(cancel: Cancel) -> object:
    def callback(event: ProgressEvent) -> None:
        cancel.cancel()

    return callback


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """One input per kind, each big enough for several progress steps."""
    out = {}
    for i in range(6):
        np.save(tmp_path / f"slice{i}.npy", np.full((64, 64), i, dtype="f4"))
    out["array"] = tmp_path / "slice*.npy"
    pq.write_table(
        pa.table({"x": np.arange(20000), "y": np.arange(20000) * 0.5}), tmp_path / "r.parquet"
    )
    out["stream"] = out["table"] = tmp_path / "r.parquet"
    lines = "\n".join(json.dumps({"k": i, "s": "v" * (i % 13)}) for i in range(3000))
    (tmp_path / "d.jsonl").write_text(lines + "\n")
    out["collection"] = tmp_path / "d.jsonl"
    return out


@pytest.mark.parametrize("kind", ["array", "stream", "collection", "table"])
def test_progress_is_monotone_and_ends_at_100_percent(
    db: tesseradb.Database, files: dict[str, Path], kind: str
) -> None:
    events: list[ProgressEvent] = []
    db.load(str(files[kind]), into="target", kind=kind, progress=events.append)
    assert events, "no progress was reported"
    done = [e.done for e in events]
    assert done == sorted(done)
    assert events[-1].finished and events[-1].fraction == 1.0
    assert events[-1].done == events[-1].total
    assert sum(e.finished for e in events) == 1


@pytest.mark.parametrize("kind", ["array", "stream", "collection", "table"])
def test_a_cancelled_load_keeps_nothing(
    db: tesseradb.Database, files: dict[str, Path], kind: str
) -> None:
    # a new object is not made, an existing one is not changed
    cancel = Cancel()
    cancel.cancel()
    with pytest.raises(CancelledError, match="cancelled; nothing of it was kept"):
        db.load(str(files[kind]), into="target", kind=kind, cancel=cancel)
    assert db.catalog.get("target") is None
    db.load(str(files[kind]), into="target", kind=kind)
    before = db.sql("SELECT count(*) FROM target").scalar()
    cancel = Cancel()
    with pytest.raises(CancelledError):
        db.load(
            str(files[kind]),
            into="target",
            cancel=cancel,
            progress=_cancel_after_first_event(cancel),
        )
    assert db.sql("SELECT count(*) FROM target").scalar() == before
    db.load(str(files[kind]), into="target")  # still usable
    assert db.sql("SELECT count(*) FROM target").scalar() == 2 * before


def test_a_cancelled_export_leaves_no_target(db: tesseradb.Database, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t AS SELECT range AS i FROM range(1000000)")
    cancel = Cancel()
    with pytest.raises(CancelledError):
        db.export(
            "t",
            str(tmp_path / "t.parquet"),
            cancel=cancel,
            progress=_cancel_after_first_event(cancel),
        )
    assert not (tmp_path / "t.parquet").exists()
    assert not (tmp_path / "t.parquet.partial").exists()
    array = db.create_array("a", [{"name": "i", "end": 4000, "chunk": 100}], {"v": "float64"})
    array.write([0], np.arange(4000.0))
    cancel = Cancel()
    cancel.cancel()
    with pytest.raises(CancelledError):
        db.export("a", str(tmp_path / "a.zarr"), cancel=cancel)
    assert not (tmp_path / "a.zarr").exists()
    assert db.export("a", str(tmp_path / "a.zarr")).items == 4000


def test_a_long_statement_reports_progress_and_stops_when_cancelled(
    db: tesseradb.Database,
) -> None:
    db.sql("CREATE TABLE kept AS SELECT 1 AS x")
    cancel = Cancel()
    timer = threading.Timer(0.5, cancel.cancel)
    timer.start()
    try:
        with pytest.raises(CancelledError, match="SQL statement: cancelled"):
            db.sql(
                "CREATE TABLE slow AS SELECT count(*) AS n FROM range(4000000000) a "
                "WHERE a.range % 7 = 3",
                cancel=cancel,
            )
    finally:
        timer.cancel()
    assert db.catalog.get("slow") is None
    assert db.sql("SELECT x FROM kept").fetchall() == [(1,)]
    events: list[ProgressEvent] = []
    assert (
        db.sql("SELECT count(*) FROM range(30000000)", progress=events.append).scalar() == 30000000
    )
    assert events[-1].finished and events[-1].unit == "percent"
    assert [e.done for e in events] == sorted(e.done for e in events)


def test_progress_and_cancel_arguments_are_checked(
    db: tesseradb.Database, files: dict[str, Path]
) -> None:
    with pytest.raises(InvalidArgumentError, match="progress is True, False, None or a callable"):
        db.load(str(files["table"]), progress="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"cancel is a tesseradb\.progress\.Cancel"):
        db.sql("SELECT 1", cancel=threading.Event())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="a load into a table takes no options"):
        db.load(str(files["table"]), along="z")
    assert db.catalog.get("r") is None


def test_cli_load_and_export(tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "db.tdb"
    np.save(tmp_path / "grid.npy", np.arange(20.0).reshape(4, 5))
    (tmp_path / "d.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    result = runner.invoke(
        app, ["load", str(path), str(tmp_path / "grid.npy"), "--create", "--dims", "y,x"]
    )
    assert result.exit_code == 0, result.output
    assert "created array grid: 20 cells from 1 file(s)" in result.output
    result = runner.invoke(app, ["load", str(path), str(tmp_path / "d.jsonl")])
    assert result.exit_code == 0 and "created collection d: 2 objects" in result.output
    result = runner.invoke(app, ["export", str(path), "grid", str(tmp_path / "g.nc")])
    assert result.exit_code == 0 and "wrote 20 cells of grid" in result.output
    result = runner.invoke(
        app, ["export", str(path), "SELECT sum(value) AS s FROM grid", str(tmp_path / "s.csv")]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "s.csv").read_text().splitlines() == ["s", "190.0"]
    result = runner.invoke(app, ["load", str(path), str(tmp_path / "nothing*.fits")])
    assert result.exit_code == 1
    assert "the pattern matches no file" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["export", str(path), "grid", str(tmp_path / "g.nc")])
    assert result.exit_code == 1 and "exists" in result.output


def _ends_at_100_percent(events: list[ProgressEvent]) -> None:
    assert events and events[-1].finished and events[-1].done == events[-1].total
    assert [e.done for e in events] == sorted(e.done for e in events)


def test_stream_ingest_reports_and_cancels(db: tesseradb.Database) -> None:
    stream = db.create_stream(
        "s",
        {
            "fields": [{"name": "x", "type": "int64"}, {"name": "y", "type": "double"}],
            "index": ["x"],
        },
        max_chunk_records=1000,
    )
    table = pa.table({"x": np.arange(20000), "y": np.arange(20000) / 3})
    events: list[ProgressEvent] = []
    assert stream.ingest(table, progress=events.append) == 20000
    _ends_at_100_percent(events)
    assert events[-1].total == 20000 and events[-1].unit == "records"
    cancel = Cancel()
    with pytest.raises(CancelledError, match="ingest into stream s: cancelled"):
        stream.ingest(table, cancel=cancel, progress=_cancel_after_first_event(cancel))
    assert stream.num_records == 20000
    stream.ingest(table)
    assert db.sql("SELECT count(*) FROM s").scalar() == 40000


def test_load_jsonl_reports_and_cancels(db: tesseradb.Database, files: dict[str, Path]) -> None:
    docs = db.create_collection("docs")
    events: list[ProgressEvent] = []
    assert docs.load_jsonl(files["collection"], progress=events.append) == 3000
    _ends_at_100_percent(events)
    assert events[-1].total == files["collection"].stat().st_size
    cancel = Cancel()
    with pytest.raises(CancelledError):
        docs.load_jsonl(
            files["collection"], cancel=cancel, progress=_cancel_after_first_event(cancel)
        )
    assert docs.count() == 3000


def test_attach_and_index_builds_report_and_cancel(db: tesseradb.Database, tmp_path: Path) -> None:
    from tesseradb.datasets import ptf_file

    for night in range(3):
        ptf_file(tmp_path / f"night_{night}.h5", candidates=400, seed=night)
    pattern = str(tmp_path / "night_*.h5")
    cancel = Cancel()
    cancel.cancel()
    with pytest.raises(CancelledError, match="attach"):
        db.attach(pattern, name="ptf", cancel=cancel)
    assert db.catalog.get("ptf") is None
    events: list[ProgressEvent] = []
    db.attach(pattern, name="ptf", progress=events.append)
    _ends_at_100_percent(events)
    assert events[-1].total == 3 and events[-1].unit == "files"
    events = []
    db.create_index("ptf.candidate", ["mag"], count=20, progress=events.append)
    _ends_at_100_percent(events)
    assert events[-1].total == 3  # one index per file
    indexes = sorted((db.path / "attached" / "ptf").rglob("*"))
    stamps = {p: p.stat().st_mtime_ns for p in indexes if p.is_file()}
    spec = dict(db.attached("ptf").spec["indexes"])
    cancel = Cancel()
    with pytest.raises(CancelledError):
        db.create_index(
            "ptf.candidate",
            ["mag", "sub_id"],
            count=50,
            cancel=cancel,
            progress=_cancel_after_first_event(cancel),
            threads=1,
        )
    # nothing saved: the old index files and specs stay as they were
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert sorted((db.path / "attached" / "ptf").rglob("*")) == indexes
    assert db.attached("ptf").spec["indexes"] == spec
    assert (
        db.sql("SELECT count(*) FROM ptf.candidate WHERE mag < 18").scalar()
        == db.sql("SELECT count(*) FROM (SELECT * FROM ptf.candidate) WHERE mag < 18").scalar()
    )


def test_a_merge_of_forks_reports_and_cancels(db: tesseradb.Database) -> None:
    img = db.create_array(
        "img",
        [{"name": "y", "end": 8, "chunk": 2}, {"name": "x", "end": 4, "chunk": 4}],
        {"v": "int64"},
    )
    versions = len(img.versions())
    forks = [img.fork() for _ in range(3)]
    for row, fork in enumerate(forks):
        fork[2 * row : 2 * row + 2, 0:4] = {"v": np.full((2, 4), row + 1)}
    cancel = Cancel()
    with pytest.raises(CancelledError, match="merge 3 forks into array img: cancelled"):
        img.merge(forks, cancel=cancel, progress=_cancel_after_first_event(cancel))
    assert len(img.versions()) == versions  # nothing committed

    forks = [img.fork() for _ in range(3)]
    for row, fork in enumerate(forks):
        fork[2 * row : 2 * row + 2, 0:4] = {"v": np.full((2, 4), row + 1)}
    events: list[ProgressEvent] = []
    img.merge(forks, progress=events.append)
    _ends_at_100_percent(events)
    assert events[-1].total == 3 and events[-1].unit == "forks"
    assert len(img.versions()) == versions + 1
    assert img[0:6, 0:4]["v"].tolist() == [[r // 2 + 1] * 4 for r in range(6)]


def test_benchmark_steps_report_their_runs_and_cancel(tmp_path: Path) -> None:
    from tesseradb.bench.runner import run_benchmark

    events: list[ProgressEvent] = []
    report = run_benchmark(
        "load", "test", ["duckdb"], repeat=2, warmup=1, steps=events.append, scratch=tmp_path
    )
    assert report.agree
    by_task: dict[str, list[ProgressEvent]] = {}
    for event in events:
        by_task.setdefault(event.task, []).append(event)
    assert "csv_stream: tessera" in by_task and "csv_stream: duckdb" in by_task
    for task_events in by_task.values():
        _ends_at_100_percent(task_events)
        assert task_events[-1].total == 3 and task_events[-1].unit == "runs"
    cancel = Cancel()
    cancel.cancel()
    with pytest.raises(CancelledError, match="cancelled"):
        run_benchmark(
            "load", "test", ["duckdb"], repeat=1, warmup=0, cancel=cancel, scratch=tmp_path
        )
