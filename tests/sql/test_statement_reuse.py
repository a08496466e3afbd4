"""What statements keep between them (cursors, registered slots, the attached table store)
never changes an answer."""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

import tesseradb
from tesseradb.sql import ArrowRelation


class _SlowRelation(ArrowRelation):
    """Scans wait a moment, so that two statements run at once (two cursors to keep)."""

    def scan(self, columns: Any, predicate: Any) -> pa.RecordBatchReader:
        time.sleep(0.2)
        return super().scan(columns, predicate)


def test_a_kept_slot_never_shadows_a_table_made_later_under_its_name(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE TABLE one AS SELECT 1 AS n")
        db.register("x", _SlowRelation("x", pa.table({"a": [1, 2, 3]})))
        # two statements at once, reading a plain table too: two cursors that USE the
        # store are kept, each with a slot registered for x
        with ThreadPoolExecutor(2) as pool:
            sums = list(pool.map(lambda _: db.sql("SELECT sum(a) FROM x, one").fetchall(), [0, 1]))
        assert sums == [[(6,)], [(6,)]]
        db.unregister("x")
        db.sql("CREATE TABLE x AS SELECT 40 AS a")  # takes (and closes) one kept cursor
        for _ in range(3):  # the other still has its slot for x: it must not answer
            assert db.sql("SELECT sum(a) FROM x, one").fetchall() == [(40,)]
        db.sql("DROP TABLE x")
        db.register("x", pa.table({"b": ["new"]}))  # the name again, other columns
        assert db.sql("SELECT * FROM x, one").fetchall() == [("new", 1)]


def test_a_table_store_replaced_while_attached_is_read_afresh(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "a") as a:
        a.sql("CREATE TABLE t AS SELECT 'a' AS source")
    with tesseradb.connect(tmp_path / "b") as b:
        b.sql("CREATE TABLE t AS SELECT 'b' AS source")
    with tesseradb.connect(tmp_path / "a") as db:
        assert db.sql("SELECT source FROM t").fetchall() == [("a",)]  # attached now
        store = tmp_path / "a" / "tables.duckdb"
        replacement = tmp_path / "replacement.duckdb"
        shutil.copy(tmp_path / "b" / "tables.duckdb", replacement)
        replacement.replace(store)  # a new inode under the same name
        assert db.sql("SELECT source FROM t").fetchall() == [("b",)]
