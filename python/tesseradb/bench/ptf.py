"""Benchmark ``ptf``: SDS/Q's Palomar Transient Factory workload, in situ versus loading.

A deterministic generator writes PTF-shaped HDF5 files with the real schema
(below, from the sample's listing): one ``subtraction`` row per image
subtraction, with ``ujd`` times over four years of nightly observing;
several hundred ``candidate`` rows per subtraction; about one
``rb_classifier`` row per candidate. Ids grow with time, as the survey's do.

The workload is the paper's three-way join, returning 18 columns, with the
``ujd`` window at one hour (Q1), one night (Q2) and one week (Q3).
TesseraDB attaches the file and queries it in place (first without, then
with bitmap indexes); PostgreSQL loads it with COPY and builds B-tree
indexes; DuckDB loads the same columns into native tables.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.bench.runner import BenchContext
from tesseradb.datasets import PTF_SCHEMA, ptf_file
from tesseradb.sql.predicate import Predicate

QUERY = """
SELECT s.id, s.ujd, s.ptffield, s.ccdid, s.filter, s.ra_c, s.dec_c, s.seeing_new,
       c.id, c.ra, c.dec, c.mag, c.mag_err, c.fwhm, c.a_image, c.b_image,
       r.realbogus, r.rb_model_id
FROM ptf.subtraction AS s
JOIN ptf.candidate AS c ON c.sub_id = s.id
JOIN ptf.rb_classifier AS r ON r.candidate_id = c.id
WHERE s.ujd BETWEEN ? AND ?
  AND c.mag < 20.5 AND c.fwhm BETWEEN 1.0 AND 6.0
  AND r.realbogus > 0.125
ORDER BY c.id
""".strip()

SCAN_COLUMNS = ["mag", "fwhm", "flux", "ra", "dec", "sub_id"]
SCAN_QUERY = (
    "SELECT count(*), avg(mag), avg(fwhm), max(flux), min(ra), max(dec), sum(sub_id) "
    "FROM ptf.candidate WHERE mag > 0"
)

# Thresholds are exact in single precision: PostgreSQL widens a float4 column to
# double to compare it with 0.1, DuckDB narrows 0.1 to float, and a row holding
# 0.1f exactly would then be in one answer and not the other.

INDEXES = {
    "subtraction": ["ujd", "id"],
    "candidate": ["sub_id", "mag", "fwhm"],
    "rb_classifier": ["candidate_id", "realbogus"],
}


# --- systems -----------------------------------------------------------------------------


def _tessera_queries(
    ctx: BenchContext, h5: Path, windows: dict[str, Any], answers: dict[str, dict[str, Any]]
) -> None:
    import tesseradb

    with tesseradb.connect(ctx.scratch / "tessera.tdb") as db:  # type: ignore[operator]
        start = time.perf_counter()
        att = db.attach(h5, name="ptf")
        first = db.sql(QUERY, windows["q1"]).fetchall()
        ctx.record("tessera", "first_answer", [time.perf_counter() - start])
        answers["q1"]["tessera"] = first

        start = time.perf_counter()
        for table, columns in INDEXES.items():
            db.create_index(f"ptf.{table}", columns)
        ctx.record("tessera", "index_build", [time.perf_counter() - start])

        file_size = att.file_bytes
        for q in ("q1", "q2", "q3"):
            answers[q]["tessera"] = ctx.measure(
                "tessera", f"{q}_warm", lambda q=q: db.sql(QUERY, windows[q]).fetchall()
            )
            before = att.bytes_read
            db.sql(QUERY, windows[q]).fetchall()
            ctx.record(
                "tessera",
                f"bytes_read_{q}",
                [float(att.bytes_read - before)],
                metric="bytes",
                unit="bytes",
            )
        ctx.record("tessera", "file_size", [float(file_size)], metric="bytes", unit="bytes")

        candidate = att.table("candidate")

        def operator_scan() -> int:
            # the scan operator alone (SDS/Q's Algorithm 1), without DuckDB on top
            with att.hold():
                return sum(
                    b.num_rows
                    for b in candidate.scan(SCAN_COLUMNS, Predicate.between("mag", 0, None))
                )

        for threads in (1, 2):
            att.threads = threads
            scan = ctx.measure("tessera", f"scan_{threads}t", lambda: db.sql(SCAN_QUERY).fetchall())
            ctx.measure("tessera", f"scan_operator_{threads}t", operator_scan)
        answers["scan"]["tessera"] = scan


def _read_tables(h5: Path | Any) -> dict[str, Any]:
    """The file's tables as Arrow tables (what a DuckDB user would load)."""
    import h5py
    import pyarrow as pa

    from tesseradb.attached import to_arrow

    out = {}
    with h5py.File(h5, "r") as f:
        for table, columns in PTF_SCHEMA.items():
            arrays = {
                c: to_arrow(f[table][c][:], "string" if dt.startswith("|S") else _arrow_name(dt))
                for c, dt in columns
            }
            out[table] = pa.table(arrays)
    return out


def _arrow_name(dtype: str) -> str:
    import numpy as np

    dt = np.dtype(dtype)
    return {"f": "float", "i": "int", "u": "uint"}[dt.kind] + str(dt.itemsize * 8)


def _duckdb_queries(
    ctx: BenchContext, h5: Path, windows: dict[str, Any], answers: dict[str, dict[str, Any]]
) -> None:
    import duckdb

    con = duckdb.connect(str(ctx.scratch / "duckdb.db"))  # type: ignore[operator]
    try:
        start = time.perf_counter()
        tables = _read_tables(h5)
        con.execute("CREATE SCHEMA ptf")
        for name, table in tables.items():
            con.register("staging", table)
            con.execute(f"CREATE TABLE ptf.{name} AS SELECT * FROM staging")
            con.unregister("staging")
        del tables
        ctx.record("duckdb", "load", [time.perf_counter() - start])
        load = time.perf_counter() - start
        start = time.perf_counter()
        answers["q1"]["duckdb"] = con.execute(QUERY, windows["q1"]).fetchall()
        ctx.record("duckdb", "first_answer", [load + time.perf_counter() - start])
        for q in ("q1", "q2", "q3"):
            answers[q]["duckdb"] = ctx.measure(
                "duckdb", f"{q}_warm", lambda q=q: con.execute(QUERY, windows[q]).fetchall()
            )
        answers["scan"]["duckdb"] = con.execute(SCAN_QUERY).fetchall()
    finally:
        con.close()


_PG_TYPES = {
    "i1": "smallint",
    "i2": "smallint",
    "i4": "integer",
    "i8": "bigint",
    "f4": "real",
    "f8": "double precision",
}


def _pg_type(dtype: str) -> str:
    return "text" if dtype.startswith("|S") else _PG_TYPES[dtype.lstrip("<>|=")]


def _postgres_queries(
    ctx: BenchContext, h5: Path, windows: dict[str, Any], answers: dict[str, dict[str, Any]]
) -> None:
    import psycopg
    import pyarrow.csv as pacsv

    from tesseradb.bench.servers import postgres_server

    pg_query = QUERY.replace("?", "%s")
    with (
        postgres_server() as server,
        psycopg.connect(
            host=server.host,
            port=server.port,
            user=server.user,
            dbname=server.database,
            autocommit=True,
        ) as con,
    ):
        start = time.perf_counter()
        con.execute("CREATE SCHEMA ptf")
        for table, columns in PTF_SCHEMA.items():
            cols = ", ".join(f'"{c}" {_pg_type(dt)}' for c, dt in columns)
            con.execute(f"CREATE TABLE ptf.{table} ({cols})")
        for table, arrow in _read_tables(h5).items():
            with con.cursor().copy(
                f"COPY ptf.{table} FROM STDIN (FORMAT csv, HEADER true)"
            ) as copy:
                for n, batch in enumerate(arrow.to_batches(max_chunksize=200_000)):
                    buffer = io.BytesIO()
                    # COPY skips one header line: only the first batch has it
                    pacsv.write_csv(batch, buffer, pacsv.WriteOptions(include_header=n == 0))
                    copy.write(buffer.getvalue())
        con.execute("ANALYZE")
        load = time.perf_counter() - start
        ctx.record("postgresql", "load", [load])
        start = time.perf_counter()
        con.execute("CREATE INDEX ON ptf.subtraction (ujd)")
        con.execute("CREATE INDEX ON ptf.subtraction (id)")
        con.execute("CREATE INDEX ON ptf.candidate (sub_id)")
        con.execute("CREATE INDEX ON ptf.candidate (id)")
        con.execute("CREATE INDEX ON ptf.rb_classifier (candidate_id)")
        con.execute("ANALYZE")
        index = time.perf_counter() - start
        ctx.record("postgresql", "index_build", [load + index])
        for q in ("q1", "q2", "q3"):
            start = time.perf_counter()
            cold = con.execute(pg_query, windows[q]).fetchall()
            if q == "q1":
                ctx.record(
                    "postgresql", "first_answer", [load + index + time.perf_counter() - start]
                )
            ctx.record("postgresql", f"{q}_cold", [time.perf_counter() - start])
            answers[q]["postgresql"] = cold
            ctx.measure(
                "postgresql", f"{q}_warm", lambda q=q: con.execute(pg_query, windows[q]).fetchall()
            )
        answers["scan"]["postgresql"] = con.execute(SCAN_QUERY).fetchall()


def run(ctx: BenchContext) -> None:
    candidates = int(ctx.params["candidates"])
    h5 = ctx.scratch / "ptf.h5"  # type: ignore[operator]
    ctx.progress(f"generating a PTF file with {candidates:,} candidates")
    windows = ptf_file(h5, candidates)
    answers: dict[str, dict[str, Any]] = {k: {} for k in ("q1", "q2", "q3", "scan")}
    if ctx.wants("tessera"):
        ctx.progress("tessera")
        _tessera_queries(ctx, h5, windows, answers)
    if ctx.wants("duckdb"):
        ctx.progress("duckdb: load and queries")
        _duckdb_queries(ctx, h5, windows, answers)
    if ctx.wants("postgresql"):
        ctx.progress("postgresql: load, index and queries")
        _postgres_queries(ctx, h5, windows, answers)
    for case, by_system in answers.items():
        if len(by_system) > 1:
            ctx.check(case, by_system, digits=6)  # the file's floats are single precision


register(
    Benchmark(
        name="ptf",
        description="SDS/Q's PTF three-way join: HDF5 in place with bitmap indexes vs loading into PostgreSQL and DuckDB",
        scales={
            "tiny": {"candidates": 40_000},
            "small": {"candidates": 1_000_000},
            "large": {"candidates": 10_000_000},
        },
        systems=("tessera", "postgresql", "duckdb"),
        run=run,
        default_scale="tiny",
    )
)
