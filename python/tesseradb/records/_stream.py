"""A record stream: ingest, asynchronous persistence, the segment cache and queries (MDDS).

A :class:`Stream` owns a directory of segment files and a
:class:`SegmentStore`. ``ingest`` builds a call's segments in the caller's
thread (the Rust work runs without the GIL, so feeder threads ingest in
parallel) and publishes them together: from then on queries see them. The
segments go on a queue; writer threads wake every ``writer_period_ms`` (or
at once when ``flush`` asks), write them to temporary names, fsync, rename,
fsync the directory, and only then unpin them from memory (they stay in the
segment cache). ``flush`` returns once everything ingested before it is
durable. Reopening a stream rebuilds the R*-tree from the segment files'
headers; a file that fails its checks is reported in ``problems`` and never
served.

The stream is a relation: SQL predicates on indexing fields go to the
R*-tree and the segments' kd-trees, the others filter the found records.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tesseradb.errors import CSVError, ReadOnlyError, StreamWriteError, TesseraError
from tesseradb.records._cache import ClockCache
from tesseradb.records._descriptor import DescriptorError, RecordDescriptor
from tesseradb.records._segment_file import (
    TEMPORARY_SUFFIX,
    SegmentFileError,
    fsync_directory,
    read_header,
    read_segment,
    write_segment,
)
from tesseradb.records._segments import Segment, SegmentStore, check_segmentation
from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import Estimate

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["CSVError", "Stream", "StreamOptions", "StreamWriteError"]

SEGMENT_SUFFIX = ".seg"
CSV_BLOCK_BYTES = 16 << 20  # bytes of CSV text parsed at a time


@dataclass(frozen=True)
class StreamOptions:
    """A stream's settings, with MDDS's meanings (defaults from its Table III where it gives them)."""

    max_chunk_records: int = 100_000  # records per chunk, the unit split into segments
    segment_bytes: int = 1 << 20  # target segment size (the paper's 1M)
    scheme: str = "random"  # segmentation: random assignment or kd-tree partitioning
    overpacking: float = 4.0  # kd-tree scheme: a segment may hold this many x segment_bytes
    iterator: str = "kdtree"  # record iterator for queries: kdtree or sequential
    cache_bytes: int = 1 << 30  # memory for segments read back from disk
    writer_threads: int = 1
    writer_period_ms: int = 500  # how often writers wake to persist queued segments
    compression: str = "zstd"  # per column in segment files: zstd or none
    seed: int | None = None  # for the random scheme, to make segmentation reproducible

    def __post_init__(self) -> None:
        check_segmentation(
            self.max_chunk_records, self.segment_bytes, self.scheme, self.overpacking, self.iterator
        )
        if self.compression not in ("zstd", "none"):
            raise ValueError(f"compression must be 'zstd' or 'none', not {self.compression!r}")
        if self.writer_threads < 1:
            raise ValueError(f"writer_threads must be at least 1, not {self.writer_threads}")
        if self.cache_bytes < 0 or self.writer_period_ms < 0:
            raise ValueError("cache_bytes and writer_period_ms must not be negative")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StreamOptions:
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown stream options {sorted(unknown)}; "
                f"options are {', '.join(cls.__dataclass_fields__)}"
            )
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Stream:
    """A record stream of the database: ingest records, query them by range, in SQL too."""

    def __init__(
        self,
        name: str,
        descriptor: RecordDescriptor,
        options: StreamOptions,
        directory: Path,
        read_only: bool = False,
    ) -> None:
        self.name = name
        self.descriptor = descriptor
        self.options = options
        self.directory = directory
        self.read_only = read_only
        self.problems: list[str] = []  # segment files refused on open, with the reason
        self._cache: ClockCache[Segment] = ClockCache(options.cache_bytes, lambda s: s.nbytes)
        self._store = SegmentStore(
            descriptor,
            max_chunk_records=options.max_chunk_records,
            segment_bytes=options.segment_bytes,
            iterator=options.iterator,
            seed=options.seed,
            scheme=options.scheme,
            overpacking=options.overpacking,
            cache=self._cache,
            load=self._load,
        )
        self._bytes_on_disk = 0
        self._open_directory()
        # the writer: queued segments, how many are in flight, errors to report
        self._queue: list[Segment] = []
        self._unwritten: set[int] = set()
        self._wake = threading.Condition()
        self._flush_requested = 0
        self._write_error: BaseException | None = None
        self._closing = False
        self._writers = [
            threading.Thread(
                target=self._write_loop, name=f"tessera-writer-{name}-{i}", daemon=True
            )
            for i in range(0 if read_only else options.writer_threads)
        ]
        for writer in self._writers:
            writer.start()

    # --- opening ------------------------------------------------------------------
    def _open_directory(self) -> None:
        """Index the segment files on disk by their headers; report and skip bad ones."""
        if not self.read_only:
            self.directory.mkdir(parents=True, exist_ok=True)
            for leftover in self.directory.glob(f"*{SEGMENT_SUFFIX}{TEMPORARY_SUFFIX}"):
                leftover.unlink()  # a write interrupted before its rename: never confirmed
        if not self.directory.exists():
            return
        for path in sorted(self.directory.glob(f"*{SEGMENT_SUFFIX}")):
            try:
                header = read_header(path)
                if header.typeid != self.descriptor.typeid:
                    raise SegmentFileError(
                        f"segment file {path} holds records of format {header.typeid}, "
                        f"not {self.descriptor.typeid}"
                    )
                if path.stem != f"{header.segment_id:012d}":
                    raise SegmentFileError(
                        f"segment file {path} holds segment {header.segment_id}, not its name's"
                    )
            except SegmentFileError as err:
                self.problems.append(str(err))
                continue
            self._store.add_stored(header.segment_id, header.record_count, header.lo, header.hi)
            self._bytes_on_disk += header.total_length

    def _path(self, segment_id: int) -> Path:
        return self.directory / f"{segment_id:012d}{SEGMENT_SUFFIX}"

    def _load(self, segment_id: int) -> Segment:
        return read_segment(self._path(segment_id), self.descriptor)

    # --- ingest -----------------------------------------------------------------------
    def ingest(self, data: Any, *, durable: bool = False, header: bool | None = None) -> int:
        """Add records; they are queryable when this returns. Returns how many.

        ``data`` is a pyarrow Table or RecordBatch, a numpy structured array,
        a bytes-like buffer of packed binary records laid out as the
        descriptor says, or a CSV file (a path or a file object; ``header``
        says whether its first line names the fields, None: detect). Either
        all of a call's records are kept or, on an error, none.
        ``durable=True`` returns only once they are on disk, fsynced.
        """
        self._check_writable()
        if isinstance(data, (str, os.PathLike)) or hasattr(data, "read"):
            segments = self._prepare_csv(data, header)
        else:
            segments = self._store.prepare(self._store.conform(data))
        self._store.publish(segments)
        if segments:
            with self._wake:
                self._unwritten.update(s.id for s in segments)
                self._queue.extend(segments)
                if durable:
                    self._flush_requested += 1
                    self._wake.notify_all()
            if durable:
                self._wait_written({s.id for s in segments})
        return sum(s.num_records for s in segments)

    def flush(self) -> None:
        """Return once every record ingested before the call is on disk, fsynced."""
        self._check_writable()
        with self._wake:
            pending = set(self._unwritten)
            if not pending:
                return
            self._flush_requested += 1
            self._wake.notify_all()
        self._wait_written(pending)

    def _wait_written(self, ids: set[int]) -> None:
        with self._wake:
            try:
                while ids & self._unwritten:
                    if self._write_error is not None:
                        raise StreamWriteError(
                            f"stream {self.name!r}: segments could not be written: {self._write_error}"
                        ) from self._write_error
                    if self._closing and not any(w.is_alive() for w in self._writers):
                        raise StreamWriteError(f"stream {self.name!r} closed before writing")
                    self._wake.wait(0.5)
            finally:
                self._flush_requested -= 1

    def _write_loop(self) -> None:
        period = self.options.writer_period_ms / 1000
        threads = len(self._writers)
        while True:
            with self._wake:
                if not self._flush_requested and not self._closing:
                    self._wake.wait(period)  # the activation period; flush and close wake us early
                if not self._queue:
                    if self._closing:
                        return
                    continue
                share = -(-len(self._queue) // threads)  # the writers split the queue
                batch, self._queue = self._queue[:share], self._queue[share:]
            self._write(batch)

    def _write(self, batch: list[Segment]) -> None:
        compress = self.options.compression == "zstd"
        written = []
        try:
            for seg in batch:
                size = write_segment(
                    self._path(seg.id), seg, self.descriptor, compress, sync_directory=False
                )
                written.append((seg, size))
            fsync_directory(self.directory)  # the renames are durable now
        except BaseException as err:  # disk full, I/O error: keep them queued, report on flush
            with self._wake:
                self._write_error = err
                self._queue[:0] = batch
                self._wake.notify_all()
            time.sleep(self.options.writer_period_ms / 1000 or 0.1)
            return
        for seg, _ in written:
            self._store.mark_written(seg)
        with self._wake:
            self._write_error = None
            self._bytes_on_disk += sum(size for _, size in written)
            self._unwritten.difference_update(seg.id for seg in batch)
            self._wake.notify_all()

    # --- CSV -------------------------------------------------------------------------
    def _prepare_csv(self, source: Any, header: bool | None) -> list[Segment]:
        """Segments of a CSV file parsed in blocks with pyarrow (never whole in memory)."""
        import pyarrow as pa
        import pyarrow.csv as pacsv

        names = [f.name for f in self.descriptor.fields]
        where = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<file>"
        with _open_binary(source) as stream:
            first = _peek_line(stream)
            columns = _header_names(first) if first is not None else None
            if header is None:
                header = columns is not None and {c.lower() for c in columns} == {
                    n.lower() for n in names
                }
            if header:
                if columns is None or sorted(c.lower() for c in columns) != sorted(
                    n.lower() for n in names
                ):
                    raise CSVError(
                        f"{where}, line 1: the header names {columns}; the record's fields are {names}"
                    )
                by_lower = {n.lower(): n for n in names}
                columns = [by_lower[c.lower()] for c in columns]
            else:
                columns = names
            types = {f.name: f.arrow_type for f in self.descriptor.fields}
            segments: list[Segment] = []
            try:
                reader = pacsv.open_csv(  # parses the first block already
                    stream,
                    read_options=pacsv.ReadOptions(
                        column_names=columns,
                        skip_rows=1 if header else 0,
                        block_size=CSV_BLOCK_BYTES,
                    ),
                    convert_options=pacsv.ConvertOptions(
                        column_types=types,
                        strings_can_be_null=False,
                        quoted_strings_can_be_null=False,
                    ),
                )
                for batch in reader:
                    table = pa.Table.from_batches([batch]).select(names)
                    try:
                        conformed = self._store.conform(table)
                    except DescriptorError as err:
                        raise _CSVRowError(str(err)) from None
                    segments.extend(self._store.prepare(conformed))
            except (pa.ArrowInvalid, _CSVRowError) as err:
                detail = _locate_csv_error(source, self.descriptor, columns, header)
                raise CSVError(f"{where}, {detail}" if detail else f"{where}: {err}") from None
        return segments

    # --- queries ----------------------------------------------------------------------
    def schema(self) -> pa.Schema:
        return self._store.schema

    def _schema_of(self, columns: Sequence[str] | None) -> pa.Schema:
        import pyarrow as pa

        schema = self.schema()
        return schema if columns is None else pa.schema([schema.field(c) for c in columns])

    def scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> pa.RecordBatchReader:
        import pyarrow as pa

        return pa.RecordBatchReader.from_batches(
            self._schema_of(columns), self._store.scan(columns, predicate)
        )

    def estimate(self, predicate: Predicate | None = None) -> Estimate:
        ids = self._store.segment_ids(self._store.query_box(predicate))
        rows = self._store.rows_in(ids)
        width = self.descriptor.record_size
        return Estimate(rows, rows * width)

    def aggregate(
        self,
        items: Sequence[tuple[str, str, str | None]],
        group_by: Sequence[str],
        predicate: Predicate | None,
        ambiguous: Mapping[str, Sequence[float]],
    ) -> pa.Table | None:
        """A single-stream aggregate query answered from the found records, without SQL.

        ``SELECT avg(passenger_count) FROM s WHERE <box>`` (MDDS's queries)
        needs only the matching records' one column: the engine asks here
        first, and runs the statement as SQL when this returns None
        (grouping, text columns, functions it does not compute, a found
        record holding an ``ambiguous`` value).
        """
        import pyarrow as pa

        if group_by:
            return None
        columns = self._store.aggregate(items, predicate, ambiguous)
        if columns is None:
            return None
        # names may repeat (SELECT count(*), count(*)): a table from arrays keeps both
        return pa.Table.from_arrays([a for _, a in columns], names=[n for n, _ in columns])

    def describe_scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> list[str]:
        """For ``explain``: segments the R*-tree leaves to inspect, of how many."""
        box = self._store.query_box(predicate)
        ids = self._store.segment_ids(box)
        total = self._store.num_segments
        how = f"{self.options.iterator} iterator"
        return [
            f"segments inspected: {len(ids)} of {total} "
            f"({self._store.rows_in(ids)} of {self.num_records} records; {how})"
        ]

    def range(self, columns: Sequence[str] | None = None, **bounds: Any) -> pa.Table:
        """Records with ``lo <= field <= hi`` for each ``field=(lo, hi)`` (None: open), as a table.

        ``stream.range(pickup_latitude=(40.75, 40.76), passenger_count=(None, 2))``
        """
        predicate = Predicate()
        fields = {f.name.lower(): f.name for f in self.descriptor.fields}
        for name, bound in bounds.items():
            if name.lower() not in fields:
                raise ValueError(f"stream {self.name!r} has no field {name!r}")
            try:
                lo, hi = bound
            except (TypeError, ValueError):
                raise ValueError(
                    f"the range of {name!r} is a pair (lo, hi), not {bound!r}"
                ) from None
            predicate = predicate.and_(Predicate.between(fields[name.lower()], lo, hi))
        return self.scan(columns, predicate).read_all()

    # --- information ----------------------------------------------------------------
    @property
    def num_records(self) -> int:
        return self._store.num_records

    @property
    def num_segments(self) -> int:
        return self._store.num_segments

    @property
    def bytes_on_disk(self) -> int:
        return self._bytes_on_disk

    @property
    def unwritten_segments(self) -> int:
        """Segments ingested but not yet on disk."""
        with self._wake:
            return len(self._unwritten)

    def cache_stats(self) -> dict[str, int]:
        stats = self._cache.stats
        return {
            "hits": stats.hits,
            "misses": stats.misses,
            "evictions": stats.evictions,
            "bytes": self._cache.used,
            "segments": len(self._cache),
        }

    def __repr__(self) -> str:
        return f"Stream({self.name!r}, {self.num_records} records in {self.num_segments} segments)"

    # --- lifecycle --------------------------------------------------------------------
    def close(self, flush: bool = True) -> None:
        """Stop the writers, after writing everything (unless ``flush=False``)."""
        if flush and not self.read_only and not self._closing:
            with contextlib.suppress(StreamWriteError):
                self.flush()
        with self._wake:
            self._closing = True
            self._wake.notify_all()
        for writer in self._writers:
            writer.join()
        # give the memory back now, even if something still holds this object
        self._cache.clear()
        self._store.clear()

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot ingest into {self.name!r}: the database is open read-only")
        if self._closing:
            raise TesseraError(f"stream {self.name!r} is closed")


class _CSVRowError(Exception):
    """A parsed block does not fit the descriptor: the slow reader then finds the line."""


@contextlib.contextmanager
def _open_binary(source: Any) -> Iterator[IO[bytes]]:
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield f
        return
    if isinstance(source, io.TextIOBase):
        yield io.BytesIO(source.read().encode())  # text mode: pyarrow reads bytes
        return
    yield source


def _peek_line(stream: IO[bytes]) -> bytes | None:
    """The first line, leaving the stream where it was (None if it cannot be rewound)."""
    if not stream.seekable():
        return None
    at = stream.tell()
    line = stream.readline()
    stream.seek(at)
    return line


def _header_names(line: bytes) -> list[str] | None:
    try:
        row = next(csv.reader([line.decode("utf-8").rstrip("\r\n")]))
    except (UnicodeDecodeError, StopIteration, csv.Error):
        return None
    return [c.strip() for c in row]


def _locate_csv_error(
    source: Any, descriptor: RecordDescriptor, columns: list[str], header: bool
) -> str | None:
    """'line N, field F: problem' for the first row that does not fit, read again slowly."""
    if not isinstance(source, (str, os.PathLike)):
        if not (hasattr(source, "seekable") and source.seekable()):
            return None
        source.seek(0)
        text: Any = (
            source
            if isinstance(source, io.TextIOBase)
            else io.TextIOWrapper(source, encoding="utf-8", newline="")
        )
    else:
        text = open(source, encoding="utf-8", newline="")  # noqa: SIM115
    fields = [descriptor.field(c) for c in columns]
    try:
        reader = csv.reader(text)
        for row in reader:
            if header and reader.line_num == 1:
                continue
            if len(row) != len(fields):
                return f"line {reader.line_num}: {len(row)} fields, the record has {len(fields)}"
            for f, value in zip(fields, row, strict=True):
                problem = _field_problem(f.type, f.array_len, value)
                if problem:
                    return f"line {reader.line_num}, field {f.name!r}: {problem}"
    except (UnicodeDecodeError, csv.Error) as err:
        return f"line {reader.line_num}: {err}"
    finally:
        if isinstance(source, (str, os.PathLike)):
            text.close()
        elif text is not source:
            text.detach()  # leave the caller's file open
    return None


_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "epoch_t": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def _field_problem(kind: str, array_len: int | None, value: str) -> str | None:
    if kind == "char":
        size = len(value.encode("utf-8"))
        if size > (array_len or 0):
            return f"{value!r} is {size} bytes, longer than its array_len of {array_len}"
        return None
    if kind in ("float", "double"):
        try:
            float(value)
        except ValueError:
            return f"{value!r} is not a number"
        return None
    try:
        number = int(value.strip())
    except ValueError:
        return f"{value!r} is not an integer ({kind})"
    lo, hi = _INT_RANGES[kind]
    if not lo <= number <= hi:
        return f"{number} is outside the range of {kind}"
    return None
