"""Records: high-velocity multidimensional record streams (MDDS).

A stream's records are described by a :class:`RecordDescriptor`; a
:class:`Stream` (``db.create_stream``, ``db.stream``) ingests them into
segments with packed kd-trees under an R*-tree, persists them in the
background and answers range queries, in SQL too. The kernels are in
``tesseradb._core``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tesseradb._lazy import exports

if TYPE_CHECKING:
    from tesseradb.records._check import check_stream
    from tesseradb.records._descriptor import DescriptorError, Field, RecordDescriptor
    from tesseradb.records._kind import StreamKind
    from tesseradb.records._methods import StreamMethods
    from tesseradb.records._options import StreamOptions
    from tesseradb.records._segment_file import SegmentFileError
    from tesseradb.records._stream import CSVError, Stream, StreamWriteError


__all__ = [
    "CSVError",
    "DescriptorError",
    "Field",
    "RecordDescriptor",
    "SegmentFileError",
    "Stream",
    "StreamKind",
    "StreamMethods",
    "StreamOptions",
    "StreamWriteError",
    "check_stream",
]

# each name imported from its module when first used (tesseradb._lazy)
__getattr__, __dir__ = exports(
    __name__,
    {
        "StreamMethods": "tesseradb.records._methods",
        "check_stream": "tesseradb.records._check",
        "DescriptorError": "tesseradb.records._descriptor",
        "Field": "tesseradb.records._descriptor",
        "RecordDescriptor": "tesseradb.records._descriptor",
        "StreamKind": "tesseradb.records._kind",
        "SegmentFileError": "tesseradb.records._segment_file",
        "CSVError": "tesseradb.records._stream",
        "Stream": "tesseradb.records._stream",
        "StreamOptions": "tesseradb.records._options",
        "StreamWriteError": "tesseradb.records._stream",
    },
)
