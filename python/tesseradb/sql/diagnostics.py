"""Errors of statements: DuckDB's messages said in the database's terms, with where.

A syntax error gives its line and column (from sqlglot or DuckDB) and the line
itself; a missing table suggests the names it may have meant, or says the
table store lost it; an existing name, a read-only database, a binder error
over pruned columns (the engine retries with every column) each get their
own error class.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from tesseradb.errors import (
    ObjectExistsError,
    ReadOnlyError,
    SQLExecutionError,
    SQLSyntaxError,
    TableStoreError,
    UnknownTableError,
)

if TYPE_CHECKING:
    from tesseradb.sql.relation import Namespace
    from tesseradb.sql.store import TableStore

__all__ = [
    "MissingColumn",
    "StaleSnapshot",
    "execution_error",
    "first_line",
    "syntax_error",
]


class MissingColumn(SQLExecutionError):
    """DuckDB could not bind a statement against the pruned columns: retry with all."""


class StaleSnapshot(Exception):
    """A read-only database's snapshot lacks a table its catalog names: wait for a newer one."""


def first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else message


def location(text: str, message: str) -> str:
    line = re.search(r"LINE (\d+):", message)
    return f" (line {line.group(1)})" if line else ""


def syntax_error(
    text: str, sqlglot_error: Exception | None, duckdb_error: Exception | None
) -> SQLSyntaxError:
    """A syntax error with 1-based line and column, from sqlglot or DuckDB's message."""
    line = column = None
    description = None
    errors = getattr(sqlglot_error, "errors", None)
    if errors:
        first = errors[0]
        line, column = first.get("line"), first.get("col")
        description = first.get("description")
    if duckdb_error is not None:
        message = str(duckdb_error)
        found = re.search(r"LINE (\d+): (.*)\n(\s*)\^", message)
        if found:
            prefix = len(f"LINE {found.group(1)}: ")
            line = int(found.group(1))
            column = len(found.group(3)) - prefix + 1
        description = first_line(message).replace("Parser Error: ", "")
    where = f" at line {line}, column {column}" if line is not None else ""
    snippet = ""
    if line is not None:
        lines = text.splitlines() or [""]
        if 1 <= line <= len(lines):
            snippet = f"\n  {lines[line - 1]}\n  {' ' * max((column or 1) - 1, 0)}^"
    return SQLSyntaxError(
        f"SQL syntax error{where}: {description or 'invalid statement'}{snippet}", line, column
    )


def execution_error(
    err: Exception,
    text: str,
    namespace: Namespace,
    store: TableStore,
    *,
    snapshot_reader: bool,
    retried: bool,
    pruned: bool,
) -> Exception:
    """The error to raise for DuckDB's ``err`` running ``text``: what and where, in the
    database's terms. ``snapshot_reader``: the statement read a published snapshot of
    the table store (a table missing from it may be in the next one, unless ``retried``);
    ``pruned``: some scan gave fewer than all its columns (a binder error then asks for a
    retry with every column: :class:`MissingColumn`)."""
    import duckdb

    message = str(err)
    if isinstance(err, duckdb.ParserException):
        return syntax_error(text, None, err)
    missing = re.search(r"Table with name (\S+) does not exist", message)
    if isinstance(err, duckdb.CatalogException) and missing:
        name = missing.group(1)
        if namespace.kind_of(name) in ("table", "view"):
            if store.damage is not None:
                return TableStoreError(store.damage)
            if snapshot_reader and not retried:
                return StaleSnapshot(name)
            # the catalog names it, the table store lacks it: the store was lost or replaced
            return TableStoreError(
                f"{namespace.kind_of(name)} {name!r} is in the catalog but not in the "
                f"table store {store.path} (missing or replaced); `tessera check` "
                "lists what is lost, `tessera check --repair` forgets it"
            )
        suggestions = difflib.get_close_matches(name, namespace.known_names(), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        return UnknownTableError(
            f"unknown table {name!r}{hint}{location(text, message)}", name, suggestions
        )
    exists = re.search(r'with name "?([^"\s!]+)"? already exists', message)
    if isinstance(err, duckdb.CatalogException) and exists:
        return ObjectExistsError(
            f"an object called {exists.group(1)!r} already exists (CREATE OR REPLACE or "
            f"CREATE ... IF NOT EXISTS say what to do then){location(text, message)}"
        )
    if isinstance(err, duckdb.BinderException) and pruned:
        return MissingColumn(message)
    if "read-only" in message.lower():
        return ReadOnlyError(f"the database is open read-only: {first_line(message)}")
    return SQLExecutionError(message)
