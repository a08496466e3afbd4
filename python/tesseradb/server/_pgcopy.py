"""``COPY ... TO STDOUT`` for the PostgreSQL wire protocol: the statement's shape, its
options, and rows in PostgreSQL's binary, text and CSV COPY formats (ADBC's PostgreSQL
driver reads every result as binary COPY; psql's ``\\copy`` reads text and CSV). The
protocol's side (CopyOutResponse, CopyData, CopyDone) is :mod:`._pgwire`'s."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from typing import Any

from tesseradb.server._pgtypes import PgType

__all__ = ["COPY_IN", "COPY_OUT", "binary_copy_rows", "copy_options", "text_copy_rows"]

# COPY (query) TO STDOUT, or COPY table [(columns)] TO STDOUT, with its options
COPY_OUT = re.compile(
    r"^\s*COPY\s+(?:\((?P<query>.*)\)|(?P<table>[\w.\"]+)\s*(?:\((?P<columns>[^()]*)\))?)"
    r"\s+TO\s+STDOUT\b\s*(?:WITH\s*)?(?:\((?P<options>[^()]*)\))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
COPY_IN = re.compile(r"^\s*COPY\s.*\bFROM\s+STDIN\b", re.IGNORECASE | re.DOTALL)
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


def binary_copy_rows(types: list[PgType], rows: list[tuple[Any, ...]]) -> Iterator[bytes]:
    count = struct.pack("!h", len(types))
    null = struct.pack("!i", -1)
    coders = [t.binary for t in types]
    for row in rows:
        parts = [count]
        for value, coder in zip(row, coders, strict=True):
            if value is None:
                parts.append(null)
            else:
                data = coder(value)
                parts += (struct.pack("!i", len(data)), data)
        yield b"".join(parts)


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
