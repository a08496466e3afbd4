"""Quoting for SQL text: identifiers and string literals.

At the bottom of the import graph, so that any package may build SQL text
without importing the SQL engine.
"""

from __future__ import annotations

__all__ = ["quote_identifier", "quote_literal"]


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (embedded quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """``text`` as a single-quoted SQL string literal (embedded quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"
