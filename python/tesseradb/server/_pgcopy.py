"""``COPY ... TO STDOUT`` and ``COPY ... FROM STDIN`` for the PostgreSQL wire protocol:
the statements' shape, their options, and rows written and read in PostgreSQL's binary,
text and CSV COPY formats (ADBC's PostgreSQL driver reads every result as binary COPY
and ingests through it; psql's ``\\copy`` uses text and CSV). The protocol's side
(CopyOutResponse, CopyInResponse, CopyData, CopyDone) is :mod:`._pgwire`'s."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tesseradb.server._pgtypes import PgType

__all__ = [
    "COPY_IN",
    "COPY_OUT",
    "CopyError",
    "binary_copy_rows",
    "copy_options",
    "encode_row",
    "read_binary_copy",
    "read_text_copy",
    "text_copy_rows",
]

# a table's name, maybe qualified and quoted: t, main.t, "main" . "t"
_NAME = r'(?:"(?:[^"]|"")*"|\w+)(?:\s*\.\s*(?:"(?:[^"]|"")*"|\w+))*'
# COPY (query) TO STDOUT, or COPY table [(columns)] TO STDOUT, with its options
COPY_OUT = re.compile(
    r"^\s*COPY\s+(?:\((?P<query>.*)\)|(?P<table>" + _NAME + r")\s*(?:\((?P<columns>[^()]*)\))?)"
    r"\s+TO\s+STDOUT\b\s*(?:WITH\s*)?(?:\((?P<options>[^()]*)\))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
# COPY table [(columns)] FROM STDIN, with its options
COPY_IN = re.compile(
    r"^\s*COPY\s+(?P<table>" + _NAME + r")\s*(?:\((?P<columns>[^()]*)\))?\s+FROM\s+STDIN\b"
    r"\s*(?:WITH\s*)?(?:\((?P<options>[^()]*)\))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
BINARY_HEADER = b"PGCOPY\n\xff\r\n\0" + struct.pack("!ii", 0, 0)
BINARY_TRAILER = struct.pack("!h", -1)


def copy_options(text: str) -> dict[str, str]:
    """COPY's options, ``FORMAT binary, HEADER`` or ``FORMAT 'csv', DELIMITER ';'``."""
    options = {}
    for part in text.split(","):
        words = part.split(None, 1)
        if words:
            value = words[1].strip().strip("'") if len(words) > 1 else "true"
            options[words[0].lower()] = value.lower() if words[0].lower() == "format" else value
    return options


def encode_row(row: tuple[Any, ...], coders: Sequence[Callable[[Any], bytes]]) -> bytes:
    """A row as the protocol lays it out in a DataRow message and in a binary COPY tuple:
    the field count, then each field's length (-1: NULL) and bytes."""
    parts = [struct.pack("!h", len(coders))]
    for value, coder in zip(row, coders, strict=True):
        if value is None:
            parts.append(_NULL)
        else:
            data = coder(value)
            parts += (struct.pack("!i", len(data)), data)
    return b"".join(parts)


_NULL = struct.pack("!i", -1)


def binary_copy_rows(types: list[PgType], rows: list[tuple[Any, ...]]) -> Iterator[bytes]:
    coders = [t.binary for t in types]
    for row in rows:
        yield encode_row(row, coders)


def text_copy_rows(
    names: list[str],
    types: list[PgType],
    rows: list[tuple[Any, ...]],
    csv: bool,
    options: dict[str, str],
) -> Iterator[bytes]:
    delimiter = options.get("delimiter", "," if csv else "\t")
    null = options.get("null", "" if csv else "\\N")
    coders = [t.text for t in types]
    if csv and options.get("header", "false").lower() in ("true", "on", "1"):
        yield (delimiter.join(_csv_field(n, delimiter) for n in names) + "\n").encode()
    for row in rows:
        fields = []
        for value, coder in zip(row, coders, strict=True):
            if value is None:
                fields.append(null)
                continue
            text = coder(value).decode()
            fields.append(_csv_field(text, delimiter) if csv else _text_field(text, delimiter))
        yield (delimiter.join(fields) + "\n").encode()


def _text_field(text: str, delimiter: str) -> str:
    """A value in COPY's text format: backslash escapes for what would end it."""
    for plain, escaped in (("\\", "\\\\"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        text = text.replace(plain, escaped)
    return text if delimiter == "\t" else text.replace(delimiter, "\\" + delimiter)


def _csv_field(text: str, delimiter: str) -> str:
    if text == "" or any(c in text for c in (delimiter, '"', "\n", "\r")):
        return '"' + text.replace('"', '""') + '"'  # (an empty string, quoted: not NULL)
    return text


# --- reading COPY data -----------------------------------------------------------------
class CopyError(ValueError):
    """COPY data that is not what its format says: where, and what."""


_TEXT_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_TEXT_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.DOTALL)


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] == "x" and len(code) > 1:
        return chr(int(code[1:], 16))
    if code[0] in "01234567":
        return chr(int(code, 8))
    return _TEXT_ESCAPES.get(code, code)


def read_text_copy(data: bytes, csv: bool, options: dict[str, str]) -> list[list[str | None]]:
    """The rows of COPY data in the text or CSV format, each field a string or None."""
    try:
        text = data.decode()
    except UnicodeDecodeError as err:
        raise CopyError(f"the data is not UTF-8 ({err})") from None
    delimiter = options.get("delimiter", "," if csv else "\t")
    if len(delimiter) != 1:
        raise CopyError(f"the delimiter is one character, not {delimiter!r}")
    null = options.get("null", "" if csv else "\\N")
    rows = _csv_rows(text, delimiter, null) if csv else _text_rows(text, delimiter, null)
    if csv and options.get("header", "false").lower() in ("true", "on", "1") and rows:
        rows = rows[1:]
    return rows


def _text_rows(text: str, delimiter: str, null: str) -> list[list[str | None]]:
    lines = text.split("\n")
    if text.endswith("\n") or not text:
        lines.pop()  # (the newline that ends the last row)
    rows: list[list[str | None]] = []
    for line in lines:
        line = line.removesuffix("\r")
        if line == "\\.":
            break  # (the end marker of older clients)
        raw, start, at = [], 0, 0
        while at < len(line):  # (split at delimiters that are not escaped)
            if line[at] == "\\":
                at += 2
                continue
            if line[at] == delimiter:
                raw.append(line[start:at])
                start = at + 1
            at += 1
        raw.append(line[start:])
        # (NULL is the field as written, before its escapes are read)
        rows.append([None if f == null else _TEXT_ESCAPE.sub(_unescape, f) for f in raw])
    return rows


def _csv_rows(text: str, delimiter: str, null: str) -> list[list[str | None]]:
    """CSV as PostgreSQL reads it: a quoted field is a string, even empty; an unquoted
    one equal to the NULL string is NULL."""
    rows: list[list[str | None]] = []
    fields: list[str | None] = []
    at, size = 0, len(text)
    while at < size:
        if text[at] == '"':
            end, parts = at + 1, []
            while True:
                close = text.find('"', end)
                if close < 0:
                    raise CopyError(f"row {len(rows) + 1}: a quoted field is never closed")
                parts.append(text[end:close])
                if text[close + 1 : close + 2] == '"':
                    parts.append('"')
                    end = close + 2
                    continue
                at = close + 1
                break
            fields.append("".join(parts))
        else:
            stop = at
            while stop < size and text[stop] not in (delimiter, "\n", "\r"):
                stop += 1
            raw = text[at:stop]
            fields.append(None if raw == null else raw)
            at = stop
        if at >= size or text[at] in "\r\n":
            rows.append(fields)
            fields = []
            if text[at : at + 2] == "\r\n":
                at += 1
            at += 1
        elif text[at] == delimiter:
            at += 1
            if at >= size:
                fields.append(None if null == "" else "")
                rows.append(fields)
        else:
            raise CopyError(f"row {len(rows) + 1}: a quoted field is followed by {text[at]!r}")
    return rows


def read_binary_copy(data: bytes, width: int) -> list[list[bytes | None]]:
    """The rows of COPY data in the binary format, each field its bytes or None."""
    if not data.startswith(BINARY_HEADER[:11]) or len(data) < 19:
        raise CopyError("binary COPY data begins with PGCOPY\\n\\377\\r\\n\\0 and its flags")
    (extension,) = struct.unpack_from("!i", data, 15)
    at = 19 + extension
    rows: list[list[bytes | None]] = []
    while True:
        if at == len(data):
            return rows  # (no trailer: PostgreSQL ends there too, between rows)
        if at + 2 > len(data):
            raise CopyError(f"row {len(rows) + 1} is cut off")
        (count,) = struct.unpack_from("!h", data, at)
        at += 2
        if count == -1:
            return rows
        if count != width:
            raise CopyError(f"row {len(rows) + 1} has {count} fields, not {width}")
        fields: list[bytes | None] = []
        for _ in range(count):
            if at + 4 > len(data):
                raise CopyError(f"row {len(rows) + 1} ends inside a field")
            (size,) = struct.unpack_from("!i", data, at)
            at += 4
            if size < 0:
                fields.append(None)
                continue
            if at + size > len(data):
                raise CopyError(f"row {len(rows) + 1} ends inside a field")
            fields.append(data[at : at + size])
            at += size
        rows.append(fields)
