"""The PostgreSQL protocol's message framing: request codes, reading a socket, and the
C strings and big-endian integers messages are made of.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import cast

__all__ = [
    "CANCEL_REQUEST",
    "FLUSH_BYTES",
    "GSS_REQUEST",
    "PROTOCOL_3",
    "SSL_REQUEST",
    "ClientGone",
    "ProtocolViolation",
    "cstring",
    "format_code",
    "int_at",
    "reader_of",
    "short_at",
]

PROTOCOL_3 = 3 << 16
SSL_REQUEST = 80877103
GSS_REQUEST = 80877104
CANCEL_REQUEST = 80877102
FLUSH_BYTES = 1 << 16  # rows are sent whenever this much is waiting


class ClientGone(Exception):
    """The client's connection broke (reading or sending): the backend ends quietly."""


class ProtocolViolation(Exception):
    """The client broke the protocol: told so (SQLSTATE 08P01), then disconnected."""


def reader_of(sock: socket.socket) -> io.BufferedReader:
    return cast(io.BufferedReader, sock.makefile("rb", buffering=FLUSH_BYTES))


def format_code(codes: list[int], i: int) -> int:
    """Value ``i``'s format code: the protocol gives none (all text), one for all, or one
    per value."""
    if len(codes) > 1:
        return codes[i]
    return codes[0] if codes else 0


def cstring(data: bytes) -> tuple[str, bytes]:
    end = data.find(b"\0")
    if end < 0:
        raise ProtocolViolation("a string in the message has no terminating NUL")
    try:
        return data[:end].decode(), data[end + 1 :]
    except UnicodeDecodeError:
        raise ProtocolViolation("a string in the message is not UTF-8") from None


def short_at(data: bytes, at: int) -> int:
    if at + 2 > len(data):
        raise ProtocolViolation("the message ends early")
    return int(struct.unpack_from("!h", data, at)[0])


def int_at(data: bytes, at: int) -> int:
    if at + 4 > len(data):
        raise ProtocolViolation("the message ends early")
    return int(struct.unpack_from("!i", data, at)[0])
