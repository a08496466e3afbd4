"""db.load on a Dask cluster: workers read the files and write forks; one version, the
same cells as a load in threads, and nothing kept when a file fails midway."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from astropy.io import fits

import tesseradb
from tesseradb.errors import LoadError


def _fits(path: Path, values: np.ndarray) -> None:
    hdu = fits.PrimaryHDU(values)
    hdu.header["CRPIX1"], hdu.header["CRVAL1"] = 1.0, 100.0
    hdu.writeto(path)


def _load_everything(db: tesseradb.Database, folder: Path) -> dict[str, Any]:
    db.load(str(folder / "night_*.fits"), into="nights")
    db.load(str(folder / "part*.nc"), into="series", along="time")
    nights = db.array("nights")
    first = len(nights.versions())
    db.load(str(folder / "night_0[12].fits"), into="nights")  # appended: grows first
    return {
        "nights": nights.read()["value"],
        "shape": nights.shape,
        "new_versions": len(nights.versions()) - first,
        "series": db.array("series").read()["t"],
        "world": db.sql("SELECT min(x), max(x) FROM nights").fetchall(),
    }


def test_loads_on_dask_equal_loads_in_threads(tmp_path: Path, client: Any) -> None:
    rng = np.random.default_rng(2)
    for i in range(5):
        _fits(tmp_path / f"night_{i:02d}.fits", rng.integers(0, 60000, (48, 64)).astype(np.uint16))
    for part in range(3):
        xr.Dataset(
            {"t": (("time", "x"), rng.normal(size=(7, 9)).astype("float32"))},
            coords={"time": np.arange(7 * part, 7 * part + 7)},
        ).to_netcdf(tmp_path / f"part{part}.nc", engine="h5netcdf")
    with tesseradb.connect(tmp_path / "local.tdb") as db:
        local = _load_everything(db, tmp_path)
    with tesseradb.connect(tmp_path / "remote.tdb", cluster=client) as db:
        remote = _load_everything(db, tmp_path)
    for key in ("nights", "series"):
        np.testing.assert_array_equal(remote[key], local[key])
    assert remote["shape"] == local["shape"] == (7, 48, 64)
    assert remote["world"] == local["world"]
    # in threads one version; on workers a growth and the merged load, one version each
    assert local["new_versions"] == 1 and remote["new_versions"] == 2


def test_a_file_failing_on_a_worker_keeps_the_array_as_it_was(tmp_path: Path, client: Any) -> None:
    """The append's second file opens (the client plans with it) but a worker cannot read a
    damaged chunk of it: the growth made for the forks is taken back with them."""
    import h5py

    rng = np.random.default_rng(0)
    for name, part in (("good0", 0), ("good1", 1), ("bad0", 2), ("bad1", 3)):
        xr.Dataset(
            {"t": (("time", "x"), rng.normal(size=(50, 400)).astype("float32"))},
            coords={"time": np.arange(50 * part, 50 * part + 50)},
        ).to_netcdf(
            tmp_path / f"{name}.nc",
            engine="h5netcdf",
            encoding={"t": {"zlib": True, "chunksizes": (10, 400)}},
        )
    with h5py.File(tmp_path / "bad1.nc") as f:
        offset = f["t"].id.get_chunk_info(2).byte_offset
    data = bytearray((tmp_path / "bad1.nc").read_bytes())
    data[offset + 100 : offset + 400] = bytes(300)
    (tmp_path / "bad1.nc").write_bytes(bytes(data))
    with tesseradb.connect(tmp_path / "db", cluster=client) as db:
        db.load(str(tmp_path / "good*.nc"), into="series", along="time")
        array = db.array("series")
        version, versions, cells = array.version, len(array.versions()), array.read()["t"]
        with pytest.raises(LoadError, match=r"bad1\.nc: variable 't' cannot be read"):
            db.load(str(tmp_path / "bad*.nc"), into="series", along="time")
        assert array.version == version and len(array.versions()) == versions
        assert array.shape == (100, 400)
        np.testing.assert_array_equal(array.read()["t"], cells)
        assert db.check().ok
