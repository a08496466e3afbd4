"""Serving a database: ``tessera serve``, its HTTP API and console, users, the remote client.

``serve(path)`` runs the ASGI application (:func:`make_app`, Starlette on
uvicorn) over the database at ``path``, which the server process opens as its
single writer. :class:`Users` keeps who may do what (``tessera user``), and
:class:`RemoteDatabase` is what ``tesseradb.connect("http://host:port",
token=...)`` returns. docs/server.md describes the API, the rights and the
console.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from tesseradb.server._client import RemoteArray, RemoteCollection, RemoteDatabase, RemoteStream
from tesseradb.server._users import LEVELS, User, UserError, Users, parse_rights
from tesseradb.server._workers import free_ports

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from tesseradb.database import Database
    from tesseradb.server._app import ServerOptions

__all__ = [
    "LEVELS",
    "RemoteArray",
    "RemoteCollection",
    "RemoteDatabase",
    "RemoteStream",
    "ServerOptions",
    "ServerProcess",
    "ServerThread",
    "User",
    "UserError",
    "Users",
    "free_ports",
    "make_app",
    "parse_rights",
    "serve",
]


def make_app(db: Database, options: ServerOptions | None = None) -> Starlette:
    """The ASGI application serving ``db`` (see :mod:`tesseradb.server._app`)."""
    from tesseradb.server._app import make_app as make

    return make(db, options)


def __getattr__(name: str) -> Any:
    if name == "ServerOptions":
        from tesseradb.server._app import ServerOptions

        return ServerOptions
    raise AttributeError(name)


def _uvicorn(app: Any, host: str, port: int, **options: Any) -> Any:
    """A uvicorn server for ``app``: warnings only, no access log (it would log paths, never
    tokens, but the console polls)."""
    import uvicorn

    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, **options
    )
    return uvicorn.Server(config)


def _pg_listener(
    app: Any,
    host: str,
    port: int,
    certfile: str | None = None,
    keyfile: str | None = None,
    processes: Any = None,
) -> Any:
    """The PostgreSQL-protocol listener beside the HTTP app, sharing its server state
    (users, rights, running statements), started."""
    from tesseradb.errors import ServerError
    from tesseradb.server._pgserver import PgServer

    try:
        return PgServer(app.state.server, host, port, certfile, keyfile, processes).start()
    except OSError as err:
        raise ServerError(f"cannot serve the PostgreSQL protocol on {host}:{port}: {err}") from None


def _flight_listener(
    app: Any, host: str, port: int, certfile: str | None = None, keyfile: str | None = None
) -> Any:
    """The Arrow Flight SQL listener beside the HTTP app, sharing its server state, started."""
    import pyarrow as pa

    from tesseradb.errors import ServerError
    from tesseradb.server._flightsql import FlightSQLServer

    try:
        return FlightSQLServer(app.state.server, host, port, certfile, keyfile).start()
    except (OSError, pa.ArrowException) as err:
        raise ServerError(f"cannot serve Arrow Flight SQL on {host}:{port}: {err}") from None


class ServerThread:
    """An open database served from a thread of this process (a notebook, a test):
    ``with ServerThread(db, port=0) as server: ... server.url ...``; ``port=0`` picks a
    free port. ``options`` are :class:`ServerOptions` fields; ``pg_port`` (0 picks one)
    also serves the PostgreSQL wire protocol, on ``server.pg_port``, and ``flight_port``
    Arrow Flight SQL, on ``server.flight_port``."""

    def __init__(
        self, db: Database, host: str = "127.0.0.1", port: int = 0, **options: Any
    ) -> None:
        import threading
        import time

        from tesseradb.errors import ServerError
        from tesseradb.server._app import ServerOptions

        self.db = db
        pg_port = options.pop("pg_port", None)
        flight_port = options.pop("flight_port", None)
        app = make_app(db, ServerOptions(**options))
        self.server = _uvicorn(app, host, port)
        self.pg = None if pg_port is None else _pg_listener(app, host, pg_port)
        self.pg_port = None if self.pg is None else self.pg.port
        self.flight = None if flight_port is None else _flight_listener(app, host, flight_port)
        self.flight_port = None if self.flight is None else self.flight.port
        self.thread = threading.Thread(target=self.server.run, name="tessera-serve", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise ServerError(f"the server on {host}:{port} did not start")
            time.sleep(0.01)
        bound = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{host}:{bound}"

    def stop(self) -> None:
        """Stop serving (the database stays open)."""
        if self.pg is not None:
            self.pg.stop()
        if self.flight is not None:
            self.flight.stop()
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *args: object) -> None:
        self.stop()


class ServerProcess:
    """``tessera serve`` in a child process, once it answers (benchmarks, load tests): its
    ``url``; ``stop()`` ends it cleanly, ``kill()`` with SIGKILL. ``port=0`` picks a free
    port; ``args`` are more ``tessera serve`` options."""

    def __init__(self, path: str | os.PathLike[str], port: int = 0, *args: str) -> None:
        import socket
        import subprocess
        import sys
        import tempfile
        import time
        from pathlib import Path

        import httpx

        from tesseradb.errors import ServerError

        if port == 0:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = int(probe.getsockname()[1])
        self.port = port
        scheme = "https" if "--certfile" in args else "http"
        self.url = f"{scheme}://127.0.0.1:{port}"
        tessera = Path(sys.executable).with_name("tessera")
        # what it logs goes to a file, read at the end: a pipe nobody drains could fill
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (it lives as long as the child; stop() closes it)
        self.process = subprocess.Popen(
            [str(tessera), "serve", os.fspath(path), "--port", str(port), *args],
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                # (its own child on loopback: whether it answers, not who it is)
                probe = httpx.get(self.url + "/health", timeout=1, verify=False)
                if probe.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.process.kill()
        self.process.wait()
        raise ServerError(f"tessera serve {os.fspath(path)} did not start: {self._logged()[-500:]}")

    def _logged(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no clean shutdown (what a crash does)."""
        self.process.kill()
        self.process.wait()

    def stop(self) -> str:
        """End it with SIGTERM (SIGKILL after 30 s); returns what it wrote to stderr."""
        import subprocess

        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log.closed:
            return ""
        logged = self._logged()
        self._log.close()
        return logged


def serve(
    path: str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    read_only: bool = False,
    certfile: str | None = None,
    keyfile: str | None = None,
    statement_seconds: float = 300.0,
    pg_port: int | None = None,
    flight_port: int | None = None,
    workers: int = 0,
    ready: Any = None,
) -> None:
    """Serve the database at ``path`` until interrupted (then close it cleanly).

    ``pg_port`` also serves the PostgreSQL wire protocol there (psql, psycopg, JDBC),
    and ``flight_port`` Arrow Flight SQL (ADBC), both with TLS from the same certificate.
    ``workers`` more processes answer PostgreSQL clients' queries beside this one
    (:mod:`tesseradb.server._workers`). ``ready`` (a callable) is told the URL once the
    server listens.
    """
    import threading
    import time

    from tesseradb import connect
    from tesseradb.errors import InvalidArgumentError
    from tesseradb.server._app import ServerOptions

    if (certfile is None) != (keyfile is None):
        raise InvalidArgumentError("serve: TLS needs both certfile and keyfile")
    ports = (("port", port), ("pg_port", pg_port or 0), ("flight_port", flight_port or 0))
    for name, given in ports:
        if isinstance(given, bool) or not isinstance(given, int) or not 0 <= given <= 65535:
            # (an out-of-range port would be taken modulo 65536 by the socket call)
            raise InvalidArgumentError(f"serve: {name} is 0 to 65535, not {given!r}")
    if not isinstance(statement_seconds, (int, float)) or not 0 < statement_seconds < float("inf"):
        raise InvalidArgumentError(
            f"serve: statement_seconds is a positive number, not {statement_seconds!r}"
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or not 0 <= workers <= 64:
        raise InvalidArgumentError(f"serve: workers is 0 to 64, not {workers!r}")
    if workers and pg_port is None:
        raise InvalidArgumentError("serve: workers answer PostgreSQL clients: give pg_port too")
    db = connect(path, read_only=read_only)
    try:
        app = make_app(db, ServerOptions(read_only=read_only, statement_seconds=statement_seconds))
        server = _uvicorn(
            app,
            host,
            port,
            ssl_certfile=certfile,
            ssl_keyfile=keyfile,
            timeout_graceful_shutdown=5,
        )
        pg = processes = pool = None
        if workers:
            from tesseradb.server._pgserver import Processes

            processes = Processes(free_ports(workers + 1), 0)
        if pg_port is not None:
            pg = _pg_listener(app, host, pg_port, certfile, keyfile, processes)
        if processes is not None:
            from tesseradb.server._workers import Workers

            assert pg is not None
            pool = Workers(
                os.fspath(path),
                host,
                pg.port,
                processes.ports,
                statement_seconds,
                certfile,
                keyfile,
            )
        flight = None
        if flight_port is not None:
            flight = _flight_listener(app, host, flight_port, certfile, keyfile)
        if ready is not None:

            def tell() -> None:
                while not server.started and not server.should_exit:
                    time.sleep(0.05)
                if server.started:
                    bound = port
                    with contextlib.suppress(Exception):  # (the port it listens on: 0 picks)
                        bound = server.servers[0].sockets[0].getsockname()[1]
                    url = f"{'https' if certfile else 'http'}://{host}:{bound}"
                    if pg is not None:
                        url += f", postgresql://{host}:{pg.port}"
                    if flight is not None:
                        scheme = "grpc+tls" if certfile else "grpc"
                        url += f", {scheme}://{host}:{flight.port} (Flight SQL)"
                    ready(url)

            threading.Thread(target=tell, name="tessera-serve-ready", daemon=True).start()
        try:
            server.run()
        finally:
            if pool is not None:
                pool.stop()
            if pg is not None:
                pg.stop()
            if flight is not None:
                flight.stop()
    finally:
        db.close()
