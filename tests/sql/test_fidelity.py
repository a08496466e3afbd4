"""SQL fidelity (issue 41): every valid DuckDB statement through ``db.sql`` gives DuckDB's
own answer — session state, settings under shortcuts and pushdown, and every type.

Each script runs statement by statement through ``db.sql`` and through a plain DuckDB
connection to a database file of its own; every statement must succeed or fail alike,
and a statement's rows must be the same Python values (``fetchall``, ``fetchone``), the
same Arrow table, the same pandas frame and the same numpy arrays.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import tesseradb
from tesseradb.sql.settings import NEUTRAL_SETTINGS, RESULT_SETTINGS
from tests.test_differential import store as store_in_kind
from tests.test_differential import visible


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[tesseradb.Database, Any]]:
    db = tesseradb.connect(tmp_path / "db.tdb")
    reference = duckdb.connect(str(tmp_path / "reference.duckdb"))
    reference.execute("SET python_enable_replacements = false")
    try:
        yield db, reference
    finally:
        db.close()
        reference.close()


def _outcome_of_duckdb(reference: Any, statement: str) -> tuple[str, Any]:
    """("ok", its rows or None) or ("error", DuckDB's exception)."""
    try:
        relation = reference.sql(statement)
        return "ok", None if relation is None else relation.fetchall()
    except duckdb.Error as err:
        return "error", err


def _same_frames(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    assert list(ours.columns) == list(theirs.columns)
    pd.testing.assert_frame_equal(ours, theirs, check_exact=True)


def _same_array(a: Any, b: Any, name: str) -> None:
    if isinstance(a, np.ndarray) and a.dtype == object:
        assert isinstance(b, np.ndarray) and len(a) == len(b), name
        for x, y in zip(a, b, strict=True):
            _same_array(x, y, name)
    else:
        np.testing.assert_equal(a, b, err_msg=name)


def _same_numpy(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert list(ours) == list(theirs)
    for name in ours:
        a, b = ours[name], theirs[name]
        assert type(a) is type(b), name
        assert a.dtype == b.dtype, name
        if isinstance(a, np.ma.MaskedArray):
            assert np.array_equal(np.ma.getmaskarray(a), np.ma.getmaskarray(b)), name
            a, b = a.compressed(), b.compressed()
        _same_array(a, b, name)


def _same_rows(ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]]) -> bool:
    return len(ours) == len(theirs) and all(
        len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
        for a, b in zip(ours, theirs, strict=True)
    )


_QUERY_WORDS = ("SELECT", "FROM", "VALUES", "WITH", "DESCRIBE", "SHOW", "SUMMARIZE")
_NOT_REPEATABLE = ("random", "uuid()", "nextval", "setseed")


def _repeatable(statement: str) -> bool:
    """A query that gives the same rows when run again (each form is asked anew)."""
    return statement.lstrip().upper().startswith(_QUERY_WORDS) and not any(
        word in statement for word in _NOT_REPEATABLE
    )


def _same_arrow(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables (a NaN equals a NaN)."""
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    for x, y in zip(a.columns, b.columns, strict=True):
        x, y = x.combine_chunks(), y.combine_chunks()
        if x.equals(y):
            continue
        if not pa.types.is_floating(x.type):
            return False
        if not np.array_equal(
            x.to_numpy(zero_copy_only=False), y.to_numpy(zero_copy_only=False), equal_nan=True
        ):
            return False
    return True


def _same_value(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return type(x) is type(y) and x == y


def run_script(db: tesseradb.Database, reference: Any, script: list[str]) -> None:
    """Each statement through both; equal outcomes, and equal rows in every form."""
    for statement in script:
        expected, theirs = _outcome_of_duckdb(reference, statement)
        try:
            result = db.sql(statement)
        except tesseradb.errors.TesseraError as err:
            assert expected == "error", f"{statement!r}: DuckDB answers, we raise {err!r}"
            continue
        assert expected == "ok", f"{statement!r}: DuckDB raises {theirs!r}, we answer"
        if theirs is None:
            continue
        ours = result.fetchall()
        assert _same_rows(ours, theirs), f"{statement!r}\nours:   {ours}\nduckdb: {theirs}"
        if not _repeatable(statement):
            continue
        one = result.fetchone()
        assert (one is None and not theirs) or _same_rows([one], theirs[:1]), statement
        expected_arrow = reference.sql(statement).to_arrow_table()
        arrow = result.arrow()
        assert arrow.schema == expected_arrow.schema, (
            f"{statement!r}\nours:   {arrow.schema}\nduckdb: {expected_arrow.schema}"
        )
        assert _same_arrow(arrow, expected_arrow), statement
        assert [str(t) for t in reference.sql(statement).types] == result.types, statement
        try:
            expected_frame = reference.sql(statement).df()
        except duckdb.Error:
            with pytest.raises(tesseradb.errors.TesseraError):
                result.df()
        else:
            _same_frames(result.df(), expected_frame)
        try:
            expected_numpy = reference.sql(statement).fetchnumpy()
        except duckdb.Error:  # (a type numpy cannot hold: DuckDB refuses, and so do we)
            with pytest.raises(tesseradb.errors.TesseraError):
                result.numpy()
        else:
            _same_numpy(result.numpy(), expected_numpy)


SESSION_SCRIPTS = {
    "settings last between calls": [
        "SET default_null_order = 'nulls_first'",
        "SELECT * FROM (VALUES (1), (NULL), (3)) t(i) ORDER BY i",
        "RESET default_null_order",
        "SELECT * FROM (VALUES (1), (NULL), (3)) t(i) ORDER BY i",
        "SET integer_division = true",
        "SELECT 7 / 2",
        "RESET integer_division",
        "SELECT 7 / 2",
        "SELECT current_setting('integer_division')",
    ],
    "a transaction spans calls": [
        "CREATE TABLE t (i INTEGER PRIMARY KEY)",
        "BEGIN",
        "INSERT INTO t VALUES (1)",
        "SELECT count(*) FROM t",
        "ROLLBACK",
        "SELECT count(*) FROM t",
        "BEGIN TRANSACTION",
        "INSERT INTO t VALUES (2)",
        "CREATE TABLE u AS SELECT 42 AS x",
        "COMMIT",
        "SELECT count(*) FROM t",
        "SELECT x FROM u",
        "ROLLBACK",
    ],
    "an error inside a transaction leaves it aborted until ROLLBACK": [
        "CREATE TABLE t (i INTEGER PRIMARY KEY)",
        "INSERT INTO t VALUES (1)",
        "BEGIN",
        "INSERT INTO t VALUES (2)",
        "INSERT INTO t VALUES (1)",
        "SELECT count(*) FROM t",
        "ROLLBACK",
        "SELECT count(*) FROM t",
        "BEGIN; INSERT INTO t VALUES (5); COMMIT",
        "SELECT list(i ORDER BY i) FROM t",
        "START TRANSACTION",
        "BEGIN",
        "ABORT",
    ],
    "prepared statements": [
        "CREATE TABLE t (i INTEGER)",
        "PREPARE p AS INSERT INTO t VALUES ($1)",
        "EXECUTE p(5)",
        "EXECUTE p(7)",
        "PREPARE q AS SELECT i * ? FROM t ORDER BY i",
        "EXECUTE q(3)",
        "DEALLOCATE p",
        "EXECUTE p(9)",
        "SELECT list(i ORDER BY i) FROM t",
    ],
    "temporary objects": [
        "CREATE TEMP TABLE tt (i INTEGER)",
        "INSERT INTO tt VALUES (1), (2)",
        "SELECT sum(i) FROM tt",
        "CREATE TEMPORARY VIEW tv AS SELECT i * 10 AS j FROM tt",
        "SELECT list(j ORDER BY j) FROM tv",
        "CREATE TEMP MACRO twice(x) AS x * 2",
        "SELECT twice(21)",
        "DROP TABLE tt CASCADE",
        "SELECT * FROM tt",
    ],
    "sequences, macros, types and schemas in the store": [
        "CREATE SEQUENCE seq START 10",
        "SELECT nextval('seq')",
        "SELECT nextval('seq'), currval('seq')",
        "CREATE MACRO add_one(x) AS x + 1",
        "SELECT add_one(41)",
        "CREATE TYPE mood AS ENUM ('sad', 'happy')",
        "SELECT 'happy'::mood",
        "CREATE SCHEMA s",
        "CREATE TABLE s.t (a INTEGER)",
        "INSERT INTO s.t VALUES (1)",
        "SELECT * FROM s.t",
        "USE s",
        "SELECT * FROM t",
        "CREATE TABLE tbl (a INTEGER, b VARCHAR)",
        "SELECT name, type FROM pragma_table_info('tbl') ORDER BY cid",
    ],
    "variables and the random seed": [
        "SET VARIABLE answer = 42",
        "SELECT getvariable('answer')",
        "SELECT setseed(0.5)",
        "SELECT random() < 2",
    ],
    "catalog functions": [
        "CREATE TABLE tbl (a INTEGER)",
        "SELECT table_name FROM duckdb_tables() WHERE table_name = 'tbl'",
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'tbl'",
        "DESCRIBE tbl",
        "SHOW TABLES",
    ],
}


@pytest.mark.parametrize("script", list(SESSION_SCRIPTS), ids=list(SESSION_SCRIPTS))
def test_session_state_lasts_between_calls(
    pair: tuple[tesseradb.Database, Any], script: str
) -> None:
    db, reference = pair
    run_script(db, reference, SESSION_SCRIPTS[script])


def test_a_refused_table_name_at_commit_rolls_the_transaction_back(
    pair: tuple[tesseradb.Database, Any],
) -> None:
    db, _ = pair
    db.create_collection("docs")
    db.sql("CREATE TABLE t (i INTEGER)")
    db.sql("BEGIN")
    db.sql("INSERT INTO t VALUES (1)")
    db.sql('CREATE TABLE "select" (x INTEGER)')  # a reserved word: not a catalog name
    with pytest.raises(tesseradb.errors.TesseraError):
        db.sql("COMMIT")
    assert db.sql("SELECT count(*) FROM t").scalar() == 0
    assert db.tables() == ["t"]
    db.sql("INSERT INTO t VALUES (2)")  # no transaction is left open
    assert db.sql("SELECT count(*) FROM t").scalar() == 1


def test_tables_made_in_a_transaction_reach_the_catalog_at_commit_only(
    pair: tuple[tesseradb.Database, Any],
) -> None:
    db, _ = pair
    db.sql("BEGIN")
    db.sql("CREATE TABLE a (x INTEGER)")
    assert db.tables() == []
    db.sql("ROLLBACK")
    assert db.tables() == []
    db.sql("BEGIN")
    db.sql("CREATE TABLE b (x INTEGER)")
    db.sql("COMMIT")
    assert db.tables() == ["b"]


def test_sessions_are_apart(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        db.sql("CREATE TABLE t (i INTEGER)")
        with db.session() as one, db.session() as two:
            one.sql("BEGIN")
            one.sql("INSERT INTO t VALUES (1)")
            one.sql("CREATE TEMP TABLE mine AS SELECT 1 AS x")
            assert two.sql("SELECT count(*) FROM t").scalar() == 0  # not committed
            with pytest.raises(tesseradb.errors.UnknownTableError):
                two.sql("SELECT * FROM mine")
            one.sql("PREPARE p AS SELECT 42")
            with pytest.raises(tesseradb.errors.SQLExecutionError):
                two.sql("EXECUTE p")
            one.sql("COMMIT")
            assert two.sql("SELECT count(*) FROM t").scalar() == 1
            assert db.sql("SELECT count(*) FROM t").scalar() == 1
        with pytest.raises(tesseradb.errors.DatabaseClosedError):
            one.sql("SELECT 1")


def test_a_new_session_answers_under_the_settings_of_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New sessions share one read of the settings a fresh cursor sees, per settings
    epoch: a global setting changed since must reach the next new session."""
    from tesseradb.sql import session

    reads = []
    read = session.read_settings
    monkeypatch.setattr(session, "read_settings", lambda cursor: reads.append(1) or read(cursor))
    query = "SELECT x FROM (VALUES (1), (NULL)) v(x) ORDER BY x"
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        db.sql("SELECT 1")
        before = len(reads)
        for _ in range(3):
            with db.session() as fresh:
                assert fresh.sql(query).fetchall() == [(1,), (None,)]
        assert len(reads) == before  # (read once for the epoch, not once per session)
        db.sql("SET default_null_order = 'nulls_first'")  # (global in DuckDB)
        with db.session() as fresh:
            assert fresh.sql(query).fetchall() == [(None,), (1,)]
        with db.session() as other:  # a session-scoped change stays in its session
            other.sql("SET SESSION default_null_order = 'nulls_last'")
            assert other.sql(query).fetchall() == [(1,), (None,)]
        with db.session() as fresh:
            assert fresh.sql(query).fetchall() == [(None,), (1,)]
        db.sql("RESET default_null_order")
        with db.session() as fresh:
            assert fresh.sql(query).fetchall() == [(1,), (None,)]


def test_a_transaction_left_open_at_close_is_rolled_back(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        db.sql("CREATE TABLE t (i INTEGER)")
        db.sql("BEGIN")
        db.sql("INSERT INTO t VALUES (1)")
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        assert db.sql("SELECT count(*) FROM t").scalar() == 0


# --- every type's values, in every form ----------------------------------------------
TYPE_QUERIES = [
    "SELECT 340282366920938463463374607431768211455::UHUGEINT AS u",
    "SELECT (-170141183460469231731687303715884105728)::HUGEINT AS h, 170141183460469231731687303715884105727::HUGEINT AS m",
    "SELECT md5_number('hello') AS n",
    "SELECT sum(x) AS s FROM range(10) t(x)",
    "SELECT '0101'::BIT AS b",
    "SELECT 1234567890123456789012345678::VARINT AS v",
    "SELECT 1::VARIANT AS v, 'x'::VARIANT AS w",
    "SELECT '14:44:56+05:30'::TIMETZ AS t",
    "SELECT TIME '24:00:00' AS t, TIME '12:34:56.789' AS u",
    "SELECT 'infinity'::DATE AS a, '-infinity'::DATE AS b",
    "SELECT 'infinity'::TIMESTAMP AS a, '-infinity'::TIMESTAMP AS b",
    "SELECT TIMESTAMP_NS '2020-01-01 00:00:00.123456789' AS t",
    "SELECT TIMESTAMPTZ '2020-01-01 12:00:00+02' AS t",
    "SELECT TIMESTAMP_S '2020-01-01 12:00:00' AS s, TIMESTAMP_MS '2020-01-01 12:00:00.5' AS m",
    "SELECT INTERVAL 1 MONTH AS a, INTERVAL 36 HOUR AS b, INTERVAL 1 MICROSECOND AS c",
    "SELECT '8c6ef4bb-4b6d-4e4e-9a0b-0c5f7a2d3f10'::UUID AS u",
    "SELECT MAP {1: 'a', 2: 'b'} AS m",
    "SELECT ROW(1, 'a') AS r, [ROW(2, 'b')] AS l",
    "SELECT {'k': 1, 'v': [1, 2]} AS s",
    "SELECT union_value(k := 1) AS u",
    "SELECT 'x'::ENUM('x', 'y') AS e",
    "SELECT 1.50::DECIMAL(10, 2) AS d, 12345678901234567890.123::DECIMAL(38, 3) AS e",
    "SELECT 'abc'::BLOB AS b, '\\xAA\\xBB'::BLOB AS c",
    "SELECT [1, 2, NULL] AS l, [[1], []] AS m, [1, 2]::INTEGER[2] AS a",
    "SELECT 1::TINYINT AS a, 2::UTINYINT AS b, 3::USMALLINT AS c, 4::UINTEGER AS d, 18446744073709551615::UBIGINT AS e",
    "SELECT 1.5::FLOAT AS f, 'nan'::DOUBLE AS d, 'inf'::FLOAT AS i",
    "SELECT NULL AS n, NULL::INTEGER AS i",
    "SELECT DATE '1992-03-02' AS d, TIMESTAMP '1992-03-02 10:11:12.345678' AS t",
    "SELECT '{\"a\": 1}'::JSON AS j",
    "SELECT * FROM (VALUES (1, 'a'), (NULL, NULL)) t(i, s)",
    "SELECT min(x) EXPORT_STATE AS st FROM range(3) t(x)",
]


@pytest.mark.parametrize("query", TYPE_QUERIES)
def test_every_type_comes_out_as_duckdb_gives_it(
    pair: tuple[tesseradb.Database, Any], query: str
) -> None:
    db, reference = pair
    run_script(db, reference, [query])


# --- settings under shortcuts and pushdown, over every relation kind -------------------
SETTINGS = [
    ("default_collation", "'nocase'"),
    ("default_null_order", "'nulls_first'"),
    ("default_order", "'DESC'"),
    ("integer_division", "true"),
    ("TimeZone", "'Asia/Kolkata'"),
]
KINDS = ["arrow", "stream", "array", "attached", "collection"]
_folders = itertools.count()


def _data(kind: str) -> pa.Table:
    columns: dict[str, pa.Array] = {
        "g": pa.array([1, 2, 1, 3, 2, 1], pa.int16()),
        "c": pa.array(
            [5, 3, None, 9, 7, 1] if kind in ("arrow", "collection") else [5, 3, 4, 9, 7, 1],
            pa.int32(),
        ),
    }
    if kind in ("arrow", "collection"):
        columns["s"] = pa.array(["abc", "ABC", "Abd", "b", None, "abc"], pa.string())
    return pa.table(columns)


def _queries(kind: str) -> list[str]:
    out = [
        "SELECT count(*) FROM {t} WHERE c > 3",
        "SELECT c, g FROM {t} WHERE g = 1 ORDER BY c",
        "SELECT g, c FROM {t} WHERE g >= 1 ORDER BY g, c",
        "SELECT count(*), sum(c), min(c), max(c), avg(c) FROM {t}",
        "SELECT sum(c) / count(*), max(c) / 2 FROM {t}",
        "SELECT c FROM {t} WHERE c / 2 = 2 ORDER BY c",
        "SELECT g, sum(c) FROM {t} GROUP BY g ORDER BY g",
    ]
    if kind in ("arrow", "collection"):
        out += [
            "SELECT count(*) FROM {t} WHERE s = 'abc'",
            "SELECT s FROM {t} WHERE s = 'abc' OR s = 'b' ORDER BY s",
            "SELECT s, c FROM {t} WHERE s >= 'abc' ORDER BY s, c",
            "SELECT count(*) FROM {t} WHERE s IN ('ABC', 'x')",
        ]
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_settings_that_change_answers_reach_every_relation_kind(tmp_path: Path, kind: str) -> None:
    data = _data(kind)
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        reference = duckdb.connect()
        name = store_in_kind(db, kind, "int32", data, tmp_path)
        plain = data
        if kind == "array":
            plain = data.add_column(0, "x", pa.array(range(data.num_rows), pa.int64()))
        if kind != "collection":
            plain = plain.select(db.schema(name).names)
        reference.register("plain", plain)
        ours = visible(kind, name).replace("{ctype}", "INTEGER")
        for setting, value in [(None, None), *SETTINGS]:
            if setting is not None:
                db.sql(f"SET {setting} = {value}")
                reference.execute(f"SET {setting} = {value}")
            for template in _queries(kind):
                theirs = reference.sql(template.format(t="plain")).fetchall()
                result = db.sql(template.format(t=ours))
                got = result.fetchall()
                if "ORDER BY" not in template:
                    got, theirs = sorted(got, key=repr), sorted(theirs, key=repr)
                assert _same_rows(got, theirs), (
                    f"{kind} under {setting}={value}: {template}\n"
                    f"ours ({result.shortcut}): {got}\nduckdb: {theirs}"
                )
            if setting is not None:
                db.sql(f"RESET {setting}")
                reference.execute(f"RESET {setting}")
        reference.close()


def test_every_duckdb_setting_is_classified() -> None:
    """A new DuckDB setting must be judged: can it change an answer (then shortcuts and
    pushdown step aside while it is not at its default) or not?"""
    con = duckdb.connect()
    names = {row[0] for row in con.execute("SELECT name FROM duckdb_settings()").fetchall()}
    con.close()
    assert not RESULT_SETTINGS & NEUTRAL_SETTINGS
    unclassified = names - RESULT_SETTINGS - NEUTRAL_SETTINGS
    assert not unclassified, f"settings to classify in tesseradb/sql/settings.py: {unclassified}"


def test_a_setting_that_changes_answers_turns_shortcuts_off(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        db.register("r", pa.table({"s": ["abc", "ABC", "b"]}))
        assert db.sql("SELECT s FROM r WHERE s = 'abc'").shortcut == "lookup"
        db.sql("SET default_collation = 'nocase'")
        result = db.sql("SELECT s FROM r WHERE s = 'abc'")
        assert result.shortcut is None and sorted(result.fetchall()) == [("ABC",), ("abc",)]
        assert "no pushdown" in str(db.explain("SELECT s FROM r WHERE s = 'abc'"))
        db.sql("RESET default_collation")
        assert db.sql("SELECT s FROM r WHERE s = 'abc'").shortcut == "lookup"


@pytest.mark.parametrize("kind", KINDS)
def test_a_view_over_a_relation_reads_it(tmp_path: Path, kind: str) -> None:
    """A plain view whose body names a relation (of any kind), and a view over that one:
    DuckDB binds them at each statement, so the relations they name are read."""
    data = _data(kind)
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        name = store_in_kind(db, kind, "int32", data, tmp_path)
        source = visible(kind, name).replace("{ctype}", "INTEGER")
        db.sql(f"CREATE VIEW v AS SELECT g, c FROM {source} WHERE c > 1")
        db.sql("CREATE VIEW w AS SELECT g, sum(c) AS total FROM v GROUP BY g")
        reference = duckdb.connect()
        reference.register("plain", data)
        expected = reference.sql(
            "SELECT g, sum(c) FROM plain WHERE c > 1 GROUP BY g ORDER BY g"
        ).fetchall()
        assert db.sql("SELECT * FROM w ORDER BY g").fetchall() == expected
        reference.close()


def test_a_view_bound_later_is_refused_by_name_until_its_table_exists(tmp_path: Path) -> None:
    """(found by scripts/sqllogictest: a view with DEFER_BINDING has columns DuckDB does not
    know yet, which the analysis read as names)"""
    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE VIEW v1 WITH (DEFER_BINDING) AS SELECT * FROM tbl")
        with pytest.raises(tesseradb.TesseraError, match="tbl"):
            db.sql("FROM v1")
        db.sql("CREATE TABLE tbl (i INTEGER)")
        db.sql("INSERT INTO tbl VALUES (42)")
        assert db.sql("FROM v1").fetchall() == [(42,)]


def test_a_value_python_cannot_hold_is_refused_by_fetchall_and_given_by_arrow(
    tmp_path: Path,
) -> None:
    """(found by scripts/sqllogictest: DuckDB's own conversion raised OverflowError)"""
    with tesseradb.connect(tmp_path / "db") as db:
        result = db.sql("SELECT INTERVAL '2147483647 months' AS i")
        with pytest.raises(tesseradb.TesseraError, match="no Python form"):
            result.fetchall()
        assert result.arrow().num_rows == 1
