"""The PostgreSQL-protocol listener of ``tessera serve --pg-port``: its sockets (one
port, shared by the server's processes when it has workers), the backends it runs, and
cancel requests, passed to the process whose client they name.

A connection's protocol is :mod:`._pgwire`'s :class:`Backend`.
"""

from __future__ import annotations

import contextlib
import hmac
import socket
import socketserver
import ssl
import struct
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tesseradb.server._pgmessages import CANCEL_REQUEST
from tesseradb.server._pgwire import Backend

if TYPE_CHECKING:
    from tesseradb.server._http import Server

__all__ = ["PgServer", "Processes"]


class _Listener(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class _SharedListener(_Listener):
    """A listener sharing its port with the server's other processes (SO_REUSEPORT: the
    kernel spreads new connections over them)."""

    allow_reuse_port = True


class PgServer:
    """The PostgreSQL-protocol listener of a served database (threads of this process)."""

    def __init__(
        self,
        server: Server,
        host: str = "127.0.0.1",
        port: int = 0,
        certfile: str | None = None,
        keyfile: str | None = None,
        processes: Processes | None = None,
    ) -> None:
        self.server = server
        self.processes = processes
        self.number = 0 if processes is None else processes.number
        # a worker's: where the writer takes the clients that write
        self.writer_port = None if processes is None or not processes.number else processes.ports[0]
        self.tls: ssl.SSLContext | None = None
        if certfile is not None:
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(certfile, keyfile)
        self._backends: dict[int, Backend] = {}
        self._lock = threading.Lock()
        pg = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock = self.request
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                Backend(pg, sock).run()

        self._listeners: list[_Listener] = []
        if processes is None:
            self._listeners.append(_Listener((host, port), Handler))
        else:  # (the shared public port, and this process's own on loopback)
            self._listeners.append(_SharedListener((host, port), Handler))
            own = processes.ports[processes.number]
            self._listeners.append(_Listener(("127.0.0.1", own), Handler))
        self.port = int(self._listeners[0].server_address[1])

    def start(self) -> PgServer:
        for listener in self._listeners:
            name = f"tessera-pg-{listener.server_address[1]}"
            threading.Thread(target=listener.serve_forever, name=name, daemon=True).start()
        return self

    def stop(self) -> None:
        for listener in self._listeners:
            listener.shutdown()
            listener.server_close()
        with self._lock:
            backends = list(self._backends.values())
        for backend in backends:  # (their threads end on the closed sockets)
            with contextlib.suppress(OSError):
                backend.sock.shutdown(socket.SHUT_RDWR)

    def register(self, backend: Backend) -> None:
        with self._lock:
            self._backends[backend.key[0]] = backend

    def unregister(self, backend: Backend) -> None:
        with self._lock:
            if self._backends.get(backend.key[0]) is backend:
                del self._backends[backend.key[0]]

    def cancel(self, pid: int, secret: int) -> None:
        """A cancel request: stop the statement of the backend with that key, if any (a
        wrong secret is ignored, as PostgreSQL ignores it)."""
        owner = pid >> 24
        if self.processes is not None and owner != self.number:
            if owner < len(self.processes.ports):  # (another process's client)
                _send_cancel(self.processes.ports[owner], struct.pack("!ii", pid, secret))
            return
        with self._lock:
            backend = self._backends.get(pid)
        if backend is None or not hmac.compare_digest(
            struct.pack("!i", backend.key[1]), struct.pack("!i", secret)
        ):
            return
        if backend.upstream is not None and backend.upstream_key and self.writer_port:
            _send_cancel(self.writer_port, backend.upstream_key)  # (its statement runs there)
            return
        running = backend.running
        if running is not None:
            running.cancel.cancel()


@dataclass(frozen=True)
class Processes:
    """The processes of a server with workers: each one's loopback port (the writer's
    first) and this process's number (0: the writer)."""

    ports: tuple[int, ...]
    number: int


def _send_cancel(port: int, key: bytes) -> None:
    """A cancel request for ``key`` (process id and secret) to a process of the server."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 5) as sock:
        sock.sendall(struct.pack("!ii", 16, CANCEL_REQUEST) + key)
        sock.recv(1)
