"""Readers in other processes never make the writer of plain tables fail or wait, and a
busy writer never locks them out: they read published snapshots (issue 40, item 7)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb
import pytest

import tesseradb
from tesseradb.sql.store import SNAPSHOTS
from tests.processes import python_process


def test_a_long_reader_in_another_process_does_not_stop_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "db.tdb"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t AS SELECT range AS i FROM range(1000)")
    reader = python_process(f"""
        import tesseradb
        with tesseradb.connect({str(path)!r}, read_only=True) as db:
            print("READING", flush=True)
            # several seconds of one statement over the plain table
            n = db.sql("SELECT count(*) FROM t a, t b, t c WHERE a.i + b.i + c.i = 1500").scalar()
            print("DONE", n, flush=True)
    """)
    assert reader.stdout is not None
    assert reader.stdout.readline().strip() == "READING"
    time.sleep(0.5)
    with tesseradb.connect(path) as db:
        began = time.monotonic()
        for i in range(20):
            db.sql("INSERT INTO t VALUES (?)", [1000 + i])
        took = time.monotonic() - began
        assert db.sql("SELECT count(*) FROM t").scalar() == 1020
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    assert "DONE" in out
    assert took < 5, f"the writer waited {took:.1f} s for a reader"


def test_a_busy_writer_does_not_lock_readers_out_and_they_see_whole_statements(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.tdb"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t (batch INTEGER, i INTEGER)")
        reader = python_process(f"""
            import time, tesseradb
            passes, torn, seen = 0, 0, set()
            with tesseradb.connect({str(path)!r}, read_only=True) as db:
                deadline = time.monotonic() + 4
                while time.monotonic() < deadline:
                    counts = db.sql("SELECT batch, count(*) FROM t GROUP BY batch").fetchall()
                    torn += sum(1 for _, n in counts if n != 10)
                    seen.update(b for b, _ in counts)
                    passes += 1
            print(passes, torn, len(seen), flush=True)
        """)
        batch = 0
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:  # a statement every 10 ms, ten rows each
            db.sql("INSERT INTO t SELECT ?, range FROM range(10)", [batch])
            batch += 1
            time.sleep(0.01)
        out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    passes, torn, seen = (int(x) for x in out.split())
    assert torn == 0
    assert passes >= 20, f"the reader got only {passes} passes in"
    assert seen >= 10, f"the reader saw only {seen} of {batch} batches"


def test_a_reader_sees_what_a_killed_writer_committed(tmp_path: Path) -> None:
    path = tmp_path / "db.tdb"
    writer = python_process(f"""
        import sys, time, tesseradb
        db = tesseradb.connect({str(path)!r})
        db.sql("CREATE TABLE t AS SELECT 1 AS x")
        db.sql("INSERT INTO t VALUES (2)")
        print("READY", flush=True)
        time.sleep(60)
    """)
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "READY"
    writer.kill()
    writer.wait()
    # the writer may have died before publishing its last write: the reader copies the
    # store for itself then (no writer can change it meanwhile)
    with tesseradb.connect(path, read_only=True) as db:
        assert db.sql("SELECT list(x ORDER BY x) FROM t").scalar() == [1, 2]
    # a writer opening the database publishes what readers had not seen
    with tesseradb.connect(path) as db:
        db._engine.publish_store()
    with tesseradb.connect(path, read_only=True) as db:
        assert db.sql("SELECT list(x ORDER BY x) FROM t").scalar() == [1, 2]
        assert db._engine.store._chosen == "snapshot"


def test_snapshots_are_replaced_not_accumulated(tmp_path: Path) -> None:
    path = tmp_path / "db.tdb"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t (x INTEGER)")
        for i in range(5):
            db.sql("INSERT INTO t VALUES (?)", [i])
            db._engine.publish_store()
    names = sorted(p.name for p in (path / SNAPSHOTS).iterdir())
    assert len([n for n in names if n.endswith(".duckdb")]) == 1, names
    assert not [n for n in names if n.endswith(".tmp")], names
    # the snapshot is a DuckDB file of its own, with every committed row
    [snapshot] = [path / SNAPSHOTS / n for n in names if n.endswith(".duckdb")]
    con = duckdb.connect(str(snapshot), read_only=True)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (5,)
    con.close()


def test_a_reader_waits_for_a_table_the_catalog_names_before_its_snapshot(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.tdb"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE a AS SELECT 1 AS x")
        db._engine.publish_store()
        with tesseradb.connect(path, read_only=True) as reader:
            assert reader.sql("SELECT x FROM a").scalar() == 1
            db.sql("CREATE TABLE b AS SELECT 2 AS y")  # in the catalog at once
            assert reader.sql("SELECT y FROM b").scalar() == 2  # once published


@pytest.mark.parametrize("statement", ["INSERT INTO t VALUES (1)", "CREATE TABLE u (x INT)"])
def test_a_reader_cannot_write_the_snapshot(tmp_path: Path, statement: str) -> None:
    path = tmp_path / "db.tdb"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t (x INTEGER)")
    with tesseradb.connect(path, read_only=True) as db:
        with pytest.raises(tesseradb.errors.ReadOnlyError):
            db.sql(statement)
        db.sql("CREATE TEMP TABLE mine AS SELECT 1 AS x")  # the session's own
        assert db.sql("SELECT x FROM mine").scalar() == 1


def test_a_retried_restricted_read_waits_for_the_newest_snapshot(tmp_path: Path) -> None:
    """A restricted session's snapshot lacked a new table while another statement still
    used that snapshot: the retry used to get the same snapshot again and answered that
    the table was lost (seen with four served clients at once under load)."""
    import threading

    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE TABLE a AS SELECT range AS i FROM range(1000)")
        db._engine.publish_store()
        assert db.session(restricted=True).sql("SELECT count(*) FROM a").scalar() == 1000
        started = threading.Event()
        counted: list[int] = []

        def hold_the_snapshot() -> None:
            session = db.session(restricted=True)
            started.set()
            counted.append(
                session.sql(
                    "SELECT count(*) FROM range(1500000000) r, (SELECT 1 FROM a LIMIT 1) x"
                ).scalar()
            )

        holder = threading.Thread(target=hold_the_snapshot)
        holder.start()
        started.wait()
        while not db._engine._restricted or not db._engine._restricted.store._users:
            time.sleep(0.005)  # (the long statement has the snapshot attached)
        db.sql("CREATE TABLE b AS SELECT 7 AS v")
        assert db.session(restricted=True).sql("SELECT v FROM b").fetchall() == [(7,)]
        holder.join()
        assert counted == [1_500_000_000]


def test_a_reader_links_a_snapshot_whole_or_not_at_all(tmp_path: Path) -> None:
    """The writer removes an older generation file by file once a newer one is whole: a
    reader must never attach a main file whose WAL went away (it would read a store
    without what the WAL held), so it links both or is told to list again."""
    from tesseradb._snapshots import FileSnapshots, link_snapshot, wal_of

    source = tmp_path / "tables.duckdb"
    con = duckdb.connect(str(source))
    con.execute("SET checkpoint_threshold = '1GB'")  # (the table stays in the WAL)
    con.execute("CREATE TABLE points AS SELECT range AS i FROM range(10)")
    snapshots = FileSnapshots(source, tmp_path / "snaps", "tables")
    snapshots.publish()
    con.close()
    newest = snapshots.newest()
    assert newest is not None and wal_of(newest).exists()
    links = tmp_path / "links"
    links.mkdir()
    linked = link_snapshot(newest, links)
    reader = duckdb.connect(str(linked), read_only=True)
    assert reader.execute("SELECT count(*) FROM points").fetchone() == (10,)
    reader.close()
    # the generation half removed (its WAL first): not linked, listed again instead
    for old in links.iterdir():
        old.unlink()
    wal_of(newest).unlink()
    with pytest.raises(FileNotFoundError):
        link_snapshot(newest, links)
    assert not list(links.iterdir())
    # its manifest gone: the same
    newest.with_suffix(".json").unlink()
    with pytest.raises(FileNotFoundError):
        link_snapshot(newest, links)


def test_links_a_killed_reader_left_are_removed_by_the_next_reader(tmp_path: Path) -> None:
    import subprocess
    import tempfile

    from tesseradb._snapshots import private_directory

    gone = subprocess.Popen(["true"])
    gone.wait()
    root = Path(tempfile.gettempdir())
    left = root / f"tessera-test-links-{gone.pid}-abc"
    left.mkdir()
    (left / "tables.000000000001.duckdb").write_bytes(b"x" * 100)
    mine = private_directory("tessera-test-links-")
    try:
        assert not left.exists()
        assert mine.name.startswith(f"tessera-test-links-{os.getpid()}-")
    finally:
        mine.rmdir()


def test_restricted_writers_publishing_at_once_leave_a_whole_snapshot(tmp_path: Path) -> None:
    """Each restricted session's write makes the writer publish before that session reads
    again; many at once used to copy side by side, each removing the other's files as a
    killed publish's strays, until no whole snapshot was left and readers answered that
    the tables were lost (16 PostgreSQL clients with workers)."""
    import threading

    path = tmp_path / "db.tdb"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE plain AS SELECT range AS i FROM range(1000)")
        db.sql("CREATE TABLE acks (client INTEGER, seq INTEGER)")
        errors: list[str] = []
        seen_without_snapshot: list[list[str]] = []
        stop = threading.Event()

        def client(number: int) -> None:
            session = db.session(restricted=True)
            try:
                for seq in range(25):
                    session.sql("INSERT INTO acks VALUES (?, ?)", [number, seq])
                    mine = session.sql(
                        "SELECT count(*) FROM acks WHERE client = ?", [number]
                    ).scalar()
                    if mine != seq + 1:
                        errors.append(f"client {number} saw {mine} of its {seq + 1} rows")
                    assert session.sql("SELECT count(*) FROM plain").scalar() == 1000
            except Exception as err:  # (collected: the test says which)
                errors.append(f"client {number}: {err}")

        def watch() -> None:
            while not stop.is_set():
                names = os.listdir(path / SNAPSHOTS)
                if not any(n.endswith(".duckdb") for n in names):
                    seen_without_snapshot.append(names)
                time.sleep(0.001)

        watcher = threading.Thread(target=watch)
        watcher.start()
        clients = [threading.Thread(target=client, args=(n,)) for n in range(8)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join()
        stop.set()
        watcher.join()
        assert not errors, errors[:3]
        assert not seen_without_snapshot, seen_without_snapshot[:3]
    with tesseradb.connect(path, read_only=True) as reader:
        assert reader.sql("SELECT count(*) FROM acks").scalar() == 8 * 25


def test_a_restricted_session_is_told_when_its_write_cannot_be_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restricted session reads the newest snapshot: when the writer cannot publish
    one (a full disk), its next read says so instead of answering without its write."""
    import errno

    from tesseradb._snapshots import FileSnapshots

    with tesseradb.connect(tmp_path / "db.tdb") as db:
        db.sql("CREATE TABLE t (x INTEGER)")
        session = db.session(restricted=True)
        assert session.sql("SELECT count(*) FROM t").scalar() == 0

        def full(self: FileSnapshots) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(FileSnapshots, "_publish", full)
        session.sql("INSERT INTO t VALUES (1)")
        with pytest.raises(tesseradb.errors.TableStoreError, match="No space left"):
            session.sql("SELECT count(*) FROM t").scalar()
        monkeypatch.undo()
        assert session.sql("SELECT count(*) FROM t").scalar() == 1


def test_a_snapshot_shares_the_main_file_until_a_checkpoint_changes_it(tmp_path: Path) -> None:
    """Between checkpoints only the WAL changes: a publish links the last snapshot's main
    file instead of copying the whole store again. Every snapshot, linked or copied, reads
    as the store did when published: small inserts (WAL only), large ones (which DuckDB
    writes into the main file before the commit), deletes and checkpoints."""
    import random

    from tesseradb._snapshots import FileSnapshots, link_snapshot

    source = tmp_path / "tables.duckdb"
    con = duckdb.connect(str(source))
    con.execute("SET checkpoint_threshold = '1GB'")  # (checkpoints when the test says)
    con.execute("CREATE TABLE t (i BIGINT)")
    con.execute("CHECKPOINT")
    snapshots = FileSnapshots(source, tmp_path / "snaps", "tables")
    rng = random.Random(7)
    model: list[int] = []
    shared = copied = 0
    for step in range(30):
        op = rng.choice(["small", "small", "small", "large", "delete", "checkpoint"])
        if op == "small":
            con.execute("INSERT INTO t VALUES (?)", [step])
            model.append(step)
        elif op == "large":  # (row groups written to the main file ahead of the WAL)
            con.execute(f"INSERT INTO t SELECT {step} FROM range(200000)")
            model.extend([step] * 200000)
        elif op == "delete":
            con.execute("DELETE FROM t WHERE i % 3 = ?", [step % 3])
            model = [i for i in model if i % 3 != step % 3]
        else:
            con.execute("CHECKPOINT")
        time.sleep(0.06)  # (beyond the file clock's margin, so the main file may be shared)
        before = snapshots.newest()
        inode = None if before is None else before.stat().st_ino
        snapshots.publish()
        newest = snapshots.newest()
        assert newest is not None
        if newest.stat().st_ino == inode:
            shared += 1
        else:
            copied += 1
        links = tmp_path / f"links{step}"
        links.mkdir()
        reader = duckdb.connect(str(link_snapshot(newest, links)), read_only=True)
        got = reader.execute("SELECT count(*), coalesce(sum(i), 0) FROM t").fetchone()
        reader.close()
        assert got == (len(model), sum(model)), (step, op)
    con.close()
    assert shared and copied, (shared, copied)


def test_a_snapshot_published_while_a_reader_attaches_the_older_one_is_not_missed(
    tmp_path: Path,
) -> None:
    """A reader chose a snapshot, and the writer published a newer one before the reader
    noted what it attached: it noted the newer one, so the retry of a statement whose
    table only the newer one held kept the older snapshot and answered that the table
    was lost (one served Flight SQL query in about twenty)."""
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        db.sql("CREATE TABLE a AS SELECT 1 AS x")
        session = db.session(restricted=True)
        assert session.sql("SELECT x FROM a").scalar() == 1
        db._engine.store._publish_period = 3600.0  # (publishes when the test says)
        db.sql("CREATE TABLE b AS SELECT 2 AS y")
        instance = db._engine._restricted
        assert instance is not None
        reader = instance.store
        reader.release(instance.connection())  # (attached again at the next statement)
        attach = reader._attach_file

        def racing(con: duckdb.DuckDBPyConnection, path: Path, read_only: bool) -> None:
            attach(con, path, read_only)
            if reader._attach_file is racing:  # (once)
                del reader._attach_file
                db._engine.publish_store()  # a newer snapshot, just after the attach

        reader._attach_file = racing  # type: ignore[method-assign]
        assert session.sql("SELECT y FROM b").scalar() == 2


def test_a_readers_spill_directory_is_its_own_and_a_killed_readers_is_removed(
    tmp_path: Path,
) -> None:
    """A reader's DuckDB spills into a temporary directory named with its pid: removed at
    close, and by the next reader when the process that made it was killed."""
    import subprocess
    import tempfile

    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE TABLE t AS SELECT 1 AS x")
    gone = subprocess.Popen(["true"])
    gone.wait()
    left = Path(tempfile.gettempdir()) / f"tessera-spill-{gone.pid}-abc"
    left.mkdir()
    mine = f"tessera-spill-{os.getpid()}-*"
    with tesseradb.connect(tmp_path / "db", read_only=True) as db:
        assert db.sql("SELECT x FROM t").fetchall() == [(1,)]
        assert len(list(Path(tempfile.gettempdir()).glob(mine))) == 1
        assert not left.exists()
    assert not list(Path(tempfile.gettempdir()).glob(mine))
