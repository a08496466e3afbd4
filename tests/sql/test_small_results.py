"""A query whose last run gave a few rows of plain types runs the next time through
DuckDB's ``execute`` and ``fetchall`` (the engine's small-result path): every
conversion of its result equals the relation path's, and a changed table, setting or
parameter type is never answered from the remembered shape."""

from __future__ import annotations

import itertools
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tesseradb

_COLUMNS = {  # Arrow type of each column, and how its values are drawn
    "b": (pa.bool_(), st.booleans()),
    "i8": (pa.int8(), st.integers(-(2**7), 2**7 - 1)),
    "i16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "i32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "i64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "u8": (pa.uint8(), st.integers(0, 2**8 - 1)),
    "u64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "f32": (pa.float32(), st.floats(width=32)),
    "f64": (pa.float64(), st.floats()),
    "s": (pa.string(), st.text(alphabet=st.characters(blacklist_categories=("Cs",)))),
    "blob": (pa.binary(), st.binary(max_size=8)),
    "d18": (
        pa.decimal128(18, 3),
        st.decimals(min_value=-(10**14), max_value=10**14, places=3, allow_nan=False),
    ),
}

_names = itertools.count()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with tesseradb.connect(tmp_path_factory.mktemp("small") / "db") as database:
        yield database


def _rows(draw: st.DrawFn, n: int) -> dict[str, list[Any]]:
    return {
        name: draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n))
        for name, (_, values) in _COLUMNS.items()
    }


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 12))
    columns = _rows(draw, n)
    arrays = {"k": pa.array(range(n), pa.int64())}
    for name, (type_, _) in _COLUMNS.items():
        arrays[name] = pa.array(columns[name], type_)
    return pa.table(arrays)


def _same(left: Any, right: Any) -> bool:
    """Equal, NaN equal to NaN (a float column may hold it)."""
    if isinstance(left, float) and isinstance(right, float):
        return left == right or (math.isnan(left) and math.isnan(right))
    if isinstance(left, tuple) and isinstance(right, tuple):
        return len(left) == len(right) and all(
            _same(a, b) for a, b in zip(left, right, strict=True)
        )
    return bool(left == right) and type(left) is type(right)


def _tables_equal(left: pa.Table, right: pa.Table) -> None:
    """Same schema and values (NaN equal to NaN, which ``Table.equals`` does not count)."""
    assert left.schema == right.schema
    for a, b in zip(left.columns, right.columns, strict=True):
        assert all(_same(x, y) for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True))


def _results_equal(slow: tesseradb.Result, fast: tesseradb.Result) -> None:
    assert fast.columns == slow.columns and fast.types == slow.types
    assert fast.num_rows == slow.num_rows == len(fast)
    slow_rows, fast_rows = slow.fetchall(), fast.fetchall()
    assert len(slow_rows) == len(fast_rows)
    assert all(_same(a, b) for a, b in zip(slow_rows, fast_rows, strict=True))
    assert _same(slow.fetchone(), fast.fetchone()) or slow.fetchone() == fast.fetchone()
    _tables_equal(fast.exact_arrow(), slow.exact_arrow())
    _tables_equal(fast.arrow(), slow.arrow())
    pd.testing.assert_frame_equal(fast.df(), slow.df())
    slow_np, fast_np = slow.numpy(), fast.numpy()
    assert list(slow_np) == list(fast_np)
    for name in slow_np:
        assert slow_np[name].dtype == fast_np[name].dtype
        assert str(slow_np[name]) == str(fast_np[name])


def _stored(db: tesseradb.Database, table: pa.Table) -> tuple[str, str]:
    """``table`` as a new plain table: its name, and a query of its first rows by ``k``."""
    name = f"t{next(_names)}"
    db.register("src", table)
    db.sql(f"CREATE TABLE {name} AS SELECT * FROM src")
    db.unregister("src")
    return name, f"SELECT * FROM {name} WHERE k < ? ORDER BY k"


@settings(max_examples=60, deadline=None)
@given(table=tables(), cut=st.integers(0, 12))
def test_the_second_run_equals_the_first_in_every_conversion(
    db: tesseradb.Database, table: pa.Table, cut: int
) -> None:
    name, query = _stored(db, table)
    engine = db._engine
    before = engine.small_results.hits
    slow = db.sql(query, [cut])
    fast = db.sql(query, [cut])
    assert engine.small_results.hits == before + 1  # the second run took the path
    _results_equal(slow, fast)
    literal = db.sql(f"SELECT * FROM {name} WHERE k < {cut} ORDER BY k").fetchall()
    assert all(_same(a, b) for a, b in zip(fast.fetchall(), literal, strict=True))
    db.sql(f"DROP TABLE {name}")


def test_a_changed_table_setting_or_parameter_type_is_read_afresh(
    db: tesseradb.Database,
) -> None:
    engine = db._engine
    db.sql("CREATE TABLE shape AS SELECT 1 AS a, 'x' AS s")
    query = "SELECT * FROM shape"
    assert db.sql(query).fetchall() == [(1, "x")]
    assert db.sql(query).fetchall() == [(1, "x")]
    # another type under the same names: checked against DuckDB's description
    db.sql("CREATE OR REPLACE TABLE shape AS SELECT 2.5 AS a, 'y' AS s")
    result = db.sql(query)
    assert result.fetchall() == [(Decimal("2.5"), "y")] and result.types == [
        "DECIMAL(2,1)",
        "VARCHAR",
    ]
    db.sql("CREATE OR REPLACE TABLE shape AS SELECT 2.5::DOUBLE AS a, 'y' AS s")
    assert db.sql(query).fetchall() == [(2.5, "y")]
    assert db.sql(query).types == ["DOUBLE", "VARCHAR"]
    # a setting that changes the Arrow form: the remembered schema is not used
    hits = engine.small_results.hits
    db.sql("SET arrow_large_buffer_size = true")
    try:
        after = db.sql(query)
        assert engine.small_results.hits == hits
        assert after.exact_arrow().schema.field("s").type == pa.large_string()
        again = db.sql(query)
        assert engine.small_results.hits == hits + 1
        assert again.exact_arrow().equals(after.exact_arrow())
    finally:
        db.sql("SET arrow_large_buffer_size = false")
    # a parameter of another type gives a column of another type
    assert db.sql("SELECT ? AS v", [1]).fetchall() == [(1,)]
    assert db.sql("SELECT ? AS v", [2]).fetchall() == [(2,)]
    assert db.sql("SELECT ? AS v", ["a"]).fetchall() == [("a",)]
    assert db.sql("SELECT ? AS v", [np.float64(0.5)]).fetchall() == [(0.5,)]
    db.sql("DROP TABLE shape")
    with pytest.raises(tesseradb.TesseraError, match="shape"):
        db.sql(query)


def test_writing_functions_and_large_results_are_not_remembered(db: tesseradb.Database) -> None:
    engine = db._engine
    db.sql("CREATE SEQUENCE small_seq")
    assert [db.sql("SELECT nextval('small_seq')").fetchall() for _ in range(3)] == [
        [(1,)],
        [(2,)],
        [(3,)],
    ]
    hits = engine.small_results.hits
    db.sql("SELECT * FROM range(5000)").fetchall()
    assert len(db.sql("SELECT * FROM range(5000)").fetchall()) == 5000
    assert engine.small_results.hits == hits
    # a nested or temporal type is not plain: DuckDB and pyarrow may give other values
    for _ in range(2):
        assert db.sql("SELECT [1, 2] AS l, DATE '2020-01-02' AS d").fetchall() == [
            ([1, 2], __import__("datetime").date(2020, 1, 2))
        ]
    assert engine.small_results.hits == hits


def test_a_transaction_sees_its_own_rows_on_the_path(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE TABLE r (a INTEGER)")
        count = "SELECT count(*) FROM r"
        db.sql(count)
        db.sql("BEGIN")
        db.sql("INSERT INTO r VALUES (1), (2)")
        assert db.sql(count).fetchall() == [(2,)]
        db.sql("ROLLBACK")
        assert db.sql(count).fetchall() == [(0,)]
        db.sql("INSERT INTO r VALUES (7)")
        assert db.sql(count).fetchall() == [(1,)]
    with tesseradb.connect(tmp_path / "db") as db:  # and after reopening
        assert db.sql("SELECT count(*) FROM r").fetchall() == [(1,)]


def test_an_error_on_the_path_leaves_the_session_usable(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE TABLE texts AS SELECT '1' AS s")
        query = "SELECT CAST(s AS INTEGER) AS n FROM texts"
        hits = db._engine.small_results.hits
        assert db.sql(query).fetchall() == [(1,)]
        db.sql("INSERT INTO texts VALUES ('not a number')")
        with pytest.raises(tesseradb.TesseraError, match="not a number"):
            db.sql(query)
        assert db._engine.small_results.hits == hits + 1
        db.sql("DELETE FROM texts WHERE s = 'not a number'")
        assert db.sql(query).fetchall() == [(1,)]
        assert db.sql("SELECT 41 + 1").fetchall() == [(42,)]
        # and in a session that keeps its own cursor (a transaction)
        db.sql("BEGIN")
        db.sql("INSERT INTO texts VALUES ('x')")
        with pytest.raises(tesseradb.TesseraError):
            db.sql(query)
        db.sql("ROLLBACK")
        assert db.sql(query).fetchall() == [(1,)]


@settings(max_examples=40, deadline=None)
@given(table=tables(), cut=st.integers(0, 12), exact=st.booleans())
def test_a_sink_gets_the_same_arrow_from_the_second_run(
    db: tesseradb.Database, table: pa.Table, cut: int, exact: bool
) -> None:
    name, query = _stored(db, table)
    session = db.session()
    engine = db._engine
    got: list[pa.Table] = []
    hits = engine.small_results.hits
    for _ in range(2):
        result = session.stream_sql(query, lambda r: got.append(r.read_all()), [cut], exact=exact)
        assert result.num_rows == 0
    assert engine.small_results.hits == hits + 1  # the second run took the path
    assert len(got) == 2
    _tables_equal(got[1], got[0])
    assert got[1].schema.metadata == got[0].schema.metadata  # (what exact describes)
    session.close()
    db.sql(f"DROP TABLE {name}")


def test_a_large_result_goes_to_the_sink_as_it_comes(db: tesseradb.Database) -> None:
    engine = db._engine
    hits = engine.small_results.hits
    sizes: list[int] = []
    for _ in range(2):
        db.stream_sql("SELECT * FROM range(5000)", lambda r: sizes.append(r.read_all().num_rows))
    assert sizes == [5000, 5000] and engine.small_results.hits == hits
