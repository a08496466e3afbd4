"""``db.sql`` over a collection with a condition on a path into ``doc``: answered as DuckDB
answers it over a plain copy of the documents, while the mapping's indexes narrow the scan.

The documents mix every kind of value at the paths the queries look at
(integers, fractions, numeric and other strings, booleans, null, arrays,
objects, nothing), because what DuckDB compares is a text or a cast, not
the JSON value: ``'5'`` casts to 5, the number 5 has the text ``'5'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.documents._relation import path_condition
from tesseradb.sql.paths import JsonPath
from tesseradb.sql.predicate import ColumnDomain, RangeSet
from tests.documents.plain_copies import plain_copy
from tests.tallies import tally

COUNTS = tally("path pushdown")

WORDS = ["north", "south", "5", "7", "-3", "2.5", "true", "[1]", "", "é"]
scalars = st.one_of(
    st.integers(-8, 8),
    st.sampled_from([2.5, -0.5, 7.0, 1e3]),
    st.sampled_from(WORDS),
    st.booleans(),
    st.none(),
)
values = st.one_of(
    scalars, st.lists(st.integers(-3, 3), max_size=2), st.fixed_dictionaries({"b": scalars})
)


@st.composite
def documents(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 25))):
        doc: dict[str, Any] = {}
        for key in ("a", "n", "a.b"):
            if draw(st.booleans()):
                doc[key] = draw(values)
        out.append(doc)
    return out


# literals the documents are likely to hold (or near misses)
NUMBERS = st.one_of(st.integers(-9, 9), st.sampled_from([2.5, -0.5, 1000.0]))
TEXTS = st.sampled_from([*WORDS, "west", "s"])


TEXT = [
    "doc->>'a' = ?",
    "doc->>'$.a' IN (?, ?)",
    "json_extract_string(doc, '$.n.b') = ?",
    "doc->>'a.b' = ?",
    "? = doc->>'a'",
    "doc->>'a' != ?",
]
NUMBER = [
    "TRY_CAST(doc->>'a' AS BIGINT) = ?",
    "TRY_CAST(doc->>'$.a' AS DOUBLE) > ?",
    "TRY_CAST(doc->>'a' AS INTEGER) BETWEEN ? AND ?",
    "TRY_CAST(doc->'a' AS BIGINT) <= ?",
    "TRY_CAST(doc->'$.n.b' AS DOUBLE) >= ?",
    "TRY_CAST(doc->>'a.b' AS DECIMAL(6, 1)) = ?",
    "NOT (TRY_CAST(doc->>'a' AS BIGINT) < ?)",
    "TRY_CAST(doc->>'a' AS BIGINT) IN (?, ?) AND doc->>'n' IS NOT NULL",
]


@pytest.fixture
def db(tmp_path: Path) -> Any:
    database = tesseradb.connect(tmp_path / "db")
    yield database
    database.close()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_path_filters_answer_as_duckdb_over_a_plain_copy(db: Any, data: st.DataObject) -> None:
    docs = data.draw(documents())
    db.drop("c", missing_ok=True)
    db.create_collection("c").insert_many(docs)
    plain = plain_copy(docs)
    for numeric, templates in ((False, TEXT), (True, NUMBER)):
        condition = data.draw(st.sampled_from(templates))
        params = [data.draw(NUMBERS if numeric else TEXTS) for _ in range(condition.count("?"))]
        query = f"SELECT objid FROM c WHERE {condition} ORDER BY objid"
        ours = db.sql(query, params)
        want = plain.execute(query, params).fetchall()
        assert ours.fetchall() == want, f"{query} {params}\ndocs: {docs}"
        read = ours.scan_stats["c"].rows
        assert read >= len(want)
        COUNTS["queries"] += 1
        COUNTS["narrowed (read fewer documents than the collection holds)"] += read < len(docs)


def test_a_string_equality_reads_exactly_the_matching_documents(db: Any) -> None:
    docs = [{"s": f"name{i % 50}", "i": i} for i in range(2000)]
    docs += [{"s": 5}, {"s": "5"}, {"s": ["name3"]}, {"s": {"x": "name3"}}]
    db.create_collection("c").insert_many(docs)
    result = db.sql("SELECT count(*) FROM c WHERE doc->>'s' = 'name3'")
    assert result.fetchall() == [(40,)]
    assert result.scan_stats["c"].rows == 40  # the index found them: nothing else rebuilt
    # '5' is also the text of the number 5: both kinds are read, DuckDB keeps both
    result = db.sql("SELECT count(*) FROM c WHERE doc->>'s' = '5'")
    assert result.fetchall() == [(2,)]
    assert result.scan_stats["c"].rows == len(docs)


def test_a_point_cast_reads_a_handful_of_documents(db: Any) -> None:
    docs = [{"id": i, "x": i / 3} for i in range(3000)] + [{"id": "1500"}, {"id": 1500.4}]
    db.create_collection("c").insert_many(docs)
    result = db.sql(
        "SELECT doc->>'id' FROM c WHERE (doc->>'id')::BIGINT = ? ORDER BY objid", [1500]
    )
    assert result.fetchall() == [("1500",), ("1500",), ("1500.4",)]
    assert result.scan_stats["c"].rows == 3
    explained = db.explain("SELECT * FROM c WHERE (doc->>'id')::BIGINT = 1500").relation("c")
    assert str(explained.predicate) == "(doc->>'$.id')::BIGINT = 1500"


def test_other_relations_never_see_path_conditions(db: Any) -> None:
    table = pa.table({"doc": pa.array(['{"a": 1}', '{"a": "x"}'], pa.json_())})
    db.register("j", table)
    assert db.sql("SELECT count(*) FROM j WHERE doc->>'a' = 'x'").fetchall() == [(1,)]
    assert db.explain("SELECT * FROM j WHERE doc->>'a' = 'x'").relation("j").predicate.is_true


@pytest.mark.parametrize(
    ("key", "ranges", "narrows"),
    [
        ("doc->>'$.a'", RangeSet.points(["north"]), True),
        ("doc->>'$.a'", RangeSet.points(["north", "12"]), False),  # '12' is a number's text
        ("doc->>'$.a'", RangeSet.points(["false"]), False),
        ("doc->>'$.a'", RangeSet.points([" [ 1]"]), False),
        ("doc->>'$.a'", RangeSet.points(["Infinity"]), False),
        ("(doc->>'$.a')::BIGINT", RangeSet.points([3]), True),
    ],
)
def test_which_text_conditions_narrow(key: str, ranges: RangeSet, narrows: bool) -> None:
    path = JsonPath.parse(key)
    assert path is not None and path.key == key
    assert (path_condition(path, ColumnDomain.values(ranges)) is not None) == narrows


def test_json_path_keys_round_trip() -> None:
    for key in ("doc->>'$.a'", "(doc->'$.a.b[2]')::DOUBLE", "(d->>'$.x_1')::BIGINT"):
        path = JsonPath.parse(key)
        assert path is not None and path.key == key
    for key in ("doc", "doc->'$.a'", "doc->>'$.a b'", "doc->>'a'", "(doc->>'$.a')::TEXT"):
        assert JsonPath.parse(key) is None
    assert JsonPath("doc", ("a", "b", 0)).readings() == [("a", "b", 0), ("a.b[0]",)]
