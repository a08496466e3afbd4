"""Inner equi-joins of relations answered by the engine without DuckDB (``shortcut ==
"join"``): the same rows, names, types and order as DuckDB gives over the same tables,
whatever the keys hold (NULLs, duplicates, keys of other integer types, strings), and
statements it cannot answer exactly left to DuckDB."""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tests.tallies import tally

COUNTS = tally("join shortcut")

KEYS = st.one_of(st.integers(0, 5), st.none())
WORDS = st.one_of(st.sampled_from(["a", "b", "é", ""]), st.none())


@st.composite
def tables(draw: st.DrawFn) -> dict[str, pa.Table]:
    n = draw(st.integers(0, 12))
    a = pa.table(
        {
            "id": pa.array([draw(KEYS) for _ in range(n)], pa.int64()),
            "x": pa.array(
                [draw(st.sampled_from([0.5, -1.0, 2.25, math.nan, None])) for _ in range(n)],
                pa.float64(),
            ),
            "s": pa.array([draw(WORDS) for _ in range(n)], pa.string()),
            "flag": pa.array([draw(st.one_of(st.booleans(), st.none())) for _ in range(n)]),
        }
    )
    n = draw(st.integers(0, 15))
    b = pa.table(
        {
            "id": pa.array([draw(KEYS) for _ in range(n)], pa.int32()),
            "a_id": pa.array([draw(KEYS) for _ in range(n)], pa.int64()),
            "y": pa.array([draw(st.integers(-3, 6)) for _ in range(n)], pa.int16()),
            "t": pa.array([draw(WORDS) for _ in range(n)], pa.string()),
        }
    )
    n = draw(st.integers(0, 15))
    c = pa.table(
        {
            "b_id": pa.array([draw(KEYS) for _ in range(n)], pa.uint8()),
            "z": pa.array(
                [draw(st.sampled_from([0.25, 0.75, None])) for _ in range(n)], pa.float32()
            ),
            "name": pa.array([draw(WORDS) for _ in range(n)], pa.string()),
        }
    )
    return {"a": a, "b": b, "c": c}


FROMS = [
    ("a JOIN b ON b.a_id = a.id", "ab"),
    ("a JOIN b ON a.id = b.a_id JOIN c ON c.b_id = b.id", "abc"),
    ("b JOIN c ON (c.name = b.t)", "bc"),
    ("a AS p JOIN b AS q ON q.a_id = p.id", "pq"),
    ("a JOIN b ON b.y = a.id JOIN c ON c.name = a.s", "abc"),
    ("a INNER JOIN c ON c.b_id = a.id", "ac"),
]
SELECTS = {
    "a": ["a.id", "a.x", "a.s AS word", "a.flag", "x"],
    "b": ["b.id", "b.a_id", "b.y", "t"],
    "c": ["c.b_id", "c.z", "c.name"],
    "p": ["p.id", "p.x AS value", "p.s"],
    "q": ["q.id", "q.y", "q.t AS id"],
}
CONDITIONS = {
    "a": ["a.id BETWEEN ? AND ?", "a.s = ?", "a.x >= ?", "a.s IS NULL", "a.flag"],
    "b": ["b.y > ?", "b.t IN (?, ?)", "b.id != ?"],
    "c": ["c.z < 0.5", "c.name = ?"],
    "p": ["p.id <= ?", "p.s = ?"],
    "q": ["q.y BETWEEN ? AND ?"],
}
# statements of the join's shape it must leave to DuckDB
OTHERS = [
    "SELECT a.id, b.y FROM a JOIN b ON b.a_id = a.id WHERE a.id < b.y",  # across relations
    "SELECT a.id FROM a LEFT JOIN b ON b.a_id = a.id",
    "SELECT a.x FROM a JOIN b ON b.a_id = a.id WHERE a.x > 0.1",  # (0.1 is no double)
    "SELECT a.id, c.z FROM a JOIN c ON c.z = a.x",  # float keys
    "SELECT a.id + 1 AS n FROM a JOIN b ON b.a_id = a.id",
    "SELECT DISTINCT a.id FROM a JOIN b ON b.a_id = a.id",
    "SELECT a.id FROM a JOIN b ON b.a_id = a.id ORDER BY a.id LIMIT 2",
    "SELECT a.id FROM a JOIN b ON b.a_id = a.id AND b.y > 0",
]


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return value


def _order_keys(item: str) -> list[str]:
    """What may name a select item in ORDER BY: its output name, and its column's."""
    column, _, alias = item.partition(" AS ")
    return list(dict.fromkeys([alias or column.split(".")[-1], column]))


def _order_position(columns: list[str], order: str) -> int:
    """The select item ORDER BY ``order`` sorts by, as DuckDB binds it: a qualified column
    names its item; a bare name, the last item aliased so, else the item of that name."""
    if "." in order:
        return next(i for i, c in enumerate(columns) if c.partition(" AS ")[0] == order)
    aliased = [i for i, c in enumerate(columns) if c.partition(" AS ")[2] == order]
    if aliased:
        return aliased[-1]
    return next(i for i, c in enumerate(columns) if _order_keys(c)[0] == order)


def _rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(_canonical(v) for v in row.values()) for row in table.to_pylist())


@pytest.fixture
def db(tmp_path: Path) -> Any:
    database = tesseradb.connect(tmp_path / "db")
    yield database
    database.close()


def _param(condition: str, data: st.DataObject) -> list[Any]:
    if "x >=" in condition:
        return [data.draw(st.sampled_from([0.5, -1.0, 2.25]))]
    if any(w in condition for w in (".s", ".t", "name")):
        return [
            data.draw(st.sampled_from(["a", "b", "é", ""])) for _ in range(condition.count("?"))
        ]
    return [data.draw(st.integers(-2, 6)) for _ in range(condition.count("?"))]


def _compare(db: Any, plain: duckdb.DuckDBPyConnection, query: str, params: list[Any]) -> Any:
    ours = db.sql(query, params)
    got = ours.arrow()
    want = plain.sql(query, params=params).to_arrow_table()
    assert got.schema.names == want.schema.names, query
    assert got.schema.types == want.schema.types, query
    assert _rows(got) == _rows(want), f"{query} {params} ({ours.shortcut})"
    return ours


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_joins_answer_as_duckdb_over_the_same_tables(db: Any, data: st.DataObject) -> None:
    made = data.draw(tables())
    plain = duckdb.connect()
    for name, table in made.items():
        with contextlib.suppress(tesseradb.TesseraError):
            db.unregister(name)
        db.register(name, table)
        plain.register(name, table)
    for _ in range(3):
        joined, aliases = data.draw(st.sampled_from(FROMS))
        columns = [
            data.draw(st.sampled_from(SELECTS[alias]))
            for alias in aliases
            for _ in range(data.draw(st.integers(0 if alias != aliases[0] else 1, 2)))
        ]
        conditions, params = [], []
        for alias in aliases:
            for _ in range(data.draw(st.integers(0, 1))):
                condition = data.draw(st.sampled_from(CONDITIONS[alias]))
                conditions.append(condition)
                params += _param(condition, data)
        query = f"SELECT {', '.join(columns)} FROM {joined}"
        if conditions:
            query += " WHERE " + " AND ".join(conditions)
        # ORDER BY a selected column, by its output name or its qualified name
        keys = [k for c in columns for k in _order_keys(c)]
        order = data.draw(st.one_of(st.none(), st.sampled_from(keys)))
        descending = data.draw(st.booleans())
        if order is not None:
            query += f" ORDER BY {order}{' DESC' if descending else ''}"
        try:
            plain.sql(query, params=params)
        except duckdb.Error as err:  # (a name two relations hold): ours fails as DuckDB does
            assert "ambiguous" in str(err).lower(), f"{query}: {err}"
            with pytest.raises(tesseradb.TesseraError, match=r"(?i)ambiguous"):
                db.sql(query, params)
            COUNTS["refused as DuckDB refuses them"] += 1
            continue
        ours = _compare(db, plain, query, params)
        if order is not None:  # the order key's values in DuckDB's order (ties in any order)
            want_rows = plain.sql(query, params=params).fetchall()
            got_rows = db.sql(query, params).fetchall()
            i = _order_position(columns, order)
            assert [_canonical(r[i]) for r in got_rows] == [_canonical(r[i]) for r in want_rows], (
                query
            )
        COUNTS["queries"] += 1
        COUNTS["answered by the join shortcut"] += ours.shortcut == "join"
    for query in OTHERS:
        ours = _compare(db, plain, query, [])
        assert ours.shortcut != "join", query


def test_a_join_of_three_relations_is_answered_without_duckdb(db: Any) -> None:
    """The PTF query's shape: each relation narrowed by its own conditions, joined on ids."""
    n = 3000
    db.register(
        "s", pa.table({"id": pa.array(range(n // 100)), "ujd": [i / 10 for i in range(n // 100)]})
    )
    db.register(
        "c",
        pa.table(
            {
                "id": pa.array(range(n)),
                "sub_id": pa.array([i // 100 for i in range(n)]),
                "mag": pa.array([float(i % 25) for i in range(n)], pa.float32()),
            }
        ),
    )
    db.register(
        "r",
        pa.table({"candidate_id": pa.array(range(n)), "realbogus": [i % 8 / 8 for i in range(n)]}),
    )
    query = (
        "SELECT s.id, s.ujd, c.id, c.mag, r.realbogus FROM s JOIN c ON c.sub_id = s.id "
        "JOIN r ON r.candidate_id = c.id WHERE s.ujd BETWEEN ? AND ? AND c.mag < 20.5 "
        "AND r.realbogus > 0.125 ORDER BY c.id"
    )
    result = db.sql(query, [0.5, 0.7])
    assert result.shortcut == "join"
    rows = result.fetchall()
    expected = [
        (i // 100, (i // 100) / 10, i, float(i % 25), i % 8 / 8)
        for i in range(500, 800)
        if i % 25 < 20.5 and i % 8 / 8 > 0.125
    ]
    assert rows == expected
    assert "joined by the engine" in " ".join(db.explain(query, [0.5, 0.7]).relation("c").notes)
    # the next statement sees changed rows: nothing is kept
    db.unregister("r")
    db.register("r", pa.table({"candidate_id": pa.array([500]), "realbogus": [1.0]}))
    assert db.sql(query, [0.5, 0.7]).fetchall() == [(5, 0.5, 500, 0.0, 1.0)]
