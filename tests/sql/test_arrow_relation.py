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
    table = pa.table({"k": list(range(10_000)), "v": [i % 7 for i in range(10_000)]})
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
