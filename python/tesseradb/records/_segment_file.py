"""Segment files: one segment of a record stream on disk (the layout is in docs/records.md).

All integers little-endian. A file is:

- header (64 bytes): magic ``TSDBSEG1``, layout version (u32), header size
  (u32), segment id (u64), total length in bytes including the checksum
  (u64), record format UUID (16 bytes), record count (u64), flags (u32), and
  (layout 2) the CRC-32 of the header's first 60 bytes and the indexing
  section (u32): opening a stream reads only headers, and the bounding box
  they give decides which queries read the segment, so it is checked too
  (layout 1 files have zero padding there and are read unchecked);
- indexing section: section length (u32), dimension count d (u32), for each
  dimension the position of its field in the record (u32), then d minimums
  and d maximums (f64; NaN as a maximum means the segment holds NaN, which
  sorts above +inf);
- packed kd-tree section: section length (u32), initial dimension (u32),
  node count (u32), then per node the record position (u32), left child
  (i32), right child (i32), -1 for none;
- records section, column by column (MDDS stores rows; columns read only
  what a query needs): section length (u64), field count (u32), then per
  field an encoding byte (0 raw, 1 zstd, 2 zstd of the byte-shuffled raw
  bytes: each item's first bytes, then its second bytes, ...), the raw length
  (u64), the stored length (u64) and the stored bytes; raw bytes are the
  field's values in the record's binary form (little-endian numbers; ``char``
  fields as fixed ``array_len`` bytes, NUL-padded). Writers use 2 where it is
  smaller than the raw bytes, else 0; 1 is read for older files;
- SHA-256 of everything before it (32 bytes).

Files are written to a temporary name, fsynced and renamed, so a file under
its final name is whole; a torn or corrupt one fails its length or checksum
check and is refused with :class:`SegmentFileError`, never served.
"""

from __future__ import annotations

import hashlib
import os
import struct
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb import _core
from tesseradb._durable import fsync_path
from tesseradb.errors import SegmentFileError
from tesseradb.records._descriptor import Field, RecordDescriptor
from tesseradb.records._segments import Segment, index_keys

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "HEADER_PREFIX",
    "LAYOUT_VERSION",
    "TEMPORARY_SUFFIX",
    "SegmentFileError",
    "SegmentHeader",
    "decode_segment",
    "encode_segment",
    "fsync_directory",
    "parse_header",
    "read_header",
    "read_segment",
    "write_segment",
]

MAGIC = b"TSDBSEG1"
TEMPORARY_SUFFIX = ".tmp"
LAYOUT_VERSION = 2  # written; 1 (without the header's CRC) is still read
READABLE_VERSIONS = (1, 2)
HEADER_SIZE = 64
_HEADER = struct.Struct(
    "<8sIIQQ16sQI"
)  # magic, version, header size, id, total length, uuid, count, flags
_HEADER_CRC = struct.Struct("<I")  # at _HEADER.size: CRC-32 of the header and indexing section
FLAG_ZSTD = 1
_RAW = 0  # column encodings; 1 (zstd) and 2 (byte-shuffled zstd) are decoded by _core
ZSTD_LEVEL = 1


@dataclass(frozen=True)
class SegmentHeader:
    segment_id: int
    total_length: int
    typeid: str
    record_count: int
    flags: int
    lo: list[float]
    hi: list[float]
    layout_version: int = LAYOUT_VERSION
    file_size: int = 0  # the file's length when the header was read


def encode_segment(
    segment: Segment, descriptor: RecordDescriptor, compress: bool = True
) -> tuple[list[Any], int]:
    """The bytes of ``segment``'s file, as a list of parts (a segment is ~1 MB: joining
    it would copy it twice more on the writer's core), and their total length."""
    import numpy as np

    index_positions = [
        next(i for i, f in enumerate(descriptor.fields) if f.name == name)
        for name in descriptor.index
    ]
    dims = len(index_positions)
    indexing = struct.pack(
        f"<I{dims}I{dims}d{dims}d", dims, *index_positions, *segment.lo, *segment.hi
    )
    node_records, node_left, node_right = segment.tree.nodes()
    nodes = np.empty(len(node_records), dtype=[("r", "<u4"), ("l", "<i4"), ("x", "<i4")])
    nodes["r"], nodes["l"], nodes["x"] = node_records, node_left, node_right
    tree = struct.pack("<II", segment.tree.initial_dimension, len(nodes)) + nodes.tobytes()
    raws = [_column_bytes(segment, field) for field in descriptor.fields]
    if compress:
        widths = [np.dtype(field.numpy_type).itemsize for field in descriptor.fields]
        encoded: list[tuple[int, Any]] = list(
            _core.encode_columns(list(zip(raws, widths, strict=True)), ZSTD_LEVEL)
        )
    else:
        encoded = [(_RAW, raw) for raw in raws]
    # the file as a list of parts, hashed and written one by one: a segment is
    # ~1 MB, and joining it would copy it twice more on the writer's core
    columns: list[Any] = [struct.pack("<I", len(descriptor.fields))]
    for raw, (encoding, stored) in zip(raws, encoded, strict=True):
        columns.append(struct.pack("<BQQ", encoding, len(raw), len(stored)))
        columns.append(stored)
    records_length = sum(len(part) for part in columns)
    body = [
        struct.pack("<I", 4 + len(indexing)),
        indexing,
        struct.pack("<I", 4 + len(tree)),
        tree,
        struct.pack("<Q", 8 + records_length),
        *columns,
    ]
    total = HEADER_SIZE + sum(len(part) for part in body) + 32
    fields = _HEADER.pack(
        MAGIC,
        LAYOUT_VERSION,
        HEADER_SIZE,
        segment.id,
        total,
        uuid.UUID(descriptor.typeid).bytes,
        segment.num_records,
        FLAG_ZSTD if compress else 0,
    )
    crc = zlib.crc32(body[1], zlib.crc32(body[0], zlib.crc32(fields)))
    header = (fields + _HEADER_CRC.pack(crc)).ljust(HEADER_SIZE, b"\0")
    digest = hashlib.sha256(header)
    for part in body:
        digest.update(part)
    return [header, *body, digest.digest()], total


def write_segment(
    path: Path,
    segment: Segment,
    descriptor: RecordDescriptor,
    compress: bool = True,
    sync_directory: bool = True,
) -> int:
    """Write ``segment`` to ``path`` durably (temporary name, fsync, rename); returns the file size.

    With ``sync_directory=False`` the caller fsyncs the directory itself (once
    for many files) before counting the segment as durable.
    """
    parts, total = encode_segment(segment, descriptor, compress)
    tmp = path.with_name(path.name + TEMPORARY_SUFFIX)
    with open(tmp, "wb") as f:
        for part in parts:
            f.write(part)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync_directory:
        fsync_directory(path.parent)
    return total


def read_header(path: Path, check_size: bool = True) -> SegmentHeader:
    """The header and bounding box of a segment file (reads its first bytes only).

    With ``check_size=False`` a file whose length differs from what its
    (checked) header says is returned all the same, ``file_size`` telling:
    its bounding box is still known, so the queries that would need it can
    be refused while the others are answered.
    """
    with open(path, "rb") as f:
        prefix = f.read(HEADER_PREFIX)
        size = os.fstat(f.fileno()).st_size
    return parse_header(prefix, size, path, check_size)


HEADER_PREFIX = HEADER_SIZE + 8 + 20 * 9  # header, indexing section up to 9 dimensions


def parse_header(
    data: bytes, size: int, path: Path | str, check_size: bool = True
) -> SegmentHeader:
    """The header of a segment from the first bytes of its file (``size``: the file's length)."""
    if len(data) < HEADER_SIZE + 8:
        raise SegmentFileError(
            f"segment file {path} is torn: {len(data)} bytes, shorter than its header"
        )
    magic, version, header_size, seg_id, total, typeid, count, flags = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SegmentFileError(f"{path} is not a TesseraDB segment file")
    if version not in READABLE_VERSIONS or header_size != HEADER_SIZE:
        raise SegmentFileError(
            f"segment file {path} has layout version {version} (header of {header_size} bytes); "
            f"this TesseraDB reads {', '.join(map(str, READABLE_VERSIONS))}"
        )
    (section, dims) = struct.unpack_from("<II", data, HEADER_SIZE)
    if not 1 <= dims <= 9 or section != 4 + 4 + 20 * dims:
        raise SegmentFileError(
            f"segment file {path} is corrupt: its header has {dims} indexing dimensions"
        )
    if len(data) < HEADER_SIZE + section:
        raise SegmentFileError(
            f"segment file {path} is torn: {len(data)} bytes, shorter than its header"
        )
    if version >= 2:
        (stored,) = _HEADER_CRC.unpack_from(data, _HEADER.size)
        crc = zlib.crc32(
            data[HEADER_SIZE : HEADER_SIZE + section], zlib.crc32(data[: _HEADER.size])
        )
        if crc != stored:
            raise SegmentFileError(
                f"segment file {path} is corrupt: its header's checksum does not match"
            )
    if size != total and check_size:
        raise SegmentFileError(
            f"segment file {path} is torn: {size} bytes, its header says {total}"
        )
    values = struct.unpack_from(f"<{dims}I{dims}d{dims}d", data, HEADER_SIZE + 8)
    lo, hi = list(values[dims : 2 * dims]), list(values[2 * dims :])
    typeid_text = str(uuid.UUID(bytes=typeid))
    return SegmentHeader(seg_id, total, typeid_text, count, flags, lo, hi, version, size)


def read_segment(
    path: Path, descriptor: RecordDescriptor, orders: Sequence[Sequence[int]] = ()
) -> Segment:
    """The whole segment, checked (length, checksum, record format) before anything is used."""
    # (read once: the header, the checks and the sections all come from it)
    return decode_segment(path.read_bytes(), path, descriptor, orders)


def decode_segment(
    data: bytes,
    path: Path | str,
    descriptor: RecordDescriptor,
    orders: Sequence[Sequence[int]] = (),
) -> Segment:
    """The segment a file's bytes hold (``path`` names it in errors), checked first; its
    tree gets the key ``orders`` (lists of indexing dimensions), which files do not keep."""
    import numpy as np
    import pyarrow as pa

    header = parse_header(data, len(data), path)
    if header.typeid != descriptor.typeid:
        raise SegmentFileError(
            f"segment file {path} holds records of format {header.typeid}, not {descriptor.typeid}"
        )
    body, digest = data[:-32], data[-32:]
    if len(data) != header.total_length or hashlib.sha256(body).digest() != digest:
        raise SegmentFileError(f"segment file {path} is corrupt: its checksum does not match")
    pos = HEADER_SIZE
    (length,) = struct.unpack_from("<I", body, pos)
    pos += length
    (length, first, count) = struct.unpack_from("<III", body, pos)
    nodes = np.frombuffer(
        body, dtype=[("r", "<u4"), ("l", "<i4"), ("x", "<i4")], count=count, offset=pos + 12
    )
    pos += length
    pos += 8
    (fields,) = struct.unpack_from("<I", body, pos)
    pos += 4
    if fields != len(descriptor.fields):
        raise SegmentFileError(
            f"segment file {path} has {fields} fields; the record format has {len(descriptor.fields)}"
        )
    arrays = []
    for field in descriptor.fields:
        encoding, raw_length, stored_length = struct.unpack_from("<BQQ", body, pos)
        pos += 17
        stored = body[pos : pos + stored_length]
        pos += stored_length
        dtype = np.dtype(field.numpy_type)
        if encoding == _RAW:
            raw = stored
        else:
            try:
                raw = _core.decode_column(stored, encoding, dtype.itemsize, raw_length)
            except ValueError as err:
                raise SegmentFileError(
                    f"segment file {path} is corrupt: field {field.name!r}: {err}"
                ) from None
        values = np.frombuffer(raw, dtype=dtype)
        if field.type == "char":
            arrays.append(pa.array(values, type=pa.binary()).cast(pa.string()))
        else:
            arrays.append(pa.array(values.astype(values.dtype.newbyteorder("="))))
    batch = pa.RecordBatch.from_arrays(arrays, schema=descriptor.arrow_schema)
    coords = index_keys(batch, descriptor)
    try:
        tree = _core.KdTree.from_parts(
            coords,
            np.ascontiguousarray(nodes["r"]),
            np.ascontiguousarray(nodes["l"]),
            np.ascontiguousarray(nodes["x"]),
            first,
            [list(o) for o in orders],
        )
    except ValueError as err:
        raise SegmentFileError(f"segment file {path} is corrupt: {err}") from None
    return Segment(header.segment_id, batch, tree, header.lo, header.hi)


def _column_bytes(segment: Segment, field: Field) -> np.ndarray:
    """A column's values in the binary form (uint8, contiguous): little-endian numbers,
    NUL-padded chars. Numbers are a view of the segment's own buffer."""
    import numpy as np
    import pyarrow as pa

    column = segment.data.column(field.name)
    if field.type != "char":
        return segment.byte_view(field.name)
    column = column.cast(pa.large_string())  # 64-bit offsets
    _, offsets, data = column.buffers()
    n = len(column)
    offsets_array = np.frombuffer(offsets, dtype=np.int64, count=n + 1, offset=column.offset * 8)
    data_array = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    return _core.pad_strings(offsets_array, data_array, field.array_len or 0)


def fsync_directory(directory: Path) -> None:
    fsync_path(directory)
