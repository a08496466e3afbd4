"""Getting data in and out: ``db.load`` and ``db.export`` for every data model.

Loads read the formats scientists hold (FITS, TIFF, NetCDF/HDF5, Zarr,
npy/npz into arrays; CSV, Parquet, Arrow IPC and packed binary into streams;
JSON and JSON lines into collections; CSV, Parquet, JSON and Arrow into
plain tables) in bounded memory, all or nothing per call. Exports write
arrays to Zarr v3, NetCDF, FITS and npy, collections to JSON lines, and any
table or query to Parquet, CSV, JSON or Arrow IPC. Both report progress and
stop cleanly when cancelled (:mod:`tesseradb.progress`). Each data model
reads and writes its own formats (the Loading and Exporting capabilities of
:mod:`tesseradb.kinds`); this package only dispatches. It owns no storage.
"""

from __future__ import annotations

from tesseradb.transfer._export import ROW_FORMATS, Exported, export, write_rows
from tesseradb.transfer._load import Loaded, load, loading_kinds
from tesseradb.transfer._methods import TransferMethods

__all__ = [
    "ROW_FORMATS",
    "Exported",
    "Loaded",
    "TransferMethods",
    "export",
    "load",
    "loading_kinds",
    "write_rows",
]
