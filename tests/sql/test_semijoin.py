"""Semi-join reduction: narrowing a relation to a selective partner's join keys never changes answers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.sql import semijoin
from tests.sql.test_pushdown_property import conditions, run_both, tables


@pytest.fixture
def always_reduce(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tiny tables never look selective by estimate: reduce whenever a partner is filtered.
    monkeypatch.setattr(semijoin, "SEMIJOIN_SELECTIVITY", 0)


JOINS = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "SEMI JOIN", "ANTI JOIN", ", "]


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    left=tables(),
    middle=tables(),
    right=tables(),
    join=st.sampled_from(JOINS),
    key=st.sampled_from([("i", "i"), ("s", "s"), ("j", "j"), ("i", "j"), ("f", "f"), ("f", "g")]),
    where_left=conditions(depth=1, qualifier="t"),
    where_right=conditions(depth=1, qualifier="u"),
)
def test_reduced_joins_equal_duckdb(
    always_reduce: None,
    shared_db: Any,
    reference: Any,
    left: pa.Table,
    middle: pa.Table,
    right: pa.Table,
    join: str,
    key: tuple[str, str],
    where_left: Any,
    where_right: Any,
) -> None:
    lk, rk = key
    semi = join in ("SEMI JOIN", "ANTI JOIN")
    if join == ", ":
        sql = f"SELECT t.*, u.* FROM t, u WHERE t.{lk} = u.{rk} AND ({where_left[0]}) AND ({where_right[0]})"
        params = where_left[1] + where_right[1]
    else:
        select = "t.*" if semi else "t.*, u.*"
        where = f"({where_left[0]})" + ("" if semi else f" AND ({where_right[0]})")
        sql = f"SELECT {select} FROM t {join} u ON t.{lk} = u.{rk} AND ({where_right[0]}) WHERE {where}"
        params = where_right[1] + where_left[1] + ([] if semi else where_right[1])
    run_both(shared_db, reference, sql, params, {"t": left, "u": right})
    # a chain of three, the middle one narrowed by one side and narrowing the other
    chain = (
        f"SELECT t.i, m.j, u.s FROM t JOIN m ON t.{lk} = m.{lk} JOIN u ON m.{rk} = u.{rk} "
        f"WHERE ({where_left[0]}) AND ({where_right[0]})"
    )
    run_both(
        shared_db,
        reference,
        chain,
        where_left[1] + where_right[1],
        {"t": left, "m": middle, "u": right},
    )


def test_explain_shows_the_reduction_and_the_scan_shrinks(db: tesseradb.Database) -> None:
    db.register(
        "obs",
        pa.table({"sub_id": np.arange(200_000) % 10_000, "mag": np.arange(200_000) % 7 * 1.0}),
    )
    db.register("subs", pa.table({"id": np.arange(10_000), "night": np.arange(10_000) // 100}))
    sql = "SELECT count(*), avg(mag) FROM obs JOIN subs ON obs.sub_id = subs.id WHERE night = 3"
    explained = db.explain(sql)
    obs = explained.relation("obs")
    assert any("semi-join: sub_id in the 100 distinct id of subs" in n for n in obs.notes)
    assert "sub_id in (0, 1, 2" not in str(obs.predicate) and "100 values" in str(obs.predicate)
    result = db.sql(sql)
    assert result.fetchall()[0][0] == 2000
    assert result.scan_stats["obs"].rows == 2000  # not 200,000
    # a self-join is read by two references: it is not narrowed
    self_join = db.explain(
        "SELECT count(*) FROM obs a JOIN obs b ON a.sub_id = b.sub_id WHERE a.mag = 1"
    )
    assert not any("semi-join" in n for n in self_join.relation("obs").notes)
    # the preserved side of a LEFT JOIN is never narrowed
    left = db.explain(
        "SELECT count(*) FROM obs LEFT JOIN subs ON obs.sub_id = subs.id AND night = 3"
    )
    assert not any("semi-join" in n for n in left.relation("obs").notes)


def test_left_join_with_is_null_on_both_clauses_answers_right(db: tesseradb.Database) -> None:
    """Found by the property test: DuckDB 2.0 answers this wrongly over Arrow scans
    (an ANTI join that drops the ON clause's IS NULL); native tables and TesseraDB agree."""
    import duckdb

    t = pa.table({"i": pa.array([None, -(2**63)], pa.int64()), "f": pa.array([None, 1.5])})
    u = pa.table({"i": pa.array([None, -(2**63)], pa.int64()), "s": pa.array([None, ""])})
    sql = "SELECT t.*, u.* FROM t LEFT JOIN u ON t.i = u.i AND u.i IS NULL WHERE coalesce(t.f, 0) > 1 AND u.i IS NULL"
    native = duckdb.connect()
    try:
        for name, table in (("t", t), ("u", u)):
            native.register("src", table)
            native.execute(f"CREATE TABLE {name} AS SELECT * FROM src")
            native.unregister("src")
        expected = native.execute(sql).fetchall()
    finally:
        native.close()
    assert expected == [(-(2**63), 1.5, None, None)]
    db.register("t", t)
    db.register("u", u)
    assert db.sql(sql).fetchall() == expected


def test_float_keys_holding_nan_join_as_in_duckdb(
    always_reduce: None, db: tesseradb.Database
) -> None:
    """DuckDB joins NaN with NaN. A NaN among the keys handed over once became an
    interval ``>= nan and <= nan`` that swallowed the other keys: the join lost every row."""
    import duckdb

    a = pa.table({"k": [float("nan"), 1.0, 2.0], "f": [1, 1, 5]})
    b = pa.table({"k": [float("nan"), 1.0, 3.0, -0.0] * 100, "v": list(range(400))})
    sql = "SELECT count(*), sum(b.v) FROM a JOIN b ON a.k = b.k WHERE a.f = 1"
    native = duckdb.connect()
    try:
        native.register("a", a)
        native.register("b", b)
        expected = native.execute(sql).fetchall()
    finally:
        native.close()
    assert expected == [(200, sum(range(0, 400, 4)) + sum(range(1, 400, 4)))]
    db.register("a", a)
    db.register("b", b)
    assert db.sql(sql).fetchall() == expected
    assert any("semi-join" in n for n in db.explain(sql).relation("b").notes)
