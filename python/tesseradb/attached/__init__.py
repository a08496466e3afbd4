"""Attached files: SQL over HDF5 (and NetCDF4) files in place, with bitmap indexes beside them.

``db.attach(path_or_glob, name=...)`` maps the files' groups and datasets to
tables named ``<name>.<table>`` without copying a byte; ``db.create_index``
builds FastBit-style bitmap indexes as sidecar files under the database
directory; queries read only the columns and rows they need, in parallel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tesseradb._lazy import exports

if TYPE_CHECKING:
    from tesseradb.attached._attachment import AttachError, Attachment, attach_spec
    from tesseradb.attached._bitmap import Binning, BitmapIndex
    from tesseradb.attached._bytes import clear_remote_cache
    from tesseradb.attached._kind import AttachedKind, default_name
    from tesseradb.attached._methods import AttachedMethods
    from tesseradb.attached._reader import AttachedFileError, to_arrow
    from tesseradb.attached._table import FILE_COLUMN, AttachedTable


__all__ = [
    "FILE_COLUMN",
    "AttachError",
    "AttachedFileError",
    "AttachedKind",
    "AttachedMethods",
    "AttachedTable",
    "Attachment",
    "Binning",
    "BitmapIndex",
    "attach_spec",
    "clear_remote_cache",
    "default_name",
    "to_arrow",
]

# each name imported from its module when first used (tesseradb._lazy)
__getattr__, __dir__ = exports(
    __name__,
    {
        "AttachedMethods": "tesseradb.attached._methods",
        "FILE_COLUMN": "tesseradb.attached._table",
        "AttachedTable": "tesseradb.attached._table",
        "AttachError": "tesseradb.attached._attachment",
        "Attachment": "tesseradb.attached._attachment",
        "attach_spec": "tesseradb.attached._attachment",
        "Binning": "tesseradb.attached._bitmap",
        "BitmapIndex": "tesseradb.attached._bitmap",
        "clear_remote_cache": "tesseradb.attached._bytes",
        "AttachedKind": "tesseradb.attached._kind",
        "default_name": "tesseradb.attached._kind",
        "AttachedFileError": "tesseradb.attached._reader",
        "to_arrow": "tesseradb.attached._reader",
    },
)
