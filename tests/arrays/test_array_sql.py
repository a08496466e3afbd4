"""Arrays in SQL: scans equal the full-scan reference; native aggregates equal DuckDB's."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb

SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _reference(arr: Any) -> pa.Table:
    """Every cell of every written chunk, made the plain way: dense read, then mask by chunk."""
    schema = arr.schema
    dense = arr.read()
    shape = arr.shape
    keep = np.zeros(shape, dtype=bool)
    for coords in arr.written_chunks():
        keep[
            tuple(
                slice(c * d.chunk, (c + 1) * d.chunk)
                for c, d in zip(coords, schema.dims, strict=True)
            )
        ] = True
    idx = np.nonzero(keep)
    cols: dict[str, Any] = {}
    for axis, d in enumerate(schema.dims):
        cols[d.name] = pa.array(idx[axis] + d.start + schema.origin[axis], pa.int64())
    for a in schema.attrs:
        values = dense[a.name][idx]
        if a.nullable:
            null = (
                np.isnan(values)
                if isinstance(a.fill, float) and math.isnan(a.fill)
                else values == a.fill
            )
            cols[a.name] = pa.array(values, mask=null)
        else:
            cols[a.name] = pa.array(values)
    return pa.table(cols)


@pytest.fixture
def cube(db: tesseradb.Database) -> Any:
    rng = np.random.default_rng(7)
    arr = db.create_array(
        "cube",
        [
            {"name": "t", "end": 6, "chunk": 2},
            {"name": "y", "start": -3, "end": 17, "chunk": 6},
            {"name": "x", "end": 20, "chunk": 7},
        ],
        [
            {"name": "v", "dtype": "int32"},
            {"name": "w", "dtype": "float64", "nullable": True},
            {"name": "q", "dtype": "uint8", "nullable": True, "fill": 0},
        ],
        origin=(1000, 0, 500),
    )
    arr[0:4, -3:10, 0:14] = {
        "v": rng.integers(-50, 50, (4, 13, 14)),
        "w": np.where(rng.random((4, 13, 14)) < 0.1, np.nan, rng.standard_normal((4, 13, 14))),
        "q": rng.integers(0, 4, (4, 13, 14)).astype(np.uint8),
    }
    arr.put_triples(np.array([[5, 16, 19], [5, 16, 18]]), {"v": np.array([7, 8])})
    return arr


def _rows(table: Any) -> list[tuple[Any, ...]]:
    def norm(x: Any) -> Any:
        if isinstance(x, float):
            return "nan" if math.isnan(x) else round(x, 6)
        return x

    return sorted(tuple(norm(v) for v in row) for row in table)


def test_full_scan_is_every_cell_of_the_written_chunks(db: tesseradb.Database, cube: Any) -> None:
    ref = _reference(cube)
    got = db.sql("SELECT * FROM cube").arrow()
    assert got.schema.names == ["t", "y", "x", "v", "w", "q"]
    assert got.num_rows == ref.num_rows
    assert _rows([tuple(r.values()) for r in got.to_pylist()]) == _rows(
        [tuple(r.values()) for r in ref.to_pylist()]
    )


@SETTINGS
@given(
    t=st.tuples(st.integers(995, 1008), st.integers(0, 8)),
    y=st.tuples(st.integers(-6, 18), st.integers(0, 25)),
    x=st.one_of(st.none(), st.tuples(st.integers(495, 525), st.integers(0, 30))),
    v=st.one_of(st.none(), st.integers(-60, 60)),
    w_null=st.booleans(),
    group=st.sampled_from([None, "t", "y", "t, x"]),
)
def test_scans_and_native_aggregates_equal_the_plain_answer(
    db: tesseradb.Database, cube: Any, t: Any, y: Any, x: Any, v: Any, w_null: bool, group: Any
) -> None:
    ref = _reference(cube)
    try:
        db.register("ref", ref)
        where = [f"t BETWEEN {t[0]} AND {t[0] + t[1]}", f"y >= {y[0]} AND y < {y[0] + y[1]}"]
        if x is not None:
            where.append(f"x IN ({x[0]}, {x[0] + x[1]}, {x[0] + 2})")
        if v is not None:
            where.append(f"v > {v}")
        if w_null:
            where.append("w IS NOT NULL")
        clause = " AND ".join(where)
        # scan (pushdown: chunk pruning + vectorised filters) vs the registered reference
        for sql in (f"SELECT * FROM {{}} WHERE {clause}", f"SELECT v, x FROM {{}} WHERE {clause}"):
            assert _rows(db.sql(sql.format("cube")).fetchall()) == _rows(
                db.sql(sql.format("ref")).fetchall()
            )
        # native aggregates vs DuckDB over the reference
        keys = f"{group}, " if group else ""
        tail = f" GROUP BY {group}" if group else ""
        sql = (
            f"SELECT {keys}count(*), count(w), sum(v), avg(w), min(w), max(v), min(q), max(q), "
            f"stddev(v) FROM {{}} WHERE {clause}{tail}"
        )
        native = db.sql(sql.format("cube")).fetchall()
        plain = db.sql(sql.format("ref")).fetchall()
        assert _rows(native) == _rows(plain)
        assert "aggregates computed from storage" in str(db.explain(sql.format("cube")))
    finally:
        db.unregister("ref")


def test_nan_and_infinity_in_native_min_and_max(db: tesseradb.Database) -> None:
    arr = db.create_array("f", [{"name": "x", "end": 8, "chunk": 3}], {"v": "float64"})
    arr[0:8] = np.array([np.nan, 1.0, np.inf, -2.0, np.nan, np.nan, np.nan, 3.0])
    db.register("ref", _reference(arr))
    for sql in (
        "SELECT x // 3 AS g, min(v), max(v) FROM {} GROUP BY g",
        "SELECT min(v), max(v), sum(v) FROM {} WHERE x >= 4 AND x < 7",
    ):
        native = db.sql(sql.format("f")).fetchall()
        plain = db.sql(sql.format("ref")).fetchall()
        assert _rows(native) == _rows(plain)


def test_never_written_chunks_make_no_rows_and_joins_work(db: tesseradb.Database) -> None:
    arr = db.create_array("s", [{"name": "x", "end": 100, "chunk": 10}], {"v": "int64"})
    arr[35] = np.int64(4)  # one cell written: its whole chunk (30..39) is rows
    assert db.sql("SELECT count(*), sum(v) FROM s").fetchall() == [(10, 4)]
    assert db.sql("SELECT min(x), max(x) FROM s").fetchall() == [(30, 39)]
    db.sql("CREATE TABLE names AS SELECT 35 AS x, 'thirty-five' AS label")
    assert db.sql("SELECT label, v FROM s JOIN names USING (x)").fetchall() == [("thirty-five", 4)]
    assert "chunks read: 1 of 1 written" in str(db.explain("SELECT * FROM s WHERE x = 35"))
    assert "chunks read: 0 of 1 written" in str(db.explain("SELECT * FROM s WHERE x > 50"))


def _cells(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("float"):
        values = rng.standard_normal(shape)
        specials = rng.choice([np.nan, np.inf, -np.inf, 0.0], size=shape)
        return np.where(rng.random(shape) < 0.05, specials, values).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -6), 6, shape).astype(dtype)


@SETTINGS
@given(
    dtype=st.sampled_from(["int8", "int16", "int64", "uint16", "uint64", "float32", "bool"]),
    nullable=st.booleans(),
    extremes=st.booleans(),
    seed=st.integers(0, 2**16),
    y=st.tuples(st.integers(-2, 24), st.integers(0, 26)),
    x=st.tuples(st.integers(-6, 16), st.integers(0, 22)),
)
def test_aggregates_folded_per_chunk_in_rust_equal_the_plain_answer(
    db: tesseradb.Database,
    monkeypatch: pytest.MonkeyPatch,
    dtype: str,
    nullable: bool,
    extremes: bool,
    seed: int,
    y: tuple[int, int],
    x: tuple[int, int],
) -> None:
    """Without GROUP BY or attribute filters each chunk is folded in Rust from its stored
    bytes: every cell type, NULL fill values, NaN and infinities, box edges inside chunks,
    chunks never written and chunks written for another attribute only."""
    from tesseradb import _core

    rng = np.random.default_rng(seed)
    fill = np.nan if dtype.startswith("float") else (True if dtype == "bool" else 1)
    arr = db.create_array(
        "folded",
        [{"name": "y", "end": 23, "chunk": 5}, {"name": "x", "start": -4, "end": 15, "chunk": 6}],
        [
            {"name": "a", "dtype": dtype, "nullable": nullable, "fill": fill},
            {"name": "b", "dtype": "int32"},
        ],
    )
    try:
        arr[2:17, -4:9] = {"a": _cells(rng, dtype, (15, 13)), "b": rng.integers(-9, 9, (15, 13))}
        # cells of b in chunks a never had: a reads its fill value there
        arr.put_triples(np.array([[21, 13], [22, 14]]), {"b": np.array([3, 4])})
        calls = []
        fold = _core.reduce_chunks
        monkeypatch.setattr(_core, "reduce_chunks", lambda *a: calls.append(1) or fold(*a))
        db.register("ref", _reference(arr))
        if dtype == "bool":
            items = "count(*), count(a), min(a), max(a)"
        elif extremes:
            items = "count(*), count(a), sum(a), avg(a), min(a), max(a), sum(b), max(b)"
        else:
            items = "count(a), sum(a), avg(a), avg(b)"
        where = f"y BETWEEN {y[0]} AND {y[0] + y[1]} AND x >= {x[0]} AND x < {x[0] + x[1]}"
        sql = f"SELECT {items} FROM {{}} WHERE {where}"
        native = db.sql(sql.format("folded")).fetchall()
        assert _rows(native) == _rows(db.sql(sql.format("ref")).fetchall())
        touched = db.sql(f"SELECT count(*) FROM ref WHERE {where}").fetchall()[0][0]
        assert bool(calls) == bool(touched)  # the Rust fold answered whenever there were cells
    finally:
        monkeypatch.undo()
        db.unregister("ref")
        db.drop("folded")


def test_repeated_output_names_keep_every_column(db: tesseradb.Database) -> None:
    arr = db.create_array("r", [{"name": "x", "end": 10, "chunk": 5}], {"v": "int32"})
    arr[0:10] = np.arange(10, dtype=np.int32)
    assert db.sql("SELECT count(*), count(*) FROM r").fetchall() == [(10, 10)]
    assert db.sql("SELECT sum(v) AS s, min(v) AS s FROM r").fetchall() == [(45, 0)]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT sum(k), avg(k), sum(u), avg(u), count(*) FROM a",  # the Rust chunk fold
        "SELECT sum(k), avg(k), sum(u) FROM a WHERE k > 0",  # the numpy path (attribute filter)
        "SELECT i, sum(k), sum(u) FROM a GROUP BY i ORDER BY i",  # grouped numpy path
        "SELECT sum(s), sum(b) FROM a",  # small types: no overflow, HUGEINT all the same
    ],
)
def test_integer_sums_never_wrap(db: tesseradb.Database, query: str) -> None:
    """Ten cells of 2^63-1 sum to 10 * (2^63-1), as DuckDB's HUGEINT, not to -10 (issue 18)."""
    arr = db.create_array(
        "a",
        [{"name": "i", "end": 10, "chunk": 3}, {"name": "j", "end": 2, "chunk": 2}],
        {"k": "int64", "u": "uint64", "s": "int16", "b": "uint8"},
    )
    arr[0:10, 0:2] = {
        "k": np.full((10, 2), 2**63 - 1, dtype=np.int64),
        "u": np.full((10, 2), 2**64 - 1, dtype=np.uint64),
        "s": np.full((10, 2), -(2**15), dtype=np.int16),
        "b": np.full((10, 2), 255, dtype=np.uint8),
    }
    native = db.sql(query)
    assert native.shortcut == "aggregate"  # the chunk fold answered, not DuckDB
    table = arr.relation.scan(None, None).read_all()
    plain = duckdb_answer(query, table)
    assert native.arrow().schema.types == plain.schema.types
    assert native.fetchall() == [tuple(r.values()) for r in plain.to_pylist()]


def test_aggregate_operator_sums_exactly(db: tesseradb.Database) -> None:
    arr = db.create_array("a", [{"name": "i", "end": 4, "chunk": 2}], {"k": "int64", "v": "int32"})
    arr[0:4] = {"k": np.full(4, 2**62, dtype=np.int64), "v": np.arange(4, dtype=np.int32)}
    total = arr.aggregate("sum")
    assert total["k"].item() == 2**64  # past int64: Python ints
    assert total["v"].dtype == np.int64 and total["v"].item() == 6
    by_i = arr.aggregate("sum", "k", by="i")
    assert by_i["k"].dtype == np.int64 and by_i["k"].values.tolist() == [2**62] * 4


def duckdb_answer(query: str, table: pa.Table) -> pa.Table:
    import duckdb

    con = duckdb.connect()
    con.register("a", table)
    return con.sql(query).to_arrow_table()
