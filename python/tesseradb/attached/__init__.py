"""Attached files: SQL over HDF5 (and NetCDF4) files in place, with bitmap indexes beside them.

``db.attach(path_or_glob, name=...)`` maps the files' groups and datasets to
tables named ``<name>.<table>`` without copying a byte; ``db.create_index``
builds FastBit-style bitmap indexes as sidecar files under the database
directory; queries read only the columns and rows they need, in parallel.
"""

from __future__ import annotations

from tesseradb.attached._attachment import (
    FILE_COLUMN,
    AttachedTable,
    AttachError,
    Attachment,
    attach_spec,
)
from tesseradb.attached._bitmap import Binning, BitmapIndex
from tesseradb.attached._kind import AttachedKind, default_name
from tesseradb.attached._reader import AttachedFileError, to_arrow

__all__ = [
    "FILE_COLUMN",
    "AttachError",
    "AttachedFileError",
    "AttachedKind",
    "AttachedTable",
    "Attachment",
    "Binning",
    "BitmapIndex",
    "attach_spec",
    "default_name",
    "to_arrow",
]
