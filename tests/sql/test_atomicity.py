"""A db.sql call is all or nothing, and plain tables follow the catalog's naming rules (issue 18)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import tesseradb
from tesseradb.errors import InvalidNameError, ObjectExistsError, UnknownTableError
from tesseradb.sql import engine as sql_engine


def store_tables(db: tesseradb.Database) -> list[str]:
    """The tables and views in the database's DuckDB file, read past the catalog."""
    db._engine.release_store()  # it stays attached between statements otherwise
    con = duckdb.connect(str(db.path / "tables.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT table_name FROM duckdb_tables() UNION ALL "
            "SELECT view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
    finally:
        con.close()
    return sorted(r[0] for r in rows)


@pytest.fixture
def t(db: tesseradb.Database) -> tesseradb.Database:
    db.sql("CREATE TABLE t(x INTEGER)")
    db.sql("INSERT INTO t VALUES (1)")
    return db


def test_a_lone_row_write_that_fails_midway_keeps_nothing(t: tesseradb.Database) -> None:
    t.sql("INSERT INTO t VALUES (2)")  # (the catalog is in line: the shortcut is taken)
    with pytest.raises(tesseradb.errors.SQLExecutionError):
        t.sql(
            "INSERT INTO t SELECT CASE WHEN range < 5000 THEN range ELSE error('x') END FROM range(10000)"
        )
    with pytest.raises(tesseradb.errors.SQLExecutionError):
        t.sql("UPDATE t SET x = CASE WHEN x = 1 THEN 10 ELSE error('y') END")
    assert t.sql("SELECT list(x ORDER BY x) FROM t").scalar() == [1, 2]


def test_a_failing_statement_keeps_nothing_of_the_call(t: tesseradb.Database) -> None:
    with pytest.raises(UnknownTableError):
        t.sql("INSERT INTO t VALUES (100); SELECT * FROM nope")
    assert t.sql("SELECT x FROM t").fetchall() == [(1,)]
    with pytest.raises(tesseradb.errors.SQLExecutionError):
        t.sql("CREATE TABLE u AS SELECT 1 AS y; INSERT INTO t VALUES ('not a number')")
    assert t.tables() == store_tables(t) == ["t"]
    assert t.sql("SELECT count(*) FROM t").scalar() == 1


def test_the_pruned_column_retry_does_not_repeat_writes(
    t: tesseradb.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement DuckDB cannot bind against the pruned columns runs again with every
    column; the first run's writes are rolled back, so they count once."""
    from tesseradb.sql import engine
    from tesseradb.sql.relation import RelationScan

    t.register("r", pa.table({"a": [1, 2], "b": [3, 4]}))
    original = engine.SQLEngine._scans
    runs = []

    def prune_wrongly(self: engine.SQLEngine, analysis: object) -> dict[str, RelationScan]:
        scans = original(self, analysis)  # type: ignore[arg-type]
        runs.append(1)
        # as an analysis that misread the statement would: only column a
        return {k: RelationScan(s.relation, ["a"], s.predicate) for k, s in scans.items()}

    monkeypatch.setattr(engine.SQLEngine, "_scans", prune_wrongly)
    assert t.sql("INSERT INTO t VALUES (7); SELECT sum(b) FROM r").fetchall() == [(7,)]
    assert runs == [1]  # the retry reads every column without asking _scans again
    assert t.sql("SELECT count(*) FROM t WHERE x = 7").scalar() == 1
    # one INSERT runs without a transaction around it (atomic on its own): the same
    t.sql("INSERT INTO t SELECT b FROM r")  # (b was pruned: it runs again, whole)
    assert t.sql("SELECT list(x ORDER BY x) FROM t WHERE x > 2").scalar() == [3, 4, 7]


def test_a_text_with_its_own_transactions_runs_them(t: tesseradb.Database) -> None:
    t.sql("BEGIN; INSERT INTO t VALUES (2); COMMIT")
    t.sql("BEGIN TRANSACTION; INSERT INTO t VALUES (3); ROLLBACK")
    assert t.sql("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]


@pytest.mark.parametrize(
    "statement",
    [
        'CREATE TABLE "bad name"(y INTEGER)',
        'CREATE TABLE "x""; DROP TABLE t; --"(y INTEGER)',
        'CREATE TABLE "1st" AS SELECT 1 AS y',
        'CREATE VIEW "a-view" AS SELECT * FROM t',
        'ALTER TABLE t RENAME TO "with space"',
        'CREATE TABLE select_ok(y INTEGER); CREATE TABLE "no good"(y INTEGER)',
    ],
)
def test_plain_tables_follow_the_naming_rules(t: tesseradb.Database, statement: str) -> None:
    with pytest.raises(InvalidNameError, match=r"invalid (table|view) name"):
        t.sql(statement)
    assert t.tables() == store_tables(t) == ["t"]  # nothing of the call was kept, nor renamed
    assert t.sql("SELECT x FROM t").fetchall() == [(1,)]


def test_a_rename_cannot_take_another_objects_name(t: tesseradb.Database) -> None:
    t.create_array("img", [{"name": "i", "end": 4, "chunk": 2}], {"v": "int32"})
    with pytest.raises(ObjectExistsError, match="'img'"):
        t.sql("ALTER TABLE t RENAME TO img")
    assert t.tables() == store_tables(t) == ["t"]


def test_a_table_the_catalog_missed_is_still_found(tmp_path: Path) -> None:
    """A process killed between DuckDB's commit and the catalog's update left a table the
    catalog does not list: queries still find it, and the next write lists it."""
    path = tmp_path / "db.tdb"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t(x INTEGER)")
    con = duckdb.connect(str(path / "tables.duckdb"))
    con.execute("CREATE TABLE missed AS SELECT 42 AS y")
    con.close()
    with tesseradb.connect(path) as db:
        assert db.sql("SELECT y FROM missed").fetchall() == [(42,)]
        db.sql("INSERT INTO t VALUES (1)")
        assert sorted(db.tables()) == ["missed", "t"]
        assert np.array_equal(db.sql("SELECT y FROM missed").numpy()["y"], [42])


def test_row_writes_skip_the_catalog_sync_only_while_the_store_stays_attached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone INSERT/UPDATE/DELETE does not read the store's tables back once a write has
    brought the catalog in line; a store attached afresh (another process may have written
    it meanwhile) is looked at again by the next write."""
    path = tmp_path / "db.tdb"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t(x INTEGER)")
        looked = []
        engine = db._engine
        real = sql_engine.store_objects
        monkeypatch.setattr(
            sql_engine, "store_objects", lambda cursor: looked.append(1) or real(cursor)
        )
        for i in range(5):
            db.sql("INSERT INTO t VALUES (?)", [i])
        db.sql("UPDATE t SET x = x + 10 WHERE x < 2")
        db.sql("DELETE FROM t WHERE x = 4")
        assert len(looked) <= 1  # (the first may: the store was attached by then or not)
        assert sorted(db.sql("SELECT x FROM t").fetchall()) == [(2,), (3,), (10,), (11,)]
        engine.release_store()  # as when idle: another process may open it now
        con = duckdb.connect(str(path / "tables.duckdb"))
        con.execute("CREATE TABLE missed AS SELECT 42 AS y")
        con.close()
        looked.clear()
        db.sql("INSERT INTO t VALUES (5)")
        assert looked == [1]  # attached afresh: looked at again
        assert sorted(db.tables()) == ["missed", "t"]
        db.sql("INSERT INTO t VALUES (6)")
        assert looked == [1]
