"""Plain DuckDB's answer to compare a shortcut's with, when the shortcut ran on a cluster."""

from __future__ import annotations

import math
from typing import Any

import duckdb

import tesseradb


def plain_answer(db: tesseradb.Database, relation: str, sql: str) -> list[tuple[Any, ...]]:
    """``sql`` over ``relation`` answered by plain DuckDB over the relation's rows, which no
    shortcut can answer for it."""
    plain = duckdb.connect()
    plain.register("plain_rows", db.sql(f"SELECT * FROM {relation}").arrow())
    return plain.sql(sql.replace(f"FROM {relation}", "FROM plain_rows")).fetchall()


def same_rows(ours: list[tuple[Any, ...]], plain: list[tuple[Any, ...]]) -> bool:
    """Row for row equal; floats (summed in another order) to 1e-9."""
    return len(ours) == len(plain) and all(
        len(a) == len(b)
        and all(
            math.isclose(float(x), float(y), rel_tol=1e-9)
            if isinstance(x, float) or isinstance(y, float)
            else x == y
            for x, y in zip(a, b, strict=True)
        )
        for a, b in zip(ours, plain, strict=True)
    )
