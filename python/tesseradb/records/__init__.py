"""Records: high-velocity multidimensional record streams (MDDS).

A stream's records are described by a :class:`RecordDescriptor`; a
:class:`Stream` (``db.create_stream``, ``db.stream``) ingests them into
segments with packed kd-trees under an R*-tree, persists them in the
background and answers range queries, in SQL too. The kernels are in
``tesseradb._core``.
"""

from __future__ import annotations

from tesseradb.records._check import check_stream
from tesseradb.records._descriptor import DescriptorError, Field, RecordDescriptor
from tesseradb.records._kind import StreamKind
from tesseradb.records._segment_file import SegmentFileError
from tesseradb.records._stream import CSVError, Stream, StreamOptions, StreamWriteError

__all__ = [
    "CSVError",
    "DescriptorError",
    "Field",
    "RecordDescriptor",
    "SegmentFileError",
    "Stream",
    "StreamKind",
    "StreamOptions",
    "StreamWriteError",
    "check_stream",
]
