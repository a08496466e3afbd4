"""The catalog: one SQLite file (WAL mode) naming every object in the database.

Objects of every kind (plain tables, arrays, streams, collections, attached
files, ...) share one case-insensitive namespace. Each has a kind, a spec
(JSON, owned by the subpackage of that kind), creation and modification
times, and the format version it was written with.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tesseradb.errors import (
    FormatVersionError,
    InvalidNameError,
    NotADatabaseError,
    ObjectExistsError,
    ObjectNotFoundError,
    ReadOnlyError,
)

__all__ = ["CATALOG_FILE", "FORMAT_VERSION", "Catalog", "CatalogObject", "validate_name"]

CATALOG_FILE = "catalog.sqlite"
FORMAT_VERSION = 1
# SQLite's application_id marks the file as ours ("TSDB").
APPLICATION_ID = 0x54534442
MAX_NAME_LENGTH = 128
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_reserved_words: frozenset[str] | None = None


def _reserved() -> frozenset[str]:
    """DuckDB's keywords that cannot name a table without quoting: the reserved ones, and
    those of the type/function category its grammar cannot read after FROM (``at``,
    ``left``, ``glob``; ``map`` and ``struct`` it can)."""
    global _reserved_words
    if _reserved_words is None:
        import duckdb

        con = duckdb.connect(":memory:")
        try:
            rows = con.execute(
                "SELECT keyword_name, keyword_category FROM duckdb_keywords() "
                "WHERE keyword_category IN ('reserved', 'type_function')"
            ).fetchall()
            words = set()
            for word, category in rows:
                if category == "reserved":
                    words.add(word.lower())
                    continue
                try:
                    con.extract_statements(f"SELECT * FROM {word} JOIN {word} USING (x)")
                except duckdb.Error:
                    words.add(word.lower())
        finally:
            con.close()
        _reserved_words = frozenset(words)
    return _reserved_words


def validate_name(name: object, what: str = "object") -> str:
    """Return ``name`` if it is a plain SQL identifier; raise :class:`InvalidNameError` otherwise."""
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} name must be a string, not {type(name).__name__}")
    if not name:
        raise InvalidNameError(f"{what} name is empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"{what} name {name[:20]!r}... is {len(name)} characters; at most {MAX_NAME_LENGTH}"
        )
    if not _IDENTIFIER.fullmatch(name):
        bad = next(
            (i for i, ch in enumerate(name) if not (ch.isascii() and (ch.isalnum() or ch == "_"))),
            0,
        )
        reason = (
            "starts with a digit"
            if name[0].isdigit()
            else f"has {name[bad]!r} at position {bad + 1}"
        )
        raise InvalidNameError(
            f"invalid {what} name {name!r}: it {reason}; names are SQL identifiers "
            f"(letters, digits and underscores, not starting with a digit)"
        )
    if name.lower() in _reserved():
        raise InvalidNameError(f"invalid {what} name {name!r}: it is a reserved SQL keyword")
    return name


@dataclass(frozen=True)
class CatalogObject:
    name: str
    kind: str
    spec: dict[str, Any]
    created: str
    modified: str
    format_version: int


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS objects (
    name           TEXT NOT NULL PRIMARY KEY COLLATE NOCASE,
    kind           TEXT NOT NULL,
    spec           TEXT NOT NULL,
    created        TEXT NOT NULL,
    modified       TEXT NOT NULL,
    format_version INTEGER NOT NULL
);
"""
# An object is *pending* from its catalog entry until its creator says it is whole (a
# load's array after its data). Other processes do not see it; a writer opening the
# database drops what a killed one left pending (it was never acknowledged). (Made by every
# writer as it opens: catalogs written before pending objects lack it.)
_PENDING = "CREATE TABLE IF NOT EXISTS pending (name TEXT NOT NULL PRIMARY KEY COLLATE NOCASE)"


def with_article(kind: str) -> str:
    """``kind`` after its indefinite article, for messages: "an array", "a stream"."""
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Catalog:
    """Access to ``catalog.sqlite``; safe to share between threads."""

    def __init__(
        self,
        directory: Path,
        read_only: bool = False,
        create: bool = False,
        sole_writer: bool = False,
    ) -> None:
        """``sole_writer``: the caller holds the database's writer lock, so no other
        connection commits to this catalog while it is open."""
        self.path = directory / CATALOG_FILE
        self.read_only = read_only
        self.sole_writer = sole_writer and not read_only
        self._lock = threading.RLock()
        # get()'s rows by the name asked for, valid while no connection has committed:
        # this one's commits are counted, others' change SQLite's data_version (asking it
        # costs as much as the look-up, so a sole writer does not)
        self._rows: dict[str, tuple[Any, ...] | None] = {}
        # peek()'s objects, parsed from those rows once (a spec's JSON costs ~10 µs, and
        # every statement looks its tables up)
        self._peeked: dict[str, CatalogObject] = {}
        self._rows_at: tuple[int, int] | None = None
        self._commits = 0
        self._mine: set[str] = set()  # lower names this instance made pending (it sees them)
        self._hidden: frozenset[str] = frozenset()  # others' pending names, as of _rows_at
        if create:
            self._con = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._initialise()
        else:
            uri = f"file:{self.path}?mode={'ro' if read_only else 'rw'}"
            try:
                self._con = sqlite3.connect(
                    uri, uri=True, check_same_thread=False, isolation_level=None
                )
                self._check()
            except sqlite3.DatabaseError as err:
                raise NotADatabaseError(
                    f"{directory} is not a TesseraDB database: {self.path.name} is unreadable ({err})"
                ) from err
        self._con.execute("PRAGMA busy_timeout = 10000")

    def _initialise(self) -> None:
        con = self._con
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = FULL")
        con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        con.executescript(_SCHEMA)
        con.execute(_PENDING)
        with self.transaction() as tx:
            tx.execute(
                "INSERT OR IGNORE INTO meta VALUES ('format_version', ?)", (str(FORMAT_VERSION),)
            )
            tx.execute("INSERT OR IGNORE INTO meta VALUES ('created', ?)", (_now(),))

    def _check(self) -> None:
        (app_id,) = self._con.execute("PRAGMA application_id").fetchone()
        if app_id != APPLICATION_ID:
            raise NotADatabaseError(f"{self.path} is an SQLite file but not a TesseraDB catalog")
        row = self._con.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > FORMAT_VERSION:
            raise FormatVersionError(
                f"{self.path.parent} has format version {version}, newer than this TesseraDB "
                f"understands ({FORMAT_VERSION}); upgrade tesseradb to open it"
            )
        if not self.read_only:
            self._con.execute("PRAGMA synchronous = FULL")
            self._con.execute(_PENDING)

    def setting(self, key: str) -> str | None:
        """A database-wide setting recorded when the database was made (``storage``)."""
        with self._lock:
            row = self._con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def record_setting(self, key: str, value: str) -> None:
        with self.transaction() as tx:
            tx.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @property
    def format_version(self) -> int:
        row = self._con.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._con.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One SQLite transaction: everything in the block commits together or not at all."""
        if self.read_only:
            raise ReadOnlyError(
                f"cannot change the catalog of {self.path.parent}: opened read-only"
            )
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            try:
                try:
                    yield self._con
                except BaseException:
                    self._con.execute("ROLLBACK")
                    raise
                self._con.execute("COMMIT")
            finally:
                self._commits += 1  # (get()'s cached rows may be stale)

    # --- objects --------------------------------------------------------------
    def _refresh(self) -> None:
        """Forget cached rows if any connection committed since they were read (with the
        lock held)."""
        data_version = 0
        if not self.sole_writer:
            (data_version,) = self._con.execute("PRAGMA data_version").fetchone()
        if (self._commits, data_version) != self._rows_at:
            self._rows.clear()
            self._peeked.clear()
            self._rows_at = (self._commits, data_version)
            self._hidden = frozenset() if self.sole_writer else self._pending_of_others()

    def _pending_of_others(self) -> frozenset[str]:
        try:
            rows = self._con.execute("SELECT name FROM pending").fetchall()
        except sqlite3.OperationalError:  # written before pending objects: none
            return frozenset()
        return frozenset(name.lower() for (name,) in rows) - self._mine

    def get(self, name: str) -> CatalogObject | None:
        with self._lock:
            self._refresh()
            if name in self._rows and not self._con.in_transaction:
                row = self._rows[name]
            else:  # (inside a transaction, its own changes are read)
                row = self._con.execute(
                    "SELECT name, kind, spec, created, modified, format_version FROM objects WHERE name = ?",
                    (name,),
                ).fetchone()
                if row is not None and row[0].lower() in self._hidden:
                    row = None
                if len(self._rows) > 10_000:  # (names asked for that do not exist, say)
                    self._rows.clear()
                    self._peeked.clear()
                if not self._con.in_transaction:
                    self._rows[name] = row
        return _object(row) if row else None  # (a new object each time: callers may change it)

    def peek(self, name: str) -> CatalogObject | None:
        """The object of that name, as :meth:`get` gives it, but shared: the caller only
        reads it (its spec is parsed once per change of the catalog, not per call)."""
        with self._lock:
            self._refresh()
            if name in self._rows and not self._con.in_transaction:
                row = self._rows[name]
                if row is None:
                    return None
                obj = self._peeked.get(name)
                if obj is None:
                    obj = self._peeked[name] = _object(row)
                return obj
        return self.get(name)

    def require(self, name: str, kind: str | None = None) -> CatalogObject:
        """The object of that name (and kind), or :class:`ObjectNotFoundError` with suggestions."""
        import difflib

        obj = self.get(name)
        if obj is not None and (kind is None or obj.kind == kind):
            return obj
        if obj is not None:
            raise ObjectNotFoundError(f"{name!r} is a {obj.kind}, not a {kind}")
        names = [o.name for o in self.objects(kind)]
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        what = kind or "object"
        raise ObjectNotFoundError(f"no {what} named {name!r} in {self.path.parent}{hint}", close)

    def objects(self, kind: str | None = None) -> list[CatalogObject]:
        query = "SELECT name, kind, spec, created, modified, format_version FROM objects"
        args: tuple[Any, ...] = ()
        if kind is not None:
            query += " WHERE kind = ?"
            args = (kind,)
        with self._lock:
            self._refresh()
            rows = self._con.execute(query + " ORDER BY name", args).fetchall()
            hidden = self._hidden
        return [_object(r) for r in rows if r[0].lower() not in hidden]

    def pending(self) -> list[CatalogObject]:
        """The objects left pending by an earlier writer (none are this instance's own)."""
        with self._lock:
            rows = self._con.execute(
                "SELECT name, kind, spec, created, modified, format_version FROM objects "
                "WHERE name IN (SELECT name FROM pending) ORDER BY name"
            ).fetchall()
        return [_object(r) for r in rows if r[0].lower() not in self._mine]

    def settle(self, name: str) -> None:
        """The pending object ``name`` is whole: every process sees it from now on."""
        with self.transaction() as con:
            con.execute("DELETE FROM pending WHERE name = ?", (name,))
        self._mine.discard(name.lower())

    def create(
        self,
        name: str,
        kind: str,
        spec: dict[str, Any],
        tx: sqlite3.Connection | None = None,
        pending: bool = False,
    ) -> CatalogObject:
        """Add an object; ``pending``: seen only by this instance until :meth:`settle`."""
        validate_name(name, kind)
        now = _now()
        row = (name, kind, json.dumps(spec, sort_keys=True), now, now, FORMAT_VERSION)

        def insert(con: sqlite3.Connection) -> None:
            existing = con.execute(
                "SELECT name, kind FROM objects WHERE name = ?", (name,)
            ).fetchone()
            if existing:
                raise ObjectExistsError(
                    f"cannot create {kind} {name!r}: {existing[0]!r} already exists ({with_article(existing[1])})"
                )
            con.execute("INSERT INTO objects VALUES (?, ?, ?, ?, ?, ?)", row)
            if pending:
                con.execute("INSERT OR REPLACE INTO pending VALUES (?)", (name,))

        if tx is not None:
            insert(tx)
        else:
            with self.transaction() as con:
                insert(con)
        if pending:  # (only once it is in: a refused name is not this instance's)
            self._mine.add(name.lower())
        return CatalogObject(name, kind, spec, now, now, FORMAT_VERSION)

    def update_spec(self, name: str, spec: dict[str, Any]) -> None:
        with self.transaction() as con:
            cur = con.execute(
                "UPDATE objects SET spec = ?, modified = ? WHERE name = ?",
                (json.dumps(spec, sort_keys=True), _now(), name),
            )
            if cur.rowcount == 0:
                raise ObjectNotFoundError(f"no object named {name!r} in {self.path.parent}")

    def touch(self, name: str) -> None:
        with self.transaction() as con:
            con.execute("UPDATE objects SET modified = ? WHERE name = ?", (_now(), name))

    def drop(self, name: str, tx: sqlite3.Connection | None = None) -> None:
        def delete(con: sqlite3.Connection) -> None:
            if con.execute("DELETE FROM objects WHERE name = ?", (name,)).rowcount == 0:
                raise ObjectNotFoundError(f"no object named {name!r} in {self.path.parent}")
            con.execute("DELETE FROM pending WHERE name = ?", (name,))
            self._mine.discard(name.lower())

        if tx is not None:
            delete(tx)
        else:
            with self.transaction() as con:
                delete(con)

    def sync_kinds(
        self, kinds: tuple[str, ...], present: dict[str, tuple[str, dict[str, Any]]]
    ) -> None:
        """Make the objects of ``kinds`` exactly ``present`` (name -> (kind, spec)), keeping the rest.

        Plain tables are created, altered and dropped by SQL in DuckDB's file;
        this brings the catalog in line after such a statement.
        """
        now = _now()
        with self.transaction() as con:
            rows = con.execute(
                f"SELECT name, kind, spec FROM objects WHERE kind IN ({','.join('?' * len(kinds))})",
                kinds,
            ).fetchall()
            current = {name.lower(): (name, kind, spec) for name, kind, spec in rows}
            for key, (name, _kind, _spec) in current.items():
                if key not in {n.lower() for n in present}:
                    con.execute("DELETE FROM objects WHERE name = ?", (name,))
            for name, (kind, spec) in present.items():
                text = json.dumps(spec, sort_keys=True)
                old = current.get(name.lower())
                if old is None:
                    con.execute(
                        "INSERT OR IGNORE INTO objects VALUES (?, ?, ?, ?, ?, ?)",
                        (name, kind, text, now, now, FORMAT_VERSION),
                    )
                elif old[1] != kind or old[2] != text:
                    con.execute(
                        "UPDATE objects SET kind = ?, spec = ?, modified = ? WHERE name = ?",
                        (kind, text, now, old[0]),
                    )


def _object(row: tuple[Any, ...]) -> CatalogObject:
    name, kind, spec, created, modified, version = row
    return CatalogObject(name, kind, json.loads(spec), created, modified, int(version))
