"""Parallel triple ingest: both merge strategies give what one writer gives, as one version,
and a failing source, a killed writer or two writers on one chunk leave the array as it was."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tesseradb
from tesseradb.arrays import ArrayConflictError
from tesseradb.assoc import ImageSlice, parallel_ingest
from tesseradb.errors import AssocError, TesseraError

SLICES, HEIGHT, WIDTH = 6, 20, 24


@pytest.fixture
def db(tmp_path: Path) -> Any:
    with tesseradb.connect(tmp_path / "db.tdb") as d:
        yield d


@pytest.fixture
def slices(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(7)
    paths = []
    for s in range(SLICES):
        path = tmp_path / f"slice{s}.npy"
        np.save(path, rng.integers(1, 256, (HEIGHT, WIDTH), dtype=np.uint8))
        paths.append(path)
    return paths


def _volume(db: Any, name: str) -> Any:
    return db.create_array(
        name,
        dims=[
            {"name": "z", "end": SLICES, "chunk": 1},
            {"name": "y", "end": HEIGHT, "chunk": 8},
            {"name": "x", "end": WIDTH, "chunk": 10},
        ],
        attrs={"v": "uint8"},
    )


def _kill_own_process() -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


def _fail() -> Any:
    raise RuntimeError("the camera is unplugged")


def _cells_of(z: int, ys: list[int], xs: list[int], value: int) -> tuple[Any, Any]:
    return (z, np.array(ys), np.array(xs)), np.full(len(ys), value, dtype=np.uint8)


@pytest.mark.parametrize("merge", ["fork", "union"])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_parallel_ingest_is_one_version_of_every_slice(
    db: Any, slices: list[Path], merge: str, workers: int
) -> None:
    volume = _volume(db, "volume")
    before = len(volume.versions())
    done = parallel_ingest(
        db, volume, [ImageSlice(p, s) for s, p in enumerate(slices)], workers=workers, merge=merge
    )
    assert (done.cells, done.workers, done.merge) == (SLICES * HEIGHT * WIDTH, workers, merge)
    assert len(volume.versions()) == before + 1
    assert volume.versions()[0].id == done.version
    expected = np.stack([np.load(p) for p in slices])
    np.testing.assert_array_equal(volume[:, :, :]["v"], expected)
    # the same as one writer's put_triples, and the same in SQL
    one = _volume(db, "one")
    for s, p in enumerate(slices):
        one.put_triples(*ImageSlice(p, s)())
    np.testing.assert_array_equal(one[:, :, :]["v"], expected)
    assert db.sql("SELECT count(*), sum(v) FROM volume").fetchone() == (
        expected.size,
        int(expected.sum()),
    )
    # no part is left beside the array, and the database checks clean
    assert not [p for p in volume._repo.directory.parent.iterdir() if p.name.startswith(".")]
    assert db.check().ok


@pytest.mark.parametrize("merge", ["fork", "union"])
def test_a_killed_writer_leaves_the_array_as_it_was(
    db: Any, slices: list[Path], merge: str
) -> None:
    volume = _volume(db, "volume")
    volume[0, :, :] = np.full((HEIGHT, WIDTH), 9, dtype=np.uint8)
    versions = len(volume.versions())
    # the second writer puts slice 3, then its process is killed (kill -9)
    sources = [ImageSlice(p, s) for s, p in enumerate(slices[:4])] + [_kill_own_process]
    with pytest.raises(TesseraError, match=r"process died.*nothing was committed"):
        parallel_ingest(db, volume, sources, workers=2, merge=merge)
    assert len(volume.versions()) == versions
    values = volume[:, :, :]["v"]
    assert (values[0] == 9).all() and (values[1:] == 0).all()
    assert not [p for p in volume._repo.directory.parent.iterdir() if p.name.startswith(".")]
    # and the array takes the next ingest whole
    parallel_ingest(db, volume, [ImageSlice(p, s) for s, p in enumerate(slices)], merge=merge)
    np.testing.assert_array_equal(volume[:, :, :]["v"], np.stack([np.load(p) for p in slices]))


@pytest.mark.parametrize("merge", ["fork", "union"])
def test_a_failing_source_or_writers_sharing_a_chunk_commit_nothing(
    db: Any, slices: list[Path], merge: str
) -> None:
    volume = _volume(db, "volume")
    versions = len(volume.versions())
    sources: list[Any] = [ImageSlice(slices[0], 0), _fail]
    with pytest.raises(AssocError, match="source 1 failed: RuntimeError: the camera is unplugged"):
        parallel_ingest(db, volume, sources, workers=2, merge=merge)
    # cells (0, 1, 1) and (0, 2, 2) share a chunk, each writer writes one
    sharing = [
        functools.partial(_cells_of, 0, [1], [1], 5),
        functools.partial(_cells_of, 0, [2], [2], 6),
    ]
    with pytest.raises(ArrayConflictError, match=r"both wrote chunk \(0, 0, 0\)"):
        parallel_ingest(db, volume, sharing, workers=2, merge=merge)
    # one writer may put both
    parallel_ingest(db, volume, sharing, workers=1, merge=merge)
    assert (volume[0, 1, 1]["v"], volume[0, 2, 2]["v"]) == (5, 6)
    assert len(volume.versions()) == versions + 1


def test_bad_arguments_are_named(db: Any, slices: list[Path], tmp_path: Path) -> None:
    volume = _volume(db, "volume")
    versions = len(volume.versions())
    good = [ImageSlice(slices[0], 0)]
    for kwargs, match in [
        ({"merge": "rsync"}, "merge must be one of fork, union, not 'rsync'"),
        ({"workers": 0}, "workers must be a positive int, not 0"),
        ({"workers": 1.5}, "workers must be a positive int"),
    ]:
        with pytest.raises(AssocError, match=match):
            parallel_ingest(db, volume, good, **kwargs)
    with pytest.raises(AssocError, match="no sources given"):
        parallel_ingest(db, volume, [])
    with pytest.raises(AssocError, match="source 1 is a str, not a callable"):
        parallel_ingest(db, volume, [*good, "slice1.npy"])  # type: ignore[list-item]
    # an image that is not a slice, or not there, or out of the array
    np.save(tmp_path / "cube.npy", np.zeros((2, 2, 2), dtype=np.uint8))
    with pytest.raises(AssocError, match=r"cube.npy.*2 dimensions, not 3"):
        parallel_ingest(db, volume, [ImageSlice(tmp_path / "cube.npy", 0)])
    with pytest.raises(AssocError, match=r"missing\.npy' cannot be read"):
        parallel_ingest(db, volume, [ImageSlice(tmp_path / "missing.npy", 0)])
    with pytest.raises(TesseraError, match=r"source 0: .*dimension 'z' index 6 is outside"):
        parallel_ingest(db, volume, [ImageSlice(slices[0], SLICES)])
    with pytest.raises(TesseraError, match="'nowhere'"):
        parallel_ingest(db, "nowhere", good)
    assert len(volume.versions()) == versions


def test_tiff_slices_are_read_with_tifffile(db: Any, tmp_path: Path) -> None:
    tifffile = pytest.importorskip("tifffile")
    image = np.arange(HEIGHT * WIDTH, dtype=np.uint16).reshape(HEIGHT, WIDTH)
    tifffile.imwrite(tmp_path / "slice.tif", image)
    coords, values = ImageSlice(tmp_path / "slice.tif", 4)()
    assert coords[0] == 4
    np.testing.assert_array_equal(values, image.reshape(-1))
    np.testing.assert_array_equal(coords[1], np.repeat(np.arange(HEIGHT), WIDTH))
    np.testing.assert_array_equal(coords[2], np.tile(np.arange(WIDTH), HEIGHT))
