"""COPY ... TO STDOUT's text and CSV formats (server/_pgcopy.py) read back by the rules a
client reads them by: any string, NULL and the empty string stay apart."""

from __future__ import annotations

import csv
import io
import re

from hypothesis import given
from hypothesis import strategies as st

from tesseradb.server._pgcopy import copy_options, text_copy_rows
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
