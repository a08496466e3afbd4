"""Benchmark ``objectstore``: arrays and attached HDF5 files in an S3 bucket, at 0 ms and
20 ms of added latency per request, against the tools a cloud user would use instead.

An S3 server (moto's, on loopback) sits behind a TCP proxy of our own that adds a
fixed latency to every request (``tesseradb.bench.proxy``) and counts requests; every
system talks to the proxy as to any endpoint. Cases, each at ``0ms`` and ``20ms``:

- ``array_write`` / ``array_read_full`` (``per_second``, bytes): float32 images in
  256 x 256 chunks, written in one commit / read whole. ``tessera`` is
  ``db.create_array`` in a database whose storage is the bucket; ``zarr`` opens the
  same kind of Icechunk repository directly with zarr-python (Icechunk's own S3
  storage, zarr's own concurrency);
- ``array_read_slab`` (seconds): a 1% box in the middle of one image;
- ``array_sql_box`` (seconds, ``tessera`` only): ``SELECT avg(v)`` over a box in SQL;
- ``ptf_first_q1`` (seconds): from nothing to the first answer of the PTF three-way
  join (the ``ptf`` benchmark's Q1) over a PTF file in the bucket: ``tessera``
  attaches it in place; ``download`` fetches the file, loads its tables into DuckDB
  and queries (SDS/Q's data-preparation baseline); ``h5py-fsspec`` reads the tables
  with h5py through fsspec's HTTP ranged reads of a presigned URL, then queries
  them in DuckDB;
- ``ptf_q1_warm``..``ptf_q3_warm`` (seconds, ``tessera``): the same statements again;
- ``requests_<case>`` (count): requests the proxy saw during one run of the case.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.bench.runner import BenchContext

LATENCIES = {"0ms": 0.0, "20ms": 0.020}
CHUNK = 256


@dataclass
class _Setting:
    """One latency's run: the context, the proxy every system talks to, its bucket."""

    ctx: BenchContext
    proxy: Any
    url: str  # the bucket
    options: dict[str, str]  # storage_options reaching it through the proxy
    label: str  # "0ms", "20ms"

    def measure(self, system: str, case: str, fn: Callable[[], Any], **how: Any) -> Any:
        """Time ``fn`` as ``<case>_<label>``, then run it once more counting its requests and
        the bytes the endpoint sent back."""
        answer = self.ctx.measure(system, f"{case}_{self.label}", fn, **how)
        before, down = self.proxy.requests, self.proxy.bytes_down
        fn()
        requests = float(self.proxy.requests - before)
        self.ctx.record(system, f"requests_{case}_{self.label}", [requests], "count", "requests")
        received = float(self.proxy.bytes_down - down)
        self.ctx.record(system, f"bytes_{case}_{self.label}", [received], "bytes", "bytes")
        return answer

    def location(self, prefix: str) -> Any:
        from tesseradb.storage import Location, resolve_credentials

        return Location(f"{self.url}/{prefix}", resolve_credentials(self.options, "bench"))


def _runs(ctx: BenchContext) -> int:
    return ctx.warmup + ctx.repeat


def _images(n_images: int, side: int) -> Any:
    import numpy as np

    rng = np.random.default_rng(11)
    return rng.normal(1000, 30, (n_images, side, side)).astype(np.float32)


def _slab(side: int) -> tuple[int, int]:
    """Where the 1% slab starts, and its width (a tenth of each side of one image)."""
    return side // 2 - side // 20, max(1, side // 10)


def _total(values: Any) -> float:
    import numpy as np

    return float(np.asarray(values, dtype=np.float64).sum())


# --- arrays ---------------------------------------------------------------------------------
def _tessera_arrays(run: _Setting, data: Any) -> dict[str, Any]:
    import tesseradb
    from tesseradb.arrays import clear_chunk_cache

    images, side, _ = data.shape
    dims = [
        {"name": "t", "end": images, "chunk": 1},
        {"name": "y", "end": side, "chunk": CHUNK},
        {"name": "x", "end": side, "chunk": CHUNK},
    ]
    bytes_per_run = {"metric": "per_second", "unit": "bytes", "amount": data.nbytes}
    folder = run.ctx.scratch / f"tessera-{run.label}.tdb"  # type: ignore[operator]
    storage = f"{run.url}/tessera-{run.label}"
    with tesseradb.connect(folder, storage=storage, storage_options=run.options) as db:
        # (made beforehand: the case times the write and its commit, as for the peer)
        made = iter(
            [db.create_array(f"img{i}", dims, {"v": "float32"}) for i in range(_runs(run.ctx) + 1)]
        )

        def write() -> None:
            next(made)[0:images, 0:side, 0:side] = {"v": data}

        run.measure("tessera", "array_write", write, **bytes_per_run)
        array = db.array("img0")
        lo, width = _slab(side)

        def full() -> Any:
            clear_chunk_cache()  # (as the peer, nothing of the chunks kept between reads)
            return array[0:images, 0:side, 0:side]["v"]

        def slab() -> Any:
            clear_chunk_cache()
            return array[0, lo : lo + width, lo : lo + width]["v"]

        box = (
            f"SELECT avg(v) FROM img0 WHERE t = 0 AND y BETWEEN {lo} AND {lo + width - 1} "
            f"AND x BETWEEN {lo} AND {lo + width - 1}"
        )

        def sql() -> Any:
            clear_chunk_cache()
            return db.sql(box).fetchall()

        answers = {
            "full": _total(run.measure("tessera", "array_read_full", full, **bytes_per_run)),
            "slab": _total(run.measure("tessera", "array_read_slab", slab)),
            "sql": run.measure("tessera", "array_sql_box", sql),
        }
    shutil.rmtree(folder, ignore_errors=True)
    return answers


def _zarr_arrays(run: _Setting, data: Any) -> tuple[dict[str, Any], Any]:
    import icechunk
    import zarr
    from zarr.codecs import ZstdCodec

    side = data.shape[1]
    repos: list[Any] = []
    for i in range(_runs(run.ctx) + 1):  # (made beforehand, as for tessera)
        storage = run.location(f"zarr-{run.label}/img{i}").icechunk_storage()
        repo = icechunk.Repository.create(storage)
        session = repo.writable_session("main")
        group = zarr.group(store=session.store, zarr_format=3)
        group.create_array(
            "v",
            shape=data.shape,
            chunks=(1, CHUNK, CHUNK),
            dtype="float32",
            compressors=[ZstdCodec(level=3)],
            dimension_names=["t", "y", "x"],  # (xarray needs them)
        )
        session.commit("create")
        repos.append(repo)
    made = iter(repos)

    def write() -> None:
        session = next(made).writable_session("main")
        zarr.open_array(session.store, path="v", mode="r+", zarr_format=3)[:] = data
        session.commit("write")

    bytes_per_run = {"metric": "per_second", "unit": "bytes", "amount": data.nbytes}
    run.measure("zarr", "array_write", write, **bytes_per_run)
    repo = repos[0]
    lo, width = _slab(side)

    def opened() -> Any:
        session = repo.readonly_session(branch="main")
        return zarr.open_array(session.store, path="v", mode="r", zarr_format=3)

    answers = {
        "full": _total(
            run.measure("zarr", "array_read_full", lambda: opened()[:], **bytes_per_run)
        ),
        "slab": _total(
            run.measure(
                "zarr", "array_read_slab", lambda: opened()[0, lo : lo + width, lo : lo + width]
            )
        ),
    }
    return answers, repo


def _xarray_arrays(run: _Setting, repo: Any, data: Any) -> dict[str, Any]:
    """xarray's open_zarr with Dask over zarr-python's repository (one Dask chunk per
    stored chunk, the threaded scheduler), as a Pangeo user reads a cloud array."""
    import xarray as xr

    side = data.shape[1]
    lo, width = _slab(side)

    def opened() -> Any:
        session = repo.readonly_session(branch="main")
        return xr.open_zarr(session.store, consolidated=False, chunks={})["v"]

    bytes_per_run = {"metric": "per_second", "unit": "bytes", "amount": data.nbytes}
    full = run.measure("xarray", "array_read_full", lambda: opened().values, **bytes_per_run)
    box = (0, slice(lo, lo + width), slice(lo, lo + width))
    slab = run.measure("xarray", "array_read_slab", lambda: opened()[box].values)
    mean = run.measure("xarray", "array_sql_box", lambda: float(opened()[box].mean().compute()))
    return {"full": _total(full), "slab": _total(slab), "sql": mean}


# --- PTF in place ---------------------------------------------------------------------------
def _ptf_tessera(run: _Setting, windows: dict[str, Any]) -> dict[str, Any]:
    import tesseradb
    from tesseradb.attached import clear_remote_cache
    from tesseradb.bench.ptf import QUERY

    folder = run.ctx.scratch / f"ptf-{run.label}"  # type: ignore[operator]
    fresh = iter(range(10_000))

    def first(q: str) -> Any:
        clear_remote_cache()  # from nothing: no block of the file known
        with tesseradb.connect(folder / f"db{next(fresh)}", storage_options=run.options) as db:
            db.attach(f"{run.url}/ptf/ptf.h5", name="ptf")
            return db.sql(QUERY, windows[q]).fetchall()

    answers = {
        f"first_{q}": run.measure("tessera", f"ptf_first_{q}", lambda q=q: first(q))
        for q in ("q1", "q2", "q3")
    }
    with tesseradb.connect(folder / "warm", storage_options=run.options) as db:
        db.attach(f"{run.url}/ptf/ptf.h5", name="ptf")
        for q in ("q1", "q2", "q3"):

            def warm(q: str = q) -> Any:
                return db.sql(QUERY, windows[q]).fetchall()

            answers[q] = run.measure("tessera", f"ptf_{q}_warm", warm)
    shutil.rmtree(folder, ignore_errors=True)
    return answers


def _query_in_duckdb(tables: dict[str, Any], window: Any) -> Any:
    import duckdb

    from tesseradb.bench.ptf import QUERY

    con = duckdb.connect()
    con.execute("CREATE SCHEMA ptf")
    for name, table in tables.items():
        con.register("staging", table)
        con.execute(f"CREATE TABLE ptf.{name} AS SELECT * FROM staging")
        con.unregister("staging")
    try:
        return con.execute(QUERY, window).fetchall()
    finally:
        con.close()


def _ptf_download(run: _Setting, windows: dict[str, Any]) -> Any:
    """SDS/Q's data-preparation baseline: fetch the file, load its tables, query."""
    from tesseradb.bench.ptf import _read_tables

    where = run.location("ptf")
    local = run.ctx.scratch / f"download-{run.label}.h5"  # type: ignore[operator]

    def first(q: str) -> Any:
        where.download("ptf.h5", local, lambda n: None)
        return _query_in_duckdb(_read_tables(local), windows[q])

    answers = {
        f"first_{q}": run.measure("download", f"ptf_first_{q}", lambda q=q: first(q))
        for q in ("q1", "q2", "q3")
    }
    local.unlink(missing_ok=True)
    return answers


def _ptf_fsspec(run: _Setting, windows: dict[str, Any]) -> Any:
    """h5py over fsspec's HTTP file system (ranged GETs of a presigned URL), then DuckDB."""
    from datetime import timedelta

    import fsspec
    import obstore

    from tesseradb.bench.ptf import _read_tables

    signed = obstore.sign(run.location("ptf").store(), "GET", "ptf.h5", timedelta(hours=1))

    def first() -> Any:
        filesystem = fsspec.filesystem("http", skip_instance_cache=True)
        with filesystem.open(signed, "rb", block_size=2 << 20) as handle:
            return _query_in_duckdb(_read_tables(handle), windows["q1"])

    return {"first_q1": run.measure("h5py-fsspec", "ptf_first_q1", first)}


# --- a record stream ----------------------------------------------------------------------------
STREAM = {
    "fields": [
        {"name": "t", "type": "int64"},
        {"name": "x", "type": "double"},
        {"name": "y", "type": "double"},
        {"name": "v", "type": "double"},
    ],
    "index": ["x", "y"],
}
BOX = {"x": (0.40, 0.50), "y": (0.20, 0.30)}  # 1% of the unit square


def _records(count: int, calls: int) -> list[Any]:
    """``calls`` ingest calls of uniform records in the unit square, ``count`` in all."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(5)
    per = count // calls
    return [
        pa.table(
            {
                "t": np.arange(c * per, (c + 1) * per, dtype=np.int64),
                "x": rng.random(per),
                "y": rng.random(per),
                "v": rng.normal(0, 1, per),
            }
        )
        for c in range(calls)
    ]


def _summary(table: Any) -> list[Any]:
    import pyarrow.compute as pc

    return [table.num_rows, pc.sum(table["t"]).as_py(), round(pc.sum(table["v"]).as_py(), 6)]


def _stream_tessera(run: _Setting, calls: list[Any]) -> Any:
    """The stream's sealed segments in the bucket: a range query over the box from a fresh
    open (the segments' headers, then the segments the R*-tree picks), and warm."""
    import tesseradb

    folder = run.ctx.scratch / f"stream-{run.label}.tdb"  # type: ignore[operator]
    storage = f"{run.url}/stream-{run.label}"
    with tesseradb.connect(folder, storage=storage, storage_options=run.options) as db:
        stream = db.create_stream("obs", STREAM, segment_bytes=1 << 20)
        for table in calls:
            stream.ingest(table)
        stream.flush()

    def first() -> Any:
        with tesseradb.connect(folder, storage_options=run.options) as db:
            return _summary(db.stream("obs").range(["t", "v"], **BOX))

    answer = run.measure("tessera", "stream_range_first", first)
    with tesseradb.connect(folder, storage_options=run.options) as db:
        stream = db.stream("obs")
        run.measure(
            "tessera", "stream_range_warm", lambda: _summary(stream.range(["t", "v"], **BOX))
        )
    shutil.rmtree(folder, ignore_errors=True)
    return answer


def _stream_parquet(run: _Setting, calls: list[Any]) -> Any:
    """The same records as one Parquet file per ingest call in the bucket, queried with
    pyarrow's dataset filter (row-group statistics prune what the box cannot hold)."""
    import pyarrow.dataset as pads
    import pyarrow.fs
    import pyarrow.parquet as pq

    endpoint = run.options["endpoint_url"]

    def filesystem() -> Any:
        return pyarrow.fs.S3FileSystem(
            access_key=run.options["access_key_id"],
            secret_key=run.options["secret_access_key"],
            region=run.options.get("region", "us-east-1"),
            endpoint_override=endpoint.removeprefix("http://"),
            scheme="http",
        )

    root = f"{run.url.removeprefix('s3://')}/parquet-{run.label}"
    made = filesystem()
    for k, table in enumerate(calls):
        pq.write_table(
            table, f"{root}/part-{k:04d}.parquet", filesystem=made, row_group_size=64 * 1024
        )
    box = (
        (pads.field("x") >= BOX["x"][0])
        & (pads.field("x") <= BOX["x"][1])
        & (pads.field("y") >= BOX["y"][0])
        & (pads.field("y") <= BOX["y"][1])
    )

    def first() -> Any:
        dataset = pads.dataset(root, format="parquet", filesystem=filesystem())
        return _summary(dataset.to_table(columns=["t", "v"], filter=box))

    answer = run.measure("parquet", "stream_range_first", first)
    dataset = pads.dataset(root, format="parquet", filesystem=filesystem())
    run.measure(
        "parquet",
        "stream_range_warm",
        lambda: _summary(dataset.to_table(columns=["t", "v"], filter=box)),
    )
    return answer


# --- the run ----------------------------------------------------------------------------------
def run(ctx: BenchContext) -> None:
    from tesseradb.bench.proxy import fault_proxy
    from tesseradb.bench.servers import s3_server
    from tesseradb.datasets import ptf_file
    from tesseradb.storage import Location, resolve_credentials

    assert ctx.scratch is not None
    images, side = int(ctx.params["images"]), int(ctx.params["side"])
    data = _images(images, side)
    h5 = ctx.scratch / "ptf.h5"
    ctx.progress(f"generating a PTF file with {int(ctx.params['candidates']):,} candidates")
    windows = ptf_file(h5, int(ctx.params["candidates"]))
    records = int(ctx.params["records"])
    calls = _records(records, 8)
    with s3_server() as endpoint:
        url = endpoint.create_bucket("tessera-bench")
        Location(f"{url}/ptf", resolve_credentials(endpoint.storage_options(), "bench")).upload(
            h5, "ptf.h5"
        )
        ctx.record("tessera", "ptf_file", [float(h5.stat().st_size)], "bytes", "bytes")
        for label, latency in LATENCIES.items():
            with fault_proxy(endpoint.endpoint_url, latency) as proxy:
                options = {**endpoint.storage_options(), "endpoint_url": proxy.endpoint_url}
                setting = _Setting(ctx, proxy, url, options, label)
                arrays: dict[str, dict[str, Any]] = {}
                ptf: dict[str, Any] = {}
                ctx.progress(f"{label}: arrays of {data.nbytes / 2**20:.0f} MiB")
                if ctx.wants("tessera"):
                    arrays["tessera"] = _tessera_arrays(setting, data)
                if ctx.wants("zarr") or ctx.wants("xarray"):
                    arrays["zarr"], repo = _zarr_arrays(setting, data)
                    if ctx.wants("xarray"):
                        arrays["xarray"] = _xarray_arrays(setting, repo, data)
                ctx.progress(f"{label}: PTF in place")
                if ctx.wants("tessera"):
                    ptf["tessera"] = _ptf_tessera(setting, windows)
                if ctx.wants("download"):
                    ptf["download"] = _ptf_download(setting, windows)
                if ctx.wants("h5py-fsspec"):
                    ptf["h5py-fsspec"] = _ptf_fsspec(setting, windows)
                ctx.progress(f"{label}: a stream of {records:,} records")
                streams: dict[str, Any] = {}
                if ctx.wants("tessera"):
                    streams["tessera"] = _stream_tessera(setting, calls)
                if ctx.wants("parquet"):
                    streams["parquet"] = _stream_parquet(setting, calls)
                for case in ("full", "slab"):
                    _check(
                        ctx,
                        f"array_read_{case}_{label}",
                        {s: [round(a[case], 0)] for s, a in arrays.items()},
                    )
                _check(
                    ctx,
                    f"array_sql_box_{label}",
                    {
                        s: [round(float(a["sql"][0][0]) if s == "tessera" else a["sql"], 3)]
                        for s, a in arrays.items()
                        if "sql" in a
                    },
                )
                for q in ("q1", "q2", "q3"):
                    answers = {s: a[f"first_{q}"] for s, a in ptf.items() if f"first_{q}" in a}
                    _check(ctx, f"ptf_first_{q}_{label}", answers, digits=6)
                _check(ctx, f"stream_range_{label}", streams)


def _check(ctx: BenchContext, case: str, answers: dict[str, Any], digits: int = 9) -> None:
    """Compare the answers of the systems that ran (none with --systems leaving them out)."""
    if answers:
        ctx.check(case, answers, digits=digits)


register(
    Benchmark(
        name="objectstore",
        description="arrays, attached HDF5 and a record stream in an S3 bucket at 0 and 20 ms "
        "per request: vs zarr-python+Icechunk direct, xarray+Dask, download-then-query, h5py "
        "over fsspec, Parquet with pyarrow",
        scales={
            "tiny": {"images": 2, "side": 512, "candidates": 20_000, "records": 200_000},
            "small": {"images": 4, "side": 2048, "candidates": 200_000, "records": 2_000_000},
            "large": {
                "images": 64,
                "side": 2048,
                "candidates": 1_000_000,
                "records": 20_000_000,
            },
        },
        systems=("tessera", "zarr", "xarray", "download", "h5py-fsspec", "parquet"),
        run=run,
        default_scale="tiny",
    )
)
