"""A collection of JSON objects on one backend under one mapping, and Argo/SQL over it.

:class:`Collection` runs each statement as one transaction on its backend:
it plans the WHERE clause into a set of objids (:mod:`._plan`), fetches the
rows of those objects (only the projected keys' subtrees when there is a
projection), packed by the backend into one JSON text per table where it
can, and rebuilds the objects (``Mapping.documents``). Joins, aggregates,
ORDER BY and LIMIT are SQL on the backend too; flattening and rebuilding
objects are Rust kernels. Small inserts go to the mapping's delta tables,
which the collection merges into the main ones once they have grown; a big
fetch on SQLite runs as two halves at once on two connections.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from tesseradb._core import flatten_documents
from tesseradb._lifetime import Lifetime, refuses_when_closed

if TYPE_CHECKING:
    from tesseradb.documents._argosql import Statement
    from tesseradb.progress import Cancel, ProgressLike
from tesseradb.checks import Finding, Verified
from tesseradb.documents._argosql import parse_statement
from tesseradb.documents._backends import Backend
from tesseradb.documents._keys import flatten_document, parse_document
from tesseradb.documents._mappings import Mapping
from tesseradb.documents._statements import Statements, batched
from tesseradb.errors import (
    ArgoSyntaxError,
    DocumentBackendError,
    DocumentError,
    InvalidArgumentError,
    ObjectExistsError,
    TesseraError,
    open_input,
)

__all__ = ["META_TABLE", "Collection"]

META_TABLE = "argo_meta"
# how long a reader whose catalog names a collection its snapshot lacks waits for a newer one
SNAPSHOT_WAIT = 5.0
LOAD_BATCH = 20_000  # objects flattened and inserted at a time by bulk loads
# The delta tables are merged into the main ones once they hold more objects than
# this, or than DELTA_SHARE of the objids handed out, whichever is more: a merge
# rewrites index pages all over the main tables, so it waits until it can share
# that cost among many objects, and the delta stays small enough that its own
# pages are few.
DELTA_OBJECTS = 10_000
DELTA_SHARE = 1 / 32


@refuses_when_closed  # (Statements is decorated too: the guard covers a class's own)
class Collection(Statements):
    """A JSON collection (Argo): insert, query with Argo/SQL, bulk load."""

    _lifetime: Lifetime | None = None  # (set by the database that opened it)

    def _check_open(self) -> None:
        if self._lifetime is not None:
            self._lifetime.check(f"collection {self.name!r}")

    def __init__(self, name: str, backend: Backend, mapping: Mapping) -> None:
        self.name = name
        self.backend = backend
        self.mapping = mapping
        self._upgraded = False  # upgrade() has run
        self.on_write: Callable[[str], None] | None = None  # the database's modified time
        self._counts_delta = True  # argo_meta has delta_objects

    def __repr__(self) -> str:
        return (
            f"Collection({self.name!r}, backend={self.backend.kind}, mapping={self.mapping.name})"
        )

    # --- creation (called by the database) ------------------------------------------
    def _ensure_meta(self, counts_delta: bool) -> None:
        """Create ``argo_meta``, or add ``delta_objects`` to one made before the delta tables.

        ``counts_delta``: what :meth:`_meta_counts_delta` found, before the
        caller's write transaction began.
        """
        t = self.backend.types
        if not self.backend.table_exists(META_TABLE):
            self.backend.execute(
                f"CREATE TABLE {META_TABLE} (collection {t.key} NOT NULL PRIMARY KEY, "
                f"mapping {t.key} NOT NULL, next_objid {t.bigint} NOT NULL, "
                f"delta_objects {t.bigint} NOT NULL)"
            )
        elif not counts_delta:
            self.backend.execute(
                f"ALTER TABLE {META_TABLE} ADD COLUMN delta_objects {t.bigint} DEFAULT 0"
            )

    def _meta_counts_delta(self) -> bool:
        """Whether ``argo_meta`` has ``delta_objects`` (False also when there is none).

        A probe in a transaction of its own: on PostgreSQL a failed statement
        ends the transaction it is in.
        """
        try:
            with self.backend.transaction():
                self.backend.execute(f"SELECT delta_objects FROM {META_TABLE} WHERE 1 = 0")
            return True
        except DocumentBackendError:
            return False

    def _create(self) -> None:
        """Create the collection's tables and its objid counter (one transaction)."""
        counts_delta = self._meta_counts_delta()
        with self.backend.transaction(write=True):
            self._ensure_meta(counts_delta)
            if self.mapping.exists():
                raise ObjectExistsError(
                    f"cannot create collection {self.name!r}: its tables already exist on "
                    f"{self.backend.describe()}"
                )
            self.backend.execute(f"DELETE FROM {META_TABLE} WHERE collection = ?", [self.key])
            self.backend.execute(
                f"INSERT INTO {META_TABLE} (collection, mapping, next_objid, delta_objects) "
                "VALUES (?, ?, 1, 0)",
                [self.key, self.mapping.name],
            )
            self.mapping.create()
        self._upgraded = True

    def _drop(self) -> None:
        with self.backend.transaction(write=True):
            self.mapping.drop()
            self.backend.execute(f"DELETE FROM {META_TABLE} WHERE collection = ?", [self.key])

    @property
    def key(self) -> str:
        return self.name.lower()

    @contextlib.contextmanager
    def transaction(self, write: bool = False) -> Iterator[None]:
        """A transaction on the backend (joining an outer one) that knows whether the delta holds rows."""
        with self.backend.transaction(write=write):
            self._refresh()
            yield
        if write and self.on_write is not None:
            self.on_write(self.name)

    def _refresh(self) -> None:
        """Read whether the delta tables hold rows (inside a transaction)."""
        self.mapping.delta = self._meta()[1] > 0

    def _meta(self) -> tuple[int, int]:
        """``(next_objid, delta_objects)`` of the collection."""
        delta = "delta_objects" if self._counts_delta else "0"
        rows = self.backend.execute(
            f"SELECT next_objid, {delta} FROM {META_TABLE} WHERE collection = ?", [self.key]
        )
        if not rows:
            raise DocumentError(f"collection {self.name!r} has lost its objid counter")
        return int(rows[0][0]), int(rows[0][1])

    def _catch_up(self) -> None:
        """(a read-only database reading the writer's snapshots of its backend) Wait up to
        ``SNAPSHOT_WAIT`` seconds for a snapshot that holds this collection: the catalog
        names a collection as soon as the writer has made it, its snapshot follows."""
        if not self.backend.reads_snapshots:
            return
        deadline = time.monotonic() + SNAPSHOT_WAIT
        while not self._in_backend():
            if not self.backend.wait_for_newer(deadline - time.monotonic()):
                raise DocumentBackendError(
                    f"collection {self.name!r} is not yet in the snapshot of its backend "
                    f"{self.backend.describe()} that readers read: the process writing "
                    f"the database has not published it in {SNAPSHOT_WAIT:.0f} s; try again"
                )

    def _in_backend(self) -> bool:
        if not self.backend.table_exists(META_TABLE):
            return False
        rows = self.backend.execute(f"SELECT 1 FROM {META_TABLE} WHERE collection = ?", [self.key])
        return bool(rows)

    def _upgrade(self) -> None:
        """Bring a collection made before the delta tables up to date (once per process).

        Such a collection has no ``argo_meta.delta_objects`` and no delta
        tables: a writable database adds them; a read-only one reads the
        collection as it is, with an empty delta.
        """
        if self._upgraded:
            return
        counts_delta = self._meta_counts_delta()
        if not self.backend.read_only:
            with self.backend.transaction(write=True):
                self._ensure_meta(counts_delta)
                counts_delta = True
                missing = {
                    table: values
                    for table, values in self.mapping.part(delta=True).items()
                    if not self.backend.table_exists(table)
                }
                if missing:
                    self.mapping.create_tables(missing)
        self._counts_delta = counts_delta
        self._upgraded = True

    def count(self) -> int:
        """How many objects the collection holds."""
        with self.transaction():
            sql = f"SELECT COUNT(*) FROM ({self.mapping.objids_sql()}) AS argo_all"
            return int(self.backend.execute(sql)[0][0])

    def __len__(self) -> int:
        return self.count()

    def check(self) -> tuple[list[Finding], Verified]:
        """Findings about the collection: every object rebuilt from its rows, and counted.

        A damaged backend file is named by the backend's own check (see
        ``Database.check``); collections are not repaired here: their backend
        is a real database, restored with its own tools.
        """
        try:
            expected = self.count()
            rebuilt = len(self.find())
            shredded = expected
            if self.mapping.keeps_text:  # its objects are kept twice: count both forms
                with self.transaction():
                    sql = f"SELECT COUNT(*) FROM ({self.mapping.shredded_objids_sql()}) AS argo_all"
                    shredded = int(self.backend.execute(sql)[0][0])
        except TesseraError as err:
            return [Finding(self.name, f"tables on {self.backend.describe()}", str(err))], Verified(
                self.name, "collection", "unreadable"
            )
        findings = []
        if shredded != expected:
            findings.append(
                Finding(
                    self.name,
                    f"tables on {self.backend.describe()}",
                    f"{expected:,} objects kept whole but {shredded:,} in the shredded tables",
                )
            )
        if rebuilt != expected:
            findings.append(
                Finding(
                    self.name,
                    f"tables on {self.backend.describe()}",
                    f"{expected:,} objects counted but {rebuilt:,} rebuilt",
                )
            )
        return findings, Verified(self.name, "collection", f"{rebuilt:,} objects rebuilt")

    def find(
        self, where: str | None = None, params: Any = None, *, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The objects matching an Argo/SQL predicate (``"num BETWEEN ? AND ?"``), in objid order."""
        if where is not None and not isinstance(where, str):
            raise InvalidArgumentError(
                f"collection {self.name!r}: find's where is an Argo/SQL predicate (a str), "
                f"not {type(where).__name__}"
            )
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 0
        ):
            raise InvalidArgumentError(
                f"collection {self.name!r}: find's limit is a count of objects (an int >= 0), "
                f"not {limit!r}"
            )
        suffix = f" LIMIT {limit}" if limit is not None else ""
        return self._run(self._with_predicate("find", "SELECT * FROM", where, suffix, params))

    def delete(self, where: str, params: Any = None) -> int:
        """Remove the objects matching an Argo/SQL predicate (``"age < ?"``), all in one
        transaction; how many were removed."""
        if not isinstance(where, str) or not where.strip():
            raise InvalidArgumentError(
                f"collection {self.name!r}: delete's where is an Argo/SQL predicate (a "
                f"non-empty str), not {where!r}; to remove every object, drop the collection "
                "or run db.argo('DELETE FROM ...')"
            )
        statement = self._with_predicate("delete", "DELETE FROM", where, "", params)
        return int(self._run(statement)[0]["deleted"])

    def _with_predicate(
        self, what: str, head: str, where: str | None, tail: str, params: Any
    ) -> Statement:
        """``head`` this collection ``WHERE where tail`` parsed; a syntax error in the user's
        predicate says where in the predicate, not in the statement made around it."""
        prefix = f"{head} `{self.name}`" + (" WHERE " if where else "")
        try:
            return parse_statement(prefix + (where or "") + tail, params)
        except ArgoSyntaxError as err:
            if not where:
                raise
            line, column = err.line, err.column
            if line == 1:
                column = max(column - len(prefix), 1)
            raise ArgoSyntaxError(
                f"{what} on collection {self.name!r}: the predicate {where!r}: {err.reason}",
                line,
                column,
            ) from None

    # --- writing ------------------------------------------------------------------
    def _allocate(self, count: int) -> int:
        """The first of ``count`` fresh objids (inside the caller's transaction)."""
        self.backend.execute(
            f"UPDATE {META_TABLE} SET next_objid = next_objid + ? WHERE collection = ?",
            [count, self.key],
        )
        return self._meta()[0] - count

    def _grow_delta(self, count: int) -> None:
        """Count ``count`` objects written to the delta; merge it once it is big enough."""
        self.backend.execute(
            f"UPDATE {META_TABLE} SET delta_objects = delta_objects + ? WHERE collection = ?",
            [count, self.key],
        )
        next_objid, delta_objects = self._meta()
        self.mapping.delta = True
        if delta_objects > max(DELTA_OBJECTS, next_objid * DELTA_SHARE):
            self.compact()

    def compact(self) -> None:
        """Move the delta's rows into the main tables (one transaction)."""
        with self.transaction(write=True):
            if self.mapping.delta:
                self.mapping.merge_delta()
                self.backend.execute(
                    f"UPDATE {META_TABLE} SET delta_objects = 0 WHERE collection = ?", [self.key]
                )
                self.mapping.delta = False

    def _flatten(self, batch: Sequence[tuple[str, Any]], first: int) -> list[list[tuple[Any, ...]]]:
        """The rows of ``(where, dict or JSON text)`` items, objids from ``first`` on.

        JSON texts and plain dicts are flattened by the Rust kernel; what it
        refuses (what it is not sure of) takes the Python path, which raises
        the error naming ``where`` for bad input.
        """
        limits = self.backend.limits
        rows, refused = flatten_documents(
            [doc for _, doc in batch],
            first,
            self.mapping.wide,
            limits.as_tuple(),
            self.backend.rows_per_insert,
            whole=self.mapping.keeps_text,
            negative_zero=self.backend.keeps_negative_zero,
        )
        for position in refused:
            where, doc = batch[position]
            value = parse_document(doc, where) if isinstance(doc, str | bytes) else doc
            leaves = flatten_document(value, f"collection {self.name!r}, {where}", limits)
            self.mapping.add_rows(rows, first + position, leaves)
        return rows

    def insert(self, document: dict[str, Any] | str) -> int:
        """Insert one object (a dict or JSON text); its objid."""
        return self.insert_many([document])[0]

    def insert_many(self, documents: Iterable[dict[str, Any] | str | bytes]) -> list[int]:
        """Insert objects (dicts or JSON texts) in one transaction; their objids.

        If object k is not acceptable, nothing of this call is kept and the
        error names k (counted from 1).
        """
        if isinstance(documents, (str, bytes, dict)) or not hasattr(documents, "__iter__"):
            raise InvalidArgumentError(
                f"collection {self.name!r}: insert_many takes an iterable of objects (dicts or "
                f"JSON texts), not {type(documents).__name__}; insert() takes one"
            )
        return self._insert_all((f"object {k}", doc) for k, doc in enumerate(documents, start=1))

    def load_jsonl(
        self,
        source: str | os.PathLike[str] | IO[Any],
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> int:
        """Bulk-load JSON lines (a path or a text/binary file object), one transaction; the count.

        Streamed in batches, never whole in memory. Blank lines are skipped;
        an error names the line (the object's position in the load).
        ``progress`` counts the bytes read (of a path's size); ``cancel`` stops
        the load, whose transaction then keeps nothing.
        """
        from tesseradb.progress import tracker

        def numbered(
            handle: Iterable[str | bytes], watch: Any
        ) -> Iterator[tuple[str, str | bytes]]:
            for number, line in enumerate(handle, start=1):
                if not isinstance(line, (str, bytes)):
                    raise InvalidArgumentError(
                        f"collection {self.name!r}, line {number}: a line of JSON text, "
                        f"not {type(line).__name__}"
                    )
                watch.advance(len(line))
                if line.strip():
                    yield f"line {number}", line
            watch.check()  # the transaction commits once the lines run out

        if not (isinstance(source, str | os.PathLike)) and (
            isinstance(source, (bytes, bytearray))
            or not (hasattr(source, "read") or hasattr(source, "__iter__"))
        ):
            raise InvalidArgumentError(
                f"collection {self.name!r}: load_jsonl takes a path or an open file (or lines), "
                f"not {type(source).__name__}"
            )
        task = f"load JSON lines into {self.name}"
        with tracker(task, None, "bytes", progress, cancel, "collection.load_jsonl") as watch:
            if isinstance(source, str | os.PathLike):
                with open_input(source, "JSON lines file") as handle:
                    watch.set_total(os.fstat(handle.fileno()).st_size)
                    return len(self._insert_all(numbered(handle, watch)))
            return len(self._insert_all(numbered(source, watch)))

    def _insert_all(self, items: Iterable[tuple[str, Any]]) -> list[int]:
        """Insert ``(where, dict or JSON text)`` items in batches, in one transaction.

        An insert that fits in one batch goes to the delta tables. The
        batches of a bigger load go to the main tables; when the collection
        is empty, the load drops their indexes first and builds them at the
        end (sorting once is far cheaper than keeping them up to date row by
        row), where the backend's DDL is part of the transaction, so a failed
        load still leaves nothing behind.
        """
        batches = batched(items, LOAD_BATCH)
        first_batch = next(batches, None)
        if first_batch is None:
            return []
        second_batch = next(batches, None)
        with self.transaction(write=True):
            if second_batch is None:  # one batch: into the delta
                start = self._allocate(len(first_batch))
                self.mapping.insert_rows(self._flatten(first_batch, start), delta=True)
                self._grow_delta(len(first_batch))
                return list(range(start, start + len(first_batch)))
            main = self.mapping.part(delta=False)
            rebuild_indexes = self.backend.transactional_ddl and self._is_empty()
            if rebuild_indexes:
                self.mapping.drop_indexes(main)
            # (Flattening the next batch on the worker thread while this one was
            # inserted made a 1M-object NoBench load slower, 66 -> 71 s: both steps
            # hold the GIL for most of their work, and handing it to and fro cost
            # more than the parts that run without it gained.)
            objids: list[int] = []
            for batch in itertools.chain((first_batch, second_batch), batches):
                start = self._allocate(len(batch))
                self.mapping.insert_rows(self._flatten(batch, start), delta=False)
                objids += range(start, start + len(batch))
            if rebuild_indexes:
                self.mapping.create_indexes(main)
        if rebuild_indexes:
            self.backend.after_bulk_load(list(main))
        return objids

    def _is_empty(self) -> bool:
        return not any(
            self.backend.execute(f"SELECT 1 FROM {table} LIMIT 1")
            for table in self.mapping.all_tables()
        )
