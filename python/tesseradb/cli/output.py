"""Writing a SQL result as a terminal table, CSV, JSON lines or Parquet."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb.errors import OutputError

if TYPE_CHECKING:
    import pyarrow as pa
    from rich.console import Console

    from tesseradb.sql import Result


def write_result(
    result: Result, fmt: str, output: Path | None, max_rows: int, console: Console
) -> None:
    table = result.arrow()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        if output is None:
            raise OutputError("--format parquet needs --output FILE")
        pq.write_table(_as_text(table, nested=False), output)
        return
    if fmt == "csv":
        import pyarrow.csv as pacsv

        table = _as_text(table, nested=True)

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


def _as_text(table: pa.Table, nested: bool) -> pa.Table:
    """``table`` with the columns a format cannot hold as text: intervals (Parquet and
    CSV have none) and, for CSV, lists, structs and maps as JSON text."""
    import pyarrow as pa
    import pyarrow.types as t

    def unsupported(kind: pa.DataType) -> bool:
        if t.is_interval(kind) or t.is_duration(kind):
            return True
        if nested and (t.is_nested(kind) or t.is_dictionary(kind)):
            return True
        if t.is_nested(kind):
            return any(unsupported(kind.field(i).type) for i in range(kind.num_fields))
        return False

    columns = []
    for column, field in zip(table.columns, table.schema, strict=True):
        if unsupported(field.type):
            texts = [
                None
                if v is None
                else json.dumps(_json_value(v), ensure_ascii=False, default=str)
                if t.is_nested(field.type)
                else str(_json_value(v))
                for v in column.to_pylist()
            ]
            columns.append(pa.array(texts, pa.string()))
        else:
            columns.append(column)
    return pa.table(columns, names=table.column_names)


def render_table(result: Result, max_rows: int, console: Console) -> None:
    from rich.table import Table

    table = result.arrow()
    if not table.column_names:
        console.print("ok")
        return
    view = Table(*table.column_names, show_lines=False)
    for row in table.slice(0, max_rows).to_pylist():
        view.add_row(*("NULL" if v is None else str(_json_value(v)) for v in row.values()))
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
    if type(value).__name__ == "MonthDayNano":  # an INTERVAL
        return interval_text(value)
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        # a MAP arrives as a list of (key, value) pairs
        if value and all(isinstance(p, tuple) and len(p) == 2 for p in value):
            return {str(k): _json_value(v) for k, v in value}
        return [_json_value(v) for v in value]
    return value


def interval_text(value: Any) -> str:
    """An INTERVAL (months, days, nanoseconds) as DuckDB writes it: ``1 year 2 months 3 days 04:05:06``."""
    months, days, nanos = value.months, value.days, value.nanoseconds
    parts = []
    years = int(months / 12)  # truncated toward zero: -14 months is -1 year -2 months
    months -= years * 12
    for amount, unit in ((years, "year"), (months, "month"), (days, "day")):
        if amount:
            parts.append(f"{amount} {unit}{'s' if abs(amount) != 1 else ''}")
    if nanos or not parts:
        sign = "-" if nanos < 0 else ""
        micros = abs(nanos) // 1000
        seconds, micros = divmod(micros, 1_000_000)
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        clock = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
        parts.append(clock + (f".{micros:06d}".rstrip("0") if micros else ""))
    return " ".join(parts)
