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
