"""Served SQL keeps each client's session and DuckDB's exact values (issue 41)."""

from __future__ import annotations

import datetime
import uuid

import duckdb

import tesseradb
from tests.server.conftest import Served


def test_each_client_has_a_session_of_its_own(served: Served, tokens: dict[str, str]) -> None:
    with (
        tesseradb.connect(served.url, token=tokens["admin"]) as one,
        tesseradb.connect(served.url, token=tokens["admin"]) as two,
    ):
        one.sql("CREATE TABLE t (i INTEGER)")
        one.sql("BEGIN")
        one.sql("INSERT INTO t VALUES (1)")
        assert one.sql("SELECT count(*) FROM t").scalar() == 1
        assert two.sql("SELECT count(*) FROM t").scalar() == 0  # not committed
        one.sql("PREPARE p AS SELECT 42")
        assert one.sql("EXECUTE p").scalar() == 42
        try:
            two.sql("EXECUTE p")
            raise AssertionError("another client's prepared statement ran")
        except tesseradb.errors.TesseraError:
            pass
        one.sql("ROLLBACK")
        assert two.sql("SELECT count(*) FROM t").scalar() == 0
        one.sql("CREATE TEMP TABLE mine AS SELECT 7 AS x")
        assert one.sql("SELECT x FROM mine").scalar() == 7


def test_values_of_every_type_arrive_as_duckdb_gives_them(
    served: Served, tokens: dict[str, str]
) -> None:
    statement = (
        "SELECT 340282366920938463463374607431768211455::UHUGEINT AS u, '0101'::BIT AS b, "
        "'14:44:56+05:30'::TIMETZ AS tz, TIME '24:00:00' AS t, 'infinity'::DATE AS d, "
        "'8c6ef4bb-4b6d-4e4e-9a0b-0c5f7a2d3f10'::UUID AS id, MAP {1: 'a'} AS m, "
        "ROW(1, 'a') AS r, INTERVAL 1 MONTH AS i, true AS flag, sum(x) AS s "
        "FROM range(3) t(x)"
    )
    expected = duckdb.connect().sql(statement).fetchall()
    with tesseradb.connect(served.url, token=tokens["reader"]) as db:
        result = db.sql(statement)
        assert result.fetchall() == expected
        [row] = expected
        assert isinstance(row[5], uuid.UUID) and isinstance(row[7], tuple)
        assert row[2].tzinfo == datetime.timezone(datetime.timedelta(hours=5, minutes=30))
        assert result.arrow().equals(duckdb.connect().sql(statement).to_arrow_table())
    with served.client(tokens["reader"]) as http:
        body = http.post("/sql?format=json", json={"sql": "SELECT 2::UHUGEINT ** 100 AS big"})
        assert body.json()["types"] == ["DOUBLE"]
        body = http.post(
            "/sql?format=json",
            json={"sql": "SELECT 340282366920938463463374607431768211455::UHUGEINT AS u"},
        )
        assert body.json()["rows"] == [[340282366920938463463374607431768211455]]
        assert body.json()["types"] == ["UHUGEINT"]
