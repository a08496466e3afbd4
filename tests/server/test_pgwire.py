"""The PostgreSQL wire protocol (``tessera serve --pg-port``) with real clients: Debian's
psql and psycopg. Answers equal the database's own, writes are kept only when
acknowledged, the guard refuses the same attacks, and broken or hostile bytes get a
protocol error while the server keeps serving."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

import tesseradb
from tesseradb.server import ServerProcess, ServerThread, Users, free_ports, parse_rights

from .conftest import self_signed
from .test_rights import ATTACKS


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[tuple[ServerThread, dict[str, str]]]:
    db = tesseradb.connect(tmp_path / "db")
    db.sql(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, s VARCHAR, x DOUBLE, d DATE, ts TIMESTAMP, "
        "b BLOB, l INTEGER[], n DECIMAL(12, 3), flag BOOLEAN, big BIGINT, u UUID)"
    )
    db.sql(
        "INSERT INTO t VALUES "
        "(1, 'a', 1.5, '2024-01-02', '2024-01-02 03:04:05.5', '\\x01\\x02'::BLOB, [1, 2, NULL], "
        "12.345, true, 9223372036854775807, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'), "
        "(2, NULL, -0.1, NULL, NULL, NULL, [], -1.5, false, -9223372036854775808, NULL), "
        "(3, 'quote''s, {brace} \"x\" é', 'NaN', '1999-12-31', '1970-01-01 00:00:00', "
        "''::BLOB, [NULL], 0, NULL, 0, NULL), "
        "(4, '', 'Infinity', '2000-01-01', '2262-04-11 23:47:16.854775', NULL, NULL, "
        "-999999999.999, true, 1, NULL)"
    )
    db.sql("CREATE TABLE plain AS SELECT range AS i, range * 0.5 AS f FROM range(1000)")
    users = Users(db.path)
    tokens = {
        "admin": users.add("admin", parse_rights(["admin"])),
        "reader": users.add("reader", parse_rights(["read"])),
        "writer": users.add("writer", parse_rights(["write"])),
    }
    server = ServerThread(db, port=0, pg_port=0, statement_seconds=5.0)
    yield server, tokens
    server.stop()
    db.close()


def connect(server: ServerThread, tokens: dict[str, str], user: str = "admin", **kw: object):
    return psycopg.connect(
        host="127.0.0.1",
        port=server.pg_port,
        user=user,
        password=tokens[user],
        dbname="db",
        connect_timeout=10,
        **kw,
    )


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_reads_every_value_as_the_database_gives_it(pg, binary: bool) -> None:
    server, tokens = pg
    expected = server.db.sql("SELECT * FROM t ORDER BY id").fetchall()
    with connect(server, tokens) as con:
        cur = con.execute("SELECT * FROM t ORDER BY id", binary=binary)
        got = cur.fetchall()
        names = [c.name for c in cur.description]
    assert names == ["id", "s", "x", "d", "ts", "b", "l", "n", "flag", "big", "u"]
    assert len(got) == len(expected)
    for row, want in zip(got, expected, strict=True):
        for value, wanted in zip(row, want, strict=True):
            if isinstance(value, (bytes, memoryview)):
                value = bytes(value)
            if hasattr(value, "hex") and type(value).__name__ == "UUID":
                value = str(value)
                wanted = str(wanted)
            assert same(value, wanted), (row, want)


def test_psycopg_parameters_in_text_and_binary(pg) -> None:
    server, tokens = pg
    with connect(server, tokens, autocommit=True) as con:
        for marker in ("%s", "%b"):
            q = f"SELECT id FROM t WHERE id = {marker} OR s = {marker} OR d = {marker}"
            assert con.execute(q, [1, "", dt.date(1999, 12, 31)]).fetchall() == [(1,), (3,), (4,)]
            q = f"SELECT {marker}::DOUBLE, {marker}::DECIMAL(10, 2), {marker}::BOOLEAN, {marker}"
            row = con.execute(q, [2.5, Decimal("-3.25"), True, None]).fetchone()
            assert row == (2.5, Decimal("-3.25"), True, None)
            got = con.execute(f"SELECT {marker}::TIMESTAMP", [dt.datetime(2020, 5, 6, 7, 8, 9)])
            assert got.fetchone() == (dt.datetime(2020, 5, 6, 7, 8, 9),)
            assert con.execute(f"SELECT {marker}::BLOB", [b"\x00\xff"]).fetchone() == (b"\x00\xff",)
        # a value that is not of its column's type: an error naming it, then on as before
        with pytest.raises(psycopg.errors.DataError):
            con.execute("SELECT * FROM t WHERE id = %s", ["one"])
        assert con.execute("SELECT count(*) FROM t").fetchone() == (4,)


def test_writes_are_kept_only_once_committed(pg) -> None:
    server, tokens = pg
    db = server.db
    with connect(server, tokens) as con:  # psycopg opens a transaction: BEGIN
        con.execute("INSERT INTO plain VALUES (%s, %s)", [5000, 1.0])
        assert db.sql("SELECT count(*) FROM plain WHERE i = 5000").scalar() == 0
        con.rollback()
        assert db.sql("SELECT count(*) FROM plain WHERE i = 5000").scalar() == 0
        cur = con.execute("INSERT INTO plain VALUES (5001, 1.0), (5002, 2.0)")
        assert cur.rowcount == 2 and cur.statusmessage == "INSERT 0 2"
        con.commit()
        cur = con.execute("UPDATE plain SET f = -1 WHERE i >= 5001")
        assert cur.statusmessage == "UPDATE 2"
        # a failed statement leaves the transaction failed until ROLLBACK
        with pytest.raises(psycopg.errors.UniqueViolation):
            con.execute("INSERT INTO t (id) VALUES (1)")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            con.execute("SELECT 1")
        con.rollback()
        assert con.execute("SELECT count(*) FROM t").fetchone() == (4,)
    assert db.sql("SELECT list(f ORDER BY i) FROM plain WHERE i > 4000").scalar() == [1.0, 2.0]


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is absent")
def test_psql_runs_queries_and_a_script_as_one_transaction(pg, tmp_path: Path) -> None:
    server, tokens = pg

    def psql(*args: str, user: str = "admin") -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PGPASSWORD=tokens[user], PGCONNECT_TIMEOUT="10")
        command = ["psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", user, "-d", "db"]
        return subprocess.run(
            [*command, "-X", "-v", "ON_ERROR_STOP=1", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )

    shown = psql("-A", "-t", "-c", "SELECT id, s, ts, l, flag FROM t WHERE id < 3 ORDER BY id")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "1|a|2024-01-02 03:04:05.5|{1,2,NULL}|t",
        "2|||{}|f",
    ]
    # the statements of one query are one transaction: the failing second undoes the first
    failed = psql("-c", "INSERT INTO plain VALUES (7000, 0); INSERT INTO t (id) VALUES (1)")
    assert failed.returncode != 0 and "Duplicate key" in failed.stderr
    assert server.db.sql("SELECT count(*) FROM plain WHERE i = 7000").scalar() == 0
    # a wrong password is refused, naming the user
    env = dict(os.environ, PGPASSWORD="nope")
    refused = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "reader", "-c", "SELECT 1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode != 0
    assert 'password authentication failed for user "reader"' in refused.stderr
    # psql's \\copy reads COPY ... TO STDOUT, in text and CSV
    copied = psql("-c", "\\copy (SELECT id, s, l FROM t ORDER BY id) TO STDOUT")
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.splitlines() == [
        "1\ta\t{1,2,NULL}",
        "2\t\\N\t{}",
        '3\tquote\'s, {brace} "x" é\t{NULL}',
        "4\t\t\\N",
    ]
    copied = psql("-c", "\\copy (SELECT id, s FROM t ORDER BY id) TO STDOUT (FORMAT csv, HEADER)")
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.splitlines() == [
        "id,s",
        "1,a",
        "2,",
        '3,"quote\'s, {brace} ""x"" é"',
        '4,""',
    ]
    # \\d and \\l: psql's own catalog queries, answered from DuckDB's catalog (a
    # reader's OIDs are its snapshot's: published now, so none comes between psql's
    # queries)
    server.db._engine.publish_store()
    for user in ("admin", "reader"):
        described = psql("-c", "\\d t", user=user)
        assert described.returncode == 0, described.stderr
        lines = [[c.strip() for c in line.split("|")] for line in described.stdout.splitlines()]
        assert ["id", "integer", "", "not null", ""] in lines
        assert ["l", "integer[]", "", "", ""] in lines
        assert '"t_id_pkey" PRIMARY KEY, art (id)' in described.stdout
    assert psql("-c", "CREATE VIEW tv AS SELECT id, s FROM t").returncode == 0
    described = psql("-c", "\\d+ tv")
    assert described.returncode == 0, described.stderr
    assert 'View "main.tv"' in described.stdout
    assert "CREATE VIEW tv AS SELECT id, s FROM t;" in described.stdout
    assert psql("-c", "DROP VIEW tv").returncode == 0
    missing = psql("-c", "\\d nothing_here")
    assert "Did not find any relation named" in missing.stderr
    listed = psql("-A", "-t", "-c", "\\l")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split("|")[:3] == ["db", "tessera", "UTF8"]
    # \\copy ... FROM: text (escapes, NULL, arrays, bytea) and CSV (NULL apart from "")
    source = tmp_path / "rows.tsv"
    source.write_text(
        "10\tab\\tc\t1.5\t2024-01-02\t\\N\t\\\\x0102\t{1,NULL,3}\t0.5\tt\t7\t\\N\n"
        "11\t\\N\t\\N\t\\N\t\\N\t\\N\t{}\t\\N\t\\N\t\\N\t\\N\n"
    )
    loaded = psql("-c", f"\\copy t FROM '{source}'")
    assert loaded.returncode == 0 and loaded.stdout.strip() == "COPY 2", loaded.stderr
    rows = server.db.sql("SELECT s, x, d, b, l, n, flag FROM t WHERE id >= 10 ORDER BY id")
    assert rows.fetchall() == [
        ("ab\tc", 1.5, dt.date(2024, 1, 2), b"\x01\x02", [1, None, 3], Decimal("0.500"), True),
        (None, None, None, None, [], None, None),
    ]
    source.write_text('id,s\n12,"a,""b"""\n13,""\n14,\n')
    loaded = psql("-c", f"\\copy t (id, s) FROM '{source}' (FORMAT csv, HEADER)")
    assert loaded.returncode == 0, loaded.stderr
    got = server.db.sql("SELECT id, s FROM t WHERE id >= 12 ORDER BY id").fetchall()
    assert got == [(12, 'a,"b"'), (13, ""), (14, None)]
    # a bad row stores nothing and says where
    source.write_text("20\tfine\nseven\tbad\n")
    refused = psql("-c", f"\\copy t (id, s) FROM '{source}'")
    assert refused.returncode != 0
    assert "row 2, column 'id'" in refused.stderr and "nothing was stored" in refused.stderr
    assert server.db.sql("SELECT count(*) FROM t WHERE id = 20").scalar() == 0
    # a reader may not load
    refused = psql("-c", f"\\copy t (id, s) FROM '{source}'", user="reader")
    assert refused.returncode != 0 and "write right" in refused.stderr
    intervals = "SELECT INTERVAL '14 months', INTERVAL '-1 hour', INTERVAL '1 month 1 day 2 hours'"
    shown = psql("-A", "-t", "-c", intervals)
    assert shown.stdout.strip() == "1 year 2 mons|-01:00:00|1 mon 1 day 02:00:00", shown.stderr


def test_psycopg_copy_in_text_and_binary_and_a_copy_that_fails(pg) -> None:
    server, tokens = pg
    with connect(server, tokens, "writer", autocommit=True) as con, con.cursor() as cur:
        with cur.copy("COPY plain (i, f) FROM STDIN") as copy:
            for i in range(5000, 5100):
                copy.write_row((i, i / 4))
        with cur.copy("COPY plain (i, f) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "numeric"])
            copy.write_row((6000, Decimal("1.5")))
            copy.write_row((6001, None))
        # the client gives up midway (psycopg sends CopyFail): nothing of it is stored,
        # and the connection goes on
        with pytest.raises(RuntimeError), cur.copy("COPY plain (i, f) FROM STDIN") as copy:
            copy.write_row((7000, 1.0))
            raise RuntimeError("the client stops")
        assert cur.execute("SELECT 1").fetchone() == (1,)
    got = server.db.sql("SELECT count(*), sum(i) FROM plain WHERE i >= 5000").fetchone()
    assert got == (102, sum(range(5000, 5100)) + 6000 + 6001)
    assert server.db.sql("SELECT f FROM plain WHERE i = 6000").scalar() == Decimal("1.5")


def test_adbc_postgresql_driver_reads_every_value_as_the_database_gives_it(pg) -> None:
    """ADBC's PostgreSQL driver reads its type catalog as it connects, and every result
    through COPY ... TO STDOUT in the binary format."""
    import adbc_driver_postgresql.dbapi as adbc_pg
    import pyarrow as pa

    server, tokens = pg
    uri = f"postgresql://admin:{tokens['admin']}@127.0.0.1:{server.pg_port}/db"
    expected = server.db.sql("SELECT * FROM t ORDER BY id").fetchall()
    others = (
        "SELECT TIME '12:34:56.789' AS t, INTERVAL '1 month 1 day 2 hours' AS iv, "
        "INTERVAL '-14 months' AS back, TIMESTAMPTZ '2024-01-02 03:04:05+00' AS tstz, "
        "1::TINYINT AS ti, 3.5::FLOAT AS fl, [1.5, NULL]::DOUBLE[] AS dl, ['a', NULL] AS sl, "
        "NULL::INTEGER AS nothing"
    )
    with adbc_pg.connect(uri, autocommit=True) as con, con.cursor() as cur:
        cur.execute("SELECT * FROM t ORDER BY id")
        got = cur.fetch_arrow_table().to_pylist()
        assert len(got) == len(expected)
        for row, want in zip(got, expected, strict=True):
            for value, wanted in zip(row.values(), want, strict=True):
                if isinstance(wanted, Decimal):  # (ADBC gives numeric as its text)
                    wanted = str(wanted)
                assert same(value, wanted), (row, want)
        cur.execute(others)
        [row] = cur.fetch_arrow_table().to_pylist()
        [want] = server.db.sql(others).arrow().to_pylist()
        assert row == want
        assert row["iv"] == pa.MonthDayNano([1, 1, 7_200_000_000_000])  # (not 31 days)
        cur.execute("SELECT id FROM t WHERE id = $1 OR s = $2 ORDER BY id", [1, ""])
        assert cur.fetchall() == [(1,), (4,)]
        cur.executemany("INSERT INTO plain VALUES ($1, $2)", [[9000, 1.5], [9001, None]])
        stored = server.db.sql("SELECT i, f FROM plain WHERE i >= 9000 ORDER BY i").fetchall()
        assert stored == [(9000, Decimal("1.5")), (9001, None)]
    # ADBC's ingest: CREATE TABLE, then COPY ... FROM STDIN in the binary format
    loaded = pa.table(
        {
            "a": pa.array([1, None, 3], pa.int64()),
            "s": ["x", None, "tab\tnew\nline"],
            "ts": pa.array([dt.datetime(2020, 1, 2, 3, 4, 5), None, dt.datetime(1999, 12, 31)]),
            "f": [1.5, None, -2.0],
        }
    )
    with adbc_pg.connect(uri, autocommit=True) as con, con.cursor() as cur:
        assert cur.adbc_ingest("loaded", loaded, mode="create") == 3
        assert cur.adbc_ingest("loaded", loaded, mode="append") == 3
    stored = server.db.sql("SELECT a, s, ts, f FROM loaded").arrow().to_pylist()
    assert stored == loaded.to_pylist() * 2
    # a user without the admin right reads as over every protocol (autocommit: it has
    # no transactions)
    uri = f"postgresql://reader:{tokens['reader']}@127.0.0.1:{server.pg_port}/db"
    with adbc_pg.connect(uri, autocommit=True) as con, con.cursor() as cur:
        cur.execute("SELECT count(*) FROM plain WHERE i < 1000")  # (as published)
        assert cur.fetchone() == (1000,)
        with pytest.raises(adbc_pg.Error, match="write right"):
            cur.execute("DELETE FROM plain")


def test_a_writer_cannot_reach_files_extensions_or_settings_over_the_pg_protocol(
    pg, tmp_path: Path
) -> None:
    # (every attack on one served database: a server per attack cost a minute of CI)
    server, tokens = pg
    db = server.db
    before = sorted(db.tables())
    with connect(server, tokens, "writer", autocommit=True) as con:
        for attack in ATTACKS:
            text = attack.format(tmp=tmp_path)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute(text, prepare=False)
            assert con.execute("SELECT count(*) FROM plain").fetchone() == (1000,), text
    assert not list(tmp_path.glob("stolen*")) and not (tmp_path / "dump").exists()
    assert sorted(db.tables()) == before


def test_rights_are_those_of_the_http_api(pg) -> None:
    server, tokens = pg
    with connect(server, tokens, "reader", autocommit=True) as con:
        assert con.execute("SELECT sum(i) FROM plain").fetchone() == (499500,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="write right"):
            con.execute("DELETE FROM plain")
        # a non-admin's session runs no transaction: the default of psycopg needs
        # autocommit, and says so
    with connect(server, tokens, "reader") as con, pytest.raises(psycopg.errors.Error):
        con.execute("SELECT 1")
    with connect(server, tokens, "writer", autocommit=True) as con:
        assert con.execute("INSERT INTO plain VALUES (8000, 1)").statusmessage == "INSERT 0 1"
    assert server.db.sql("SELECT count(*) FROM plain").scalar() == 1001
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(
            host="127.0.0.1", port=server.pg_port, user="admin", password=tokens["reader"]
        )


def test_cancel_and_the_statement_time_limit_stop_a_statement(tmp_path: Path) -> None:
    # (served from a child process: libpq's cancel holds this process's GIL while it
    # waits for the server, which a server thread of this process would need)
    path = tmp_path / "db"
    tesseradb.connect(path).close()
    token = Users(path).add("admin", parse_rights(["admin"]))
    port = free_ports(1)[0]
    served = ServerProcess(path, 0, "--pg-port", str(port), "--statement-seconds", "20")
    slow = "SELECT count(*) FROM range(100000000000) a WHERE a % 7 = 3"
    try:
        with psycopg.connect(
            host="127.0.0.1", port=port, user="admin", password=token, autocommit=True
        ) as con:
            timer = threading.Timer(0.5, con.cancel)
            timer.start()
            started = time.monotonic()
            with pytest.raises(psycopg.errors.QueryCanceled):
                con.execute(slow)
            assert time.monotonic() - started < 10
            assert con.execute("SELECT 42").fetchone() == (42,)
            con.execute("SET statement_timeout = 300")
            assert con.execute("SHOW statement_timeout").fetchone() == ("300",)
            with pytest.raises(psycopg.errors.QueryCanceled, match="time limit"):
                con.execute(slow)
            assert con.execute("SELECT 43").fetchone() == (43,)
    finally:
        served.stop()


# --- the protocol by hand: broken, truncated and hostile bytes ------------------------
def message(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def startup(user: str, version: int = 196608) -> bytes:
    body = struct.pack("!i", version) + b"user\0" + user.encode() + b"\0database\0db\0\0"
    return struct.pack("!i", len(body) + 4) + body


def read_all(sock: socket.socket) -> bytes:
    """What the server sends until it is ready for a query, closes, or waits 5 s."""
    sock.settimeout(5)
    data = b""
    while not data.endswith((b"Z\x00\x00\x00\x05I", b"Z\x00\x00\x00\x05T")):
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    return data


def logged_in(server: ServerThread, token: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.pg_port), timeout=5)
    sock.sendall(startup("admin"))
    assert read_all_until(sock, b"R")[:1] == b"R"
    sock.sendall(message(b"p", token.encode() + b"\0"))
    read_all(sock)
    return sock


def read_all_until(sock: socket.socket, kind: bytes) -> bytes:
    sock.settimeout(5)
    data = sock.recv(65536)
    assert data.startswith(kind), data
    return data


BROKEN = [
    b"\x00\x00\x00\x03",  # a startup length below its own header
    b"\x7f\xff\xff\xff" + b"x" * 100,  # a startup packet of 2 GiB
    startup("admin", version=2 << 16),  # protocol 2
    startup("admin", version=4 << 16),
    b"\x00\x00\x00\x10\x00\x03\x00\x00user\0admin",  # parameters not NUL-ended
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # another protocol
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS hello without SSLRequest
    startup("admin")[:9],  # cut off
]


def test_broken_startups_are_refused_and_the_server_goes_on(pg) -> None:
    server, tokens = pg
    for data in BROKEN:
        with socket.create_connection(("127.0.0.1", server.pg_port), timeout=5) as sock:
            sock.sendall(data)
            with contextlib.suppress(OSError):  # (the server may have closed already)
                sock.shutdown(socket.SHUT_WR)
            answer = read_all(sock)
        assert answer == b"" or answer[:1] in (b"E", b"R"), (data, answer)
        with connect(server, tokens, autocommit=True) as con:
            assert con.execute("SELECT count(*) FROM plain").fetchone() == (1000,)


AFTER_LOGIN = [
    message(b"Q", b"SELECT 1"),  # no NUL at the end of the text
    message(b"P", b"s\0SELECT $1\0\x00\x05"),  # 5 parameter types announced, none given
    message(b"B", b"\0nosuch\0\x00\x00\x00\x00\x00\x00"),  # an unknown statement
    message(b"B", b"\0\0\x00\x01\x00\x07"),  # a format code of 7
    message(b"Z", b""),  # a message only the server sends
    message(b"E", b"\0\x00\x00\x00\x00"),  # an unknown portal
    b"Q\x7f\xff\xff\xff",  # a query of 2 GiB announced
    b"Q\x00\x00\x00\x02",  # a length below its own size
    message(b"D", b"X"),  # Describe of neither S nor P
    message(b"Q", b"\xff\xfe\0"),  # not UTF-8
]


def test_broken_messages_get_an_error_and_change_nothing(pg) -> None:
    server, tokens = pg
    for data in AFTER_LOGIN:
        sock = logged_in(server, tokens["admin"])
        try:
            sock.sendall(data + message(b"S", b""))
            answer = read_all(sock)
            assert b"E" in answer[:1] or answer == b"", (data, answer)
        finally:
            sock.close()
        with connect(server, tokens, autocommit=True) as con:
            assert con.execute("SELECT count(*) FROM plain").fetchone() == (1000,)


def test_a_portal_hands_its_rows_over_in_parts_and_a_client_may_leave_mid_result(pg) -> None:
    server, tokens = pg
    sock = logged_in(server, tokens["admin"])
    sock.sendall(
        message(b"P", b"\0SELECT i FROM plain ORDER BY i\0\x00\x00")
        + message(b"B", b"\0\0\x00\x00\x00\x00\x00\x00")
        + message(b"E", b"\0" + struct.pack("!i", 3))
        + message(b"E", b"\0" + struct.pack("!i", 2))
        + message(b"S", b"")
    )
    answer = read_all(sock)
    rows = [answer[i + 11 : i + 11 + answer[i + 10]] for i in _positions(answer, b"D")]
    assert rows == [b"0", b"1", b"2", b"3", b"4"]
    assert answer.count(b"s\x00\x00\x00\x04") == 2  # suspended twice, never complete
    # a cancel request with the wrong secret key is ignored
    with socket.create_connection(("127.0.0.1", server.pg_port), timeout=5) as other:
        other.sendall(struct.pack("!iiii", 16, 80877102, 1, 2))
        assert other.recv(10) == b""
    sock.sendall(message(b"Q", b"SELECT * FROM plain\0"))  # and leave mid-result
    sock.close()
    with connect(server, tokens, autocommit=True) as con:
        assert con.execute("SELECT count(*) FROM plain").fetchone() == (1000,)


def _positions(data: bytes, kind: bytes) -> list[int]:
    """Where the messages of ``kind`` start in a stream of backend messages."""
    found, at = [], 0
    while at + 5 <= len(data):
        size = struct.unpack("!i", data[at + 1 : at + 5])[0]
        if data[at : at + 1] == kind:
            found.append(at)
        at += 1 + size
    return found


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_tls_and_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE kept (i INTEGER)")
    token = Users(path).add("u", parse_rights(["admin"]))
    pg_port = free_ports(1)[0]
    served = ServerProcess(
        path, 0, "--pg-port", str(pg_port), "--certfile", str(cert), "--keyfile", str(key)
    )
    try:
        args = {"host": "127.0.0.1", "port": pg_port, "user": "u", "password": token}
        with psycopg.connect(**args, sslmode="require", autocommit=True) as con:
            assert con.pgconn.ssl_in_use
            for i in range(20):
                con.execute("INSERT INTO kept VALUES (%s)", [i])
            with con.cursor().copy("COPY kept FROM STDIN") as copy:  # (a load, acknowledged)
                for i in range(20, 1000):
                    copy.write_row((i,))
        served.kill()
    finally:
        served.stop()
    with tesseradb.connect(path) as db:
        assert db.sql("SELECT list(i ORDER BY i) FROM kept").scalar() == list(range(1000))


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # (a thread that has just ended)
            found += [int(t) for t in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_workers_answer_queries_and_hand_writes_to_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE points AS SELECT range AS i, range * 0.5 AS f FROM range(10000)")
        db.sql("CREATE TABLE kept (c INTEGER, s INTEGER)")
    users = Users(path)
    writer_token = users.add("w", parse_rights(["write"]))
    admin_token = users.add("a", parse_rights(["admin"]))
    port = free_ports(1)[0]
    served = ServerProcess(path, 0, "--pg-port", str(port), "--workers", "2")
    args = {"host": "127.0.0.1", "port": port, "connect_timeout": 10}
    try:
        deadline = time.monotonic() + 60
        while len(_children(served.process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = _children(served.process.pid)
        assert len(workers) == 2
        seen: set[int] = set()
        while len(seen) < 2 and time.monotonic() < deadline:  # (until a worker listens)
            with psycopg.connect(**args, user="w", password=writer_token) as probe:
                seen.add(probe.info.backend_pid >> 24)
        clients = [
            psycopg.connect(**args, user="w", password=writer_token, autocommit=True)
            for _ in range(16)
        ]
        # the kernel spreads the connections over the processes (the number is in the key)
        assert len({c.info.backend_pid >> 24 for c in clients}) >= 2
        acknowledged = []
        for n, con in enumerate(clients):
            assert con.execute("SELECT f FROM points WHERE i = %s", [n]).fetchone() == (n / 2,)
            con.execute("INSERT INTO kept VALUES (%s, 1)", [n])
            acknowledged.append((n, 1))
            # (the client is the writer's now: it reads its own write)
            assert con.execute("SELECT count(*) FROM kept WHERE c = %s", [n]).fetchone() == (1,)
        with psycopg.connect(**args, user="a", password=admin_token) as admin:
            admin.execute("INSERT INTO kept VALUES (100, 1)")
            admin.rollback()  # (a transaction through a worker is the writer's)
            admin.execute("INSERT INTO kept VALUES (101, 1)")
            admin.commit()
            acknowledged.append((101, 1))
        # a cancel request reaches the process of the statement, whichever gets it
        with psycopg.connect(**args, user="a", password=admin_token, autocommit=True) as con:
            timer = threading.Timer(0.5, con.cancel)
            timer.start()
            with pytest.raises(psycopg.errors.QueryCanceled):
                con.execute("SELECT count(*) FROM range(100000000000) a WHERE a % 7 = 3")
        # a worker killed: restarted, and the others go on
        os.kill(workers[0], 9)
        deadline = time.monotonic() + 60
        while workers[0] in _children(served.process.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        for con in clients:
            with contextlib.suppress(psycopg.OperationalError):
                con.close()
        with psycopg.connect(**args, user="w", password=writer_token, autocommit=True) as con:
            con.execute("INSERT INTO kept VALUES (200, 1)")
            acknowledged.append((200, 1))
        # the writer killed: its workers end too, and every acknowledged write is kept
        survivors = _children(served.process.pid)
        served.kill()
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in survivors) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in survivors)
    finally:
        served.stop()
    with tesseradb.connect(path) as db:
        assert sorted(db.sql("SELECT * FROM kept").fetchall()) == sorted(acknowledged)


def test_a_storage_error_is_reported_and_the_connection_goes_on(
    pg, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged store's error is an OSError too: it is the statement's error, sent to
    the client, not a broken connection."""
    from tesseradb.errors import TableStoreError
    from tesseradb.sql.front import Session

    server, tokens = pg
    real = Session.sql

    def damaged(self: Session, text: str, *args: object, **kwargs: object) -> object:
        if "damaged" in text:
            raise TableStoreError("table 'damaged' cannot be read (test)")
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Session, "sql", damaged)
    with connect(server, tokens, autocommit=True) as con:
        with pytest.raises(psycopg.errors.Error, match="cannot be read"):
            con.execute("SELECT 'damaged'")
        assert con.execute("SELECT 1").fetchone() == (1,)
