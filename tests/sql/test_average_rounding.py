"""``avg`` of integers answered from storage rounds as DuckDB does: the sum made a double,
then divided. Past 2**53 that differs in the last bit from the exactly rounded quotient
(Python's ``int / int``), which the shortcuts once gave (found by the quotient property
test: ``10 / avg(c)`` over a stream)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

import tesseradb

# a sum whose exact quotient by 3 and by 6 rounds otherwise than float(sum) / n
BIG = 30582818376593781


def _duckdb_avg(values: list[int], type_: str) -> float:
    plain = duckdb.connect()
    return plain.execute(
        f"SELECT avg(x) FROM (SELECT unnest($1::{type_}[]) AS x)", [values]
    ).fetchone()[0]


def test_a_streams_average_of_large_integers_rounds_as_duckdbs(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        fields = [{"name": "k", "type": "int32"}, {"name": "v", "type": "int64"}]
        stream = db.create_stream("s", {"fields": fields, "index": ["k"]})
        values = [BIG, 0, 0, 0, 0, 0]
        stream.ingest(pa.table({"k": pa.array(range(6), pa.int32()), "v": pa.array(values)}))
        stream.flush()
        for n in (3, 6):
            result = db.sql(f"SELECT avg(v) FROM s WHERE k < {n}")
            assert result.shortcut == "aggregate"
            got = result.fetchall()[0][0]
            assert got == _duckdb_avg(values[:n], "BIGINT") != BIG / n


def test_an_arrays_average_of_integers_past_int64_rounds_as_duckdbs(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        array = db.create_array("a", [{"name": "i", "end": 3, "chunk": 3}], {"u": "uint64"})
        # a sum past int64 (kept in Python ints) whose exact quotient rounds otherwise
        values = [12760426345129647411, 16549211864931911856, 13501577854261840965]
        array[0:3] = {"u": np.array(values, dtype=np.uint64)}
        result = db.sql("SELECT avg(u) FROM a")
        assert result.shortcut == "aggregate"
        got = result.fetchall()[0][0]
        assert got == _duckdb_avg(values, "UBIGINT") != sum(values) / 3
