"""The Database's methods for getting data in and out (a mixin of
:class:`tesseradb.database.Database`): ``load`` and ``export``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tesseradb.errors import require_params, require_str
from tesseradb.kinds import DatabaseMethods
from tesseradb.transfer._export import Exported
from tesseradb.transfer._export import export as transfer_export
from tesseradb.transfer._load import Loaded
from tesseradb.transfer._load import load as transfer_load

if TYPE_CHECKING:
    from tesseradb.progress import Cancel, ProgressLike

__all__ = ["TransferMethods"]


class TransferMethods(DatabaseMethods):
    def load(
        self,
        source: str | os.PathLike[str],
        into: str | None = None,
        kind: str | None = None,
        *,
        format: str | None = None,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
        **options: Any,
    ) -> Loaded:
        """Load a file, a Zarr store or a glob of files into ``into`` (by default named after
        the files), made when it does not exist and appended to otherwise; all or nothing.

        ``kind`` is ``array`` (FITS, TIFF, NetCDF/HDF5, Zarr, npy/npz), ``stream``
        (CSV, Parquet, Arrow IPC, packed binary), ``collection`` (JSON, JSON
        lines) or ``table`` (CSV, Parquet, JSON, Arrow IPC through DuckDB's
        readers); by default the target's kind, or the one the format suggests.
        ``format`` overrides the format the file names suggest. Arrays take
        ``along`` (the dimension a glob's files stack on, new, or the files'
        first one to concatenate), ``dims``, ``chunks``, ``variables``, ``hdu``,
        ``attr``, ``threads``; streams ``descriptor``, ``index``, ``header``.
        ``progress`` and ``cancel`` as in :mod:`tesseradb.progress`.
        docs/load-export.md shows every format.
        """
        self._check_open()
        self._registry.check_writable("load data")
        if into is not None:
            require_str(into, "into", "db.load")
        return transfer_load(
            self,
            self._registry,
            source,
            into,
            kind,
            format=format,
            progress=progress,
            cancel=cancel,
            **options,
        )

    def export(
        self,
        source: str,
        target: str | os.PathLike[str],
        *,
        format: str | None = None,
        params: Any = None,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
        **options: Any,
    ) -> Exported:
        """Write an object (by name) or a query's rows (SQL text) to the file ``target``.

        Arrays go to Zarr v3 (a directory ending ``.zarr``, with world
        coordinates as CF coordinates), NetCDF (``.nc``), FITS (``.fits``) or
        ``.npy``; collections to JSON lines; tables, streams, attached tables
        and any query to Parquet, CSV, JSON lines or Arrow IPC (``.arrow``).
        ``format`` overrides the format the target's name suggests. An
        existing target is refused unless ``overwrite=True``; a failed or
        cancelled export leaves no target behind.
        """
        require_str(source, "source", "db.export")
        require_params(params, "db.export")
        self._check_open()
        return transfer_export(
            self,
            self._registry,
            source,
            target,
            format=format,
            params=params,
            progress=progress,
            cancel=cancel,
            **options,
        )
