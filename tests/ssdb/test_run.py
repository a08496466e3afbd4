"""A whole SS-DB run at the `test` configuration: every query agrees with the
files + numpy/scipy reference, runs resume cleanly, bad input is named."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tesseradb
from tesseradb import ssdb
from tesseradb.bench.ssdb_numpy import FilesRun
from tesseradb.errors import InvalidArgumentError, ObjectExistsError, ObjectNotFoundError


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, FilesRun]]:
    root = tmp_path_factory.mktemp("ssdb")
    with tesseradb.connect(root / "db.tdb") as db:
        run = db.ssdb("sky", config="test", params="medium")
        times = run.load()
        assert times.cycles == [0, 1]
        files = FilesRun(root / "files", run.config, run.params)
        files.load()
        yield run, files


def _points(run: Any) -> list[ssdb.QueryPoint]:
    """The benchmark's drawn points, plus slabs placed on images so results are not empty."""
    points = ssdb.query_points(run, count=5)
    for k, row in enumerate(run.images().to_pylist()):
        # corners a little inside each image, local corners off the edge
        points.append(
            ssdb.QueryPoint(
                row["cycle"], k * 7, k * 5, row["x0"] - 40 + k, row["y0"] + 60, "pix", "avgdist"
            )
        )
    return points


def test_cooking_and_grouping_agree(loaded: tuple[Any, FilesRun]) -> None:
    run, files = loaded
    for cycle in range(run.cycles_done):
        mine, theirs = run.observations(cycle), files.obs[cycle]
        assert mine.num_rows == len(theirs["x"]) > 0
        for name in ("obs_id", "image", "x", "y", "pixelsum", "npix", "xmin", "ymax"):
            assert np.array_equal(mine.column(name).to_numpy(), theirs[name]), name
    members = run.db.sql("SELECT group_id, obs_id FROM sky_members ORDER BY 1, 2").fetchall()
    from tesseradb.ssdb._run import OBS_PER_IMAGE

    want = sorted(
        (g, int(files._obs_field(m, "obs_id"))) for g, ms in files.group_members.items() for m in ms
    )
    assert members == want
    # the second half revisits the first half's places: some groups have repeats
    assert run.db.sql("SELECT max(members) FROM sky_groups").scalar() >= 2
    assert OBS_PER_IMAGE > 0


def test_every_query_agrees_with_numpy(loaded: tuple[Any, FilesRun], monkeypatch: Any) -> None:
    run, files = loaded
    nonempty = dict.fromkeys(["q2", "q5", "q6", "q7", "q8", "q9"], 0)
    # the test images are too small for medium's Q6 (tiles of 100 holding more than 20):
    # a lower count makes Q6 find dense tiles too
    low = dataclasses.replace(run.params, d5=1)
    monkeypatch.setattr(run, "params", low)
    monkeypatch.setattr(files, "params", low)
    for p in _points(run):
        a = ssdb.q1(run, p.cycle, p.x1, p.y1, p.raw_attr)
        assert a == pytest.approx(files.q1(p.cycle, p.x1, p.y1, p.raw_attr), rel=1e-12)
        q2 = ssdb.q2(run, p.cycle, p.x1, p.y1)
        want2 = files.q2(p.cycle, p.x1, p.y1)
        assert np.array_equal(q2.column("pixelsum").to_numpy(), want2["pixelsum"])
        nonempty["q2"] += q2.num_rows
        q3 = ssdb.q3(run, p.cycle, p.x1, p.y1).read()
        want3 = files.q3(p.cycle, p.x1, p.y1)
        for attr in ssdb.ATTRS:
            # float sums in another order: equal up to rounding of the attribute's scale
            scale = float(np.abs(want3[attr]).max()) or 1.0
            np.testing.assert_allclose(q3[attr], want3[attr], rtol=1e-9, atol=1e-12 * scale)
        q4 = ssdb.q4(run, p.cycle, p.x2, p.y2, p.obs_attr)
        want4 = files.q4(p.cycle, p.x2, p.y2, p.obs_attr)
        assert (q4 is None and want4 is None) or q4 == pytest.approx(want4, rel=1e-12)
        q5 = ssdb.q5(run, p.cycle, p.x2, p.y2).column("obs_id").to_pylist()
        assert q5 == files.q5(p.cycle, p.x2, p.y2)
        q6 = ssdb.q6(run, p.cycle, p.x2, p.y2)
        columns = [q6.column(k).to_pylist() for k in ("x", "y", "count")]
        assert list(zip(*columns, strict=True)) == files.q6(p.cycle, p.x2, p.y2)
        q7 = ssdb.q7(run, p.x2, p.y2).column("group_id").to_pylist()
        assert q7 == files.q7(p.x2, p.y2)
        for name in ("q8", "q9"):
            mine = getattr(ssdb, name)(run, p.x2, p.y2)
            theirs = getattr(files, name)(p.x2, p.y2)
            assert mine.column("obs_id").to_pylist() == [t[1] for t in theirs]
            assert mine.column("tx").to_pylist() == [t[3] for t in theirs]
            for tile, t in zip(mine.column("pix").to_pylist(), theirs, strict=True):
                assert np.array_equal(tile, t[5].ravel())
            nonempty[name] += mine.num_rows
        nonempty["q5"] += len(q5)
        nonempty["q6"] += q6.num_rows
        nonempty["q7"] += len(q7)
    assert all(nonempty.values()), nonempty


def test_q1_is_answered_by_the_chunk_fold(loaded: tuple[Any, FilesRun]) -> None:
    run, _ = loaded
    result = run.db.sql(
        "SELECT avg(v3) FROM sky_raw WHERE image BETWEEN 0 AND 3 AND y BETWEEN 5 AND 200 "
        "AND x BETWEEN 0 AND 299"
    )
    assert result.shortcut == "aggregate"
    plain = run.raw.read((slice(0, 4), slice(5, 201), slice(0, 300)), "v3")["v3"]
    assert result.scalar() == pytest.approx(plain.astype(np.float64).mean(), rel=1e-12)


def test_reopened_run_and_bad_input(loaded: tuple[Any, FilesRun]) -> None:
    run, _ = loaded
    db = run.db
    again = db.ssdb("sky")
    assert (again.config.name, again.params.name, again.cycles_done) == ("test", "medium", 2)
    with pytest.raises(ObjectNotFoundError, match="no SS-DB run called 'nope'"):
        db.ssdb("nope")
    with pytest.raises(ObjectExistsError, match="already exists"):
        db.ssdb("sky", config="test")
    with pytest.raises(InvalidArgumentError, match="unknown SS-DB configuration 'huge'"):
        db.ssdb("other", config="huge")
    with pytest.raises(InvalidArgumentError, match="unknown SS-DB parameter set 'brutal'"):
        db.ssdb("other", config="test", params="brutal")
    with pytest.raises(InvalidArgumentError, match="outside the world"):
        ssdb.q4(run, 0, ssdb.WORLD_SIZE - 5, 0, "avgdist")
    with pytest.raises(InvalidArgumentError, match="outside the world"):
        ssdb.q8(run, -1, 0)
    with pytest.raises(InvalidArgumentError, match="outside the 300 x 300 image"):
        ssdb.q1(run, 0, 300, 0, "pix")
    with pytest.raises(InvalidArgumentError, match="cycle must be one of the 2"):
        ssdb.q5(run, 2, 0, 0)
    with pytest.raises(InvalidArgumentError, match="unknown attribute 'v9'"):
        ssdb.q1(run, 0, 0, 0, "v9")
    before = db.sql("SELECT count(*) FROM sky_images").scalar()
    good = ssdb.raw_image(300, run.placement(0))
    with pytest.raises(InvalidArgumentError, match=r"attribute pix is \(10, 10\)"):
        run.ingest(0, {**good, "pix": np.zeros((10, 10), np.int32)})
    with pytest.raises(InvalidArgumentError, match="missing"):
        run.ingest(0, {k: v for k, v in good.items() if k != "v6"})
    with pytest.raises(InvalidArgumentError, match="image 99 is outside"):
        run.ingest(99, good)
    with pytest.raises(InvalidArgumentError, match="an image number is an integer"):
        run.ingest("0", good)
    with pytest.raises(InvalidArgumentError, match="dict of attribute arrays"):
        run.ingest(0, [good])
    empty = db.ssdb("empty", config="test")
    with pytest.raises(InvalidArgumentError, match="no loaded cycle"):
        ssdb.query_points(empty)
    empty.drop()
    assert "empty_run" not in db.tables() and "empty_raw" not in db.arrays()
    assert db.sql("SELECT count(*) FROM sky_images").scalar() == before


def test_interrupted_load_resumes_to_the_same_run(tmp_path: Path, monkeypatch: Any) -> None:
    with tesseradb.connect(tmp_path / "clean.tdb") as db:
        clean = db.ssdb("r", config="test")
        clean.load()
        want = {
            t: db.sql(f"SELECT * FROM r_{t} ORDER BY ALL").fetchall()
            for t in ("images", "members", "groups", "polygons", "obs1")
        }
    with tesseradb.connect(tmp_path / "broken.tdb") as db:
        run = db.ssdb("r", config="test")
        from tesseradb.ssdb import _run

        real = _run.cook_images

        def failing(array: Any, origins: dict[int, Any], *args: Any, **kwargs: Any) -> Any:
            if 6 in origins:  # the second cycle, its images stored, before it is cooked
                raise KeyboardInterrupt
            return real(array, origins, *args, **kwargs)

        monkeypatch.setattr(_run, "cook_images", failing)
        with pytest.raises(KeyboardInterrupt):
            run.load()
        monkeypatch.undo()
        assert run.cycles_done == 1
    with tesseradb.connect(tmp_path / "broken.tdb") as db:
        run = db.ssdb("r")
        run.load()  # a new process: grouping state rebuilt from the stored cycle
        got = {
            t: db.sql(f"SELECT * FROM r_{t} ORDER BY ALL").fetchall()
            for t in ("images", "members", "groups", "polygons", "obs1")
        }
    assert got == want


def test_a_failed_create_leaves_nothing_and_leftovers_are_named(
    db: tesseradb.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create interrupted midway removes what it made; objects left by one killed midway
    (no ``_run`` table) are named instead of half-adopted."""
    from tesseradb.ssdb._run import Run

    before = set(db.tables()) | set(db.arrays())
    made = Run._create_objects

    def interrupted(db_: Any, name: str, cfg: Any) -> None:
        made(db_, name, cfg)
        raise KeyboardInterrupt

    monkeypatch.setattr(Run, "_create_objects", staticmethod(interrupted))
    with pytest.raises(KeyboardInterrupt):
        db.ssdb("cut", config="test")
    assert set(db.tables()) | set(db.arrays()) == before
    monkeypatch.setattr(Run, "_create_objects", staticmethod(made))
    db.sql("CREATE TABLE cut_images (image INTEGER)")  # as a killed create leaves it
    with pytest.raises(ObjectExistsError, match="cut_images already exist without cut_run"):
        db.ssdb("cut", config="test")
    db.drop("cut_images")
    assert db.ssdb("cut", config="test").cycles_done == 0
