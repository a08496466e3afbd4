"""``tessera bench load``: getting the formats scientists hold into the database.

Cases, each a load of generated files made once per run (rates are bytes of
input per second):

- ``fits_glob``: a glob of float32 FITS images into one array (a slice per
  image). Peer ``xarray``: the images read by dask tasks (astropy), stacked,
  and written with ``Dataset.to_zarr`` (xarray has no FITS engine, so this is
  ``open_mfdataset``'s pipeline with a FITS reader).
- ``netcdf_grid``: one NetCDF-4 grid of float32 over (time, lat, lon) into an
  array. Peer ``xarray``: ``xr.open_mfdataset(path, chunks=...).to_zarr(...)``.
- ``csv_stream``: a CSV file of sensor records into a record stream. Peer
  ``duckdb``: ``CREATE TABLE ... AS SELECT * FROM read_csv(path)`` into a
  DuckDB file.
- ``jsonl_collection``: NoBench objects as JSON lines into a collection (the
  default backend and mapping, indexes included). Peer ``postgresql``:
  ``COPY`` into a ``jsonb`` column of a throwaway server on loopback.

Each case also reports ``<case>_memory``: the peak growth of this process's
resident memory during the load (bytes; the peers that run in this process
too), against the issue's bound of 2 GB. Every system's loaded data is
checked equal (sums and counts).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.bench.runner import peak_memory

if TYPE_CHECKING:
    from tesseradb.bench.runner import BenchContext


def _measure(ctx: BenchContext, system: str, case: str, fn: Callable[[], Any], amount: int) -> Any:
    with peak_memory() as peak:
        answer = ctx.measure(system, case, fn, "per_second", "B/s", amount=amount)
    if system in ("tessera", "xarray"):  # (the other peers load in another process or library)
        ctx.record(system, f"{case}_memory", [float(peak[0])], "bytes", "B")
    return answer


def _size(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths)


# --- inputs -------------------------------------------------------------------------------
def _fits_images(folder: Path, count: int, side: int) -> list[Path]:
    import numpy as np
    from astropy.io import fits

    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(3)
    paths = []
    for i in range(count):
        image = np.round(1000 + 30 * rng.standard_normal((side, side), dtype=np.float32))
        path = folder / f"image_{i:04d}.fits"
        hdu = fits.PrimaryHDU(image.astype(np.float32))
        hdu.header["EXPTIME"] = 60.0
        hdu.writeto(path, overwrite=True)
        paths.append(path)
    return paths


def _netcdf_grid(path: Path, times: int, side: int) -> None:
    import h5netcdf
    import numpy as np

    rng = np.random.default_rng(5)
    lat = np.linspace(-90, 90, side)
    base = (280 + 20 * np.cos(np.radians(lat)))[:, None].astype(np.float32)
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"time": times, "lat": side, "lon": side}
        f.create_variable("time", ("time",), "i8")[:] = np.arange(times)
        f.create_variable("lat", ("lat",), "f8")[:] = lat
        f.create_variable("lon", ("lon",), "f8")[:] = np.linspace(0, 360, side, endpoint=False)
        temperature = f.create_variable(
            "temperature", ("time", "lat", "lon"), "f4", chunks=(1, side, side)
        )
        temperature.attrs["units"] = "K"
        for t in range(times):
            noise = rng.standard_normal((side, side), dtype=np.float32)
            temperature[t] = np.round(base + noise, 2)


def _csv_records(path: Path, rows: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(7)
    step = 1_000_000
    with pacsv.CSVWriter(
        str(path),
        pa.schema(
            [
                ("t", pa.int64()),
                ("lat", pa.float64()),
                ("lon", pa.float64()),
                ("value", pa.float64()),
                ("sensor", pa.int32()),
            ]
        ),
    ) as out:
        for start in range(0, rows, step):
            n = min(step, rows - start)
            out.write_table(
                pa.table(
                    {
                        "t": np.arange(start, start + n, dtype=np.int64) + 1_700_000_000,
                        "lat": np.round(rng.uniform(-90, 90, n), 5),
                        "lon": np.round(rng.uniform(-180, 180, n), 5),
                        "value": np.round(rng.normal(20, 5, n), 3),
                        "sensor": rng.integers(0, 5000, n, dtype=np.int32),
                    }
                )
            )


# --- the cases ------------------------------------------------------------------------------
def _fits_glob(ctx: BenchContext, db: Any, folder: Path) -> None:
    import numpy as np

    count, side = int(ctx.params["fits_images"]), int(ctx.params["fits_side"])
    ctx.progress(f"writing {count} FITS images of {side}x{side}")
    files = _fits_images(folder / "fits", count, side)
    pattern = str(folder / "fits" / "image_*.fits")
    amount = _size(files)
    answers: dict[str, Any] = {}
    if ctx.wants("tessera"):

        def load() -> Any:
            db.drop("images", missing_ok=True)
            return db.load(pattern, into="images")

        _measure(ctx, "tessera", "fits_glob", load, amount)
        answers["tessera"] = db.sql("SELECT count(*), sum(value) FROM images").fetchall()
    if ctx.wants("xarray"):
        import dask
        import dask.array as da
        import xarray as xr
        from astropy.io import fits

        target = folder / "fits_xarray.zarr"

        def read(path: Path) -> np.ndarray:
            return np.asarray(fits.getdata(path), dtype=np.float32)

        def peer() -> None:
            parts = [
                da.from_delayed(dask.delayed(read)(p), (side, side), np.float32) for p in files
            ]
            stack = da.stack(parts)
            xr.Dataset({"value": (("file", "y", "x"), stack)}).to_zarr(
                target, mode="w", consolidated=True
            )

        _measure(ctx, "xarray", "fits_glob", peer, amount)
        with xr.open_zarr(target) as ds:
            total = float(ds["value"].astype("f8").sum())
        answers["xarray"] = [(count * side * side, total)]
    if len(answers) > 1:
        ctx.check("fits_glob", answers, digits=6)


def _netcdf(ctx: BenchContext, db: Any, folder: Path) -> None:
    times, side = int(ctx.params["grid_times"]), int(ctx.params["grid_side"])
    path = folder / "grid.nc"
    ctx.progress(f"writing a NetCDF grid of {times}x{side}x{side}")
    _netcdf_grid(path, times, side)
    amount = path.stat().st_size
    answers: dict[str, Any] = {}
    if ctx.wants("tessera"):

        def load() -> Any:
            db.drop("grid", missing_ok=True)
            return db.load(str(path), into="grid")

        _measure(ctx, "tessera", "netcdf_grid", load, amount)
        answers["tessera"] = db.sql("SELECT count(*), sum(temperature) FROM grid").fetchall()
    if ctx.wants("xarray"):
        import xarray as xr

        target = folder / "grid_xarray.zarr"
        step = max(1, (64 << 20) // (side * side * 4))  # dask chunks of about 64 MB

        def peer() -> None:
            with xr.open_mfdataset(
                [path], engine="h5netcdf", chunks={"time": step}, mask_and_scale=False
            ) as ds:
                ds.to_zarr(target, mode="w", consolidated=True)

        _measure(ctx, "xarray", "netcdf_grid", peer, amount)
        with xr.open_zarr(target) as ds:
            answers["xarray"] = [(times * side * side, float(ds["temperature"].astype("f8").sum()))]
    if len(answers) > 1:
        ctx.check("netcdf_grid", answers, digits=6)


def _csv(ctx: BenchContext, db: Any, folder: Path) -> None:
    import duckdb

    rows = int(ctx.params["csv_rows"])
    path = folder / "records.csv"
    ctx.progress(f"writing {rows:,} CSV records")
    _csv_records(path, rows)
    amount = path.stat().st_size
    answers: dict[str, Any] = {}
    if ctx.wants("tessera"):

        def load() -> Any:
            db.drop("records", missing_ok=True)
            loaded = db.load(str(path), into="records", kind="stream", index=["t", "lat", "lon"])
            db.stream("records").flush()  # on disk, as the peer's table is
            return loaded

        _measure(ctx, "tessera", "csv_stream", load, amount)
        answers["tessera"] = db.sql("SELECT count(*), sum(sensor), sum(t) FROM records").fetchall()
    if ctx.wants("duckdb"):
        target = folder / "records.duckdb"

        def peer() -> None:
            if target.exists():
                target.unlink()
            con = duckdb.connect(str(target))
            try:
                con.execute("CREATE TABLE records AS SELECT * FROM read_csv(?)", [str(path)])
                con.execute("CHECKPOINT")
            finally:
                con.close()

        _measure(ctx, "duckdb", "csv_stream", peer, amount)
        with duckdb.connect(str(target), read_only=True) as con:
            answers["duckdb"] = con.execute(
                "SELECT count(*), sum(sensor), sum(t) FROM records"
            ).fetchall()
    if len(answers) > 1:
        ctx.check("csv_stream", answers)


def _jsonl(ctx: BenchContext, db: Any, folder: Path) -> None:
    from tesseradb.bench.nobench import NoBench

    n = int(ctx.params["objects"])
    path = folder / "objects.jsonl"
    ctx.progress(f"generating {n:,} NoBench objects")
    NoBench(n).write(path)
    amount = path.stat().st_size
    answers: dict[str, Any] = {}
    if ctx.wants("tessera"):

        def load() -> Any:
            db.drop("objects", missing_ok=True)
            return db.load(str(path), into="objects")

        _measure(ctx, "tessera", "jsonl_collection", load, amount)
        answers["tessera"] = [(db.collection("objects").count(),)]
    if ctx.wants("postgresql"):
        import psycopg

        from tesseradb.bench.servers import postgres_server

        with postgres_server() as server:

            def peer() -> int:
                with psycopg.connect(server.url, autocommit=True) as con:
                    con.execute("DROP TABLE IF EXISTS objects")
                    con.execute("CREATE TABLE objects (doc jsonb NOT NULL)")
                    with (
                        con.cursor() as cur,
                        cur.copy("COPY objects (doc) FROM STDIN") as copy,
                        path.open("r", encoding="utf-8") as lines,
                    ):
                        for line in lines:
                            copy.write_row((line.rstrip("\n"),))
                    row = con.execute("SELECT count(*) FROM objects").fetchone()
                    return int(row[0]) if row else 0

            count = _measure(ctx, "postgresql", "jsonl_collection", peer, amount)
            answers["postgresql"] = [(count,)]
    if len(answers) > 1:
        ctx.check("jsonl_collection", answers)


def run(ctx: BenchContext) -> None:
    import warnings

    from tesseradb import connect

    assert ctx.scratch is not None
    folder = ctx.scratch
    with connect(folder / "load.tdb") as db, warnings.catch_warnings():
        # (the xarray peer's consolidated metadata "is not part of the v3 specification")
        warnings.filterwarnings("ignore", message="Consolidated metadata")
        for case in (_fits_glob, _netcdf, _csv, _jsonl):
            started = time.perf_counter()
            case(ctx, db, folder)
            ctx.progress(f"{case.__name__[1:]} done in {time.perf_counter() - started:.1f} s")


def _scale(
    images: int, side: int, times: int, grid: int, rows: int, objects: int
) -> dict[str, Any]:
    return {
        "fits_images": images,
        "fits_side": side,
        "grid_times": times,
        "grid_side": grid,
        "csv_rows": rows,
        "objects": objects,
        "fits_bytes": images * side * side * 4,
        "grid_bytes": times * grid * grid * 4,
    }


register(
    Benchmark(
        name="load",
        description="db.load of FITS globs, a NetCDF grid, CSV records and JSON lines vs xarray+dask, DuckDB read_csv and PostgreSQL COPY",
        scales={
            "test": _scale(6, 128, 4, 128, 20_000, 2_000),
            "tiny": _scale(16, 512, 16, 512, 500_000, 10_000),
            "small": _scale(200, 2048, 256, 2048, 45_000_000, 1_000_000),
        },
        systems=("tessera", "xarray", "duckdb", "postgresql"),
        run=run,
        default_scale="tiny",
        notes=(
            "rates are bytes of input per second; each load starts from an empty object",
            "<case>_memory is the peak growth of this process's resident memory during the load",
            "the xarray peer writes Zarr v3 with its default codec, through dask's threads",
        ),
    )
)
