"""Segments in memory: chunking, segmentation, per-segment kd-trees, the R*-tree, range scans.

The ingest path of MDDS (§III, Figure 2) without persistence yet: records
arrive as Arrow data, are cut into chunks of at most ``max_chunk_records``,
each chunk is divided into segments (the *random* scheme of §IV-A: each
record goes to one of ``ceil(chunk bytes / segment bytes)`` segments chosen
uniformly at random), each segment gets its packed kd-tree (Rust) and its
bounding box, and the box goes into the R*-tree (Rust) — from then on the
segment answers queries. A range query takes the hull of the predicate on the
indexing fields as a box, asks the R*-tree for the segments it may meet, and
finds their records with the kd-tree iterator or the sequential one; other
predicates filter inside the segment.

Values compare in DuckDB's order (NaN above +inf); integer indexing fields
become float64 keys, a monotone mapping, so a box never misses a record and
the predicate's exact check removes the rest.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.records._descriptor import DescriptorError, RecordDescriptor
from tesseradb.sql.predicate import Predicate

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["Segment", "SegmentStore"]

ITERATORS = ("kdtree", "sequential")
SCHEMES = ("random", "kdtree")


@dataclass
class Segment:
    id: int
    data: pa.RecordBatch  # the records, column by column
    coords: np.ndarray  # (n, dims) float64 keys of the indexing fields
    records: np.ndarray  # the packed kd-tree: node -> record, left, right
    left: np.ndarray
    right: np.ndarray
    initial_dimension: int
    lo: list[float]  # bounding box per indexing field (NaN as a maximum sorts above +inf)
    hi: list[float]

    @property
    def num_records(self) -> int:
        return int(self.data.num_rows)


class SegmentStore:
    """The segments of one stream, in memory; ``ingest`` and ``scan`` are thread-safe."""

    def __init__(
        self,
        descriptor: RecordDescriptor,
        max_chunk_records: int = 50_000,
        segment_bytes: int = 1 << 20,
        iterator: str = "kdtree",
        seed: int | None = None,
        scheme: str = "random",
        overpacking: float = 1.5,
    ) -> None:
        from tesseradb import _core

        if iterator not in ITERATORS:
            raise ValueError(f"iterator must be one of {ITERATORS}, not {iterator!r}")
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, not {scheme!r}")
        if overpacking <= 0:
            raise ValueError("the overpacking factor must be positive")
        self.scheme = scheme
        self.overpacking = overpacking
        if max_chunk_records < 1 or segment_bytes < 1:
            raise ValueError("max_chunk_records and segment_bytes must be positive")
        self.descriptor = descriptor
        self.max_chunk_records = max_chunk_records
        self.segment_bytes = segment_bytes
        self.iterator = iterator
        self.schema = descriptor.arrow_schema
        self._tree = _core.SegmentTree(len(descriptor.index))
        self._segments: dict[int, Segment] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._seed = seed
        self._calls = itertools.count()

    # --- ingest -----------------------------------------------------------------------
    def ingest(self, data: Any) -> int:
        """Add records (a pyarrow Table or RecordBatch); returns how many. Queryable on return."""
        import numpy as np

        table = self._conform(data)
        # seeded streams are reproducible call by call; each call gets its own generator
        # (numpy generators are not safe to share between ingesting threads)
        rng = np.random.default_rng(None if self._seed is None else (self._seed, next(self._calls)))
        segments = []
        for start in range(0, table.num_rows, self.max_chunk_records):
            chunk = table.slice(start, self.max_chunk_records)
            segments.extend(self._segment_chunk(chunk, rng))
        # all of a call's segments become visible together
        with self._lock:
            for seg in segments:
                self._tree.insert(seg.id, seg.lo, seg.hi)
                self._segments[seg.id] = seg
        return table.num_rows

    def _conform(self, data: Any) -> pa.Table:
        """The data as a table of exactly the descriptor's columns and types, or a clear error."""
        import numpy as np
        import pyarrow as pa

        if isinstance(data, (bytes, bytearray, memoryview)):
            data = self._from_binary(data)
        elif isinstance(data, np.ndarray):
            data = self._from_structured(data)
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise DescriptorError(
                "ingest takes a pyarrow Table or RecordBatch, a numpy structured array or a buffer "
                f"of packed binary records, not {type(data).__name__}"
            )
        missing = [f.name for f in self.schema if f.name not in data.column_names]
        if missing:
            raise DescriptorError(
                f"the data has no column {', '.join(repr(m) for m in missing)} of the record"
            )
        columns = []
        for field in self.schema:
            column = data.column(field.name)
            if column.null_count:
                row = next(i for i, v in enumerate(column.is_null().to_pylist()) if v)
                raise DescriptorError(
                    f"column {field.name!r} has a NULL at row {row}: records have no NULLs"
                )
            try:
                column = column.cast(field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise DescriptorError(
                    f"column {field.name!r} ({column.type}) does not fit {field.type}: {err}"
                ) from None
            columns.append(column)
        for f, column in zip(self.descriptor.fields, columns, strict=True):
            if f.type == "char":
                import pyarrow.compute as pc

                lengths = pc.binary_length(column)
                too_long = pc.greater(lengths, f.array_len)
                if pc.any(too_long).as_py():
                    row = next(i for i, v in enumerate(too_long.to_pylist()) if v)
                    raise DescriptorError(
                        f"column {f.name!r} at row {row} is longer than its array_len of {f.array_len} bytes"
                    )
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _from_binary(self, buffer: Any) -> pa.Table:
        """Packed binary records laid out as the descriptor says (the paper's binary form)."""
        import numpy as np

        size = self.descriptor.record_size
        nbytes = memoryview(buffer).nbytes
        if nbytes % size:
            raise DescriptorError(
                f"a buffer of {nbytes} bytes is not whole records: each record is {size} bytes, "
                f"and {nbytes % size} bytes are left over after {nbytes // size} records"
            )
        return self._from_structured(np.frombuffer(buffer, dtype=self.descriptor.numpy_dtype))

    def _from_structured(self, records: np.ndarray) -> pa.Table:
        import pyarrow as pa

        names = records.dtype.names or ()
        missing = [f.name for f in self.descriptor.fields if f.name not in names]
        if missing:
            raise DescriptorError(
                f"the structured array has no field {', '.join(repr(m) for m in missing)} of the record"
            )
        columns = {}
        for field in self.descriptor.fields:
            values = records[field.name]
            if field.type != "char":
                columns[field.name] = pa.array(values.astype(values.dtype.newbyteorder("=")))
                continue
            binary = pa.array(values.astype(f"S{field.array_len}"), type=pa.binary())
            try:
                columns[field.name] = binary.cast(pa.string())
            except pa.ArrowInvalid:
                bad = next(i for i, v in enumerate(binary.to_pylist()) if not _utf8(v))
                raise DescriptorError(
                    f"record {bad}: char field {field.name!r} is not UTF-8 text"
                ) from None
        return pa.table(columns)

    def _segment_chunk(self, chunk: pa.Table, rng: Any) -> list[Segment]:
        """Divide a chunk into segments by the stream's scheme.

        ``random`` (§IV-A): each record to one of ceil(chunk bytes / segment
        bytes) segments chosen uniformly at random. ``kdtree`` (§IV-B): the
        chunk's kd-tree cut into subtrees of at most overpacking x segment
        bytes / record size records (Rust); each segment's own kd-tree starts
        from its subtree root's dimension.
        """
        import numpy as np

        from tesseradb import _core

        n = chunk.num_rows
        roots = None
        if self.scheme == "kdtree" and n:
            limit = max(1, int(self.overpacking * self.segment_bytes / self.descriptor.record_size))
            coords = self._coords(chunk.combine_chunks().to_batches()[0])
            labels, roots = _core.kdtree_partition(coords, limit)
            assignment, count = labels.astype(np.int64), len(roots)
        else:
            count = max(1, math.ceil(n * self.descriptor.record_size / self.segment_bytes))
            assignment = rng.integers(0, count, n) if count > 1 else np.zeros(n, dtype=np.int64)
        order = np.argsort(assignment, kind="stable")
        bounds = np.searchsorted(assignment[order], np.arange(count + 1))
        batch = chunk.combine_chunks().to_batches()[0] if n else None
        out = []
        for s in range(count):
            rows = order[bounds[s] : bounds[s + 1]]
            if len(rows) and batch is not None:
                first = int(roots[s]) % len(self.descriptor.index) if roots is not None else 0
                out.append(self._build_segment(batch.take(rows), first))
        return out

    def _build_segment(self, data: pa.RecordBatch, initial_dimension: int = 0) -> Segment:
        from tesseradb import _core

        coords = self._coords(data)
        records, left, right = _core.kdtree_build(coords, initial_dimension)
        lo, hi = _box(coords)
        return Segment(
            next(self._ids), data, coords, records, left, right, initial_dimension, lo, hi
        )

    def _coords(self, data: pa.RecordBatch) -> np.ndarray:
        import numpy as np

        columns = [
            data.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
            for name in self.descriptor.index
        ]
        return np.ascontiguousarray(np.column_stack(columns))

    # --- queries ----------------------------------------------------------------------
    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def num_records(self) -> int:
        return sum(s.num_records for s in list(self._segments.values()))

    def segments_for(self, predicate: Predicate | None) -> list[Segment]:
        """The segments whose boxes may hold records matching ``predicate`` (R*-tree search)."""
        box = self.query_box(predicate)
        if box is None:
            return []
        with self._lock:
            ids = self._tree.query(*box).tolist()
            return [self._segments[i] for i in ids]

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
            if hull.lo is not None:
                lo[d] = float(hull.lo)
            if hull.hi is not None:
                hi[d] = float(hull.hi)
        return lo, hi

    def scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> Iterator[pa.RecordBatch]:
        """Batches holding every record that matches ``predicate`` (exactly, on the indexing box;
        other predicates are applied too), one per segment inspected."""
        import numpy as np

        from tesseradb import _core

        box = self.query_box(predicate)
        if box is None:
            return
        for seg in self.segments_for(predicate):
            if self.iterator == "kdtree":
                rows = _core.kdtree_search(
                    seg.coords, seg.records, seg.left, seg.right, seg.initial_dimension, *box
                )
            else:
                rows = _core.box_scan(seg.coords, *box)
            if not len(rows):
                continue
            batch = seg.data.take(np.asarray(rows, dtype=np.int64))
            if predicate is not None:
                batch = predicate.filter(batch)
            if batch.num_rows:
                yield batch if columns is None else batch.select(list(columns))


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _box(coords: np.ndarray) -> tuple[list[float], list[float]]:
    """Per dimension the smallest and largest key (NaN, if present, is the largest)."""
    import numpy as np

    lo, hi = [], []
    for d in range(coords.shape[1]):
        column = coords[:, d] + 0.0  # -0.0 is 0.0
        finite = column[~np.isnan(column)]
        lo.append(float(finite.min()) if len(finite) else math.nan)
        hi.append(math.nan if len(finite) < len(column) else float(finite.max()))
    return lo, hi
