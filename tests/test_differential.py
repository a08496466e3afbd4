"""Differential tests: every relation kind answers SQL as DuckDB does over a plain copy.

One hypothesis suite, parametrised over the kinds (Arrow relations, streams,
arrays, attached HDF5 tables, collections). Each example draws a table of a
value column ``c`` of one numeric type (integers at their limits, floats
with NaN, infinities and -0.0, NULLs where the kind holds them), a group
key ``g`` and, where the kind holds text, a string column ``s`` (empty and
non-ASCII strings). The data is stored in the kind, and each query's answer
through ``db.sql`` is compared with DuckDB's over an in-memory table of the
same rows. The native shortcuts (array chunk folds, stream and attached aggregates,
bitmap counts) must answer where they apply: the test asserts
``Result.shortcut`` for those queries, so a shortcut that silently fell back
to SQL cannot hide a wrong answer either.
"""

from __future__ import annotations

import itertools
import math
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tests.tallies import tally

INTEGERS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float32", "float64"]
STREAM_TYPE = {"float32": "float", "float64": "double"}  # others: the numpy name
EXAMPLES = int(os.environ.get("TESSERA_DIFFERENTIAL_EXAMPLES", "25"))  # scripts/fuzz runs more
# what the suite ran, printed at the end of the run (tests/tallies.py)
COUNTS = tally("differential")


@st.composite
def values_of(draw: st.DrawFn, dtype: str, n: int, finite: bool) -> list[Any]:
    if dtype in INTEGERS:
        info = np.iinfo(dtype)
        lo, hi = int(info.min), int(info.max)
        edges = sorted({lo, hi, lo + 1, hi - 1, 0, 1} | ({-1} if lo < 0 else set()))
        value = st.one_of(st.sampled_from(edges), st.integers(lo, hi), st.integers(-3, 3))
        return [v for v in draw(st.lists(value, min_size=n, max_size=n)) if lo <= v <= hi] or [0]
    width = 32 if dtype == "float32" else 64
    special = [0.0, -0.0, 1.5, -2.25]
    if not finite:
        special += [math.nan, math.inf, -math.inf]
    big = float(np.finfo(dtype).max)
    value = st.one_of(
        st.sampled_from([*special, big, -big]),
        st.floats(width=width, allow_nan=not finite, allow_infinity=not finite),
    )
    return draw(st.lists(value, min_size=n, max_size=n))


@st.composite
def tables(draw: st.DrawFn, kind: str) -> tuple[str, pa.Table]:
    """(dtype of c, the rows) for ``kind``; NULLs and text only where it holds them."""
    floats_ok = kind != "collection"  # JSON has no NaN or infinities
    # JSON integers are int64 in a collection (larger ones are refused, a documented limit)
    dtype = draw(
        st.sampled_from([t for t in INTEGERS + FLOATS if kind != "collection" or t != "uint64"])
    )
    n = draw(st.integers(1, 40))
    c = draw(values_of(dtype, n, finite=not floats_ok))
    n = len(c)
    g = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    columns: dict[str, pa.Array] = {"g": pa.array(g, pa.int16())}
    nullable = kind in ("arrow", "array", "collection")
    mask = draw(st.lists(st.booleans(), min_size=n, max_size=n)) if nullable else [False] * n
    if kind == "array" and dtype in INTEGERS:
        mask = [False] * n  # an integer attribute's NULL is its fill value, drawn as a value
    columns["c"] = pa.array(c, pa.from_numpy_dtype(np.dtype(dtype)), mask=np.array(mask))
    if kind in ("arrow", "collection"):
        text = st.sampled_from(["", "a", "é", "日本", "x y", "Ω≈ç√"])
        columns["s"] = pa.array(draw(st.lists(text, min_size=n, max_size=n)), pa.string())
    return dtype, pa.table(columns)


# --- storing the rows in each kind: returns the table DuckDB should see ----------
_names = itertools.count()


def store(db: tesseradb.Database, kind: str, dtype: str, data: pa.Table, folder: Path) -> str:
    name = f"{kind}{next(_names)}"
    if kind == "arrow":
        db.register(name, data)
    elif kind == "stream":
        fields = [
            {"name": "g", "type": "int16"},
            {"name": "c", "type": STREAM_TYPE.get(dtype, dtype)},
        ]
        stream = db.create_stream(name, {"fields": fields, "index": ["c", "g"]}, segment_bytes=64)
        stream.ingest(data)
    elif kind == "array":
        # a nullable float attribute's fill (NaN) is its NULL: NULLs are written as NaN
        nullable = dtype in FLOATS
        attrs = {"g": "int16", "c": {"dtype": dtype, "nullable": nullable}}
        array = db.create_array(name, [{"name": "x", "end": data.num_rows, "chunk": 7}], attrs)
        c = data.column("c").to_numpy(zero_copy_only=False).astype(dtype)
        array[0 : data.num_rows] = {"g": data.column("g").to_numpy(), "c": c}
    elif kind == "attached":
        import h5py

        path = folder / f"{name}.h5"
        with h5py.File(path, "w") as f:
            f["t/g"] = data.column("g").to_numpy()
            f["t/c"] = data.column("c").to_numpy().astype(dtype)
        db.attach(path, name=name)
        db.create_index(f"{name}.t", ["c", "g"])
        return f"{name}.t"
    elif kind == "collection":
        docs = [{k: v for k, v in row.items() if v is not None} for row in data.to_pylist()]
        db.create_collection(name).insert_many(docs)
    return name


def visible(kind: str, name: str) -> str:
    """The relation as the queries see it: collections are (objid, doc), so unpack them."""
    if kind != "collection":
        return name
    return (
        f"(SELECT (doc->>'g')::SMALLINT AS g, (doc->>'c')::{{ctype}} AS c, doc->>'s' AS s "
        f"FROM {name})"
    )


DUCK_TYPE = {
    "int8": "TINYINT",
    "int16": "SMALLINT",
    "int32": "INTEGER",
    "int64": "BIGINT",
    "uint8": "UTINYINT",
    "uint16": "USMALLINT",
    "uint32": "UINTEGER",
    "uint64": "UBIGINT",
    "float32": "FLOAT",
    "float64": "DOUBLE",
}


def sql_literal(value: Any, dtype: str) -> str:
    if dtype in INTEGERS:
        return str(int(value))
    return repr(float(value))


def queries(data: pa.Table, dtype: str, kind: str) -> list[tuple[str, str | None]]:
    """(SQL with {t}, the shortcut that must answer it or None)."""
    finite = [v for v in data.column("c").to_pylist() if v is not None and math.isfinite(v)]
    pivot = sql_literal(sorted(finite)[len(finite) // 2] if finite else 0, dtype)
    low = sql_literal(min(finite) if finite else 0, dtype)
    fold = "aggregate" if kind in ("array", "stream", "attached") else None
    out: list[tuple[str, str | None]] = [
        ("SELECT count(*), count(c), sum(c), avg(c), min(c), max(c) FROM {t}", fold),
        ("SELECT count(*), sum(c), min(c), max(c) FROM {t} WHERE c > " + pivot, None),
        (f"SELECT count(*) FROM {{t}} WHERE c BETWEEN {low} AND {pivot}", None),
        (
            "SELECT g, count(*), sum(c), avg(c), min(c), max(c) FROM {t} GROUP BY g ORDER BY g",
            None,
        ),
        ("SELECT stddev_samp(c), var_pop(c) FROM {t}", None),
        ("SELECT c, g FROM {t} WHERE c <= " + pivot + " ORDER BY c NULLS LAST, g", None),
        ("SELECT a.g, count(*) FROM {t} a JOIN {t} b ON a.g = b.g GROUP BY a.g ORDER BY a.g", None),
    ]
    if dtype in INTEGERS:
        # an exclusive bound at the type's limit still excludes it (it once became no bound)
        lowest = str(int(np.iinfo(np.dtype(dtype)).min))
        out.append(("SELECT count(*), count(c), min(c) FROM {t} WHERE c != " + lowest, fold))
        out.append(("SELECT c, g FROM {t} WHERE c > " + lowest + " ORDER BY c, g", None))
    if kind == "array":
        # grouped by a dimension: the per-chunk fold answers, one group per cell
        out.append(
            ("SELECT x, count(c), sum(c), min(c), max(c) FROM {t} GROUP BY x ORDER BY x", fold)
        )
    if kind == "attached":
        # settled by the bitmap index of g alone (exact bins): no row is read
        out.append(("SELECT count(*) FROM {t} WHERE g >= 1 AND g <= 2", "count"))
    if "s" in data.column_names:
        out.append(("SELECT s, count(*), min(c) FROM {t} GROUP BY s ORDER BY s", None))
    # plain columns under an exact predicate: the scan's rows filtered, no DuckDB statement
    # (a collection is read through a subquery here, which is DuckDB's to answer)
    lookup = "lookup" if kind != "collection" else None
    out += [
        ("SELECT c, g FROM {t} WHERE g = 1", lookup),
        ("SELECT * FROM {t} WHERE g >= 2 AND g <> 3", lookup),
        ("SELECT g AS grp FROM {t} WHERE g BETWEEN 1 AND 2 OR g IS NULL ORDER BY g DESC", lookup),
        ("SELECT g, c FROM {t} WHERE c > " + pivot, None),  # a lookup if the literal is exact
    ]
    return out


def canonical(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows in one order (for a statement without ORDER BY; NULL and NaN comparable)."""

    def key(value: Any) -> tuple[int, Any]:
        if value is None:
            return (2, 0)
        if isinstance(value, float) and math.isnan(value):
            return (1, 0)
        return (0, value)

    return sorted(rows, key=lambda row: [key(v) for v in row])


def rounding_bound(data: pa.Table) -> float:
    """How far two summation orders of ``c`` may differ in double precision.

    A floating sum depends on the order of its terms (DuckDB's own parallel
    sum does too): orders differ by at most n * eps * sum(|x|), doubled here
    for the division of avg and the rounding of the result. Infinite when
    sum(|x|) overflows: then one order may reach inf where another does not,
    and no floating sum is comparable (integers stay exact).
    """
    finite = [abs(float(v)) for v in data.column("c").to_pylist() if v is not None]
    finite = [v for v in finite if math.isfinite(v)]
    try:
        total = math.fsum(finite)
    except OverflowError:
        return math.inf
    return 2.0 * (len(finite) + 1) * np.finfo(np.float64).eps * total


ORDER_DEPENDENT = ("sum(", "avg(", "stddev", "var_")  # floating results of summation


def same_value(ours: Any, theirs: Any, bound: float) -> bool:
    """Equal, or for floating sums within ``bound`` (see rounding_bound)."""
    if isinstance(ours, Decimal) or isinstance(theirs, Decimal):
        return ours is not None and theirs is not None and Decimal(ours) == Decimal(theirs)
    if not (isinstance(ours, float) or isinstance(theirs, float)):
        return ours == theirs
    if ours is None or theirs is None:
        return ours is theirs
    a, b = float(ours), float(theirs)
    if a == b or (math.isnan(a) and math.isnan(b)):
        return True
    if math.isinf(bound):
        return True  # the order of an overflowing sum decides it: see rounding_bound
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return False
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=bound)


def same(
    columns: list[str], ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]], bound: float
) -> bool:
    """Row for row equal; only summing columns (sum, avg, stddev, var) get ``bound``."""
    bounds = [bound if c.lower().startswith(ORDER_DEPENDENT) else 0.0 for c in columns]
    return len(ours) == len(theirs) and all(
        len(a) == len(b) and all(same_value(x, y, e) for x, y, e in zip(a, b, bounds, strict=True))
        for a, b in zip(ours, theirs, strict=True)
    )


KINDS = ["arrow", "stream", "array", "attached", "collection"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_answers_as_duckdb_over_a_plain_copy(kind: str, tmp_path: Path) -> None:
    db = tesseradb.connect(tmp_path / "db")
    reference = duckdb.connect()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(tables(kind))
    def check(drawn: tuple[str, pa.Table]) -> None:
        dtype, data = drawn
        name = store(db, kind, dtype, data, tmp_path)
        plain = data
        if kind == "array":
            plain = data.add_column(0, "x", pa.array(range(data.num_rows), pa.int64()))
            if dtype in FLOATS:  # the documented meaning: the fill value NaN reads as NULL
                c = plain.column("c").to_numpy(zero_copy_only=False)
                column = pa.array(c, plain.schema.field("c").type, mask=np.isnan(c))
                plain = plain.set_column(plain.schema.get_field_index("c"), "c", column)
        if kind != "collection":  # the columns in the relation's order (HDF5 sorts them)
            plain = plain.select(db.schema(name).names)
        reference.register("plain", plain)
        ours_name = visible(kind, name).replace("{ctype}", DUCK_TYPE[dtype])
        COUNTS[f"{kind} examples"] += 1
        bound = rounding_bound(data) if dtype in FLOATS else 0.0
        if math.isinf(bound):
            COUNTS[f"{kind} examples whose floating sums overflow (order-dependent)"] += 1
        for template, shortcut in queries(data, dtype, kind):
            ours = db.sql(template.format(t=ours_name))
            theirs = reference.sql(template.format(t="plain")).fetchall()
            got = ours.fetchall()
            if "ORDER BY" not in template and "GROUP BY" not in template:
                got, theirs = canonical(got), canonical(theirs)
            if ours.shortcut == "lookup":  # the same Arrow types as DuckDB's answer too
                plain_types = reference.sql(template.format(t="plain")).to_arrow_table().schema
                assert ours.arrow().schema == plain_types, f"{kind} {dtype}: {template}"
            assert same(ours.columns, got, theirs, bound), (
                f"{kind} {dtype}: {template}\nours:   {got}\nduckdb: {theirs}"
            )
            COUNTS[f"{kind} queries"] += 1
            if shortcut is not None:
                assert ours.shortcut == shortcut, f"{kind} {dtype}: {template} ran as SQL"
                COUNTS[f"{kind} answered by the {shortcut} shortcut"] += 1
                # the same shortcut hands the same rows to a sink (exports, the server)
                batches: list[pa.Table] = []
                sunk = db.stream_sql(
                    template.format(t=ours_name),
                    lambda r, into=batches: into.append(r.read_all()),
                )
                assert sunk.shortcut == shortcut, f"{kind} {dtype}: {template} streamed as SQL"
                table = pa.concat_tables(batches)
                streamed = list(zip(*(c.to_pylist() for c in table.columns), strict=True))
                if "ORDER BY" not in template and "GROUP BY" not in template:
                    streamed = canonical(streamed)
                assert same(ours.columns, streamed, theirs, bound), (
                    f"{kind} {dtype}: {template} streamed\nours:   {streamed}\nduckdb: {theirs}"
                )
                COUNTS[f"{kind} answered by the {shortcut} shortcut through a sink"] += 1
        reference.unregister("plain")
        db.drop(name.split(".")[0])

    try:
        check()
    finally:
        db.close()
