"""A TCP proxy on loopback in front of an HTTP object store: added latency per request,
and faults on demand (503 answers, reset connections), with requests counted.

The object-storage benchmark runs through it to make request counts and concurrency
visible (20 ms per request costs what a region away costs); the fault tests arm it to
answer the next requests with ``503 Slow Down`` or to reset their connections.
Nothing on the client's side knows it is there: it is just the endpoint's address.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["FaultProxy", "fault_proxy"]

_METHODS = (b"GET ", b"PUT ", b"HEAD ", b"POST ", b"DELETE ")
_SLOW_DOWN_BODY = (
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>\n"
)
_SLOW_DOWN = (
    b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nConnection: close\r\n"
    + f"Content-Length: {len(_SLOW_DOWN_BODY)}\r\n\r\n".encode()
    + _SLOW_DOWN_BODY
)


@dataclass
class FaultProxy:
    """The proxy's address and its knobs (change them while it runs)."""

    upstream: tuple[str, int]
    latency: float = 0.0  # seconds added before each request is passed on
    requests: int = 0  # requests seen
    bytes_down: int = 0  # bytes the endpoint sent back through the proxy (bodies and headers)
    _slow_down: int = 0
    _resets: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def slow_down(self, count: int) -> None:
        """Answer the next ``count`` requests with 503 Slow Down (and close the connection)."""
        with self._lock:
            self._slow_down = count

    def reset(self, count: int) -> None:
        """Reset the connection of the next ``count`` requests before they are answered."""
        with self._lock:
            self._resets = count

    def heal(self) -> None:
        with self._lock:
            self._slow_down = self._resets = 0

    def _verdict(self) -> str:
        with self._lock:
            self.requests += 1
            if self._resets:
                self._resets -= 1
                return "reset"
            if self._slow_down:
                self._slow_down -= 1
                return "slow"
            return "pass"


@contextlib.contextmanager
def fault_proxy(upstream_url: str, latency: float = 0.0) -> Iterator[FaultProxy]:
    """A proxy to ``upstream_url`` (``http://host:port``) for the block."""
    host, port = upstream_url.removeprefix("http://").rstrip("/").split(":")
    proxy = FaultProxy((host, int(port)), latency)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    proxy.port = listener.getsockname()[1]
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_connection, args=(proxy, client), daemon=True).start()

    accepting = threading.Thread(target=serve, daemon=True)
    accepting.start()
    try:
        yield proxy
    finally:
        stopping.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # (wakes the accept; a close alone does not)
        listener.close()
        accepting.join(timeout=5)


def _connection(proxy: FaultProxy, client: socket.socket) -> None:
    try:
        server = socket.create_connection(proxy.upstream, timeout=30)
    except OSError:
        client.close()
        return
    for sock in (client, server):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=_pump, args=(server, client, proxy), daemon=True)
    back.start()
    try:
        while True:
            data = client.recv(1 << 16)
            if not data:
                break
            if data.startswith(_METHODS):  # (a request begins: HTTP/1.1, one at a time)
                verdict = proxy._verdict()
                if verdict == "reset":
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    break
                if verdict == "slow":
                    client.sendall(_SLOW_DOWN)
                    break
                if proxy.latency:
                    time.sleep(proxy.latency)
            server.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (client, server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _pump(source: socket.socket, target: socket.socket, proxy: FaultProxy) -> None:
    try:
        while True:
            data = source.recv(1 << 16)
            if not data:
                break
            with proxy._lock:
                proxy.bytes_down += len(data)
            target.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)
