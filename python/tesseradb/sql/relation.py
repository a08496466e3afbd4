"""The contract between the SQL front end and every data model: :class:`Relation`.

A relation names itself, describes its columns as an Arrow schema, and
scans: given the columns a statement needs and a :class:`Predicate`, it
returns a stream of Arrow record batches holding *at least* the matching
rows (a superset is always allowed, a subset never). DuckDB re-applies
every filter afterwards, so pushdown changes speed, never answers.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tesseradb.errors import InvalidArgumentError
from tesseradb.sql.predicate import Predicate

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "Aggregating",
    "ArrowRelation",
    "Counting",
    "Estimate",
    "Namespace",
    "PathFiltering",
    "PathReading",
    "Ranking",
    "Relation",
    "RelationScan",
    "ScanDescribing",
    "ScanStats",
    "SessionHolding",
]


@dataclass(frozen=True)
class Estimate:
    """What a scan would read, for planning: ``None`` where unknown."""

    rows: int | None = None
    bytes: int | None = None


@runtime_checkable
class Relation(Protocol):
    """Anything the SQL front end can read as a table."""

    name: str

    def schema(self) -> pa.Schema:
        """The columns, in order, as an Arrow schema."""
        ...

    def scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> pa.RecordBatchReader:
        """Batches of a superset of the rows matching ``predicate``, with ``columns`` (all if None)."""
        ...

    def estimate(self, predicate: Predicate | None) -> Estimate:
        """Rows and bytes a scan with ``predicate`` would produce, as well as known."""
        ...


# --- capabilities: the optional parts of a relation -------------------------------------
# The engine tests for each with can() and uses it when present. A relation
# declares what it can do by having the method; the conformance suite
# (tesseradb.testing.RelationTests) checks each declared capability against the
# plain answer of a scan.


def can(relation: object, capability: type) -> bool:
    """``isinstance(relation, capability)`` for one of the capabilities below, whose
    members are methods: whether the relation has each. (typing's own check of a
    runtime-checkable protocol cost a statement 10-20 µs per capability asked.)"""
    return all(callable(getattr(relation, name, None)) for name in _methods(capability))


@functools.cache
def _methods(capability: type) -> tuple[str, ...]:
    return tuple(
        name
        for name, member in vars(capability).items()
        if not name.startswith("_") and callable(member)
    )


@runtime_checkable
class Counting(Protocol):
    """Counts matching rows without making them (an attached table's bitmap indexes)."""

    def count(self, predicate: Predicate | None) -> int | None:
        """The exact number of rows matching ``predicate``, or None if it cannot say
        without reading rows (the engine then runs the statement)."""
        ...


@runtime_checkable
class Aggregating(Protocol):
    """Answers a single-relation aggregate query from its storage (an array's chunk
    folds, a stream's found records)."""

    def aggregate(
        self,
        items: Sequence[tuple[str, str, str | None]],
        group_by: Sequence[str],
        predicate: Predicate | None,
        ambiguous: Mapping[str, Sequence[float]],
    ) -> pa.Table | None:
        """The result table of ``SELECT <items> FROM rel WHERE <predicate> GROUP BY
        <group_by>``, exactly as SQL gives it, or None to let SQL run.

        ``items`` are ``(output name, function, column or None for *)``;
        ``ambiguous`` gives, per column, values at which the predicate is not
        exact: a relation that finds a candidate row holding one returns None.
        """
        ...


@runtime_checkable
class Ranking(Protocol):
    """Reads the first rows in one column's order from an index (a stream's key orders),
    so that ``ORDER BY c LIMIT k`` over it reads those rather than every matching row."""

    def top(
        self,
        columns: Sequence[str] | None,
        predicate: Predicate | None,
        order: str,
        descending: bool,
        count: int,
        distinct: bool,
    ) -> pa.Table | None:
        """With ``columns`` (all if None), every row matching ``predicate`` exactly whose
        ``order`` value is at or before the ``count``-th such value in that order
        (``distinct``: the ``count``-th distinct value), every tie with it included; or
        None to leave the statement to a scan (as it must where ``order`` may hold
        NULLs, which sort last).

        Running ``... ORDER BY order [DESC], ... LIMIT count`` (distinct: ``SELECT
        DISTINCT`` of columns including ``order``) over these rows then gives what it
        gives over every matching row.
        """
        ...


@runtime_checkable
class SessionHolding(Protocol):
    """Keeps what its scans share (open files) for the whole of one statement."""

    def session(self) -> AbstractContextManager[Any]:
        """Entered once per statement, before its first scan, left after its last."""
        ...


@runtime_checkable
class ScanDescribing(Protocol):
    """Says what a scan would touch, for ``explain`` (segments, chunks, index bins)."""

    def describe_scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> list[str]:
        """Lines of text for ``explain``, one fact each."""
        ...


@runtime_checkable
class PathFiltering(Protocol):
    """Narrows its scans by conditions on values inside its JSON columns (a collection,
    through its mapping's indexes by path).

    Its predicates may then hold, beside its columns, the keys of
    :class:`~tesseradb.sql.paths.JsonPath` values (``doc->>'$.a'``,
    ``(doc->>'$.a')::BIGINT``) with the domain DuckDB's expression must fall
    in; the engine removes such keys for every other relation. The scan must
    still hold every row whose expression falls in the domain, whatever the
    JSON value's type (a number's text, a string cast to a number).
    """

    def path_columns(self) -> Sequence[str]:
        """The JSON columns whose paths its scans narrow by."""
        ...


@runtime_checkable
class PathReading(Protocol):
    """Gives the values DuckDB computes at paths inside its JSON columns, so that a
    lookup selecting and filtering by them is answered without DuckDB (a collection's
    point query, ``SELECT doc->>'s' AS s FROM docs WHERE (doc->>'id')::BIGINT = ?``).
    """

    def read_paths(
        self, columns: Sequence[str], predicate: Predicate | None, max_rows: int
    ) -> pa.Table | None:
        """A superset of the rows matching ``predicate``, as a table with ``columns``:
        plain columns, or keys of :class:`~tesseradb.sql.paths.JsonPath` values holding
        exactly what DuckDB computes for that expression: the text for ``->>`` (a
        string column), that text cast to BIGINT (int64) or DOUBLE (float64).

        None, and the statement runs in DuckDB, when there would be more than
        ``max_rows`` rows, or when some row holds a value whose reading this
        relation cannot give exactly as DuckDB would (it need not try).
        """
        ...


@dataclass
class ScanStats:
    """Counters of one statement's scans of one relation (for ``explain`` and tests)."""

    scans: int = 0
    batches: int = 0
    rows: int = 0


class RelationScan:
    """A relation bound to one statement's columns and predicate, as DuckDB reads it.

    DuckDB calls ``__arrow_c_stream__`` once per scan of the registered name
    (a self-join or a CTE read twice scans twice), so each call starts a
    fresh scan of the relation; a plain RecordBatchReader could be read once only.
    """

    def __init__(
        self, relation: Relation, columns: Sequence[str] | None, predicate: Predicate
    ) -> None:
        self.relation = relation
        self.columns = list(columns) if columns is not None else None
        self.predicate = predicate
        self.stats = ScanStats()
        self.error: Exception | None = None
        # rows read already under this predicate (with at least these columns), to serve scans from
        self.prefetched: pa.Table | None = None
        self._lock = threading.Lock()

    def schema(self) -> pa.Schema:
        import pyarrow as pa

        full = self.relation.schema()
        if self.columns is None:
            return full
        return pa.schema([full.field(c) for c in self.columns])

    def reader(self) -> pa.RecordBatchReader:
        """A stream whose scan starts only when its first batch is read.

        DuckDB asks for the stream several times while binding and planning
        a statement and reads one, so no relation work is done before then.
        """
        import pyarrow as pa

        schema = self.schema()
        return pa.RecordBatchReader.from_batches(schema, self._batches(schema))

    def _batches(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        try:
            if self.prefetched is not None:
                source = self.prefetched.select(schema.names).to_reader()
            else:
                source = self.relation.scan(
                    self.columns, None if self.predicate.is_true else self.predicate
                )
            with self._lock:
                self.stats.scans += 1
            for batch in source:
                if batch.schema != schema:
                    batch = batch.select(schema.names).cast(
                        schema
                    )  # tolerate metadata/ordering drift
                with self._lock:
                    self.stats.batches += 1
                    self.stats.rows += batch.num_rows
                yield batch
        except Exception as err:
            # DuckDB reports a failing stream with its own error type; keep
            # ours so that the engine can raise it as it was.
            self.error = err
            raise

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.reader().__arrow_c_stream__(requested_schema)


class ArrowRelation:
    """An in-memory Arrow table as a relation.

    Scans filter by the predicate, batch by batch, and skip whole batches
    whose min/max (computed once per column, on first use) cannot match: on
    data clustered by a column (time, id) a selective range reads only the
    batches that hold it. An integer column a predicate narrows gets a sorted
    index on first use (its row order, 8 bytes a row): a point or small
    range then takes its rows by binary search, whatever the data's order.
    """

    def __init__(self, name: str, data: Any, batch_rows: int = 1 << 17) -> None:
        import pyarrow as pa

        if isinstance(data, pa.RecordBatch):
            table = pa.Table.from_batches([data])
        elif isinstance(data, pa.Table):
            table = data
        elif hasattr(data, "__arrow_c_stream__"):
            table = pa.RecordBatchReader.from_stream(data).read_all()
        else:
            try:
                table = pa.table(data)
            except (TypeError, ValueError, pa.ArrowException) as err:
                raise InvalidArgumentError(
                    f"relation {name!r}: the data must be a pyarrow Table or RecordBatch, an Arrow "
                    f"stream or a dict of columns, not {type(data).__name__} ({err})"
                ) from None
        self.name = name
        self.table = table
        self._batches = table.to_batches(max_chunksize=batch_rows)
        self._zones: dict[str, list[tuple[Any, Any, int]]] = {}
        self._zone_lock = threading.Lock()
        # column -> (sorted values, row numbers), or None for a column without the index
        self._sorted: dict[str, tuple[Any, Any] | None] = {}

    def schema(self) -> pa.Schema:
        return self.table.schema

    def estimate(self, predicate: Predicate | None = None) -> Estimate:
        indexed = self._indexed_rows(predicate)
        rows = (
            len(indexed)
            if indexed is not None
            else sum(b.num_rows for b in self._candidate_batches(predicate))
        )
        per_row = self.table.nbytes / self.table.num_rows if self.table.num_rows else 0
        return Estimate(rows=rows, bytes=int(rows * per_row))

    def scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> pa.RecordBatchReader:
        import pyarrow as pa

        schema = (
            self.table.schema
            if columns is None
            else pa.schema([self.table.schema.field(c) for c in columns])
        )

        rows = self._indexed_rows(predicate)
        if rows is not None and predicate is not None:
            taken = predicate.filter(self.table.take(rows))
            if columns is not None:
                taken = taken.select(list(columns))
            return pa.RecordBatchReader.from_batches(schema, taken.to_batches())

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in self._candidate_batches(predicate):
                if predicate is not None:
                    batch = predicate.filter(batch)
                if batch.num_rows:
                    yield batch if columns is None else batch.select(list(columns))

        return pa.RecordBatchReader.from_batches(schema, batches())

    def _indexed_rows(self, predicate: Predicate | None) -> Any:
        """Row numbers (ascending) holding every row ``predicate`` keeps, found through the
        sorted index of one of its integer columns that it narrows to at most 1/16 of the
        rows; None where no column does. The other columns' conditions are not applied."""
        import numpy as np

        if predicate is None or predicate.is_true or self.table.num_rows < 4096:
            return None
        if predicate.is_false:
            return np.zeros(0, np.int64)
        for column in predicate:
            domain = predicate[column]
            index = None if domain.nulls or domain.keys is not None else self._sorted_index(column)
            if index is None:
                continue
            values, order = index
            info = np.iinfo(values.dtype)
            bounds = [b for i in domain.ranges for b in (i.lo, i.hi) if b is not None]
            if not all(type(b) is int and info.min <= b <= info.max for b in bounds):
                continue  # a float or out-of-range bound: searchsorted would round it
            spans = [_span(values, interval) for interval in domain.ranges]
            if sum(hi - lo for lo, hi in spans) * 16 > self.table.num_rows:
                continue
            return np.sort(np.concatenate([order[lo:hi] for lo, hi in spans] or [order[:0]]))
        return None

    def _sorted_index(self, column: str) -> tuple[Any, Any] | None:
        """(sorted values, their row numbers) of an integer column without NULLs, made once."""
        import numpy as np
        import pyarrow.types as pt

        names = {n.lower(): n for n in self.table.schema.names}
        actual = names.get(column.lower())
        if actual is None:
            return None
        with self._zone_lock:
            if actual not in self._sorted:
                data = self.table.column(actual)
                if not pt.is_integer(data.type) or data.null_count:
                    self._sorted[actual] = None
                else:
                    values = data.to_numpy()
                    order = np.argsort(values, kind="stable")
                    self._sorted[actual] = (values[order], order)
            return self._sorted[actual]

    def _candidate_batches(self, predicate: Predicate | None) -> list[pa.RecordBatch]:
        if predicate is None or predicate.is_true:
            return self._batches
        if predicate.is_false:
            return []
        keep = [True] * len(self._batches)
        for column in predicate:
            zones = self._zone_map(column)
            if zones is None:
                continue
            for i, (lo, hi, nulls) in enumerate(zones):
                if keep[i] and not predicate.may_match(column, lo, hi, nulls):
                    keep[i] = False
        return [b for b, k in zip(self._batches, keep, strict=True) if k]

    def _zone_map(self, column: str) -> list[tuple[Any, Any, int]] | None:
        """Per-batch (min, max, null count) of a column, or None if it has no order we push."""
        import pyarrow.compute as pc

        from tesseradb.sql.predicate import type_class

        names = {n.lower(): n for n in self.table.schema.names}
        actual = names.get(column.lower())
        if actual is None:
            return None
        kind = type_class(self.table.schema.field(actual).type)
        if kind not in ("int", "float", "string"):
            return None
        with self._zone_lock:
            if actual not in self._zones:
                zones = []
                for batch in self._batches:
                    array = batch.column(actual)
                    stats = pc.min_max(array)
                    lo, hi = stats["min"].as_py(), stats["max"].as_py()
                    if isinstance(lo, float) and lo != lo:
                        lo = float("inf")  # only NaN in the batch: it lies above +inf
                    if kind == "float" and hi is not None and pc.any(pc.is_nan(array)).as_py():
                        hi = float("nan")  # min_max skips NaN; DuckDB sorts it above everything
                    zones.append((lo, hi, array.null_count))
                self._zones[actual] = zones
            return self._zones[actual]

    def __repr__(self) -> str:
        return f"ArrowRelation({self.name!r}, rows={self.table.num_rows}, columns={self.table.num_columns})"


def _span(values: Any, interval: Any) -> tuple[int, int]:
    """The positions in the sorted ``values`` that ``interval`` holds, as [lo, hi)."""
    import numpy as np

    lo = 0
    if interval.lo is not None:
        side = "left" if interval.lo_inclusive else "right"
        lo = int(np.searchsorted(values, interval.lo, side))
    hi = len(values)
    if interval.hi is not None:
        side = "right" if interval.hi_inclusive else "left"
        hi = int(np.searchsorted(values, interval.hi, side))
    return lo, max(lo, hi)


class Namespace(Protocol):
    """What the engine needs to know about the database's names."""

    def relation(self, name: str) -> Relation | None:
        """The relation of that name (case-insensitive), or None if it is not one."""
        ...

    def kind_of(self, name: str) -> str | None:
        """The kind of the object of that name (``table``, ``view``, ``array``, ...), or None."""
        ...

    def known_names(self) -> list[str]:
        """Every name a statement may refer to, for suggestions."""
        ...

    def columns_of(self, name: str) -> list[str] | None:
        """The column names of a plain table or view, or None if unknown."""
        ...

    def sync_tables(
        self, tables: dict[str, tuple[str, list[str]]], written: Sequence[str] = ()
    ) -> None:
        """The store now holds exactly these plain tables/views (name -> (kind, columns));
        ``written`` names the ones the statement changed."""
        ...
