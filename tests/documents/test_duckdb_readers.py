"""Readers in other processes never make the writer of collections on the DuckDB backend
fail or wait, and a busy writer never locks them out: they read the snapshots the writer
publishes (issue 40, item 7, for every kind)."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb

import tesseradb
from tesseradb.documents._backends import DUCKDB_SNAPSHOTS
from tests.processes import python_process


def _made(path: Path, documents: int) -> None:
    with tesseradb.connect(path) as db:
        db.create_collection("c", backend="duckdb").insert_many(
            [{"batch": -1, "i": i} for i in range(documents)]
        )


def test_a_reader_holding_the_backend_does_not_stop_the_writer(tmp_path: Path) -> None:
    """The reader opens the collection first (as a reader that opened the file itself
    would hold it) and keeps reading; a writer then opens the database and inserts."""
    path = tmp_path / "db.tdb"
    _made(path, 3)
    reader = python_process(f"""
        import time, tesseradb
        with tesseradb.connect({str(path)!r}, read_only=True) as db:
            assert db.sql("SELECT count(*) FROM c").scalar() == 3
            print("READING", flush=True)
            passes, torn, counts = 0, 0, []
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                rows = db.sql(
                    "SELECT (doc->>'$.batch')::INT, count(*) FROM c GROUP BY 1"
                ).fetchall()
                torn += sum(1 for b, n in rows if b >= 0 and n != 5)
                counts.append(sum(n for _, n in rows))
                passes += 1
            ordered = all(a <= b for a, b in zip(counts, counts[1:]))
            print(passes, torn, int(ordered), flush=True)
    """)
    assert reader.stdout is not None
    assert reader.stdout.readline().strip() == "READING", reader.stderr
    with tesseradb.connect(path) as db:
        c = db.collection("c")
        began = time.monotonic()
        for batch in range(40):  # five documents a transaction
            c.insert_many([{"batch": batch, "i": i} for i in range(5)])
            time.sleep(0.01)
        took = time.monotonic() - began
        assert db.sql("SELECT count(*) FROM c").scalar() == 3 + 200
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    passes, torn, ordered = (int(x) for x in out.split())
    assert torn == 0, "a reader saw part of an insert"
    assert ordered, "a reader went back in time"
    assert passes >= 20, f"the reader got only {passes} passes in"
    assert took < 20, f"the writer took {took:.1f} s for 40 inserts beside a reader"
    # once the writer is closed, a new reader sees every document, from the snapshot
    with tesseradb.connect(path, read_only=True) as db:
        assert db.sql("SELECT count(*) FROM c").scalar() == 203


def test_a_reader_moves_to_newer_snapshots_and_waits_for_a_new_collection(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.tdb"
    _made(path, 1)
    with tesseradb.connect(path) as db, tesseradb.connect(path, read_only=True) as reader:
        assert reader.sql("SELECT count(*) FROM c").scalar() == 1
        db.collection("c").insert({"batch": 0, "i": 1})
        deadline = time.monotonic() + 10
        while reader.sql("SELECT count(*) FROM c").scalar() != 2:
            assert time.monotonic() < deadline, "the reader never saw the published insert"
            time.sleep(0.02)
        # the catalog names a new collection at once: the reader waits for its snapshot
        db.create_collection("d", backend="duckdb")
        assert reader.sql("SELECT count(*) FROM d").scalar() == 0


def test_a_reader_sees_what_a_killed_writer_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "db.tdb"
    _made(path, 1)
    writer = python_process(f"""
        import time, tesseradb
        db = tesseradb.connect({str(path)!r})
        c = db.collection("c")
        for batch in range(3):
            c.insert({{"batch": batch, "i": 0}})
        print("ACKNOWLEDGED", flush=True)
        time.sleep(60)
    """)
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "ACKNOWLEDGED"
    writer.kill()
    writer.wait()
    # the writer may have died before publishing its last insert: with no writer left to
    # publish, the reader copies the file for itself
    with tesseradb.connect(path, read_only=True) as db:
        assert db.sql("SELECT count(*) FROM c").scalar() == 4
    # a writer opening the database publishes what readers had not seen
    with tesseradb.connect(path) as db:
        assert db.collection("c").count() == 4
    with tesseradb.connect(path, read_only=True) as db:
        assert db.sql("SELECT count(*) FROM c").scalar() == 4
        assert db.collection("c").backend._reading.parent.name == DUCKDB_SNAPSHOTS


def test_snapshots_are_replaced_not_accumulated_and_check_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "db.tdb"
    _made(path, 1)
    for batch in range(3):
        with tesseradb.connect(path) as db:
            db.collection("c").insert({"batch": batch, "i": 0})
    names = sorted(p.name for p in (path / "documents" / DUCKDB_SNAPSHOTS).iterdir())
    assert len([n for n in names if n.endswith(".duckdb")]) == 1, names
    assert not [n for n in names if n.endswith(".tmp")], names
    [snapshot] = [n for n in names if n.endswith(".duckdb")]
    con = duckdb.connect(str(path / "documents" / DUCKDB_SNAPSHOTS / snapshot), read_only=True)
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0] > 0
    con.close()
    with tesseradb.connect(path) as db:
        assert db.check(repair=True).ok
    assert (path / "documents" / DUCKDB_SNAPSHOTS).is_dir()  # not quarantined
