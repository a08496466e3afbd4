"""An array keeps its branch's head between reads while its head mark is unchanged
(``arrays/_repository.py``): a read never answers from a version older than the newest
commit, of this process or another, a killed one's included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tesseradb
from tesseradb.arrays import _repository
from tests.processes import python_process


class _CountingRepository:
    """Icechunk's repository, counting the branch look-ups."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.lookups = 0

    def lookup_branch(self, branch: str) -> Any:
        self.lookups += 1
        return self._real.lookup_branch(branch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _counting(array: Any) -> _CountingRepository:
    repository = array._repo
    _ = repository.repo  # (opened)
    counting = _CountingRepository(repository._repo)
    repository._repo = counting
    return counting


def _make(db: tesseradb.Database) -> Any:
    array = db.create_array("a", [{"name": "i", "end": 8, "chunk": 4}], {"v": "int64"})
    array[0:8] = {"v": np.arange(8)}
    return array


def test_reads_keep_the_head_until_a_commit_moves_it(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        array = _make(db)
        counting = _counting(array)
        for _ in range(5):
            assert db.sql("SELECT v FROM a WHERE i = 3").fetchall() == [(3,)]
        assert counting.lookups <= 1
        array[3:4] = {"v": np.array([30])}
        assert db.sql("SELECT v FROM a WHERE i = 3").fetchall() == [(30,)]
        assert int(array[3:4]["v"][0]) == 30


def test_a_commit_by_another_process_is_seen_at_once(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        _make(db)
    with tesseradb.connect(path, read_only=True) as reader:
        for _ in range(3):
            assert reader.sql("SELECT v FROM a WHERE i = 3").fetchall() == [(3,)]
        for value in (31, 32):
            writer = python_process(f"""
                import numpy as np, tesseradb
                with tesseradb.connect({str(path)!r}) as db:
                    db.array("a")[3:4] = {{"v": np.array([{value}])}}
            """)
            _, err = writer.communicate(timeout=120)
            assert writer.returncode == 0, err
            assert reader.sql("SELECT v FROM a WHERE i = 3").fetchall() == [(value,)]


def test_a_commit_whose_writer_died_before_it_marked_the_end_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        _make(db)
    with tesseradb.connect(path, read_only=True) as reader:
        assert reader.sql("SELECT v FROM a WHERE i = 3").fetchall() == [(3,)]
        # the writer is killed after its commit, before it rewrites the mark a second time
        writer = python_process(f"""
            import os, numpy as np, tesseradb
            from tesseradb.arrays import _repository
            marks = 0
            remark = _repository.ArrayRepository._remark
            def dying(self):
                global marks
                marks += 1
                if marks == 2:
                    os._exit(9)
                remark(self)
            _repository.ArrayRepository._remark = dying
            with tesseradb.connect({str(path)!r}) as db:
                db.array("a")[3:4] = {{"v": np.array([33])}}
        """)
        writer.communicate(timeout=120)
        assert writer.returncode == 9
        assert reader.sql("SELECT v FROM a WHERE i = 3").fetchall() == [(33,)]


def test_a_head_looked_up_during_a_commit_is_not_kept(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        array = _make(db)
        repository = array._repo
        with repository.commit_lock():  # (what another process's commit holds)
            repository.head()
            assert repository._head is None
        repository.head()
        assert repository._head is not None


def test_a_mark_that_cannot_be_written_refuses_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        array = _make(db)

        def refuse(self: Any, data: bytes) -> int:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(Path, "write_bytes", refuse)
        with pytest.raises(tesseradb.TesseraError, match="head mark"):
            array[0:1] = {"v": np.array([99])}
        monkeypatch.undo()
        assert int(array[0:1]["v"][0]) == 0
        assert not list(array._repo.directory.glob(f"{_repository.HEAD_MARK}.*"))
