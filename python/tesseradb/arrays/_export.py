"""Writing an array to a file (``db.export``): Zarr v3 and NetCDF with xarray's conventions,
FITS and npy; a slab of whole chunks at a time, so memory stays bounded."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from tesseradb.errors import ExportError

if TYPE_CHECKING:
    from tesseradb.progress import Tracker

__all__ = ["EXPORT_SUFFIXES", "export_array"]

# the formats an array is written in, by file name ending
EXPORT_SUFFIXES = {
    ".zarr": "zarr",
    ".nc": "netcdf",
    ".nc4": "netcdf",
    ".fits": "fits",
    ".fit": "fits",
    ".npy": "npy",
}
_SLAB_BYTES = 128 << 20


def export_array(array: Any, path: str, fmt: str, attr: str | None, watch: Tracker) -> int:
    """Write ``array`` (its attribute ``attr``, or all) to ``path`` as ``fmt``; the cells."""
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
    watch.unit = "bytes"
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
