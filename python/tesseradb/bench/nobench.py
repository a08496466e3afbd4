"""Benchmark ``nobench``: NoBench (the Argo paper, section 4) on every document configuration.

Systems: ``tessera`` (the default configuration, measured as itself),
``tessera-<backend>-<mapping>`` for SQLite, DuckDB, PostgreSQL and MariaDB
under argo1, argo3 and hybrid, and the JSON types of three peers: PostgreSQL
``jsonb`` (GIN index plus B-tree expression indexes on what the queries
filter), SQLite's JSON functions (expression indexes) and DuckDB's JSON type.
Every system loads the same JSON lines file and answers the twelve queries of
Table 1 with the same parameters; answers are compared as canonical JSON.

Cases: ``load`` (seconds for N objects, indexes included), ``q1``..``q11``
(seconds), ``q12`` (seconds to insert N/1000 further objects), and for the
tessera configurations ``load_memory``: the peak growth of this process's
resident memory during the load (bytes; the peers load in their servers or
through their own libraries).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from tesseradb.bench.registry import Benchmark, register
from tesseradb.bench.runner import BenchContext, peak_memory

BACKENDS = ("sqlite", "duckdb", "postgresql", "mariadb")
MAPPINGS = ("argo1", "argo3", "hybrid")
CONFIGURATIONS = tuple(f"tessera-{b}-{m}" for b in BACKENDS for m in MAPPINGS)
PEER_SYSTEMS = ("postgresql-jsonb", "sqlite-json", "duckdb-json")
QUERIES = tuple(f"q{i}" for i in range(1, 12))


# --- the generator ----------------------------------------------------------------------
def enc(i: int) -> str:
    """NoBench's unique strings: base32 of the text of ``i`` as a binary literal."""
    return base64.b32encode(bin(i).encode()).decode().rstrip("=")


class NoBench:
    """The NoBench objects for ``n`` (seeds 0..n-1, shuffled), deterministic for a given n."""

    SPARSE_VALUES = tuple(enc(1_000_000_007 + i) for i in range(10))

    def __init__(self, n: int) -> None:
        from wordfreq import top_n_list, word_frequency

        self.n = n
        self.words = top_n_list("en", 5000)
        self.weights = [word_frequency(w, "en") for w in self.words]
        order = list(range(n))
        random.Random(n).shuffle(order)
        self.order = order

    def document(self, seed: int, rng: random.Random) -> dict[str, Any]:
        n, half = self.n, self.n // 2
        other = (seed + half) % n if seed < n else seed + half
        kind = seed % 3
        doc: dict[str, Any] = {
            "str1": enc(seed),
            "str2": enc(other),
            "num": seed,
            "bool": seed % 2 == 1,
            "dyn1": enc(seed) if seed % 20 == 0 else seed,
            "dyn2": seed if kind == 0 else enc(seed) if kind == 1 else seed % 2 == 1,
            "nested_arr": rng.choices(self.words, self.weights, k=seed % 8),
            "nested_obj": {"str": enc(other), "num": other},
        }
        cluster = seed % 100
        for j in range(10):
            doc[f"sparse_{cluster:02d}{j}"] = rng.choice(self.SPARSE_VALUES)
        doc["thousandth"] = seed % 1000
        return doc

    def documents(self) -> Iterator[dict[str, Any]]:
        rng = random.Random(self.n + 1)
        for seed in self.order:
            yield self.document(seed, rng)

    def extra(self) -> list[dict[str, Any]]:
        """Q12's N/1000 further objects (seeds n, n+1, ...)."""
        rng = random.Random(self.n + 2)
        return [self.document(self.n + i, rng) for i in range(max(1, self.n // 1000))]

    def write(self, path: Path) -> dict[str, int]:
        """The objects as JSON lines; returns each word's document frequency (for Q8)."""
        frequency: dict[str, int] = {}
        with path.open("w", encoding="utf-8") as out:
            for doc in self.documents():
                out.write(json.dumps(doc, ensure_ascii=False) + "\n")
                for word in set(doc["nested_arr"]):
                    frequency[word] = frequency.get(word, 0) + 1
            # On disk before any load is timed: otherwise the first system loads while
            # the kernel still writes back the 0.7 GB file (1M objects), which the
            # systems after it do not.
            out.flush()
            os.fsync(out.fileno())
        return frequency


def parameters(n: int, runs: int, frequency: dict[str, int]) -> dict[str, list[dict[str, Any]]]:
    """Each query's parameters for ``runs`` runs, drawn as the paper says (same for every system)."""
    rng = random.Random(n + 3)
    width = max(1, n // 1000)
    target = n / 1000
    words = sorted(frequency, key=lambda w: (abs(frequency[w] - target), w))[: max(runs, 10)]
    out: dict[str, list[dict[str, Any]]] = {q: [] for q in QUERIES}
    for _ in range(runs):
        xx, yy = rng.sample(range(100), 2)
        out["q1"].append({})
        out["q2"].append({})
        out["q3"].append({"a": f"sparse_{xx:02d}0", "b": f"sparse_{xx:02d}9"})
        out["q4"].append({"a": f"sparse_{xx:02d}0", "b": f"sparse_{yy:02d}0"})
        out["q5"].append({"value": enc(rng.randrange(n))})
        lo = rng.randrange(max(1, n - width))
        out["q6"].append({"lo": lo, "hi": lo + width - 1})
        lo = rng.randrange(max(1, n - width))
        out["q7"].append({"lo": lo, "hi": lo + width - 1})
        out["q8"].append({"word": rng.choice(words)})
        out["q9"].append(
            {
                "key": f"sparse_{xx:02d}{rng.randrange(10)}",
                "value": rng.choice(NoBench.SPARSE_VALUES),
            }
        )
        lo = rng.randrange(max(1, n - n // 10))
        out["q10"].append({"lo": lo, "hi": lo + n // 10 - 1})
        lo = rng.randrange(max(1, n - width))
        out["q11"].append({"lo": lo, "hi": lo + width - 1})
    return out


# An answer with more objects than this is kept as its count and a digest of its sorted
# canonical form: Q1 and Q2 return every object, and at 10M objects keeping each system's
# answer as text would hold gigabytes of it for the comparison at the end.
DIGEST_ABOVE = 100_000


def canonical_objects(objects: list[Any]) -> list[str]:
    """Answers compared as sorted canonical JSON (jsonb does not keep key order)."""
    lines = sorted(json.dumps(o, sort_keys=True, ensure_ascii=False) for o in objects)
    if len(lines) <= DIGEST_ABOVE:
        return lines
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode())
        digest.update(b"\n")
    return [f"{len(lines):,} objects, sha256 {digest.hexdigest()}"]


def _grouped(rows: list[tuple[Any, Any]]) -> list[dict[str, Any]]:
    return [{"thousandth": int(t), "count(*)": int(c)} for t, c in rows]


def _without_missing(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Peers' projections build keys for missing attributes as null: drop them (NoBench has no nulls)."""
    out = []
    for obj in objects:
        kept = {k: v for k, v in obj.items() if v is not None}
        if kept:
            out.append(kept)
    return out


# --- TesseraDB ----------------------------------------------------------------------------
ARGO_QUERIES = {
    "q1": "SELECT str1, num FROM nobench",
    "q2": "SELECT nested_obj.str, nested_obj.num FROM nobench",
    "q3": "SELECT `{a}`, `{b}` FROM nobench",
    "q4": "SELECT `{a}`, `{b}` FROM nobench",
    "q5": "SELECT * FROM nobench WHERE str1 = :value",
    "q6": "SELECT * FROM nobench WHERE num BETWEEN :lo AND :hi",
    "q7": "SELECT * FROM nobench WHERE dyn1 BETWEEN :lo AND :hi",
    "q8": "SELECT * FROM nobench WHERE :word = ANY nested_arr",
    "q9": "SELECT * FROM nobench WHERE `{key}` = :value",
    "q10": "SELECT COUNT(*) FROM nobench WHERE num BETWEEN :lo AND :hi GROUP BY thousandth",
    "q11": (
        "SELECT * FROM nobench AS left INNER JOIN nobench AS right "
        "ON (left.nested_obj.str = right.str1) WHERE left.num BETWEEN :lo AND :hi"
    ),
}


class _Tessera:
    def __init__(self, db: Any, backend: str) -> None:
        self.db, self.backend = db, backend

    def load(self, mapping: str, path: Path) -> None:
        collection = self.db.create_collection("nobench", backend=self.backend, mapping=mapping)
        collection.load_jsonl(path)

    def query(self, name: str, params: dict[str, Any]) -> list[Any]:
        text = ARGO_QUERIES[name].format(
            **{k: v for k, v in params.items() if k in ("a", "b", "key")}
        )
        bound = {k: v for k, v in params.items() if k not in ("a", "b", "key")}
        return self.db.argo(text, bound or None)

    def insert(self, objects: list[dict[str, Any]]) -> None:
        self.db.collection("nobench").insert_many(objects)

    def drop(self) -> None:
        self.db.drop("nobench")


# --- peers ----------------------------------------------------------------------------------
class _PostgresJsonb:
    NUM = "(CASE WHEN jsonb_typeof(doc->'{f}') = 'number' THEN (doc->'{f}')::numeric END)"

    def __init__(self, url: str) -> None:
        import psycopg

        self.con = psycopg.connect(url, autocommit=True)

    def load(self, path: Path) -> None:
        con = self.con
        con.execute("DROP TABLE IF EXISTS nobench")
        con.execute("CREATE TABLE nobench (objid bigserial PRIMARY KEY, doc jsonb NOT NULL)")
        with (
            con.cursor() as cur,
            cur.copy("COPY nobench (doc) FROM STDIN") as copy,
            path.open("rb") as f,
        ):
            for line in f:
                copy.write_row((line.decode().rstrip("\n"),))
        con.execute("CREATE INDEX nobench_gin ON nobench USING gin (doc jsonb_path_ops)")
        con.execute("CREATE INDEX nobench_arr ON nobench USING gin ((doc->'nested_arr'))")
        con.execute("CREATE INDEX nobench_str1 ON nobench ((doc->>'str1'))")
        for f in ("num", "dyn1"):
            con.execute(f"CREATE INDEX nobench_{f} ON nobench ({self.NUM.format(f=f)})")
        con.execute("ANALYZE nobench")

    def query(self, name: str, p: dict[str, Any]) -> list[Any]:
        num, dyn1 = self.NUM.format(f="num"), self.NUM.format(f="dyn1")
        sql: str
        args: tuple[Any, ...] = ()
        if name == "q1":
            sql = "SELECT jsonb_build_object('str1', doc->'str1', 'num', doc->'num') FROM nobench"
        elif name == "q2":
            sql = (
                "SELECT jsonb_build_object('nested_obj', jsonb_build_object("
                "'str', doc->'nested_obj'->'str', 'num', doc->'nested_obj'->'num')) FROM nobench"
            )
        elif name in ("q3", "q4"):
            sql = (
                "SELECT jsonb_strip_nulls(jsonb_build_object(%s::text, doc->%s, %s::text, doc->%s)) "
                "FROM nobench WHERE doc ? %s OR doc ? %s"
            )
            args = (p["a"], p["a"], p["b"], p["b"], p["a"], p["b"])
        elif name == "q5":
            sql, args = (
                "SELECT doc FROM nobench WHERE doc->>'str1' = %s AND jsonb_typeof(doc->'str1') = 'string'",
                (p["value"],),
            )
        elif name == "q6":
            sql, args = f"SELECT doc FROM nobench WHERE {num} BETWEEN %s AND %s", (p["lo"], p["hi"])
        elif name == "q7":
            sql, args = (
                f"SELECT doc FROM nobench WHERE {dyn1} BETWEEN %s AND %s",
                (p["lo"], p["hi"]),
            )
        elif name == "q8":
            sql, args = "SELECT doc FROM nobench WHERE doc->'nested_arr' ? %s", (p["word"],)
        elif name == "q9":
            sql, args = (
                "SELECT doc FROM nobench WHERE doc @> %s::jsonb",
                (json.dumps({p["key"]: p["value"]}),),
            )
        elif name == "q10":
            sql = f"SELECT doc->'thousandth', count(*) FROM nobench WHERE {num} BETWEEN %s AND %s GROUP BY 1"
            return _grouped(self.con.execute(sql, (p["lo"], p["hi"])).fetchall())
        else:
            sql = (
                "SELECT jsonb_build_object('left', l.doc, 'right', r.doc) FROM nobench l JOIN nobench r "
                "ON l.doc->'nested_obj'->>'str' = r.doc->>'str1' "
                f"WHERE {num.replace('doc', 'l.doc')} BETWEEN %s AND %s"
            )
            args = (p["lo"], p["hi"])
        return [row[0] for row in self.con.execute(sql, args).fetchall()]

    def insert(self, objects: list[dict[str, Any]]) -> None:
        with self.con.cursor() as cur, cur.copy("COPY nobench (doc) FROM STDIN") as copy:
            for obj in objects:
                copy.write_row((json.dumps(obj),))

    def close(self) -> None:
        self.con.execute("DROP TABLE nobench")  # (its space, before the next system loads)
        self.con.close()


# Q1 and Q2 read the same in SQLite's and DuckDB's JSON dialects
_JSON_PROJECTIONS = {
    "q1": "SELECT json_object('str1', doc->'$.str1', 'num', doc->'$.num') FROM nobench",
    "q2": (
        "SELECT json_object('nested_obj', json_object('str', doc->'$.nested_obj.str', "
        "'num', doc->'$.nested_obj.num')) FROM nobench"
    ),
}


class _SQLiteJson:
    def __init__(self, path: Path) -> None:
        self.con = sqlite3.connect(path, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=NORMAL")
        self.con.execute("PRAGMA cache_size=-262144")

    def load(self, path: Path) -> None:
        con = self.con
        con.execute("CREATE TABLE nobench (objid INTEGER PRIMARY KEY, doc TEXT NOT NULL)")
        con.execute("BEGIN")
        with path.open(encoding="utf-8") as f:
            con.executemany("INSERT INTO nobench (doc) VALUES (?)", ((line,) for line in f))
        for f in ("str1", "num", "dyn1"):
            con.execute(f"CREATE INDEX nobench_{f} ON nobench (json_extract(doc, '$.{f}'))")
        con.execute("COMMIT")
        con.execute("ANALYZE")

    def query(self, name: str, p: dict[str, Any]) -> list[Any]:
        typed = "json_type(doc, '$.{f}') IN ('integer', 'real')"
        sql: str
        args: tuple[Any, ...] = ()
        if name in _JSON_PROJECTIONS:
            sql = _JSON_PROJECTIONS[name]
        elif name in ("q3", "q4"):
            a, b = f'$."{p["a"]}"', f'$."{p["b"]}"'
            sql = (
                "SELECT json_object(?, doc->?, ?, doc->?) FROM nobench "
                "WHERE json_type(doc, ?) IS NOT NULL OR json_type(doc, ?) IS NOT NULL"
            )
            args = (p["a"], a, p["b"], b, a, b)
            return _without_missing([json.loads(r[0]) for r in self.con.execute(sql, args)])
        elif name == "q5":
            sql, args = (
                "SELECT doc FROM nobench WHERE json_extract(doc, '$.str1') = ? AND json_type(doc, '$.str1') = 'text'",
                (p["value"],),
            )
        elif name in ("q6", "q7"):
            f = "num" if name == "q6" else "dyn1"
            sql = f"SELECT doc FROM nobench WHERE json_extract(doc, '$.{f}') BETWEEN ? AND ? AND {typed.format(f=f)}"
            args = (p["lo"], p["hi"])
        elif name == "q8":
            sql = (
                "SELECT doc FROM nobench WHERE EXISTS (SELECT 1 FROM json_each(doc, '$.nested_arr') "
                "WHERE json_each.type = 'text' AND json_each.value = ?)"
            )
            args = (p["word"],)
        elif name == "q9":
            key = f'$."{p["key"]}"'
            sql, args = (
                "SELECT doc FROM nobench WHERE json_extract(doc, ?) = ? AND json_type(doc, ?) = 'text'",
                (key, p["value"], key),
            )
        elif name == "q10":
            sql = (
                "SELECT json_extract(doc, '$.thousandth'), count(*) FROM nobench "
                f"WHERE json_extract(doc, '$.num') BETWEEN ? AND ? AND {typed.format(f='num')} GROUP BY 1"
            )
            return _grouped(self.con.execute(sql, (p["lo"], p["hi"])).fetchall())
        else:
            sql = (
                "SELECT json_object('left', json(l.doc), 'right', json(r.doc)) FROM nobench l JOIN nobench r "
                "ON json_extract(l.doc, '$.nested_obj.str') = json_extract(r.doc, '$.str1') "
                "WHERE json_extract(l.doc, '$.num') BETWEEN ? AND ?"
            )
            args = (p["lo"], p["hi"])
        return [json.loads(r[0]) for r in self.con.execute(sql, args)]

    def insert(self, objects: list[dict[str, Any]]) -> None:
        self.con.execute("BEGIN")
        self.con.executemany(
            "INSERT INTO nobench (doc) VALUES (?)", [(json.dumps(o),) for o in objects]
        )
        self.con.execute("COMMIT")

    def close(self) -> None:
        self.con.close()


class _DuckDBJson:
    def __init__(self, path: Path) -> None:
        import duckdb

        self.con = duckdb.connect(str(path))

    def load(self, path: Path) -> None:
        import pyarrow as pa

        with path.open(encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
        table = pa.table(
            {"objid": pa.array(range(1, len(lines) + 1), pa.int64()), "doc": pa.array(lines)}
        )
        self.con.execute("CREATE TABLE nobench (objid BIGINT, doc JSON)")
        self.con.register("lines", table)
        self.con.execute("INSERT INTO nobench SELECT objid, doc::JSON FROM lines")
        self.con.unregister("lines")
        self.next_objid = len(lines) + 1

    def query(self, name: str, p: dict[str, Any]) -> list[Any]:
        numeric = "json_type(doc, '$.{f}') IN ('BIGINT', 'UBIGINT', 'DOUBLE')"
        number = "TRY_CAST(json_extract_string(doc, '$.{f}') AS DOUBLE)"
        sql: str
        args: list[Any] = []
        if name in _JSON_PROJECTIONS:
            sql = _JSON_PROJECTIONS[name]
        elif name in ("q3", "q4"):
            a, b = f'$."{p["a"]}"', f'$."{p["b"]}"'
            sql = (
                "SELECT json_object(?, json_extract(doc, ?), ?, json_extract(doc, ?)) FROM nobench "
                "WHERE json_extract(doc, ?) IS NOT NULL OR json_extract(doc, ?) IS NOT NULL"
            )
            args = [p["a"], a, p["b"], b, a, b]
            return _without_missing(
                [json.loads(r[0]) for r in self.con.execute(sql, args).fetchall()]
            )
        elif name == "q5":
            sql, args = (
                "SELECT doc FROM nobench WHERE doc->>'$.str1' = ? AND json_type(doc, '$.str1') = 'VARCHAR'",
                [p["value"]],
            )
        elif name in ("q6", "q7"):
            f = "num" if name == "q6" else "dyn1"
            sql = f"SELECT doc FROM nobench WHERE {number.format(f=f)} BETWEEN ? AND ? AND {numeric.format(f=f)}"
            args = [p["lo"], p["hi"]]
        elif name == "q8":
            sql = "SELECT doc FROM nobench WHERE list_contains(json_extract_string(doc, '$.nested_arr[*]'), ?)"
            args = [p["word"]]
        elif name == "q9":
            key = f'$."{p["key"]}"'
            sql = "SELECT doc FROM nobench WHERE json_extract_string(doc, ?) = ? AND json_type(doc, ?) = 'VARCHAR'"
            args = [key, p["value"], key]
        elif name == "q10":
            sql = (
                "SELECT CAST(doc->>'$.thousandth' AS BIGINT), count(*) FROM nobench "
                f"WHERE {number.format(f='num')} BETWEEN ? AND ? AND {numeric.format(f='num')} GROUP BY 1"
            )
            return _grouped(self.con.execute(sql, [p["lo"], p["hi"]]).fetchall())
        else:
            sql = (
                "SELECT json_object('left', l.doc, 'right', r.doc) FROM nobench l JOIN nobench r "
                "ON l.doc->>'$.nested_obj.str' = r.doc->>'$.str1' "
                f"WHERE {number.format(f='num').replace('doc', 'l.doc')} BETWEEN ? AND ?"
            )
            args = [p["lo"], p["hi"]]
        return [json.loads(r[0]) for r in self.con.execute(sql, args).fetchall()]

    def insert(self, objects: list[dict[str, Any]]) -> None:
        import pyarrow as pa

        first = self.next_objid
        self.next_objid += len(objects)
        table = pa.table(
            {
                "objid": pa.array(range(first, first + len(objects)), pa.int64()),
                "doc": pa.array([json.dumps(o) for o in objects]),
            }
        )
        self.con.register("extra", table)
        self.con.execute("INSERT INTO nobench SELECT objid, doc::JSON FROM extra")
        self.con.unregister("extra")

    def close(self) -> None:
        self.con.close()


# --- the run ---------------------------------------------------------------------------------
def _measure_system(
    ctx: BenchContext,
    system: str,
    load: Callable[[], None],
    query: Callable[[str, dict[str, Any]], list[Any]],
    insert: Callable[[list[dict[str, Any]]], None],
    params: dict[str, list[dict[str, Any]]],
    extra: list[dict[str, Any]],
    answers: dict[str, dict[str, Any]],
    also: tuple[str, ...] = (),
) -> None:
    """Load, run Q1..Q11 with each run's parameters, then Q12; record under ``system`` (and ``also``)."""

    def measured(case: str, fn: Callable[[], Any], once: bool = False) -> Any:
        answer = ctx.measure(system, case, fn, **({"repeat": 1, "warmup": 0} if once else {}))
        for name in also:  # the same runs, reported under the other name too
            ctx.record(name, case, ctx.report.results[-1].runs)
        return answer

    with peak_memory() as peak:
        measured("load", load, once=True)
    if system.startswith("tessera"):
        for name in (system, *also):
            ctx.record(name, "load_memory", [float(peak[0])], "bytes", "B")
    for q in QUERIES:
        runs = iter(params[q])  # warm-up and timed runs each take the next parameters
        answers[q][system] = canonical_objects(measured(q, lambda q=q, r=runs: query(q, next(r))))
    measured("q12", lambda: insert(extra), once=True)


def run(ctx: BenchContext) -> None:
    from tesseradb import connect
    from tesseradb.bench.servers import mariadb_server, postgres_server
    from tesseradb.documents import DEFAULT_BACKEND, DEFAULT_MAPPING

    assert ctx.scratch is not None
    n = int(ctx.params["objects"])
    bench = NoBench(n)
    data = ctx.scratch / "nobench.jsonl"
    ctx.progress(f"generating {n:,} NoBench objects")
    frequency = bench.write(data)
    extra = bench.extra()
    params = parameters(n, ctx.warmup + ctx.repeat, frequency)
    answers: dict[str, dict[str, Any]] = {q: {} for q in QUERIES}
    default = f"tessera-{DEFAULT_BACKEND}-{DEFAULT_MAPPING}"

    with ExitStack() as stack:
        servers: dict[str, str] = {}
        on_postgres = [f"tessera-postgresql-{m}" for m in MAPPINGS] + ["postgresql-jsonb"]
        if any(ctx.wants(s) for s in on_postgres):
            servers["postgresql"] = stack.enter_context(postgres_server()).url
        if any(ctx.wants(f"tessera-mariadb-{m}") for m in MAPPINGS):
            servers["mariadb"] = stack.enter_context(mariadb_server()).url
        for system in CONFIGURATIONS:
            also = ("tessera",) if system == default and ctx.wants("tessera") else ()
            if not (ctx.wants(system) or also):
                continue
            _, backend, mapping = system.split("-")
            db = stack.enter_context(connect(ctx.scratch / f"{system}.tdb"))
            tessera = _Tessera(db, servers.get(backend, backend))
            _measure_system(
                ctx,
                system,
                lambda t=tessera, m=mapping: t.load(m, data),
                tessera.query,
                tessera.insert,
                params,
                extra,
                answers,
                also,
            )
            if backend in servers:
                tessera.drop()  # the next mapping reuses the server
            db.close()
            # (at 10M objects a SQLite configuration's files are ~28 GB: gone before the
            # next system loads, so that a run fits on a machine's disk)
            shutil.rmtree(ctx.scratch / f"{system}.tdb", ignore_errors=True)
        peers: dict[str, Callable[[], Any]] = {
            "postgresql-jsonb": lambda: _PostgresJsonb(servers["postgresql"]),
            "sqlite-json": lambda: _SQLiteJson(ctx.scratch / "peer.sqlite"),  # type: ignore[operator]
            "duckdb-json": lambda: _DuckDBJson(ctx.scratch / "peer.duckdb"),  # type: ignore[operator]
        }
        for system, make in peers.items():
            if not ctx.wants(system):
                continue
            peer = make()
            _measure_system(
                ctx,
                system,
                lambda p=peer: p.load(data),
                peer.query,
                peer.insert,
                params,
                extra,
                answers,
            )
            peer.close()
    for q in QUERIES:
        ctx.check(q, answers[q])


register(
    Benchmark(
        name="nobench",
        description="NoBench Q1-Q12 on Argo (argo1/argo3/hybrid x SQLite, DuckDB, PostgreSQL, MariaDB) vs JSON in PostgreSQL, SQLite, DuckDB",
        scales={
            "test": {"objects": 3_000},  # the test suite's smoke run
            "tiny": {"objects": 10_000},
            "small": {"objects": 100_000},
            "large": {"objects": 1_000_000},
            "xlarge": {"objects": 10_000_000},
        },
        systems=("tessera", *CONFIGURATIONS, *PEER_SYSTEMS),
        run=run,
        default_scale="tiny",
        notes=(
            "parameters are drawn per run as the paper says and are the same for every system",
            "load includes index builds; q12 inserts N/1000 further objects",
            "the default configuration is measured once and reported as tessera too",
        ),
    )
)
