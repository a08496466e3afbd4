"""COPY's text, CSV and binary formats (server/_pgcopy.py): what the server writes reads
back by the rules a client reads them by, and what it reads is what was written: any
string, NULL and the empty string stay apart."""

from __future__ import annotations

import csv
import io
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tesseradb.server._pgcopy import (
    BINARY_HEADER,
    BINARY_TRAILER,
    CopyError,
    binary_copy_rows,
    copy_options,
    read_binary_copy,
    read_text_copy,
    text_copy_rows,
)
from tesseradb.server._pgtypes import TEXT, PgType

VALUES = st.lists(st.lists(st.one_of(st.none(), st.text()), min_size=2, max_size=2), max_size=8)
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}


def _read_text(data: bytes) -> list[list[str | None]]:
    """PostgreSQL's text COPY format, read as psql and COPY FROM read it."""
    rows = []
    for line in data.decode().split("\n")[:-1]:
        fields: list[str | None] = []
        for field in line.split("\t"):
            if field == "\\N":
                fields.append(None)
            else:
                fields.append(
                    re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), field)
                )
        rows.append(fields)
    return rows


@given(VALUES)
def test_text_format_reads_back_every_string_and_null(rows: list[list[str | None]]) -> None:
    kinds = [PgType(TEXT), PgType(TEXT)]
    data = b"".join(text_copy_rows(["a", "b"], kinds, [tuple(r) for r in rows], False, {}))
    assert _read_text(data) == rows


@given(VALUES)
def test_csv_format_reads_back_every_string(rows: list[list[str | None]]) -> None:
    kinds = [PgType(TEXT), PgType(TEXT)]
    options = copy_options("FORMAT csv, HEADER")
    data = b"".join(text_copy_rows(["a", "b"], kinds, [tuple(r) for r in rows], True, options))
    got = list(csv.reader(io.StringIO(data.decode(), newline=""), strict=True))
    assert got == [["a", "b"], *[["" if v is None else v for v in r] for r in rows]]


def test_csv_tells_null_from_the_empty_string_as_postgresql_does() -> None:
    kinds = [PgType(TEXT), PgType(TEXT)]
    data = b"".join(text_copy_rows(["a", "b"], kinds, [(None, ""), ("x,y", 'q"')], True, {}))
    assert data == b',""\n"x,y","q"""\n'  # (NULL: nothing; the empty string: quoted)


@given(VALUES, st.sampled_from(["text", "csv"]))
def test_the_server_reads_back_what_it_writes(rows: list[list[str | None]], kind: str) -> None:
    kinds = [PgType(TEXT), PgType(TEXT)]
    options = copy_options(f"FORMAT {kind}")
    data = b"".join(
        text_copy_rows(["a", "b"], kinds, [tuple(r) for r in rows], kind == "csv", options)
    )
    assert read_text_copy(data, kind == "csv", options) == rows


@given(VALUES)
def test_binary_rows_read_back(rows: list[list[str | None]]) -> None:
    kinds = [PgType(TEXT), PgType(TEXT)]
    data = BINARY_HEADER + b"".join(binary_copy_rows(kinds, [tuple(r) for r in rows]))
    want = [[None if v is None else v.encode() for v in r] for r in rows]
    assert read_binary_copy(data + BINARY_TRAILER, 2) == want
    assert read_binary_copy(data, 2) == want  # (PostgreSQL reads it without the trailer too)


def test_text_format_escapes_and_an_end_marker() -> None:
    data = b"a\\tb\\x41\\101\\N\t\\N\n\\.\nignored\n"
    # (\\N inside a field is not NULL: a backslash before another character is that one)
    assert read_text_copy(data, False, {}) == [["a\tbAAN", None]]


@pytest.mark.parametrize(
    ("data", "csv", "message"),
    [
        (b'"never closed\n', True, "never closed"),
        (b'"a"b\n', True, "followed by"),
        (b"\xff\n", False, "not UTF-8"),
    ],
)
def test_broken_text_data_says_where(data: bytes, csv: bool, message: str) -> None:
    with pytest.raises(CopyError, match=message):
        read_text_copy(data, csv, {})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PGCOPY", "begins with"),
        (BINARY_HEADER + b"\x00\x01", "has 1 fields, not 2"),
        (BINARY_HEADER + b"\x00\x02\x00\x00\x00\x05ab", "ends inside a field"),
        (BINARY_HEADER + b"\x00", "cut off"),
    ],
)
def test_broken_binary_data_says_where(data: bytes, message: str) -> None:
    with pytest.raises(CopyError, match=message):
        read_binary_copy(data, 2)


@given(
    st.one_of(
        st.lists(st.one_of(st.none(), st.text()), max_size=6).map(lambda v: (1009, v)),
        st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), max_size=6).map(
            lambda v: (1007, v)
        ),
    )
)
def test_array_text_reads_back_what_the_server_writes(typed: tuple[int, list[object]]) -> None:
    """An array parameter or COPY field in text (``{a,"b c",NULL}``) reads as the list the
    server would have sent."""
    from tesseradb.server._pgtypes import pg_type, read_parameter

    oid, values = typed
    kind = pg_type("VARCHAR[]" if oid == 1009 else "INTEGER[]")
    assert kind.oid == oid
    assert read_parameter(kind.text(values), oid, False, 1) == values
