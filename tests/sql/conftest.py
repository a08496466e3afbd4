"""Fixtures shared by the SQL property tests: one database and one plain DuckDB per module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pytest

import tesseradb


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tesseradb.Database]:
    with tesseradb.connect(tmp_path_factory.mktemp("sql") / "db.tdb") as database:
        yield database


@pytest.fixture(scope="module")
def reference() -> Iterator[Any]:
    """DuckDB with nothing of TesseraDB in between: the answer pushdown must not change."""
    con = duckdb.connect()
    yield con
    con.close()
