"""Attaching HDF5 and NetCDF-style files: layouts, globs, N-D datasets, bad input and faults."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import h5py
import numpy as np
import pytest

import tesseradb
from tesseradb.attached import AttachedFileError, AttachError
from tesseradb.errors import ObjectNotFoundError, ReadOnlyError


def fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns


@pytest.fixture
def survey(tmp_path: Path) -> Path:
    path = tmp_path / "survey.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("obs")
        g["id"] = np.arange(100, dtype=np.int64)
        g["mag"] = np.linspace(15, 25, 100).astype(np.float32)
        g["band"] = np.array([b"g", b"r", b"i", b"z"] * 25, dtype="S2")
        g.create_dataset("note", data=[f"n{i}é" for i in range(100)], dtype=h5py.string_dtype())
        g.create_dataset(
            "flux",
            data=np.arange(100, dtype=np.float64) * 1.5,
            chunks=(16,),
            compression="gzip",
            shuffle=True,
        )
        bad = f.create_group("ragged")
        bad["a"] = np.arange(3)
        bad["b"] = np.arange(4)
        f["obs_complex"] = np.ones(5, dtype=np.complex64)
        rec = np.zeros(10, dtype=[("x", "<f8"), ("k", "<i4"), ("tag", "S3")])
        rec["x"] = np.arange(10) / 2
        rec["k"] = np.arange(10) * 3
        rec["tag"] = [b"ab"] * 10
        f["catalog"] = rec
    return path


def test_groups_compounds_and_skips(survey: Path, tmp_path: Path) -> None:
    before = fingerprint(survey)
    with tesseradb.connect(tmp_path / "db") as db:
        att = db.attach(survey)
        assert att.name == "survey"
        assert att.tables() == ["catalog", "obs"]
        reasons = dict(att.skipped)
        assert "differ in length" in reasons["/ragged"]
        assert "unsupported" in reasons["/obs_complex"]
        rows = db.sql(
            "SELECT id, mag, band, note, flux FROM survey.obs WHERE id IN (0, 5, 99) ORDER BY id"
        ).fetchall()
        assert rows[1] == (5, pytest.approx(15 + 5 * 10 / 99, rel=1e-6), "r", "n5é", 7.5)
        assert db.sql("SELECT sum(k), max(tag), avg(x) FROM survey.catalog").fetchall() == [
            (135, "ab", 2.25)
        ]
        assert (
            db.sql("SELECT count(*) FROM survey.obs WHERE band = 'z' AND flux > 100").scalar() == 9
        )
        db.create_index("survey.obs", ["mag", "band", "flux"])
        assert (
            db.sql("SELECT count(*) FROM survey.obs WHERE band = 'z' AND flux > 100").scalar() == 9
        )
    assert fingerprint(survey) == before  # the file was never written


def test_glob_is_one_table_with_a_file_column(tmp_path: Path) -> None:
    for night in range(3):
        with h5py.File(tmp_path / f"night{night}.h5", "w") as f:
            f["det/t"] = np.arange(10, dtype=np.float64) + 100 * night
            f["det/v"] = np.full(10, night, dtype=np.int32)
    with tesseradb.connect(tmp_path / "db") as db:
        db.attach(tmp_path / "night*.h5", name="nights")
        assert db.sql("SELECT count(*), sum(v) FROM nights.det").fetchall() == [(30, 30)]
        rows = db.sql("SELECT _file, count(*) FROM nights.det GROUP BY _file ORDER BY 1").fetchall()
        assert rows == [("night0.h5", 10), ("night1.h5", 10), ("night2.h5", 10)]
        assert db.sql("SELECT min(t) FROM nights.det WHERE _file = 'night2.h5'").scalar() == 200.0
        db.create_index("nights.det", ["t"])
        assert db.sql("SELECT count(*) FROM nights.det WHERE t BETWEEN 105 AND 204").scalar() == 10
    with h5py.File(tmp_path / "night9.h5", "w") as f:
        f["det/t"] = np.arange(10, dtype=np.float32)  # another type: not the same layout
        f["det/v"] = np.zeros(10, dtype=np.int32)
    with tesseradb.connect(tmp_path / "db2") as db, pytest.raises(AttachError, match=r"night9\.h5"):
        db.attach(tmp_path / "night*.h5", name="nights")


def test_nd_dataset_with_dimension_scales(tmp_path: Path) -> None:
    path = tmp_path / "grid.nc"
    with h5py.File(
        path, "w"
    ) as f:  # laid out as netCDF4 does: coordinate variables as dimension scales
        f["time"] = np.array([0.0, 6.0, 12.0])
        f["lat"] = np.array([-10.0, 0.0, 10.0, 20.0])
        f["time"].make_scale("time")
        f["lat"].make_scale("lat")
        f["temp"] = np.arange(12, dtype=np.float32).reshape(3, 4)
        f["temp"].dims[0].attach_scale(f["time"])
        f["temp"].dims[1].attach_scale(f["lat"])
        f["raw"] = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    with tesseradb.connect(tmp_path / "db") as db:
        att = db.attach(path, name="grid")
        assert "temp" in att.tables() and "raw" in att.tables()
        assert db.schema("grid.temp").names == ["time", "lat", "temp"]
        rows = db.sql(
            "SELECT time, lat, temp FROM grid.temp WHERE lat >= 10 AND time = 6 ORDER BY lat"
        ).fetchall()
        assert rows == [(6.0, 10.0, 6.0), (6.0, 20.0, 7.0)]
        assert db.sql("SELECT count(*), sum(raw) FROM grid.raw WHERE dim_0 = 1").fetchall() == [
            (12, sum(range(12, 24)))
        ]
        assert db.sql("SELECT count(*) FROM grid.raw WHERE dim_1 > 5").scalar() == 0
        slab = att.read("/temp", (slice(1, 3), slice(0, 2)))
        assert slab.tolist() == [[4.0, 5.0], [8.0, 9.0]]


def test_bad_input(tmp_path: Path) -> None:
    text = tmp_path / "notes.h5"
    text.write_text("not hdf5")
    with tesseradb.connect(tmp_path / "db") as db:
        with pytest.raises(AttachError, match="not an HDF5"):
            db.attach(text)
        with pytest.raises(AttachError, match="no files match"):
            db.attach(tmp_path / "none*.h5")
        with pytest.raises(AttachError, match="no such file"):
            db.attach(tmp_path / "missing.h5")
        empty = tmp_path / "empty.h5"
        h5py.File(empty, "w").close()
        with pytest.raises(AttachError, match="no table"):
            db.attach(empty)
        assert db.info().objects == []  # nothing was recorded
        with pytest.raises(ObjectNotFoundError):
            db.attached("nothing")
    assert text.read_text() == "not hdf5"


def test_deleted_or_truncated_file_is_a_clear_error(survey: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.h5"
    copy.write_bytes(survey.read_bytes())
    with tesseradb.connect(tmp_path / "db") as db:
        db.attach(copy, name="c")
        assert db.sql("SELECT count(*) FROM c.obs").scalar() == 100
        data = copy.read_bytes()
        copy.write_bytes(data[: len(data) // 3])
        with pytest.raises(AttachedFileError, match=r"copy\.h5"):
            db.sql("SELECT sum(flux) FROM c.obs")
        copy.unlink()
        with pytest.raises(AttachedFileError, match=r"copy\.h5"):
            db.sql("SELECT count(*) FROM c.obs")


def test_detach_persistence_and_read_only(survey: Path, tmp_path: Path) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.attach(survey, name="s")
        db.create_index("s.obs", "mag", count=10)
        assert (path / "attached" / "s").is_dir()
    with tesseradb.connect(path, read_only=True) as ro:
        assert ro.sql("SELECT count(*) FROM s.obs WHERE mag > 24").scalar() == 10
        with pytest.raises(ReadOnlyError):
            ro.attach(survey, name="t")
    with tesseradb.connect(path) as db:
        kinds = {o.name: o.kind for o in db.info().objects}
        assert kinds["s"] == "attached" and kinds["s.obs"] == "attached table"
        db.detach("s")
        assert not (path / "attached" / "s").exists()
        with pytest.raises(tesseradb.errors.UnknownTableError):
            db.sql("SELECT * FROM s.obs")
        db.attach(survey, name="s")  # the name is free again
        db.drop("s")
        assert db.info().objects == []


def test_counts_the_bins_settle_are_answered_without_reading(tmp_path: Path) -> None:
    path = tmp_path / "counts.h5"
    with h5py.File(path, "w") as f:
        f["t/code"] = np.arange(10_000) % 7
        f["t/mag"] = np.linspace(10, 30, 10_000)
    with tesseradb.connect(tmp_path / "db") as db:
        att = db.attach(path, name="c")
        db.create_index("c.t", ["code"], exact=True)
        db.create_index("c.t", ["mag"], edges=[15, 20, 25])
        before = att.bytes_read
        result = db.sql(
            "SELECT count(*) AS n FROM c.t WHERE code IN (1, 3) AND mag >= 15 AND mag < 25"
        )
        code, mag = np.arange(10_000) % 7, np.linspace(10, 30, 10_000)
        expected = int((np.isin(code, [1, 3]) & (mag >= 15) & (mag < 25)).sum())
        assert result.fetchall() == [(expected,)] and result.columns == ["n"]
        assert result.scan_stats["c.t"].rows == 0
        assert att.bytes_read == before  # settled by the bins: no data read
        assert db.sql("SELECT count(*) FROM c.t").scalar() == 10_000
        # edge bins cut by the range: the raw values are read and checked (by the scan's
        # units, folding partial counts) and the answer is the same
        before = att.bytes_read
        edge = db.sql("SELECT count(*) FROM c.t WHERE code = 2 AND mag < 17.5")
        assert edge.scalar() == int(
            ((np.arange(10_000) % 7 == 2) & (np.linspace(10, 30, 10_000) < 17.5)).sum()
        )
        assert edge.shortcut == "aggregate" and att.bytes_read > before
        # an unindexed column, or a WHERE that is not exactly a predicate, is never counted from bins
        assert (
            db.sql("SELECT count(*) FROM c.t WHERE code = 1 AND mag * 2 > 40")
            .scan_stats["c.t"]
            .rows
            > 0
        )


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"count": -5}, "count must be a whole number >= 1, not -5"),
        ({"count": 0}, "count must be a whole number >= 1, not 0"),
        ({"precision": 1.5}, "precision must be a whole number"),
        ({"threads": "4"}, "threads must be a whole number"),
        ({"edges": "15,20"}, "edges must be a list of numbers"),
        ({"edges": []}, "binning by edges needs at least one edge"),
        ({"count": 3, "precision": 2}, "choose one binning, not count and precision"),
        ({"encoding": "bitsliced"}, "encoding must be 'equality' or 'range'"),
        ({"kind": "btree"}, "unknown index kind 'btree'"),
    ],
)
def test_bad_index_options_are_clear_errors_and_build_nothing(
    survey: Path, tmp_path: Path, options: dict[str, object], match: str
) -> None:
    from tesseradb.errors import InvalidArgumentError

    with tesseradb.connect(tmp_path / "db") as db:
        db.attach(survey, name="s")
        with pytest.raises(InvalidArgumentError, match=match):
            db.create_index("s.obs", "mag", **options)  # type: ignore[arg-type]
        assert db.attached("s").spec.get("indexes", []) == []
        assert not list((tmp_path / "db" / "attached" / "s").rglob("*.bmi"))
