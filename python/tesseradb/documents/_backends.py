"""The relational backends collections live on: SQLite, DuckDB, PostgreSQL, MySQL/MariaDB.

A :class:`Backend` hides what differs between them (driver, parameter
style, column types, bulk insert, the one regular-expression test the
mappings need) behind one small interface; the mappings write portable SQL
with ``?`` placeholders. Every statement of a collection runs inside
:meth:`Backend.transaction`, which serialises use of the one connection. The
backends themselves are in ``_embedded.py`` and ``_server_backends.py``;
``_store.open_backend`` picks one.
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tesseradb.documents._keys import DEFAULT_LIMITS, DocumentLimits
from tesseradb.errors import DocumentBackendError, ReadOnlyError

__all__ = [
    "DUCKDB_FILE",
    "DUCKDB_SNAPSHOTS",
    "EMBEDDED_BACKENDS",
    "SQLITE_FILE",
    "Backend",
    "ColumnTypes",
]

EMBEDDED_BACKENDS = ("sqlite", "duckdb")
# the embedded backends' files, in the database's documents/ folder
SQLITE_FILE = "documents.sqlite"
DUCKDB_FILE = "documents.duckdb"
# what readers in other processes open instead of DUCKDB_FILE (tesseradb._snapshots)
DUCKDB_SNAPSHOTS = "documents.snapshots"


@dataclass(frozen=True)
class ColumnTypes:
    """The SQL types of the mapping columns on one backend."""

    objid: str
    key: str  # keystr: compared by code point, indexable
    text: str  # valstr
    double: str
    bigint: str
    boolean: str
    small: str
    blob: str = "BLOB"  # a whole object's packed JSON text (the hybrid mapping)

    def of(self, column: str) -> str:
        """The type of one of the mapping's value columns."""
        return {
            "valstr": self.text,
            "valnum": self.double,
            "valint": self.bigint,
            "valbool": self.boolean,
            "valkind": self.small,
        }[column]


class Backend(ABC):
    """One connection to a relational backend holding collections."""

    kind: str
    types: ColumnTypes
    # DDL inside a transaction is rolled back with it (MariaDB commits at DDL), so
    # a bulk load may drop and rebuild indexes without giving up atomicity.
    transactional_ddl = True
    # Tables with PRIMARY KEY (objid, keystr): one attribute of an object is one key
    # lookup and no separate objid index is kept (a flattened key is unique in its
    # object). SQLite (WITHOUT ROWID) and InnoDB also store rows in that order, so
    # an object's rows sit together. DuckDB's keys are costly ART indexes: not there.
    keyed_by_object = True
    # Reads rows from an index alone when it holds every column asked for (SQLite,
    # PostgreSQL): argo3's key indexes then carry whole rows. DuckDB scans columns
    # (its ART indexes serve point lookups only); MariaDB's string indexes are
    # prefixes, which cover nothing, and its keys have no room for more columns.
    covering_indexes = True
    # ``keystr = ?`` is a seek in an index that leads with keystr. DuckDB's ART
    # indexes are not used for a prefix of their columns: there it is a scan.
    seeks_by_key = True
    # The text pack_rows makes of a double reads back as the same double. Where it
    # does not (SQLite), rows holding doubles that are not integers are fetched
    # as plain rows beside the packed ones.
    packs_doubles = True
    # A double column gives -0.0 back (SQLite and MariaDB store it as 0.0; the
    # hybrid mapping's object texts then write 0.0 too, so both forms agree).
    keeps_negative_zero = True
    # Rows whose values one tuple of insert_rows may hold, one after another.
    rows_per_insert = 1
    # What one document may hold here (checked at the door of every ingest path).
    limits: DocumentLimits = DEFAULT_LIMITS
    table_options = ""
    # reads snapshots a writer in another process publishes, not the live data
    reads_snapshots = False

    def __init__(self, read_only: bool = False) -> None:
        self.read_only = read_only
        self._lock = threading.RLock()
        self._depth = 0
        self._writing = False  # the open transaction may write

    # --- what subclasses provide ---------------------------------------------------
    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Execute one statement; its rows (empty for statements without)."""

    def _begin(self) -> None:
        self._run("BEGIN", ())

    def _commit(self) -> None:
        self._run("COMMIT", ())

    def _rollback(self) -> None:
        self._run("ROLLBACK", ())

    @abstractmethod
    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        """Insert many rows at once (inside the current transaction).

        Each tuple holds one row, or up to :attr:`rows_per_insert` rows' values
        one after another.
        """

    @abstractmethod
    def element_suffix(self, start: int) -> str:
        """SQL true where ``keystr`` from (1-based) position ``start`` on is ``<digits>]``."""

    @abstractmethod
    def table_exists(self, table: str) -> bool: ...

    @abstractmethod
    def close(self) -> None: ...

    def index_column(self, column: str) -> str:
        """How ``column`` appears in CREATE INDEX (MariaDB needs a prefix length on TEXT)."""
        return column

    def drop_index_sql(self, index: str, table: str) -> str:
        return f"DROP INDEX {index}"

    def describe(self) -> str:
        return self.kind

    def integrity_problems(self) -> list[str]:
        """What the backend's own integrity check reports ([] when whole, or when it has
        none: DuckDB verifies its block checksums as it reads, servers their own pages)."""
        return []

    def typed_null(self, column: str) -> str:
        """A NULL standing for ``column`` in a branch of a UNION that lacks it."""
        return "NULL"

    def pack_rows(self) -> str | None:
        """An aggregate packing rows into one JSON text for ``_core.rebuild_packed_documents``.

        It reads the columns of ``ROW_COLUMNS`` by name. Each row becomes
        ``[objid, keystr, ord, valstr, valnum, valint, valbool, valkind]``
        with ``valnum`` as the double's exact decimal text
        and ``valbool`` as 0 or 1. Packing in the backend makes a fetch of many
        rows one string per table instead of a tuple of Python objects per
        row, which costs more than the backend's whole lookup. None: the
        backend returns plain rows (MariaDB, whose JSON aggregates are capped
        by ``group_concat_max_len``).
        """
        return None

    def after_bulk_load(self, tables: Sequence[str]) -> None:  # noqa: B027 - nothing by default
        """Called once a bulk load into ``tables`` (which rebuilt their indexes) has committed."""

    @contextlib.contextmanager
    def twin_reader(self) -> Iterator[Callable[[str, Sequence[Any]], list[tuple[Any, ...]]] | None]:
        """A second connection reading what the open read-only transaction reads, or None.

        It lets a big fetch run as two halves at once, on both cores. It must
        only be used from another thread while this transaction is open, and
        only inside the block. None where the backend has no such thing.
        """
        yield None

    # --- shared --------------------------------------------------------------------
    def _before_statement(self) -> None:  # noqa: B027 - nothing by default
        """(lock held, no transaction open) Called before each statement or transaction."""

    def wait_for_newer(self, timeout: float) -> bool:
        """(a reader of snapshots) Wait until a snapshot newer than the one read is
        published; whether one was (its next statement reads it)."""
        return False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            if not self._depth:
                self._before_statement()
            try:
                return self._run(sql, params)
            except Exception as err:
                if isinstance(err, DocumentBackendError):
                    raise
                raise self._failed(err) from err

    def _failed(self, err: Exception) -> DocumentBackendError:
        """The error to raise for a statement the backend refused."""
        return DocumentBackendError(f"{self.describe()}: {err}")

    @contextlib.contextmanager
    def transaction(self, write: bool = False) -> Iterator[Backend]:
        """One transaction (nested calls join the outer one); rolled back on any exception."""
        if write and self.read_only:
            raise ReadOnlyError(f"{self.describe()}: the database is open read-only")
        with self._lock:
            if self._depth:
                self._depth += 1
                self._writing = self._writing or write
                try:
                    yield self
                finally:
                    self._depth -= 1
                return
            self._before_statement()
            self._begin()
            self._depth = 1
            self._writing = write
            try:
                yield self
            except BaseException:
                self._depth = 0
                with contextlib.suppress(Exception):
                    self._rollback()
                raise
            self._depth = 0
            try:
                self._commit()
            except Exception as err:
                with contextlib.suppress(Exception):
                    self._rollback()
                raise DocumentBackendError(f"{self.describe()}: commit failed: {err}") from err
