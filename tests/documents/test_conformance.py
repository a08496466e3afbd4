"""The Argo/SQL conformance suite: every test runs on SQLite, DuckDB, PostgreSQL and MariaDB,
under both mappings (the ``make_collection`` fixture is parametrised over all eight)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

import tesseradb
from tesseradb.errors import (
    ArgoSyntaxError,
    DocumentError,
    DocumentTypeError,
    InvalidArgumentError,
    ObjectExistsError,
    UnknownCollectionError,
)

# The paper's Figure 1.
GEORGE = {
    "name": "George Bluth",
    "age": 58,
    "indicted": True,
    "kids": [
        "Gob",
        "Lindsay",
        "Buster",
        {"name": "Michael", "age": 38, "kids": ["George-Michael"]},
    ],
    "rival": "Stan Sitwell",
}
STAN = {
    "name": "Stan Sitwell",
    "age": "middle-aged",
    "charity_giving": 250120.5,
    "kids": ["Sally"],
}

TRICKY = {
    "a.b": 1,
    "c[0]": "bracketed",
    "back\\slash]": [],
    "": {"": None},
    "ünïcødé ✓": {"日本": ["x", {"y": {}}]},
    "nested": [[1, 2], [], [[3.5]]],
    "big": 9223372036854775807,
    "small": -9223372036854775808,
    "one": 1,
    "one_float": 1.0,
    "tenth": 0.1,
    "tiny": 5e-324,
    "huge": 1.7976931348623157e308,
    "neg_zero_int": 0,
    "t": True,
    "f": False,
    "z": None,
    "empty_obj": {},
    "empty_str": "",
    "quote": 'it\'s "quoted"; DROP TABLE argo_meta; --',
    "zkey_order": 1,
    "akey_order": 2,
}


def run(db: Any, text: str, params: Any = None) -> list[dict[str, Any]]:
    return db.argo(text, params)


@pytest.fixture
def people(make_collection: Any) -> Any:
    coll = make_collection()
    coll.insert_many([GEORGE, STAN])
    return coll


def q(coll: Any, tail: str, params: Any = None, select: str = "*") -> list[dict[str, Any]]:
    """SELECT ``select`` FROM the collection ``tail``."""
    return coll_db(coll).argo(f"SELECT {select} FROM {coll.name} {tail}", params)


def coll_db(coll: Any) -> Any:
    return coll._test_db


@pytest.fixture(autouse=True)
def _attach_db(docdb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tesseradb.documents import Collection

    monkeypatch.setattr(Collection, "_test_db", docdb, raising=False)


class TestPaperExamples:
    def test_figure_4(self, people: Any, docdb: Any) -> None:
        name = people.name
        assert run(docdb, f"SELECT age FROM {name};") == [{"age": 58}, {"age": "middle-aged"}]
        assert run(docdb, f"SELECT * FROM {name} WHERE charity_giving > 100000;") == [STAN]
        joined = run(
            docdb,
            f"SELECT left.name, right.kids FROM {name} AS left "
            f"INNER JOIN {name} AS right ON (left.rival = right.name);",
        )
        assert joined == [{"left": {"name": "George Bluth"}, "right": {"kids": ["Sally"]}}]

    def test_figure_1_round_trip_and_delete(self, people: Any, docdb: Any) -> None:
        assert q(people, "") == [GEORGE, STAN]
        assert run(docdb, f'DELETE FROM {people.name} WHERE "Lindsay" = ANY kids;') == [
            {"deleted": 1}
        ]
        assert q(people, "") == [STAN]

    def test_section_3_2_2_predicates(self, people: Any) -> None:
        assert q(people, "WHERE age >= 50 AND indicted = true", select="name") == [
            {"name": "George Bluth"}
        ]
        assert q(people, "WHERE age >= 50 OR indicted = true", select="name") == [
            {"name": "George Bluth"}
        ]
        assert q(
            people,
            "WHERE charity_giving >= 100000 OR (indicted = true AND age >= 50)",
            select="name",
        ) == [
            {"name": "George Bluth"},
            {"name": "Stan Sitwell"},
        ]
        assert q(people, "WHERE kids[3].kids[0] = 'George-Michael'", select="kids[3].name") == [
            {"kids": [{"name": "Michael"}]}
        ]


class TestRoundTrip:
    def test_tricky_document(self, make_collection: Any) -> None:
        coll = make_collection()
        if make_collection.backend == "postgresql":
            pass  # no NUL characters in TRICKY: PostgreSQL text cannot hold U+0000
        coll.insert(TRICKY)
        got = q(coll, "")
        assert got == [TRICKY]
        assert list(got[0]) == list(TRICKY)  # key order kept
        assert type(got[0]["one"]) is int and type(got[0]["one_float"]) is float
        assert json.dumps(got[0]) == json.dumps(TRICKY)

    def test_empty_document_and_projection_of_escaped_keys(self, make_collection: Any) -> None:
        coll = make_collection()
        coll.insert_many([{}, TRICKY])
        assert q(coll, "") == [{}, TRICKY]
        assert q(coll, "", select="`a.b`, `c[0]`") == [{"a.b": 1, "c[0]": "bracketed"}]
        assert q(coll, "WHERE `a.b` = 1", select="`ünïcødé ✓`.`日本`[1]") == [
            {"ünïcødé ✓": {"日本": [{"y": {}}]}}
        ]
        assert q(coll, "WHERE EXISTS ``") == [TRICKY]
        assert q(coll, "WHERE NOT EXISTS ``") == [{}]

    def test_json_texts_and_insert_statement_forms(self, make_collection: Any, docdb: Any) -> None:
        coll = make_collection()
        coll.insert('{"x": 1}')
        run(docdb, f'INSERT INTO {coll.name} OBJECT {{"x": 2}}, {{"x": 3}} OBJECT {{"x": 4}}')
        run(docdb, f"INSERT INTO {coll.name} OBJECT ?", [{"x": 5}])
        assert [d["x"] for d in q(coll, "")] == [1, 2, 3, 4, 5]


@pytest.fixture
def mixed(make_collection: Any) -> Any:
    coll = make_collection()
    coll.insert_many(
        [
            {"id": 1, "v": 5, "s": "apple", "tags": ["red", "green"], "o": {"n": 1}},
            {"id": 2, "v": "5", "s": "Apple", "tags": ["blue"], "o": {"n": 2.5}},
            {"id": 3, "v": True, "s": "a_b%c", "tags": [], "o": {}},
            {"id": 4, "v": None, "s": "banana", "o": {"n": None}},
            {"id": 5, "s": "cherry!", "tags": ["red"], "v": 7.5},
            {"id": 6, "v": [5], "tags": "red"},
        ]
    )
    return coll


def ids(rows: list[dict[str, Any]]) -> list[int]:
    return [r["id"] for r in rows]


class TestPredicates:
    @pytest.mark.parametrize(
        ("where", "expected"),
        [
            ("v = 5", [1]),
            ("v = '5'", [2]),
            ("v = true", [3]),
            ("v != 5", [5]),
            ("v <> '5'", []),
            ("v > 4", [1, 5]),
            ("v >= 5 AND v < 7.5", [1]),
            ("5 = v", [1]),
            ("4 < v", [1, 5]),
            ("v BETWEEN 5 AND 10", [1, 5]),
            ("v NOT BETWEEN 6 AND 10", [1]),
            ("s LIKE 'a%'", [1, 3]),
            ("s LIKE 'A%'", [2]),
            ("s LIKE 'a\\_b\\%c'", [3]),
            ("s LIKE 'a_b%'", [3]),
            ("s LIKE '%!'", [5]),
            ("s NOT LIKE '%a%'", [2, 5]),
            ("v IN (5, '5', true)", [1, 2, 3]),
            ("v IN (7.5)", [5]),
            ("v NOT IN (5)", [5]),
            ("v NOT IN (5, '5')", []),
            ("'red' = ANY tags", [1, 5]),
            ("NOT 'red' = ANY tags", [2, 3, 6]),
            ("'b' < ANY tags", [1, 2, 5]),
            ("v IS NULL", [4]),
            ("v IS NOT NULL", [1, 2, 3, 5, 6]),
            ("o.n IS NULL", [4]),
            ("EXISTS o", [1, 2, 3, 4]),
            ("EXISTS o.n", [1, 2, 4]),
            ("NOT EXISTS tags", [4]),
            ("NOT (v = 5 OR s = 'banana')", [5]),
            ("NOT (v >= 5 AND v <= 6)", [5]),
            ("(v = 5 OR v = '5') AND NOT EXISTS nope", [1, 2]),
            ("v = 5 OR o.n = 2.5 OR s = 'cherry!' OR v = true", [1, 2, 3, 5]),
            ("nope = 1 OR NOT nope = 1", []),
            ("o.n > 1", [2]),
            ("tags[0] = 'red'", [1, 5]),
            ("v[0] = 5", [6]),
            ("id = ? AND s = :x", None),
        ],
    )
    def test_where(self, mixed: Any, where: str, expected: list[int] | None) -> None:
        if expected is None:  # parameters: both forms cannot mix; check each
            assert ids(q(mixed, "WHERE id = ? AND s = ?", [1, "apple"])) == [1]
            assert ids(q(mixed, "WHERE id = :i AND s = :s", {"i": 2, "s": "Apple"})) == [2]
            return
        assert ids(q(mixed, f"WHERE {where}")) == expected

    def test_injection_is_data(self, mixed: Any, docdb: Any) -> None:
        evil = "x'); DROP TABLE argo_meta; --"
        run(docdb, f"INSERT INTO {mixed.name} OBJECT ?", [{"id": 7, evil: evil, "s": evil}])
        assert ids(q(mixed, "WHERE s = ?", [evil])) == [7]
        assert ids(q(mixed, "WHERE s = 'x''); DROP TABLE argo_meta; --'")) == [7]
        assert ids(q(mixed, f"WHERE `{evil}` LIKE '%DROP%'")) == [7]
        assert mixed.count() == 7


class TestAnyOverArrays:
    DOCS = (
        # twelve elements: arr[10] and arr[11] sort between arr[1] and arr[2]
        {"id": 1, "arr": [f"w{i}" for i in range(12)]},
        # elements with subtrees of their own, between which the walk must skip
        {"id": 2, "arr": [{"w": "w3"}, ["w11"], "w11", 7, {"x": ["w0"]}]},
        {"id": 3, "arr": [], "arr2": ["w0"], "`arr[0]`": "w0"},
        {"id": 4, "arr": "w0", "a": {"arr": ["w0"]}},
        {"id": 5, "arr": [7.5, True, None, "w1"]},
    )
    CASES = (
        ("'w0' = ANY arr", [1]),
        ("'w11' = ANY arr", [1, 2]),
        ("'w3' = ANY arr", [1]),
        ("7 = ANY arr", [2]),
        ("7.5 <= ANY arr", [5]),
        ("7 <= ANY arr", [2, 5]),
        ("true = ANY arr", [5]),
        ("'w1' = ANY arr", [1, 5]),
        ("NOT 'w1' = ANY arr", [2, 3, 4]),  # arr present, no element 'w1'
        ("'w0' = ANY a.arr", [4]),
        ("'w0' = ANY nope", []),
    )

    def test_any_finds_elements_past_ten_and_between_subtrees(
        self, make_collection: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from tesseradb.documents import _mappings

        coll = make_collection()
        coll.insert_many(self.DOCS)
        for where, expected in self.CASES:
            assert ids(q(coll, f"WHERE {where}")) == expected, where
        # past the walk's limit the elements are a range of keys: the same answers
        monkeypatch.setattr(_mappings, "ELEMENT_WALK_LIMIT", 2)
        for where, expected in self.CASES:
            assert ids(q(coll, f"WHERE {where}")) == expected, where


class TestProjectionOrderLimit:
    def test_projection(self, mixed: Any) -> None:
        assert q(mixed, "WHERE id <= 2", select="o, tags[1]") == [
            {"o": {"n": 1}, "tags": ["green"]},
            {"o": {"n": 2.5}},
        ]
        # objects with none of the projected attributes are omitted
        assert q(mixed, "", select="o.n") == [
            {"o": {"n": 1}},
            {"o": {"n": 2.5}},
            {"o": {"n": None}},
        ]
        # paths that overlap select some rows twice: each value comes back once
        assert q(mixed, "WHERE id <= 2", select="o, o.n, tags, tags[1]") == q(
            mixed, "WHERE id <= 2", select="o, tags"
        )
        assert q(mixed, "", select="o, o.n") == q(mixed, "", select="o")

    def test_order_by(self, mixed: Any) -> None:
        assert ids(q(mixed, "ORDER BY v")) == [4, 3, 1, 5, 2, 6]
        assert ids(q(mixed, "ORDER BY v DESC")) == [2, 5, 1, 3, 4, 6]
        assert ids(q(mixed, "ORDER BY s DESC, id")) == [5, 4, 1, 3, 2, 6]
        assert ids(q(mixed, "WHERE EXISTS tags ORDER BY id DESC LIMIT 2 OFFSET 1")) == [5, 3]
        assert ids(q(mixed, "LIMIT 2")) == [1, 2]
        assert q(mixed, "LIMIT 2", select="o.n") == [{"o": {"n": 1}}, {"o": {"n": 2.5}}]
        assert q(mixed, "ORDER BY id DESC LIMIT 2", select="o.n") == [
            {"o": {"n": None}},
            {"o": {"n": 2.5}},
        ]


class TestAggregates:
    def test_count_sum_avg_min_max(self, make_collection: Any) -> None:
        coll = make_collection()
        coll.insert_many(
            [{"g": i % 3, "x": i, "y": i / 2, "s": f"s{i}"} for i in range(10)] + [{"g": "odd"}]
        )
        got = q(
            coll, "WHERE x >= 2", select="COUNT(*), COUNT(x), SUM(x), AVG(y), MIN(s), MAX(x) AS top"
        )
        assert got == [
            {
                "count(*)": 8,
                "count(x)": 8,
                "sum(x)": 44,
                "avg(y)": pytest.approx(2.75),
                "min(s)": "s2",
                "top": 9,
            }
        ]
        grouped = q(coll, "GROUP BY g", select="g, COUNT(*), SUM(x)")
        assert grouped == [
            {"g": 0, "count(*)": 4, "sum(x)": 18},
            {"g": 1, "count(*)": 3, "sum(x)": 12},
            {"g": 2, "count(*)": 3, "sum(x)": 15},
            {"g": "odd", "count(*)": 1, "sum(x)": None},
        ]
        # the paper's Q10 form: the group key is added to the output
        assert q(coll, "WHERE x BETWEEN 0 AND 4 GROUP BY g", select="COUNT(*)") == [
            {"g": 0, "count(*)": 2},
            {"g": 1, "count(*)": 2},
            {"g": 2, "count(*)": 1},
        ]
        assert q(coll, "GROUP BY g ORDER BY count(*) DESC LIMIT 1", select="COUNT(*)") == [
            {"g": 0, "count(*)": 4}
        ]
        assert q(coll, "WHERE nope = 1", select="COUNT(*), SUM(x)") == [
            {"count(*)": 0, "sum(x)": None}
        ]

    def test_type_errors(self, make_collection: Any) -> None:
        coll = make_collection()
        coll.insert_many([{"x": 1}, {"x": "one"}, {"x": True}])
        with pytest.raises(DocumentTypeError, match="SUM\\(x\\) over strings"):
            q(coll, "", select="SUM(x)")
        with pytest.raises(DocumentTypeError, match="AVG"):
            q(coll, "WHERE x = true OR x = 1", select="AVG(x)")
        with pytest.raises(DocumentTypeError, match="both strings and numbers"):
            q(coll, "WHERE x = 1 OR x = 'one'", select="MIN(x)")
        assert q(coll, "WHERE x = 1", select="SUM(x)") == [{"sum(x)": 1}]


class TestWrites:
    def test_update(self, mixed: Any, docdb: Any) -> None:
        out = run(
            docdb,
            f"UPDATE {mixed.name} SET v = 10, o.m.deep = [1, {{}}], tags[1] = 'x' WHERE id = 5",
        )
        assert out == [{"updated": 1}]
        assert q(mixed, "WHERE id = 5") == [
            {"id": 5, "s": "cherry!", "tags": ["red", "x"], "v": 10, "o": {"m": {"deep": [1, {}]}}}
        ]
        with pytest.raises(DocumentError, match="past the end"):
            run(docdb, f"UPDATE {mixed.name} SET tags[5] = 1 WHERE id = 1")
        assert q(mixed, "WHERE id = 1")[0]["tags"] == ["red", "green"]  # unchanged

    def test_delete_all(self, mixed: Any, docdb: Any) -> None:
        assert run(docdb, f"DELETE FROM {mixed.name} WHERE v = 5 OR v = '5'") == [{"deleted": 2}]
        assert run(docdb, f"DELETE FROM {mixed.name}") == [{"deleted": 4}]
        assert q(mixed, "") == []
        mixed.insert({"again": 1})
        assert q(mixed, "") == [{"again": 1}]

    def test_bulk_load_is_atomic(self, make_collection: Any, tmp_path: Any) -> None:
        coll = make_collection()
        good = tmp_path / "good.jsonl"
        good.write_text("\n".join(json.dumps({"n": i}) for i in range(2500)) + "\n\n")
        assert coll.load_jsonl(good) == 2500
        bad = io.StringIO('{"n": -1}\n{"n": -2}\n[1, 2]\n{"n": -3}\n')
        with pytest.raises(DocumentError, match=r"line 3: .*JSON object"):
            coll.load_jsonl(bad)
        with pytest.raises(DocumentError, match="object 2: malformed JSON"):
            coll.insert_many([{"ok": 1}, '{"broken": '])
        assert coll.count() == 2500
        assert q(coll, "WHERE n < 0") == []

    def test_large_load_into_empty_collection_rebuilds_indexes(
        self, make_collection: Any, monkeypatch: Any
    ) -> None:
        # several batches into an empty collection: indexes dropped, rebuilt at the end
        monkeypatch.setattr("tesseradb.documents._collection.LOAD_BATCH", 100)
        coll = make_collection()
        broken = [json.dumps({"n": i, "s": f"v{i}"}) for i in range(250)] + ["[1]"]
        with pytest.raises(DocumentError, match="line 251"):
            coll.load_jsonl(io.StringIO("\n".join(broken)))
        assert coll.count() == 0
        assert coll.load_jsonl(io.StringIO("\n".join(broken[:250]))) == 250
        assert [d["n"] for d in q(coll, "WHERE s = 'v7' OR n BETWEEN 200 AND 202")] == [
            7,
            200,
            201,
            202,
        ]
        if coll.backend.transactional_ddl:  # every index is there again: dropping them works
            with pytest.raises(RuntimeError, match="undo"), coll.backend.transaction(write=True):
                coll.mapping.drop_indexes(coll.mapping.all_tables())
                raise RuntimeError("undo")
        coll.insert_many([{"n": 1000}])  # later inserts keep them up to date
        assert q(coll, "WHERE n = 1000") == [{"n": 1000}]


class TestTransactions:
    """``Collection.transaction(write=True)``: the statements inside it, on any collection
    of the backend, commit together or not at all (docs/documents.md)."""

    def test_an_exception_rolls_back_every_statement_of_the_block(
        self, make_collection: Any
    ) -> None:
        one, two = make_collection(), make_collection()
        one.insert_many([{"n": 1}, {"n": 2}])
        two.insert({"m": 1})
        before = (one.find(), two.find())
        with pytest.raises(RuntimeError, match="undo"), one.transaction(write=True):
            one.insert({"n": 3})
            assert one.delete("n = ?", [1]) == 1
            two.insert_many([{"m": 2}, {"m": 3}])
            assert [d["n"] for d in one.find()] == [2, 3]  # the block sees its own writes
            raise RuntimeError("undo")
        assert (one.find(), two.find()) == before

    def test_a_block_commits_as_a_whole_and_nested_blocks_join_it(
        self, make_collection: Any
    ) -> None:
        one, two = make_collection(), make_collection()
        one.insert({"n": 1})
        with one.transaction(write=True):
            one.insert({"n": 2})
            with two.transaction(write=True):  # joins the outer block
                two.insert({"m": 1})
            one.delete("n = ?", [1])
        assert one.find() == [{"n": 2}]
        assert two.find() == [{"m": 1}]
        with pytest.raises(RuntimeError, match="inner"), one.transaction(write=True):
            one.insert({"n": 3})
            with two.transaction(write=True):
                two.insert({"m": 2})
                raise RuntimeError("inner")
        assert one.find() == [{"n": 2}]
        assert two.find() == [{"m": 1}]

    def test_delete_needs_a_predicate_text(self, make_collection: Any) -> None:
        coll = make_collection()
        coll.insert_many([{"n": 1}, {"n": 2}])
        for bad in (None, "", "  ", 5, ["n = 1"]):
            with pytest.raises(InvalidArgumentError, match="delete's where"):
                coll.delete(bad)  # type: ignore[arg-type]
        for call in (coll.delete, coll.find):  # where in the predicate, not the statement
            with pytest.raises(ArgoSyntaxError, match="the predicate 'n =='") as err:
                call("n ==")
            assert (err.value.line, err.value.column) == (1, 4)
            with pytest.raises(ArgoSyntaxError) as err:
                call("n = 1\n AND (")
            assert (err.value.line, err.value.column) == (2, 7)
        assert coll.count() == 2
        assert coll.delete("n > ?", [5]) == 0
        assert coll.delete("n >= ?", [2]) == 1
        assert coll.find() == [{"n": 1}]


class TestJoins:
    def test_self_join_nobench_style(self, make_collection: Any, docdb: Any) -> None:
        coll = make_collection()
        coll.insert_many(
            [
                {"str1": f"s{i}", "num": i, "nested_obj": {"str": f"s{(i + 2) % 4}"}}
                for i in range(4)
            ]
        )
        out = run(
            docdb,
            f"SELECT * FROM {coll.name} AS left INNER JOIN {coll.name} AS right "
            "ON (left.nested_obj.str = right.str1) WHERE left.num BETWEEN 1 AND 2",
        )
        assert [(o["left"]["num"], o["right"]["num"]) for o in out] == [(1, 3), (2, 0)]
        out = run(
            docdb,
            f"SELECT l.num, r.str1 FROM {coll.name} l JOIN {coll.name} r "
            "ON l.nested_obj.str = r.str1 WHERE NOT (l.num = 0 OR r.num = 0)",
        )
        assert out == [
            {"left": {"num": 1}, "right": {"str1": "s3"}},
            {"left": {"num": 3}, "right": {"str1": "s1"}},
        ]


class TestDelta:
    """Objects split between the main tables and the delta answer as if in one place."""

    def _split(self, make_collection: Any) -> Any:
        coll = make_collection()
        coll.insert_many([{"n": i, "s": f"v{i % 3}", "arr": [i, f"w{i}"]} for i in range(6)])
        coll.compact()
        assert not coll.mapping.delta
        coll.insert_many([{"n": i, "s": f"v{i % 3}", "arr": [i, f"w{i}"]} for i in range(6, 10)])
        assert coll.mapping.delta
        return coll

    def test_small_inserts_land_in_the_delta(self, make_collection: Any) -> None:
        coll = self._split(make_collection)
        main, delta = coll.mapping.part(False), coll.mapping.part(True)
        backend = coll.backend
        with backend.transaction():
            in_main = {r[0] for t in main for r in backend.execute(f"SELECT objid FROM {t}")}
            in_delta = {r[0] for t in delta for r in backend.execute(f"SELECT objid FROM {t}")}
        assert (sorted(in_main), sorted(in_delta)) == ([1, 2, 3, 4, 5, 6], [7, 8, 9, 10])

    def test_reads_see_both_parts(self, make_collection: Any) -> None:
        coll = self._split(make_collection)
        assert coll.count() == 10
        assert [d["n"] for d in q(coll, "WHERE s = 'v1' OR n = 9")] == [1, 4, 7, 9]
        assert [d["n"] for d in q(coll, "WHERE 'w8' = ANY arr OR 2 = ANY arr")] == [2, 8]
        assert q(coll, "WHERE n >= 4 ORDER BY n DESC LIMIT 3", select="n") == [
            {"n": 9},
            {"n": 8},
            {"n": 7},
        ]
        assert q(coll, "WHERE n > 3 GROUP BY s", select="s, COUNT(*), SUM(n)") == [
            {"s": "v0", "count(*)": 2, "sum(n)": 15},
            {"s": "v1", "count(*)": 2, "sum(n)": 11},
            {"s": "v2", "count(*)": 2, "sum(n)": 13},
        ]
        assert q(coll, "", select="arr[1]") == [{"arr": [f"w{i}"]} for i in range(10)]
        # and as a relation of db.sql
        rows = coll_db(coll).sql(f"SELECT objid, doc->>'n' FROM {coll.name} ORDER BY objid")
        assert rows.fetchall() == [(i + 1, str(i)) for i in range(10)]

    def test_join_pairs_across_parts(self, make_collection: Any) -> None:
        coll = self._split(make_collection)
        out = run(
            coll_db(coll),
            f"SELECT l.n, r.n FROM {coll.name} AS l JOIN {coll.name} AS r ON (l.s = r.s) "
            "WHERE l.n = 2 OR l.n = 9",
        )
        pairs = [(o["left"]["n"], o["right"]["n"]) for o in out]
        assert pairs == [(2, 2), (2, 5), (2, 8), (9, 0), (9, 3), (9, 6), (9, 9)]

    def test_update_and_delete_reach_both_parts(self, make_collection: Any) -> None:
        coll = self._split(make_collection)
        assert run(coll_db(coll), f"UPDATE {coll.name} SET s = 'x' WHERE n IN (1, 8)") == [
            {"updated": 2}
        ]
        assert [d["n"] for d in q(coll, "WHERE s = 'x'")] == [1, 8]
        assert run(coll_db(coll), f"DELETE FROM {coll.name} WHERE s = 'x' OR n = 0") == [
            {"deleted": 3}
        ]
        coll.compact()
        assert not coll.mapping.delta
        assert [d["n"] for d in q(coll, "WHERE n >= 0")] == [2, 3, 4, 5, 6, 7, 9]

    def test_delta_merges_once_it_grows(self, make_collection: Any, monkeypatch: Any) -> None:
        monkeypatch.setattr("tesseradb.documents._collection.DELTA_OBJECTS", 5)
        coll = make_collection()
        for i in range(5):
            coll.insert_many([{"n": i}])
        assert coll.mapping.delta
        coll.insert_many([{"n": 5}])  # the sixth object: more than 5, merged
        assert not coll.mapping.delta
        assert [d["n"] for d in q(coll, "WHERE n >= 0")] == list(range(6))

    def test_collection_made_before_the_delta_is_upgraded(self, make_collection: Any) -> None:
        coll = make_collection()
        coll.insert_many([{"n": i} for i in range(3)])
        coll.compact()
        backend, db = coll.backend, coll_db(coll)
        with backend.transaction(write=True):  # as the collection was before delta tables
            for table in coll.mapping.part(delta=True):
                backend.execute(f"DROP TABLE {table}")
            backend.execute("ALTER TABLE argo_meta DROP COLUMN delta_objects")
        # as a new process would find it: neither the hall nor the document store has it open
        db._registry.forget(coll.name)
        db._registry.kind("collection").store.forget(coll.name)
        if make_collection.backend == "sqlite":  # read-only: read as it is
            with tesseradb.connect(db.path, read_only=True) as reader:
                assert [d["n"] for d in reader.argo(f"SELECT n FROM {coll.name}")] == [0, 1, 2]
        again = db.collection(coll.name)
        assert again is not coll
        assert [d["n"] for d in q(again, "WHERE n >= 0")] == [0, 1, 2]
        again.insert_many([{"n": 3}])
        assert again.mapping.delta
        assert [d["n"] for d in q(again, "WHERE n >= 0")] == [0, 1, 2, 3]
        # a new collection beside old ones adds the column too
        with backend.transaction(write=True):
            backend.execute("ALTER TABLE argo_meta DROP COLUMN delta_objects")
        other = make_collection()
        other.insert_many([{"m": 1}])
        assert q(other, "WHERE m = 1") == [{"m": 1}]

    def test_tables_that_exist_are_not_made_again(self, make_collection: Any) -> None:
        coll = make_collection()
        coll.insert_many([{"n": 1}])
        with pytest.raises(ObjectExistsError, match="its tables already exist"):
            coll._create()  # (what the kind calls on create)
        assert q(coll, "WHERE n = 1") == [{"n": 1}]

    def test_failed_insert_leaves_the_delta_as_it_was(self, make_collection: Any) -> None:
        coll = self._split(make_collection)
        with pytest.raises(DocumentError, match="object 2"):
            coll.insert_many([{"n": 100}, "[1]"])
        assert coll.count() == 10
        assert q(coll, "WHERE n = 100") == []


class TestErrors:
    @pytest.mark.parametrize(
        ("text", "line", "column"),
        [
            ("SELEC * FROM c", 1, 1),
            ("SELECT * FROM c WHERE", 1, 22),
            ("SELECT *\nFROM c\nWHERE a = = 1", 3, 11),
            ("SELECT * FROM c WHERE a = NULL", 1, 27),
            ('INSERT INTO c OBJECT {"a": 1,}', 1, 30),
            ("INSERT INTO c OBJECT [1]", 1, 22),
            ("SELECT a FROM c GROUP BY a", 1, 27),
            ("SELECT * FROM c WHERE a BETWEEN 1 AND 'x'", 1, 42),
            ("SELECT * FROM c LIMIT -1", 1, 23),
            ("SELECT * FROM c WHERE a = NaN", 1, 27),
        ],
    )
    def test_syntax_errors(self, docdb: Any, text: str, line: int, column: int) -> None:
        with pytest.raises(ArgoSyntaxError) as info:
            docdb.argo(text)
        assert (info.value.line, info.value.column) == (line, column)

    def test_unknown_collection_and_bad_documents(self, make_collection: Any, docdb: Any) -> None:
        coll = make_collection()
        for text in ("SELECT * FROM nowhere", "DELETE FROM nowhere", "UPDATE nowhere SET a = 1"):
            with pytest.raises(UnknownCollectionError, match="nowhere"):
                docdb.argo(text)
        with pytest.raises(DocumentError, match="top level"):
            coll.insert('"just a string"')
        with pytest.raises(DocumentError, match="NaN is not JSON"):
            coll.insert('{"a": NaN}')
        with pytest.raises(DocumentError, match="outside the 64-bit range"):
            coll.insert({"a": 2**64})
        assert coll.count() == 0
        assert docdb.collections() == [coll.name]


def test_insert_creates_collection_on_default_backend(docdb: Any) -> None:
    from tesseradb.documents import DEFAULT_BACKEND, DEFAULT_MAPPING

    docdb.argo('INSERT INTO fresh OBJECT {"a": 1}')
    coll = docdb.collection("fresh")
    assert (coll.backend.kind, coll.mapping.name) == (DEFAULT_BACKEND, DEFAULT_MAPPING)
    assert docdb.argo("SELECT * FROM fresh") == [{"a": 1}]
    assert docdb.sql("SELECT objid, doc->>'a' AS a FROM fresh").fetchall() == [(1, "1")]
