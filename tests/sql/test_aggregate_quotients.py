"""``SELECT avg(x) / 10 FROM rel WHERE ...`` (MDDS's GHCN queries divide an aggregate
by a number) is answered by the relation's aggregate shortcut and one division; the
answer's names, types and values equal plain DuckDB's over the same rows."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tesseradb

FIELDS = {  # stream field type -> Arrow type
    "int32_t": pa.int32(),
    "int64_t": pa.int64(),
    "uint32_t": pa.uint32(),
    "float": pa.float32(),
    "double": pa.float64(),
}
NAMES = {t: f"c_{t}" for t in FIELDS}

_count = itertools.count()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with tesseradb.connect(tmp_path_factory.mktemp("quotients") / "db") as database:
        yield database


def _values(kind: str) -> st.SearchStrategy[Any]:
    if kind == "int32_t":
        return st.integers(-(2**31), 2**31 - 1)
    if kind == "int64_t":
        return st.integers(-(2**63), 2**63 - 1)
    if kind == "uint32_t":
        return st.integers(0, 2**32 - 1)
    if kind == "float":
        return st.floats(width=32, allow_nan=False, allow_infinity=False)
    return st.floats(allow_nan=False, allow_infinity=False)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 30))
    return pa.table(
        {
            NAMES[k]: pa.array(draw(st.lists(_values(k), min_size=n, max_size=n)), t)
            for k, t in FIELDS.items()
        }
    )


def _same(a: Any, b: Any, order_dependent: bool = False) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if order_dependent and math.isclose(a, b, rel_tol=1e-12):
            return True
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b) and type(a) is type(b)


def test_a_quotient_equals_duckdbs_and_takes_the_shortcut_where_it_may(
    db: tesseradb.Database,
) -> None:
    answered: Counter[tuple[str, str, str | None]] = Counter()

    @settings(max_examples=60, deadline=None)
    @given(
        table=tables(),
        fn=st.sampled_from(["avg", "min", "max", "count"]),
        column=st.sampled_from(list(NAMES.values())),
        number=st.sampled_from(["10", "10.0", "3", "0.1", "7.25", "1"]),
        aggregate_first=st.booleans(),
        bound=st.integers(-5, 5),
    )
    def check(
        table: pa.Table, fn: str, column: str, number: str, aggregate_first: bool, bound: int
    ) -> None:
        name = f"s{next(_count)}"
        fields = [{"name": NAMES[k], "type": k} for k in FIELDS]
        stream = db.create_stream(name, {"fields": fields, "index": [NAMES["int32_t"]]})
        if table.num_rows:
            stream.ingest(table)
        stream.flush()
        aggregate = f"{fn}({column})"
        item = f"{aggregate} / {number}" if aggregate_first else f"{number} / {aggregate}"
        where = f"WHERE {NAMES['int32_t']} > {bound * 10**8}"
        ours = db.sql(f"SELECT {item} FROM {name} {where}")
        answered[(fn, column, ours.shortcut)] += 1
        plain = duckdb.connect()
        plain.register("src", table)
        theirs = plain.execute(f"SELECT {item} FROM src {where}")
        assert ours.columns == [d[0] for d in theirs.description]
        assert ours.types == [str(d[1]) for d in theirs.description]
        rows, expected = ours.fetchall(), theirs.fetchall()
        assert len(rows) == len(expected) == 1
        # a float column's avg adds in the stream's order, DuckDB's in the table's: the last
        # bits may differ (docs/sql.md); every other answer is exactly DuckDB's
        in_order = fn == "avg" and column in (NAMES["float"], NAMES["double"])
        assert _same(rows[0][0], expected[0][0], in_order), (rows, expected)
        db.drop(name)

    check()
    shortcut = {(fn, column) for fn, column, how in answered if how == "aggregate"}
    left = {(fn, column) for fn, column, how in answered if how is None}
    floats = {("min", NAMES["float"]), ("max", NAMES["float"])}
    # (a FLOAT minimum or maximum DuckDB divides as FLOAT: left to it)
    assert shortcut and not (shortcut & floats)
    assert left <= floats, left


def test_the_ghcn_style_quotients_take_the_shortcut(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        stream = db.create_stream(
            "obs",
            {
                "fields": [
                    {"name": "element_id", "type": "uint32_t"},
                    {"name": "element_value", "type": "int32_t"},
                    {"name": "elevation", "type": "float"},
                ],
                "index": ["element_id", "elevation"],
            },
        )
        rng = np.random.default_rng(3)
        stream.ingest(
            pa.table(
                {
                    "element_id": pa.array(rng.integers(0, 4, 1000), pa.uint32()),
                    "element_value": pa.array(rng.integers(-500, 500, 1000), pa.int32()),
                    "elevation": pa.array(rng.uniform(0, 5000, 1000), pa.float32()),
                }
            )
        )
        stream.flush()
        for text in [
            "SELECT avg(element_value)/10 FROM obs WHERE elevation > 4000 AND element_id = 1",
            "SELECT max(element_value)/10.0 FROM obs WHERE element_id = 2",
            "SELECT avg(element_value)/10.0 AS v, count(*) FROM obs WHERE element_id = 3",
        ]:
            result = db.sql(text)
            assert result.shortcut == "aggregate", text
        # a FLOAT maximum is divided as FLOAT by DuckDB: left to it
        assert db.sql("SELECT max(elevation)/10 FROM obs").shortcut is None
