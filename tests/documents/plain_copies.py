"""The documents of a collection as DuckDB sees them without TesseraDB: the reference for
differential tests of ``db.sql`` over collections."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import pyarrow as pa


def plain_copy(docs: list[dict[str, Any]], name: str = "c") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection where ``name`` holds ``docs`` as the collection's relation
    shows them: ``objid`` from 1 and ``doc`` the JSON text."""
    plain = duckdb.connect()
    plain.register(
        name,
        pa.table(
            {
                "objid": pa.array(range(1, len(docs) + 1), pa.int64()),
                "doc": pa.array([json.dumps(d, ensure_ascii=False) for d in docs], pa.json_()),
            }
        ),
    )
    return plain
