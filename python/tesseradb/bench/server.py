"""``tessera bench server``: a served database against PostgreSQL over loopback, with DuckDB
in-process as the floor.

- ``query_small``: one point query at a time (``seconds`` a query, the median of
  several batches): tessera's remote client against ``tessera serve`` in
  another process; tessera in-process (``query_small_in_process``);
  PostgreSQL through psycopg over loopback; DuckDB in-process; and psycopg against
  ``tessera serve --pg-port`` (``query_small_pgwire``: the PostgreSQL protocol).
- ``arrow_download``: a result of ``download_bytes`` (1 GB at ``small``)
  streamed as Arrow IPC over loopback to the remote client (``per_second``,
  bytes); over Flight SQL with ADBC (``arrow_download_flight``); DuckDB's
  ``fetch_arrow_table`` in-process is the floor.
- ``ingest_pgwire``: ADBC's PostgreSQL driver loads ``ingest_rows`` rows of four
  columns (``adbc_ingest``: CREATE TABLE, then binary ``COPY ... FROM STDIN``) into
  ``tessera serve --pg-port`` and into PostgreSQL (``per_second``, rows; three loads).
- ``queries_32_clients``: 32 clients in 4 processes of 8 threads each run a
  read-mostly mix (90% point queries, 5% small range aggregates, 5% inserts)
  for ``seconds``: queries a second, and p50/p99 latencies
  (``queries_32_clients_p50``/``_p99``, seconds) for tessera and PostgreSQL, and for
  tessera's PostgreSQL protocol through psycopg (``queries_32_clients_pgwire``...).

Every system's answers to the point queries, the download (rows and sums)
and the mix's writes are checked to agree.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.server import free_ports

if TYPE_CHECKING:
    from tesseradb.bench.runner import BenchContext

ROWS = 1_000_000  # the point-query table
MIX_CLIENTS = 1000  # client numbers each mix has of its own (it uses 32)
WORKERS = (1, 2)  # the --workers sweep of the PostgreSQL protocol's mix
_MIXES = ["tessera", "tessera_pgwire", "tessera_flight"] + [f"tessera_pgwire-w{n}" for n in WORKERS]


def _first(name: str) -> int:
    """The first client number of a tessera mix (each writes rows of its own)."""
    return _MIXES.index(name) * MIX_CLIENTS


def _wait_for_workers(conninfo: str, workers: int) -> None:
    """Until a connection lands in a worker process (its number is in the key)."""
    import psycopg

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with psycopg.connect(conninfo) as probe:
            if probe.info.backend_pid >> 24:
                return
        time.sleep(0.05)


POINT = "SELECT f FROM points WHERE i = ?"
# each loaded table's rows and sums (the three loads of ingest_pgwire)
INGESTED = (
    " UNION ALL ".join(
        f"SELECT {n} AS n, count(*), sum(a), sum(b), sum(d) FROM loaded{n}" for n in range(3)
    )
    + " ORDER BY n"
)


def _key(i: int) -> int:
    """The ``i``-th point query's key: spread over the table, the same for every system."""
    return i * 7919 % ROWS


def _download_answer(table: Any) -> list[tuple[int, int, int]]:
    """What every system's download must agree on: its rows and two columns' sums."""
    import pyarrow.compute as pc

    return [(table.num_rows, pc.sum(table["a"]).as_py(), pc.sum(table["d"]).as_py())]


def _per_query(fn: Any, count: int, batches: int = 5) -> list[float]:
    """Seconds a call, for ``batches`` batches of ``count`` calls (after a warm-up)."""
    for i in range(min(count, 50)):
        fn(i)
    out = []
    for b in range(batches):
        started = time.perf_counter()
        for i in range(count):
            fn(b * count + i)
        out.append((time.perf_counter() - started) / count)
    return out


# --- the concurrent mix: client processes -------------------------------------------------
def _mix_worker(args: tuple[str, str, str, int, int, float, int]) -> dict[str, Any]:
    """One client process: ``threads`` threads running the mix against ``system``."""
    system, url, token, threads, first_client, seconds, rows = args
    import random

    latencies: list[float] = []
    writes: list[tuple[int, int]] = []
    errors: list[str] = []
    counts = [0]
    lock = threading.Lock()
    # The window opens once every thread of this process has connected (a spawned process
    # may take seconds to import and connect on a loaded machine: a window opened before
    # that could close before any query ran)
    window: list[float] = []
    ready = threading.Barrier(
        threads, action=lambda: window.append(time.monotonic() + seconds), timeout=300
    )

    def run(client: int) -> None:
        rng = random.Random(client)
        if system == "tessera":
            import tesseradb

            remote = tesseradb.connect(url, token=token)

            def query(sql: str, params: list[Any]) -> Any:
                return remote.sql(sql, params).fetchall()
        elif system == "flight":
            import adbc_driver_flightsql.dbapi as flight_sql

            adbc = flight_sql.connect(
                url,
                db_kwargs={"adbc.flight.sql.authorization_header": f"Bearer {token}"},
                autocommit=True,
            )

            def query(sql: str, params: list[Any]) -> Any:
                with adbc.cursor() as cur:
                    cur.execute(sql, params)
                    return cur.fetchall()
        else:
            import psycopg

            con = psycopg.connect(url, autocommit=True)

            def query(sql: str, params: list[Any]) -> Any:
                with con.cursor() as cur:
                    cur.execute(sql.replace("?", "%s"), params)
                    return cur.fetchall() if cur.description else None

        mine, seq = [], 0
        ready.wait()
        deadline = window[0]
        while True:  # (at least one query each, however late the window opened)
            kind = rng.random()
            began = time.perf_counter()
            try:
                if kind < 0.90:
                    i = rng.randrange(rows)
                    query(POINT, [i])
                elif kind < 0.95:
                    lo = rng.randrange(rows - 1000)
                    query(
                        "SELECT count(*), sum(f) FROM points WHERE i BETWEEN ? AND ?",
                        [lo, lo + 999],
                    )
                else:
                    seq += 1
                    query("INSERT INTO writes VALUES (?, ?)", [client, seq])
                    mine.append((client, seq))  # (acknowledged)
            except Exception as err:  # counted and shown: an error is a defect
                with lock:
                    errors.append(f"{type(err).__name__}: {str(err)[:300]}")
                if time.monotonic() >= deadline:
                    break
                continue
            elapsed = time.perf_counter() - began
            with lock:
                latencies.append(elapsed)
                counts[0] += 1
            if time.monotonic() >= deadline:
                break
        with lock:
            writes.extend(mine)

    workers = [threading.Thread(target=run, args=(first_client + t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {"latencies": latencies, "count": counts[0], "writes": writes, "errors": errors}


def _mix(system: str, url: str, token: str, ctx: BenchContext, first: int = 0) -> dict[str, Any]:
    """The mix's figures, its clients numbered from ``first``."""
    import multiprocessing

    processes, threads = 4, 8
    seconds = float(ctx.params["seconds"])
    jobs = [
        (system, url, token, threads, first + p * threads, seconds, ROWS) for p in range(processes)
    ]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        parts = pool.map(_mix_worker, jobs)
    latencies = sorted(x for p in parts for x in p["latencies"])
    return {
        "qps": sum(p["count"] for p in parts) / seconds,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[int(len(latencies) * 0.99)],
        "writes": sorted(w for p in parts for w in p["writes"]),
        "errors": [e for p in parts for e in p["errors"]],
    }


def _ingest_table(rows: int) -> Any:
    """What ``ingest_pgwire`` loads: four columns of ``rows`` rows (ints, doubles, text)."""
    import numpy as np
    import pyarrow as pa

    keys = np.arange(rows, dtype=np.int64)
    return pa.table(
        {
            "a": keys,
            "b": keys * 0.25,
            "c": pa.array([f"s{k % 1000}" for k in range(rows)]),
            "d": (keys % 7).astype(np.int32),
        }
    )


def _floats(rows: list[Any]) -> list[tuple[float, ...]]:
    """Counts and sums as floats: each system gives its own number types for them."""
    return [tuple(float(v) for v in row) for row in rows]


def _ingest(uri: str, table: Any, name: str) -> float:
    """Seconds ADBC's PostgreSQL driver takes to create ``name`` and load ``table``."""
    import adbc_driver_postgresql.dbapi as adbc_pg

    with adbc_pg.connect(uri, autocommit=True) as con, con.cursor() as cur:
        began = time.perf_counter()
        cur.adbc_ingest(name, table, mode="create")
        return time.perf_counter() - began


def _adbc_rows(adbc: Any, sql: str, params: list[Any]) -> list[Any]:
    with adbc.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


# --- the benchmark -------------------------------------------------------------------------
def run(ctx: BenchContext) -> None:
    import duckdb

    import tesseradb
    from tesseradb.server import ServerProcess, Users, parse_rights

    assert ctx.scratch is not None
    path = ctx.scratch / "served.tdb"
    download_rows = int(ctx.params["download_bytes"]) // 32  # four 8-byte columns
    size = download_rows * 32
    points_sql = f"SELECT range AS i, range * 0.5 AS f FROM range({ROWS})"
    big_sql = (
        f"SELECT range AS a, range * 2 AS b, CAST(range AS DOUBLE) * 0.5 AS c, range % 1000 AS d "
        f"FROM range({download_rows})"
    )
    with tesseradb.connect(path) as db:
        ctx.progress("making the tables")
        db.sql(f"CREATE TABLE points AS {points_sql}")
        db.sql("CREATE TABLE writes (client INTEGER, seq BIGINT)")
        db.sql(f"CREATE TABLE big AS {big_sql}")
        answers_point: dict[str, Any] = {}
        if ctx.wants("tessera"):
            ctx.progress("query_small: tessera in-process")
            runs = _per_query(lambda i: db.sql(POINT, [_key(i)]), 100)
            ctx.record("tessera", "query_small_in_process", runs)
    token = Users(path).add("bench", parse_rights(["write"]))
    answers_download: dict[str, Any] = {}
    answers_ingest: dict[str, Any] = {}
    rows = int(ctx.params["ingest_rows"])
    ingest = _ingest_table(rows)
    mixes: dict[str, dict[str, Any]] = {}
    if ctx.wants("tessera"):
        pg_port, flight_port = free_ports(1)[0], free_ports(1)[0]
        served = ServerProcess(
            path, 0, "--pg-port", str(pg_port), "--flight-port", str(flight_port)
        )
        flight_url = f"grpc://127.0.0.1:{flight_port}"
        url = served.url
        conninfo = f"host=127.0.0.1 port={pg_port} user=bench password={token} dbname=served"
        try:
            import psycopg

            with psycopg.connect(conninfo, autocommit=True) as pgwire:
                ctx.progress("query_small: tessera over the PostgreSQL protocol")

                def point_pgwire(i: int) -> Any:
                    with pgwire.cursor() as cur:
                        cur.execute(POINT.replace("?", "%s"), [_key(i)])
                        return cur.fetchall()

                ctx.record("tessera", "query_small_pgwire", _per_query(point_pgwire, 100))
                answers_point["tessera_pgwire"] = pgwire.execute(
                    POINT.replace("?", "%s"), [12345]
                ).fetchall()
                ctx.progress("ingest_pgwire: tessera (ADBC's PostgreSQL driver, COPY)")
                uri = f"postgresql://bench:{token}@127.0.0.1:{pg_port}/served"
                took = [_ingest(uri, ingest, f"loaded{n}") for n in range(3)]
                ctx.record(
                    "tessera", "ingest_pgwire", [rows / t for t in took], "per_second", "rows/s"
                )

            with tesseradb.connect(url, token=token) as remote:
                ctx.progress("query_small: tessera over loopback")
                runs = _per_query(lambda i: remote.sql(POINT, [_key(i)]), 100)
                ctx.record("tessera", "query_small", runs)
                answers_point["tessera"] = remote.sql(POINT, [12345]).fetchall()

                def download() -> Any:
                    return remote.sql("SELECT * FROM big").arrow()

                table = ctx.measure(
                    "tessera", "arrow_download", download, "per_second", "B/s", amount=size
                )
                answers_download["tessera"] = _download_answer(table)
                del table
            import adbc_driver_flightsql.dbapi as flight_sql

            with flight_sql.connect(
                flight_url,
                db_kwargs={"adbc.flight.sql.authorization_header": f"Bearer {token}"},
                autocommit=True,
            ) as adbc:
                ctx.progress("query_small: tessera over Flight SQL")

                def point_flight(i: int) -> Any:
                    with adbc.cursor() as cur:
                        cur.execute(POINT, [_key(i)])
                        return cur.fetchall()

                ctx.record("tessera", "query_small_flight", _per_query(point_flight, 100))
                answers_point["tessera_flight"] = [
                    tuple(r) for r in _adbc_rows(adbc, POINT, [12345])
                ]

                def download_flight() -> Any:
                    with adbc.cursor() as cur:
                        cur.execute("SELECT * FROM big")
                        return cur.fetch_arrow_table()

                table = ctx.measure(
                    "tessera",
                    "arrow_download_flight",
                    download_flight,
                    "per_second",
                    "B/s",
                    amount=size,
                )
                answers_download["tessera_flight"] = _download_answer(table)
                del table
            ctx.progress("queries_32_clients: tessera")
            mixes["tessera"] = _mix("tessera", url, token, ctx, _first("tessera"))
            ctx.progress("queries_32_clients: tessera over the PostgreSQL protocol")
            first = _first("tessera_pgwire")
            mixes["tessera_pgwire"] = _mix("pgwire", conninfo, "", ctx, first)
            ctx.progress("queries_32_clients: tessera over Flight SQL")
            first = _first("tessera_flight")
            mixes["tessera_flight"] = _mix("flight", flight_url, token, ctx, first)
        finally:
            served.stop()
        for workers in ctx.params.get("workers", WORKERS):  # with reader processes
            name = f"tessera_pgwire-w{workers}"
            pg_port = free_ports(1)[0]
            served = ServerProcess(path, 0, "--pg-port", str(pg_port), "--workers", str(workers))
            try:
                conninfo = (
                    f"host=127.0.0.1 port={pg_port} user=bench password={token} dbname=served"
                )
                _wait_for_workers(conninfo, workers)
                ctx.progress(f"queries_32_clients: the PostgreSQL protocol, {workers} workers")
                mixes[name] = _mix("pgwire", conninfo, "", ctx, _first(name))
            finally:
                served.stop()
        with tesseradb.connect(path, read_only=True) as db:
            stored = sorted(db.sql("SELECT * FROM writes").fetchall())
            # (read here: a restricted session of another connection reads the newest
            # snapshot, which may not hold the loads yet)
            answers_ingest["tessera"] = _floats(db.sql(INGESTED).fetchall())
        # (every mix wrote to the one table, its clients numbered from _first(name))
        for name, mix in mixes.items():
            first = _first(name)
            mix["stored"] = [w for w in stored if first <= w[0] < first + MIX_CLIENTS]
    if ctx.wants("duckdb"):
        con = duckdb.connect()
        con.execute(f"CREATE TABLE points AS {points_sql}")
        con.execute(f"CREATE TABLE big AS {big_sql}")
        runs = _per_query(lambda i: con.execute(POINT, [_key(i)]).fetchall(), 100)
        ctx.record("duckdb", "query_small", runs)
        answers_point["duckdb"] = con.execute(POINT, [12345]).fetchall()

        def fetch() -> Any:
            return con.sql("SELECT * FROM big").to_arrow_table()

        table = ctx.measure("duckdb", "arrow_download", fetch, "per_second", "B/s", amount=size)
        answers_download["duckdb"] = _download_answer(table)
        del table
        con.close()
    if ctx.wants("postgresql"):
        import psycopg

        from tesseradb.bench.servers import postgres_server

        with postgres_server(fsync=True) as server:
            with psycopg.connect(server.url, autocommit=True) as pg:
                pg.execute(
                    "CREATE TABLE points AS SELECT i, i * 0.5 AS f "
                    f"FROM generate_series(0, {ROWS - 1}) AS i"
                )
                pg.execute("ALTER TABLE points ADD PRIMARY KEY (i)")
                pg.execute("CREATE TABLE writes (client INTEGER, seq BIGINT)")
                pg.execute("ANALYZE points")
                ctx.progress("query_small: postgresql over loopback")

                def point(i: int) -> Any:
                    with pg.cursor() as cur:
                        cur.execute(POINT.replace("?", "%s"), [_key(i)])
                        return cur.fetchall()

                ctx.record("postgresql", "query_small", _per_query(point, 100))
                with pg.cursor() as cur:
                    cur.execute(POINT.replace("?", "%s"), [12345])
                    answers_point["postgresql"] = cur.fetchall()
                ctx.progress("ingest_pgwire: postgresql (ADBC's PostgreSQL driver, COPY)")
                took = [_ingest(server.url, ingest, f"loaded{n}") for n in range(3)]
                ctx.record(
                    "postgresql", "ingest_pgwire", [rows / t for t in took], "per_second", "rows/s"
                )
                answers_ingest["postgresql"] = _floats(pg.execute(INGESTED).fetchall())
            ctx.progress("queries_32_clients: postgresql")
            mixes["postgresql"] = _mix("postgresql", server.url, "", ctx)
            with psycopg.connect(server.url, autocommit=True) as pg:
                mixes["postgresql"]["stored"] = sorted(
                    tuple(r) for r in pg.execute("SELECT * FROM writes").fetchall()
                )
    for name, mix in mixes.items():
        system, _, protocol = name.partition("_")
        case = "queries_32_clients" + (f"_{protocol.replace('-', '_')}" if protocol else "")
        ctx.record(system, case, [mix["qps"]], "per_second", "queries/s")
        ctx.record(system, f"{case}_p50", [mix["p50"]])
        ctx.record(system, f"{case}_p99", [mix["p99"]])
    if len(answers_point) > 1:
        ctx.check("query_small", answers_point)
    if len(answers_download) > 1:
        ctx.check("arrow_download", answers_download)
    if answers_ingest:
        expected = ingest.to_pandas()
        sums = [float(expected[c].sum()) for c in ("a", "b", "d")]
        answers_ingest["expected"] = [(float(n), float(rows), *sums) for n in range(3)]
        ctx.check("ingest_pgwire", {k: v for k, v in answers_ingest.items() if v})
    if mixes:
        # every acknowledged write of the mix is stored, in each system, and no query
        # failed (an insert that failed may still be stored: its answer was lost)
        ctx.check(
            "queries_32_clients_writes",
            {s: [(set(m["writes"]) <= set(m["stored"]),)] for s, m in mixes.items()}
            | {"expected": [(True,)]},
        )
        ctx.check(  # (how many, and the most common: shown where they disagree)
            "queries_32_clients_errors",
            {
                s: [(len(m["errors"]), Counter(m["errors"]).most_common(1)[0][0])]
                if m["errors"]
                else [(0, "")]
                for s, m in mixes.items()
            }
            | {"expected": [(0, "")]},
        )


register(
    Benchmark(
        name="server",
        description="tessera serve: a point query, a large Arrow download and 32 concurrent clients vs PostgreSQL over loopback, DuckDB in-process as the floor",
        scales={
            # (the smoke test sweeps no workers: tests/server has their own)
            "test": {"download_bytes": 8 << 20, "seconds": 1, "workers": (), "ingest_rows": 2000},
            "tiny": {"download_bytes": 128 << 20, "seconds": 10, "ingest_rows": 100_000},
            "small": {"download_bytes": 1 << 30, "seconds": 30, "ingest_rows": 1_000_000},
        },
        systems=("tessera", "postgresql", "duckdb"),
        run=run,
        default_scale="tiny",
        notes=(
            "query_small is seconds a point query (median of 5 batches of 100); "
            "query_small_in_process is the same query in-process; query_small_pgwire "
            "the same through psycopg over tessera's PostgreSQL protocol",
            "arrow_download is bytes a second of a result streamed as Arrow IPC over HTTP; "
            "arrow_download_flight the same over Flight SQL (ADBC)",
            "queries_32_clients: 32 clients in 4 processes, 90% point queries, 5% range "
            "aggregates, 5% inserts; _pgwire and _flight over those protocols; "
            "_pgwire_w1/_w2 with 1 and 2 worker processes (tessera serve --workers)",
            "ingest_pgwire is rows a second ADBC's PostgreSQL driver loads (adbc_ingest: "
            "CREATE TABLE, then COPY FROM STDIN in the binary format), 4 columns",
        ),
    )
)
