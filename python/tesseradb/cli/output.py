"""Writing a SQL result as a terminal table, CSV, JSON lines or Parquet."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from tesseradb.sql import Result


def write_result(
    result: Result, fmt: str, output: Path | None, max_rows: int, console: Console
) -> None:
    table = result.arrow()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        if output is None:
            raise SystemExit("--format parquet needs --output FILE")
        pq.write_table(table, output)
        return
    if fmt == "csv":
        import pyarrow.csv as pacsv

        if output is not None:
            pacsv.write_csv(table, output)
        else:
            pacsv.write_csv(table, sys.stdout.buffer)
            sys.stdout.flush()
        return
    if fmt == "json":
        lines = (
            json.dumps(_jsonable(row), ensure_ascii=False, default=str) for row in table.to_pylist()
        )
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

    table = result.arrow()
    if not table.column_names:
        console.print("ok")
        return
    view = Table(*table.column_names, show_lines=False)
    for row in table.slice(0, max_rows).to_pylist():
        view.add_row(*("NULL" if v is None else str(v) for v in row.values()))
    console.print(view)
    more = table.num_rows - max_rows
    suffix = f" ({more:,} not shown)" if more > 0 else ""
    console.print(f"{table.num_rows:,} row{'s' if table.num_rows != 1 else ''}{suffix}")


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _json_value(v) for k, v in row.items()}


def _json_value(value: Any) -> Any:
    from decimal import Decimal

    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or infinities
    if isinstance(value, Decimal):  # DECIMAL and HUGEINT (sums of integers)
        return int(value) if value == value.to_integral_value() else float(value)
    return value
