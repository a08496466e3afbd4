"""The call log: which ingest calls of a stream are whole on disk (``calls.log``).

An ingest call becomes one or more segments with consecutive ids. The
writer puts a call's segment files on disk (each written to a temporary
name, fsynced, renamed; then the directory fsynced) and only then appends
the call's record to this log and fsyncs it: a call is *committed* once its
record is in the log, and only committed calls are served from disk. So a
reader in another process never sees part of a call, and after a crash a
call that was not yet whole is lost whole: its leftover segment files
belong to no record, and the next writer removes them.

Layout (little-endian): a 16-byte header (magic ``TSDBCALL``, version u32,
record size u32), then 32-byte records: first segment id (u64), segment
count (u32), flags (u32, 0), record count of the call (u64), CRC-32 of the
record's first 24 bytes (u32), zero (u32). Records are of fixed size, so a
damaged one is skipped without losing the ones after it; a torn last record
(a crash during the append) is ignored, and a writer cuts it off.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from tesseradb.errors import SegmentFileError

__all__ = ["CALL_LOG", "CallLog", "CallRecord"]

CALL_LOG = "calls.log"
MAGIC = b"TSDBCALL"
VERSION = 1
_HEADER = struct.Struct("<8sII")  # magic, version, record size
_RECORD = struct.Struct("<QIIQ")  # first id, segment count, flags, records
_CRC = struct.Struct("<II")  # CRC-32 of the record's fields, zero
RECORD_SIZE = _RECORD.size + _CRC.size  # 32


@dataclass(frozen=True)
class CallRecord:
    """One committed ingest call: segments ``first .. first + count - 1``."""

    first: int
    count: int
    records: int

    @property
    def ids(self) -> range:
        return range(self.first, self.first + self.count)

    def encode(self) -> bytes:
        fields = _RECORD.pack(self.first, self.count, 0, self.records)
        return fields + _CRC.pack(zlib.crc32(fields), 0)


class CallLog:
    """A stream's ``calls.log``: read what was committed, append new calls (writers only)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / CALL_LOG
        self.offset = _HEADER.size  # bytes read so far (whole records only)
        self.damaged: list[str] = []  # records that failed their check, as messages

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def create(self, calls: list[CallRecord]) -> None:
        """Write a new log holding ``calls`` (atomically: temporary file, fsync, rename).

        Nothing of it counts as read: :meth:`read_new` then gives ``calls``.
        """
        from tesseradb.records._segment_file import fsync_directory

        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(_HEADER.pack(MAGIC, VERSION, RECORD_SIZE))
            for call in calls:
                f.write(call.encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_directory(self.path.parent)
        self.offset = _HEADER.size
        self.damaged = []

    def read_new(self, stream: str) -> list[CallRecord]:
        """The records appended since the last read (all of them the first time).

        A record that fails its check is left out and described in
        ``damaged``; a torn last record is left for the next read.
        """
        try:
            with open(self.path, "rb") as f:
                if self.offset == _HEADER.size:
                    self._check_header(f.read(_HEADER.size), stream)
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            raise SegmentFileError(
                f"stream {stream!r}: its call log {self.path} is missing"
            ) from None
        whole = len(data) - len(data) % RECORD_SIZE
        calls = []
        for at in range(0, whole, RECORD_SIZE):
            fields = data[at : at + _RECORD.size]
            crc, zero = _CRC.unpack_from(data, at + _RECORD.size)
            first, count, flags, records = _RECORD.unpack(fields)
            if crc != zlib.crc32(fields) or zero != 0 or flags != 0 or count == 0:
                index = (self.offset + at - _HEADER.size) // RECORD_SIZE
                self.damaged.append(
                    f"stream {stream!r}: record {index} of its call log {self.path} is "
                    f"damaged (its checksum does not match): the segments of that call are not "
                    f"served"
                )
                continue
            calls.append(CallRecord(first, count, records))
        self.offset += whole
        return calls

    def _check_header(self, header: bytes, stream: str) -> None:
        if len(header) < _HEADER.size:
            raise SegmentFileError(f"stream {stream!r}: its call log {self.path} is torn")
        magic, version, size = _HEADER.unpack(header)
        if magic != MAGIC or size != RECORD_SIZE:
            raise SegmentFileError(f"stream {stream!r}: {self.path} is not a TesseraDB call log")
        if version != VERSION:
            raise SegmentFileError(
                f"stream {stream!r}: its call log {self.path} has version {version}; "
                f"this TesseraDB reads {VERSION}"
            )

    def size(self) -> int:
        """The log's length in bytes now (0 when it is gone)."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def cut_torn_tail(self) -> None:
        """Drop a partly written last record (writers only, after reading the whole log)."""
        if self.size() > self.offset:
            with open(self.path, "r+b") as f:
                f.truncate(self.offset)
                os.fsync(f.fileno())

    def append(self, calls: list[CallRecord]) -> None:
        """Write ``calls`` after the last whole record and fsync: now they are committed.

        Written at the known end rather than in append mode, so that what a
        failed append left (part of a record) is overwritten by the retry
        instead of shifting every record after it.
        """
        with open(self.path, "r+b") as f:
            f.seek(self.offset)
            f.write(b"".join(call.encode() for call in calls))
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        self.offset += RECORD_SIZE * len(calls)
