"""Segment files: round trips, the documented layout, torn and corrupt files refused."""

from __future__ import annotations

import hashlib
import math
import struct
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tesseradb.records import RecordDescriptor
from tesseradb.records._segment_file import (
    HEADER_SIZE,
    MAGIC,
    SegmentFileError,
    read_header,
    read_segment,
    write_segment,
)
from tesseradb.records._segments import SegmentStore

DESCRIPTOR = RecordDescriptor.parse(
    {
        "typeid": "0d7c6b1e-4c1f-4a7e-9a55-3b1d2a0c9e11",
        "fields": [
            {"name": "medallion", "type": "char", "array_len": 8},
            {"name": "t", "type": "epoch_t"},
            {"name": "n", "type": "uint8"},
            {"name": "lat", "type": "float"},
            {"name": "lon", "type": "double"},
        ],
        "index": ["lat", "lon", "t"],
    }
)


def one_segment(n: int = 500) -> object:
    rng = np.random.default_rng(5)
    lat = rng.normal(40.7, 0.05, n).astype(np.float32)
    lat[3] = np.nan
    table = pa.table(
        {
            "medallion": [f"m{i:05d}" if i % 5 else "" for i in range(n)],
            "t": np.arange(n, dtype=np.int64) + 1_356_998_400,
            "n": (np.arange(n) % 6).astype(np.uint8),
            "lat": lat,
            "lon": rng.normal(-73.9, 0.05, n),
        }
    )
    store = SegmentStore(DESCRIPTOR, max_chunk_records=n, segment_bytes=1 << 30)
    (segment,) = store.ingest(table)
    return segment


@pytest.mark.parametrize("compress", [True, False])
def test_round_trip_is_exact_and_the_tree_still_works(tmp_path: Path, compress: bool) -> None:
    segment = one_segment()
    path = tmp_path / "seg.tsdb"
    size = write_segment(path, segment, DESCRIPTOR, compress=compress)
    assert path.stat().st_size == size and not (tmp_path / "seg.tsdb.tmp").exists()
    back = read_segment(path, DESCRIPTOR)
    assert back.data.schema == segment.data.schema
    for name in back.data.schema.names:  # NaN-aware: the data holds a NaN latitude on purpose
        a, b = back.data.column(name), segment.data.column(name)
        if pa.types.is_floating(a.type):
            assert np.array_equal(a.to_numpy(), b.to_numpy(), equal_nan=True)
        else:
            assert a.to_pylist() == b.to_pylist()
    assert back.id == segment.id
    assert back.tree.initial_dimension == segment.tree.initial_dimension
    for a, b in zip(back.tree.nodes(), segment.tree.nodes(), strict=True):
        assert np.array_equal(a, b)
    assert back.hi[0] != back.hi[0]  # NaN maximum kept: the segment holds a NaN latitude
    lo, hi = [40.7, -73.95, -math.inf], [40.75, -73.9, math.nan]
    found = back.tree.search(lo, hi)
    assert found.tolist() == segment.tree.search(lo, hi, sequential=True).tolist()
    header = read_header(path)
    assert (
        header.typeid == DESCRIPTOR.typeid
        and header.record_count == 500
        and header.total_length == size
    )
    assert header.lo[:2] == segment.lo[:2]


def test_the_layout_is_as_documented(tmp_path: Path) -> None:
    segment = one_segment(10)
    path = tmp_path / "seg.tsdb"
    write_segment(path, segment, DESCRIPTOR, compress=False)
    data = path.read_bytes()
    magic, version, header_size, _, total = struct.unpack_from("<8sIIQQ", data)
    assert (magic, version, header_size, total) == (MAGIC, 2, HEADER_SIZE, len(data))
    section, dims = struct.unpack_from("<II", data, HEADER_SIZE)
    (crc,) = struct.unpack_from("<I", data, 60)  # of the header's first 60 bytes and the box
    assert crc == zlib.crc32(data[HEADER_SIZE : HEADER_SIZE + section], zlib.crc32(data[:60]))
    assert dims == 3 and struct.unpack_from("<3I", data, HEADER_SIZE + 8) == (
        3,
        4,
        1,
    )  # lat, lon, t
    tree_at = HEADER_SIZE + section
    _, first, nodes = struct.unpack_from("<III", data, tree_at)
    assert nodes == 10 and first == 0


def test_a_flipped_bit_in_the_header_or_the_box_is_found_by_reading_the_header(
    tmp_path: Path,
) -> None:
    """The box decides which queries read a segment: a damaged one must not go unseen."""
    segment = one_segment(50)
    path = tmp_path / "seg.tsdb"
    write_segment(path, segment, DESCRIPTOR)
    good = path.read_bytes()
    section = struct.unpack_from("<I", good, HEADER_SIZE)[0]
    for at in [*range(8, 60, 7), *range(HEADER_SIZE + 8, HEADER_SIZE + section, 5)]:
        data = bytearray(good)
        data[at] ^= 0x10
        path.write_bytes(bytes(data))
        with pytest.raises(SegmentFileError):
            read_header(path)


def test_layout_1_files_are_still_read(tmp_path: Path) -> None:
    segment = one_segment(20)
    path = tmp_path / "seg.tsdb"
    write_segment(path, segment, DESCRIPTOR)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 8, 1)  # version 1: no header CRC, zero padding
    struct.pack_into("<I", data, 60, 0)
    digest = hashlib.sha256(bytes(data[:-32])).digest()
    path.write_bytes(bytes(data[:-32]) + digest)
    assert read_header(path).layout_version == 1
    assert read_segment(path, DESCRIPTOR).num_records == 20


@pytest.mark.parametrize("damage", ["truncated", "flipped", "foreign", "empty", "other-format"])
def test_torn_or_corrupt_files_are_refused(tmp_path: Path, damage: str) -> None:
    segment = one_segment(50)
    path = tmp_path / "seg.tsdb"
    write_segment(path, segment, DESCRIPTOR)
    data = bytearray(path.read_bytes())
    descriptor = DESCRIPTOR
    if damage == "truncated":
        path.write_bytes(bytes(data[: len(data) - 100]))
        match = "torn"
    elif damage == "flipped":
        data[len(data) // 2] ^= 0x40
        path.write_bytes(bytes(data))
        match = "checksum"
    elif damage == "foreign":
        path.write_bytes(b"PK\x03\x04" + bytes(200))
        match = "not a TesseraDB segment file"
    elif damage == "empty":
        path.write_bytes(b"")
        match = "torn"
    else:
        descriptor = RecordDescriptor.parse(
            {**DESCRIPTOR.to_dict(), "typeid": "11111111-2222-3333-4444-555555555555"}
        )
        match = "holds records of format"
    with pytest.raises(SegmentFileError, match=match):
        read_segment(path, descriptor)


def _column_entries(data: bytes) -> list[tuple[int, int, int, int]]:
    """(offset of the entry, encoding, raw length, stored length) of each column in a file."""
    (section,) = struct.unpack_from("<I", data, HEADER_SIZE)
    pos = HEADER_SIZE + section
    (section,) = struct.unpack_from("<I", data, pos)
    pos += section + 8
    (fields,) = struct.unpack_from("<I", data, pos)
    pos += 4
    entries = []
    for _ in range(fields):
        encoding, raw, stored = struct.unpack_from("<BQQ", data, pos)
        entries.append((pos, encoding, raw, stored))
        pos += 17 + stored
    return entries


def _reseal(data: bytes | bytearray) -> bytes:
    """The file's bytes with the checksums (the header's, the file's) recomputed, as a
    writer with a bug would leave them."""
    body = bytearray(data[:-32])
    section = struct.unpack_from("<I", body, HEADER_SIZE)[0]
    crc = zlib.crc32(body[HEADER_SIZE : HEADER_SIZE + section], zlib.crc32(body[:60]))
    struct.pack_into("<I", body, 60, crc)
    return bytes(body) + hashlib.sha256(bytes(body)).digest()


def test_columns_are_stored_byte_shuffled_where_that_is_smaller(tmp_path: Path) -> None:
    import numcodecs

    segment = one_segment(2000)
    path = tmp_path / "seg.tsdb"
    write_segment(path, segment, DESCRIPTOR)
    data = path.read_bytes()
    entries = _column_entries(data)
    by_name = dict(zip([f.name for f in DESCRIPTOR.fields], entries, strict=True))
    # consecutive times and 0..5 counts compress; every column is either shuffled zstd or raw
    assert by_name["t"][1] == 2 and by_name["n"][1] == 2
    assert {e[1] for e in entries} <= {0, 2}
    pos, _, raw_length, stored_length = by_name["t"]
    stored = data[pos + 17 : pos + 17 + stored_length]
    shuffled = np.frombuffer(numcodecs.Zstd().decode(stored), np.uint8)
    times = segment.data.column("t").to_numpy()
    assert np.array_equal(shuffled.reshape(8, -1).T.copy().view("<i8").ravel(), times)
    assert raw_length == times.nbytes


def test_files_with_plain_zstd_columns_are_still_read(tmp_path: Path) -> None:
    """Encoding 1 (zstd of the unshuffled bytes) is what earlier writers stored."""
    import numcodecs

    segment = one_segment(300)
    path = tmp_path / "seg.tsdb"
    write_segment(path, segment, DESCRIPTOR, compress=False)
    data = path.read_bytes()
    entries = _column_entries(data)
    out = bytearray(data[: entries[0][0]])
    for pos, _, raw_length, stored_length in entries:
        raw = data[pos + 17 : pos + 17 + stored_length]
        stored = numcodecs.Zstd(1).encode(raw)
        out += struct.pack("<BQQ", 1, raw_length, len(stored)) + stored
    records_at = entries[0][0] - 12  # the records section's length (u64), then the field count
    struct.pack_into("<Q", out, records_at, len(out) - records_at)
    struct.pack_into("<Q", out, 24, len(out) + 32)  # the header's total length
    path.write_bytes(_reseal(out + bytes(32)))
    back = read_segment(path, DESCRIPTOR)
    assert back.data.column("medallion").to_pylist() == segment.data.column("medallion").to_pylist()
    assert np.array_equal(
        back.data.column("lat").to_numpy(), segment.data.column("lat").to_numpy(), equal_nan=True
    )


@pytest.mark.parametrize("damage", ["encoding", "raw-length", "frame"])
def test_a_column_that_does_not_decode_is_refused_naming_it(tmp_path: Path, damage: str) -> None:
    """Even under a matching checksum (a writer's bug, not a torn file) nothing wrong is served."""
    segment = one_segment(2000)
    path = tmp_path / "seg.tsdb"
    write_segment(path, segment, DESCRIPTOR)
    data = bytearray(path.read_bytes())
    pos, _, raw_length, _ = _column_entries(bytes(data))[1]  # "t", shuffled zstd
    if damage == "encoding":
        data[pos] = 9
        match = "unknown column encoding 9"
    elif damage == "raw-length":
        struct.pack_into("<Q", data, pos + 1, raw_length + 8)
        match = "'t'"
    else:
        data[pos + 17] ^= 0xFF  # the zstd frame's magic number
        match = "'t'"
    path.write_bytes(_reseal(data))
    with pytest.raises(SegmentFileError, match=match):
        read_segment(path, DESCRIPTOR)
