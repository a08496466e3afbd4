"""A worker's client that writes goes to the writer (``tessera serve --workers``).

A worker process answers plain reads itself, from a snapshot; the first statement that
may write (or opens a transaction, or changes a setting the writer must know) hands
the client's connection to the writer process: the worker logs in there as the same
user, brings over the client's named prepared statements and settings, and from then
on relays bytes both ways. The writer acknowledges writes, never the worker.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import TYPE_CHECKING

from tesseradb.server._guard import may_write
from tesseradb.server._pgmessages import FLUSH_BYTES, PROTOCOL_3, cstring, reader_of
from tesseradb.server._pgstatements import (
    CLIENT_SETTINGS,
    READ_WORDS,
    SET_STATEMENT,
    SQLStateError,
    first_words,
    split_statements,
)

if TYPE_CHECKING:
    from tesseradb.server._pgwire import Backend

__all__ = ["needs_writer", "relay_to_writer"]


def needs_writer(kind: bytes, body: bytes) -> bool:
    """Whether a worker must hand this client to the writer: a statement that is not
    a plain query (a write, a transaction, a setting), from here on."""
    if kind == b"Q":
        texts = split_statements(cstring(body)[0])
    elif kind == b"P":
        texts = [cstring(cstring(body)[1])[0]]
    else:
        return False
    for text in texts:
        setting = SET_STATEMENT.match(text)
        if setting is not None and setting.group(1).lower() in CLIENT_SETTINGS:
            continue
        word = first_words(text)[0]
        if word not in READ_WORDS or may_write(text):
            return True
    return False


def relay_to_writer(backend: Backend, kind: bytes, body: bytes) -> None:
    """Log in to the writer as this client's user, bring over its prepared statements
    and settings, pass this message on, then relay both ways until either side ends
    (the writer acknowledges writes: nothing is acknowledged here)."""
    assert backend.user is not None
    backend.flush()
    upstream = socket.create_connection(("127.0.0.1", backend.pg.writer_port), timeout=30)
    upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = reader_of(upstream)
    payload = struct.pack("!i", PROTOCOL_3) + b"user\0" + backend.user.name.encode() + b"\0\0"
    upstream.sendall(struct.pack("!i", len(payload) + 4) + payload)

    def until_ready() -> None:
        while True:
            head = reader.read(5)
            if len(head) < 5:
                raise EOFError("the writer closed the connection")
            size = struct.unpack("!i", head[1:])[0]
            data = reader.read(size - 4)
            if head[:1] == b"R" and data[:4] == struct.pack("!i", 3):
                password = backend.token.encode() + b"\0"
                upstream.sendall(b"p" + struct.pack("!i", len(password) + 4) + password)
            elif head[:1] == b"K":
                backend.upstream_key = data
            elif head[:1] == b"E":
                raise SQLStateError("08006", "the writer refused this client's login")
            elif head[:1] == b"Z":
                return

    until_ready()
    setup = bytearray()
    timeout = backend.settings.get("statement_timeout", "0")
    if timeout != "0":
        text = f"SET statement_timeout = {timeout}".encode() + b"\0"
        setup += b"Q" + struct.pack("!i", len(text) + 4) + text
    for name, prepared in backend.prepared.items():
        if name:  # (named statements live on: the client may bind them later)
            parse = name.encode() + b"\0" + prepared.text.encode() + b"\0"
            parse += struct.pack(f"!h{len(prepared.types)}I", len(prepared.types), *prepared.types)
            setup += b"P" + struct.pack("!i", len(parse) + 4) + parse
    named = [n for n in backend.prepared if n]
    if setup:
        if named:
            setup += b"S\x00\x00\x00\x04"
        upstream.sendall(bytes(setup))
        for _ in range(int(timeout != "0") + int(bool(named))):
            until_ready()
    upstream.settimeout(None)
    backend.upstream = upstream
    if backend.session is not None:
        backend.session.close()  # (the writer's session serves this client now)
        backend.session = None
    upstream.sendall(kind + struct.pack("!i", len(body) + 4) + body)

    def down() -> None:
        try:
            while True:
                data = reader.read1(FLUSH_BYTES)
                if not data:
                    break
                backend.sock.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                backend.sock.shutdown(socket.SHUT_RDWR)

    threading.Thread(target=down, name="pg-relay", daemon=True).start()
    try:
        while True:
            data = backend.rfile.read1(FLUSH_BYTES)
            if not data:
                break
            upstream.sendall(data)
    finally:
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_RDWR)
        upstream.close()
