"""Bad input and faults: clear errors, and the array stays as it was."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tesseradb
from tesseradb.arrays import (
    ArrayBoundsError,
    ArrayConflictError,
    ArrayCorruptError,
    ArrayDtypeError,
    ArraySchemaError,
    VersionNotFoundError,
)
from tesseradb.errors import TesseraError


@pytest.fixture
def img(db: tesseradb.Database) -> Any:
    arr = db.create_array(
        "img",
        [{"name": "y", "end": 10, "chunk": 4}, {"name": "x", "end": 10, "chunk": 4}],
        {"v": "int32", "w": {"dtype": "float32", "nullable": True}},
    )
    arr[0:10, 0:10] = {"v": np.arange(100).reshape(10, 10), "w": np.ones((10, 10), np.float32)}
    return arr


def _unchanged(arr: Any, versions: int) -> None:
    assert len(arr.versions()) == versions
    np.testing.assert_array_equal(arr[:, :]["v"], np.arange(100).reshape(10, 10))


@pytest.mark.parametrize(
    ("key", "values", "error", "match"),
    [
        (
            (slice(5, 12), slice(0, 2)),
            {"v": np.zeros((7, 2))},
            ArrayBoundsError,
            r"dimension 'y': 5:12 is outside \[0, 10\)",
        ),
        ((-1, 0), {"v": 1}, ArrayBoundsError, "dimension 'y': -1 is outside"),
        (
            (slice(0, 2), slice(0, 2)),
            {"v": np.zeros((3, 2))},
            ArrayDtypeError,
            r"shape \(3, 2\) for a box of shape \(2, 2\)",
        ),
        (
            (slice(0, 2), slice(0, 2)),
            {"v": np.full((2, 2), 2.5)},
            ArrayDtypeError,
            "value 2.5 .* would change",
        ),
        (
            (slice(0, 2), slice(0, 2)),
            {"v": np.full((2, 2), 2**40)},
            ArrayDtypeError,
            "attribute 'v' is int32",
        ),
        (
            (slice(0, 2), slice(0, 2)),
            {"w": np.full((2, 2), 0.1)},
            ArrayDtypeError,
            "attribute 'w' is float32",
        ),
        ((slice(0, 2), slice(0, 2)), {"nope": 1}, ArraySchemaError, "unknown attribute 'nope'"),
        ({"z": 1}, {"v": 1}, ArraySchemaError, "unknown dimension 'z'"),
        ((slice(0, 4, 2), 0), {"v": 1}, ArrayBoundsError, "steps are not supported"),
        (
            (slice(0, 2), slice(0, 2)),
            {"v": np.array([["a", "b"], ["c", "d"]])},
            ArrayDtypeError,
            "takes int32 values",
        ),
    ],
)
def test_bad_writes_are_refused_and_change_nothing(
    img: Any, key: Any, values: Any, error: type, match: str
) -> None:
    versions = len(img.versions())
    with pytest.raises(error, match=match) as info:
        img[key] = values
    assert isinstance(info.value, TesseraError)
    _unchanged(img, versions)


def test_bad_triples_are_refused_and_change_nothing(img: Any) -> None:
    versions = len(img.versions())
    with pytest.raises(ArrayBoundsError, match="dimension 'x' index 10 is outside"):
        img.put_triples(np.array([[0, 0], [3, 10]]), {"v": np.array([1, 2])})
    with pytest.raises(ArrayBoundsError, match="coordinates must be n x 2"):
        img.put_triples(np.array([1, 2, 3]), {"v": np.array([1, 2, 3])})
    with pytest.raises(ArrayDtypeError, match="shape"):
        img.put_triples(np.array([[0, 0]]), {"v": np.array([1, 2])})
    # one column per dimension: lengths must agree, integers only, a shared one in range
    with pytest.raises(ArrayBoundsError, match="dimensions y, x have 2, 3 values"):
        img.put_triples((np.array([0, 1]), np.array([0, 1, 2])), {"v": np.array([1, 2])})
    with pytest.raises(ArrayBoundsError, match="dimension 'x' must be integers, not float64"):
        img.put_triples((np.array([0, 1]), np.array([0.0, 1.0])), {"v": np.array([1, 2])})
    with pytest.raises(ArrayBoundsError, match="dimension 'y' index 10 is outside"):
        img.put_triples((10, np.array([0, 1], dtype=np.int32)), {"v": np.array([1, 2])})
    with pytest.raises(ArrayBoundsError, match="dimension 'x' index -1 is outside"):
        img.put_triples((np.uint8(1), np.array([-1, 1], dtype=np.int16)), {"v": np.array([1, 2])})
    _unchanged(img, versions)


def test_integer_values_that_fit_are_accepted_without_loss(img: Any) -> None:
    img[0:2, 0:2] = {"v": np.array([[1, 2], [3, 4]], dtype=np.int64)}  # int64 input, values fit
    np.testing.assert_array_equal(img[0:2, 0:2]["v"], [[1, 2], [3, 4]])
    masked = np.ma.masked_array(np.ones((1, 2), np.float32), mask=[[True, False]])
    img[5:6, 0:2] = {"w": masked}  # masked cells become NULL of a nullable attribute
    assert np.isnan(img[5, 0]["w"])


@pytest.mark.parametrize(
    ("dims", "attrs", "match"),
    [
        ([], {"v": "int32"}, "at least one dimension"),
        ([{"name": "x", "end": 4}], {}, "at least one attribute"),
        ([{"name": "x", "end": 4}], {"x": "int32"}, "used twice"),
        (
            [{"name": "x", "end": None}, {"name": "y", "end": None}],
            {"v": "int32"},
            "at most one dimension may be unbounded",
        ),
        ([{"name": "x", "start": 5, "end": 5}], {"v": "int32"}, "must be above start"),
        ([{"name": "x", "end": 4, "chunk": 0}], {"v": "int32"}, "chunk length must be positive"),
        ([{"name": "x", "end": 4}], {"v": "complex64"}, "unknown type"),
        (
            [{"name": "x", "end": 4}],
            [{"name": "v", "dtype": "uint8", "fill": 300}],
            "fill value 300 is not a uint8",
        ),
        ([{"name": "x", "end": 4, "size": 3}], {"v": "int8"}, "unknown keys"),
    ],
)
def test_bad_schemas_are_refused(db: tesseradb.Database, dims: Any, attrs: Any, match: str) -> None:
    with pytest.raises(ArraySchemaError, match=match):
        db.create_array("bad", dims, attrs)
    assert "bad" not in db.arrays()
    assert not (Path(db.path) / "arrays" / "bad").exists()


def test_unknown_version_and_unknown_array(db: tesseradb.Database, img: Any) -> None:
    import datetime as dt

    with pytest.raises(VersionNotFoundError, match="array 'img' has no version 'NOSUCHVERSION"):
        db.array("img", version="NOSUCHVERSION000000")
    with pytest.raises(VersionNotFoundError, match="as of"):
        db.array("img", as_of=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    with pytest.raises(tesseradb.errors.ObjectNotFoundError, match="no array named 'imgg'"):
        db.array("imgg")
    with pytest.raises(ArrayBoundsError, match="outside"):
        img[10, 0]


def test_conflicting_writers_the_second_gets_a_clear_error(img: Any) -> None:
    versions = len(img.versions())
    ready, go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def second() -> None:
        try:
            with img.transaction("second"):
                img[0:2, 0:2] = {"v": np.full((2, 2), -2)}
                ready.set()
                go.wait(10)
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=second)
    thread.start()
    assert ready.wait(10)
    with img.transaction("first"):  # same chunk, commits first
        img[1:3, 1:3] = {"v": np.full((2, 2), -1)}
    go.set()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], ArrayConflictError)
    assert "changed by another writer" in str(errors[0])
    assert len(img.versions()) == versions + 1
    assert img[1, 1]["v"] == -1 and img[0, 0]["v"] == 0  # the first kept; nothing of the second
    # writers of disjoint chunks both land (Icechunk rebases them)
    ready.clear()
    go.clear()
    with img.transaction("a"):
        img[0, 0] = {"v": 5}
        other = threading.Thread(target=lambda: img.__setitem__((9, 9), {"v": 6}))
        other.start()
        other.join()
    assert img[0, 0]["v"] == 5 and img[9, 9]["v"] == 6


def test_a_second_process_cannot_write_the_database(tmp_path: Path) -> None:
    path = tmp_path / "a.tdb"
    with tesseradb.connect(path) as db:
        db.create_array("a", [{"name": "x", "end": 4}], {"v": "int8"})
        code = f"import tesseradb; tesseradb.connect({str(path)!r})"
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        assert run.returncode != 0
        assert "DatabaseLockedError" in run.stderr and "open for writing" in run.stderr


def test_a_corrupted_chunk_is_named(db: tesseradb.Database) -> None:
    arr = db.create_array("c", [{"name": "x", "end": 20000, "chunk": 10000}], {"v": "float64"})
    rng = np.random.default_rng(0)
    folder = Path(db.path) / "arrays" / "c" / "repo" / "chunks"
    before = set(folder.iterdir())  # the dimension's world coordinates
    arr[0:20000] = rng.standard_normal(20000)  # incompressible: chunk files, not inlined
    chunk_files = sorted(set(folder.iterdir()) - before)
    assert len(chunk_files) == 2
    target = chunk_files[0]
    data = bytearray(target.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    target.write_bytes(bytes(data))
    with pytest.raises(ArrayCorruptError, match=r"array 'c', attribute 'v', chunk \(\d,\)"):
        arr[:]
    with pytest.raises(ArrayCorruptError):
        db.sql("SELECT sum(v) FROM c").fetchall()


def _two_chunk_array(db: tesseradb.Database) -> tuple[Any, list[Path]]:
    arr = db.create_array("c", [{"name": "x", "end": 20000, "chunk": 10000}], {"v": "float64"})
    folder = Path(db.path) / "arrays" / "c" / "repo" / "chunks"
    before = set(folder.iterdir())  # the dimension's world coordinates
    arr[0:20000] = np.random.default_rng(0).standard_normal(20000)  # chunk files, not inlined
    files = sorted(set(folder.iterdir()) - before)
    assert len(files) == 2
    return arr, files


@pytest.mark.parametrize(
    "damage",
    [
        lambda f: f.unlink(),
        lambda f: f.write_bytes(f.read_bytes()[:10]),
        lambda f: f.write_bytes(b""),
        lambda f: f.write_bytes(bytes(len(f.read_bytes()))),
    ],
    ids=["missing", "truncated", "empty", "zeroed"],
)
def test_a_damaged_chunk_file_is_named_by_every_reader(db: tesseradb.Database, damage: Any) -> None:
    arr, files = _two_chunk_array(db)
    damage(files[0])
    where = r"array 'c', attribute 'v', chunk \(\d,\)"
    tesseradb.arrays.clear_chunk_cache()  # the write left the chunks in the cache
    with pytest.raises(ArrayCorruptError, match=where):
        arr[:]
    for sql in ("SELECT sum(v) FROM c", "SELECT * FROM c"):
        with pytest.raises(ArrayCorruptError, match=where):
            db.sql(sql).fetchall()
    # a triple ingest patching the damaged chunk names it and writes nothing
    versions = len(arr.versions())
    with pytest.raises(ArrayCorruptError, match=where):
        arr.put_triples(np.array([[5], [15000]]), {"v": np.array([1.0, 2.0])})
    assert len(arr.versions()) == versions


@pytest.mark.parametrize(
    ("part", "match"),
    [
        ("refs/branch.main/ref.json", "array 'c': its repository cannot be read"),
        ("snapshots", "array 'c': .* cannot be read"),
        ("", "array 'c': its repository .* is missing"),
    ],
)
def test_a_damaged_repository_is_named(tmp_path: Path, part: str, match: str) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        _two_chunk_array(db)
    repo = tmp_path / "db" / "arrays" / "c" / "repo"
    if not part:
        import shutil

        shutil.rmtree(repo)
    elif part == "snapshots":
        for f in (repo / part).iterdir():
            f.write_bytes(b"x")
    else:
        (repo / part).write_text("garbage")
    with tesseradb.connect(tmp_path / "db") as db:
        with pytest.raises(ArrayCorruptError, match=match):
            db.array("c")[:]
        with pytest.raises(ArrayCorruptError, match=match):
            db.sql("SELECT count(*) FROM c").fetchall()


def test_regrid_and_as_of_arguments(db: tesseradb.Database, img: Any) -> None:
    with pytest.raises(tesseradb.errors.OperatorError, match="needs a list of 2 factors"):
        img.regrid(10)
    from datetime import datetime, timedelta

    naive_now = datetime.now() + timedelta(seconds=1)  # local time, as Python's naive times
    past = db.array("img", as_of=naive_now)
    assert past.version == img.version
    with pytest.raises(VersionNotFoundError, match="has no version as of"):
        db.array("img", as_of=datetime(2000, 1, 1))
    with pytest.raises(tesseradb.errors.InvalidArgumentError, match="as_of must be a datetime"):
        db.array("img", as_of="yesterday")


def _write_row_in_worker(job: tuple[Any, int]) -> Any:
    fork, row = job
    fork[row, 0:10] = {"v": np.full(10, 200 + row)}
    return fork


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_forks_under_every_start_method_merge_or_refuse_never_hang(img: Any, method: str) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from tesseradb.errors import ProcessStartError

    before = len(img.versions())
    jobs = [(img.fork(), 0), (img.fork(), 4)]  # rows 0 and 4: different chunks
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        if method == "fork":
            # Icechunk's I/O threads do not survive fork(): a clear error, not a hang
            with pytest.raises(ProcessStartError, match="'forkserver' or 'spawn'"):
                list(pool.map(_write_row_in_worker, jobs, timeout=60))
            assert len(img.versions()) == before
            return
        done = list(pool.map(_write_row_in_worker, jobs, timeout=60))
    img.merge(done)
    assert len(img.versions()) == before + 1
    values = img[:, :]["v"]
    assert (values[0] == 200).all() and (values[4] == 204).all()


FORK_SCRIPT = textwrap.dedent(
    """
    import pickle, sys
    import numpy as np
    fork = pickle.loads(sys.stdin.buffer.read())
    row = int(sys.argv[1])
    fork[row, 0:10] = {"v": np.full(10, 100 + row)}
    fork.put_triples(np.array([[row, 9]]), {"w": np.array([row], dtype=np.float32)})
    sys.stdout.buffer.write(pickle.dumps(fork))
    """
)


def _run_fork(fork: Any, row: int) -> Any:
    run = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT, str(row)],
        input=pickle.dumps(fork),
        capture_output=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr.decode()
    return pickle.loads(run.stdout)


def test_forks_in_other_processes_merge_into_one_version(img: Any) -> None:
    versions = len(img.versions())
    rows = [0, 4, 8]  # one chunk row (4 cells) per worker
    returned = [_run_fork(img.fork(), row) for row in rows]
    assert len(img.versions()) == versions  # nothing visible before the merge
    img.merge(returned, message="three workers")
    assert len(img.versions()) == versions + 1
    assert img.versions()[0].message == "three workers"
    for row in rows:
        np.testing.assert_array_equal(img[row, 0:9]["v"], np.full(9, 100 + row))
        assert img[row, 9]["w"] == row
    np.testing.assert_array_equal(img[1:4, :]["v"], np.arange(10, 40).reshape(3, 10))


def test_forks_that_wrote_one_chunk_are_refused(img: Any) -> None:
    versions = len(img.versions())
    returned = [_run_fork(img.fork(), row) for row in (0, 1)]  # both in chunk row 0
    with pytest.raises(ArrayConflictError, match="forks 0 and 1 both wrote chunk"):
        img.merge(returned)
    _unchanged(img, versions)


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, tesseradb
    db = tesseradb.connect(sys.argv[1])
    arr = db.array("k")
    i = 0
    while True:
        i += 1
        arr[0:200, 0:200] = {"v": np.full((200, 200), i, dtype=np.int64)}
        print(i, flush=True)
    """
)


def test_sigkill_mid_commit_leaves_the_last_version_intact(tmp_path: Path) -> None:
    path = tmp_path / "k.tdb"
    with tesseradb.connect(path) as db:
        db.create_array(
            "k",
            [{"name": "y", "end": 200, "chunk": 50}, {"name": "x", "end": 200, "chunk": 50}],
            {"v": "int64"},
        )
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 5 and time.monotonic() < deadline:
        seen = int(proc.stdout.readline() or seen)
    time.sleep(0.05 * (os.getpid() % 5))  # land somewhere inside a later commit
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with tesseradb.connect(path) as db:
        arr = db.array("k")
        values = arr[:, :]["v"]
        assert values.min() == values.max() >= seen  # one whole version, never a mix
        arr[0, 0] = {"v": np.int64(-1)}  # and the array takes new writes
        assert arr[0, 0]["v"] == -1
