"""The analysis cache: a repeated statement reuses its analysis only while the names it
looked up resolve alike, and the reuse never changes an answer."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tests.sql.test_pushdown_property import canonical

# the same column `x` of a record stream typed three ways: each gives the same text
# another analysis (integer bounds, float32 ambiguity points, exact doubles), and the
# stream answers aggregates itself when the analysis says the pushdown is exact, so a
# stale analysis would show in the answers
VARIANTS = {
    "int": ("int32", pa.int32()),
    "float": ("float", pa.float32()),
    "double": ("double", pa.float64()),
}
TEXTS = [
    "SELECT count(*), min(x) FROM t WHERE x > ?",
    "SELECT count(*), max(y) FROM t WHERE x <= ? AND y >= 1",
    "SELECT avg(y) FROM t WHERE x BETWEEN ? AND 7",
]
PARAMS = st.one_of(st.integers(-3, 9), st.sampled_from([2.5, 0.1, 1.0000001]))
VALUES = st.lists(st.sampled_from([-5, 0, 1, 2, 2.5, 3, 7, 9, 0.1, 1.0000001]), max_size=12)


def _table(kind: str, values: list[float]) -> pa.Table:
    type_ = VARIANTS[kind][1]
    xs = [int(v) if kind == "int" else v for v in values]
    return pa.table(
        {"x": pa.array(xs, type_), "y": pa.array([float(i % 3) for i in range(len(xs))])}
    )


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    text=st.sampled_from(TEXTS),
    param=PARAMS,
    steps=st.lists(st.tuples(st.sampled_from(sorted(VARIANTS)), VALUES), min_size=2, max_size=5),
)
def test_reused_analyses_give_duckdbs_answers(
    shared_db: tesseradb.Database, text: str, param: Any, steps: list[tuple[str, list[float]]]
) -> None:
    """One statement, run again after the stream is recreated with another type of ``x``."""
    db = shared_db
    for kind, values in steps:
        table = _table(kind, values)
        if db.relation("t") is not None:
            db.drop("t")
        descriptor = {
            "fields": [{"name": "x", "type": VARIANTS[kind][0]}, {"name": "y", "type": "double"}],
            "index": ["x"],
        }
        db.create_stream("t", descriptor).ingest(table)
        con = duckdb.connect()
        try:
            con.register("t", table)
            want = canonical(con.execute(text, [param]).fetchall())
        finally:
            con.close()
        got = canonical(db.sql(text, [param]).fetchall())
        assert got == want, (kind, text, param, values)


def test_a_repeated_query_is_prepared_once(db: tesseradb.Database) -> None:
    db.register("r", pa.table({"a": [1, 2, 3]}))
    cache = db._engine.analyses
    query = "SELECT count(*) FROM r WHERE a > ?"
    before = cache.hits
    for _ in range(3):
        assert db.sql(query, [1]).fetchall() == [(2,)]
    assert cache.hits == before + 2
    # other values reuse the prepared text, and each derives its own predicate
    # (1, 1.0 and True are different literals to the derivation)
    for value, count, predicate in (
        (2, 1, "a >= 3"),
        (0.5, 3, "a >= 1"),
        (3, 0, "a >= 4"),
        (1.0, 2, "a >= 2"),
    ):
        assert db.sql(query, [value]).fetchall() == [(count,)]
        assert str(db.explain(query, [value]).relation("r").predicate) == predicate
    assert cache.hits == before + 2 + 8
    # a statement that writes is never kept
    db.sql("CREATE TABLE w (v INTEGER)")
    db.sql("INSERT INTO w VALUES (?)", [5])
    db.sql("INSERT INTO w VALUES (?)", [5])
    assert cache.hits == before + 10 and db.sql("SELECT count(*) FROM w").fetchall() == [(2,)]


def test_a_changed_relation_is_analysed_afresh(db: tesseradb.Database) -> None:
    query = "SELECT * FROM r WHERE a >= 2 ORDER BY a"
    db.register("r", pa.table({"a": [1, 2, 3]}))
    assert db.sql(query).fetchall() == [(2,), (3,)]
    db.unregister("r")
    db.register("r", pa.table({"a": ["1", "2", "3"], "b": [7, 8, 9]}))
    with pytest.raises(tesseradb.TesseraError):  # string >= integer: DuckDB refuses
        db.sql(query).fetchall()
    db.unregister("r")
    # a plain table of that name, then altered: its columns are looked up again
    db.sql("CREATE TABLE r AS SELECT 2 AS a")
    assert db.sql(query).fetchall() == [(2,)]
    db.sql("ALTER TABLE r ADD COLUMN c INTEGER DEFAULT 5")
    assert db.sql(query).fetchall() == [(2, 5)]
    db.sql("DROP TABLE r")
    with pytest.raises(tesseradb.TesseraError):
        db.sql(query)


def test_the_engine_changing_its_copy_leaves_the_entry_alone(db: tesseradb.Database) -> None:
    """Semi-join reduction narrows a relation's predicate and adds a note on the analysis."""
    import numpy as np

    db.register("obs", pa.table({"sub_id": np.arange(200_000) % 10_000}))
    db.register("subs", pa.table({"id": np.arange(10_000), "night": np.arange(10_000) // 100}))
    sql = "SELECT count(*) FROM obs JOIN subs ON obs.sub_id = subs.id WHERE night = 3"
    first = db.explain(sql).relation("obs")
    again = db.explain(sql).relation("obs")
    assert first.notes == again.notes and str(first.predicate) == str(again.predicate)
    assert sum("semi-join" in n for n in again.notes) == 1
    assert db.sql(sql).fetchall() == db.sql(sql).fetchall() == [(2000,)]
