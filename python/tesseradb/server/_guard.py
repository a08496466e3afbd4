"""What a served statement may do, by its user's rights (checked before it runs).

A user who is not an admin may run one statement at a time: queries
(``SELECT``, ``WITH``, ``DESCRIBE``, ``SUMMARIZE``, ``SHOW``) with the read
right on every kind of object they name, and ``INSERT``, ``UPDATE``,
``DELETE``, ``CREATE TABLE``/``VIEW`` and ``DROP TABLE``/``VIEW`` with the
write right on plain tables. Nothing else: a statement that could reach the
file system, the network, extensions or settings (``COPY``, ``ATTACH``,
``INSTALL``, ``LOAD``, ``SET``, ``PRAGMA``, ``CALL``, ``EXPORT``, a file
named as a table, ``read_csv('/etc/...')``, ``glob``, ``getenv``, ``query``,
``duckdb_databases`` with or without parentheses ...) is refused, and so is a
statement the parser cannot read (one DuckDB cannot read either fails on its
syntax error, for anyone). A statement that writes may use no table function
but those that make rows from their arguments (``range``, ``unnest``).

This is the second line: a non-admin's queries run in a DuckDB instance where
files, extensions and settings are out of reach by its configuration
(:mod:`tesseradb.sql.instance`); its writes run in the writer's instance, which
installs no extension by itself, behind this check. The check is an allow-list
of statement shapes over sqlglot's tree plus a deny-list of functions; tests
try each way in.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from tesseradb.errors import TesseraError

__all__ = ["Refused", "check_statement", "may_write"]


class Refused(TesseraError):
    """The user's rights do not allow the statement (HTTP 403)."""


_READ_STATEMENTS = ("Select", "Union", "Intersect", "Except", "Describe", "Summarize", "Show")
_WRITE_STATEMENTS = ("Insert", "Update", "Delete", "Create", "Drop")
_DENIED_FUNCTIONS = {
    "glob",
    "sniff_csv",
    "getenv",
    "query",
    "query_table",
    "current_setting",
    "load_aws_credentials",
    "which_secret",
    "json_execute_serialized_sql",
    "parquet_metadata",
    "parquet_schema",
    "parquet_file_metadata",
    "parquet_kv_metadata",
    "parquet_bloom_probe",
    "enable_profiling",
    "checkpoint",
    "force_checkpoint",
}
_DENIED_PREFIXES = ("read_", "pragma_", "duckdb_", "iceberg_", "delta_", "sqlite_", "postgres_")
_DENIED_SUFFIXES = ("_scan", "_attach")
_PATH_CHARACTERS = set("/\\~:*?.")


def _row_makers() -> tuple[type, ...]:
    from sqlglot import exp

    return (exp.GenerateSeries, exp.Unnest, exp.ExplodingGenerateSeries)


@dataclass(frozen=True)
class Checked:
    """A statement that may run: whether it writes, and the objects it names."""

    writes: bool
    names: list[str]


def _function_name(node: object) -> str:
    from sqlglot import exp

    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    assert isinstance(node, exp.Func)
    return node.sql_name().lower()


def _denied(name: str) -> bool:
    return (
        name in _DENIED_FUNCTIONS
        or name.startswith(_DENIED_PREFIXES)
        or name.endswith(_DENIED_SUFFIXES)
    )


@dataclass(frozen=True)
class _Shape:
    """What a statement's text is, whoever runs it: why it is refused to non-admins (if it
    is), whether it writes, the objects it names and the table it writes."""

    refusal: str | None
    writes: bool = False
    names: tuple[str, ...] = ()
    target: str | None = None
    syntax: bool = False  # neither sqlglot nor DuckDB parses it: the engine says where


@functools.lru_cache(maxsize=4096)
def _shape(text: str) -> _Shape:
    """The statement's shape (parsed once per distinct text: clients repeat their
    statements with new parameters, and parsing costs more than the check)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    try:
        statements = [s for s in sqlglot.parse(text, read="duckdb") if s is not None]
    except (ParseError, ValueError) as err:
        if not _duckdb_parses(text):  # a typo: said as one, to anyone
            return _Shape(None, syntax=True)
        return _Shape(
            "the server cannot check this statement, so only an admin may run it "
            f"({str(err).splitlines()[0]})"
        )
    if len(statements) != 1:
        return _Shape(f"one statement per request, not {len(statements)}")
    statement = statements[0]
    shape = type(statement).__name__
    if shape in ("Create", "Drop"):
        target = str(statement.args.get("kind") or "").upper()
        if target not in ("TABLE", "VIEW"):
            return _Shape(f"{shape.upper()} {target or '...'} is for admins only")
    if shape not in _READ_STATEMENTS + _WRITE_STATEMENTS:
        word = text.strip().split(None, 1)[0].upper() if text.strip() else shape
        return _Shape(f"{word} statements can reach files, extensions or settings: for admins only")
    ctes = {str(c.alias).lower() for c in statement.find_all(exp.CTE)}
    names: list[str] = []
    for node in statement.walk():
        if isinstance(node, exp.Func) and _denied(_function_name(node)):
            return _Shape(
                f"function {_function_name(node)}() can reach files, settings or other "
                "statements: for admins only"
            )
        if isinstance(node, (exp.Command, exp.Copy, exp.Attach, exp.Set, exp.Pragma)):
            return _Shape(f"{type(node).__name__.upper()} is for admins only")
        if isinstance(node, exp.Table):
            inner = node.this
            if isinstance(inner, exp.Literal) or (
                isinstance(inner, exp.Identifier) and _PATH_CHARACTERS & set(inner.name)
            ):
                return _Shape(
                    f"{inner.sql(dialect='duckdb')} names a file: reading files is for admins only"
                )
            if node.catalog:
                return _Shape(f"{node.sql(dialect='duckdb')}: other catalogs are for admins only")
            if isinstance(inner, exp.Identifier) and not node.db and _denied(inner.name.lower()):
                # a table function named without parentheses (duckdb_databases)
                return _Shape(
                    f"{inner.name} can reach files, settings or other statements: for admins only"
                )
            name = node.db or node.name  # an attached file's dataset: the attachment
            if name and name.lower() not in ctes:
                names.append(name)
    writes = shape in _WRITE_STATEMENTS
    if writes:
        # a write runs in the writer's own DuckDB instance, not the restricted one: of
        # the table functions, only those that make rows from their arguments are allowed
        for node in statement.find_all(exp.Table):
            inner = node.this
            if isinstance(inner, exp.Func) and not isinstance(inner, _row_makers()):
                return _Shape(
                    f"{_function_name(inner)}() in a statement that writes is for admins only"
                )
    written = statement.find(exp.Table) if writes else None
    return _Shape(None, writes, tuple(names), written.name if written is not None else None)


def check_statement(
    text: str, is_admin: bool, may: Callable[[str, str], bool], kind_of: Callable[[str], str]
) -> Checked:
    """Refuse ``text`` unless its user may run it (``may(kind, level)``); ``kind_of(name)``
    gives the kind of an object of the database (``table`` for anything else).

    An admin's statements are not looked at (a read-only database refuses their writes
    itself)."""
    if is_admin:
        return Checked(False, [])
    shape = _shape(text)
    if shape.syntax:
        return Checked(False, [])  # (the statement fails on its syntax error, for anyone)
    if shape.refusal is not None:
        raise Refused(shape.refusal)
    for name in shape.names:
        kind = kind_of(name)
        if not may(kind, "read"):
            raise Refused(f"reading {kind} {name!r} needs the read right on {kind}s")
    if shape.writes:
        kind = kind_of(shape.target) if shape.target else "table"
        if not may(kind, "write") or not may("table", "write"):
            raise Refused(f"this statement writes: it needs the write right on {kind}s")
    return Checked(shape.writes, list(shape.names))


def may_write(text: str) -> bool:
    """Whether a statement might write (anything but a plain query): what a read-only
    server refuses, whoever asks."""
    shape = _shape(text)
    return shape.writes or (shape.refusal is not None and not shape.syntax)


def _duckdb_parses(text: str) -> bool:
    import duckdb

    try:
        duckdb.extract_statements(text)
    except duckdb.Error:
        return False
    return True
