"""The volume cases of ``tessera bench d4m``: the SciDB D4M paper's image-volume experiment.

A uint8 volume of random image data, one file per slice (``.npy``, and TIFF
for the "traditional approach"), is ingested into an array:

- ``triples_p1``: one writer puts each slice's triples (slice number, row
  ids, column ids, values: the putTriple form), read from its file, one
  commit per slice; TileDB writes the same triples into a sparse array by
  coordinates (on the first ``tiledb_slices`` slices only: its coordinates
  take 13 bytes a cell on disk).
- ``triples_p2``: two writer processes, each building its own array, then
  one union copies their chunks (the paper's way); ``triples_p2_fork``: two
  writers forking the array, merged with no copy. Both one commit.
- ``dense_blocks``: the slices written as dense blocks of ``dense_depth``
  slices (``arr[s:s + depth] = block``) into an array whose chunks are as
  deep as the blocks and half as wide as a slice's chunk; TileDB writes the
  same blocks into a dense array of slice-deep tiles.
- ``subvolume``: random boxes spanning 10 to 100 slices read from the
  triple-ingested array (slice-deep chunks, the paper's schema), against
  reading the same box from the per-slice files (each file read whole, then
  cut, as the traditional approach does) and from the dense TileDB array;
  ``subvolume_blocks``: the same boxes read from the dense-block array
  (block-deep chunks). ``subvolume_50`` and ``subvolume_blocks_50`` are the
  same over the boxes spanning 50 or more slices (the paper's claim).
  Medians over the boxes, in seconds.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from tesseradb.bench.runner import BenchContext

LEVEL = 1  # random image data does not compress: the fastest zstd level


def _volume_array(db: Any, name: str, slices: int, size: int, chunk: int, depth: int = 1) -> Any:
    db.drop(name, missing_ok=True)
    return db.create_array(
        name,
        dims=[
            {"name": "z", "end": slices, "chunk": depth},
            {"name": "y", "end": size, "chunk": chunk},
            {"name": "x", "end": size, "chunk": chunk},
        ],
        attrs={"v": "uint8"},
        level=LEVEL,
    )


def _slice_files(ctx: BenchContext, slices: int, size: int) -> tuple[list[Path], list[Path]]:
    """The volume as one ``.npy`` and (with tifffile) one TIFF file per slice."""
    import numpy as np

    assert ctx.scratch is not None
    folder = ctx.scratch / "slices"
    folder.mkdir(exist_ok=True)
    tiff = None
    if ctx.wants("tiff"):
        import tifffile as tiff
    rng = np.random.default_rng(11)
    npys, tiffs = [], []
    for s in range(slices):
        if s % 16 == 0:
            ctx.progress(f"writing slice files {s + 1} of {slices}")
        image = rng.integers(0, 256, (size, size), dtype=np.uint8)
        npys.append(folder / f"slice{s:05d}.npy")
        np.save(npys[-1], image)
        if tiff is not None:
            tiffs.append(folder / f"slice{s:05d}.tif")
            tiff.imwrite(tiffs[-1], image)
    return npys, tiffs


def _boxes(p: dict[str, Any], slices: int, size: int) -> list[tuple[slice, slice, slice]]:
    import numpy as np

    rng = np.random.default_rng(5)
    out = []
    lo, hi = min(10, slices), min(100, slices)
    for _ in range(int(p["boxes"])):
        depth = int(rng.integers(lo, hi + 1))
        z0 = int(rng.integers(0, slices - depth + 1))
        side = int(rng.integers(size // 8, size // 2 + 1))
        y0, x0 = (int(v) for v in rng.integers(0, size - side + 1, 2))
        out.append((slice(z0, z0 + depth), slice(y0, y0 + side), slice(x0, x0 + side)))
    return out


def run_volume(ctx: BenchContext, db: Any) -> None:

    from tesseradb.assoc import ImageSlice, parallel_ingest

    p = ctx.params
    slices, size, chunk = int(p["volume_slices"]), int(p["volume_size"]), int(p["volume_chunk"])
    cells = slices * size * size
    npys, tiffs = _slice_files(ctx, slices, size)
    sources = [ImageSlice(path, s) for s, path in enumerate(npys)]
    depth = int(p["dense_depth"])
    total = 0
    if ctx.wants("tessera"):
        # one writer in this process, a commit per slice
        runs = []
        for r in range(ctx.repeat):
            array = _volume_array(db, "volume", slices, size, chunk)
            ctx.progress(f"triples_p1: tessera (run {r + 1})")
            start = time.perf_counter()
            for source in sources:
                array.put_triples(*source())
            runs.append(cells / (time.perf_counter() - start))
        ctx.record("tessera", "triples_p1", runs, metric="per_second", unit="entries/s")
        total = int(db.sql("SELECT sum(v) FROM volume").fetchone()[0])
        for case, merge in (("triples_p2", "union"), ("triples_p2_fork", "fork")):
            runs = []
            for r in range(ctx.repeat):
                array = _volume_array(db, f"volume_{merge}", slices, size, chunk)
                ctx.progress(f"{case}: tessera (run {r + 1})")
                start = time.perf_counter()
                parallel_ingest(db, array, sources, workers=2, merge=merge)
                runs.append(cells / (time.perf_counter() - start))
            ctx.record("tessera", case, runs, metric="per_second", unit="entries/s")
            got = int(db.sql(f"SELECT sum(v) FROM volume_{merge}").fetchone()[0])
            ctx.check(case, {"triples_p1": total, case: got})
        runs = []
        for r in range(ctx.repeat):
            # chunks as deep as the blocks and half a slice chunk's side:
            # what a user who reads sub-volumes would choose
            array = _volume_array(db, "volume_dense", slices, size, chunk // 2, depth)
            ctx.progress(f"dense_blocks: tessera (run {r + 1})")
            start = time.perf_counter()
            for s in range(0, slices, depth):
                array[s : s + depth, :, :] = _block(npys[s : s + depth])
            runs.append(cells / (time.perf_counter() - start))
        ctx.record("tessera", "dense_blocks", runs, metric="per_second", unit="entries/s")
        got = int(db.sql("SELECT sum(v) FROM volume_dense").fetchone()[0])
        ctx.check("dense_blocks", {"triples_p1": total, "dense_blocks": got})
    dense_uri = None
    if ctx.wants("tiledb"):
        dense_uri = _tiledb_ingest(ctx, npys, slices, size, chunk)
    _subvolumes(ctx, db, npys, tiffs, dense_uri, slices, size)


def _tiledb_ingest(ctx: BenchContext, npys: list[Path], slices: int, size: int, chunk: int) -> str:
    """TileDB: the first slices' triples into a sparse array, every slice into a dense one."""
    import shutil

    import numpy as np
    import tiledb

    from tesseradb.assoc import ImageSlice

    assert ctx.scratch is not None
    filters = tiledb.FilterList([tiledb.ZstdFilter(LEVEL)])

    def domain() -> Any:
        return tiledb.Domain(
            tiledb.Dim(name="z", domain=(0, slices - 1), tile=1, dtype=np.int32),
            tiledb.Dim(name="y", domain=(0, size - 1), tile=chunk, dtype=np.int32),
            tiledb.Dim(name="x", domain=(0, size - 1), tile=chunk, dtype=np.int32),
        )

    attrs = [tiledb.Attr(name="v", dtype=np.uint8, filters=filters)]
    depth = int(ctx.params["dense_depth"])
    sparse_slices = min(slices, int(ctx.params["tiledb_slices"]))
    runs = []
    for r in range(ctx.repeat):
        uri = str(ctx.scratch / "volume_sparse.tiledb")
        shutil.rmtree(uri, ignore_errors=True)
        schema = tiledb.ArraySchema(domain=domain(), sparse=True, attrs=attrs, capacity=1 << 20)
        tiledb.Array.create(uri, schema)
        ctx.progress(f"triples_p1: tiledb (run {r + 1})")
        start = time.perf_counter()
        with tiledb.open(uri, "w") as array:
            for s in range(sparse_slices):
                (z, rows, cols), values = ImageSlice(npys[s], s)()
                array[np.full(len(rows), z, dtype=np.int32), rows, cols] = values
        runs.append(sparse_slices * size * size / (time.perf_counter() - start))
        shutil.rmtree(uri, ignore_errors=True)
    ctx.record("tiledb", "triples_p1", runs, metric="per_second", unit="entries/s")
    dense = str(ctx.scratch / "volume_dense.tiledb")
    runs = []
    for r in range(ctx.repeat):
        shutil.rmtree(dense, ignore_errors=True)
        tiledb.Array.create(dense, tiledb.ArraySchema(domain=domain(), sparse=False, attrs=attrs))
        ctx.progress(f"dense_blocks: tiledb (run {r + 1})")
        start = time.perf_counter()
        with tiledb.open(dense, "w") as array:
            for s in range(0, slices, depth):
                array[s : s + depth, :, :] = _block(npys[s : s + depth])
        runs.append(slices * size * size / (time.perf_counter() - start))
    ctx.record("tiledb", "dense_blocks", runs, metric="per_second", unit="entries/s")
    return dense


def _block(paths: list[Path]) -> np.ndarray:
    """The slices in ``paths`` read and stacked: one dense block."""
    import numpy as np

    return np.stack([np.load(path) for path in paths])


def _subvolumes(
    ctx: BenchContext,
    db: Any,
    npys: list[Path],
    tiffs: list[Path],
    dense_uri: str | None,
    slices: int,
    size: int,
) -> None:
    import numpy as np

    boxes = _boxes(ctx.params, slices, size)
    deep = [k for k, (z, _, _) in enumerate(boxes) if z.stop - z.start >= 50]

    def from_files(paths: list[Path], read: Any, box: tuple[slice, slice, slice]) -> np.ndarray:
        z, y, x = box
        return np.stack([read(paths[s])[y, x] for s in range(z.start, z.stop)])

    # (system, case) -> how that system reads a box
    readers: dict[tuple[str, str], Any] = {}
    if ctx.wants("tessera"):
        array = db.array("volume")
        readers["tessera", "subvolume"] = lambda box: array[box]["v"]
        blocks = db.array("volume_dense")
        readers["tessera", "subvolume_blocks"] = lambda box: blocks[box]["v"]
    if ctx.wants("npy"):
        readers["npy", "subvolume"] = lambda box: from_files(npys, np.load, box)
    if ctx.wants("tiff") and tiffs:
        import tifffile

        readers["tiff", "subvolume"] = lambda box: from_files(tiffs, tifffile.imread, box)
    if dense_uri is not None:
        import tiledb

        dense = tiledb.open(dense_uri)
        readers["tiledb", "subvolume"] = lambda box: dense[box]["v"]
    answers: dict[str, Any] = {}
    for (system, case), read in readers.items():
        ctx.progress(f"{case}: {system}")
        read(boxes[0])  # warm: open files and arrays once
        times, sums = [], []
        for box in boxes:
            start = time.perf_counter()
            got = read(box)
            times.append(time.perf_counter() - start)
            sums.append(int(got.sum(dtype=np.int64)))
        ctx.record(system, case, times)
        if deep:
            ctx.record(system, f"{case}_50", [times[k] for k in deep])
        answers[f"{system} {case}"] = sums
    if dense_uri is not None:
        dense.close()
    if answers:
        ctx.check("subvolume", answers)
