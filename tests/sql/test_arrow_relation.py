"""ArrowRelation prunes by zone maps (the conformance suite runs in tests/test_relation_conformance.py)."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tesseradb.sql import ArrowRelation, Predicate, Relation


def test_zone_maps_skip_batches_of_clustered_data() -> None:
    # k is a float: an integer column would be found through its sorted index instead
    table = pa.table({"k": [float(i) for i in range(10_000)], "v": [i % 7 for i in range(10_000)]})
    rel = ArrowRelation("t", table, batch_rows=1000)
    pred = Predicate.between("k", 2500, 2600)
    assert rel.estimate(pred).rows == 1000  # one batch of ten can hold the range
    assert rel.scan(["k"], pred).read_all().num_rows == 101
    assert rel.estimate(Predicate.between("v", 8, 9)).rows == 0


def test_accepts_batches_streams_and_dicts() -> None:
    table = pa.table({"x": [1, 2, 3]})
    assert ArrowRelation("a", table.to_batches()[0]).table.num_rows == 3
    assert ArrowRelation("b", table.to_reader()).table.num_rows == 3
    assert ArrowRelation("c", {"x": [1, 2]}).table.num_rows == 2
    assert isinstance(ArrowRelation("d", table), Relation)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(width=32, allow_nan=True), min_size=1, max_size=50),
    st.data(),
    st.sampled_from([">=", ">", "<=", "<", "="]),
    st.sampled_from(["literal", "double", "parameter"]),
)
def test_float_columns_compare_as_duckdb_does(
    values: list[float], data: st.DataObject, op: str, form: str
) -> None:
    """DuckDB casts a literal to FLOAT before comparing it with a FLOAT column, a DOUBLE
    compares in double: the pushed-down predicate must keep the rows either way."""
    import duckdb

    import tesseradb

    # bounds a hair off a stored value: where float and double comparison disagree
    near = data.draw(st.sampled_from(values).filter(math.isfinite) | st.just(40.7645342324))
    bound = near * (1 + data.draw(st.sampled_from([0.0, 1e-9, -1e-9, 3e-8, -3e-8])))
    table = pa.table({"f": pa.array(values, pa.float32())})
    literal = {"literal": repr(bound), "double": f"{bound!r}::DOUBLE", "parameter": "?"}[form]
    if "inf" in literal or "nan" in literal:
        literal = f"'{bound!r}'::DOUBLE"
    query = f"SELECT count(*) FROM t WHERE f {op} {literal}"
    params = [bound] if form == "parameter" else None
    con = duckdb.connect()
    con.register("source", table)
    con.execute("CREATE TABLE t AS SELECT * FROM source")
    expected = con.execute(query, params).fetchall()
    con.close()
    with tempfile.TemporaryDirectory() as scratch, tesseradb.connect(Path(scratch) / "db") as db:
        db.register("t", table)
        assert db.sql(query, params).fetchall() == expected


# --- the sorted index of an integer column ----------------------------------------
_INDEXED = None


def _indexed_table() -> pa.Table:
    global _INDEXED
    if _INDEXED is None:
        import numpy as np

        rng = np.random.default_rng(5)
        n = 20_000
        ids = rng.permutation(n).astype(np.int64) - 5_000  # negative ones too, any order
        _INDEXED = pa.table(
            {
                "id": ids,
                "u": pa.array(rng.integers(0, 2**63, n, dtype=np.uint64)),
                "v": rng.uniform(0, 10, n),
            }
        )
    return _INDEXED


@settings(max_examples=150, deadline=None)
@given(
    lo=st.integers(-5_100, 15_100),
    width=st.integers(0, 1_000),  # at most 1/16 of the rows: through the index
    points=st.lists(st.integers(-5_100, 15_100), max_size=5),
    open_ends=st.tuples(st.booleans(), st.booleans()),
    vmax=st.one_of(st.none(), st.floats(0, 10)),
    float_bound=st.booleans(),
)
def test_the_sorted_index_answers_as_a_plain_filter(
    lo: int,
    width: int,
    points: list[int],
    open_ends: tuple[bool, bool],
    vmax: float | None,
    float_bound: bool,
) -> None:
    """A point, a range or an IN-list on an integer column of an unordered table takes its
    rows through the index (asserted), with exactly the rows a plain filter keeps."""
    import duckdb

    from tesseradb.sql.predicate import ColumnDomain, Interval, RangeSet

    table = _indexed_table()
    rel = ArrowRelation("t", table)
    low = lo + 0.5 if float_bound else lo
    interval = Interval(low, lo + width, *open_ends)
    pred = Predicate.on("id", ColumnDomain.values(RangeSet.of([interval])))
    where = f"id {'>=' if open_ends[0] else '>'} {low} AND id {'<=' if open_ends[1] else '<'} {lo + width}"
    if points:
        pred = Predicate.isin("id", points)
        where = f"id IN ({', '.join(map(str, points))})"
    if vmax is not None:
        pred = pred.and_(Predicate.between("v", 0.0, vmax))
        where += f" AND v BETWEEN 0 AND {vmax!r}"
    con = duckdb.connect()
    con.register("t", table)
    query = f"SELECT id FROM {{}} WHERE {where} ORDER BY id"
    expected = con.execute(query.format("t")).fetchall()
    if not float_bound or points:  # an int bound narrowing to few rows goes through the index
        assert rel._indexed_rows(pred) is not None
    con.register("scanned", rel.scan(None, pred).read_all())
    assert con.execute(query.format("scanned")).fetchall() == expected  # a superset
    assert (rel.estimate(pred).rows or 0) >= len(expected)


def test_an_unsigned_column_and_out_of_range_bounds_fall_back() -> None:
    table = _indexed_table()
    rel = ArrowRelation("t", table)
    huge = Predicate.between("id", -(2**70), 10)  # beyond int64: not through the index
    assert rel._indexed_rows(huge) is None
    assert rel.scan(["id"], huge).read_all().num_rows >= huge.filter(table).num_rows
    u = table.column("u")[7].as_py()
    point = Predicate.isin("u", [u])
    assert rel._indexed_rows(point) is not None
    assert rel.scan(["u"], point).read_all().column("u").to_pylist() == [u]
