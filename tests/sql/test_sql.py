"""The SQL front end over relations and plain tables: DuckDB SQL, persistence, params, explain, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import tesseradb
from tesseradb.errors import (
    ObjectExistsError,
    ReadOnlyError,
    SQLExecutionError,
    SQLSyntaxError,
    UnknownTableError,
)


@pytest.fixture
def people(db: tesseradb.Database) -> tesseradb.Database:
    db.register(
        "people",
        pa.table(
            {
                "id": [1, 2, 3, 4, 5],
                "name": ["ann", "bob", "cy", "dee", None],
                "age": [31, 45, 27, None, 60],
                "city": [1, 2, 1, 2, 3],
            }
        ),
    )
    db.sql(
        "CREATE TABLE cities AS SELECT * FROM (VALUES (1, 'Oslo'), (2, 'Lima'), (4, 'Pune')) c(cid, cname)"
    )
    return db


def test_joins_aggregates_windows_subqueries_ctes(people: tesseradb.Database) -> None:
    db = people
    assert db.sql(
        "SELECT cname, count(*) FROM people JOIN cities ON city = cid GROUP BY cname ORDER BY cname"
    ).fetchall() == [
        ("Lima", 2),
        ("Oslo", 2),
    ]
    left = db.sql(
        "SELECT id, cname FROM people LEFT JOIN cities ON city = cid ORDER BY id"
    ).fetchall()
    assert left[-1] == (5, None)
    ranked = db.sql(
        "SELECT name, rank() OVER (PARTITION BY city ORDER BY age DESC) AS r FROM people WHERE age IS NOT NULL ORDER BY name"
    ).fetchall()
    assert ranked == [("ann", 1), ("bob", 1), ("cy", 2), (None, 1)]
    assert db.sql(
        "SELECT name FROM people WHERE age > (SELECT avg(age) FROM people) ORDER BY 1"
    ).fetchall() == [
        ("bob",),
        (None,),
    ]
    assert (
        db.sql(
            "WITH old AS (SELECT * FROM people WHERE age >= 40) SELECT count(*) FROM old o1, old o2"
        ).scalar()
        == 4
    )
    assert db.sql(
        "SELECT id FROM people ORDER BY age DESC NULLS LAST LIMIT 2 OFFSET 1"
    ).fetchall() == [(2,), (1,)]
    assert (
        db.sql("SELECT count(*) FROM people p1 JOIN people p2 ON p1.city = p2.city").scalar() == 9
    )


def test_create_table_as_and_insert_persist(tmp_path: Path) -> None:
    path = tmp_path / "p.tdb"
    with tesseradb.connect(path) as db:
        db.register("src", pa.table({"x": list(range(10))}))
        db.sql("CREATE TABLE evens AS SELECT x FROM src WHERE x % 2 = 0")
        db.sql("INSERT INTO evens SELECT x FROM src WHERE x > ?", [8])
        db.sql("CREATE VIEW big AS SELECT * FROM evens WHERE x > 4")
        assert sorted(db.tables()) == ["big", "evens"]
    with tesseradb.connect(path) as db:
        assert db.sql("SELECT sum(x) FROM evens").scalar() == 0 + 2 + 4 + 6 + 8 + 9
        assert db.sql("SELECT count(*) FROM big").scalar() == 3
        kinds = {o.name: o.kind for o in db.info().objects}
        assert kinds == {"big": "view", "evens": "table"}
        db.sql("DROP VIEW big")
        db.drop("evens")
        assert db.tables() == []


def test_parameters_are_bound_not_pasted(people: tesseradb.Database) -> None:
    db = people
    assert db.sql("SELECT name FROM people WHERE id = ?", [2]).fetchall() == [("bob",)]
    assert db.sql(
        "SELECT name FROM people WHERE id = $id AND age > $age", {"id": 2, "age": 40}
    ).fetchall() == [("bob",)]
    hostile = "x'; DROP TABLE cities; --"
    assert db.sql("SELECT count(*) FROM people WHERE name = ?", [hostile]).scalar() == 0
    assert db.sql("SELECT ? AS s", [hostile]).scalar() == hostile
    assert "cities" in db.tables()
    # the bound value, not the text, drives pushdown
    explained = db.explain("SELECT * FROM people WHERE age > ?", [40])
    assert str(explained.relation("people").predicate) == "age >= 41"


def test_result_conversions(people: tesseradb.Database) -> None:
    result = people.sql("SELECT id, age FROM people ORDER BY id")
    assert result.columns == ["id", "age"]
    assert len(result) == 5
    assert isinstance(result.arrow(), pa.Table)
    assert result.fetchall()[3] == (4, None)
    assert result.to_pylist()[0] == {"id": 1, "age": 31}
    arrays = result.numpy()
    assert arrays["id"].tolist() == [1, 2, 3, 4, 5]
    assert isinstance(arrays["age"], np.ma.MaskedArray) and arrays["age"].mask.tolist() == [
        False,
        False,
        False,
        True,
        False,
    ]
    assert result.df()["id"].tolist() == [1, 2, 3, 4, 5]
    assert people.sql("CREATE TABLE t2 (x INT)").num_rows == 0


def test_explain_reports_predicate_and_columns(people: tesseradb.Database) -> None:
    explained = people.explain(
        "SELECT name FROM people WHERE age BETWEEN 30 AND 50 AND city IN (1, 2)"
    )
    rel = explained.relation("people")
    assert rel.columns == ["name", "age", "city"]
    assert str(rel.predicate) == "age >= 30 and <= 50 and city in (1, 2)"
    text = str(explained)
    assert "relation people" in text and "predicate: age >= 30 and <= 50" in text
    assert explained.as_dict()["relations"][0]["columns"] == ["name", "age", "city"]
    # all columns for *, the row count kept with count(*)
    assert people.explain("SELECT * FROM people").relation("people").columns is None
    assert people.explain("SELECT count(*) FROM people").relation("people").columns == []


def test_pushdown_filters_inside_the_scan(people: tesseradb.Database) -> None:
    db = people
    result = db.sql("SELECT name FROM people WHERE age > 40 ORDER BY name")
    assert result.fetchall() == [("bob",), (None,)]
    assert result.scan_stats["people"].rows == 2  # only the matching rows left the relation
    assert result.scan_stats["people"].scans == 1


def test_outer_join_null_supplying_side_is_not_over_filtered(people: tesseradb.Database) -> None:
    db = people
    db.register("orders", pa.table({"pid": [1, 1, 2], "amount": [5, 50, 7]}))
    # anti-join pattern: IS NULL on the NULL-supplying side must not be pushed into orders
    rows = db.sql(
        "SELECT id FROM people LEFT JOIN orders ON pid = id WHERE amount IS NULL ORDER BY id"
    ).fetchall()
    assert rows == [(3,), (4,), (5,)]
    assert (
        db.explain("SELECT id FROM people LEFT JOIN orders ON pid = id WHERE amount IS NULL")
        .relation("orders")
        .predicate.is_true
    )
    # a NULL-rejecting WHERE is pushed; an ON condition of a LEFT JOIN goes to its right side only
    on = db.explain(
        "SELECT * FROM people LEFT JOIN orders ON pid = id AND amount > 10 AND age > 30"
    )
    assert str(on.relation("orders").predicate) == "amount >= 11"
    assert on.relation("people").predicate.is_true


def test_asof_join_gets_no_pushdown_on_its_right_side(db: tesseradb.Database) -> None:
    db.register("trades", pa.table({"t": [10, 20, 30]}))
    db.register("quotes", pa.table({"t": [5, 15, 25], "px": [1.0, 2.0, 3.0]}))
    sql = "SELECT trades.t, px FROM trades ASOF JOIN quotes ON trades.t >= quotes.t WHERE px > 1.5 ORDER BY 1"
    assert db.sql(sql).fetchall() == [(20, 2.0), (30, 3.0)]
    assert db.explain(sql).relation("quotes").predicate.is_true


def test_errors_name_what_and_where(people: tesseradb.Database) -> None:
    db = people
    with pytest.raises(SQLSyntaxError) as err:
        db.sql("SELECT *\nFROM people\nWHERE age >> > 3")
    assert err.value.line == 3 and err.value.column is not None and "line 3" in str(err.value)
    with pytest.raises(UnknownTableError) as unknown:
        db.sql("SELECT * FROM peple")
    assert unknown.value.suggestions == ["people"] and "did you mean 'people'" in str(unknown.value)
    with pytest.raises(UnknownTableError):
        db.sql("SELECT * FROM citys")
    with pytest.raises(SQLExecutionError, match="nosuch"):
        db.sql("SELECT nosuch FROM people")
    with pytest.raises(ObjectExistsError):
        db.sql("CREATE TABLE people (x INT)")
    with pytest.raises(SQLExecutionError, match="can read but not change"):
        db.sql("INSERT INTO people VALUES (9, 'x', 1, 1)")
    with pytest.raises(ObjectExistsError):
        db.register("cities", pa.table({"x": [1]}))
    assert db.sql("SELECT count(*) FROM cities").scalar() == 3  # nothing changed


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT #2 FROM people WHERE id = 2", [("bob",)]),
        ("SELECT COLUMNS('^a.*') FROM people WHERE id = 1", [(31,)]),
        ("SELECT count(*) FROM (PIVOT people ON city USING count(*))", [(5,)]),
        ("SELECT count(*) FROM (UNPIVOT people ON age INTO NAME k VALUE v)", [(4,)]),
        ("SELECT count(*) FROM people NATURAL JOIN (SELECT 2 AS id, 'bob' AS name) o", [(1,)]),
        ("SELECT a FROM people p(name, a) WHERE name = 3", [("cy",)]),
        (
            "SELECT p FROM people p WHERE id = 1",
            [({"id": 1, "name": "ann", "age": 31, "city": 1},)],
        ),
        ("SELECT id FROM people WHERE id = 1 QUALIFY row_number() OVER () = 1", [(1,)]),
        ("SELECT count(*) FROM people WHERE age > 40 USING SAMPLE 100% (bernoulli, 42)", [(2,)]),
    ],
)
def test_constructs_that_use_columns_implicitly(
    people: tesseradb.Database, sql: str, expected: list[tuple[object, ...]]
) -> None:
    assert people.sql(sql).fetchall() == expected


def test_statement_sqlglot_cannot_parse_runs_without_pushdown(people: tesseradb.Database) -> None:
    sql = "SELECT id FROM people WHERE id = 2 AND name SIMILAR TO 'b.*'"
    explained = people.explain(sql)
    assert people.sql(sql).fetchall() == [(2,)]
    if not explained.pushdown:  # only meaningful while sqlglot rejects the construct
        assert "could not parse" in explained.note


def test_read_only_database_rejects_writes(tmp_path: Path) -> None:
    path = tmp_path / "ro.tdb"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t AS SELECT 1 AS x")
    with tesseradb.connect(path, read_only=True) as ro:
        assert ro.sql("SELECT x FROM t").scalar() == 1
        with pytest.raises(ReadOnlyError):
            ro.sql("INSERT INTO t VALUES (2)")
        with pytest.raises(ReadOnlyError):
            ro.sql("CREATE TABLE u (x INT)")
        assert ro.sql("SELECT count(*) FROM t").scalar() == 1


def test_concurrent_statements_from_threads(people: tesseradb.Database) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def query(i: int) -> int:
        return int(
            people.sql(
                "SELECT count(*) FROM people JOIN cities ON city = cid WHERE id >= ?", [i % 2]
            ).scalar()
        )

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(query, range(40)))
    assert set(results) == {4}


def test_unqualified_columns_next_to_plain_tables_are_pushed(people: tesseradb.Database) -> None:
    explained = people.explain(
        "SELECT name FROM people JOIN cities ON city = cid WHERE age > 40 AND cname = 'Lima'"
    )
    assert str(explained.relation("people").predicate) == "age >= 41"
    people.sql("ALTER TABLE cities RENAME COLUMN cname TO age")  # now `age` is ambiguous
    explained = people.explain("SELECT name FROM people JOIN cities ON city = cid WHERE age > 40")
    assert explained.relation("people").predicate.is_true
    assert people.catalog.get("cities").spec["columns"] == ["cid", "age"]


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        (
            "SELECT name FROM people WHERE name BETWEEN $lo AND ''",
            {"lo": ""},
        ),  # sqlglot cannot tokenize `$lo ... ''`
        ("SELECT name FROM people WHERE age > $1 AND name <> ''", [40]),
        (
            "SELECT name FROM people WHERE name = 'é' OR age > ?",
            [40],
        ),  # multi-byte text before a placeholder
        ("SELECT '?' AS q, name FROM people WHERE age > ? -- a ? in a comment", [40]),
        ("SELECT $$ ? $$ AS d, name FROM people WHERE age > ?", [40]),
    ],
)
def test_placeholders_everywhere_are_bound_and_pushed(
    people: tesseradb.Database, sql: str, params: object
) -> None:
    import duckdb

    reference = duckdb.connect()
    try:
        reference.register("people", people.relation("people").table)  # type: ignore[union-attr]
        expected = sorted(reference.execute(sql, params).fetchall(), key=repr)
    finally:
        reference.close()
    assert sorted(people.sql(sql, params).fetchall(), key=repr) == expected
    explained = people.explain(sql, params)
    assert explained.pushdown  # understood, not the no-pushdown fallback


def test_a_lookup_is_for_small_scans(db: tesseradb.Database) -> None:
    """A selection whose scan may be large runs in DuckDB (where it can be interrupted)."""
    db.register("big", pa.table({"k": np.arange(200_000)}))
    small = db.sql("SELECT k FROM big WHERE k = ?", [77])
    assert small.shortcut == "lookup" and small.fetchall() == [(77,)]
    assert "no DuckDB statement" in str(db.explain("SELECT k FROM big WHERE k = 77"))
    whole = db.sql("SELECT k FROM big WHERE k >= 0")
    assert whole.shortcut is None and whole.num_rows == 200_000
