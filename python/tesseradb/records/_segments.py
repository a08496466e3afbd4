"""Segments: chunking, segmentation, per-segment kd-trees, the R*-tree, range scans.

The ingest and query paths of MDDS (§III, Figure 2): records
arrive as Arrow data, are cut into chunks of at most ``max_chunk_records``,
each chunk is divided into segments (the *random* scheme of §IV-A: each
record goes to one of ``ceil(chunk bytes / segment bytes)`` segments chosen
uniformly at random), each segment gets its packed kd-tree (Rust) and its
bounding box, and the box goes into the R*-tree (Rust) — from then on the
segment answers queries. A range query takes the hull of the predicate on the
indexing fields as a box, asks the R*-tree for the segments it may meet, and
finds their records with the kd-tree iterator or the sequential one (one
Rust call for all candidate segments, in parallel); other predicates filter
the gathered records.

A segment is *resident* (pinned in memory) from ingest until the writer has
put it on disk; from then on it is served through the segment cache, which
loads it back from its file when it has been evicted.

Values compare in DuckDB's order (NaN above +inf); integer indexing fields
become float64 keys, a monotone mapping, so a box never misses a record and
the predicate's exact check removes the rest.
"""

from __future__ import annotations

import collections
import itertools
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TYPE_CHECKING, Any

from tesseradb.errors import InvalidArgumentError, SegmentFileError
from tesseradb.records._conform import conform
from tesseradb.records._descriptor import RecordDescriptor
from tesseradb.sql.partials import Partials, answerable
from tesseradb.sql.predicate import ColumnDomain, Predicate

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from tesseradb import _core
    from tesseradb.records._cache import ClockCache

__all__ = ["Segment", "SegmentStore", "check_segmentation", "index_keys", "key_orders"]

ITERATORS = ("auto", "kdtree", "sequential")
SCHEMES = ("random", "kdtree")
# The defaults, chosen by measurement (`tessera bench mdds`, docs/records.md): the
# kd-tree scheme over chunks of a million records gives segments that overlap
# little, so a range query searches a tenth of them where the random scheme
# searches nearly all; smaller chunks cut the space into more overlapping pieces.
DEFAULT_SCHEME = "kdtree"
DEFAULT_CHUNK_RECORDS = 1_000_000


@dataclass
class Segment:
    id: int
    data: pa.RecordBatch  # the records, column by column
    tree: _core.KdTree  # the packed kd-tree, holding the records' keys on the indexing fields
    lo: list[float]  # bounding box per indexing field (NaN as a maximum sorts above +inf)
    hi: list[float]
    _views: dict[str, np.ndarray] = dataclass_field(default_factory=dict, repr=False)
    _string_views: dict[str, tuple[np.ndarray, np.ndarray]] = dataclass_field(
        default_factory=dict, repr=False
    )

    @property
    def num_records(self) -> int:
        return int(self.data.num_rows)

    @property
    def nbytes(self) -> int:
        """Memory held: the records, the keys, the tree's nodes and its key orders."""
        tree = len(self.tree) * (8 * self.tree.dims + 12) + self.tree.orders_nbytes
        return int(self.data.nbytes) + tree

    def string_views(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A string column's offsets (moved by the array's offset) and data (zero-copy;
        kept for later queries)."""
        views = self._string_views.get(name)
        if views is None:
            import numpy as np

            column = self.data.column(name)
            _, offsets, data = column.buffers()
            views = (
                np.frombuffer(
                    offsets, dtype=np.int32, count=len(column) + 1, offset=column.offset * 4
                ),
                np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8),
            )
            self._string_views[name] = views
        return views

    def byte_view(self, name: str) -> np.ndarray:
        """The values of a fixed-width column as bytes (zero-copy; kept for later queries)."""
        view = self._views.get(name)
        if view is None:
            import numpy as np

            column = self.data.column(name)
            width = column.type.byte_width
            buffer = column.buffers()[1]
            view = np.frombuffer(
                buffer, dtype=np.uint8, count=len(column) * width, offset=column.offset * width
            )
            self._views[name] = view
        return view


class SegmentStore:
    """The segments of one stream: resident ones, those on disk, and the R*-tree over all.

    ``prepare`` (build segments from records) runs in the caller's thread
    without any lock; ``publish`` makes a call's segments visible together.
    ``ingest``, ``publish``, ``mark_written`` and ``scan`` are thread-safe.
    """

    def __init__(
        self,
        descriptor: RecordDescriptor,
        max_chunk_records: int = DEFAULT_CHUNK_RECORDS,
        segment_bytes: int = 1 << 20,
        iterator: str = "auto",
        seed: int | None = None,
        scheme: str = DEFAULT_SCHEME,
        overpacking: float = 4.0,
        indexes: Sequence[Sequence[str]] = (),
        cache: ClockCache[Segment] | None = None,
        load: Callable[[int], Segment] | None = None,
    ) -> None:
        import pyarrow as pa

        from tesseradb import _core

        check_segmentation(max_chunk_records, segment_bytes, scheme, overpacking, iterator)
        # each segment's key orders, as lists of indexing dimensions (the search weighs
        # them against its kd-tree under the auto iterator)
        self.orders = key_orders(descriptor, indexes)
        # segments searched each way since the stream opened (as an index's use counts)
        self.searches: collections.Counter[str] = collections.Counter()
        self._way_names = {-1: "kdtree", -2: "sequential"}
        for k, dims in enumerate(self.orders):
            self._way_names[k] = "index (" + ", ".join(descriptor.index[d] for d in dims) + ")"
        self.scheme = scheme
        self.overpacking = overpacking
        self.descriptor = descriptor
        self.max_chunk_records = max_chunk_records
        self.segment_bytes = segment_bytes
        self.iterator = iterator
        self.schema = descriptor.arrow_schema
        # per indexing field, whether its values are their keys exactly (_exact_keys)
        types = [self.schema.field(name).type for name in descriptor.index]
        self._exact = [pa.types.is_floating(t) or t.bit_width <= 32 for t in types]
        self._tree = _core.SegmentTree(len(descriptor.index))
        self._resident: dict[int, Segment] = {}  # not yet on disk: pinned in memory
        self._stored: dict[int, int] = {}  # on disk: id -> records
        self.parallel_loads = 1  # segments a scan loads at once (more when loads are slow)
        # committed segments that cannot be served, with why: those whose box is known
        # are in the R*-tree, so a query that meets them fails; the others (missing
        # file, unreadable header) make every query fail, as any could need them
        self._damaged: dict[int, str] = {}
        self._unplaced: dict[int, str] = {}
        self._cache = cache
        self._load = load
        self._next_id = 1
        self._lock = threading.Lock()
        self._seed = seed
        self._calls = itertools.count()

    # --- ingest -----------------------------------------------------------------------
    def ingest(self, data: Any) -> list[Segment]:
        """Add records (see :meth:`conform`); queryable on return. Returns the new segments."""
        segments = self.prepare(self.conform(data))
        self.publish(segments)
        return segments

    def prepare(self, table: pa.Table, step: Callable[[int], None] | None = None) -> list[Segment]:
        """The segments of conformed records, chunk by chunk (not visible until published);
        ``step`` is told each chunk's records (a progress report that may cancel)."""
        import numpy as np

        # seeded streams are reproducible call by call; each call gets its own generator
        # (numpy generators are not safe to share between ingesting threads)
        rng = np.random.default_rng(None if self._seed is None else (self._seed, next(self._calls)))
        segments = []
        for start in range(0, table.num_rows, self.max_chunk_records):
            chunk = table.slice(start, self.max_chunk_records)
            batches = chunk.to_batches()
            # a chunk inside one piece of the table is a zero-copy batch
            batch = batches[0] if len(batches) == 1 else chunk.combine_chunks().to_batches()[0]
            segments.extend(self._segment_chunk(batch, rng))
            if step is not None:
                step(chunk.num_rows)
        return segments

    def publish(self, segments: Sequence[Segment]) -> None:
        """Make segments queryable, all together; each gets its id now."""
        with self._lock:
            for seg in segments:
                seg.id = self._next_id
                self._next_id += 1
                self._tree.insert(seg.id, seg.lo, seg.hi)
                self._resident[seg.id] = seg

    def add_stored(self, segment_id: int, rows: int, lo: list[float], hi: list[float]) -> None:
        """Index a segment that is on disk already (a stream being reopened)."""
        self.add_all_stored([(segment_id, rows, lo, hi)])

    def add_all_stored(self, segments: Sequence[tuple[int, int, list[float], list[float]]]) -> None:
        """Index segments on disk already (id, records, box), all together: a call staged
        on disk becomes queryable at once."""
        with self._lock:
            for segment_id, rows, lo, hi in segments:
                self._tree.insert(segment_id, lo, hi)
                self._stored[segment_id] = rows
                self._next_id = max(self._next_id, segment_id + 1)

    def assign_ids(self, segments: Sequence[Segment]) -> None:
        """Give segments consecutive ids without publishing them (a call staged on disk)."""
        with self._lock:
            for seg in segments:
                seg.id = self._next_id
                self._next_id += 1

    def add_damaged(
        self,
        segment_id: int,
        reason: str,
        rows: int = 0,
        box: tuple[list[float], list[float]] | None = None,
    ) -> None:
        """Record a committed segment that cannot be served (``reason`` says why).

        With its ``box``, queries whose box meets it fail with ``reason``;
        without, every query does.
        """
        with self._lock:
            if box is not None:
                self._tree.insert(segment_id, *box)
                self._damaged[segment_id] = reason
            else:
                self._unplaced[segment_id] = reason
            self._next_id = max(self._next_id, segment_id + 1)

    def reserve_ids(self, next_id: int) -> None:
        """Give new segments ids from ``next_id`` on at least (ids of files left by a crash)."""
        with self._lock:
            self._next_id = max(self._next_id, next_id)

    @property
    def damage(self) -> dict[int, str]:
        """Committed segments that cannot be served, by id, with the reason."""
        with self._lock:
            return {**self._damaged, **self._unplaced}

    def _refuse_damage(self, ids: Sequence[int]) -> None:
        """Fail a query that needs a damaged segment, or any query while one has no place."""
        hint = "; `tessera check --repair` sets it aside so the rest can be read"
        if self._unplaced:
            first = min(self._unplaced)
            raise SegmentFileError(
                f"{self._unplaced[first]}: its records could match any query, so none can "
                f"be answered exactly{hint}"
            )
        for segment_id in ids:
            reason = self._damaged.get(segment_id)
            if reason is not None:
                raise SegmentFileError(f"{reason}; this query needs its records{hint}")

    def mark_written(self, segment: Segment) -> None:
        """``segment`` is on disk: unpin it, leaving it in the cache for queries."""
        with self._lock:
            if self._cache is not None:
                self._cache.put(segment.id, segment)
            self._stored[segment.id] = segment.num_records
            del self._resident[segment.id]

    def conform(self, data: Any) -> pa.Table:
        """The data as a table of exactly the descriptor's columns and types, or a clear error."""
        return conform(self.descriptor, data)

    def _segment_chunk(self, chunk: pa.RecordBatch, rng: Any) -> list[Segment]:
        """Divide a chunk into segments by the stream's scheme.

        ``random`` (§IV-A): each record to one of ceil(chunk bytes / segment
        bytes) segments chosen uniformly at random. ``kdtree`` (§IV-B): the
        chunk's kd-tree cut into subtrees of at most overpacking x segment
        bytes / record size records (Rust); each segment's own kd-tree starts
        from its subtree root's dimension. The segments' kd-trees and boxes
        are built in one Rust call, in parallel.
        """
        import numpy as np
        import pyarrow as pa

        from tesseradb import _core

        n = chunk.num_rows
        if not n:
            return []
        dims = len(self.descriptor.index)
        coords = index_keys(chunk, self.descriptor)
        if self.scheme == "kdtree":
            limit = max(1, int(self.overpacking * self.segment_bytes / self.descriptor.record_size))
            labels, roots = _core.kdtree_partition(coords, limit)
            initial = [int(r) % dims for r in roots]
        else:
            count = max(1, math.ceil(n * self.descriptor.record_size / self.segment_bytes))
            labels = rng.integers(0, count, n, dtype=np.uint32)
            initial = [0] * count
        order, bounds, built = _core.build_segments(coords, labels, initial, self.orders)
        # one take of the whole chunk in segment order; segments are slices of it
        batch = chunk.take(pa.array(order))
        out = []
        for s, (tree, lo, hi) in enumerate(built):
            start, stop = bounds[s], bounds[s + 1]
            if stop > start:
                out.append(Segment(0, batch.slice(start, stop - start), tree, lo, hi))
        return out

    # --- queries ----------------------------------------------------------------------
    @property
    def num_segments(self) -> int:
        return len(self._resident) + len(self._stored)

    @property
    def num_records(self) -> int:
        with self._lock:
            resident = sum(s.num_records for s in self._resident.values())
            return resident + sum(self._stored.values())

    def clear(self) -> None:
        """Forget every segment (the stream is closed)."""
        from tesseradb import _core

        with self._lock:
            self._resident.clear()
            self._stored.clear()
            self._damaged.clear()
            self._unplaced.clear()
            self._tree = _core.SegmentTree(len(self.descriptor.index))

    def rows_in(self, ids: Sequence[int]) -> int:
        """How many records the segments ``ids`` hold (no segment is loaded)."""
        total = 0
        with self._lock:
            for i in ids:
                stored = self._stored.get(i)
                if stored is not None:
                    total += stored
                elif i in self._resident:
                    total += self._resident[i].num_records
        return total

    def segment_ids(self, box: tuple[list[float], list[float]] | None) -> list[int]:
        """Ids of the segments whose boxes may meet ``box`` (R*-tree search), ascending."""
        if box is None:
            return []
        with self._lock:
            return [int(i) for i in self._tree.query(*box)]

    def segments(self, ids: Sequence[int]) -> list[Segment]:
        """The segments ``ids`` in order; those to be loaded, ``parallel_loads`` at a time
        (a stream whose segments are in an object store: one round trip each). Those in
        memory or in the cache are taken here: a pool of threads for them cost a query of
        a few segments more than its search."""
        from tesseradb.executor import Threads

        found: dict[int, Segment] = {}
        missing: list[int] = []
        for segment_id in ids:
            seg = self._held(segment_id)
            if seg is None:
                missing.append(segment_id)
            else:
                found[segment_id] = seg
        if missing:
            loaded = Threads(self.parallel_loads).map(
                self.segment, missing, what="loading segments"
            )
            found.update(zip(missing, loaded, strict=True))
        return [found[segment_id] for segment_id in ids]

    def segment(self, segment_id: int) -> Segment:
        """A segment by id: resident, cached, or loaded from its file into the cache."""
        seg = self._held(segment_id)
        if seg is not None:
            return seg
        if self._cache is None or self._load is None:
            raise KeyError(segment_id)
        load = self._load
        return self._cache.get(segment_id, lambda: load(segment_id))

    def _held(self, segment_id: int) -> Segment | None:
        """The segment if it is in memory (resident, or in the cache), else None."""
        seg = self._resident.get(segment_id)
        if seg is None and self._cache is not None:
            seg = self._cache.peek(segment_id)
        return seg

    def query_box(self, predicate: Predicate | None) -> tuple[list[float], list[float]] | None:
        """The box of the predicate's hull on the indexing fields (None: nothing can match)."""
        lo = [-math.inf] * len(self.descriptor.index)
        hi = [math.nan] * len(self.descriptor.index)  # unbounded above, NaN included
        if predicate is None:
            return lo, hi
        if predicate.is_false:
            return None
        for d, name in enumerate(self.descriptor.index):
            dom = predicate.domain(name)
            if dom is None:
                continue
            hull = dom.ranges.hull()
            if hull is None:  # no non-NULL value passes, and records have no NULLs
                return None
            exact = self._exact_keys(d)
            if hull.lo is not None:
                closed = _closed_bound(hull.lo, hull.lo_inclusive, True) if exact else None
                lo[d] = float(hull.lo) if closed is None else closed
            if hull.hi is not None:
                closed = _closed_bound(hull.hi, hull.hi_inclusive, False) if exact else None
                hi[d] = float(hull.hi) if closed is None else closed
            if lo[d] > hi[d]:  # (no double lies strictly between: x > 1.0 AND x < next(1.0))
                return None
        return lo, hi

    def _exact_keys(self, d: int) -> bool:
        """Whether indexing field ``d``'s values are their keys exactly (floats, integers of
        up to 32 bits): only then does an open bound close exactly (:func:`_closed_bound`)."""
        return self._exact[d]

    def scan(
        self,
        columns: Sequence[str] | None,
        predicate: Predicate | None,
        batch_rows: int = 1 << 20,
        probes: Sequence[tuple[int, float]] = (),
        held: list[bool] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Batches holding exactly the records that match ``predicate``.

        The R*-tree gives the candidate segments; segments inside the query
        box are served whole, the others are searched together (one parallel
        Rust call, kd-tree or sequential iterator) and their found records
        gathered into batches of up to ``batch_rows``; what of the predicate
        the box does not settle exactly (see ``_residual``) is then applied
        to every batch, and only its columns are gathered besides ``columns``.

        ``probes`` are (indexing dimension, value): once the batches are all
        read, ``held[i]`` says whether a record inside the query box (before
        the residual filter) holds probe i's value, without reading that field.
        """
        import numpy as np

        box = self.query_box(predicate)
        ids = self.segment_ids(box)
        self._refuse_damage(ids)
        if box is None or not ids:
            return
        names = list(self.schema.names if columns is None else columns)
        segments = self.segments(ids)
        predicate = self._residual(predicate, segments)
        lower = {n.lower(): n for n in self.schema.names}
        filtered = [lower[c.lower()] for c in (predicate or ()) if c.lower() in lower]
        needed = list(dict.fromkeys([*names, *filtered]))
        lo, hi = box
        inside = _boxes_within(segments, lo, hi)
        whole = [s for s, w in zip(segments, inside, strict=True) if w]
        partial = [s for s, w in zip(segments, inside, strict=True) if not w]
        for seg in whole:
            for i, (d, value) in enumerate(probes):
                if held is not None and not held[i]:
                    column = seg.data.column(self.descriptor.index[d]).to_numpy()
                    held[i] = bool((column == value).any())
            yield from _finish(seg.data.select(needed), names, predicate)
        if not partial:
            self._count_searches([], len(whole))
            return
        from tesseradb import _core

        which, rows, found_held, ways = _core.search_segments(
            [s.tree for s in partial], lo, hi, self.iterator, list(probes)
        )
        self._count_searches(ways, len(whole))
        if held is not None:
            held[:] = [a or b for a, b in zip(held, found_held, strict=True)]
        for start in range(0, len(rows), batch_rows):
            part_which, part_rows = (
                which[start : start + batch_rows],
                rows[start : start + batch_rows],
            )
            batch = self._gather(
                partial, needed, np.ascontiguousarray(part_which), np.ascontiguousarray(part_rows)
            )
            yield from _finish(batch, names, predicate)

    def top(
        self,
        columns: Sequence[str],
        predicate: Predicate | None,
        field: str,
        descending: bool,
        count: int,
        distinct: bool,
    ) -> pa.Table | None:
        """Every record matching ``predicate`` whose ``field`` value is at or before the
        ``count``-th such value in that order (``distinct``: the ``count``-th distinct
        value), ties included, with ``columns``: all that ``ORDER BY field LIMIT count``
        (or ``SELECT DISTINCT ... ORDER BY field LIMIT count``, the field selected) needs.

        Read from the segments' key orders (``_core.top_segments``). None when they
        cannot give it: ``field`` is no indexing field, the iterator is not ``auto``
        (the others keep MDDS's meaning), no order of some segment is sorted on
        ``field`` once the box pins its leading fields, or the box does not settle the
        whole predicate (a record a filter would drop may not count towards ``count``).
        """
        import numpy as np
        import pyarrow as pa

        from tesseradb import _core

        dims = {name.lower(): d for d, name in enumerate(self.descriptor.index)}
        dim = dims.get(field.lower())
        if dim is None or self.iterator != "auto" or not self.orders or count < 1:
            return None
        schema = pa.schema([self.schema.field(c) for c in columns])
        box = self.query_box(predicate)
        ids = self.segment_ids(box)
        self._refuse_damage(ids)
        if box is None or not ids:
            return schema.empty_table()
        segments = self.segments(ids)
        if self._residual(predicate, segments):
            return None
        found = _core.top_segments(
            [s.tree for s in segments], *box, dim, descending, count, distinct
        )
        if found is None:
            return None
        which, rows, ways = found
        self._count_searches([way for way in ways if way is not None], 0)
        if not len(rows):
            return schema.empty_table()
        # only the segments that gave records (a few of the candidates, as a rule)
        held, which = np.unique(which, return_inverse=True)
        kept = [segments[i] for i in held]
        return pa.Table.from_batches(
            [self._gather(kept, list(columns), which.astype(np.uint32), rows)]
        )

    def _count_searches(self, ways: list[int], whole: int) -> None:
        """Add a search's ways (per segment, as ``search_segments`` says) and the segments
        it served whole to ``searches``."""
        names = self._way_names
        with self._lock:
            for way in ways:
                self.searches[names[way]] += 1
            if whole:
                self.searches["whole"] += whole

    def _residual(self, predicate: Predicate | None, segments: list[Segment]) -> Predicate | None:
        """The part of ``predicate`` that the box search leaves to a filter over the found records.

        A column's condition is settled by the search when it is one interval
        (or a half-line) on an indexing field, and comparing the field's values
        and the bounds as doubles, as the trees do, is exact: float fields and
        integers of up to 32 bits always, 64-bit integers when the bounds and
        every candidate segment's values lie within 2^53. An open end is
        settled on the fields whose values are their keys, where the box closes
        it one double inward (:func:`_closed_bound`). Anything else (several
        ranges, IN-sets, other fields) is filtered as before. Gathering fewer
        columns is most of what a selective aggregate costs after the search.
        """
        if predicate is None or predicate.is_false:
            return predicate
        dims = {name.lower(): d for d, name in enumerate(self.descriptor.index)}
        kept = {}
        for column, domain in predicate.items():
            d = dims.get(column.lower())
            if d is None or not self._settles(domain, d, segments):
                kept[column] = domain
        return Predicate(kept) if len(kept) < len(predicate) else predicate

    def _settles(self, domain: ColumnDomain, d: int, segments: list[Segment]) -> bool:
        """Whether the box search on indexing dimension ``d`` gives exactly ``domain``."""
        import numpy as np

        if domain.keys is not None or domain.nulls:
            return False
        intervals = list(domain.ranges)
        if len(intervals) != 1:
            return False
        (interval,) = intervals
        for bound, inclusive, upward in (
            (interval.lo, interval.lo_inclusive, True),
            (interval.hi, interval.hi_inclusive, False),
        ):
            if (
                bound is not None
                and not inclusive
                and (not self._exact_keys(d) or _closed_bound(bound, False, upward) is None)
            ):
                return False
        for bound in (interval.lo, interval.hi):
            if bound is None:
                continue
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                return False
            if isinstance(bound, int) and abs(bound) >= 2**53:
                return False
        if self._exact_keys(d):
            return True
        edges = np.array([(s.lo[d], s.hi[d]) for s in segments], dtype=np.float64)
        return bool((np.abs(edges) < 2.0**53).all())

    def aggregate(
        self,
        items: Sequence[tuple[str, str, str | None]],
        predicate: Predicate | None,
        ambiguous: Mapping[str, Sequence[float]],
    ) -> list[tuple[str, pa.Array]] | None:
        """``count``, ``avg``, ``min``, ``max`` and ``sum`` of the matching records.

        ``items`` are (output name, function, column; None for ``count(*)``).
        Answers from the found records' columns with DuckDB's meanings (NaN
        above every number, an empty input gives NULL); returns None for what
        it does not answer (other functions, text columns) or when a found
        record holds one of the
        ``ambiguous`` values of a column, and the query then runs as SQL.
        """
        import numpy as np

        lower = {n.lower(): n for n in self.schema.names}
        wanted = answerable(items, self.schema)
        if wanted is None:
            return None
        points = {}
        dims = {name.lower(): d for d, name in enumerate(self.descriptor.index)}
        probes = []  # (dimension, value): looked for with a box search, no column read
        for column, values in ambiguous.items():
            if column.lower() not in lower:
                return None
            if column.lower() in dims:
                probes += [(dims[column.lower()], float(v)) for v in values]
            else:
                points[lower[column.lower()]] = np.array(values, dtype=np.float64)
        columns = list(dict.fromkeys(c for _, _, c in wanted if c is not None))
        parts = Partials(columns)
        needed = list(dict.fromkeys([*columns, *points])) or [self.descriptor.index[0]]
        held = [False] * len(probes)
        for batch in self.scan(needed, predicate, probes=probes, held=held):
            for column, point_values in points.items():
                if np.isin(batch.column(column).to_numpy(), point_values).any():
                    return None
            parts.add(batch)
        if any(held):
            return None
        return [(out, parts.result(fn, column, self.schema)) for out, fn, column in wanted]

    def _gather(
        self, segments: list[Segment], names: list[str], which: np.ndarray, rows: np.ndarray
    ) -> pa.RecordBatch:
        """The records ``rows[i]`` of ``segments[which[i]]``, columns ``names``, as one batch."""
        import numpy as np
        import pyarrow as pa

        from tesseradb import _core

        arrays = []
        for name in names:
            type_ = self.schema.field(name).type
            if pa.types.is_string(type_):
                found = _core.gather_strings([s.string_views(name) for s in segments], which, rows)
                if found is not None:
                    offsets, data = found
                    arrays.append(
                        pa.StringArray.from_buffers(
                            len(rows), pa.py_buffer(offsets), pa.py_buffer(data)
                        )
                    )
                    continue
                # past 2 GiB of text: take per segment
                cuts = np.searchsorted(which, np.arange(len(segments) + 1))
                parts = [
                    seg.data.column(name).take(rows[cuts[k] : cuts[k + 1]])
                    for k, seg in enumerate(segments)
                    if cuts[k + 1] > cuts[k]
                ]
                arrays.append(pa.concat_arrays(parts) if parts else pa.array([], type_))
                continue
            width = type_.byte_width
            raw = _core.gather([s.byte_view(name) for s in segments], width, which, rows)
            arrays.append(pa.array(raw.view(type_.to_pandas_dtype()), type_))
        return pa.RecordBatch.from_arrays(arrays, names=names)


def check_segmentation(
    max_chunk_records: int, segment_bytes: int, scheme: str, overpacking: float, iterator: str
) -> None:
    """Refuse segmentation settings outside their meanings (ValueError naming the setting)."""
    if scheme not in SCHEMES:
        raise InvalidArgumentError(f"scheme must be one of {SCHEMES}, not {scheme!r}")
    if iterator not in ITERATORS:
        raise InvalidArgumentError(f"iterator must be one of {ITERATORS}, not {iterator!r}")
    for name, value in (("max_chunk_records", max_chunk_records), ("segment_bytes", segment_bytes)):
        if value < 1:
            raise InvalidArgumentError(f"{name} must be at least 1, not {value}")
    if overpacking <= 0:
        raise InvalidArgumentError(f"overpacking must be positive, not {overpacking}")


def key_orders(descriptor: RecordDescriptor, indexes: Sequence[Sequence[str]]) -> list[list[int]]:
    """The stream option ``indexes`` (lists of field names) as lists of indexing dimensions,
    or a clear error naming the field that is not an indexing field or comes twice."""
    position = {name.lower(): d for d, name in enumerate(descriptor.index)}
    out = []
    for index in indexes:
        dims = []
        for name in index:
            d = position.get(name.lower())
            if d is None:
                raise InvalidArgumentError(
                    f"stream index {list(index)}: {name!r} is not one of the indexing fields "
                    f"({', '.join(descriptor.index)}); an index orders records by those only"
                )
            if d in dims:
                raise InvalidArgumentError(f"stream index {list(index)} names {name!r} twice")
            dims.append(d)
        if dims in out:
            raise InvalidArgumentError(f"stream index {list(index)} is given twice")
        out.append(dims)
    return out


def _closed_bound(bound: Any, inclusive: bool, upward: bool) -> float | None:
    """``bound`` as the closed double bound of a box, for a field whose values are their
    keys: an open end moves one double inward (over doubles, ``v > b`` is ``v >=
    nextafter(b, +inf)``; NaN, above every number, stays above), so the search alone
    answers it. None where that is not exact: a bound no double holds exactly (it was
    rounded), an infinite one (``v > inf`` is NaN alone), a boolean or not a number."""
    if isinstance(bound, bool) or not isinstance(bound, (int, float)):
        return None
    try:
        value = float(bound)
    except OverflowError:
        return None
    if value != bound or not math.isfinite(value):
        return None
    if inclusive:
        return value
    return math.nextafter(value, math.inf if upward else -math.inf)


def index_keys(data: pa.RecordBatch, descriptor: RecordDescriptor) -> np.ndarray:
    """The keys of the records on the indexing fields, as an (n, dims) float64 array."""
    import numpy as np

    columns = [
        data.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
        for name in descriptor.index
    ]
    return np.ascontiguousarray(np.column_stack(columns))


def _finish(
    batch: pa.RecordBatch, names: list[str], predicate: Predicate | None
) -> Iterator[pa.RecordBatch]:
    if predicate is not None:
        batch = predicate.filter(batch)
    if batch.num_rows:
        yield batch.select(names)


def _boxes_within(segments: list[Segment], lo: list[float], hi: list[float]) -> list[bool]:
    """Per segment, whether its box lies inside [lo, hi], in DuckDB's order (NaN above +inf).

    A few segments are compared in Python: numpy's fixed cost per call (a dozen
    calls, ~14 µs for 20 segments) was a sixth of a GHCN point query.
    """
    if len(segments) > _NUMPY_BOXES:
        return _boxes_within_numpy(segments, lo, hi).tolist()
    out = []
    for seg in segments:
        # a NaN minimum means the segment holds only NaN, which is above every bound;
        # a NaN lower bound admits only NaN, a NaN upper bound everything
        out.append(
            all(
                (s_lo != s_lo or q_lo <= s_lo) and (q_hi != q_hi or s_hi <= q_hi)
                for q_lo, q_hi, s_lo, s_hi in zip(lo, hi, seg.lo, seg.hi, strict=True)
            )
        )
    return out


_NUMPY_BOXES = 64  # segments from which numpy's vectorised comparison is the faster


def _boxes_within_numpy(segments: list[Segment], lo: list[float], hi: list[float]) -> np.ndarray:
    """:func:`_boxes_within` for many segments at once."""
    import numpy as np

    seg_lo = np.array([s.lo for s in segments], dtype=np.float64).reshape(len(segments), -1)
    seg_hi = np.array([s.hi for s in segments], dtype=np.float64).reshape(len(segments), -1)
    q_lo, q_hi = np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)
    lower_ok = np.isnan(seg_lo) | (~np.isnan(q_lo) & (q_lo <= seg_lo))
    upper_ok = np.isnan(q_hi) | (~np.isnan(seg_hi) & (seg_hi <= q_hi))
    return (lower_ok & upper_ok).all(axis=1)
