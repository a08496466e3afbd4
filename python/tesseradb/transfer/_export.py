"""``db.export``: an array to Zarr v3, NetCDF, FITS or npy; a collection to JSON lines; any
table, stream or query to Parquet, CSV, JSON (lines) or Arrow IPC.

Every export writes beside the target (``<target>.partial``) and renames it
into place at the end, so a failed or cancelled export leaves no target.
Arrays are read and written a slab of whole chunks at a time; query rows are
streamed from the statement to the file batch by batch (DuckDB's COPY writes
Parquet, CSV and JSON from the Arrow stream, so every DuckDB type, nested
ones included, keeps its form), so memory stays bounded either way.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tesseradb._rows import write_rows
from tesseradb._sqltext import quote_identifier
from tesseradb.errors import ExportError, InvalidArgumentError
from tesseradb.progress import Cancel, ProgressLike, Tracker, tracker
from tesseradb.transfer._load import path_bytes

__all__ = ["Exported", "export", "write_rows"]

_SUFFIXES = {
    ".zarr": "zarr",
    ".nc": "netcdf",
    ".nc4": "netcdf",
    ".fits": "fits",
    ".fit": "fits",
    ".npy": "npy",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".arrow": "arrow",
    ".ipc": "arrow",
    ".feather": "arrow",
}
ARRAY_FORMATS = ("zarr", "netcdf", "fits", "npy")
ROW_FORMATS = ("parquet", "csv", "json", "jsonl", "arrow")
_SLAB_BYTES = 128 << 20
_OPTIONS = {"overwrite", "attr"}


@dataclass(frozen=True)
class Exported:
    """What one export wrote."""

    source: str
    target: str
    format: str
    items: int  # cells, rows or objects written
    bytes: int  # bytes of the target

    def __str__(self) -> str:
        return f"wrote {self.items:,} {self._unit} of {self.source} to {self.target} ({self.format}, {self.bytes:,} bytes)"

    @property
    def _unit(self) -> str:
        return "cells" if self.format in ARRAY_FORMATS else "rows"


def target_format(target: str, given: str | None) -> str:
    if given is not None:
        if given not in _SUFFIXES.values():
            raise InvalidArgumentError(
                f"export format is one of {', '.join(sorted(set(_SUFFIXES.values())))}, not {given!r}"
            )
        return given
    lowered = target.lower().rstrip("/")
    for suffix, fmt in _SUFFIXES.items():
        if lowered.endswith(suffix):
            return fmt
    raise ExportError(
        f"{target}: the format is not known by its name ({', '.join(_SUFFIXES)}); give format="
    )


def export(
    db: Any,
    source: str,
    target: str | os.PathLike[str],
    *,
    format: str | None = None,
    params: Any = None,
    progress: ProgressLike = None,
    cancel: Cancel | None = None,
    **options: Any,
) -> Exported:
    """See ``Database.export``."""
    if not isinstance(target, (str, os.PathLike)):
        raise InvalidArgumentError(f"db.export: target is a file name, not {type(target).__name__}")
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise InvalidArgumentError(
            f"db.export takes {', '.join(sorted(_OPTIONS))}; not {', '.join(unknown)}"
        )
    path = os.path.abspath(os.path.expanduser(os.fspath(target)))
    fmt = target_format(path, format)
    overwrite = options.get("overwrite", False)
    if not isinstance(overwrite, bool):
        raise InvalidArgumentError(f"db.export: overwrite is True or False, not {overwrite!r}")
    if os.path.exists(path) and not overwrite:
        raise ExportError(
            f"{path} exists; to replace it, give overwrite=True (tessera export --overwrite)"
        )
    if not os.path.isdir(os.path.dirname(path)):
        raise ExportError(f"{path}: the directory {os.path.dirname(path)} does not exist")
    obj = db.catalog.get(source) if _is_name(source) else None
    kind = obj.kind if obj is not None else None
    partial = path + ".partial"
    _remove(partial)
    task = f"export {source if len(source) < 60 else source[:57] + '...'} to {path}"
    try:
        with tracker(task, None, "bytes" if kind == "array" else "rows", progress, cancel) as watch:
            if obj is not None and kind == "array":
                if fmt not in ARRAY_FORMATS:
                    raise ExportError(
                        f"array {obj.name!r} exports to {', '.join(ARRAY_FORMATS)}, not {fmt}"
                    )
                items = _export_array(db.array(obj.name), partial, fmt, options.get("attr"), watch)
            elif obj is not None and kind == "collection" and fmt in ("jsonl", "json"):
                items = _export_collection(db, obj.name, partial, fmt, watch)
            else:
                if fmt not in ROW_FORMATS:
                    what = f"{kind} {obj.name!r}" if obj is not None else "a query's rows"
                    raise ExportError(
                        f"{what} exports to {', '.join(ROW_FORMATS)}, not {fmt} (arrays go to "
                        f"{', '.join(ARRAY_FORMATS)})"
                    )
                query = _query_of(db, source, obj)
                items = write_rows(
                    lambda sink: db.stream_sql(query, sink, params), partial, fmt, watch
                )
        if os.path.exists(path):
            _remove(path)
        os.replace(partial, path)
    except BaseException:
        _remove(partial)
        raise
    return Exported(source, path, fmt, items, path_bytes(path))


def _is_name(source: str) -> bool:
    return source.replace("_", "a").replace(".", "a").isalnum()


def _query_of(db: Any, source: str, obj: Any) -> str:
    if obj is not None:
        if obj.kind not in ("table", "view") and db.relation(obj.name) is None:
            raise ExportError(
                f"{obj.kind} {obj.name!r} holds several tables; export one of them "
                f"({obj.name}.<table>) or a query"
            )
        return f"SELECT * FROM {quote_identifier(obj.name)}"
    if _is_name(source):
        if db.relation(source) is None:
            raise ExportError(f"no object or relation called {source!r} to export")
        return "SELECT * FROM " + ".".join(quote_identifier(p) for p in source.split("."))
    return source


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


# --- collections -------------------------------------------------------------------------
def _export_collection(db: Any, name: str, path: str, fmt: str, watch: Tracker) -> int:
    """The objects as JSON lines (or one JSON array), in objid order."""
    count = [0]

    def sink(reader: Any) -> None:
        with open(path, "wb") as out:
            out.write(b"[" if fmt == "json" else b"")
            for batch in reader:
                watch.advance(batch.num_rows)
                docs = (
                    batch.column(0).storage
                    if hasattr(batch.column(0), "storage")
                    else batch.column(0)
                )
                for doc in docs.to_pylist():
                    if fmt == "json":
                        out.write(b",\n" if count[0] else b"\n")
                    out.write(doc.encode())
                    if fmt == "jsonl":
                        out.write(b"\n")
                    count[0] += 1
            out.write(b"\n]\n" if fmt == "json" else b"")

    db.stream_sql(f"SELECT doc FROM {quote_identifier(name)}", sink)
    return count[0]


# --- arrays ------------------------------------------------------------------------------
def _export_array(array: Any, path: str, fmt: str, attr: str | None, watch: Tracker) -> int:
    schema = array.schema
    extent = tuple(array.shape)
    attrs = list(schema.attrs)
    if fmt in ("fits", "npy"):
        if attr is None and len(attrs) > 1:
            raise ExportError(
                f"array {array.name!r} has attributes {', '.join(schema.attr_names)}; a {fmt} "
                "file holds one: give attr="
            )
        attrs = [schema.attribute(attr)] if attr is not None else attrs
    elif attr is not None:
        attrs = [schema.attribute(attr)]
    watch.set_total(math.prod(extent) * sum(a.numpy_dtype.itemsize for a in attrs))
    writers: dict[str, Any] = {
        "zarr": _ZarrOut,
        "netcdf": _NetCDFOut,
        "fits": _FITSOut,
        "npy": _NpyOut,
    }
    writer = writers[fmt](path, array, extent, attrs)
    try:
        for lo, hi in _slabs(schema, extent, attrs):
            watch.check()
            rows = slice(schema.dims[0].start + lo, schema.dims[0].start + hi)
            key = (rows, *(slice(None) for _ in extent[1:]))
            values = array.read(key, [a.name for a in attrs])
            writer.write(lo, hi, values)
            watch.advance(sum(v.nbytes for v in values.values()))
        writer.finish()
    finally:
        writer.close()
    return math.prod(extent) * len(attrs)


def _slabs(schema: Any, extent: tuple[int, ...], attrs: list[Any]) -> Iterator[tuple[int, int]]:
    """Row ranges of the first dimension, whole chunks of about _SLAB_BYTES."""
    if not extent or extent[0] == 0:
        return
    row = math.prod(extent[1:]) * sum(a.numpy_dtype.itemsize for a in attrs)
    chunk = schema.dims[0].chunk
    rows = max(chunk, (_SLAB_BYTES // max(1, row)) // chunk * chunk)
    for lo in range(0, extent[0], rows):
        yield lo, min(extent[0], lo + rows)


def _world(array: Any, extent: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Each dimension's world coordinates: the stored ones, or index + origin."""
    schema = array.schema
    stored = schema.extra.get("coords", {})
    out = {}
    for i, d in enumerate(schema.dims):
        values = stored.get(d.name)
        if values is not None and len(values) == extent[i]:
            out[d.name] = np.asarray(values)
        else:
            out[d.name] = np.arange(extent[i], dtype=np.int64) + schema.origin[i]
    return out


class _ZarrOut:
    """Zarr v3 with xarray's conventions: each attribute an array with dimension names, each
    dimension a coordinate array of its world coordinates; consolidated metadata."""

    def __init__(self, path: str, array: Any, extent: tuple[int, ...], attrs: list[Any]) -> None:
        import zarr

        schema = array.schema
        self.path = path
        self.group = zarr.open_group(path, mode="w", zarr_format=3)
        meta = schema.extra.get("attributes", {})
        dims = list(schema.dim_names)
        self.arrays = {}
        for a in attrs:
            # (xarray reads a nullable attribute's fill value from the array's own)
            attributes = dict(meta.get(a.name, {}))
            self.arrays[a.name] = self.group.create_array(
                a.name,
                shape=extent,
                chunks=tuple(
                    min(d.chunk, max(1, n)) for d, n in zip(schema.dims, extent, strict=True)
                ),
                dtype=a.numpy_dtype,
                fill_value=a.fill if a.fill is not None else 0,
                dimension_names=dims,
                attributes=attributes,
            )
        coord_meta = schema.extra.get("coordinate_attributes", {})
        for name, values in _world(array, extent).items():
            coord = self.group.create_array(
                name,
                shape=values.shape,
                dtype=values.dtype,
                dimension_names=[name],
                attributes=dict(coord_meta.get(name, {})),
            )
            coord[:] = values
        self.group.attrs.update(schema.extra.get("dataset", {}))

    def write(self, lo: int, hi: int, values: dict[str, np.ndarray]) -> None:
        for name, v in values.items():
            self.arrays[name][lo:hi] = v

    def finish(self) -> None:
        import warnings

        import zarr

        with warnings.catch_warnings():  # "not part of the v3 specification": xarray reads it
            warnings.simplefilter("ignore")
            zarr.consolidate_metadata(self.path)

    def close(self) -> None:
        pass


class _NetCDFOut:
    """NetCDF-4 (HDF5) through h5netcdf: dimensions with coordinate variables, one variable
    per attribute (``_FillValue`` where the attribute is nullable)."""

    def __init__(self, path: str, array: Any, extent: tuple[int, ...], attrs: list[Any]) -> None:
        import h5netcdf

        schema = array.schema
        self.file = h5netcdf.File(path, "w")
        try:
            dims = list(schema.dim_names)
            self.file.dimensions = dict(zip(dims, extent, strict=True))
            coord_meta = schema.extra.get("coordinate_attributes", {})
            for name, values in _world(array, extent).items():
                coord = self.file.create_variable(name, (name,), values.dtype)
                coord[:] = values
                coord.attrs.update(coord_meta.get(name, {}))
            meta = schema.extra.get("attributes", {})
            self.variables = {}
            for a in attrs:
                dtype = a.numpy_dtype if a.numpy_dtype.kind != "b" else np.dtype("u1")
                chunks = tuple(
                    min(d.chunk, max(1, n)) for d, n in zip(schema.dims, extent, strict=True)
                )
                variable = self.file.create_variable(
                    a.name,
                    tuple(dims),
                    dtype,
                    chunks=chunks if all(extent) else None,
                    fillvalue=a.fill if a.nullable else None,
                )
                variable.attrs.update(meta.get(a.name, {}))
                self.variables[a.name] = variable
            self.file.attrs.update(schema.extra.get("dataset", {}))
        except BaseException:
            self.file.close()
            raise

    def write(self, lo: int, hi: int, values: dict[str, np.ndarray]) -> None:
        for name, v in values.items():
            self.variables[name][lo:hi] = v

    def finish(self) -> None:
        pass

    def close(self) -> None:
        self.file.close()


# FITS stores signed integers (but bytes) and floats: other types keep their values through
# the BZERO conventions (a flipped sign bit); bool cells are written as bytes
_FITS_TYPES = {
    "uint8": (8, 0, None),
    "int8": (8, -128, 0x80),
    "int16": (16, 0, None),
    "uint16": (16, 32768, 0x8000),
    "int32": (32, 0, None),
    "uint32": (32, 2**31, 0x80000000),
    "int64": (64, 0, None),
    "uint64": (64, 2**63, 0x8000000000000000),
    "float32": (-32, 0, None),
    "float64": (-64, 0, None),
    "bool": (8, 0, None),
}


class _FITSOut:
    """A FITS primary image, streamed slab by slab; the WCS says the array's origin as a
    plain offset (``CTYPEi = 'LINEAR'``, unit steps), so a load gives it back."""

    def __init__(self, path: str, array: Any, extent: tuple[int, ...], attrs: list[Any]) -> None:
        from astropy.io import fits

        (self.attr,) = attrs
        bitpix, bzero, self.flip = _FITS_TYPES[self.attr.dtype]
        header = fits.Header()
        header["SIMPLE"] = True
        header["BITPIX"] = bitpix
        header["NAXIS"] = len(extent)
        for i, n in enumerate(reversed(extent), start=1):
            header[f"NAXIS{i}"] = n
        if bzero:
            header["BZERO"] = bzero
            header["BSCALE"] = 1
        if self.attr.nullable and self.attr.numpy_dtype.kind in "iu":
            header["BLANK"] = int(self.attr.fill or 0) - bzero  # NULL cells, in stored units
        wcs = ("CTYPE", "CRPIX", "CRVAL", "CDELT", "CUNIT", "CNAME", "CROTA", "PC", "CD")
        for key, value in array.schema.extra.get("fits", {}).items():
            if len(key) <= 8 and not key.startswith(wcs):  # the WCS is the array's origin now
                header[key] = value
        schema = array.schema
        for i, (d, origin) in enumerate(
            zip(reversed(schema.dims), reversed(schema.origin), strict=True), start=1
        ):
            header[f"CTYPE{i}"] = "LINEAR"
            header[f"CRPIX{i}"] = 1.0
            header[f"CRVAL{i}"] = float(origin)
            header[f"CDELT{i}"] = 1.0
            header[f"CNAME{i}"] = d.name
        self.raw = {8: ">u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}[bitpix]
        self.hdu = fits.StreamingHDU(path, header)

    def write(self, lo: int, hi: int, values: dict[str, np.ndarray]) -> None:
        cells = np.ascontiguousarray(values[self.attr.name])
        if cells.dtype.kind == "b":
            cells = cells.astype(np.uint8)
        elif cells.dtype.kind == "i" and self.flip is not None:  # int8 as bytes + 128
            cells = cells.view(np.uint8) ^ np.uint8(self.flip)
        elif cells.dtype.kind == "u" and self.flip is not None:  # unsigned as signed - 2**(n-1)
            flipped = cells ^ np.asarray(self.flip, dtype=cells.dtype)
            cells = flipped.view(f"i{cells.dtype.itemsize}")
        self.hdu.write(cells.astype(self.raw, copy=False))

    def finish(self) -> None:
        pass

    def close(self) -> None:
        self.hdu.close()


class _NpyOut:
    def __init__(self, path: str, array: Any, extent: tuple[int, ...], attrs: list[Any]) -> None:
        (self.attr,) = attrs
        self.out = np.lib.format.open_memmap(
            path, mode="w+", dtype=self.attr.numpy_dtype, shape=extent
        )

    def write(self, lo: int, hi: int, values: dict[str, np.ndarray]) -> None:
        self.out[lo:hi] = values[self.attr.name]

    def finish(self) -> None:
        self.out.flush()

    def close(self) -> None:
        del self.out
