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

__all__ = ["CALL_LOG", "CallLog", "CallRecord", "chain"]

CALL_LOG = "calls.log"
MAGIC = b"TSDBCALL"
VERSION = 2  # written; 1 (no chains) is still read
READABLE_VERSIONS = (1, 2)
CONTINUES = 1  # flags: more parts of this call follow
CONTINUED = 2  # flags: this part follows an earlier part of its call
_HEADER = struct.Struct("<8sII")  # magic, version, record size
_RECORD = struct.Struct("<QIIQ")  # first id, segment count, flags, records
_CRC = struct.Struct("<II")  # CRC-32 of the record's fields, zero
RECORD_SIZE = _RECORD.size + _CRC.size  # 32


@dataclass(frozen=True)
class CallRecord:
    """One committed ingest call, or one part of a chained call: segments
    ``first .. first + count - 1`` holding ``records`` records."""

    first: int
    count: int
    records: int
    flags: int = 0  # CONTINUES and CONTINUED of a chain's parts

    @property
    def ids(self) -> range:
        return range(self.first, self.first + self.count)

    def encode(self) -> bytes:
        fields = _RECORD.pack(self.first, self.count, self.flags, self.records)
        return fields + _CRC.pack(zlib.crc32(fields), 0)


def chain(parts: list[tuple[int, int, int]]) -> list[CallRecord]:
    """The records of one call made of ``parts`` (first id, segment count, records)."""
    last = len(parts) - 1
    return [
        CallRecord(
            first,
            count,
            records,
            (CONTINUES if i < last else 0) | (CONTINUED if i > 0 else 0),
        )
        for i, (first, count, records) in enumerate(parts)
    ]


class CallLog:
    """A stream's ``calls.log``: read what was committed, append new calls (writers only)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / CALL_LOG
        self.offset = _HEADER.size  # bytes read so far (whole calls only)
        self.damaged: list[str] = []  # records that failed their check, as messages
        self.version = VERSION  # the log's, once read

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
        self.version = VERSION

    def read_new(self, stream: str) -> list[CallRecord]:
        """The committed records appended since the last read (all of them the first time).

        A record that fails its check is left out and described in
        ``damaged``, and so is every other part of its chain; a torn last
        record, or a chain whose last part is not there yet, is left for the
        next read.
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
        calls: list[CallRecord] = []
        open_chain: list[CallRecord] = []  # parts read of a chain not yet ended
        dropping = False  # the chain being read lost a part: its other parts go too
        read_to = 0  # bytes of whole calls (and of records skipped as damaged)
        for at in range(0, whole, RECORD_SIZE):
            fields = data[at : at + _RECORD.size]
            crc, zero = _CRC.unpack_from(data, at + _RECORD.size)
            first, count, flags, records = _RECORD.unpack(fields)
            index = (self.offset + at - _HEADER.size) // RECORD_SIZE
            where = f"stream {stream!r}: record {index} of its call log {self.path}"
            known = (CONTINUES | CONTINUED) if self.version >= 2 else 0
            if crc != zlib.crc32(fields) or zero != 0 or flags & ~known or not count:
                self.damaged.append(
                    f"{where} is damaged (its checksum does not match): the segments of "
                    "that call are not served"
                )
                dropping = bool(open_chain) or dropping
                open_chain = []
                read_to = at + RECORD_SIZE
                continue
            part = CallRecord(first, count, records, flags)
            if flags & CONTINUED and not open_chain:
                if not dropping:  # a chain whose first part was lost
                    self.damaged.append(
                        f"{where} continues a call whose earlier part is damaged: "
                        "that call is not served"
                    )
                    dropping = True
            elif not flags & CONTINUED and open_chain:
                self.damaged.append(
                    f"{where} starts a call while the call before it lacks its last part: "
                    "that call is not served"
                )
                open_chain = []
                dropping = False
            if dropping and flags & CONTINUED:
                if not flags & CONTINUES:
                    dropping = False
                read_to = at + RECORD_SIZE
                continue
            dropping = False
            open_chain.append(part)
            if not flags & CONTINUES:  # the call's last part: it is committed
                calls.extend(open_chain)
                open_chain = []
                read_to = at + RECORD_SIZE
        self.offset += read_to
        return calls

    def _check_header(self, header: bytes, stream: str) -> None:
        if len(header) < _HEADER.size:
            raise SegmentFileError(f"stream {stream!r}: its call log {self.path} is torn")
        magic, version, size = _HEADER.unpack(header)
        if magic != MAGIC or size != RECORD_SIZE:
            raise SegmentFileError(f"stream {stream!r}: {self.path} is not a TesseraDB call log")
        if version not in READABLE_VERSIONS:
            raise SegmentFileError(
                f"stream {stream!r}: its call log {self.path} has version {version}; "
                f"this TesseraDB reads {', '.join(map(str, READABLE_VERSIONS))}"
            )
        self.version = version

    def size(self) -> int:
        """The log's length in bytes now (0 when it is gone)."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def cut_torn_tail(self) -> None:
        """Drop what an append a crash cut short left: part of a record, or of a chain
        (writers only, after reading the whole log)."""
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
            if self.version < 2 and any(call.flags for call in calls):
                # a version 1 reader would take a chain's parts for damage: say version 2
                f.write(_HEADER.pack(MAGIC, VERSION, RECORD_SIZE))
                f.flush()
                os.fsync(f.fileno())
                self.version = VERSION
            f.seek(self.offset)
            f.write(b"".join(call.encode() for call in calls))
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
        self.offset += RECORD_SIZE * len(calls)
