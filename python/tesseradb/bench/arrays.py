"""Benchmark ``arrays``: the array store against plain zarr-python, TileDB and DuckDB.

Data are SS-DB-like raw images: 11 int32 attributes per pixel (a sky
background with noise, a few thousand stars, and derived measurements), one
image per value of ``t``. Every system stores them with the same chunking
(1 x chunk x chunk) and codec (zstd, level 3); TesseraDB also keeps a
CRC-32C per chunk, which the peers do not.

Cases (ARCHITECTURE.md's result rows):

- ``write_dense`` / ``read_full`` (``per_second``, bytes): one whole image,
  all attributes, written (one commit for TesseraDB) / read back;
- ``read_slab`` (``seconds``): a 1000 x 1000 slab, all attributes, at an
  offset that touches four chunks;
- ``sql_avg_box`` (``seconds``): ``SELECT avg(vK) FROM raw WHERE <box over 20
  images>`` through ``db.sql`` versus DuckDB over the same cells as a native
  table (t, y, x, v1..v11); ``bytes_on_disk`` of the two;
- ``put_triples`` (``per_second``, cells): random cells into a uint8 volume.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.bench.runner import BenchContext
from tesseradb.datasets import IMAGE_ATTRS, sky_image

LEVEL = 3


def _nbytes(image: dict[str, Any]) -> int:
    return sum(int(v.nbytes) for v in image.values())


def _du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --- the systems ----------------------------------------------------------------------
class _Tessera:
    def __init__(self, db: Any, name: str, images: int, n: int, chunk: int) -> None:
        dims = [
            {"name": "t", "end": images, "chunk": 1},
            {"name": "y", "end": n, "chunk": chunk},
            {"name": "x", "end": n, "chunk": chunk},
        ]
        self.array = db.create_array(name, dims, dict.fromkeys(IMAGE_ATTRS, "int32"), level=LEVEL)

    def write(self, t: int, image: dict[str, Any]) -> None:
        self.array[t, :, :] = image

    def read(self, t: int, ys: slice, xs: slice) -> dict[str, Any]:
        from tesseradb.arrays import clear_chunk_cache

        # the peers keep no chunk bytes between reads: start each read without them too
        clear_chunk_cache()
        return self.array[t, ys, xs]


class _Zarr:
    def __init__(self, path: Path, images: int, n: int, chunk: int) -> None:
        import zarr
        from zarr.codecs import ZstdCodec

        self.group = zarr.open_group(str(path), mode="w", zarr_format=3)
        self.arrays = {
            name: self.group.create_array(
                name,
                shape=(images, n, n),
                chunks=(1, chunk, chunk),
                dtype="int32",
                fill_value=0,
                compressors=[ZstdCodec(level=LEVEL)],
            )
            for name in IMAGE_ATTRS
        }

    def write(self, t: int, image: dict[str, Any]) -> None:
        for name, values in image.items():
            self.arrays[name][t, :, :] = values

    def read(self, t: int, ys: slice, xs: slice) -> dict[str, Any]:
        return {name: a[t, ys, xs] for name, a in self.arrays.items()}


class _TileDB:
    def __init__(self, path: Path, images: int, n: int, chunk: int) -> None:
        import numpy as np
        import tiledb

        self.uri = str(path)
        dom = tiledb.Domain(
            tiledb.Dim(name="t", domain=(0, images - 1), tile=1, dtype=np.int32),
            tiledb.Dim(name="y", domain=(0, n - 1), tile=chunk, dtype=np.int32),
            tiledb.Dim(name="x", domain=(0, n - 1), tile=chunk, dtype=np.int32),
        )
        attrs = [
            tiledb.Attr(
                name=name, dtype=np.int32, filters=tiledb.FilterList([tiledb.ZstdFilter(LEVEL)])
            )
            for name in IMAGE_ATTRS
        ]
        tiledb.Array.create(self.uri, tiledb.ArraySchema(domain=dom, sparse=False, attrs=attrs))
        self.n = n

    def write(self, t: int, image: dict[str, Any]) -> None:
        import tiledb

        with tiledb.open(self.uri, "w") as array:
            array[t : t + 1, 0 : self.n, 0 : self.n] = {k: v[None] for k, v in image.items()}

    def read(self, t: int, ys: slice, xs: slice) -> dict[str, Any]:
        import tiledb

        with tiledb.open(self.uri) as array:
            data = array[t : t + 1, ys, xs]
        return {name: data[name][0] for name in IMAGE_ATTRS}


# --- the run ----------------------------------------------------------------------------
def run(ctx: BenchContext) -> None:
    import numpy as np

    import tesseradb

    assert ctx.scratch is not None
    n, chunk = int(ctx.params["image"]), int(ctx.params["chunk"])
    slab = int(ctx.params["slab"])
    runs = ctx.repeat + ctx.warmup
    image = sky_image(n, seed=1)
    size = _nbytes(image)
    db = tesseradb.connect(ctx.scratch / "bench.tdb")
    try:
        systems: dict[str, Any] = {}
        if ctx.wants("tessera"):
            systems["tessera"] = _Tessera(db, "images", runs, n, chunk)
        if ctx.wants("zarr"):
            systems["zarr"] = _Zarr(ctx.scratch / "images.zarr", runs, n, chunk)
        if ctx.wants("tiledb"):
            systems["tiledb"] = _TileDB(ctx.scratch / "images.tiledb", runs, n, chunk)

        # write: each run writes the next image slot, so no run overwrites another
        for system, store in systems.items():
            slot = iter(range(runs))
            ctx.measure(
                system,
                "write_dense",
                lambda s=store, it=slot: s.write(next(it), image),
                metric="per_second",
                unit="bytes",
                amount=size,
            )
        lo = max(0, n // 2 - slab // 2)
        ys = xs = slice(lo, min(n, lo + slab))
        answers_full: dict[str, Any] = {}
        answers_slab: dict[str, Any] = {}
        for system, store in systems.items():
            full = ctx.measure(
                system,
                "read_full",
                lambda s=store: s.read(0, slice(0, n), slice(0, n)),
                metric="per_second",
                unit="bytes",
                amount=size,
            )
            answers_full[system] = [
                int(np.asarray(full[a], dtype=np.int64).sum()) for a in IMAGE_ATTRS
            ]
            part = ctx.measure(system, "read_slab", lambda s=store: s.read(0, ys, xs))
            answers_slab[system] = [
                int(np.asarray(part[a], dtype=np.int64).sum()) for a in IMAGE_ATTRS
            ]
        expected = [int(image[a].astype(np.int64).sum()) for a in IMAGE_ATTRS]
        answers_full["numpy"] = expected
        ctx.check("read_full", answers_full)
        ctx.check("read_slab", answers_slab)

        _sql_cases(ctx, db)
        if ctx.wants("tessera"):
            _triples_case(ctx, db)
    finally:
        db.close()
        shutil.rmtree(ctx.scratch / "images.zarr", ignore_errors=True)
        shutil.rmtree(ctx.scratch / "images.tiledb", ignore_errors=True)


def _sql_cases(ctx: BenchContext, db: Any) -> None:
    import duckdb
    import numpy as np
    import pyarrow as pa

    images, n, chunk = (
        int(ctx.params["sql_images"]),
        int(ctx.params["sql_image"]),
        int(ctx.params["chunk"]),
    )
    ctx.progress(f"sql: {images} images of {n} x {n} into the array and a DuckDB table")
    raw = None
    if ctx.wants("tessera"):
        raw = _Tessera(db, "raw", images, n, min(chunk, n)).array
    con = None
    duck_path = ctx.scratch / "raw.duckdb"  # type: ignore[operator]
    if ctx.wants("duckdb"):
        con = duckdb.connect(str(duck_path))
        columns = ", ".join(f"{a} INTEGER" for a in IMAGE_ATTRS)
        con.execute(f"CREATE TABLE raw (t INTEGER, y INTEGER, x INTEGER, {columns})")
    yy = np.repeat(np.arange(n, dtype=np.int32), n)
    xx = np.tile(np.arange(n, dtype=np.int32), n)
    for t in range(images):
        image = sky_image(n, seed=100 + t)
        if raw is not None:
            raw[t, :, :] = image
        if con is not None:
            table = pa.table(
                {"t": np.full(n * n, t, dtype=np.int32), "y": yy, "x": xx}
                | {a: image[a].reshape(-1) for a in IMAGE_ATTRS}
            )
            con.register("image", table)
            con.execute("INSERT INTO raw SELECT * FROM image")
            con.unregister("image")
    if con is not None:
        con.execute("CHECKPOINT")
    lo, hi = n // 4, (3 * n) // 4 - 1
    sql = (
        f"SELECT avg(v3) FROM raw WHERE t BETWEEN 0 AND {images - 1} "
        f"AND y BETWEEN {lo} AND {hi} AND x BETWEEN {lo} AND {hi}"
    )
    answers: dict[str, Any] = {}
    if raw is not None:
        answers["tessera"] = ctx.measure("tessera", "sql_avg_box", lambda: db.sql(sql).fetchall())
        ctx.record("tessera", "bytes_on_disk", [float(raw.bytes_on_disk)], "bytes", "bytes")
    if con is not None:
        answers["duckdb"] = ctx.measure(
            "duckdb", "sql_avg_box", lambda: con.execute(sql).fetchall()
        )
        con.close()
        ctx.record("duckdb", "bytes_on_disk", [float(_du(duck_path))], "bytes", "bytes")
    ctx.check("sql_avg_box", answers)


def _triples_case(ctx: BenchContext, db: Any) -> None:
    import numpy as np

    side, cells, chunk = (
        int(ctx.params["volume"]),
        int(ctx.params["triples"]),
        int(ctx.params["volume_chunk"]),
    )
    rng = np.random.default_rng(5)
    runs = ctx.repeat + ctx.warmup
    volumes = iter(range(runs))
    batches = [
        (rng.integers(0, side, (cells, 3)), rng.integers(1, 256, cells).astype(np.uint8))
        for _ in range(min(runs, 2))
    ]

    def once() -> None:
        i = next(volumes)
        dims = [{"name": d, "end": side, "chunk": chunk} for d in ("z", "y", "x")]
        volume = db.create_array(f"volume{i}", dims, {"v": "uint8"}, level=LEVEL)
        coords, values = batches[i % len(batches)]
        volume.put_triples(coords, values)

    ctx.progress(f"put_triples: {cells:,} cells into a {side}^3 uint8 volume")
    ctx.measure("tessera", "put_triples", once, metric="per_second", unit="cells", amount=cells)


register(
    Benchmark(
        name="arrays",
        description="array store vs zarr-python, TileDB (dense images) and DuckDB (SQL over the same cells)",
        scales={
            "tiny": {
                "image": 300,
                "chunk": 100,
                "slab": 100,
                "sql_images": 20,
                "sql_image": 120,
                "volume": 60,
                "volume_chunk": 20,
                "triples": 100_000,
            },
            "small": {
                "image": 3750,
                "chunk": 1000,
                "slab": 1000,
                "sql_images": 20,
                "sql_image": 1000,
                "volume": 500,
                "volume_chunk": 100,
                "triples": 10_000_000,
            },
            "large": {
                "image": 3750,
                "chunk": 1000,
                "slab": 1000,
                "sql_images": 20,
                "sql_image": 2000,
                "volume": 1000,
                "volume_chunk": 100,
                "triples": 10_000_000,
            },
        },
        systems=("tessera", "zarr", "tiledb", "duckdb"),
        run=run,
        default_scale="tiny",
        notes=(
            "same chunking (1 x chunk x chunk) and codec (zstd level 3) for every array system; "
            "TesseraDB also stores a CRC-32C per chunk",
            "read_full/read_slab: TesseraDB's cache of stored chunk bytes is emptied before each "
            "read; sql_avg_box runs with it warm, as DuckDB's buffer pool is",
            "sql_avg_box: 20 images of sql_image^2 cells, box = the middle half in y and x",
        ),
    )
)
