"""``tessera bench d4m``: D4M associative arrays (papers/scidb-d4m-import.txt).

- ``assoc_construct``: an Assoc built from string triples (keys interned,
  collisions summed), against python-graphblas (``Matrix.from_coo`` after
  interning the keys with ``np.unique``, as a graphblas user does) and
  scipy.sparse (the same interning, then ``csr_array``). D4M.py is not on
  PyPI (the ``d4m`` package there is unrelated), so its 0.1-0.15M triples/s
  on this machine is an anchor, not a peer.
- ``assoc_matmul``: ``A @ B`` of two Assocs against scipy on the same
  matrices with the same key work (matching A's column keys with B's row
  keys, dropping empty rows and columns).
- ``table_put``: string triples into a persistent table (one put per
  batch, each fsynced), and ``table_row_lookup`` / ``table_col_lookup``: one
  row or one column of that table by key, median over random keys.
- the paper's image-volume experiment (triple ingest with one and two
  writers, dense blocks, sub-volume extraction): :mod:`tesseradb.bench.d4m_volume`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb.bench.d4m_volume import run_volume
from tesseradb.bench.registry import Benchmark, register

if TYPE_CHECKING:
    import numpy as np

    from tesseradb.bench.runner import BenchContext


def string_triples(n: int, rows: int, cols: int, seed: int) -> tuple[list[str], list[str], Any]:
    """``n`` triples: row keys among ``rows``, column keys among ``cols``, values 1..9."""
    import numpy as np

    rng = np.random.default_rng(seed)
    r = rng.integers(0, rows, n)
    c = rng.integers(0, cols, n)
    return (
        [f"r{i:08d}" for i in r.tolist()],
        [f"c{i:07d}" for i in c.tolist()],
        rng.integers(1, 10, n).astype(np.float64),
    )


def _interned(keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    unique, ids = np.unique(np.asarray(keys), return_inverse=True)
    return unique, ids


def _summary(rows: Any, cols: Any, total: float, nnz: int) -> tuple[int, int, int, float]:
    return (len(rows), len(cols), int(nnz), round(float(total), 6))


def run(ctx: BenchContext) -> None:

    import numpy as np
    import scipy.sparse as sp

    import tesseradb
    from tesseradb.assoc import Assoc

    p = ctx.params
    n = int(p["triples"])
    ctx.progress(f"generating {n:,} string triples")
    rows, cols, vals = string_triples(n, int(p["row_keys"]), int(p["col_keys"]), seed=1)

    # --- construction --------------------------------------------------------------
    answers: dict[str, Any] = {}
    if ctx.wants("tessera"):
        built = ctx.measure(
            "tessera",
            "assoc_construct",
            lambda: Assoc(rows, cols, vals, sum),
            metric="per_second",
            unit="triples/s",
            amount=n,
        )
        answers["tessera"] = _summary(built.row, built.col, built.sum(), built.nnz)
    if ctx.wants("graphblas"):
        import graphblas as gb

        def by_graphblas() -> Any:
            row_keys, r = _interned(rows)
            col_keys, c = _interned(cols)
            m = gb.Matrix.from_coo(
                r, c, vals, nrows=len(row_keys), ncols=len(col_keys), dup_op=gb.binary.plus
            )
            return row_keys, col_keys, m

        row_keys, col_keys, m = ctx.measure(
            "graphblas",
            "assoc_construct",
            by_graphblas,
            metric="per_second",
            unit="triples/s",
            amount=n,
        )
        answers["graphblas"] = _summary(row_keys, col_keys, m.reduce_scalar().value, m.nvals)
    if ctx.wants("scipy"):

        def by_scipy() -> Any:
            row_keys, r = _interned(rows)
            col_keys, c = _interned(cols)
            m = sp.csr_array((vals, (r, c)), shape=(len(row_keys), len(col_keys)))
            m.sum_duplicates()
            return row_keys, col_keys, m

        row_keys, col_keys, m = ctx.measure(
            "scipy",
            "assoc_construct",
            by_scipy,
            metric="per_second",
            unit="triples/s",
            amount=n,
        )
        answers["scipy"] = _summary(row_keys, col_keys, m.sum(), m.nnz)
    ctx.check("assoc_construct", answers)

    # --- matrix product -------------------------------------------------------------
    m_n = int(p["matmul_triples"])
    ctx.progress(f"building two {m_n:,}-triple arrays for A @ B")
    ar, ac, av = string_triples(m_n, int(p["row_keys"]), int(p["col_keys"]), seed=2)
    # B's rows are keyed like A's columns, so that the product joins on them
    br, bc, bv = string_triples(m_n, int(p["col_keys"]), int(p["row_keys"]), seed=3)
    br = ["c" + k[2:] for k in br]
    products: dict[str, Any] = {}
    if ctx.wants("tessera"):
        a, b = Assoc(ar, ac, av, sum), Assoc(br, bc, bv, sum)
        product = ctx.measure("tessera", "assoc_matmul", lambda: a @ b)
        products["tessera"] = _summary(product.row, product.col, product.sum(), product.nnz)
    if ctx.wants("scipy"):
        a_rows, a_r = _interned(ar)
        a_cols, a_c = _interned(ac)
        b_rows, b_r = _interned(br)
        b_cols, b_c = _interned(bc)
        ma = sp.csr_array((av, (a_r, a_c)), shape=(len(a_rows), len(a_cols)))
        mb = sp.csr_array((bv, (b_r, b_c)), shape=(len(b_rows), len(b_cols)))
        ma.sum_duplicates()
        mb.sum_duplicates()

        def by_scipy_product() -> Any:
            # the key work: A's column keys matched with B's row keys
            _, ja, ib = np.intersect1d(a_cols, b_rows, assume_unique=True, return_indices=True)
            out = sp.csr_array(ma[:, ja] @ mb[ib, :])
            out.eliminate_zeros()
            keep_r = np.diff(out.indptr) > 0
            keep_c = np.bincount(out.indices, minlength=out.shape[1]) > 0
            return a_rows[keep_r], b_cols[keep_c], out[keep_r][:, keep_c]

        kr, kc, out = ctx.measure("scipy", "assoc_matmul", by_scipy_product)
        products["scipy"] = _summary(kr, kc, out.sum(), out.nnz)
    ctx.check("assoc_matmul", products)

    assert ctx.scratch is not None
    db = tesseradb.connect(ctx.scratch / "d4m.tdb")
    try:
        if ctx.wants("tessera"):
            _tables(ctx, db)
        run_volume(ctx, db)
    finally:
        db.close()


def _tables(ctx: BenchContext, db: Any) -> None:
    """Persistent tables: puts, then row and column lookups."""
    import time

    import numpy as np

    p = ctx.params
    batches = int(p["table_batches"])
    batch = int(p["table_batch"])
    table = db.create_assoc_table("Tedge")
    times = []
    for k in range(batches):
        ctx.progress(f"table put {k + 1} of {batches}")
        br_, bc_, bv_ = string_triples(batch, int(p["table_row_keys"]), int(p["col_keys"]), 10 + k)
        start = time.perf_counter()
        table.put_triples(br_, bc_, bv_)
        times.append(batch / (time.perf_counter() - start))
    ctx.record("tessera", "table_put", times, metric="per_second", unit="triples/s")
    rng = np.random.default_rng(7)
    row_probe = iter([f"r{i:08d}," for i in rng.integers(0, int(p["table_row_keys"]), 100_000)])
    col_probe = iter([f"c{i:07d}," for i in rng.integers(0, int(p["col_keys"]), 100_000)])
    lookups = int(p["lookups"])
    ctx.measure(
        "tessera",
        "table_row_lookup",
        lambda: table[next(row_probe), :],
        repeat=lookups,
        warmup=5,
    )
    ctx.measure(
        "tessera",
        "table_col_lookup",
        lambda: table[:, next(col_probe)],
        repeat=lookups,
        warmup=5,
    )
    # the lookups answer as a full read filtered would (on one key of each kind)
    whole = table[:, :] if batches * batch <= 2_000_000 else None
    if whole is not None:
        key = whole.row[len(whole.row) // 2]
        ctx.check(
            "table_row_lookup",
            {"lookup": table[f"{key},", :].triples(), "full": whole[f"{key},", :].triples()},
        )


register(
    Benchmark(
        name="d4m",
        description=(
            "D4M: Assoc construction, A @ B, persistent tables; the paper's image volume "
            "(triple ingest with 1 and 2 writers, dense blocks, sub-volumes)"
        ),
        scales={
            "tiny": {
                "triples": 20_000,
                "row_keys": 2_000,
                "col_keys": 500,
                "matmul_triples": 10_000,
                "table_batches": 2,
                "table_batch": 10_000,
                "table_row_keys": 5_000,
                "lookups": 20,
                "volume_slices": 12,
                "volume_size": 128,
                "volume_chunk": 32,
                "dense_depth": 4,
                "boxes": 6,
                "tiledb_slices": 4,
            },
            "small": {
                "triples": 1_000_000,
                "row_keys": 100_000,
                "col_keys": 20_000,
                "matmul_triples": 1_000_000,
                "table_batches": 4,
                "table_batch": 1_000_000,
                "table_row_keys": 400_000,
                "lookups": 200,
                "volume_slices": 128,
                "volume_size": 2048,
                "volume_chunk": 1024,
                "dense_depth": 8,
                "boxes": 20,
                "tiledb_slices": 16,
            },
            "medium": {
                "triples": 10_000_000,
                "row_keys": 1_000_000,
                "col_keys": 200_000,
                "matmul_triples": 1_000_000,
                "table_batches": 10,
                "table_batch": 5_000_000,
                "table_row_keys": 5_000_000,
                "lookups": 500,
                "volume_slices": 512,
                "volume_size": 2048,
                "volume_chunk": 1024,
                "dense_depth": 8,
                "boxes": 20,
                "tiledb_slices": 16,
            },
        },
        systems=("tessera", "graphblas", "scipy", "tiledb", "npy", "tiff"),
        run=run,
        default_scale="small",
        notes=(
            "D4M.py is not on PyPI; its Assoc built 0.1-0.15M string triples/s on this machine",
            "TileDB's sparse triple ingest runs on the first tiledb_slices slices only",
        ),
    )
)
