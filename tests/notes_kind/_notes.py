"""One ``notes`` object: numbered lines of text in ``notes/<name>/notes.jsonl``, each write
replacing the file whole (written beside it, synced, renamed), so a write is kept whole or
not at all, and a reader reads one version."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from tesseradb.errors import DamagedStorageError, DatabaseClosedError, ReadOnlyError

FILE = "notes.jsonl"
SCHEMA = pa.schema([("call", pa.int64()), ("line", pa.string())])


class Notes:
    """The notes of one object; ``add`` writes, ``table`` reads."""

    _lifetime: Any = None  # (the database sets it: every call is refused once it closed)

    def __init__(self, name: str, folder: Path, read_only: bool) -> None:
        self.name = name
        self.folder = folder
        self.read_only = read_only

    def _open_check(self) -> None:
        if self._lifetime is not None and self._lifetime.closed:
            raise DatabaseClosedError(f"notes {self.name!r}: the database is closed")

    def lines(self) -> list[dict[str, Any]]:
        self._open_check()
        path = self.folder / FILE
        if not path.exists():
            return []
        found = []
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            try:
                found.append(json.loads(text))
            except ValueError:
                raise DamagedStorageError(
                    f"notes {self.name!r}: {path}: line {number} is not JSON"
                ) from None
        return found

    def add(self, lines: list[str], call: int = 0) -> int:
        """Append ``lines`` (one write: all or nothing, durable on return); how many."""
        self._open_check()
        if self.read_only:
            raise ReadOnlyError(f"cannot add to notes {self.name!r}: the database is read-only")
        kept = self.lines() + [{"call": call, "line": line} for line in lines]
        partial = self.folder / (FILE + ".partial")
        with open(partial, "w") as out:
            out.write("".join(json.dumps(row) + "\n" for row in kept))
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, self.folder / FILE)
        directory = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        return len(lines)

    def table(self) -> pa.Table:
        rows = self.lines()
        return pa.table(
            {"call": [r["call"] for r in rows], "line": [r["line"] for r in rows]}, schema=SCHEMA
        )


class NotesRelation:
    """The notes as a relation for SQL (read whole at each scan: a toy)."""

    def __init__(self, notes: Notes) -> None:
        self.notes = notes
        self.name = notes.name

    def schema(self) -> pa.Schema:
        return SCHEMA

    def scan(self, columns: Any, predicate: Any) -> pa.RecordBatchReader:
        table = self.notes.table()
        if columns is not None:
            table = table.select(list(columns))
        return table.to_reader()

    def estimate(self, predicate: Any) -> Any:
        from tesseradb.sql.relation import Estimate

        return Estimate(rows=len(self.notes.lines()))
