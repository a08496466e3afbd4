"""The embedded SQLite backend: commits only append to the write-ahead log, a thread of
its own copies the log back, and what was committed survives a killed process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tesseradb
from tesseradb.documents._embedded import SQLiteBackend, _Checkpointer

DOCS = [{"i": i, "s": f"value {i}", "tags": ["a", "b"][: i % 3]} for i in range(2000)]


def _database_file(root: Path) -> Path:
    return root / "documents" / "documents.sqlite"


def test_checkpoint_runs_beside_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Checkpointer, "LOG_BYTES", 0)  # wake after every commit
    root = tmp_path / "db"
    with tesseradb.connect(root) as db:
        db.create_collection("c", backend="sqlite").insert_many(DOCS)
        log = Path(f"{_database_file(root)}-wal")
        assert log.exists()
        # the log's pages reach the database file without any further statement
        deadline = time.monotonic() + 20
        while _database_file(root).stat().st_size < 64 * 1024 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _database_file(root).stat().st_size >= 64 * 1024
        assert db.collection("c").count() == len(DOCS)
        assert db.argo("SELECT s FROM c WHERE i = 1999") == [{"s": "value 1999"}]
    with tesseradb.connect(root, read_only=True) as db:
        assert db.collection("c").count() == len(DOCS)


def test_a_bulk_load_leaves_no_log_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tesseradb.documents import _collection

    monkeypatch.setattr(_collection, "LOAD_BATCH", 100)  # so that DOCS is a bulk load
    root = tmp_path / "db"
    with tesseradb.connect(root) as db:
        c = db.create_collection("c", backend="sqlite")
        c.insert_many(DOCS)
        assert Path(f"{_database_file(root)}-wal").stat().st_size == 0
        assert c.count() == len(DOCS)


@pytest.mark.parametrize("mapping", ["argo3", "hybrid"])
def test_acknowledged_objects_survive_a_killed_process(tmp_path: Path, mapping: str) -> None:
    root = tmp_path / "db"
    docs = [{"i": i, "s": f"value {i}", "x": [i, {"y": -0.0}]} for i in range(3000)]
    (tmp_path / "docs.json").write_text(json.dumps(docs))
    script = textwrap.dedent(
        f"""
        import json, sys, time, tesseradb
        db = tesseradb.connect({str(root)!r})
        c = db.create_collection("c", backend="sqlite", mapping={mapping!r})
        c.insert_many(json.loads(open({str(tmp_path / "docs.json")!r}).read()))
        db.argo("UPDATE c SET s = 'updated' WHERE i < 10")
        c.insert_many([{{"i": -1, "late": True}}])
        print("committed", flush=True)
        time.sleep(60)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"committed"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    expected = [{**d, "s": "updated"} if d["i"] < 10 else d for d in docs]
    expected = [{**d, "x": [d["i"], {"y": 0.0}]} for d in expected]  # SQLite keeps no -0.0
    with tesseradb.connect(root) as db:
        got = db.collection("c").find()
        by_i = {d["i"]: d for d in got}
        assert len(got) == len(docs) + 1 and by_i[-1] == {"i": -1, "late": True}
        assert json.dumps([by_i[d["i"]] for d in expected]) == json.dumps(expected)
        assert db.collection("c").check()[0] == []
        db.collection("c").insert({"after": "the kill"})  # and it takes new objects
        assert db.collection("c").count() == len(docs) + 2


def test_sqlite_twin_reader_only_inside_read_transactions(tmp_path: Path) -> None:
    # The twin must read the same snapshot: never in a write transaction (its
    # changes are not committed), outside a transaction, or on a read-only database.
    path = tmp_path / "twin.sqlite"
    backend = SQLiteBackend(path)
    try:
        backend.execute("CREATE TABLE t (x INTEGER)")
        with backend.twin_reader() as twin:
            assert twin is None
        with backend.transaction(write=True):
            backend.execute("INSERT INTO t VALUES (1)")
            with backend.twin_reader() as twin:
                assert twin is None
        with backend.transaction(), backend.twin_reader() as twin:
            assert twin is not None
            assert twin("SELECT x FROM t", ()) == [(1,)]
    finally:
        backend.close()
    reader = SQLiteBackend(path, read_only=True)
    try:
        with reader.transaction(), reader.twin_reader() as twin:
            assert twin is None
    finally:
        reader.close()


def test_delete_is_kept_after_close_and_reopen(tmp_path: Path) -> None:
    """Collection.delete (the public form of Argo/SQL DELETE): what it acknowledged is what
    a reopened database holds, on both embedded backends."""
    import tesseradb

    path = tmp_path / "db.tdb"
    for backend in ("sqlite", "duckdb"):
        with tesseradb.connect(path) as db:
            coll = db.create_collection(f"c_{backend}", backend=backend)
            coll.insert_many([{"n": i} for i in range(10)])
            assert coll.delete("n >= ?", [7]) == 3
        with tesseradb.connect(path) as db:
            assert sorted(d["n"] for d in db.collection(f"c_{backend}").find()) == list(range(7))


class _FullDiskAtCheckpoint:
    """A SQLite connection whose checkpoints fail as on a full disk (the database file
    cannot grow by what the log holds)."""

    def __init__(self, con: object) -> None:
        self._con = con

    def execute(self, sql: str, *args: object) -> object:
        if sql.startswith("PRAGMA wal_checkpoint"):
            import sqlite3

            raise sqlite3.OperationalError("database or disk is full")
        return self._con.execute(sql, *args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._con, name)


def test_a_bulk_load_whose_checkpoint_fails_is_still_acknowledged(tmp_path: Path) -> None:
    """The load commits, then checkpoints the log it wrote: a checkpoint that fails loses
    nothing (the log holds the load) and the load returns its count, not an error."""
    docs = [{"i": i, "s": f"value {i}"} for i in range(45_000)]  # (more than one batch)
    source = tmp_path / "objects.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in docs))
    with tesseradb.connect(tmp_path / "db") as db:
        c = db.create_collection("c")
        backend = c.backend  # type: ignore[attr-defined]
        real = backend._con
        backend._con = _FullDiskAtCheckpoint(real)
        try:
            assert c.load_jsonl(source) == len(docs)
        finally:
            backend._con = real
    with tesseradb.connect(tmp_path / "db") as db:
        assert sorted(db.collection("c").find(), key=lambda d: d["i"]) == docs
        assert db.check().ok


def test_a_bulk_load_leaves_no_log_behind_while_the_thread_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load's commit wakes the checkpoint thread, whose PASSIVE checkpoint runs while
    the load checkpoints and truncates the log itself: they take turns, and the log is
    cut to nothing (at 10M objects it had stayed at 28 GB until close)."""
    monkeypatch.setattr(_Checkpointer, "LOG_BYTES", 0)  # wake after every commit
    docs = [{"i": i, "s": "x" * 100 + str(i)} for i in range(60_000)]
    source = tmp_path / "objects.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in docs))
    with tesseradb.connect(tmp_path / "db") as db:
        c = db.create_collection("c")
        c.backend._con.execute("PRAGMA busy_timeout=0")  # type: ignore[attr-defined]
        assert c.load_jsonl(source) == len(docs)
        assert Path(f"{_database_file(tmp_path / 'db')}-wal").stat().st_size == 0
        assert c.count() == len(docs)
