"""The throwaway PostgreSQL and MariaDB servers that document backends and peers use."""

from __future__ import annotations

import pytest

from tests.servers import Server

pytestmark = pytest.mark.server


def test_postgres_server_answers(postgres_server: Server) -> None:
    import psycopg

    with psycopg.connect(
        host=postgres_server.host,
        port=postgres_server.port,
        user=postgres_server.user,
        dbname=postgres_server.database,
    ) as con:
        con.execute("CREATE TABLE probe (x int)")
        con.execute("INSERT INTO probe SELECT generate_series(1, 10)")
        assert con.execute("SELECT sum(x) FROM probe").fetchone() == (55,)
        assert con.execute("SHOW server_version").fetchone()[0]
    assert postgres_server.url.startswith("postgresql://tessera@127.0.0.1:")


def test_mariadb_server_answers(mariadb_server: Server) -> None:
    import pymysql

    con = pymysql.connect(
        host=mariadb_server.host, port=mariadb_server.port, user=mariadb_server.user
    )
    try:
        with con.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS probe")
            cur.execute("CREATE TABLE probe.t (x INT)")
            cur.execute("INSERT INTO probe.t VALUES (1), (2), (3)")
            cur.execute("SELECT sum(x) FROM probe.t")
            assert int(cur.fetchone()[0]) == 6
            cur.execute("SELECT VERSION()")
            assert "MariaDB" in cur.fetchone()[0]
    finally:
        con.close()
    assert mariadb_server.url.startswith("mysql://root@127.0.0.1:")
