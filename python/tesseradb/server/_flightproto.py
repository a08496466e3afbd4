"""Protocol buffers, as far as Flight SQL's messages need them.

Flight SQL's commands travel as protocol-buffer messages inside
``google.protobuf.Any``. They are a handful of string, bytes, bool and integer
fields, read and written here by :class:`Proto` rather than with a protobuf
dependency and generated code.
"""

from __future__ import annotations

from typing import Any

import pyarrow.flight as flight

__all__ = ["TYPE_PREFIX", "Proto", "pack_any", "unpack_any"]

TYPE_PREFIX = "type.googleapis.com/arrow.flight.protocol.sql."


class Proto:
    """One protobuf message's fields: ``fields[number]`` is the list of its values (bytes
    for length-delimited fields, ints for varints)."""

    def __init__(self, fields: dict[int, list[Any]] | None = None) -> None:
        self.fields = fields or {}

    @classmethod
    def parse(cls, data: bytes) -> Proto:
        fields: dict[int, list[Any]] = {}
        at = 0
        while at < len(data):
            key, at = _varint(data, at)
            number, wire = key >> 3, key & 7
            value: int | bytes
            if wire == 0:
                value, at = _varint(data, at)
            elif wire == 2:
                size, at = _varint(data, at)
                if at + size > len(data):
                    raise ValueError("a protobuf field runs past its message")
                value, at = bytes(data[at : at + size]), at + size
            elif wire == 1:
                value, at = int.from_bytes(data[at : at + 8], "little"), at + 8
            elif wire == 5:
                value, at = int.from_bytes(data[at : at + 4], "little"), at + 4
            else:
                raise ValueError(f"protobuf wire type {wire} is not read here")
            fields.setdefault(number, []).append(value)
        return cls(fields)

    def blob(self, number: int) -> bytes:
        values = self.fields.get(number)
        return bytes(values[-1]) if values else b""

    def text(self, number: int) -> str | None:
        values = self.fields.get(number)
        return bytes(values[-1]).decode() if values else None

    def texts(self, number: int) -> list[str]:
        return [bytes(v).decode() for v in self.fields.get(number, [])]

    def integer(self, number: int) -> int:
        values = self.fields.get(number)
        return int(values[-1]) if values else 0

    def integers(self, number: int) -> list[int]:
        """A repeated integer field, packed or not."""
        out: list[int] = []
        for value in self.fields.get(number, []):
            if isinstance(value, int):
                out.append(value)
                continue
            at = 0
            while at < len(value):
                item, at = _varint(value, at)
                out.append(item)
        return out

    @staticmethod
    def encode(*fields: tuple[int, Any]) -> bytes:
        """A message of ``(number, value)`` fields: bytes and str length-delimited,
        ints (and bools) as varints."""
        out = bytearray()
        for number, value in fields:
            if isinstance(value, str):
                value = value.encode()
            if isinstance(value, (bytes, bytearray)):
                out += _put_varint(number << 3 | 2) + _put_varint(len(value)) + value
            else:
                out += _put_varint(number << 3) + _put_varint(int(value) & ((1 << 64) - 1))
        return bytes(out)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a protobuf varint is cut off")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def pack_any(name: str, message: bytes) -> bytes:
    return Proto.encode((1, TYPE_PREFIX + name), (2, message))


def unpack_any(data: bytes) -> tuple[str, Proto]:
    """A command's name (``CommandStatementQuery`` ...) and its message."""
    try:
        wrapper = Proto.parse(data)
        url = wrapper.text(1) or ""
        return url.rsplit(".", 1)[-1], Proto.parse(wrapper.blob(2))
    except (ValueError, UnicodeDecodeError) as err:
        raise flight.FlightServerError(f"the command is not a Flight SQL message ({err})") from None
