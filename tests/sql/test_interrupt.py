"""An interrupt (Ctrl-C, a cancel, a served client's cancel request) may land on any
statement the engine runs on the cursor, the BEGIN of its own transaction included:
it is always an InterruptedStatementError, and nothing of the statement is kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

import tesseradb
from tesseradb.errors import InterruptedStatementError
from tesseradb.sql import instance


class _InterruptedAt:
    """A cursor whose first statement starting with ``prefix`` is interrupted (as DuckDB
    interrupts one running when ``interrupt()`` lands); everything else passes through."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, prefix: str) -> None:
        self._cursor = cursor
        self._prefix: str | None = prefix

    def execute(self, text: str, *args: Any, **kwargs: Any) -> Any:
        if self._prefix is not None and text.startswith(self._prefix):
            self._prefix = None
            raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
        return self._cursor.execute(text, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@pytest.mark.parametrize("prefix", ["BEGIN TRANSACTION", "COMMIT"])
def test_an_interrupt_on_the_engines_own_statements_is_an_interrupted_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        db.sql("CREATE TABLE t (x INTEGER)")
        real_cursor = instance.DuckDBInstance.cursor

        def cursor(self: instance.DuckDBInstance) -> instance.KeptCursor:
            kept = real_cursor(self)
            kept.cursor = _InterruptedAt(kept.cursor, prefix)  # type: ignore[assignment]
            return kept

        monkeypatch.setattr(instance.DuckDBInstance, "cursor", cursor)
        with pytest.raises(InterruptedStatementError, match="nothing of it was kept"):
            db.sql("CREATE TABLE u AS SELECT 1 AS y; INSERT INTO t VALUES (1)")
        monkeypatch.setattr(instance.DuckDBInstance, "cursor", real_cursor)
        assert sorted(db.tables()) == ["t"]
        assert db.sql("SELECT count(*) FROM t").fetchall() == [(0,)]
        assert db.sql("SELECT 7").fetchall() == [(7,)]
