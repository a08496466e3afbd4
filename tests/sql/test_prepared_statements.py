"""A repeated query without parameters over the catalog's own tables runs as a DuckDB
prepared statement kept on the cursor, and a repeated query with parameters reuses
DuckDB's parse (:mod:`tesseradb.sql.small_results`). Whatever changed in between
(rows, columns, tables replaced or shadowed, views, macros, settings, a deallocation),
its answer equals the one the same query gives when it is new to the engine."""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tesseradb

_fresh = itertools.count()

QUERIES = [
    "SELECT 1",
    "SELECT * FROM t ORDER BY ALL",
    "SELECT count(*) AS n FROM t",
    "SELECT * FROM v ORDER BY ALL",
    "WITH c AS (SELECT * FROM t) SELECT * FROM c ORDER BY ALL",
    "SELECT m() AS x",
    "SELECT * FROM t WHERE a > ? ORDER BY ALL",
]

CHANGES = [
    "INSERT INTO t VALUES (7)",
    "INSERT INTO t VALUES (NULL)",
    "DELETE FROM t WHERE a = 7",
    "UPDATE t SET a = a + 1",
    "CREATE OR REPLACE TABLE t AS SELECT 2.5::DOUBLE AS a",
    "CREATE OR REPLACE TABLE t AS SELECT 3 AS a, 'x' AS b",
    "CREATE OR REPLACE TABLE t (a INTEGER)",
    "ALTER TABLE t ADD COLUMN c INTEGER DEFAULT 5",
    "DROP TABLE IF EXISTS t",
    "CREATE TABLE IF NOT EXISTS t AS SELECT 9 AS a",
    "CREATE OR REPLACE VIEW v AS SELECT 1 AS w",
    "CREATE OR REPLACE VIEW v AS SELECT * FROM t",
    "CREATE OR REPLACE MACRO m() AS 1",
    "CREATE OR REPLACE MACRO m() AS 'two'",
    "CREATE OR REPLACE TEMP TABLE t AS SELECT 99 AS a",
    "DROP TABLE IF EXISTS temp.t",
    "SET default_null_order = 'nulls_first'",
    "SET default_null_order = 'nulls_last'",
]


def _answer(db: Any, text: str, params: Any) -> tuple[str, Any]:
    try:
        result = db.sql(text, params)
        return "ok", (result.columns, result.types, result.fetchall())
    except tesseradb.TesseraError as err:
        return "error", type(err).__name__


def _fresh_answer(db: Any, text: str, params: Any) -> tuple[str, Any]:
    """The query as the engine first sees it (a text it has not run before)."""
    return _answer(db, f"{text} -- fresh {next(_fresh)}", params)


def _params(text: str) -> list[int] | None:
    return [1] if "?" in text else None


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(CHANGES), st.sampled_from(QUERIES)), min_size=1, max_size=12
    ),
    in_session=st.booleans(),
)
def test_a_repeated_query_answers_what_a_new_one_answers(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str]], in_session: bool
) -> None:
    with tesseradb.connect(tmp_path_factory.mktemp("prepared") / "db") as db:
        db.sql("CREATE TABLE t AS SELECT 1 AS a")
        db.sql("CREATE VIEW v AS SELECT * FROM t")
        db.sql("CREATE MACRO m() AS 0")
        runner = db.session() if in_session else db
        prepared = db._engine.small_results.prepared_runs
        for query in QUERIES:  # each remembered before anything changes
            for _ in range(2):
                _answer(runner, query, _params(query))
        # (every query without parameters ran prepared the second time)
        assert db._engine.small_results.prepared_runs - prepared == len(QUERIES) - 1
        for change, query in steps:
            # (a change may not apply now, such as a view over a dropped t)
            with contextlib.suppress(tesseradb.TesseraError):
                runner.sql(change)
            params = _params(query)
            assert _answer(runner, query, params) == _fresh_answer(runner, query, params)


def test_a_query_runs_prepared_from_its_second_small_result_on(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE TABLE t AS SELECT range AS a FROM range(10)")
        small = db._engine.small_results
        before = small.prepared_runs
        for _ in range(3):
            assert db.sql("SELECT 1").fetchall() == [(1,)]
            assert db.sql("SELECT count(*) FROM t").fetchall() == [(10,)]
        # the first run learns the shape, the second prepares, the third runs prepared
        assert small.prepared_runs - before == 4
        # with parameters: the parsed statement, never a prepared one
        for k in range(3):
            assert db.sql("SELECT a FROM t WHERE a = ?", [k]).fetchall() == [(k,)]
        assert small.prepared_runs - before == 4


def test_table_functions_and_names_outside_the_catalog_are_never_prepared(
    tmp_path: Path,
) -> None:
    csv = tmp_path / "rows.csv"
    csv.write_text("a\n1\n")
    with tesseradb.connect(tmp_path / "db") as db:
        small = db._engine.small_results
        before = small.prepared_runs
        for text in [
            "SELECT * FROM range(3)",
            f"SELECT * FROM read_csv('{csv}')",
            f"SELECT * FROM '{csv}'",
            "SELECT * FROM information_schema.schemata WHERE false",
        ]:
            for _ in range(3):
                db.sql(text).fetchall()
        assert small.prepared_runs == before
        # a file read by name is read afresh: its new columns and rows are seen
        csv.write_text("a,b\n2,3\n")
        assert db.sql(f"SELECT * FROM '{csv}'").fetchall() == [(2, 3)]


def test_a_deallocated_or_failing_prepared_statement_falls_back_to_the_text(
    tmp_path: Path,
) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE TABLE t AS SELECT '1' AS s")
        session = db.session()
        query = "SELECT CAST(s AS INTEGER) AS n FROM t"
        for _ in range(3):
            assert session.sql(query).fetchall() == [(1,)]
        names = session.sql("SELECT name FROM duckdb_prepared_statements()").fetchall()
        assert names
        for (name,) in names:  # what a user may do to the session's cursor
            session.sql(f"DEALLOCATE {name}")
        assert session.sql(query).fetchall() == [(1,)]
        db.sql("INSERT INTO t VALUES ('not a number')")
        with pytest.raises(tesseradb.TesseraError, match="not a number"):
            session.sql(query)
        db.sql("DELETE FROM t WHERE s = 'not a number'")
        assert session.sql(query).fetchall() == [(1,)]
        db.sql("DROP TABLE t")
        fresh = _fresh_answer(session, query, None)
        assert fresh[0] == "error" and _answer(session, query, None) == fresh


def test_a_view_over_a_relation_is_read_afresh_and_never_prepared(tmp_path: Path) -> None:
    import pyarrow as pa

    with tesseradb.connect(tmp_path / "db") as db:
        db.register("rel", pa.table({"a": [1, 2, 3]}))
        db.sql("CREATE VIEW over_rel AS SELECT * FROM rel")
        small = db._engine.small_results
        before = small.prepared_runs
        for _ in range(3):
            assert db.sql("SELECT count(*) AS n FROM over_rel").fetchall() == [(3,)]
        db.unregister("rel")
        db.register("rel", pa.table({"a": [1, 2, 3, 4, 5]}))
        assert db.sql("SELECT count(*) AS n FROM over_rel").fetchall() == [(5,)]
        assert small.prepared_runs == before
