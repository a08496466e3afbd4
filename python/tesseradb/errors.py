"""The one exception hierarchy of TesseraDB.

Every error the package raises on purpose is a :class:`TesseraError`. Where a
built-in exception describes the kind of failure (``ValueError`` for a bad
argument, ``LookupError`` for a missing object, ``FileNotFoundError``), the
subclass also derives from it, so ``except ValueError`` keeps working.
Messages say what was wrong and where: the object, the field, the line and
column, the file.

Every error of every data model is defined here, so that one import names
them all and the hierarchy reads in one place; each subpackage re-exports
its own.
"""

from __future__ import annotations

import os
from typing import BinaryIO

__all__ = [
    "AccessDeniedError",
    "ArgoSyntaxError",
    "ArrayBoundsError",
    "ArrayConflictError",
    "ArrayCorruptError",
    "ArrayDtypeError",
    "ArraySchemaError",
    "AssocError",
    "AssocIndexError",
    "AttachError",
    "AttachedFileError",
    "BenchmarkError",
    "CSVError",
    "CancelledError",
    "ClusterError",
    "DamagedStorageError",
    "DatabaseClosedError",
    "DatabaseLockedError",
    "DescriptorError",
    "DocumentBackendError",
    "DocumentError",
    "DocumentTypeError",
    "ExportError",
    "FormatVersionError",
    "IndexFileError",
    "InputFileError",
    "InterruptedStatementError",
    "InvalidArgumentError",
    "InvalidNameError",
    "LimitExceededError",
    "LoadError",
    "NotADatabaseError",
    "ObjectExistsError",
    "ObjectNotFoundError",
    "OperatorError",
    "OutputError",
    "ProcessStartError",
    "ReadOnlyError",
    "SQLError",
    "SQLExecutionError",
    "SQLSyntaxError",
    "SegmentFileError",
    "ServerError",
    "StorageError",
    "StoredObjectMissingError",
    "StreamWriteError",
    "TableStoreError",
    "TesseraError",
    "UnknownCollectionError",
    "UnknownTableError",
    "VersionNotFoundError",
]


class TesseraError(Exception):
    """Base class of every error TesseraDB raises on purpose."""


class OutputError(TesseraError):
    """The CLI cannot write rows as asked (a format that needs a file, say)."""


class InvalidArgumentError(TesseraError, ValueError):
    """An argument of a call is not one it accepts (the message names the argument and why)."""


class LimitExceededError(InvalidArgumentError):
    """An input passes a documented limit (nesting depth, string size, field count, ...)."""


class DamagedStorageError(TesseraError, OSError):
    """Stored bytes are missing, torn or corrupt; the message names the object and the part.

    Never answered around: a query that needs the damaged part fails with
    this error; ``tessera check --repair`` sets the part aside so the rest
    can be read, and says what was lost.
    """


class StorageError(TesseraError, OSError):
    """An object store (``s3://...``) could not be reached or refused: an unknown scheme, a
    missing bucket, wrong credentials, a key that vanished, an endpoint that keeps failing.
    The message names the URL and the operation, never a credential."""


class StoredObjectMissingError(StorageError, FileNotFoundError):
    """An object asked for by name is not in the store (its URL is in the message)."""


class InputFileError(TesseraError, OSError):
    """A file given as input (CSV, JSON lines) is missing, a directory, or cannot be read."""


def require_text(value: str, what: str, where: str) -> None:
    """Refuse a str that is not Unicode text (a lone surrogate cannot be stored anywhere)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidArgumentError(
            f"{where}: {what} is not Unicode text (a lone surrogate at position {err.start})"
        ) from None


def require_str(value: object, what: str, where: str) -> None:
    """Refuse a non-text argument at the door, naming it (not an AttributeError inside)."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{where}: {what} must be a str, not {type(value).__name__}")
    require_text(value, what, where)


def require_bool(value: object, what: str, where: str) -> None:
    """A flag is True or False: ``repair="false"`` must not mean yes."""
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{where}: {what} must be True or False, not {value!r}")


def require_params(params: object, where: str) -> None:
    """Statement parameters: a list (for ``?``) or a dict (for ``$name``), or None."""
    if params is not None and (
        isinstance(params, (str, bytes)) or not isinstance(params, (list, tuple, dict))
    ):
        raise InvalidArgumentError(
            f"{where}: params are a list (for ?) or a dict (for $name), not {type(params).__name__}"
        )


def open_input(path: str | os.PathLike[str], what: str) -> BinaryIO:
    """``path`` opened for reading bytes, or :class:`InputFileError` naming it and why."""
    try:
        return open(path, "rb")
    except UnicodeEncodeError:
        raise InputFileError(f"{what} {path!r}: the name is not Unicode text") from None
    except FileNotFoundError:
        raise InputFileError(f"{what} {os.fspath(path)!r} does not exist") from None
    except IsADirectoryError:
        raise InputFileError(f"{what} {os.fspath(path)!r} is a directory, not a file") from None
    except OSError as err:
        raise InputFileError(
            f"{what} {os.fspath(path)!r} cannot be read: {err.strerror or err}"
        ) from None


class ProcessStartError(TesseraError):
    """Work cannot be handed to another process as asked (its start method, say)."""


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


class InvalidNameError(InvalidArgumentError):
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


class InterruptedStatementError(SQLError):
    """A statement was interrupted (Ctrl-C, or ``Database.interrupt``); nothing of it was kept."""


class TableStoreError(DamagedStorageError):
    """The plain tables' file (``tables.duckdb``) cannot be opened or read."""


# --- documents -------------------------------------------------------------------


class DocumentError(TesseraError, ValueError):
    """A JSON document or an Argo/SQL statement is not acceptable (the message says where)."""


class ArgoSyntaxError(DocumentError):
    """An Argo/SQL statement does not parse; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.reason = message
        self.line = line
        self.column = column


class DocumentTypeError(DocumentError, TypeError):
    """An Argo/SQL operation met values of a type it cannot take (``SUM`` over strings)."""


class UnknownCollectionError(ObjectNotFoundError):
    """A statement names a collection that does not exist."""


class DocumentBackendError(TesseraError):
    """The relational backend of a collection failed or cannot be reached."""


# --- records (MDDS streams) ---------------------------------------------------------


class DescriptorError(TesseraError, ValueError):
    """A record descriptor is malformed, or records do not fit it: the message names the field."""


class CSVError(DescriptorError):
    """A CSV row does not fit the record descriptor; the message names the line and field."""


class StreamWriteError(TesseraError, OSError):
    """The background writer could not put segments on disk (they stay queryable in memory)."""


class SegmentFileError(DamagedStorageError):
    """A segment file is missing, torn, corrupt, of another layout version or record format."""


# --- arrays ----------------------------------------------------------------------------


class AssocError(TesseraError, ValueError):
    """An associative array cannot be built or used as asked: the message names
    the keys, values or operand and what is wrong with them."""


class AssocIndexError(AssocError, IndexError):
    """A position given to ``A[rows, cols]`` is outside the associative array."""


class ArraySchemaError(TesseraError, ValueError):
    """An array schema is malformed: the message names the dimension or attribute."""


class ArrayBoundsError(TesseraError, IndexError):
    """A read or write reaches outside the array's dimensions."""


class ArrayDtypeError(TesseraError, TypeError):
    """Values do not fit an attribute's type (or shape) without loss."""


class ArrayCorruptError(DamagedStorageError):
    """Stored bytes of an array cannot be read: the message names the array, attribute and chunk."""


class ArrayConflictError(TesseraError):
    """Another writer committed to the array after this write began; nothing of it was committed."""


class VersionNotFoundError(TesseraError, LookupError):
    """The asked-for version (snapshot id or time) does not exist."""

    def __str__(self) -> str:
        return str(self.args[0])


class OperatorError(TesseraError, ValueError):
    """An array operator was given arguments it cannot use (the message says which)."""


# --- attached files ----------------------------------------------------------------------


class AttachError(TesseraError, ValueError):
    """Files could not be attached (not HDF5, no tables, layouts that differ)."""


class AttachedFileError(TesseraError, OSError):
    """An attached file is missing, unreadable or no longer what was attached."""


class IndexFileError(DamagedStorageError):
    """A sidecar index file is torn, corrupt, foreign or of another version."""


# --- load and export --------------------------------------------------------------------


class LoadError(TesseraError, ValueError):
    """A file cannot be loaded as asked: its format, type, shape or content (the message names
    the file and what is wrong); nothing of the load is kept."""


class ExportError(TesseraError, ValueError):
    """An object or result cannot be exported as asked (format, target, type)."""


class CancelledError(TesseraError):
    """A long operation was cancelled (Ctrl-C or ``Cancel.cancel()``); nothing of it was kept."""


# --- scale-out ---------------------------------------------------------------------------


class ClusterError(TesseraError):
    """Parallel work on a Dask cluster failed for the cluster's sake (lost, or a task kept
    killing its workers); nothing of the operation was committed."""


# --- the server and its clients -----------------------------------------------------------


class ServerError(TesseraError):
    """A served database could not be reached, or answered with an error of its own."""


class AccessDeniedError(ServerError, PermissionError):
    """The server refused: no token, an unknown or revoked one, or rights that do not allow it."""


# --- benchmarks ----------------------------------------------------------------------------


class BenchmarkError(TesseraError):
    """A benchmark or its peer could not be run, or the systems disagreed."""
