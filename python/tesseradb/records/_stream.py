"""A record stream: ingest, asynchronous persistence, the segment cache and queries (MDDS).

A :class:`Stream` owns a directory of segment files, its call log and a
:class:`SegmentStore`. ``ingest`` builds a call's segments in the caller's
thread (the Rust work runs without the GIL, so feeder threads ingest in
parallel) and publishes them together: from then on queries in this
process see them. The segments go on a queue; writer threads wake every
``writer_period_ms`` (or at once when ``flush`` asks), write them to
temporary names, fsync, rename, fsync the directory, and unpin them from
memory (they stay in the segment cache); once every segment of a call is on
disk, the call's record is appended to the call log (:mod:`._calls`) and
fsynced, and only then is the call durable. ``flush`` returns once
everything ingested before it is durable.

Opening a stream reads the call log and rebuilds the R*-tree from the
headers of the committed calls' segment files; segment files of calls that
never committed (a crash cut them short) are not served, and a writer
removes them. A read-only stream reads the log's new records before each
query, so it sees other processes' calls as they commit, each whole. A
committed segment that is missing or damaged is reported in ``problems``
and never served: a query that would need it fails with
:class:`SegmentFileError` naming it, until ``tessera check --repair`` sets
it aside.

The stream is a relation: SQL predicates on indexing fields go to the
R*-tree and the segments' kd-trees, the others filter the found records.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import Lifetime, refuses_when_closed
from tesseradb.errors import (
    CSVError,
    InvalidArgumentError,
    ReadOnlyError,
    StreamWriteError,
    TesseraError,
)
from tesseradb.records._cache import ClockCache
from tesseradb.records._calls import CALL_LOG, CallLog, CallRecord
from tesseradb.records._csv import csv_tables, file_size, is_file
from tesseradb.records._descriptor import RecordDescriptor
from tesseradb.records._files import HEADER_CACHE, RemoteSegments, segment_files
from tesseradb.records._options import StreamOptions
from tesseradb.records._segment_file import SegmentFileError
from tesseradb.records._segments import Segment, SegmentStore
from tesseradb.records._staged import StagedCall
from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import Estimate

if TYPE_CHECKING:
    import pyarrow as pa

    from tesseradb.progress import Cancel, ProgressLike
    from tesseradb.storage import Location

__all__ = ["CSVError", "Stream", "StreamOptions", "StreamWriteError"]

WRITE_BATCH = 64  # segments a writer puts on disk before it commits the calls they complete
STAGE_BYTES = 128 << 20  # prepared segments a bounded call holds before writing them


@refuses_when_closed
class Stream:
    """A record stream of the database: ingest records, query them by range, in SQL too."""

    _lifetime: Lifetime | None = None  # (set by the database that opened it)

    def _check_open(self) -> None:
        if self._lifetime is not None:
            self._lifetime.check(f"stream {self.name!r}")

    def __init__(
        self,
        name: str,
        descriptor: RecordDescriptor,
        options: StreamOptions,
        directory: Path,
        read_only: bool = False,
        location: Location | None = None,
    ) -> None:
        self.name = name
        self.descriptor = descriptor
        self.options = options
        self.directory = directory  # the call log's folder (and the segments', if local)
        self._files = segment_files(directory, location)
        if isinstance(self._files, RemoteSegments):
            self._files.use_header_copies(directory / HEADER_CACHE, write=not read_only)
        self.location = location.url if location is not None else None  # (segments there)
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
            indexes=options.indexes,
            cache=self._cache,
            load=self._load,
        )
        # a segment in an object store is a round trip away: a scan fetches them 16 at once
        self._store.parallel_loads = 16 if self._files.remote else 1
        self._bytes_on_disk = 0
        self._log = CallLog(directory)
        self._refresh_lock = threading.Lock()
        self._refreshes = False  # reads the call log's new records before queries
        self._open_directory()
        # the writer: queued segments, how many are in flight, errors to report
        self._queue: list[Segment] = []
        self._unwritten: set[int] = set()  # ids of segments whose call is not yet committed
        self._call_of: dict[int, int] = {}  # segment id -> its call's first segment id
        self._calls: dict[int, list[int]] = {}  # first id -> [segments, left to write, records]
        self._uncommitted: list[CallRecord] = []  # whole on disk; their log append failed
        self._log_lock = threading.Lock()
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
        """Serve the committed calls' segments (by their headers); report what is amiss.

        A writer first removes temporary files (writes never confirmed), makes
        the call log of a stream written before there was one, cuts a torn
        last log record and, once the log is read whole, removes the segment
        files of calls that never committed.
        """
        files = self._files.ids()
        if not self.read_only:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._files.prepare()
            if not self._log.exists:
                self._make_log(files)
        if not self._log.exists:
            # read-only, and written before there was a call log: every file is served
            for segment_id in sorted(files):
                self._add_segment(segment_id, None)
            return
        committed: set[int] = set()
        calls = self._log.read_new(self.name)
        self._files.prefetch_headers([i for call in calls for i in call.ids])
        for call in calls:
            committed.update(self._add_call(call))
        self.problems.extend(self._log.damaged)
        self._store.reserve_ids(max([*files, *committed], default=0) + 1)
        orphans = sorted(set(files) - committed)
        if orphans and self._log.damaged:
            # they may be the damaged (or cut off) records' calls, committed and acknowledged:
            # never dropped, never served around; a query that may need them is refused
            message = (
                f"stream {self.name!r}: segment files {_id_ranges(orphans)} belong to no "
                "committed call and are kept (the call log is damaged, so they may be "
                "committed ones); `tessera check --repair` sets them aside"
            )
            self.problems.append(message)
            for segment_id in orphans:
                self._add_unvouched(segment_id, message)
        if self.read_only:
            self._refreshes = True
            return
        self._log.cut_torn_tail()
        if orphans and not self._log.damaged:
            # parts of calls a crash cut short: never committed, never served
            for segment_id in orphans:
                self._files.remove(segment_id)
            self._files.sync()
        if self._log.version < 3 and not self._log.damaged:
            self._log.create(calls)  # (a log of an older version gains its checkpoint)

    def reload(self) -> None:
        """Read the stream's files again (after ``tessera check --repair`` changed them).

        Everything ingested is flushed first; ingest must not run meanwhile.
        """
        if not self.read_only:
            self.flush()
        with self._refresh_lock:
            self._store.clear()
            self._cache.clear()
            self.problems = []
            self._bytes_on_disk = 0
            self._log = CallLog(self.directory)
            self._open_directory()

    def _make_log(self, files: set[int]) -> None:
        """The call log of a stream written before there was one: each file a call of its own."""
        calls = []
        newest = 0
        for segment_id in sorted(files):
            try:
                header = self._files.header(segment_id)
                records = header.record_count
                newest = max(newest, header.layout_version)
            except SegmentFileError:
                records = 0
            calls.append(CallRecord(segment_id, 1, records))
        self._log.create(calls)
        if newest >= 2:  # written by a TesseraDB that keeps a log: the log was lost
            self.problems.append(
                f"stream {self.name!r}: its call log was missing and was made again from "
                f"{len(calls)} segment files; a call a crash cut short before the log was lost "
                "may be served in part"
            )

    def _add_call(self, call: CallRecord) -> range:
        """Serve a committed call's segments; missing or damaged ones are recorded as such."""
        for segment_id in call.ids:
            self._add_segment(segment_id, call)
        return call.ids

    def _add_segment(self, segment_id: int, call: CallRecord | None) -> None:
        path = self._files.where(segment_id)
        of_call = (
            f" (of the call of segments {call.first}..{call.first + call.count - 1})"
            if call is not None and call.count > 1
            else ""
        )
        try:
            header = self._files.header(segment_id)  # (prefetched, for segments in a bucket)
        except FileNotFoundError:
            reason = f"stream {self.name!r}: segment file {path} is missing{of_call}"
            self.problems.append(reason)
            self._store.add_damaged(segment_id, reason)
            return
        except SegmentFileError as err:
            reason = f"stream {self.name!r}: {err}{of_call}"
            self.problems.append(reason)
            self._store.add_damaged(segment_id, reason)
            return
        reason = None
        if header.typeid != self.descriptor.typeid:
            reason = f"holds records of format {header.typeid}, not {self.descriptor.typeid}"
        elif header.segment_id != segment_id:
            reason = f"holds segment {header.segment_id}, not its name's"
        elif header.file_size != header.total_length:
            reason = f"is torn: {header.file_size} bytes, its header says {header.total_length}"
        if reason is not None:
            message = f"stream {self.name!r}: segment file {path} {reason}{of_call}"
            self.problems.append(message)
            placed = header.segment_id == segment_id and header.typeid == self.descriptor.typeid
            box = (header.lo, header.hi) if placed else None
            self._store.add_damaged(segment_id, message, header.record_count, box)
            return
        self._store.add_stored(segment_id, header.record_count, header.lo, header.hi)
        self._bytes_on_disk += header.total_length

    def _add_unvouched(self, segment_id: int, message: str) -> None:
        """A segment file no whole log record vouches for while the log is damaged: queries
        that may need its records (by its header's bounds, when readable) are refused."""
        box = None
        records = None
        with contextlib.suppress(SegmentFileError, OSError):
            header = self._files.header(segment_id)
            if header.segment_id == segment_id and header.typeid == self.descriptor.typeid:
                box, records = (header.lo, header.hi), header.record_count
        self._store.add_damaged(segment_id, message, records, box)

    def _refresh(self) -> None:
        """Serve the calls other processes committed since the last look (read-only streams)."""
        if not self._refreshes or self._log.size() <= self._log.offset:
            return
        with self._refresh_lock:
            seen = len(self._log.damaged)
            for call in self._log.read_new(self.name):
                self._add_call(call)
            self.problems.extend(self._log.damaged[seen:])

    def _load(self, segment_id: int) -> Segment:
        """A stored segment read back and checked (checksum, format) for the segment cache."""
        path = self._files.where(segment_id)
        try:
            return self._files.read(segment_id, self.descriptor, self._store.orders)
        except (SegmentFileError, FileNotFoundError) as err:
            what = f"segment file {path} is missing" if isinstance(err, FileNotFoundError) else err
            problem = f"stream {self.name!r}: {what}"
            if problem not in self.problems:
                self.problems.append(problem)
            raise SegmentFileError(
                f"{problem}; this query needs its records; `tessera check --repair` sets it "
                "aside so the rest can be read"
            ) from None

    # --- ingest -----------------------------------------------------------------------
    def ingest(
        self,
        data: Any,
        *,
        durable: bool = False,
        header: bool | None = None,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> int:
        """Add records; they are queryable when this returns. Returns how many.

        ``data`` is a pyarrow Table or RecordBatch, a numpy structured array,
        a bytes-like buffer of packed binary records laid out as the
        descriptor says, a CSV file (a path or a file object; ``header``
        says whether its first line names the fields, None: detect), or an
        iterator of any of these (a generator, a ``pyarrow.RecordBatchReader``),
        all one call. Either all of a call's records are kept or, on an
        error, none.

        A CSV file or an iterator is read in bounded memory: once its
        prepared segments pass ``STAGE_BYTES`` they go to disk as they come,
        and the call commits at its end, durably. ``durable=True`` returns
        only once the records are on disk, fsynced. ``progress`` counts the
        records prepared (a CSV file's bytes read; :mod:`tesseradb.progress`);
        ``cancel`` stops the call before it commits anything.
        """
        self._check_writable()
        if is_file(data) or _is_parts(data):
            return self._ingest_bounded(data, header, durable, progress, cancel)
        if progress is None and cancel is None:  # (ingest is the hot path: no tracker)
            segments = self._store.prepare(self._store.conform(data))
        else:
            from tesseradb.progress import tracker

            task = f"ingest into stream {self.name}"
            with tracker(task, None, "records", progress, cancel, "stream.ingest") as watch:
                table = self._store.conform(data)
                watch.set_total(table.num_rows)
                segments = self._store.prepare(table, watch.advance)
                watch.check()  # the last moment a cancel keeps nothing: publishing is at once
        return self._publish(segments, durable)

    def _publish(self, segments: list[Segment], durable: bool) -> int:
        """Make a call's prepared segments queryable and queue them for the writers."""
        self._store.publish(segments)  # gives the call's segments consecutive ids
        if segments:
            first = segments[0].id
            with self._wake:
                records = sum(s.num_records for s in segments)
                self._calls[first] = [len(segments), len(segments), records]
                for seg in segments:
                    self._call_of[seg.id] = first
                self._unwritten.update(s.id for s in segments)
                self._queue.extend(segments)
                if durable:
                    self._flush_requested += 1
                    self._wake.notify_all()
            if durable:
                self._wait_written({s.id for s in segments})
        return sum(s.num_records for s in segments)

    def _ingest_bounded(
        self,
        data: Any,
        header: bool | None,
        durable: bool,
        progress: ProgressLike,
        cancel: Cancel | None,
    ) -> int:
        """One call over a CSV file or an iterator of parts, never whole in memory.

        Prepared segments are held until they pass ``STAGE_BYTES``; from then
        on they are written to disk as they come (:class:`StagedCall`) and the
        call commits as a chain in the call log at its end. A call that never
        passes the bound is published as any other.
        """
        from tesseradb.progress import tracker

        one_file = is_file(data)
        parts: Iterator[Any] = iter([data]) if one_file else iter(data)
        total = file_size(data) if one_file else None
        task = f"ingest into stream {self.name}"
        unit = "bytes" if one_file else "records"
        with tracker(task, total, unit, progress, cancel, "stream.ingest") as watch:
            count_records = None if one_file else watch.advance
            count_bytes = watch.advance if one_file else None
            held: list[Segment] = []
            held_bytes = 0
            staged: StagedCall | None = None
            try:
                for part in parts:
                    watch.check()
                    for table in self._tables(part, header, count_bytes):
                        segments = self._store.prepare(table, count_records)
                        held.extend(segments)
                        held_bytes += sum(s.nbytes for s in segments)
                        if held_bytes >= STAGE_BYTES:
                            staged = staged or StagedCall(self)
                            staged.write(held)
                            held, held_bytes = [], 0
                watch.check()  # the last moment a cancel keeps nothing
                if staged is None:
                    return self._publish(held, durable)
                staged.write(held)
                held = []
                staged.wait()
                watch.check()
            except BaseException:
                if staged is not None:
                    staged.discard()
                raise
            return staged.commit()

    def _tables(
        self, part: Any, header: bool | None, count_bytes: Callable[[int], None] | None
    ) -> Iterator[pa.Table]:
        """A part of an ingest call as conformed tables (a CSV file block by block)."""
        if is_file(part):
            yield from csv_tables(part, self.descriptor, self._store.conform, header, count_bytes)
        else:
            yield self._store.conform(part)

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
        with self._log_lock:
            self._log.seal()

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
                if not self._queue and not self._uncommitted:
                    if self._closing:
                        return
                    continue
                # the writers split the queue, in batches small enough that calls
                # commit (and reach readers and flush) while ingest runs ahead
                share = min(-(-len(self._queue) // threads), WRITE_BATCH)
                batch, self._queue = self._queue[:share], self._queue[share:]
            self._write(batch)

    def _write(self, batch: list[Segment]) -> None:
        """Put ``batch`` on disk, then commit the calls it completes to the call log."""
        compress = self.options.compression == "zstd"
        written = []
        try:
            for seg in batch:
                written.append((seg, self._files.write(seg, self.descriptor, compress)))
            if batch:
                self._files.sync()  # durable now (renames fsynced; PUTs acknowledged)
        except BaseException as err:  # disk full, I/O error: keep them queued, report on flush
            self._failed(err, lambda: self._queue.__setitem__(slice(0, 0), batch))
            return
        for seg, _ in written:
            self._store.mark_written(seg)
        with self._wake:
            self._bytes_on_disk += sum(size for _, size in written)
            done, self._uncommitted = self._uncommitted, []
            for seg in batch:
                first = self._call_of[seg.id]
                call = self._calls[first]
                call[1] -= 1
                if call[1] == 0:  # the call's last segment: the call is whole on disk
                    done.append(CallRecord(first, call[0], call[2]))
        if done:
            try:
                with self._log_lock:
                    self._log.append(done)
            except BaseException as err:
                self._failed(err, lambda: self._uncommitted.__setitem__(slice(0, 0), done))
                return
        with self._wake:
            self._write_error = None
            for call in done:
                del self._calls[call.first]
                self._unwritten.difference_update(call.ids)
                for segment_id in call.ids:
                    del self._call_of[segment_id]
            self._wake.notify_all()

    def _failed(self, err: BaseException, keep: Callable[[], None]) -> None:
        """A write or log append failed: keep its work for the next round, report on flush."""
        with self._wake:
            self._write_error = err
            keep()
            self._wake.notify_all()
        time.sleep(self.options.writer_period_ms / 1000 or 0.1)

    # --- CSV -------------------------------------------------------------------------
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

        self._refresh()
        return pa.RecordBatchReader.from_batches(
            self._schema_of(columns), self._store.scan(columns, predicate)
        )

    def estimate(self, predicate: Predicate | None = None) -> Estimate:
        self._refresh()
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

        self._refresh()
        if group_by:
            return None
        columns = self._store.aggregate(items, predicate, ambiguous)
        if columns is None:
            return None
        # names may repeat (SELECT count(*), count(*)): a table from arrays keeps both
        return pa.Table.from_arrays([a for _, a in columns], names=[n for n, _ in columns])

    def top(
        self,
        columns: Sequence[str] | None,
        predicate: Predicate | None,
        order: str,
        descending: bool,
        count: int,
        distinct: bool,
    ) -> pa.Table | None:
        """The records ``ORDER BY order LIMIT count`` needs, read backwards (or forwards)
        from the segments' key orders as a B-tree index is: see ``SegmentStore.top``."""
        self._refresh()
        names = self.schema().names if columns is None else columns
        return self._store.top(names, predicate, order, descending, count, distinct)

    @property
    def searches(self) -> dict[str, int]:
        """How many segments this stream's queries have searched each way since it opened:
        ``kdtree`` (a descent of the segment's kd-tree), ``sequential`` (a look at every
        record), ``index (a, b)`` (the run of one of the stream's ``indexes``), ``whole``
        (the segment lies inside the query's box: nothing to search). Like PostgreSQL's
        counts of index scans, it tells whether an index is used."""
        return dict(self._store.searches)

    def describe_scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> list[str]:
        """For ``explain``: segments the R*-tree leaves to inspect, of how many, and the
        ways they may be searched."""
        self._refresh()
        box = self._store.query_box(predicate)
        ids = self._store.segment_ids(box)
        total = self._store.num_segments
        how = f"{self.options.iterator} iterator"
        if self.options.iterator == "auto" and self.options.indexes:
            how += ", indexes " + ", ".join(f"({', '.join(i)})" for i in self.options.indexes)
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
                raise InvalidArgumentError(f"stream {self.name!r} has no field {name!r}")
            try:
                lo, hi = bound
            except (TypeError, ValueError):
                raise InvalidArgumentError(
                    f"the range of {name!r} is a pair (lo, hi), not {bound!r}"
                ) from None
            text = self.descriptor.field(fields[name.lower()]).type == "char"
            for end in (lo, hi):
                wrong = not isinstance(end, (int, float)) or isinstance(end, bool)
                if end is not None and (not isinstance(end, str) if text else wrong):
                    kind = "strings" if text else "numbers"
                    raise InvalidArgumentError(
                        f"the range of {name!r} has ends that are {kind} or None, not {end!r}"
                    )
            predicate = predicate.and_(Predicate.between(fields[name.lower()], lo, hi))
        if isinstance(columns, str):
            columns = [columns]
        if columns is not None:
            if not isinstance(columns, Sequence) or not all(isinstance(c, str) for c in columns):
                raise InvalidArgumentError(
                    f"columns of stream {self.name!r} must be a list of field names, not {columns!r}"
                )
            for column in columns:
                if column.lower() not in fields:
                    raise InvalidArgumentError(f"stream {self.name!r} has no field {column!r}")
            columns = [fields[c.lower()] for c in columns]
        return self.scan(columns, predicate).read_all()

    # --- information ----------------------------------------------------------------
    @property
    def last_commit(self) -> datetime | None:
        """When an ingest call was last committed to disk (the call log's time), if ever."""
        from datetime import UTC

        try:
            stamp = (self.directory / CALL_LOG).stat().st_mtime
        except FileNotFoundError:
            return None
        return datetime.fromtimestamp(stamp, UTC)

    @property
    def num_records(self) -> int:
        self._refresh()
        return self._store.num_records

    @property
    def num_segments(self) -> int:
        self._refresh()
        return self._store.num_segments

    @property
    def bytes_on_disk(self) -> int:
        self._refresh()
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


def _is_parts(data: Any) -> bool:
    """An iterator of an ingest call's parts."""
    import pyarrow as pa

    return isinstance(data, (Iterator, pa.RecordBatchReader))


# the largest float32: a larger magnitude is outside the type (even where it would round
# down to it), so a text the CSV reader made infinite is never taken for one in range
def _id_ranges(ids: Sequence[int]) -> str:
    """Sorted segment ids as runs: ``3..5, 9``."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(f"{a}..{b}" if b > a else str(a) for a, b in runs)
