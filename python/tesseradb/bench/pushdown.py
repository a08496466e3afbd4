"""Benchmark ``pushdown``: selective range queries through the SQL front end.

``tessera`` is :meth:`Database.sql` over an :class:`ArrowRelation` (the
predicate is derived from the statement, batches are pruned by their
min/max and filtered before DuckDB sees them); ``duckdb`` is DuckDB reading
the very same in-memory Arrow table directly, with its own filter pushdown
into Arrow scans. The table has a sequential ``id`` (data clustered by it,
as time-ordered data is) and uniformly random ``x``, ``y``, ``k``.
"""

from __future__ import annotations

from typing import Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.bench.runner import BenchContext

# Each query selects about 0.1% of the rows.
QUERIES = {
    "selective_range_sorted": "SELECT count(*), avg(x), min(k) FROM t WHERE id BETWEEN ? AND ?",
    "selective_range_random": "SELECT count(*), avg(y), max(k) FROM t WHERE x BETWEEN ? AND ?",
    "selective_range_rows": "SELECT id, k, x FROM t WHERE id BETWEEN ? AND ? AND y < ? ORDER BY id",
}


def make_table(rows: int, seed: int = 42) -> Any:
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "x": rng.uniform(0, 1000, rows),
            "y": rng.uniform(0, 1000, rows),
            "k": rng.integers(0, 1_000_000, rows, dtype=np.int64),
        }
    )


def query_params(rows: int) -> dict[str, list[Any]]:
    width = max(rows // 1000, 1)
    start = rows // 3
    return {
        "selective_range_sorted": [start, start + width - 1],
        "selective_range_random": [500.0, 501.0],
        "selective_range_rows": [start, start + width - 1, 500.0],
    }


def run(ctx: BenchContext) -> None:
    import duckdb

    import tesseradb
    from tesseradb.sql import ArrowRelation

    rows = int(ctx.params["rows"])
    ctx.progress(f"generating {rows:,} rows")
    table = make_table(rows)
    params = query_params(rows)
    answers: dict[str, dict[str, Any]] = {case: {} for case in QUERIES}
    runners: dict[str, Any] = {}

    db = tesseradb.connect(ctx.scratch / "bench.tdb") if ctx.wants("tessera") else None  # type: ignore[operator]
    con = duckdb.connect() if ctx.wants("duckdb") else None
    try:
        if db is not None:
            db.register("t", ArrowRelation("t", table))
            runners["tessera"] = lambda q, p: db.sql(q, p).fetchall()
        if con is not None:
            con.register("t", table)
            runners["duckdb"] = lambda q, p: con.execute(q, p).fetchall()

        for system, runner in runners.items():
            for case, sql in QUERIES.items():
                answers[case][system] = ctx.measure(
                    system, case, lambda r=runner, s=sql, c=case: r(s, params[c])
                )

            def all_queries(r: Any = runner) -> None:
                for case, sql in QUERIES.items():
                    r(sql, params[case])

            ctx.measure(system, "selective_range", all_queries)
        for case, by_system in answers.items():
            ctx.check(case, by_system)
    finally:
        if db is not None:
            db.close()
        if con is not None:
            con.close()


register(
    Benchmark(
        name="pushdown",
        description="selective range queries: ArrowRelation with pushdown vs DuckDB over the same Arrow table",
        scales={
            "tiny": {"rows": 100_000},
            "small": {"rows": 10_000_000},
            "large": {"rows": 100_000_000},
        },
        systems=("tessera", "duckdb"),
        run=run,
        default_scale="tiny",
    )
)
