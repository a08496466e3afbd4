"""Array files read as :class:`ArrayFile`: FITS, TIFF, NetCDF/HDF5 and Zarr (xarray), npy/npz.

Each reader opens a file cheaply (headers only) and says what the file holds
(dimension names, shape, attribute types and fill values, world origin,
coordinates that are not a plain offset, metadata); the cells are read later,
a slab of the first dimension at a time, so a load never holds a whole big
file in memory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tesseradb.errors import LoadError

__all__ = ["ARRAY_SUFFIXES", "ArrayFile", "file_format", "open_array_file"]

# the array formats by file name ending (a directory ending .zarr is a Zarr store)
ARRAY_SUFFIXES = {
    ".fits": "fits",
    ".fit": "fits",
    ".fts": "fits",
    ".fits.gz": "fits",
    ".fits.fz": "fits",  # tile-compressed (fpack), the form most survey images ship in
    ".fz": "fits",
    ".tif": "tiff",
    ".tiff": "tiff",
    ".nc": "netcdf",
    ".nc4": "netcdf",
    ".cdf": "netcdf",
    ".h5": "netcdf",
    ".hdf5": "netcdf",
    ".he5": "netcdf",
    ".zarr": "zarr",
    ".npy": "npy",
    ".npz": "npz",
}
# the cell types an array attribute holds; float16 is widened to float32 on the way in
_HELD = {"i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8", "b1"}
# FITS header cards that describe the data unit itself (the array's schema says these)
_FITS_STRUCTURE = {"SIMPLE", "BITPIX", "EXTEND", "XTENSION", "PCOUNT", "GCOUNT", "BSCALE", "BZERO"}
_TIFF_AXES = {
    "Y": "y",
    "X": "x",
    "Z": "z",
    "S": "channel",
    "C": "channel",
    "T": "t",
    "Q": "z",
    "I": "z",
}


@dataclass
class ArrayFile:
    """What one file holds, as one array (attributes share its dimensions)."""

    path: str
    format: str
    dims: list[str]
    shape: tuple[int, ...]
    dtypes: dict[str, np.dtype]  # attribute -> cell type (native byte order)
    fills: dict[str, Any]  # attribute -> fill value where the file names one (nullable)
    origin: list[int]
    coords: dict[str, list[Any]] = field(default_factory=dict)  # non-offset coordinates
    metadata: dict[str, Any] = field(default_factory=dict)
    renames: dict[str, str] = field(default_factory=dict)  # the file's names -> attributes
    # reads rows [lo, hi) of the first dimension: attribute -> cells
    read: Callable[[int, int], dict[str, np.ndarray]] = lambda lo, hi: {}
    close: Callable[[], None] = lambda: None

    @property
    def row_bytes(self) -> int:
        """Bytes of one row of the first dimension, over every attribute."""
        cells = math.prod(self.shape[1:]) if len(self.shape) > 1 else 1
        return cells * sum(d.itemsize for d in self.dtypes.values())

    @property
    def nbytes(self) -> int:
        return self.row_bytes * (self.shape[0] if self.shape else 1)


def file_format(path: str) -> str | None:
    """The array format of ``path`` by its name, or None."""
    lowered = path.lower().rstrip("/")
    for suffix in sorted(ARRAY_SUFFIXES, key=len, reverse=True):
        if lowered.endswith(suffix):
            return ARRAY_SUFFIXES[suffix]
    return None


def open_array_file(
    path: str,
    fmt: str,
    *,
    variables: list[str] | None = None,
    hdu: int | str | None = None,
    attr: str | None = None,
) -> ArrayFile:
    """Open ``path`` (of format ``fmt``) for reading as an array; a LoadError names what is wrong."""
    if not os.path.exists(path):
        raise LoadError(f"{path}: no such file")
    openers: dict[str, Callable[..., ArrayFile]] = {
        "fits": _open_fits,
        "tiff": _open_tiff,
        "netcdf": _open_xarray,
        "zarr": _open_xarray,
        "npy": _open_npy,
        "npz": _open_npz,
    }
    try:
        found = openers[fmt](path, fmt, variables=variables, hdu=hdu, attr=attr)
    except LoadError:
        raise
    except (OSError, ValueError, TypeError, KeyError, IndexError, EOFError) as err:
        raise LoadError(f"{path}: cannot be read as {fmt.upper()}: {err}") from None
    found.dtypes = {name: _held(path, name, dt) for name, dt in found.dtypes.items()}
    return found


def _held(path: str, name: str, dtype: np.dtype) -> np.dtype:
    """The dtype an attribute stores ``dtype`` as (native order), or a LoadError."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize == 2:
        return np.dtype("float32")
    native = dtype.newbyteorder("=")
    if f"{native.kind}{native.itemsize}" not in _HELD:
        raise LoadError(
            f"{path}: {name!r} holds {dtype} cells; array attributes hold integers, "
            "float32/float64 and bool"
        )
    return native


def check_cells(path: str, values: np.ndarray, dtypes: dict[str, np.dtype], name: str) -> None:
    """Refuse ``values`` whose type is not the attribute's (up to byte order, a float16's
    widening, or a safe cast into an existing array's attribute)."""
    want = dtypes[name]
    have = values.dtype.newbyteorder("=")
    if have == want or (have.kind == "f" and have.itemsize == 2):
        return
    if not np.can_cast(have, want, "safe"):
        raise LoadError(f"{path}: {name!r} holds {values.dtype} cells here, {want} elsewhere")


# --- FITS ---------------------------------------------------------------------------------
def _open_fits(path: str, fmt: str, *, hdu: Any = None, attr: str | None = None, **_: Any) -> Any:
    import warnings

    from astropy.io import fits

    with warnings.catch_warnings():  # (a damaged file is refused below, by its sizes)
        warnings.simplefilter("ignore")
        handle = fits.open(path, memmap=False, lazy_load_hdus=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            unit = _fits_unit(path, handle, hdu)
        header = unit.header
        naxis = int(header.get("NAXIS", 0))
        shape = tuple(int(header[f"NAXIS{naxis - i}"]) for i in range(naxis))
        if not shape or 0 in shape:
            raise LoadError(f"{path}: HDU {hdu or 0} holds no image")
        dtype = _fits_dtype(path, unit)
        # (a tile-compressed image's cells are not its size in the file: astropy checks
        # its tiles as it decompresses them; a plain image must fit in the file)
        compressed = isinstance(unit, fits.CompImageHDU)
        needed = unit.fileinfo()["datLoc"] + abs(int(header["BITPIX"])) // 8 * math.prod(shape)
        if compressed:  # its tiles (a binary table and its heap) end where its span does
            needed = unit.fileinfo()["datLoc"] + unit.fileinfo()["datSpan"]
        if os.path.getsize(path) < needed:
            raise LoadError(
                f"{path}: the file is truncated: its image needs {needed:,} bytes, "
                f"the file has {os.path.getsize(path):,}"
            )
        origin = _fits_origin(header, naxis)
        name = attr or "value"
        dims = ["y", "x"] if naxis == 2 else ["z", "y", "x"] if naxis == 3 else None
        if dims is None:
            dims = [f"axis{naxis - i}" for i in range(naxis)]
        cards = {
            k: v
            for k, v in header.items()
            if k
            and k not in _FITS_STRUCTURE
            and not k.startswith("NAXIS")
            and k not in ("COMMENT", "HISTORY")
            and isinstance(v, (str, int, float, bool))
        }
        position = handle.index_of(unit)
        data_cache: dict[str, np.ndarray] = {}

        def read(lo: int, hi: int) -> dict[str, np.ndarray]:
            # a FITS image is decoded whole (scaling, byte order) and then sliced; the file
            # is opened again for it so that nothing but this cache holds the cells (an
            # HDU keeps its decoded data for as long as it lives)
            if "all" not in data_cache:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        with fits.open(path, memmap=False, lazy_load_hdus=True) as again:
                            data_cache["all"] = np.asarray(again[position].data)
                except (OSError, ValueError, TypeError, IndexError) as err:
                    raise LoadError(f"{path}: the image data cannot be read: {err}") from None
            values = data_cache["all"]
            if values.shape != shape:
                raise LoadError(f"{path}: the image holds {values.shape} cells, its header {shape}")
            return {name: values[lo:hi]}

        # an integer image's BLANK (in stored units) marks its undefined pixels: NULL here
        fills = {}
        if "BLANK" in header and dtype.kind in "iu":
            blank = int(header["BLANK"]) * int(header.get("BSCALE", 1)) + int(
                header.get("BZERO", 0)
            )
            fills[name] = blank
        cards.pop("BLANK", None)
        return ArrayFile(
            path,
            fmt,
            dims,
            shape,
            {name: dtype},
            fills,
            origin,
            metadata={"fits": cards},
            read=read,
            close=data_cache.clear,
        )
    finally:
        handle.close()  # headers only: the cells are read by read()


def _fits_unit(path: str, handle: Any, hdu: Any) -> Any:
    if hdu is not None:
        try:
            return handle[hdu]
        except (KeyError, IndexError):
            raise LoadError(f"{path}: there is no HDU {hdu!r}") from None
    for unit in handle:
        if unit.header.get("NAXIS", 0) and not unit.header.get("XTENSION", "").startswith(
            ("BINTABLE", "TABLE")
        ):
            return unit
    raise LoadError(f"{path}: no HDU holds an image")


def _fits_dtype(path: str, unit: Any) -> np.dtype:
    header = unit.header
    bitpix = int(header["BITPIX"])
    scale, zero = header.get("BSCALE", 1), header.get("BZERO", 0)
    raw = {8: "u1", 16: "i2", 32: "i4", 64: "i8", -32: "f4", -64: "f8"}.get(bitpix)
    if raw is None:
        raise LoadError(f"{path}: BITPIX {bitpix} is not a FITS image type")
    if scale == 1 and zero == 0:
        return np.dtype(raw)
    # the unsigned conventions: a signed type with BZERO 2**(bits-1)
    unsigned = {"i2": (32768, "u2"), "i4": (2**31, "u4"), "i8": (2**63, "u8"), "u1": (-128, "i1")}
    if scale == 1 and raw in unsigned and zero == unsigned[raw][0]:
        return np.dtype(unsigned[raw][1])
    return np.dtype("f8" if raw in ("i4", "i8", "f8") else "f4")


def _fits_origin(header: Any, naxis: int) -> list[int]:
    """The array origin where the WCS is a plain offset (linear, unit step, no rotation)."""
    origin = []
    for axis in range(naxis, 0, -1):  # numpy order: the last FITS axis first
        if f"CRPIX{axis}" not in header and f"CRVAL{axis}" not in header:
            origin.append(0)
            continue
        ctype = str(header.get(f"CTYPE{axis}", "")).strip().upper()
        cdelt = header.get(f"CDELT{axis}", 1.0)
        rotated = any(
            k.startswith(("PC", "CD")) and "_" in k and k.split("_")[0][2:].isdigit()
            for k in header
        )
        offset = float(header.get(f"CRVAL{axis}", 0.0)) + 1.0 - float(header.get(f"CRPIX{axis}", 0))
        if ctype not in ("", "LINEAR", "PIXEL") or cdelt != 1 or rotated or offset != int(offset):
            return [0] * naxis  # a real sky projection: kept in the metadata, origin 0
        origin.append(int(offset))
    return origin


# --- TIFF ---------------------------------------------------------------------------------
def _open_tiff(path: str, fmt: str, *, attr: str | None = None, **_: Any) -> ArrayFile:
    import tifffile

    try:
        handle = tifffile.TiffFile(path)
    except tifffile.TiffFileError as err:
        raise LoadError(f"{path}: not a readable TIFF file: {err}") from None
    series = handle.series[0]
    shape = tuple(int(n) for n in series.shape)
    dims = [_TIFF_AXES.get(a, f"axis{i}") for i, a in enumerate(series.axes)]
    if len(set(dims)) != len(dims):
        dims = [f"axis{i}" for i in range(len(dims))]
    name = attr or "value"
    pages = len(series.pages) if len(shape) > 2 else 1

    def read(lo: int, hi: int) -> dict[str, np.ndarray]:
        try:
            if len(shape) > 2 and pages == shape[0]:  # one page per row of the first axis
                values = series.asarray(key=slice(lo, hi)) if hi - lo > 1 else None
                if values is None:
                    values = series.asarray(key=lo)[np.newaxis]
            else:
                values = series.asarray()[lo:hi]
        except (tifffile.TiffFileError, ValueError, OSError) as err:
            raise LoadError(f"{path}: the image data cannot be read: {err}") from None
        return {name: np.asarray(values).reshape((hi - lo, *shape[1:]))}

    return ArrayFile(
        path,
        fmt,
        dims,
        shape,
        {name: np.dtype(series.dtype)},
        {},
        [0] * len(shape),
        read=read,
        close=handle.close,
    )


# --- NetCDF, HDF5 and Zarr through xarray ---------------------------------------------------
def _open_xarray(path: str, fmt: str, *, variables: list[str] | None = None, **_: Any) -> ArrayFile:
    import xarray as xr

    options: dict[str, Any] = {"mask_and_scale": False, "decode_times": False}
    if fmt == "zarr":
        ds = xr.open_zarr(path, consolidated=None, chunks=None, **options)
    else:
        engine = "h5netcdf" if _is_hdf5(path) else "scipy"
        ds = xr.open_dataset(path, engine=engine, cache=False, **options)
    try:
        names = _pick_variables(path, ds, variables)
        first = ds[names[0]]
        dims = [str(d) for d in first.dims]
        shape = tuple(int(n) for n in first.shape)
        origin, coords, coord_attrs = [], {}, {}
        for d in dims:
            if d in ds.coords and ds[d].ndim == 1:
                values = np.asarray(ds[d].values)
                step = np.diff(values) if values.size > 1 else np.array([1])
                if values.dtype.kind in "iu" and np.all(step == 1):
                    origin.append(int(values[0]))
                    continue
                coords[d] = values.tolist()
                coord_attrs[d] = _plain(ds[d].attrs)
            origin.append(0)
        fills = {}
        for v in names:
            fill = ds[v].attrs.get("_FillValue", ds[v].encoding.get("_FillValue"))
            if fill is not None:
                fills[v] = np.asarray(fill).item()
        metadata = {
            "attributes": {v: _plain(ds[v].attrs) for v in names},
            "dataset": _plain(ds.attrs),
        }
        if coord_attrs:
            metadata["coordinate_attributes"] = coord_attrs

        def read(lo: int, hi: int) -> dict[str, np.ndarray]:
            out = {}
            for v in names:
                try:
                    out[v] = np.asarray(ds[v][lo:hi].values)
                except (OSError, ValueError, RuntimeError) as err:
                    raise LoadError(f"{path}: variable {v!r} cannot be read: {err}") from None
            return out

        return ArrayFile(
            path,
            fmt,
            dims,
            shape,
            {v: np.dtype(ds[v].dtype) for v in names},
            fills,
            origin,
            coords,
            metadata,
            read=read,
            close=ds.close,
        )
    except BaseException:
        ds.close()
        raise


def _is_hdf5(path: str) -> bool:
    with open(path, "rb") as handle:
        return handle.read(8) == b"\x89HDF\r\n\x1a\n"


def _pick_variables(path: str, ds: Any, variables: list[str] | None) -> list[str]:
    """The data variables that become the array's attributes: those named, or all of them
    when they share their dimensions."""
    if variables:
        missing = [v for v in variables if v not in ds.data_vars]
        if missing:
            raise LoadError(
                f"{path}: no variable {', '.join(map(repr, missing))}; it has "
                f"{', '.join(map(str, ds.data_vars)) or 'none'}"
            )
        names = list(variables)
    else:
        names = [str(v) for v in ds.data_vars if ds[v].ndim > 0]
        if not names:
            raise LoadError(f"{path}: holds no data variable with dimensions")
    groups: dict[tuple[str, ...], list[str]] = {}
    for v in names:
        groups.setdefault(tuple(map(str, ds[v].dims)), []).append(v)
    if len(groups) > 1:
        listed = "; ".join(f"{', '.join(vs)} over ({', '.join(d)})" for d, vs in groups.items())
        loads = " and ".join(f"variables={vs!r}" for vs in groups.values())
        raise LoadError(
            f"{path}: its variables do not share dimensions ({listed}), and an array's "
            f"attributes share its dimensions: load each set as an array of its own, with "
            f"{loads} (tessera load --variables a,b)"
        )
    return names


def _plain(attrs: Any) -> dict[str, Any]:
    """Attributes as JSON-able values (numpy scalars and arrays become numbers and lists)."""
    out: dict[str, Any] = {}
    for k, v in dict(attrs).items():
        if k in ("_FillValue",):
            continue
        if isinstance(v, np.ndarray):
            v = v.tolist()
        elif isinstance(v, np.generic):
            v = v.item()
        elif isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        if isinstance(v, float) and not math.isfinite(v):
            continue
        if isinstance(v, (str, int, float, bool, list)):
            out[str(k)] = v
    return out


# --- numpy files -------------------------------------------------------------------------
def _open_npy(path: str, fmt: str, *, attr: str | None = None, **_: Any) -> ArrayFile:
    values = np.load(path, mmap_mode="r", allow_pickle=False)
    name = attr or "value"
    if values.ndim == 0:
        raise LoadError(f"{path}: holds a single value, not an array")
    return ArrayFile(
        path,
        fmt,
        [f"dim{i}" for i in range(values.ndim)],
        tuple(values.shape),
        {name: values.dtype},
        {},
        [0] * values.ndim,
        read=lambda lo, hi: {name: np.asarray(values[lo:hi])},
    )


def _open_npz(path: str, fmt: str, *, variables: list[str] | None = None, **_: Any) -> ArrayFile:
    archive = np.load(path, allow_pickle=False)
    names = list(variables or archive.files)
    missing = [n for n in names if n not in archive.files]
    if missing:
        raise LoadError(f"{path}: no array {', '.join(map(repr, missing))}; it has {archive.files}")
    if not names:
        raise LoadError(f"{path}: holds no arrays")
    # an .npz member is decompressed whole when first read: members are held one at a time
    shapes = {n: archive[n].shape for n in names}
    if len(set(shapes.values())) != 1:
        raise LoadError(
            f"{path}: its arrays differ in shape ({shapes}); name the ones to load with "
            "variables=[...]"
        )
    shape = shapes[names[0]]
    dtypes = {n: archive[n].dtype for n in names}

    members: dict[str, np.ndarray] = {}

    def read(lo: int, hi: int) -> dict[str, np.ndarray]:
        for n in names:
            if n not in members:
                members[n] = archive[n]
        return {n: members[n][lo:hi] for n in names}

    return ArrayFile(
        path,
        fmt,
        [f"dim{i}" for i in range(len(shape))],
        tuple(shape),
        dtypes,
        {},
        [0] * len(shape),
        read=read,
        close=archive.close,
    )
