"""``db.sql`` lookups that select and filter by values inside a collection's documents
(``SELECT doc->>'s' AS s FROM c WHERE (doc->>'id')::BIGINT = ?``), answered by the
collection's ``read_paths`` without DuckDB: the same rows, names and types as DuckDB
gives over a plain copy of the documents, and always the collection's current state.

The documents mix values whose DuckDB reading the collection gives itself
(strings, integers, booleans, null, nothing) with those it declines (fractions,
arrays, objects, integers past int64): a declined lookup runs in DuckDB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.errors import TesseraError
from tests.documents.plain_copies import plain_copy
from tests.tallies import tally

COUNTS = tally("path lookups")

# values the collection reads as DuckDB does, and values it declines
READABLE = st.one_of(
    st.integers(-9, 9),
    st.sampled_from([2**53, 2**53 + 1, -(2**63), 2**63 - 1, 10**12]),
    st.sampled_from(["north", "5", "-3", "", "é", "tr\u00fce", "a\u0000b", "true"]),
    st.booleans(),
    st.none(),
)
DECLINED = st.one_of(
    st.sampled_from([2.5, -0.5, 7.0, 1e300]),
    st.lists(st.integers(-3, 3), max_size=2),
    st.fixed_dictionaries({"b": st.integers(0, 3)}),
)


@st.composite
def documents(draw: st.DrawFn, declined: bool) -> list[dict[str, Any]]:
    values = st.one_of(READABLE, DECLINED) if declined else READABLE
    integers = st.one_of(st.integers(-9, 9), st.none()) if not declined else values
    out = []
    for _ in range(draw(st.integers(1, 20))):
        doc: dict[str, Any] = {}
        if draw(st.integers(0, 5)):  # mostly present
            doc["n"] = draw(integers)
        for key in ("s", "A"):
            if draw(st.booleans()):
                doc[key] = draw(values)
        out.append(doc)
    return out


SELECTS = [
    "doc->>'s' AS s",
    "objid, doc->>'n' AS n",
    "doc->>'$.s' AS s, doc->>'A' AS a, objid",
    "doc AS d, doc->>'n' AS n",
    "doc->>'s' AS x ORDER BY objid",  # (the ORDER BY goes after the WHERE)
]
# conditions a lookup answers itself where the values allow it (exact), and others
EXACT = [
    "(doc->>'n')::BIGINT = ?",
    "CAST(doc->>'n' AS BIGINT) BETWEEN ? AND ?",
    "(doc->>'n')::BIGINT IN (?, ?) AND objid <= ?",
    "CAST(doc->>'$.n' AS DOUBLE) > ?",
    "doc->>'s' = ?",
    "doc->>'s' IN (?, ?)",
    "doc->>'A' = ? OR doc->>'A' = ?",
    "objid >= ?",
]
INEXACT = [
    "(doc->>'n')::INTEGER = ?",
    "TRY_CAST(doc->>'n' AS BIGINT) = ?",
    "doc->>'s' LIKE ?",
    "(doc->'n')::BIGINT = ?",
]
NUMBERS = st.one_of(st.integers(-9, 9), st.sampled_from([2**53, 2**63 - 1, 10**12]))
TEXTS = st.sampled_from(["north", "5", "-3", "", "é", "true", "west", "n%"])


def _query(select: str, condition: str) -> str:
    order = ""
    if " ORDER BY " in select:
        select, order = select.split(" ORDER BY ")
        order = f" ORDER BY {order}"
    return f"SELECT {select} FROM c WHERE {condition}{order}"


@pytest.fixture
def db(tmp_path: Path) -> Any:
    database = tesseradb.connect(tmp_path / "db")
    yield database
    database.close()


def _compare(db: Any, plain: duckdb.DuckDBPyConnection, query: str, params: list[Any]) -> Any:
    """Our answer against DuckDB's over the plain copy: rows (in order where ordered),
    column names and Arrow types. Where DuckDB fails (a cast of a text that is no
    number), ours may fail as well or answer: the narrowed scan may hold no such
    document (None when it failed)."""
    try:
        theirs = plain.sql(query, params=params).to_arrow_table()
    except duckdb.Error as err:
        COUNTS["DuckDB failed over the plain copy"] += 1
        try:
            return db.sql(query, params)
        except TesseraError:
            return None  # (as DuckDB did: a text that is no number was read)
        finally:
            assert "Conversion Error" in str(err), err
    ours = db.sql(query, params)
    got = ours.arrow()
    assert got.schema.names == theirs.schema.names, query
    assert got.schema.types == theirs.schema.types, query
    rows, want = got.to_pylist(), theirs.to_pylist()
    if " ORDER BY " not in query:
        rows, want = sorted(rows, key=repr), sorted(want, key=repr)
    assert rows == want, f"{query} {params} ({ours.shortcut})"
    return ours


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_path_lookups_answer_as_duckdb_over_a_plain_copy(db: Any, data: st.DataObject) -> None:
    declined = data.draw(st.booleans())
    docs = data.draw(documents(declined))
    db.drop("c", missing_ok=True)
    db.create_collection("c").insert_many(docs)
    plain = plain_copy(docs)
    for _ in range(3):
        select = data.draw(st.sampled_from(SELECTS))
        condition = data.draw(st.sampled_from(EXACT + INEXACT))
        params = []
        for i in range(condition.count("?")):
            numeric = "BIGINT" in condition or "DOUBLE" in condition or "INTEGER" in condition
            if condition.startswith("objid") or (i == 2 and "objid" in condition):
                numeric = True
            params.append(data.draw(NUMBERS if numeric else TEXTS))
        ours = _compare(db, plain, _query(select, condition), params)
        COUNTS["queries"] += 1
        if ours is None:
            continue
        COUNTS[f"answered by the lookup ({'declining' if declined else 'readable'} values)"] += (
            ours.shortcut == "lookup"
        )
        if condition in INEXACT:
            assert ours.shortcut is None, condition  # a cast or pattern it cannot judge exactly


def test_the_point_query_is_answered_by_the_lookup_and_reads_one_document(db: Any) -> None:
    docs = [{"id": i, "s": f"s{i % 97}", "x": i / 3} for i in range(3000)]
    db.create_collection("docs").insert_many(docs)
    query = "SELECT doc->>'id' AS id, doc->>'s' AS s FROM docs WHERE (doc->>'id')::BIGINT = ?"
    for key in (0, 1500, 2999, 3000, -1):
        result = db.sql(query, [key])
        assert result.shortcut == "lookup"
        expected = [(str(key), f"s{key % 97}")] if 0 <= key < 3000 else []
        assert result.fetchall() == expected
        assert result.scan_stats["docs"].rows == len(expected)
    assert db.sql(query, [1500]).arrow().schema == pa.schema(
        [("id", pa.string()), ("s", pa.string())]
    )
    # a fraction at a selected path: its text is DuckDB's own rendering, so DuckDB answers
    result = db.sql("SELECT doc->>'x' AS x FROM docs WHERE (doc->>'id')::BIGINT = 3")
    assert result.shortcut is None and result.fetchall() == [("1.0",)]


def test_the_lookup_always_reads_the_current_documents(db: Any) -> None:
    """Nothing is kept between statements: every write shows in the next lookup."""
    collection = db.create_collection("c")
    collection.insert_many([{"id": i, "s": f"v{i}"} for i in range(100)])
    query = "SELECT objid, doc->>'s' AS s FROM c WHERE (doc->>'id')::BIGINT = ?"
    first = db.sql(query, [7])
    assert first.shortcut == "lookup" and first.fetchall() == [(8, "v7")]
    db.argo("UPDATE c SET s = 'changed' WHERE id = 7")
    assert db.sql(query, [7]).fetchall() == [(8, "changed")]
    collection.insert({"id": 7, "s": "second"})
    assert sorted(db.sql(query, [7]).fetchall()) == [(8, "changed"), (101, "second")]
    collection.delete("id = 7")
    assert db.sql(query, [7]).fetchall() == []
    collection.insert({"id": 7, "s": 7.5})  # now a value only DuckDB renders
    result = db.sql(query, [7])
    assert result.shortcut is None and result.fetchall() == [(102, "7.5")]


def test_a_failing_cast_still_fails(db: Any) -> None:
    """A string at the cast path may be a number's text: the lookup declines, and DuckDB
    casts it, or fails on it as it would over a plain copy."""
    db.create_collection("c").insert_many([{"n": 1}, {"n": "2"}, {"n": "north"}])
    with pytest.raises(TesseraError, match="north"):
        db.sql("SELECT doc->>'n' AS n FROM c WHERE (doc->>'n')::BIGINT = ?", [2]).fetchall()
    db.drop("c")
    db.create_collection("c").insert_many([{"n": 1}, {"n": "2"}])
    result = db.sql("SELECT doc->>'n' AS n FROM c WHERE (doc->>'n')::BIGINT = ?", [2])
    assert result.shortcut is None and result.fetchall() == [("2",)]
