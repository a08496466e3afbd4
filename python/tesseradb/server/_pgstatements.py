"""Statements as the PostgreSQL protocol sees them: what kind a text is (a read, a write,
a transaction word, a client setting), the answer it gets (:class:`Outcome`), the
statements and portals a client prepares, and the SQLSTATE of an error.

The wire itself (messages, login, the extended protocol) is :mod:`._pgwire`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tesseradb.errors import (
    CancelledError,
    InterruptedStatementError,
    ReadOnlyError,
    TesseraError,
)
from tesseradb.server._guard import Refused
from tesseradb.server._pgtypes import ParameterError, PgType

__all__ = [
    "CLIENT_SETTINGS",
    "COUNT_WORDS",
    "READ_WORDS",
    "REPORTED",
    "ROW_WORDS",
    "SERVER_VERSION",
    "SET_STATEMENT",
    "SHOW_STATEMENT",
    "TRANSACTION_TAGS",
    "Outcome",
    "Portal",
    "Prepared",
    "SQLStateError",
    "duckdb_spelling",
    "first_words",
    "parameter_count",
    "split_statements",
    "sqlstate",
]

SERVER_VERSION = "15.0"  # (what clients read to choose their catalog queries)

# settings PostgreSQL clients send that mean nothing to DuckDB: kept per connection,
# shown by SHOW, never passed on
CLIENT_SETTINGS = {
    "application_name": "",
    "client_encoding": "UTF8",
    "datestyle": "ISO, MDY",
    "intervalstyle": "postgres",
    "extra_float_digits": "1",
    "statement_timeout": "0",
    "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0",
    "client_min_messages": "notice",
    "standard_conforming_strings": "on",
    "bytea_output": "hex",
    "jit": "off",
    "default_transaction_isolation": "serializable",
    "transaction_isolation": "serializable",
    "server_version": SERVER_VERSION,
    "server_encoding": "UTF8",
    "integer_datetimes": "on",
}
REPORTED = ("application_name", "client_encoding", "DateStyle", "IntervalStyle")
SET_STATEMENT = re.compile(
    r"^\s*SET\s+(?:SESSION\s+|LOCAL\s+)?([A-Za-z_]+)\s*(?:=|\s+TO\s+)\s*(.*?)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
SHOW_STATEMENT = re.compile(r"^\s*SHOW\s+([A-Za-z_ ]+?)\s*;?\s*$", re.IGNORECASE)
_FIRST_WORDS = re.compile(
    r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z]+)(?:\s+(?:OR\s+REPLACE\s+)?"
    r"(?:TEMP\s+|TEMPORARY\s+|UNIQUE\s+)?([A-Za-z]+))?",
    re.DOTALL,
)
# what a worker process answers itself (anything else goes to the writer)
READ_WORDS = {"SELECT", "WITH", "VALUES", "TABLE", "FROM", "SHOW", "DESCRIBE", "SUMMARIZE"}
ROW_WORDS = READ_WORDS | {"EXPLAIN", "PIVOT", "UNPIVOT", "CALL", "PRAGMA"}
COUNT_WORDS = {"INSERT", "UPDATE", "DELETE", "MERGE"}
TRANSACTION_TAGS = {
    "BEGIN": "BEGIN",
    "START": "START TRANSACTION",
    "COMMIT": "COMMIT",
    "END": "COMMIT",
    "ROLLBACK": "ROLLBACK",
    "ABORT": "ROLLBACK",
}
# SQLSTATEs by the class of DuckDB's error, then by ours
_DUCKDB_STATES = (
    ("Parser Error", "42601"),
    ("Catalog Error", "42P01"),
    ("Binder Error", "42703"),
    ("Conversion Error", "22P02"),
    ("Out of Range Error", "22003"),
    ("Invalid Input Error", "22P02"),
    ("Division by zero", "22012"),
    ("Duplicate key", "23505"),
    ("NOT NULL constraint", "23502"),
    ("CHECK constraint", "23514"),
    ("foreign key", "23503"),
    ("Constraint Error", "23000"),
    ("TransactionContext Error", "25P02"),
    ("Permission Error", "42501"),
)


class SQLStateError(Exception):
    """An error of this layer with its SQLSTATE."""

    def __init__(self, state: str, message: str) -> None:
        super().__init__(message)
        self.state = state


def sqlstate(err: BaseException) -> str:
    if isinstance(err, SQLStateError):
        return err.state
    if isinstance(err, (Refused, ReadOnlyError)):
        return "42501" if isinstance(err, Refused) else "25006"
    if isinstance(err, (CancelledError, InterruptedStatementError)):
        return "57014"
    if isinstance(err, ParameterError):
        return "22P02"
    text = str(err)
    for marker, state in _DUCKDB_STATES:
        if marker in text:
            return state
    if isinstance(err, LookupError):
        return "42P01"
    if isinstance(err, ValueError):
        return "22023"
    return "XX000" if not isinstance(err, TesseraError) else "42000"


@dataclass
class Outcome:
    """A statement's answer as the protocol sends it: no columns means no RowDescription."""

    tag: str
    names: list[str] = field(default_factory=list)
    types: list[PgType] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    sent: int = 0  # rows sent so far (a portal's Execute may ask for some at a time)

    @property
    def has_rows(self) -> bool:
        return bool(self.names)


@dataclass
class Prepared:
    text: str
    types: list[int]  # the parameter types the client named (0: let the statement say)


@dataclass
class Portal:
    prepared: Prepared
    params: list[Any]
    formats: list[int]  # per result column: 0 text, 1 binary
    outcome: Outcome | None = None


# PostgreSQL-only spellings in the catalog queries of psql and drivers, said as DuckDB
# says them (DuckDB's own pg_catalog answers the rest)
_PG_SPELLINGS = (
    (re.compile(r"OPERATOR\(\s*pg_catalog\.([~!<>=*+-]+)\s*\)", re.I), r"\1"),
    (re.compile(r"\s+COLLATE\s+pg_catalog\.(?:default|\"default\"|\"C\")", re.I), ""),
    (re.compile(r"pg_catalog\.pg_get_userbyid\s*\([^()]*\)", re.I), "'tessera'"),
    (re.compile(r"pg_catalog\.pg_encoding_to_char\s*\([^()]*\)", re.I), "'UTF8'"),
)


def duckdb_spelling(text: str) -> str:
    """A client's catalog query in DuckDB's spelling (other statements are left alone)."""
    if "pg_catalog" not in text:
        return text
    for pattern, replacement in _PG_SPELLINGS:
        text = pattern.sub(replacement, text)
    return text


def first_words(text: str) -> tuple[str, str]:
    found = _FIRST_WORDS.match(text)
    if found is None:
        return "", ""
    return found.group(1).upper(), (found.group(2) or "").upper()


def parameter_count(text: str) -> int:
    """The highest ``$n`` in the text outside quotes and comments."""
    plain = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    numbers = [int(n) for n in re.findall(r"\$(\d+)", plain)]
    return max(numbers, default=0)


def split_statements(text: str) -> list[str]:
    """The statements of a simple query (DuckDB's parser splits it; one it cannot read
    stays whole, for the engine to name its syntax error)."""
    body = text.strip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    if ";" not in body:
        return [body] if body else []
    import duckdb

    try:
        return [s.query.strip() for s in duckdb.extract_statements(text) if s.query.strip()]
    except duckdb.Error:
        return [body]
