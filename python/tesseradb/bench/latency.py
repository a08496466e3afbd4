"""Benchmark ``latency``: the fixed cost of one statement, per relation kind.

Small statements (``SELECT 1``, a point query, a range of about a hundred
rows) show what every statement pays before any real work: parsing and
analysis, resolving names, attaching the table store, registering
relations, the round trip through DuckDB. The same rows (``id`` 0..n-1 in
random order, ``x``, ``y``, ``s``) are stored as every kind of relation;
``tessera`` queries each, and the peers query the rows as a native table
(``duckdb``, and ``sqlite`` with an index on ``id``). A case
``<query>_<kind>`` is the query on that kind; the peers' figures for it are
their native table's. ``point_collection_argo`` is the collection's point
query in Argo/SQL, the reference for ``point_collection_sql``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.bench.runner import BenchContext

if TYPE_CHECKING:
    import pyarrow as pa

    from tesseradb.database import Database

POINT = "SELECT id, x, y, s FROM {} WHERE id = ?"
RANGE = "SELECT id, x, y, s FROM {} WHERE id BETWEEN ? AND ? ORDER BY id"
RANGE_ROWS = 100
KINDS = ("plain", "arrow", "stream", "array", "attached")


def make_rows(rows: int, seed: int = 7) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows).astype(np.int64)
    return pa.table(
        {
            "id": ids,
            "x": rng.uniform(0, 1000, rows),
            "y": rng.integers(0, 1_000_000, rows, dtype=np.int64),
            "s": pa.array([f"s{i % 997}" for i in ids.tolist()]),
        }
    )


def _store(db: Database, kind: str, table: pa.Table, folder: Any) -> str:
    """The rows as a relation of ``kind`` in ``db``; the name to query."""
    import numpy as np

    name = f"{kind}_rows"
    if kind == "plain":
        db.register("staging", table)
        db.sql(f"CREATE TABLE {name} AS SELECT * FROM staging")
        db.unregister("staging")
        return name
    if kind == "arrow":
        db.register(name, table)
        return name
    if kind == "stream":
        fields = [
            {"name": "id", "type": "int64"},
            {"name": "x", "type": "float64"},
            {"name": "y", "type": "int64"},
            {"name": "s", "type": "char", "array_len": 8},
        ]
        stream = db.create_stream(name, {"fields": fields, "index": ["id"]})
        stream.ingest(table)
        stream.flush()
        return name
    order = np.argsort(table.column("id").to_numpy())
    if kind == "array":
        # a cell per id: the string column cannot be an array attribute, so s is left out
        array = db.create_array(
            name,
            [{"name": "id", "end": table.num_rows, "chunk": 4096}],
            {"x": "float64", "y": "int64"},
        )
        array[0 : table.num_rows] = {
            "x": table.column("x").to_numpy()[order],
            "y": table.column("y").to_numpy()[order],
        }
        return name
    if kind == "attached":
        import h5py

        path = folder / "latency.h5"
        with h5py.File(path, "w") as f:
            for column in ("id", "x", "y"):
                f[f"t/{column}"] = table.column(column).to_numpy()
            f["t/s"] = np.array(table.column("s").to_pylist(), dtype="S8")
        db.attach(path, name=name)
        db.create_index(f"{name}.t", ["id"])
        return f"{name}.t"
    raise ValueError(kind)


def _columns(kind: str) -> str:
    return "id, x, y" if kind == "array" else "id, x, y, s"


def _keys(rows: int, count: int, seed: int = 11) -> Iterator[int]:
    import numpy as np

    keys = np.random.default_rng(seed).integers(0, rows, count).tolist()
    while True:
        yield from keys


def run(ctx: BenchContext) -> None:
    import duckdb

    import tesseradb

    rows = int(ctx.params["rows"])
    repeat = max(ctx.repeat, int(ctx.params["repeat"]))
    ctx.progress(f"generating {rows:,} rows")
    table = make_rows(rows)
    assert ctx.scratch is not None
    keys = _keys(rows, 1000)
    fixed = rows // 3  # the key whose answers are compared across systems

    def timed(system: str, case: str, query: Callable[[int], Any]) -> Any:
        ctx.measure(system, case, lambda: query(next(keys)), repeat=repeat, warmup=20)
        return query(fixed)

    answers: dict[str, dict[str, Any]] = {}

    def answer(case: str, system: str, value: Any) -> None:
        answers.setdefault(case, {})[system] = value

    peers: dict[str, Callable[[str, list[Any]], Any]] = {}
    con = duckdb.connect() if ctx.wants("duckdb") else None
    if con is not None:
        con.register("staging", table)
        con.execute("CREATE TABLE t AS SELECT * FROM staging")
        con.unregister("staging")
        peers["duckdb"] = lambda q, p: con.execute(q, p).fetchall()
    lite = None
    if ctx.wants("sqlite"):
        import sqlite3

        lite = sqlite3.connect(ctx.scratch / "latency.sqlite", check_same_thread=False)
        lite.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x REAL, y INTEGER, s TEXT)")
        lite.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?)", zip(*table.to_pydict().values(), strict=True)
        )
        lite.commit()
        peers["sqlite"] = lambda q, p: lite.execute(q, p).fetchall()
    db = tesseradb.connect(ctx.scratch / "latency.tdb") if ctx.wants("tessera") else None
    try:
        for system, run_peer in peers.items():
            answer(
                "select_1",
                system,
                timed(system, "select_1", lambda _k, r=run_peer: r("SELECT 1", [])),
            )
        if db is not None:
            answer(
                "select_1",
                "tessera",
                timed("tessera", "select_1", lambda _k: db.sql("SELECT 1").fetchall()),
            )
            names = {}
            for kind in KINDS:
                ctx.progress(f"storing the rows as {kind}")
                names[kind] = _store(db, kind, table, ctx.scratch)
        for kind in KINDS:
            columns = _columns(kind)
            for query, text, bind in (
                ("point", POINT, lambda k: [k]),
                ("range", RANGE, lambda k: [k, k + RANGE_ROWS - 1]),
            ):
                case = f"{query}_{kind}"
                sql = text.replace("id, x, y, s", columns)
                for system, run_peer in peers.items():
                    on_t = sql.format("t")
                    answer(
                        case,
                        system,
                        timed(system, case, lambda k, r=run_peer, q=on_t, b=bind: r(q, b(k))),
                    )
                if db is not None:
                    on_kind = sql.format(names[kind])
                    answer(
                        case,
                        "tessera",
                        timed(
                            "tessera", case, lambda k, q=on_kind, b=bind: db.sql(q, b(k)).fetchall()
                        ),
                    )
        if db is not None:
            _collection_cases(ctx, db, table, timed)
        for case, by_system in answers.items():
            ctx.check(case, by_system)
    finally:
        if db is not None:
            db.close()
        if con is not None:
            con.close()
        if lite is not None:
            lite.close()


def _collection_cases(
    ctx: BenchContext, db: Database, table: pa.Table, timed: Callable[..., Any]
) -> None:
    """A point query on a collection: through db.sql on a document path, and in Argo/SQL."""
    ctx.progress("storing the rows as a collection")
    docs = table.select(["id", "x", "y", "s"]).to_pylist()
    collection = db.create_collection("docs")
    collection.insert_many(docs)
    collection.compact()
    sql = "SELECT doc->>'id' AS id, doc->>'s' AS s FROM docs WHERE (doc->>'id')::BIGINT = ?"
    by_sql = timed("tessera", "point_collection_sql", lambda k: db.sql(sql, [k]).fetchall())
    argo = "SELECT id, s FROM docs WHERE id = ?"
    by_argo = timed("tessera", "point_collection_argo", lambda k: db.argo(argo, [k]))
    got = sorted((int(i), s) for i, s in by_sql)
    want = sorted((d["id"], d["s"]) for d in by_argo)
    ctx.check("point_collection", {"sql": got, "argo": want})


register(
    Benchmark(
        name="latency",
        description="the fixed cost of small statements on every relation kind vs DuckDB and SQLite native tables",
        scales={
            "tiny": {"rows": 10_000, "repeat": 50},
            "small": {"rows": 100_000, "repeat": 200},
            "large": {"rows": 1_000_000, "repeat": 200},
        },
        systems=("tessera", "duckdb", "sqlite"),
        run=run,
        default_scale="small",
    )
)
