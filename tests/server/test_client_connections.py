"""The remote client's SQL connections: kept alive between statements, one per thread,
replaced when the server closed them, and over TLS."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

import tesseradb
from tesseradb.server import ServerProcess, Users, parse_rights
from tests.server.conftest import Served, self_signed


def test_statements_share_one_kept_alive_connection(served: Served, tokens: dict[str, str]) -> None:
    with tesseradb.connect(served.url, token=tokens["reader"]) as remote:
        for i in range(20):
            assert remote.sql("SELECT f FROM plain WHERE i = ?", [i]).scalar() == i * 0.5
        # a failed statement's answer is read whole: the connection stays good
        with pytest.raises(tesseradb.TesseraError):
            remote.sql("SELECT nosuch FROM plain")
        assert remote.sql("SELECT count(*) FROM plain").scalar() == 1000
        assert len(remote._sql._all) == 1


def test_threads_each_use_a_connection_of_their_own(served: Served, tokens: dict[str, str]) -> None:
    answers: dict[int, list[float]] = {}
    with tesseradb.connect(served.url, token=tokens["reader"]) as remote:
        # (every thread stays alive until all four have their connection: one that ended
        # early would have its connection closed by the next one to make its own)
        all_connected = threading.Barrier(4, timeout=60)

        def run(t: int) -> None:
            answers[t] = [remote.sql("SELECT f FROM plain WHERE i = ?", [t * 100]).scalar()]
            all_connected.wait()
            answers[t] += [
                remote.sql("SELECT f FROM plain WHERE i = ?", [t * 100 + k]).scalar()
                for k in range(1, 25)
            ]

        threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == {t: [(t * 100 + k) * 0.5 for k in range(25)] for t in range(4)}
        assert len(remote._sql._all) == 4
        # the ended threads' connections are closed once this thread makes its own
        assert remote.sql("SELECT 1").scalar() == 1
        assert list(remote._sql._all.values()) == [threading.current_thread()]


def test_a_connection_the_server_closed_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t AS SELECT 7 AS v")
    token = Users(path).add("u", parse_rights(["write"]))
    first = ServerProcess(path)
    try:
        remote = tesseradb.connect(first.url, token=token)
        assert remote.sql("SELECT v FROM t").scalar() == 7
    finally:
        first.stop()
    # the same port, a new server: the kept connection is dead, and the write lands once
    second = ServerProcess(path, first.port)
    try:
        remote.sql("INSERT INTO t VALUES (8)")
        assert remote.sql("SELECT list(v ORDER BY v) FROM t").scalar() == [7, 8]
        remote.close()
    finally:
        second.stop()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_the_remote_client_speaks_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = self_signed(tmp_path)
    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t AS SELECT range AS v FROM range(100000)")
    token = Users(path).add("u", parse_rights(["read"]))
    served = ServerProcess(path, 0, "--certfile", str(cert), "--keyfile", str(key))
    try:
        url = served.url
        assert url.startswith("https://")
        # a certificate no authority signed is refused, naming the server
        with pytest.raises(tesseradb.TesseraError, match=r"127\.0\.0\.1"):
            tesseradb.connect(url, token=token)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trusted: the statement runs
        with tesseradb.connect(url, token=token) as remote:
            assert remote.sql("SELECT sum(v) FROM t").scalar() == sum(range(100000))
            assert remote.sql("SELECT v FROM t").arrow().num_rows == 100000
    finally:
        served.stop()


def test_a_server_error_that_is_also_an_oserror_keeps_its_class(tmp_path: Path) -> None:
    """TableStoreError is a TesseraError and an OSError: the client's handling of its own
    connection's OSErrors must not turn the server's error into a ServerError."""
    import duckdb

    from tesseradb.errors import TableStoreError

    path = tmp_path / "db"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t AS SELECT 1 AS x")
        db.sql("CREATE TABLE kept AS SELECT 2 AS y")
    store = duckdb.connect(str(path / "tables.duckdb"))
    store.execute("DROP TABLE t")  # the catalog still lists it
    store.close()
    token = Users(path).add("u", parse_rights(["read"]))
    with (
        tesseradb.connect(path) as db,
        Served(db) as served,
        tesseradb.connect(served.url, token=token) as remote,
    ):
        with pytest.raises(TableStoreError, match="in the catalog but not in the table store"):
            remote.sql("SELECT * FROM t")
        assert remote.sql("SELECT y FROM kept").scalar() == 2
        assert len(remote._sql._all) == 1  # the error's answer was read whole
