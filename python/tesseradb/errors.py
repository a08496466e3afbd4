"""The one exception hierarchy of TesseraDB.

Every error the package raises on purpose is a :class:`TesseraError`. Where a
built-in exception describes the kind of failure (``ValueError`` for a bad
argument, ``LookupError`` for a missing object, ``FileNotFoundError``), the
subclass also derives from it, so ``except ValueError`` keeps working.
Messages say what was wrong and where: the object, the field, the line and
column, the file.
"""

from __future__ import annotations

__all__ = [
    "ArgoSyntaxError",
    "BenchmarkError",
    "DatabaseClosedError",
    "DatabaseLockedError",
    "DocumentBackendError",
    "DocumentError",
    "DocumentTypeError",
    "FormatVersionError",
    "InvalidNameError",
    "NotADatabaseError",
    "ObjectExistsError",
    "ObjectNotFoundError",
    "ReadOnlyError",
    "SQLError",
    "SQLExecutionError",
    "SQLSyntaxError",
    "TesseraError",
    "UnknownCollectionError",
    "UnknownTableError",
]


class TesseraError(Exception):
    """Base class of every error TesseraDB raises on purpose."""


# --- the database directory -------------------------------------------------


class NotADatabaseError(TesseraError, FileNotFoundError):
    """The path is not a TesseraDB database directory (or cannot become one)."""


class FormatVersionError(TesseraError):
    """The database (or one object in it) was written by a newer, unknown format."""


class DatabaseLockedError(TesseraError):
    """Another writer holds the database's write lock."""

    def __init__(self, message: str, holder: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.holder = holder or {}


class DatabaseClosedError(TesseraError):
    """The database was closed; open it again with ``tesseradb.connect``."""


class ReadOnlyError(TesseraError):
    """A write was attempted through a database opened with ``read_only=True``."""


# --- the catalog ---------------------------------------------------------------


class InvalidNameError(TesseraError, ValueError):
    """An object name is not a valid SQL identifier."""


class ObjectNotFoundError(TesseraError, LookupError):
    """No object of that name exists in the database."""

    def __init__(self, message: str, suggestions: list[str] | None = None) -> None:
        super().__init__(message)
        self.suggestions = suggestions or []

    def __str__(self) -> str:  # LookupError would otherwise repr() the message
        return str(self.args[0])


class ObjectExistsError(TesseraError, ValueError):
    """An object of that name already exists (the namespace is shared by all kinds)."""


# --- SQL -----------------------------------------------------------------------


class SQLError(TesseraError):
    """A SQL statement could not be run."""


class SQLSyntaxError(SQLError, ValueError):
    """A SQL statement does not parse; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class UnknownTableError(SQLError, ObjectNotFoundError):
    """A statement names a table that does not exist; ``suggestions`` are the closest names."""

    def __init__(self, message: str, name: str, suggestions: list[str] | None = None) -> None:
        ObjectNotFoundError.__init__(self, message, suggestions)
        self.name = name


class SQLExecutionError(SQLError):
    """DuckDB rejected or failed a statement (binder, catalog, conversion or constraint error)."""


# --- documents -------------------------------------------------------------------


class DocumentError(TesseraError, ValueError):
    """A JSON document or an Argo/SQL statement is not acceptable (the message says where)."""


class ArgoSyntaxError(DocumentError):
    """An Argo/SQL statement does not parse; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.line = line
        self.column = column


class DocumentTypeError(DocumentError, TypeError):
    """An Argo/SQL operation met values of a type it cannot take (``SUM`` over strings)."""


class UnknownCollectionError(ObjectNotFoundError):
    """A statement names a collection that does not exist."""


class DocumentBackendError(TesseraError):
    """The relational backend of a collection failed or cannot be reached."""


class BenchmarkError(TesseraError):
    """A benchmark or its peer could not be run, or the systems disagreed."""
