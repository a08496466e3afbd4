"""Segment files: round trips, the documented layout, torn and corrupt files refused."""

from __future__ import annotations

import math
import struct
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
    assert (magic, version, header_size, total) == (MAGIC, 1, HEADER_SIZE, len(data))
    section, dims = struct.unpack_from("<II", data, HEADER_SIZE)
    assert dims == 3 and struct.unpack_from("<3I", data, HEADER_SIZE + 8) == (
        3,
        4,
        1,
    )  # lat, lon, t
    tree_at = HEADER_SIZE + section
    _, first, nodes = struct.unpack_from("<III", data, tree_at)
    assert nodes == 10 and first == 0


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
