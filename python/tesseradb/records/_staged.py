"""A bounded-memory ingest call (a CSV file, an iterator of parts): its segments written
to disk as they are prepared, the call committed to the log at its end."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tesseradb.errors import StreamWriteError
from tesseradb.records._calls import chain
from tesseradb.records._segments import Segment

if TYPE_CHECKING:
    from tesseradb.records._stream import Stream

__all__ = ["StagedCall"]


class StagedCall:
    """An ingest call written to disk as it is prepared, committed at its end.

    Each ``write`` gives a run of segments consecutive ids (other calls may
    take ids between runs) and writes them on a small pool, at most two runs
    at a time, so memory holds about three runs whatever the call's size.
    ``commit`` appends the runs to the call log as one chain: until then no
    reader serves them, and a crash leaves files of no committed call, which
    the next writer removes. ``discard`` removes them at once.
    """

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.runs: list[tuple[int, int, int]] = []  # first id, segments, records
        self.placed: list[tuple[int, int, list[float], list[float]]] = []  # id, records, box
        self.bytes = 0
        self._pool = ThreadPoolExecutor(max(1, stream.options.writer_threads))
        self._writing: list[list[Any]] = []  # the futures of each run in flight

    def write(self, segments: list[Segment]) -> None:
        if not segments:
            return
        stream = self.stream
        stream._store.assign_ids(segments)
        records = sum(s.num_records for s in segments)
        self.runs.append((segments[0].id, len(segments), records))
        self.placed.extend((s.id, s.num_records, s.lo, s.hi) for s in segments)
        while len(self._writing) >= 2:  # bounded memory: the oldest run first
            self._finish(self._writing.pop(0))
        compress = stream.options.compression == "zstd"
        self._writing.append(
            [
                self._pool.submit(stream._files.write, seg, stream.descriptor, compress)
                for seg in segments
            ]
        )

    def _finish(self, futures: list[Any]) -> None:
        for future in futures:
            self.bytes += future.result()

    def wait(self) -> None:
        """Return once every run is on disk (raising what a write raised)."""
        while self._writing:
            self._finish(self._writing.pop(0))
        self.stream._files.sync()

    def commit(self) -> int:
        """Append the call's chain to the call log (now it is committed) and serve it."""
        stream = self.stream
        self._pool.shutdown()
        try:
            with stream._log_lock:
                stream._log.append(chain(self.runs))
        except BaseException as err:
            with contextlib.suppress(OSError):
                stream._log.cut_torn_tail()  # what of the chain reached the log
            self.discard()
            raise StreamWriteError(
                f"stream {stream.name!r}: the call log could not be written: {err}"
            ) from err
        stream._store.add_all_stored(self.placed)
        with stream._wake:
            stream._bytes_on_disk += self.bytes
        return sum(records for _, _, records in self.runs)

    def discard(self) -> None:
        """Remove every file of the call (those a crash would leave go at the next open)."""
        for futures in self._writing:
            for future in futures:
                future.cancel()
        self._pool.shutdown(wait=True)
        self._writing = []
        for segment_id, *_ in self.placed:
            with contextlib.suppress(OSError):
                self.stream._files.remove(segment_id)
        with contextlib.suppress(OSError):
            self.stream._files.sync()
