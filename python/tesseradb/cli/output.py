"""Writing a SQL result as a terminal table, CSV, JSON lines or Parquet, as DuckDB writes its values."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from tesseradb.errors import OutputError

if TYPE_CHECKING:
    from rich.console import Console

    from tesseradb.sql import Result


def write_result(
    result: Result, fmt: str, output: Path | None, max_rows: int, console: Console
) -> None:
    """The rows as DuckDB writes them: Parquet by DuckDB's writer, JSON lines by its
    ``to_json``, CSV and the terminal table as its text form of each value."""
    from tesseradb.sql.values import json_lines, write_csv, write_parquet

    table, conversion = result.exact_arrow(), result.conversion
    if fmt == "parquet":
        if output is None:
            raise OutputError("--format parquet needs --output FILE")
        write_parquet(table, conversion, str(output))
        return
    if fmt == "csv":
        if output is not None:
            write_csv(table, conversion, str(output))
            return
        with tempfile.TemporaryDirectory(prefix="tessera-csv-") as folder:
            written = Path(folder) / "rows.csv"
            write_csv(table, conversion, str(written))
            with written.open(encoding="utf-8") as rows:
                shutil.copyfileobj(rows, sys.stdout)
        sys.stdout.flush()
        return
    if fmt == "json":
        lines = json_lines(table, conversion)
        if output is not None:
            output.write_text("".join(line + "\n" for line in lines))
        else:
            for line in lines:
                sys.stdout.write(line + "\n")
        return
    render_table(result, max_rows, console)
    if output is not None:
        output.write_text(console.export_text() if console.record else "")


def render_table(result: Result, max_rows: int, console: Console) -> None:
    from rich.table import Table

    from tesseradb.sql.values import text_columns

    table = result.exact_arrow()
    if not table.column_names:
        console.print("ok")
        return
    view = Table(*table.column_names, show_lines=False)
    shown = text_columns(table.slice(0, max_rows), result.conversion)
    for row in zip(*(c.to_pylist() for c in shown.columns), strict=True):
        view.add_row(*("NULL" if v is None else v for v in row))
    console.print(view)
    more = table.num_rows - max_rows
    suffix = f" ({more:,} not shown)" if more > 0 else ""
    console.print(f"{table.num_rows:,} row{'s' if table.num_rows != 1 else ''}{suffix}")
