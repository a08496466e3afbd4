"""Benchmark ``mdds``: MDDS's high-velocity record ingest and range queries, against SQLite,
DuckDB and PostgreSQL in the same run.

Two deterministic generators (seeded, any size) make records shaped like the
paper's datasets: NYC taxi trips (Listing 1) and GHCN-Daily observations
(Listing 2). TesseraDB ingests them into record streams; the peers load them
with their best bulk paths (SQLite: the paper's pragmas, one transaction,
``executemany``, the appendix's indexes; DuckDB: an Arrow insert into a
native table; PostgreSQL: COPY and the appendix's indexes). Then the paper's
16 taxi and 10 GHCN queries (appendix A2 and A4) run verbatim on every
system, checked to give the same answers.
"""

from __future__ import annotations

import io
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.bench.runner import BenchContext
from tesseradb.datasets import GHCN_DESCRIPTOR, TAXI_DESCRIPTOR, ghcn, taxi

__all__ = ["GHCN_QUERIES", "TAXI_QUERIES", "off_query_bounds"]


_TAXI_BOXES = [  # appendix A2: lat lo, lat hi, lon lo, lon hi, then optional extra conditions
    (40.7645342324, 40.7735173889, -73.888983772, -73.8799803018, ""),
    (40.7567579105, 40.7657410671, -74.0104771822, -74.0014687259, ""),
    (40.8350997626, 40.8440829192, -73.9408829776, -73.9318997698, ""),
    (40.7313968589, 40.7403800154, -73.9281950202, -73.9191664656, ""),
    (40.6395406815, 40.648523838, -73.7786922958, -73.7695406582, ""),
    (
        40.7766603868,
        40.7856435434,
        -73.9849723371,
        -73.9759755461,
        "pickup_datetime >= 1357318152 AND\n     pickup_datetime <= 1387058055",
    ),
    (
        40.7518744163,
        40.7608575729,
        -73.9920231278,
        -73.9830112587,
        "pickup_datetime >= 1387425722 AND\n     pickup_datetime <= 1389354509",
    ),
    (
        40.7390082969,
        40.7479914535,
        -73.8975113729,
        -73.8884894693,
        "pickup_datetime >= 1358101957 AND\n     pickup_datetime <= 1384534322",
    ),
    (
        40.7441121105,
        40.7530952671,
        -73.9241726808,
        -73.9151549391,
        "pickup_datetime >= 1357228624 AND\n     pickup_datetime <= 1380690924 AND\n     passenger_count <= 5",
    ),
    (
        40.8095885444,
        40.8185717009,
        -73.945678875,
        -73.9366935177,
        "pickup_datetime >= 1358303391 AND\n     pickup_datetime <= 1388758328 AND\n     passenger_count <= 5",
    ),
    (
        40.7405100269,
        40.7494931834,
        -73.8848861323,
        -73.875865478,
        "pickup_datetime >= 1360644783 AND\n     pickup_datetime <= 1378268507 AND\n     passenger_count <= 6 AND\n     trip_time_in_secs <= 1800",
    ),
    (
        40.7360481905,
        40.7450313471,
        -73.9318252224,
        -73.9228007954,
        "pickup_datetime >= 1359423704 AND\n     pickup_datetime <= 1377980909 AND\n     passenger_count <= 2 AND\n     trip_time_in_secs <= 3600",
    ),
    (
        40.7973076091,
        40.8062907656,
        -73.9652836263,
        -73.9562951477,
        "pickup_datetime >= 1358294025 AND\n     pickup_datetime <= 1369831329 AND\n     passenger_count <= 1 AND\n     trip_time_in_secs <= 1800",
    ),
    (
        40.7502443406,
        40.7592274972,
        -74.0404189891,
        -74.0314059325,
        "pickup_datetime >= 1366484530 AND\n     pickup_datetime <= 1381908856 AND\n     passenger_count <= 2 AND\n     trip_time_in_secs <= 1800",
    ),
    (
        40.8966859263,
        40.9056690829,
        -73.7811546197,
        -73.7721573685,
        "pickup_datetime >= 1361340581 AND\n     pickup_datetime <= 1365432055 AND\n     passenger_count <= 2 AND\n     trip_time_in_secs <= 3600",
    ),
    (
        40.64089501,
        40.6498781666,
        -73.7831658104,
        -73.7740165755,
        "pickup_datetime >= 1385293736 AND\n     pickup_datetime <= 1390390061 AND\n     passenger_count <= 1 AND\n     trip_time_in_secs <= 3600",
    ),
]


def _taxi_query(box: tuple[float, float, float, float, str]) -> str:
    lat_lo, lat_hi, lon_lo, lon_hi, extra = box
    text = (
        "SELECT avg(passenger_count) FROM mdds_table WHERE\n"
        f"     pickup_latitude >= {lat_lo} AND\n"
        f"     pickup_latitude <= {lat_hi} AND\n"
        f"     pickup_longitude >= {lon_lo} AND\n"
        f"     pickup_longitude <= {lon_hi}"
    )
    return text + (f" AND\n     {extra};" if extra else ";")


# Appendix A2, verbatim (the literals as printed)
TAXI_QUERIES = [_taxi_query(b) for b in _TAXI_BOXES]

# Appendix A4, verbatim
GHCN_QUERIES = [
    "SELECT avg(elevation) FROM mdds_table WHERE\n     element_id = 1397641047;",
    "SELECT avg(element_value)/10 FROM mdds_table WHERE\n     elevation > 4000 AND element_id = 1414351182;",
    "SELECT avg(element_value) FROM mdds_table WHERE\n     longitude > -109.0 AND longitude < -102.0 AND\n     latitude > 37.0 AND latitude < 41.0 AND\n     elevation > 1000 AND element_id = 1397641047;",
    "SELECT count(*) FROM mdds_table WHERE\n     longitude > -102.0 AND longitude < -94.633 AND\n     latitude > 37.0 AND latitude < 40.0 AND\n     element_id = 1465135408;",
    "SELECT avg(element_value)/10.0 FROM mdds_table WHERE\n     longitude > -5.4327 AND longitude < 1.7688 AND\n     latitude > 50.447 AND latitude < 54.6961 AND\n     element_id = 1413568071;",
    "SELECT avg(element_value) FROM mdds_table WHERE\n     element_id = 1397643076 AND\n     latitude >= 63.9 AND latitude <= 64.0 AND\n     longitude > -152.282 AND longitude < -152.281;",
    "SELECT max(element_value)/10.0 FROM mdds_table WHERE\n     element_id = 1414349144 AND\n     longitude >= 126.227 AND longitude <= 129.6442 AND\n     latitude >= 34.3117 AND latitude <= 38.1043;",
    "SELECT count(*) FROM mdds_table WHERE\n     element_id = 1414349144 AND element_value > 544;",
    "SELECT count(*) FROM mdds_table WHERE\n     elevation < 0 AND elevation > -999.9 AND\n     element_id = 1465135160;",
    "SELECT distinct station_id, elevation FROM mdds_table WHERE\n     element_id = 1465135159 ORDER BY elevation DESC LIMIT 3;",
]

# the appendix's indexes (A1, A3)
TAXI_INDEXES = [
    "CREATE INDEX idx1 ON mdds_table (pickup_latitude, pickup_longitude, pickup_datetime, "
    "passenger_count, trip_time_in_secs)"
]
GHCN_INDEXES = [
    "CREATE INDEX idx1 ON mdds_table (element_id, element_value)",
    "CREATE INDEX idx2 ON mdds_table (element_id, elevation)",
    "CREATE INDEX idx3 ON mdds_table (element_id, longitude, latitude, elevation)",
    "CREATE INDEX idx4 ON mdds_table (element_id, latitude)",
]

QUERY_WARMUP = 2  # query latencies: the median of five runs after two warm-ups, as the paper
QUERY_RUNS = 5  # (whatever --repeat says, which sets how often each ingest is repeated)


# --- generators ----------------------------------------------------------------------
def off_query_bounds(table: Any, queries: list[str]) -> Any:
    """``table`` with FLOAT values moved one float32 step off the queries' bounds where
    FLOAT and DOUBLE comparison disagree.

    DuckDB compares a FLOAT column with a literal in single precision,
    SQLite and PostgreSQL in double: a value equal to float32(bound) but
    not to the bound itself matches in one and not the other. Such values
    (a handful in millions) are nudged one step away so every system must
    give the same answer.
    """
    import re

    import numpy as np
    import pyarrow as pa

    bounds: dict[str, set[float]] = {}
    for query in queries:
        for column, value in re.findall(r"(\w+)\s*[<>]=?\s*(-?\d+\.\d+)", query):
            bounds.setdefault(column, set()).add(float(value))
    for column, values in bounds.items():
        if column not in table.column_names or not pa.types.is_float32(
            table.schema.field(column).type
        ):
            continue
        array = table.column(column).to_numpy().copy()
        for bound in values:
            image = np.float32(bound)
            if float(image) == bound:
                continue
            hit = array == image
            if hit.any():
                away = np.float32(np.inf if float(image) > bound else -np.inf)
                array[hit] = np.nextafter(image, away)  # further from the bound, same side
        position = table.column_names.index(column)
        table = table.set_column(position, column, pa.array(array, pa.float32()))
    return table


# --- TesseraDB ------------------------------------------------------------------------
def _feed(stream: Any, table: Any, threads: int, piece: int = 1_000_000) -> float:
    """Ingest ``table`` with ``threads`` feeders, each its share in pieces; seconds taken."""
    parts = _split(table.num_rows, threads)
    errors: list[BaseException] = []

    def feeder(lo: int, hi: int) -> None:
        try:
            for start in range(lo, hi, piece):
                stream.ingest(table.slice(start, min(piece, hi - start)))
        except BaseException as err:
            errors.append(err)

    workers = [threading.Thread(target=feeder, args=p) for p in parts]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return elapsed


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    step = -(-n // parts)
    return [(lo, min(n, lo + step)) for lo in range(0, n, step)] or [(0, 0)]


def _fresh(ctx: BenchContext, name: str) -> Any:
    import shutil

    import tesseradb

    path = ctx.scratch / name  # type: ignore[operator]
    shutil.rmtree(path, ignore_errors=True)
    return tesseradb.connect(path)


def _tessera(ctx: BenchContext, data: dict[str, Any], answers: dict[str, dict[str, Any]]) -> None:
    from tesseradb.records import RecordDescriptor

    n = data["taxi"].num_rows
    cache = 8 << 30
    # ingest: Arrow, 2 feeder threads, the default options (kd-tree scheme, 1M-record chunks), queryable on return
    runs = []
    for _ in range(ctx.repeat):
        with _fresh(ctx, "tessera_ingest") as db:
            stream = db.create_stream("mdds_table", TAXI_DESCRIPTOR, cache_bytes=cache)
            runs.append(n / _feed(stream, data["taxi"], 2))
    ctx.record("tessera", "ingest", runs, "per_second", "records/s")
    idle = statistics.median(runs)

    # single-thread binary ingest (the paper's binary form, loaded in memory first)
    descriptor = RecordDescriptor.parse(TAXI_DESCRIPTOR)
    binary = _packed(data["taxi"], descriptor)
    record_size = descriptor.record_size
    runs = []
    for _ in range(ctx.repeat):
        with _fresh(ctx, "tessera_binary") as db:
            stream = db.create_stream("mdds_table", TAXI_DESCRIPTOR, cache_bytes=cache)
            piece = 1_000_000 * record_size
            start = time.perf_counter()
            for at in range(0, len(binary), piece):
                stream.ingest(memoryview(binary)[at : at + piece])
            runs.append(n / (time.perf_counter() - start))
    ctx.record("tessera", "ingest_binary_1t", runs, "per_second", "records/s")
    del binary

    # CSV, two files, two feeder threads
    csvs = _write_csvs(ctx, data["taxi"], 2)
    runs = []
    for _ in range(ctx.repeat):
        with _fresh(ctx, "tessera_csv") as db:
            stream = db.create_stream("mdds_table", TAXI_DESCRIPTOR, cache_bytes=cache)
            workers = [threading.Thread(target=stream.ingest, args=(p,)) for p in csvs]
            start = time.perf_counter()
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            elapsed = time.perf_counter() - start
            if stream.num_records != n:
                raise RuntimeError(f"CSV ingest kept {stream.num_records} of {n} records")
            runs.append(n / elapsed)
    ctx.record("tessera", "ingest_csv_2t", runs, "per_second", "records/s")
    for p in csvs:
        p.unlink()

    # the paper's §VI-A: both schemes by chunk size (1 thread), overlap, iterators
    for scheme in ("random", "kdtree"):
        for chunk in ctx.params["chunks"]:
            with _fresh(ctx, "tessera_scheme") as db:
                stream = db.create_stream(
                    "mdds_table",
                    TAXI_DESCRIPTOR,
                    scheme=scheme,
                    max_chunk_records=chunk,
                    cache_bytes=cache,
                )
                elapsed = _feed(stream, data["taxi"], 1, piece=max(chunk, 100_000))
                ctx.record(
                    "tessera",
                    f"ingest_1t_{scheme}_chunk{chunk}",
                    [n / elapsed],
                    "per_second",
                    "records/s",
                )
                if chunk == ctx.params["chunks"][-1]:
                    met = [_inspected(db, q) for q in TAXI_QUERIES]
                    ctx.record("tessera", f"overlap_{scheme}", met, "fraction", "of segments")
                    stream.flush()
                    _time_queries(
                        ctx,
                        "tessera",
                        "taxi",
                        TAXI_QUERIES,
                        lambda q, db=db: db.sql(q).fetchall(),
                        suffix=f"_{scheme}_scheme",
                    )

    # ingest while a query loop runs (0, 10, 100 ms between queries)
    for gap in (0, 10, 100):
        with _fresh(ctx, "tessera_loop") as db:
            stream = db.create_stream("mdds_table", TAXI_DESCRIPTOR, cache_bytes=cache)
            stream.ingest(data["taxi"].slice(0, min(n, 100_000)))
            stop = threading.Event()
            done = [0]

            def loop(
                db: Any = db, gap: int = gap, stop: threading.Event = stop, done: list[int] = done
            ) -> None:
                while not stop.is_set():
                    for query in TAXI_QUERIES:
                        db.sql(query).fetchall()
                        done[0] += 1
                        if stop.is_set():
                            return
                        if gap:
                            time.sleep(gap / 1000)

            querier = threading.Thread(target=loop)
            querier.start()
            try:
                elapsed = _feed(stream, data["taxi"], 2)
            finally:
                stop.set()
                querier.join()
            ctx.record(
                "tessera", f"ingest_queries_{gap}ms", [n / elapsed], "per_second", "records/s"
            )
            ctx.progress(
                f"ingest with {gap} ms between queries: {done[0]} queries ran, idle rate {idle:,.0f}/s"
            )

    # durable ingest (until flush returns), the disk's own sequential write bandwidth
    runs = []
    for _ in range(ctx.repeat):
        with _fresh(ctx, "tessera_durable") as db:
            stream = db.create_stream(
                "mdds_table", TAXI_DESCRIPTOR, cache_bytes=cache, writer_threads=2
            )
            start = time.perf_counter()
            _feed(stream, data["taxi"], 2)
            stream.flush()
            runs.append(n / (time.perf_counter() - start))
    ctx.record("tessera", "durable_ingest", runs, "per_second", "records/s")
    size = max(256 << 20, n * record_size)
    ctx.record(
        "disk",
        "disk_write",
        [_disk_write(ctx.scratch / "disk.bin", size) for _ in range(ctx.repeat)],  # type: ignore[operator]
        "per_second",
        "bytes/s",
    )

    # queries on the persisted streams, and their size on disk. GHCN's stream has the
    # appendix's indexes (A3), as SQLite and PostgreSQL have: key orders on its segments
    # (taxi's one index is on the kd-tree's own fields); a second GHCN stream without
    # them shows the kd-tree alone
    for dataset, queries in (("taxi", TAXI_QUERIES), ("ghcn", GHCN_QUERIES)):
        descriptor_text = TAXI_DESCRIPTOR if dataset == "taxi" else GHCN_DESCRIPTOR
        indexes = [] if dataset == "taxi" else [_index_fields(i) for i in GHCN_INDEXES]
        with _fresh(ctx, f"tessera_{dataset}") as db:
            stream = db.create_stream(
                "mdds_table", descriptor_text, cache_bytes=cache, indexes=indexes
            )
            elapsed = _feed(stream, data[dataset], 2)
            stream.flush()
            if dataset == "ghcn":
                n = data[dataset].num_rows
                ctx.record(
                    "tessera", "ghcn_ingest_indexed", [n / elapsed], "per_second", "records/s"
                )
            ctx.record("tessera", f"bytes_on_disk_{dataset}", [stream.bytes_on_disk], "bytes", "B")
            _time_queries(
                ctx, "tessera", dataset, queries, lambda q, db=db: db.sql(q).fetchall(), answers
            )
            if dataset == "ghcn":
                with _fresh(ctx, "tessera_ghcn_plain") as db2:
                    s2 = db2.create_stream("mdds_table", GHCN_DESCRIPTOR, cache_bytes=cache)
                    elapsed = _feed(s2, data[dataset], 2)
                    ctx.record("tessera", "ghcn_ingest", [n / elapsed], "per_second", "records/s")
                    s2.flush()
                    _time_queries(
                        ctx,
                        "tessera",
                        "ghcn",
                        queries,
                        lambda q, db2=db2: db2.sql(q).fetchall(),
                        answers,
                        suffix="_no_indexes",
                    )
            if dataset == "taxi":
                with _fresh(ctx, "tessera_sequential") as db2:
                    s2 = db2.create_stream(
                        "mdds_table", TAXI_DESCRIPTOR, cache_bytes=cache, iterator="sequential"
                    )
                    _feed(s2, data[dataset], 2)
                    _time_queries(
                        ctx,
                        "tessera",
                        "taxi",
                        queries,
                        lambda q, db2=db2: db2.sql(q).fetchall(),
                        suffix="_sequential_iterator",
                    )
    _total_bytes(ctx, "tessera")


def _index_fields(create_index: str) -> list[str]:
    """The columns of a ``CREATE INDEX name ON table (a, b, ...)`` statement."""
    inside = create_index[create_index.index("(") + 1 : create_index.rindex(")")]
    return [name.strip() for name in inside.split(",")]


def _time_queries(
    ctx: BenchContext,
    system: str,
    dataset: str,
    queries: list[str],
    run: Any,
    answers: dict[str, dict[str, Any]] | None = None,
    suffix: str = "",
) -> None:
    """Case ``{dataset}_q{n}{suffix}`` per query: the median of QUERY_RUNS runs of
    ``run(query)`` after QUERY_WARMUP warm-ups; its answer kept for the agreement check."""
    for q_no, query in enumerate(queries, 1):
        answer = ctx.measure(
            system,
            f"{dataset}_q{q_no}{suffix}",
            lambda q=query: run(q),
            warmup=QUERY_WARMUP,
            repeat=QUERY_RUNS,
        )
        if answers is not None:  # (a variant's answer is checked as a system of its own)
            answers[f"{dataset}_q{q_no}"][system + suffix] = answer


def _inspected(db: Any, query: str) -> float:
    """The fraction of segments the R*-tree leaves a query to inspect."""
    note = next(
        n
        for r in db.explain(query).relations
        for n in r.notes
        if n.startswith("segments inspected")
    )
    parts = note.split()
    return int(parts[2]) / max(1, int(parts[4]))


def _packed(table: Any, descriptor: Any) -> bytes:
    import numpy as np

    records = np.zeros(table.num_rows, dtype=descriptor.numpy_dtype)
    for field in descriptor.fields:
        column = table.column(field.name)
        if field.type == "char":
            records[field.name] = column.to_numpy(zero_copy_only=False).astype(
                f"S{field.array_len}"
            )
        else:
            records[field.name] = column.to_numpy()
    return records.tobytes()


def _write_csvs(ctx: BenchContext, table: Any, parts: int) -> list[Path]:
    import pyarrow.csv as pacsv

    paths = []
    for k, (lo, hi) in enumerate(_split(table.num_rows, parts)):
        path = ctx.scratch / f"taxi-{k}.csv"  # type: ignore[operator]
        pacsv.write_csv(table.slice(lo, hi - lo), path, pacsv.WriteOptions(include_header=False))
        paths.append(path)
    return paths


def _disk_write(path: Path, size: int) -> float:
    """Sequential write bandwidth: ``size`` bytes in 8 MiB writes, then fsync; bytes per second."""
    import numpy as np

    block = np.random.default_rng(0).integers(0, 256, 8 << 20, dtype=np.uint8).tobytes()
    start = time.perf_counter()
    with open(path, "wb") as f:
        written = 0
        while written < size:
            f.write(block)
            written += len(block)
        f.flush()
        os.fsync(f.fileno())
    elapsed = time.perf_counter() - start
    path.unlink()
    return written / elapsed


# --- peers ------------------------------------------------------------------------------
# Arrow type -> SQL type, read alike by all three peers: REAL is single precision in
# DuckDB and PostgreSQL, and SQLite gives these names its TEXT, INTEGER and REAL affinities
_SQL_TYPES = {
    "string": "VARCHAR",
    "int64": "BIGINT",
    "int32": "INTEGER",
    "uint32": "BIGINT",
    "float": "REAL",
}


def _create_table(table: Any) -> str:
    columns = ", ".join(f"{f.name} {_SQL_TYPES[str(f.type)]}" for f in table.schema)
    return f"CREATE TABLE mdds_table ({columns})"


def _sqlite(ctx: BenchContext, data: dict[str, Any], answers: dict[str, dict[str, Any]]) -> None:
    import sqlite3

    for dataset, queries, indexes in (
        ("taxi", TAXI_QUERIES, TAXI_INDEXES),
        ("ghcn", GHCN_QUERIES, GHCN_INDEXES),
    ):
        table = data[dataset]
        path = ctx.scratch / f"sqlite_{dataset}.db"  # type: ignore[operator]
        path.unlink(missing_ok=True)
        con = sqlite3.connect(path, isolation_level=None)
        try:
            for pragma in (
                "synchronous = OFF",
                "journal_mode = OFF",
                "ignore_check_constraints = ON",
            ):
                con.execute(f"PRAGMA {pragma}")
            con.execute(_create_table(table))
            for index in indexes:
                con.execute(index)
            marks = ", ".join("?" * table.num_columns)
            insert = f"INSERT INTO mdds_table VALUES ({marks})"
            elapsed = 0.0
            con.execute("BEGIN")
            for batch in table.to_batches(max_chunksize=200_000):
                rows = list(zip(*(c.to_pylist() for c in batch.columns), strict=True))
                start = time.perf_counter()  # the bulk insert only, as the paper timed
                con.executemany(insert, rows)
                elapsed += time.perf_counter() - start
            start = time.perf_counter()
            con.execute("COMMIT")
            elapsed += time.perf_counter() - start
            if dataset == "taxi":
                ctx.record(
                    "sqlite", "ingest", [table.num_rows / elapsed], "per_second", "records/s"
                )
            ctx.record("sqlite", f"bytes_on_disk_{dataset}", [path.stat().st_size], "bytes", "B")
            _time_queries(
                ctx,
                "sqlite",
                dataset,
                queries,
                lambda q, con=con: con.execute(q).fetchall(),
                answers,
            )
        finally:
            con.close()
    _total_bytes(ctx, "sqlite")


def _duckdb(ctx: BenchContext, data: dict[str, Any], answers: dict[str, dict[str, Any]]) -> None:
    import duckdb

    for dataset, queries in (("taxi", TAXI_QUERIES), ("ghcn", GHCN_QUERIES)):
        table = data[dataset]
        runs = []
        path = ctx.scratch / f"duckdb_{dataset}.db"  # type: ignore[operator]
        for _ in range(ctx.repeat if dataset == "taxi" else 1):
            path.unlink(missing_ok=True)
            con = duckdb.connect(str(path))
            con.execute(_create_table(table))
            con.register("staging", table)
            start = time.perf_counter()
            con.execute("INSERT INTO mdds_table SELECT * FROM staging")
            runs.append(table.num_rows / (time.perf_counter() - start))
            con.execute("CHECKPOINT")
            con.unregister("staging")
            con.close()
        if dataset == "taxi":
            ctx.record("duckdb", "ingest", runs, "per_second", "records/s")
        con = duckdb.connect(str(path))
        try:
            ctx.record("duckdb", f"bytes_on_disk_{dataset}", [path.stat().st_size], "bytes", "B")
            _time_queries(
                ctx,
                "duckdb",
                dataset,
                queries,
                lambda q, con=con: con.execute(q).fetchall(),
                answers,
            )
        finally:
            con.close()
    _total_bytes(ctx, "duckdb")


def _postgres(ctx: BenchContext, data: dict[str, Any], answers: dict[str, dict[str, Any]]) -> None:
    import psycopg
    import pyarrow.csv as pacsv

    from tesseradb.bench.servers import postgres_server

    with postgres_server() as server:
        for dataset, queries, indexes in (
            ("taxi", TAXI_QUERIES, TAXI_INDEXES),
            ("ghcn", GHCN_QUERIES, GHCN_INDEXES),
        ):
            table = data[dataset]
            with psycopg.connect(
                host=server.host,
                port=server.port,
                user=server.user,
                dbname=server.database,
                autocommit=True,
            ) as con:
                con.execute("DROP TABLE IF EXISTS mdds_table")
                con.execute(_create_table(table))
                for index in indexes:
                    con.execute(index)
                elapsed = 0.0
                with con.cursor().copy("COPY mdds_table FROM STDIN (FORMAT csv)") as copy:
                    for batch in table.to_batches(max_chunksize=200_000):
                        buffer = io.BytesIO()
                        pacsv.write_csv(batch, buffer, pacsv.WriteOptions(include_header=False))
                        start = time.perf_counter()
                        copy.write(buffer.getvalue())
                        elapsed += time.perf_counter() - start
                start = time.perf_counter()
                con.execute("ANALYZE mdds_table")
                elapsed += time.perf_counter() - start
                if dataset == "taxi":
                    ctx.record(
                        "postgresql",
                        "ingest",
                        [table.num_rows / elapsed],
                        "per_second",
                        "records/s",
                    )
                size = con.execute("SELECT pg_total_relation_size('mdds_table')").fetchone()
                ctx.record(
                    "postgresql", f"bytes_on_disk_{dataset}", [size[0] if size else 0], "bytes", "B"
                )
                _time_queries(
                    ctx,
                    "postgresql",
                    dataset,
                    queries,
                    lambda q, con=con: con.execute(q).fetchall(),
                    answers,
                )
    _total_bytes(ctx, "postgresql")


def _total_bytes(ctx: BenchContext, system: str) -> None:
    parts = [
        m.value
        for m in ctx.report.results
        if m.system == system and m.case.startswith("bytes_on_disk_")
    ]
    ctx.record(system, "bytes_on_disk", [sum(parts)], "bytes", "B")


def run(ctx: BenchContext) -> None:
    records = int(ctx.params["records"])
    ctx.progress(f"generating {records:,} taxi and GHCN records")
    data = {
        "taxi": off_query_bounds(taxi(records, seed=1), TAXI_QUERIES),
        "ghcn": off_query_bounds(ghcn(records, seed=2), GHCN_QUERIES),
    }
    answers: dict[str, dict[str, Any]] = {
        f"{d}_q{i}": {}
        for d, qs in (("taxi", TAXI_QUERIES), ("ghcn", GHCN_QUERIES))
        for i in range(1, len(qs) + 1)
    }
    for system, step in (
        ("tessera", _tessera),
        ("duckdb", _duckdb),
        ("sqlite", _sqlite),
        ("postgresql", _postgres),
    ):
        if ctx.wants(system):
            ctx.progress(system)
            step(ctx, data, answers)
    for case, by_system in answers.items():
        if len(by_system) > 1:
            ctx.check(case, by_system, digits=6)


register(
    Benchmark(
        name="mdds",
        description="MDDS: record-stream ingest and the paper's taxi and GHCN range queries vs SQLite, DuckDB, PostgreSQL",
        scales={
            "tiny": {"records": 20_000, "chunks": [5_000, 20_000]},
            "small": {"records": 2_000_000, "chunks": [5_000, 50_000, 1_000_000]},
            "large": {"records": 20_000_000, "chunks": [5_000, 50_000, 1_000_000]},
        },
        systems=("tessera", "sqlite", "duckdb", "postgresql"),
        run=run,
        default_scale="tiny",
        notes=(
            "ingest: records per second through each system's best bulk path (tessera: Arrow, "
            "2 feeder threads, default stream options, queryable on return)",
            "durable_ingest vs disk_write: compare records/s x record size with the disk's bytes/s",
        ),
    )
)
