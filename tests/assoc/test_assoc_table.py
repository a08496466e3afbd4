"""Persistent associative tables: exactly what was put, in both orientations, after reopening;
SQL pushdown against the plain answer; all-or-nothing puts; bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.assoc import Assoc, AssocError, StartsWith
from tesseradb.errors import ObjectExistsError, ReadOnlyError, TesseraError
from tesseradb.sql.predicate import Predicate
from tesseradb.testing.relation import RelationTests, conformance_data

KEYS = st.sampled_from(["a", "ab", "b", "ba", "c", "d|1", "d|2", "é"])
PUT = st.lists(st.tuples(KEYS, KEYS, st.integers(1, 9).map(float)), min_size=1, max_size=12)


def latest(puts: list[list[tuple[str, str, float]]]) -> dict[tuple[str, str], float]:
    model: dict[tuple[str, str], float] = {}
    for put in puts:
        for r, c, v in put:
            model[(r, c)] = v  # within a put and across puts, the last write wins
    return model


def as_dict(a: Assoc) -> dict[tuple[Any, Any], Any]:
    return {(r, c): v for r, c, v in a.triples()}


def put_all(table: Any, puts: list[list[tuple[str, str, float]]]) -> None:
    for put in puts:
        rows, cols, vals = zip(*put, strict=True)
        table.put_triples(list(rows), list(cols), list(vals))


@settings(max_examples=25, deadline=None)
@given(st.lists(PUT, min_size=1, max_size=5), KEYS, KEYS)
def test_a_table_returns_what_was_put_in_both_orientations_after_reopening(
    tmp_path_factory: pytest.TempPathFactory,
    puts: list[list[tuple[str, str, float]]],
    key: str,
    other: str,
) -> None:
    path = tmp_path_factory.mktemp("assoc") / "db"
    model = latest(puts)
    with tesseradb.connect(path) as db:
        put_all(db.create_assoc_table("T"), puts)
    for step in ("reopened", "compacted"):
        with tesseradb.connect(path) as db:
            t = db.assoc_table("T")
            if step == "compacted":
                t.compact()
                assert t.runs == 1
            assert as_dict(t[:, :]) == model
            assert as_dict(t[f"{key},", :]) == {k: v for k, v in model.items() if k[0] == key}
            assert as_dict(t[:, f"{key},"]) == {k: v for k, v in model.items() if k[1] == key}
            assert as_dict(t.T[f"{key},", :]) == {
                (c, r): v for (r, c), v in model.items() if c == key
            }
            lo, hi = sorted((key, other))
            assert as_dict(t[f"{lo},:,{hi},", :]) == {
                k: v for k, v in model.items() if lo <= k[0] <= hi
            }
            assert as_dict(t[:, StartsWith("d|,")]) == {
                k: v for k, v in model.items() if k[1].startswith("d|")
            }
            assert as_dict(t[f"{key},", f"{other},"]) == {
                k: v for k, v in model.items() if k == (key, other)
            }
            degrees: dict[str, float] = {}
            for put in puts:  # degrees are summed on insert: a put's distinct entries per column
                for _, c in {(r, c) for r, c, _ in put}:
                    degrees[c] = degrees.get(c, 0) + 1
            assert as_dict(t.deg[:, :]) == {(c, "degree"): n for c, n in degrees.items()}


def test_the_d4m_query_pattern(db: tesseradb.Database) -> None:
    t = db.create_assoc_table("Tedge", text=True)
    t.put(Assoc("e1,e1,e2,e3,e3,", "color|red,size|2,color|red,color|blue,size|2,", 1))
    t.put_text("e1,e2,e3,", ["a red one", "another red", "blue"])
    # check the degree of the value first, then fetch the whole records that have it
    assert t.deg["color|red,", :].triples() == [("color|red", "degree", 2.0)]
    hits = t[:, "color|red,"]
    records = t[hits.row, :]
    assert records.triples() == [
        ("e1", "color|red", 1.0),
        ("e1", "size|2", 1.0),
        ("e2", "color|red", 1.0),
    ]
    assert t.txt[hits.row, :].triples() == [
        ("e1", "text", "a red one"),
        ("e2", "text", "another red"),
    ]
    assert db.assoc_tables() == ["Tedge"]


def test_string_values_and_numeric_keys(db: tesseradb.Database) -> None:
    t = db.create_assoc_table("S")
    t.put(Assoc([1, 2, 3], [10, 10, 20], "x,y,z,"))
    t.put(Assoc([2], [10], "w,"))
    assert t[:, :].triples() == [(1.0, 10.0, "x"), (2.0, 10.0, "w"), (3.0, 20.0, "z")]
    assert t["2,:,3,", :].triples() == [(2.0, 10.0, "w"), (3.0, 20.0, "z")]
    assert db.sql("SELECT val FROM S WHERE col = 20").fetchall() == [("z",)]
    with pytest.raises(AssocError, match="holds values that are strings"):
        t.put(Assoc([5], [10], 1))
    with pytest.raises(AssocError, match="holds row keys that are numbers"):
        t.put(Assoc("a,", [10], "v,"))


PREDICATES = [
    ("row = 'b'", Predicate.isin("row", ["b"]), "row"),
    ("row IN ('a', 'c', 'zz')", Predicate.isin("row", ["a", "c", "zz"]), "row"),
    ("row BETWEEN 'ab' AND 'c'", Predicate.between("row", "ab", "c"), "row"),
    ("col = 'd|1'", Predicate.isin("col", ["d|1"]), "col"),
    ("col >= 'd|'", Predicate.between("col", "d|", None), "col"),
]


@pytest.mark.parametrize(("where", "predicate", "axis"), PREDICATES)
def test_sql_pushdown_answers_as_the_plain_table_and_narrows_the_scan(
    db: tesseradb.Database, where: str, predicate: Predicate, axis: str
) -> None:
    import duckdb

    rng = np.random.default_rng(3)
    keys = np.array(["a", "ab", "b", "ba", "c", "d|1", "d|2", "é"])
    t = db.create_assoc_table("T")
    model: dict[tuple[str, str], float] = {}
    for _ in range(4):
        rows, cols = keys[rng.integers(0, 8, 40)], keys[rng.integers(0, 8, 40)]
        vals = rng.integers(1, 5, 40).astype(float)
        t.put_triples(rows, cols, vals)
        model.update(zip(zip(rows.tolist(), cols.tolist(), strict=True), vals, strict=True))
    # the plain answer: what was put (the latest write winning), as a DuckDB table
    plain = pa.table(
        {
            "row": [r for r, _ in model],
            "col": [c for _, c in model],
            "val": list(model.values()),
        }
    )
    peer = duckdb.connect()
    peer.register("plain", plain)
    query = "SELECT row, col, val FROM {} WHERE " + where + " ORDER BY row, col"
    assert db.sql(query.format("T")).fetchall() == peer.sql(query.format("plain")).fetchall()
    # the shortcut answered: the scan searched one orientation and read only matching keys
    relation = db.relation("T")
    assert axis in relation.describe_scan(None, predicate)[0].replace("column", "col")
    scanned = relation.scan(None, predicate).read_all()
    assert scanned.num_rows == predicate.filter(plain).num_rows < plain.num_rows


def test_degrees_and_texts_are_relations(db: tesseradb.Database) -> None:
    t = db.create_assoc_table("E", text=True)
    t.put_triples("e1,e2,", "f|x,f|x,", 1)
    t.put_text("e1,", ["raw record"])
    assert db.sql('SELECT * FROM "E.deg"').fetchall() == [("f|x", 2.0)]
    assert db.sql("SELECT * FROM E.txt").fetchall() == [("e1", "raw record")]


def test_a_failed_put_leaves_the_table_as_it_was(db: tesseradb.Database, monkeypatch: Any) -> None:
    from tesseradb.assoc import _store

    t = db.create_assoc_table("T")
    t.put_triples("a,", "b,", 1)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(_store.Manifest, "commit", broken)
    with pytest.raises(OSError, match="disk full"):
        t.put_triples("c,", "d,", 2)
    monkeypatch.undo()
    assert t[:, :].triples() == [("a", "b", 1.0)]
    folder = Path(db.path) / "assoc" / "T"
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "run-000001", "run-000002"]
    t._manifest.remove_leftovers()  # what reopening for writing does
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "run-000001"]
    assert db.check().ok


def test_a_damaged_run_file_is_named(db: tesseradb.Database) -> None:
    from tesseradb.errors import DamagedStorageError

    t = db.create_assoc_table("D")
    t.put_triples("a,b,", "c,d,", 1)
    keys = Path(db.path) / "assoc" / "D" / "run-000001" / "row_keys.arrow"
    keys.write_bytes(b"not an arrow file")
    db.close()
    with tesseradb.connect(db.path) as again, pytest.raises(DamagedStorageError, match="row_keys"):
        again.assoc_table("D")["a,", :]


@pytest.mark.parametrize(
    "part",
    [
        "col_vals.npy",
        "row_vals.npy",
        "row_indptr.npy",
        "col_index.npy",
        "col_keys.arrow",
        "deg.npy",
        "meta.json",
        "manifest.json",
    ],
)
def test_a_flipped_byte_in_any_file_is_damage_never_an_answer(
    db: tesseradb.Database, part: str
) -> None:
    """Every file of a table carries a checksum (issue 40, item 5): a read that opens a
    damaged file fails naming it, check finds it, and repair sets the run aside saying
    how many triples went with it."""
    from tesseradb.errors import DamagedStorageError

    t = db.create_assoc_table("F")
    rows = ",".join(f"r{i}" for i in range(40)) + ","
    cols = ",".join(f"c{i % 7}" for i in range(40)) + ","
    t.put_triples(rows, cols, [float(i + 1) for i in range(40)])
    t.put_triples("q,", "c0,", [99.0])
    whole = {
        "rows": t["r1,", :].triples(),
        "cols": t[:, "c1,"].triples(),
        "deg": t.deg[:, :].triples(),
        "sql": db.sql("SELECT sum(val), count(*) FROM F").fetchall(),
    }
    folder = Path(db.path) / "assoc" / "F"
    target = folder / part if part == "manifest.json" else folder / "run-000001" / part
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x20
    target.write_bytes(bytes(data))
    db.close()
    with tesseradb.connect(db.path) as again:
        table = again.assoc_table("F") if part != "manifest.json" else None
        reads = {
            "rows": lambda: table["r1,", :].triples(),
            "cols": lambda: table[:, "c1,"].triples(),
            "deg": lambda: table.deg[:, :].triples(),
            "sql": lambda: again.sql("SELECT sum(val), count(*) FROM F").fetchall(),
        }
        for what, read in reads.items():
            if table is None:
                break
            try:
                got = read()
            except DamagedStorageError:
                continue
            assert got == whole[what], f"{part}: {what} answered around the damage"
        report = again.check()
        assert not report.ok
        if part == "manifest.json":
            with pytest.raises(DamagedStorageError, match="manifest"):
                again.assoc_table("F")
            return
        repaired = again.check(repair=True)
        assert repaired.ok
        lost = "the 40 triples of run-000001"
        if part == "meta.json":  # (the file that counts them is the damaged one)
            lost = "every triple of run-000001 (its count is unreadable)"
        assert [f.lost for f in repaired.findings] == [lost]
        assert again.assoc_table("F")[:, :].triples() == [("q", "c0", 99.0)]
        assert again.check().ok


def test_integers_a_float_would_change_are_refused_never_rounded(
    db: tesseradb.Database,
) -> None:
    from tesseradb.errors import AssocError

    t = db.create_assoc_table("I")
    for value in (2**53 + 1, np.uint64(2**64 - 1), np.array([2**60 + 1], dtype=np.int64)):
        with pytest.raises(AssocError, match="cannot hold exactly"):
            t.put_triples("a,", "b,", value if isinstance(value, np.ndarray) else [value])
    with pytest.raises(AssocError, match="cannot hold exactly"):
        t.put_triples([2**53 + 1], "b,", [1.0])  # (numeric keys too)
    t.put_triples("a,", "b,", [2**53])  # exact
    assert t[:, :].triples() == [("a", "b", float(2**53))]


def test_many_puts_are_merged_and_stay_exact(db: tesseradb.Database) -> None:
    from tesseradb.assoc._table import MAX_RUNS

    t = db.create_assoc_table("M")
    model: dict[tuple[str, str], float] = {}
    for i in range(MAX_RUNS + 6):
        rows, cols = [f"r{i % 7}", f"r{i % 3}"], [f"c{i % 5}", "c0"]
        t.put_triples(rows, cols, [i + 1, i + 1])
        for r, c in zip(rows, cols, strict=True):
            model[(r, c)] = i + 1.0
    assert t.runs <= MAX_RUNS
    assert as_dict(t[:, :]) == model
    assert as_dict(t.deg[:, :])[("c0", "degree")] == sum(
        len(
            {
                (r, c)
                for r, c in zip([f"r{i % 7}", f"r{i % 3}"], [f"c{i % 5}", "c0"], strict=True)
                if c == "c0"
            }
        )
        for i in range(MAX_RUNS + 6)
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda db: db.create_assoc_table("T", transpose="yes"), "transpose must be True or False"),
        (lambda db: db.assoc_table("T").put([1, 2]), "put takes an Assoc"),
        (lambda db: db.assoc_table("T").put_triples("a,b,", "c,", [1, 2, 3]), "2 row keys"),
        (lambda db: db.assoc_table("T")[0, :], "selected by keys, not positions"),
        (lambda db: db.assoc_table("T")["a,"], r"T\[rows, cols\]"),
        (lambda db: db.assoc_table("T").txt, "keeps no texts"),
        (lambda db: db.assoc_table("T").put_text("a,", ["x"]), "keeps no texts"),
        (lambda db: db.create_assoc_table("T"), "already"),
    ],
)
def test_bad_input_is_a_clear_error(db: tesseradb.Database, call: Any, message: str) -> None:
    db.create_assoc_table("T")
    db.assoc_table("T").put_triples("a,", "b,", 1)
    with pytest.raises(TesseraError, match=message):
        call(db)
    assert db.assoc_table("T")[:, :].triples() == [("a", "b", 1.0)]


def test_read_only_refuses_puts(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        db.create_assoc_table("T").put_triples("a,", "b,", 1)
    with tesseradb.connect(tmp_path / "db", read_only=True) as db:
        assert db.assoc_table("T")[:, :].nnz == 1
        with pytest.raises(ReadOnlyError):
            db.assoc_table("T").put_triples("c,", "d,", 1)


def test_a_table_name_is_taken_once(db: tesseradb.Database) -> None:
    db.create_assoc_table("T")
    with pytest.raises(ObjectExistsError):
        db.create_assoc_table("T")


class TestAssocTable(RelationTests):
    capabilities = frozenset({"describe_scan"})
    key = "row"
    value = "val"

    def make(self, db: tesseradb.Database, folder: Path, data: pa.Table) -> tuple[str, pa.Table]:
        # rows keyed by k (numbers), one column "v"; values v + 1, as zero is no
        # entry of an associative array, and -1 where v is NaN, which is no value
        k = data.column("k").to_numpy().astype(np.float64)
        v = data.column("v").to_numpy() + 1
        v[np.isnan(v)] = -1
        db.create_assoc_table("assoc_rows").put_triples(k, "v,", v)
        expected = pa.table(
            {
                "row": pa.array(k, pa.float64()),
                "col": pa.array(["v"] * len(k), pa.large_string()),
                "val": pa.array(v, pa.float64()),
            }
        )
        return "assoc_rows", expected

    def test_a_lookup_answers_as_duckdb_without_it(self, made: Any) -> None:  # type: ignore[override]
        """The suite's version expects the engine's lookup shortcut, which orders only
        integer, string and boolean keys (pyarrow's float order is not DuckDB's); an
        associative table's numeric keys are floats, so DuckDB answers, and must
        answer as on the plain rows."""
        import duckdb

        db, relation, expected = made
        query = 'SELECT "row" AS key, * FROM {} WHERE "row" BETWEEN 3 AND 40 ORDER BY "row" DESC'
        ours = db.sql(query.format(relation.name))
        peer = duckdb.connect()
        peer.register("plain", expected)
        want = peer.sql(query.format("plain")).to_arrow_table()
        assert ours.shortcut is None
        assert ours.arrow().column("key").to_pylist() == want.column("key").to_pylist()
        assert ours.arrow().column("val").to_pylist() == want.column("val").to_pylist()


def test_conformance_data_has_a_nan_to_replace() -> None:
    assert np.isnan(conformance_data().column("v").to_numpy()).sum() == 1
