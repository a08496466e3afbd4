"""Array loads and exports: FITS, TIFF, NetCDF, Zarr and npy/npz round trips, globs, appends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from astropy.io import fits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.errors import LoadError

DTYPES = ["uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "float32", "float64"]


def _cells(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    kind = np.dtype(dtype)
    if kind.kind == "f":
        return rng.normal(size=shape).astype(dtype)
    info = np.iinfo(kind)
    return rng.integers(info.min, info.max, size=shape, dtype=kind, endpoint=True)


def _write_fits(path: Path, values: np.ndarray, origin: tuple[int, int] | None = None) -> None:
    hdu = fits.PrimaryHDU(values)
    if origin is not None:  # a plain offset: world = index + origin
        for axis, o in zip((2, 1), origin, strict=True):
            hdu.header[f"CRPIX{axis}"] = 1.0
            hdu.header[f"CRVAL{axis}"] = float(o)
    hdu.header["OBJECT"] = "M31"
    hdu.writeto(path)


def test_fits_glob_stacks_images_with_their_origin(db: tesseradb.Database, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    images = [_cells(rng, (30, 40), "uint16") for _ in range(4)]
    for i, image in enumerate(images):
        _write_fits(tmp_path / f"night_{i:02d}.fits", image, origin=(-7, 100))
    loaded = db.load(str(tmp_path / "night_*.fits"), into="nights")
    assert (loaded.kind, loaded.created, loaded.files, loaded.items) == ("array", True, 4, 4800)
    array = db.array("nights")
    assert list(array.schema.dim_names) == ["file", "y", "x"]
    assert array.schema.origin == (0, -7, 100)
    assert array.schema.attrs[0].dtype == "uint16"
    assert array.schema.extra["fits"]["OBJECT"] == "M31"
    np.testing.assert_array_equal(array.read()["value"], np.stack(images))
    # world coordinates in SQL: x runs from 100
    assert db.sql("SELECT min(x), max(x), min(y) FROM nights").fetchall() == [(100, 139, -7)]
    # a second load appends slices, in one new version
    before = len(array.versions())
    db.load(str(tmp_path / "night_0[01].fits"), into="nights")
    assert array.shape == (6, 30, 40)
    assert len(array.versions()) == before + 1
    np.testing.assert_array_equal(array.read()["value"][4:], np.stack(images[:2]))


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    dtype=st.sampled_from(DTYPES),
    shape=st.tuples(st.integers(1, 9), st.integers(1, 13)),
    origin=st.tuples(st.integers(-50, 50), st.integers(-50, 50)),
    seed=st.integers(0, 2**16),
)
def test_fits_round_trip_keeps_cells_types_and_origin(
    tmp_path_factory: pytest.TempPathFactory,
    dtype: str,
    shape: tuple[int, int],
    origin: tuple[int, int],
    seed: int,
) -> None:
    where = tmp_path_factory.mktemp("fits")
    values = _cells(np.random.default_rng(seed), shape, dtype)
    _write_fits(where / "in.fits", values, origin)
    with tesseradb.connect(where / "db") as db:
        db.load(str(where / "in.fits"), into="a")
        array = db.array("a")
        assert array.schema.attrs[0].dtype == dtype
        assert array.schema.origin == origin
        db.export("a", str(where / "out.fits"))
        db.load(str(where / "out.fits"), into="b")
        again = db.array("b")
        assert again.schema.attrs[0].dtype == dtype
        assert again.schema.origin == origin
        np.testing.assert_array_equal(again.read()["value"], values)
    np.testing.assert_array_equal(fits.getdata(where / "out.fits"), values)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    dtypes=st.lists(st.sampled_from(DTYPES), min_size=1, max_size=3),
    shape=st.tuples(st.integers(1, 6), st.integers(1, 5), st.integers(1, 7)),
    start=st.integers(-5, 5),
    seed=st.integers(0, 2**16),
)
def test_netcdf_round_trip_keeps_variables_coordinates_and_attributes(
    tmp_path_factory: pytest.TempPathFactory,
    dtypes: list[str],
    shape: tuple[int, int, int],
    start: int,
    seed: int,
) -> None:
    where = tmp_path_factory.mktemp("nc")
    rng = np.random.default_rng(seed)
    data = {f"v{i}": (("time", "lat", "lon"), _cells(rng, shape, d)) for i, d in enumerate(dtypes)}
    ds = xr.Dataset(
        data,
        coords={
            "time": np.arange(start, start + shape[0]),
            "lat": np.linspace(-80.0, 80.0, shape[1]),
            "lon": np.linspace(0.0, 355.0, shape[2]) + 0.25,
        },
        attrs={"title": "a grid"},
    )
    ds["v0"].attrs["units"] = "K"
    ds.to_netcdf(where / "in.nc", engine="h5netcdf")
    with tesseradb.connect(where / "db") as db:
        db.load(str(where / "in.nc"), into="grid")
        array = db.array("grid")
        assert list(array.schema.dim_names) == ["time", "lat", "lon"]
        assert array.schema.origin[0] == start  # integer unit-step coordinates: the origin
        assert [a.dtype for a in array.schema.attrs] == dtypes
        db.export("grid", str(where / "out.nc"))
        db.export("grid", str(where / "out.zarr"))
    for reopened in (
        xr.open_dataset(where / "out.nc", engine="h5netcdf", mask_and_scale=False),
        xr.open_zarr(where / "out.zarr", mask_and_scale=False),
    ):
        with reopened:
            for name in data:
                np.testing.assert_array_equal(reopened[name].values, ds[name].values)
                assert reopened[name].dtype == ds[name].dtype
                assert reopened[name].dims == ("time", "lat", "lon")
            for coord in ("time", "lat", "lon"):
                np.testing.assert_array_equal(reopened[coord].values, ds[coord].values)
            assert reopened["v0"].attrs["units"] == "K"
            assert reopened.attrs["title"] == "a grid"


def test_fits_blank_pixels_are_null_and_round_trip(db: tesseradb.Database, tmp_path: Path) -> None:
    values = np.arange(12, dtype=np.uint16).reshape(3, 4) * 1000
    hdu = fits.PrimaryHDU(values)
    hdu.header["BLANK"] = -32768  # stored units: BZERO 32768 makes it the pixel value 0
    hdu.writeto(tmp_path / "blank.fits")
    db.load(str(tmp_path / "blank.fits"), into="b")
    attr = db.array("b").schema.attrs[0]
    assert (attr.dtype, attr.fill, attr.nullable) == ("uint16", 0, True)
    assert db.sql("SELECT count(*), count(value) FROM b").fetchall() == [(12, 11)]
    db.export("b", str(tmp_path / "out.fits"))
    assert fits.getheader(tmp_path / "out.fits")["BLANK"] == -32768
    db.load(str(tmp_path / "out.fits"), into="c")
    assert db.sql("SELECT count(value), sum(value) FROM c").fetchall() == [(11, 66000)]


def test_netcdf_variables_that_do_not_share_dimensions_must_be_named(
    db: tesseradb.Database, tmp_path: Path
) -> None:
    ds = xr.Dataset({"a": (("x",), np.arange(3.0)), "b": (("y",), np.arange(4.0))})
    ds.to_netcdf(tmp_path / "mixed.nc", engine="h5netcdf")
    with pytest.raises(LoadError, match=r"mixed\.nc: its variables do not share dimensions"):
        db.load(str(tmp_path / "mixed.nc"))
    assert db.arrays() == []
    db.load(str(tmp_path / "mixed.nc"), into="b", variables=["b"])
    np.testing.assert_array_equal(db.array("b").read()["b"], np.arange(4.0))


def test_netcdf_files_concatenate_along_their_first_dimension(
    db: tesseradb.Database, tmp_path: Path
) -> None:
    for part in range(3):
        ds = xr.Dataset(
            {"t": (("time", "x"), np.full((2, 5), part, dtype="float32"))},
            coords={"time": np.arange(2 * part, 2 * part + 2)},
        )
        ds.to_netcdf(tmp_path / f"part{part}.nc", engine="h5netcdf")
    db.load(str(tmp_path / "part*.nc"), into="series", along="time")
    array = db.array("series")
    assert array.shape == (6, 5)
    assert array.schema.dims[0].end is None  # grows along time
    np.testing.assert_array_equal(array.read()["t"][:, 0], [0, 0, 1, 1, 2, 2])


def test_tiff_stack_and_npy_round_trip(db: tesseradb.Database, tmp_path: Path) -> None:
    import tifffile

    rng = np.random.default_rng(5)
    volume = rng.integers(0, 255, size=(6, 20, 24), dtype=np.uint8)
    tifffile.imwrite(tmp_path / "stack.tif", volume)
    db.load(str(tmp_path / "stack.tif"), into="vol")
    assert list(db.array("vol").schema.dim_names) == ["z", "y", "x"]
    np.testing.assert_array_equal(db.array("vol").read()["value"], volume)
    for i in range(3):
        tifffile.imwrite(tmp_path / f"slice{i}.tiff", volume[i])
    db.load(str(tmp_path / "slice*.tiff"), into="slices", along="z")
    np.testing.assert_array_equal(db.array("slices").read()["value"], volume[:3])
    db.export("vol", str(tmp_path / "vol.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "vol.npy"), volume)
    db.load(str(tmp_path / "vol.npy"), into="again", dims=["z", "y", "x"])
    np.testing.assert_array_equal(db.array("again").read()["value"], volume)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    dtype=st.sampled_from(["uint8", "uint16", "int16", "int32", "float32", "float64"]),
    shape=st.tuples(st.integers(1, 5), st.integers(1, 17), st.integers(1, 19)),
    seed=st.integers(0, 2**16),
)
def test_tiff_stacks_round_trip_through_npy(
    tmp_path_factory: pytest.TempPathFactory, dtype: str, shape: tuple[int, int, int], seed: int
) -> None:
    import tifffile

    where = tmp_path_factory.mktemp("tiff")
    volume = _cells(np.random.default_rng(seed), shape, dtype)
    for z in range(shape[0]):  # one file per slice, as microscopes write them
        tifffile.imwrite(where / f"plane_{z:03d}.tif", volume[z])
    with tesseradb.connect(where / "db") as db:
        db.load(str(where / "plane_*.tif"), into="vol", along="z")
        array = db.array("vol")
        assert list(array.schema.dim_names) == ["z", "y", "x"]
        assert array.schema.attrs[0].dtype == dtype
        db.export("vol", str(where / "vol.npy"))
        db.load(str(where / "vol.npy"), into="again", dims=["z", "y", "x"])
        np.testing.assert_array_equal(db.array("again").read()["value"], volume)
    np.testing.assert_array_equal(np.load(where / "vol.npy"), volume)


def test_npz_members_become_attributes(db: tesseradb.Database, tmp_path: Path) -> None:
    np.savez(tmp_path / "pair.npz", a=np.arange(12.0).reshape(3, 4), b=np.ones((3, 4), "i4"))
    db.load(str(tmp_path / "pair.npz"))
    array = db.array("pair")
    assert list(array.schema.attr_names) == ["a", "b"]
    np.testing.assert_array_equal(array.read()["b"], np.ones((3, 4), "i4"))


def test_zarr_export_opens_in_xarray_with_world_coordinates(
    db: tesseradb.Database, tmp_path: Path
) -> None:
    array = db.create_array(
        "cube",
        [{"name": "t", "end": 3, "chunk": 2}, {"name": "y", "end": 4, "chunk": 4}],
        {"v": "float32", "n": "int16"},
        origin=[10, -2],
    )
    array.write([0, 0], {"v": np.arange(12, dtype="f4").reshape(3, 4), "n": np.ones((3, 4), "i2")})
    db.export("cube", str(tmp_path / "cube.zarr"))
    with xr.open_zarr(tmp_path / "cube.zarr") as ds:
        assert list(ds["t"].values) == [10, 11, 12]
        assert list(ds["y"].values) == [-2, -1, 0, 1]
        np.testing.assert_array_equal(ds["v"].values, np.arange(12, dtype="f4").reshape(3, 4))
    db.load(str(tmp_path / "cube.zarr"), into="cube2")
    again = db.array("cube2")
    assert again.schema.origin == (10, -2)
    np.testing.assert_array_equal(again.read()["n"], np.ones((3, 4), "i2"))


def test_big_loads_go_in_slabs(db: tesseradb.Database, tmp_path: Path, monkeypatch) -> None:
    """A file bigger than a slab is read and written a slab at a time (bounded memory)."""
    from tesseradb.arrays import _load as _arrays

    monkeypatch.setattr(_arrays, "_SLAB_BYTES", 4096)
    writes: list[int] = []
    write_slab = _arrays._write_slab

    def counted(array, start, *rest):  # type: ignore[no-untyped-def]
        writes.append(start)
        write_slab(array, start, *rest)

    monkeypatch.setattr(_arrays, "_write_slab", counted)
    values = np.arange(100 * 64, dtype="f8").reshape(100, 64)
    np.save(tmp_path / "big.npy", values)
    seen: list[int] = []
    db.load(str(tmp_path / "big.npy"), into="big", progress=lambda e: seen.append(e.done))
    np.testing.assert_array_equal(db.array("big").read()["value"], values)
    assert writes == list(range(0, 100, 8))  # 8 rows of 512 bytes to a slab
    assert seen[-1] == values.nbytes


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.fits": "short"}, r"a\.fits: cannot be read as FITS"),
        ({"b.npy": "complex"}, r"b\.npy: 'value' holds complex128 cells"),
        ({"c.nc": "text"}, r"c\.nc: cannot be read as NETCDF"),
        (
            {"d0.fits": (4, 4), "d1.fits": (4, 5)},
            r"d1\.fits: holds \(4, 5\) cells; .*d0\.fits holds \(4, 4\)",
        ),
        (
            {"e0.fits": "i2", "e1.fits": "f4"},
            r"e1\.fits: holds value float32; .*e0\.fits holds value int16",
        ),
        ({"f.fits": "truncated"}, r"f\.fits: .*(truncated|cannot be read)"),
    ],
)
def test_bad_array_files_are_named_and_change_nothing(
    db: tesseradb.Database, tmp_path: Path, files: dict[str, object], message: str
) -> None:
    for name, how in files.items():
        path = tmp_path / name
        if how == "short":
            path.write_bytes(b"SIMPLE  =                    T")
        elif how == "complex":
            np.save(path, np.ones(3, dtype=complex))
        elif how == "text":
            path.write_text("not a grid")
        elif how == "truncated":
            _write_fits(path, np.ones((50, 50), "f8"))
            path.write_bytes(path.read_bytes()[:5000])
        elif isinstance(how, tuple):
            _write_fits(path, np.ones(how, "f4"))
        else:
            _write_fits(path, np.ones((4, 4), str(how)))
    pattern = str(tmp_path / (next(iter(files))[0] + "*"))
    existing = db.create_array("kept", [{"name": "i", "end": 2}], {"v": "int8"})
    version = existing.version
    with pytest.raises(LoadError, match=message):
        db.load(pattern, into="target")
    assert db.arrays() == ["kept"]
    assert existing.version == version
    assert not any((db.path / "arrays").glob("target*"))


def test_a_failed_append_keeps_the_array_as_it_was(db: tesseradb.Database, tmp_path: Path) -> None:
    _write_fits(tmp_path / "a0.fits", np.ones((4, 4), "i2"))
    _write_fits(tmp_path / "a1.fits", np.ones((4, 4), "i2"))
    db.load(str(tmp_path / "a*.fits"), into="stack")
    array = db.array("stack")
    version = array.version
    _write_fits(tmp_path / "b0.fits", np.ones((4, 4), "i2"))
    (tmp_path / "b1.fits").write_bytes((tmp_path / "b0.fits").read_bytes()[:2890])
    with pytest.raises(LoadError, match=r"b1\.fits"):
        db.load(str(tmp_path / "b*.fits"), into="stack")
    assert array.version == version
    assert array.shape == (2, 4, 4)
    with pytest.raises(LoadError, match=r"cannot hold exactly"):
        _write_fits(tmp_path / "c.fits", np.ones((4, 4), "f8"))
        db.load(str(tmp_path / "c.fits"), into="stack")
    assert array.shape == (2, 4, 4)


def test_slabs_end_on_chunk_boundaries_across_files(
    db: tesseradb.Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files of 3 rows into chunks 4 rows deep: every write but the last covers whole chunks
    (a chunk written in part would be read back and written again)."""
    from tesseradb.arrays import _load as _arrays

    monkeypatch.setattr(_arrays, "_SLAB_BYTES", 8 * 5 * 8)  # 8 rows of 5 float64 to a slab
    parts = [np.arange(15.0).reshape(3, 5) + 100 * k for k in range(5)]
    for k, part in enumerate(parts):
        np.save(tmp_path / f"part{k}.npy", part)
    writes: list[tuple[int, int]] = []
    write_slab = _arrays._write_slab

    def recorded(array, start, slab, futures, tracker):  # type: ignore[no-untyped-def]
        writes.append((start, len(next(iter(slab.values())))))
        write_slab(array, start, slab, futures, tracker)

    monkeypatch.setattr(_arrays, "_write_slab", recorded)
    db.load(str(tmp_path / "part*.npy"), into="joined", along="dim0", chunks=[4, 5])
    assert writes == [(0, 8), (8, 7)]
    np.testing.assert_array_equal(db.array("joined").read()["value"], np.concatenate(parts))
    writes.clear()
    db.load(str(tmp_path / "part0.npy"), into="joined")  # appended from row 15, in one write
    assert writes == [(15, 3)]
    np.testing.assert_array_equal(db.array("joined").read()["value"][15:], parts[0])


@pytest.mark.parametrize(
    ("compression", "dtype", "name"),
    [("RICE_1", "int16", "night.fits.fz"), ("GZIP_1", "float32", "night.fits")],
)
def test_tile_compressed_fits_images_load_as_astropy_reads_them(
    db: tesseradb.Database, tmp_path: Path, compression: str, dtype: str, name: str
) -> None:
    """The form most survey images ship in (issue 40, item 8): a valid file, not a
    truncated one."""
    rng = np.random.default_rng(3)
    values = rng.integers(0, 3000, size=(40, 50)).astype(dtype)
    hdu = fits.CompImageHDU(values, compression_type=compression)
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(tmp_path / name)
    loaded = db.load(str(tmp_path / name), into="night")
    assert loaded.items == values.size
    np.testing.assert_array_equal(db.array("night").read()["value"], fits.getdata(tmp_path / name))
    # a damaged compressed file is refused, naming it, and nothing is made
    data = bytearray((tmp_path / name).read_bytes())
    (tmp_path / "cut.fits").write_bytes(bytes(data[: len(data) - 2000]))
    with pytest.raises(LoadError, match=r"cut\.fits"):
        db.load(str(tmp_path / "cut.fits"), into="cut")
    assert "cut" not in db.arrays()


def test_netcdf3_classic_files_load_and_say_they_cannot_be_attached(
    db: tesseradb.Database, tmp_path: Path
) -> None:
    ds = xr.Dataset(
        {"temp": (("time", "lat", "lon"), np.arange(24.0, dtype="float32").reshape(2, 3, 4))},
        coords={"lat": [10, 20, 30], "lon": [1, 2, 3, 4]},
    )
    path = tmp_path / "classic.nc"
    ds.to_netcdf(path, format="NETCDF3_CLASSIC", engine="scipy")
    db.load(str(path), into="classic")
    np.testing.assert_array_equal(db.array("classic").read()["temp"], ds["temp"].values)
    with pytest.raises(tesseradb.errors.AttachError, match=r"NetCDF3.*load it instead"):
        db.attach(path, name="att")
