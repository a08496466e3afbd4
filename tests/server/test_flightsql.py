"""Arrow Flight SQL (``tessera serve --flight-port``) with a real client, ADBC's Flight SQL
driver: Arrow answers equal the database's own, writes are kept once acknowledged,
rights and the guard hold, the catalog calls list every kind, and broken commands get
an error while the server keeps serving."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest

import tesseradb
from tesseradb.server import ServerProcess, ServerThread, Users, free_ports, parse_rights
from tesseradb.server._flightproto import Proto, pack_any

from .conftest import self_signed
from .test_rights import ATTACKS


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerThread, dict[str, str]]]:
    db = tesseradb.connect(tmp_path / "db")
    db.sql(
        "CREATE TABLE t AS SELECT range AS i, range * 0.5 AS f, 'n' || range AS s, "
        "range % 3 = 0 AS b, DATE '2024-01-01' + range::INTEGER AS d, "
        "CASE WHEN range % 5 = 0 THEN NULL ELSE range END AS maybe FROM range(10000)"
    )
    db.sql("CREATE TABLE plain AS SELECT range AS i FROM range(1000)")
    img = db.create_array("img", [{"name": "y", "end": 8, "chunk": 4}], {"v": "float32"})
    img[0:8] = {"v": np.arange(8, dtype="f4")}
    db.create_collection("docs").insert_many([{"k": i} for i in range(5)])
    users = Users(db.path)
    tokens = {
        "admin": users.add("admin", parse_rights(["admin"])),
        "reader": users.add("reader", parse_rights(["read"])),
        "writer": users.add("writer", parse_rights(["write"])),
        "arrays": users.add("arrays", parse_rights(["none", "array=read"])),
    }
    server = ServerThread(db, port=0, flight_port=0, statement_seconds=5.0)
    yield server, tokens
    server.stop()
    db.close()


def connect(server: ServerThread, token: str, autocommit: bool = True) -> flight_sql.Connection:
    return flight_sql.connect(
        f"grpc://127.0.0.1:{server.flight_port}",
        db_kwargs={"adbc.flight.sql.authorization_header": f"Bearer {token}"},
        autocommit=autocommit,
    )


def test_answers_are_the_databases_own_arrow(served) -> None:
    server, tokens = served
    query = "SELECT * FROM t WHERE i % 7 = 1 ORDER BY i"
    with connect(server, tokens["admin"]) as con, con.cursor() as cur:
        cur.execute(query)
        got = cur.fetch_arrow_table()
        cur.execute("SELECT v FROM img ORDER BY y")
        cells = cur.fetch_arrow_table()
        cur.execute("SELECT f, s FROM t WHERE i = ? OR s = ?", [42, "n7"])
        picked = cur.fetchall()
    assert got.equals(server.db.sql(query).arrow())
    assert cells.column("v").to_pylist() == list(range(8))
    assert sorted(picked) == [(3.5, "n7"), (21.0, "n42")]


def test_writes_are_acknowledged_once_kept_and_rights_hold(served) -> None:
    server, tokens = served
    db = server.db
    with connect(server, tokens["writer"]) as con, con.cursor() as cur:
        cur.executemany("INSERT INTO plain VALUES (?)", [[5000], [5001], [5002]])
        assert cur.rowcount == 3
        cur.execute("INSERT INTO plain VALUES (6000)")
        assert db.sql("SELECT count(*) FROM plain WHERE i >= 5000").scalar() == 4
    with connect(server, tokens["reader"]) as con, con.cursor() as cur:
        # (a restricted reader reads the newest published snapshot: another client's
        # writes reach it once the writer publishes, within its period)
        deadline = time.monotonic() + 30
        while True:
            cur.execute("SELECT count(*) FROM plain")
            seen = cur.fetchone()
            if seen == (1004,) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert seen == (1004,)
        with pytest.raises(adbc_driver_manager.ProgrammingError, match="write right"):
            cur.execute("DELETE FROM plain")
    with connect(server, tokens["arrays"]) as con, con.cursor() as cur:
        cur.execute("SELECT count(*) FROM img")
        assert cur.fetchone() == (8,)
        with pytest.raises(adbc_driver_manager.ProgrammingError, match="read right"):
            cur.execute("SELECT count(*) FROM plain")
    assert db.sql("SELECT count(*) FROM plain").scalar() == 1004


def test_transactions_commit_roll_back_and_stay_apart(
    served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADBC's connections are DB-API's (autocommit off): its statements run in a Flight
    SQL transaction, kept by commit() and undone by rollback(), unseen by others
    until committed."""
    import warnings

    server, tokens = served
    db = server.db

    def count() -> int:
        return int(db.sql("SELECT count(*) FROM plain WHERE i >= 5000").scalar())

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (ADBC warns when it cannot turn autocommit off)
        con = connect(server, tokens["admin"], autocommit=False)
    with con, con.cursor() as cur, connect(server, tokens["admin"]) as other:
        cur.execute("INSERT INTO plain VALUES (5000)")
        cur.executemany("INSERT INTO plain VALUES (?)", [[5001], [5002]])
        cur.execute("SELECT count(*) FROM plain WHERE i >= 5000")
        assert cur.fetchone() == (3,)  # (its own writes)
        with other.cursor() as seen:
            seen.execute("SELECT count(*) FROM plain WHERE i >= 5000")
            assert seen.fetchone() == (0,)  # (not another's, uncommitted)
        assert count() == 0
        con.rollback()
        assert count() == 0
        cur.execute("INSERT INTO plain VALUES (5003)")
        con.commit()
        assert count() == 1
        cur.execute("DELETE FROM plain WHERE i = 5003")
        with pytest.raises(adbc_driver_manager.Error, match="EndTransaction"):
            cur.execute("COMMIT")  # (ended by the action only)
        cur.execute("SELECT 1")
        con.rollback()
        assert count() == 1
        # a failed statement leaves the transaction to be rolled back, as in DuckDB
        with pytest.raises(adbc_driver_manager.Error):
            cur.execute("INSERT INTO plain VALUES ('not a number')")
        con.rollback()
        cur.execute("SELECT count(*) FROM plain WHERE i >= 5000")
        assert cur.fetchone() == (1,)
    assert not server.flight.transactions  # (its CloseSession at close ended the last one)

    # a transaction is its user's, and one left idle is rolled back
    client = flight.FlightClient(f"grpc://127.0.0.1:{server.flight_port}")

    def options(user: str) -> flight.FlightCallOptions:
        return flight.FlightCallOptions(
            headers=[(b"authorization", f"Bearer {tokens[user]}".encode())]
        )

    def action(kind: str, body: bytes, user: str = "admin") -> list[bytes]:
        results = client.do_action(flight.Action(kind, body), options(user))
        return [r.body.to_pybytes() for r in results]

    [begun] = action("BeginTransaction", pack_any("ActionBeginTransactionRequest", b""))
    handle = Proto.parse(Proto.parse(begun).blob(2)).blob(1)
    end = pack_any("ActionEndTransactionRequest", Proto.encode((1, handle), (2, 1)))
    with pytest.raises(flight.FlightError, match="no such transaction"):
        action("EndTransaction", end, user="writer")  # (another user's)
    with pytest.raises(flight.FlightError, match="action is 7"):
        action(
            "EndTransaction",
            pack_any("ActionEndTransactionRequest", Proto.encode((1, handle), (2, 7))),
        )
    update = pack_any(
        "CommandStatementUpdate", Proto.encode((1, "INSERT INTO plain VALUES (5004)"), (2, handle))
    )
    writer, reader = client.do_put(
        flight.FlightDescriptor.for_command(update), pa.schema([]), options("admin")
    )
    writer.done_writing()
    reader.read()
    writer.close()
    import tesseradb.server._flightsql as flightsql

    monkeypatch.setattr(flightsql, "TRANSACTION_SECONDS", 0.0)
    action("BeginTransaction", pack_any("ActionBeginTransactionRequest", b""))  # (sweeps)
    with pytest.raises(flight.FlightError, match="no such transaction"):
        action("EndTransaction", end)
    assert count() == 1  # (the idle one's insert was rolled back)
    # a user without the admin right has no transactions (a restricted session reads
    # the published snapshot): GetSqlInfo says so, and ADBC stays in autocommit
    with pytest.raises(flight.FlightUnauthorizedError, match="no transactions"):
        action("BeginTransaction", pack_any("ActionBeginTransactionRequest", b""), "writer")
    with pytest.warns(Warning, match="autocommit"):
        con = connect(server, tokens["writer"], autocommit=False)
    with con, con.cursor() as cur:
        cur.execute("INSERT INTO plain VALUES (5005)")
    assert count() == 2
    client.close()


def test_a_writer_cannot_reach_files_extensions_or_settings_over_flight_sql(
    served, tmp_path: Path
) -> None:
    # (every attack on one served database: a server per attack cost CI half a minute)
    server, tokens = served
    before = sorted(server.db.tables())
    with connect(server, tokens["writer"]) as con, con.cursor() as cur:
        for attack in ATTACKS:
            refused = pytest.raises(adbc_driver_manager.ProgrammingError, match="UNAUTHORIZED")
            with refused:
                cur.execute(attack.format(tmp=tmp_path))
    assert not list(tmp_path.glob("stolen*")) and not (tmp_path / "dump").exists()
    assert sorted(server.db.tables()) == before


def test_credentials_are_checked(served) -> None:
    server, tokens = served
    uri = f"grpc://127.0.0.1:{server.flight_port}"
    with (
        flight_sql.connect(
            uri, db_kwargs={"username": "reader", "password": tokens["reader"]}
        ) as con,
        con.cursor() as cur,
    ):
        cur.execute("SELECT count(*) FROM plain")
        assert cur.fetchone() == (1000,)
    for kwargs in (
        {"username": "admin", "password": tokens["reader"]},  # another user's token
        {"username": "reader", "password": "tdb_wrong"},
        {"adbc.flight.sql.authorization_header": "Bearer nope"},
    ):
        refused = pytest.raises(adbc_driver_manager.Error, match=r"UNAUTHENTICATED|credentials")
        with refused, flight_sql.connect(uri, db_kwargs=kwargs) as con, con.cursor() as cur:
            cur.execute("SELECT 1")


def test_the_catalog_lists_every_kind_the_user_may_read(served) -> None:
    server, tokens = served
    with connect(server, tokens["admin"]) as con:
        objects = con.adbc_get_objects(depth="tables").read_all().to_pylist()
        listed = {
            (t["table_name"], t["table_type"])
            for c in objects
            for s in c["catalog_db_schemas"] or []
            for t in s["db_schema_tables"] or []
        }
        assert {("t", "BASE TABLE"), ("plain", "BASE TABLE"), ("img", "ARRAY")} <= listed
        assert ("docs", "COLLECTION") in listed
        schema = con.adbc_get_table_schema(
            "t", catalog_filter="tessera_store", db_schema_filter="main"
        )
        assert schema.names == ["i", "f", "s", "b", "d", "maybe"]
        assert "BASE TABLE" in con.adbc_get_table_types()
        assert con.adbc_get_info()["vendor_name"] == "TesseraDB"
    with connect(server, tokens["arrays"]) as con:
        objects = con.adbc_get_objects(depth="tables").read_all().to_pylist()
        names = {
            t["table_name"]
            for c in objects
            for s in c["catalog_db_schemas"] or []
            for t in s["db_schema_tables"] or []
        }
        assert names == {"img"}


def test_broken_commands_get_an_error_and_change_nothing(served) -> None:
    server, tokens = served
    client = flight.FlightClient(f"grpc://127.0.0.1:{server.flight_port}")
    options = flight.FlightCallOptions(
        headers=[(b"authorization", f"Bearer {tokens['admin']}".encode())]
    )
    broken = [
        b"",  # nothing
        b"\xff\xff\xff",  # not a protobuf message
        b"\x0a\x80",  # a field cut off
        pack_any("CommandNobodyKnows", b""),
        pack_any("CommandStatementQuery", Proto.encode((1, "SELEC nonsense"))),
        pack_any("CommandPreparedStatementQuery", Proto.encode((1, b"no-such-handle"))),
    ]
    for command in broken:
        with pytest.raises(flight.FlightError):
            client.get_flight_info(flight.FlightDescriptor.for_command(command), options)
    for ticket in (b"", b"junk", pack_any("TicketStatementQuery", Proto.encode((1, b"x" * 16)))):
        with pytest.raises(flight.FlightError):
            client.do_get(flight.Ticket(ticket), options).read_all()
    # a result is fetched by the user it was made for only, and only once
    info = client.get_flight_info(
        flight.FlightDescriptor.for_command(
            pack_any("CommandStatementQuery", Proto.encode((1, "SELECT 42 AS x")))
        ),
        options,
    )
    other = flight.FlightCallOptions(
        headers=[(b"authorization", f"Bearer {tokens['reader']}".encode())]
    )
    with pytest.raises(flight.FlightError):
        client.do_get(info.endpoints[0].ticket, other).read_all()
    assert client.do_get(info.endpoints[0].ticket, options).read_all().to_pylist() == [{"x": 42}]
    with pytest.raises(flight.FlightError):
        client.do_get(info.endpoints[0].ticket, options).read_all()
    with pytest.raises(flight.FlightUnauthenticatedError):
        client.get_flight_info(flight.FlightDescriptor.for_command(broken[4]))
    client.close()
    assert server.db.sql("SELECT count(*) FROM plain").scalar() == 1000
    with connect(server, tokens["admin"]) as con, con.cursor() as cur:
        cur.execute("SELECT count(*) FROM t")
        assert cur.fetchone() == (10000,)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_tls_and_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE kept (i INTEGER)")
    token = Users(path).add("u", parse_rights(["admin"]))
    [port] = free_ports(1)
    served = ServerProcess(
        path, 0, "--flight-port", str(port), "--certfile", str(cert), "--keyfile", str(key)
    )

    def connect_tls(autocommit: bool) -> flight_sql.Connection:
        return flight_sql.connect(
            f"grpc+tls://127.0.0.1:{port}",
            db_kwargs={
                "adbc.flight.sql.authorization_header": f"Bearer {token}",
                "adbc.flight.sql.client_option.tls_root_certs": cert.read_text(),
            },
            autocommit=autocommit,
        )

    try:
        with connect_tls(True) as con, con.cursor() as cur:
            for i in range(20):
                cur.execute("INSERT INTO kept VALUES (?)", [i])
        # a committed transaction is acknowledged; one left open when the server dies is not
        pending = connect_tls(False)
        with connect_tls(False) as con, con.cursor() as cur:
            cur.executemany("INSERT INTO kept VALUES (?)", [[i] for i in range(20, 40)])
            con.commit()
        with pending.cursor() as cur:
            cur.execute("INSERT INTO kept VALUES (1000)")
        served.kill()
    finally:
        served.stop()
    with contextlib.suppress(Exception):  # (its server is gone)
        pending.close()
    with tesseradb.connect(path) as db:
        assert db.sql("SELECT list(i ORDER BY i) FROM kept").scalar() == list(range(40))


def test_a_large_answer_streams_and_a_client_that_leaves_stops_it(
    served, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from tesseradb.server import _flightsql

    server, tokens = served
    query = "SELECT range AS a, range * 2 AS b FROM range(3000000)"  # 48 MB: streamed
    with connect(server, tokens["admin"]) as con, con.cursor() as cur:
        cur.execute(query)
        got = cur.fetch_arrow_table()
    assert got.num_rows == 3_000_000
    assert got.equals(server.db.sql(query).arrow())
    client = flight.FlightClient(f"grpc://127.0.0.1:{server.flight_port}")
    options = flight.FlightCallOptions(
        headers=[(b"authorization", f"Bearer {tokens['admin']}".encode())]
    )
    command = pack_any("CommandStatementQuery", Proto.encode((1, query)))
    # a client that reads one batch and leaves: the statement stops
    info = client.get_flight_info(flight.FlightDescriptor.for_command(command), options)
    reader = client.do_get(info.endpoints[0].ticket, options)
    assert reader.read_chunk().data.num_rows > 0
    reader.cancel()
    # a client that never fetches: the statement stops after CLAIM_SECONDS
    monkeypatch.setattr(_flightsql, "CLAIM_SECONDS", 0.5)
    client.get_flight_info(flight.FlightDescriptor.for_command(command), options)
    deadline = time.monotonic() + 20
    while server.flight.server.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.flight.server.running
    client.close()
    with connect(server, tokens["admin"]) as con, con.cursor() as cur:
        cur.execute("SELECT count(*) FROM plain")
        assert cur.fetchone() == (1000,)
