"""The call log: which ingest calls of a stream are whole on disk (``calls.log``).

An ingest call becomes one or more segments with consecutive ids. The
writer puts a call's segment files on disk (each written to a temporary
name, fsynced, renamed; then the directory fsynced) and only then appends
the call's record to this log and fsyncs it: a call is *committed* once its
record is in the log, and only committed calls are served from disk. So a
reader in another process never sees part of a call, and after a crash a
call that was not yet whole is lost whole: its leftover segment files
belong to no record, and the next writer removes them.

Layout (little-endian): a header (magic ``TSDBCALL``, version u32, record
size u32; version 3 adds a *checkpoint* u64, the CRC-32 of the header's
first 24 bytes u32 and a zero u32, 32 bytes in all; versions 1 and 2 end
after 16), then 32-byte records: first segment id (u64), segment count
(u32), flags (u32, 0), record count of the call (u64), CRC-32 of the
record's first 24 bytes (u32), zero (u32). Records are of fixed size, so a
damaged one is found without losing the ones after it; a torn last record
(a crash during the append) is ignored, and a writer cuts it off.

Every append also sets the checkpoint to the number of records the log held
before it (already fsynced, so the claim is always true, and it costs no
fsync of its own). A log found shorter than its checkpoint was cut short
after the fact, by a person or the disk, not by a crash: its lost records
are damage, said as such, never taken for calls that never committed.
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
VERSION = 3  # written; 1 (no chains) and 2 (no checkpoint) are still read
READABLE_VERSIONS = (1, 2, 3)
CONTINUES = 1  # flags: more parts of this call follow
CONTINUED = 2  # flags: this part follows an earlier part of its call
_HEADER = struct.Struct("<8sII")  # magic, version, record size
_CHECKPOINT = struct.Struct("<QII")  # (version 3) records before the last append, CRC, zero
HEADER_SIZE = _HEADER.size + _CHECKPOINT.size  # 32, version 3
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
        self.header_size = 0  # the header's, once read (0: not yet)
        self.offset = 0  # bytes read so far (the header, then whole calls only)
        self.damaged: list[str] = []  # records that failed their check, as messages
        self.version = VERSION  # the log's, once read
        self.cut_short = False  # found shorter than its checkpoint

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
            f.write(_header(len(calls)))
            for call in calls:
                f.write(call.encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_directory(self.path.parent)
        self.offset = self.header_size = HEADER_SIZE
        self.damaged = []
        self.version = VERSION
        self.cut_short = False

    def read_new(self, stream: str) -> list[CallRecord]:
        """The committed records appended since the last read (all of them the first time).

        A record that fails its check is left out and described in
        ``damaged``, and so is every other part of its chain; a torn last
        record, or a chain whose last part is not there yet, is left for the
        next read.
        """
        try:
            with open(self.path, "rb") as f:
                checkpoint = self._read_header(f.read(HEADER_SIZE), stream)
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            raise SegmentFileError(
                f"stream {stream!r}: its call log {self.path} is missing"
            ) from None
        whole = len(data) - len(data) % RECORD_SIZE
        held = (self.offset - self.header_size + whole) // RECORD_SIZE
        if checkpoint > held and not self.cut_short:
            self.cut_short = True
            self.damaged.append(
                f"stream {stream!r}: its call log {self.path} is cut short: it held at least "
                f"{checkpoint} records and {held} are left; the calls of the records lost are "
                "not served"
            )
        calls: list[CallRecord] = []
        open_chain: list[CallRecord] = []  # parts read of a chain not yet ended
        dropping = False  # the chain being read lost a part: its other parts go too
        read_to = 0  # bytes of whole calls (and of records skipped as damaged)
        for at in range(0, whole, RECORD_SIZE):
            fields = data[at : at + _RECORD.size]
            crc, zero = _CRC.unpack_from(data, at + _RECORD.size)
            first, count, flags, records = _RECORD.unpack(fields)
            index = (self.offset + at - self.header_size) // RECORD_SIZE
            where = f"stream {stream!r}: record {index} of its call log {self.path}"
            known = (CONTINUES | CONTINUED) if self.version >= 2 else 0
            if crc != zlib.crc32(fields) or zero != 0 or flags & ~known or not count:
                self.damaged.append(
                    f"{where} is damaged (its checksum does not match): the segments of "
                    "that call are not served, and queries that may need them are refused"
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
                        "that call is not served, and queries that may need it are refused"
                    )
                    dropping = True
            elif not flags & CONTINUED and open_chain:
                self.damaged.append(
                    f"{where} starts a call while the call before it lacks its last part: "
                    "that call is not served, and queries that may need it are refused"
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

    def _read_header(self, header: bytes, stream: str) -> int:
        """Check the header (read whole each time: the checkpoint moves); its checkpoint."""
        if len(header) < _HEADER.size:
            raise SegmentFileError(f"stream {stream!r}: its call log {self.path} is torn")
        magic, version, size = _HEADER.unpack_from(header)
        if magic != MAGIC or size != RECORD_SIZE:
            raise SegmentFileError(f"stream {stream!r}: {self.path} is not a TesseraDB call log")
        if version not in READABLE_VERSIONS:
            raise SegmentFileError(
                f"stream {stream!r}: its call log {self.path} has version {version}; "
                f"this TesseraDB reads {', '.join(map(str, READABLE_VERSIONS))}"
            )
        self.version = version
        checkpoint = 0
        size = _HEADER.size
        if version >= 3:
            if len(header) < HEADER_SIZE:
                raise SegmentFileError(f"stream {stream!r}: its call log {self.path} is torn")
            checkpoint, crc, zero = _CHECKPOINT.unpack_from(header, _HEADER.size)
            if crc != zlib.crc32(header[: _HEADER.size + 8]) or zero != 0:
                raise SegmentFileError(
                    f"stream {stream!r}: the header of its call log {self.path} is damaged "
                    "(its checksum does not match)"
                )
            size = HEADER_SIZE
        if self.header_size == 0:
            self.header_size = self.offset = size
        return int(checkpoint)

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

    def seal(self) -> None:
        """Set the checkpoint to every record the log holds, and fsync (a stream's flush
        and close: then a cut to any of them is damage, never taken for a crash)."""
        if self.version < 3 or not self.header_size or not self.path.exists():
            return
        held = (self.offset - self.header_size) // RECORD_SIZE
        with open(self.path, "r+b") as f:
            f.write(_header(held))
            f.flush()
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
                f.write(_HEADER.pack(MAGIC, 2, RECORD_SIZE))
                f.flush()
                os.fsync(f.fileno())
                self.version = 2
            f.seek(self.offset)
            f.write(b"".join(call.encode() for call in calls))
            f.truncate()
            if self.version >= 3:
                # the records before this append are on disk already: the checkpoint
                # may say so in this append's fsync
                f.seek(0)
                f.write(_header((self.offset - self.header_size) // RECORD_SIZE))
            f.flush()
            os.fsync(f.fileno())
        self.offset += RECORD_SIZE * len(calls)


def _header(checkpoint: int) -> bytes:
    """A version 3 header claiming ``checkpoint`` records."""
    head = _HEADER.pack(MAGIC, VERSION, RECORD_SIZE) + struct.pack("<Q", checkpoint)
    return head + struct.pack("<II", zlib.crc32(head), 0)
