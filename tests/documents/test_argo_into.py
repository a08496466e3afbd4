"""Argo/SQL results kept as a temporary collection for the next statements
(``db.argo(..., into=)``; the Argo paper keeps each NoBench result in a temporary table)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tesseradb
from tesseradb.errors import (
    DocumentError,
    InvalidNameError,
    ObjectExistsError,
    UnknownCollectionError,
)

PEOPLE = [
    {"name": "George", "age": 58, "kids": ["Gob", "Lindsay", "Michael"]},
    {"name": "Lucille", "age": 55, "kids": ["Gob", "Lindsay", "Michael", "Buster"]},
    {"name": "Michael", "age": 35, "kids": ["George Michael"]},
    {"name": "Buster", "age": 28},
    {"name": "Maeby", "age": "teen"},
]


def _people(db: tesseradb.Database) -> None:
    db.create_collection("people").insert_many(PEOPLE)


def test_results_feed_the_next_statements(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        _people(db)
        older = db.argo("SELECT name, age FROM people WHERE age > 30", into="older")
        assert [o["name"] for o in older] == ["George", "Lucille", "Michael"]
        # the next Argo/SQL statement, the collection API and SQL read it
        assert db.argo("SELECT name FROM older WHERE age < 57") == [
            {"name": "Lucille"},
            {"name": "Michael"},
        ]
        assert db.argo("SELECT COUNT(*) FROM older") == [{"count(*)": 3}]
        assert db.sql("SELECT count(*) FROM older").fetchone() == (3,)
        assert db.collection("older").count() == 3
        assert db.sql(
            "SELECT o.doc->>'name', json_array_length(p.doc, '$.kids') FROM older o "
            "JOIN people p ON (p.doc->>'name') = (o.doc->>'name') ORDER BY 1"
        ).fetchall() == [("George", 3), ("Lucille", 4), ("Michael", 1)]
        # aggregate results are objects too; the same name again replaces the results
        db.argo("SELECT MAX(age) AS oldest FROM older", into="older")
        assert db.argo("SELECT * FROM older") == [{"oldest": 58}]
        # a chain: results of a temporary collection into another
        db.argo("SELECT name FROM people WHERE 'Gob' = ANY kids", into="parents")
        db.argo("SELECT name FROM parents WHERE name LIKE 'G%'", into="g")
        assert db.argo("SELECT name FROM g") == [{"name": "George"}]
        # stored nowhere: not in the catalog, the database directory unchanged in size
        assert db.collections() == ["people"]
        assert "older" not in [o.name for o in db.catalog.objects()]
    with tesseradb.connect(tmp_path / "db") as db:
        assert db.relation("older") is None  # gone with the connection
        with pytest.raises(UnknownCollectionError):
            db.argo("SELECT * FROM older")


def test_another_process_never_sees_them_and_a_reader_makes_its_own(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        _people(db)
    with (
        tesseradb.connect(tmp_path / "db") as writer,
        tesseradb.connect(tmp_path / "db", read_only=True) as reader,
    ):
        writer.argo("SELECT name FROM people WHERE age > 50", into="mine")
        assert reader.relation("mine") is None
        reader.argo("SELECT name FROM people WHERE age < 50", into="mine")
        assert writer.argo("SELECT COUNT(*) FROM mine") == [{"count(*)": 2}]
        assert reader.argo("SELECT COUNT(*) FROM mine") == [{"count(*)": 2}]
        assert [o["name"] for o in reader.argo("SELECT name FROM mine")] == [
            "Michael",
            "Buster",
        ]


def test_bad_into_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    import pyarrow as pa

    with tesseradb.connect(tmp_path / "db") as db:
        _people(db)
        db.register("arrow_rel", pa.table({"x": [1]}))
        before = db.argo("SELECT * FROM people")
        with pytest.raises(DocumentError, match="keeps the results of a SELECT"):
            db.argo('INSERT INTO people OBJECT {"name": "Tobias"}', into="t")
        with pytest.raises(ObjectExistsError, match="names an object of the database"):
            db.argo("SELECT name FROM people", into="people")
        with pytest.raises(ObjectExistsError, match="registered"):
            db.argo("SELECT name FROM people", into="arrow_rel")
        with pytest.raises(InvalidNameError):
            db.argo("SELECT name FROM people", into="no good")
        assert db.argo("SELECT * FROM people") == before
        assert db.relation("t") is None
        # a stored object may not take a temporary collection's name
        db.argo("SELECT name FROM people", into="kept")
        with pytest.raises(ObjectExistsError):
            db.create_collection("kept")
        # results on their own backend: joined with stored collections in SQL, not in Argo/SQL
        with pytest.raises(DocumentError, match="different backends"):
            db.argo("SELECT * FROM kept AS k INNER JOIN people AS p ON (k.name = p.name)")
