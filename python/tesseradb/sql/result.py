"""The answer of a SQL statement: an Arrow table with the conversions users expect."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from tesseradb.sql.relation import ScanStats

__all__ = ["Result"]


class Result:
    """Rows returned by :meth:`Database.sql`, held as one Arrow table.

    Statements that return nothing (DDL) give an empty result with no columns.
    """

    def __init__(
        self,
        table: pa.Table,
        scan_stats: dict[str, ScanStats] | None = None,
        shortcut: str | None = None,
    ) -> None:
        self._table = table
        self.scan_stats: dict[str, ScanStats] = scan_stats or {}
        """Per relation read (by name): the scans, batches and rows it produced."""
        self.shortcut = shortcut
        """How a relation answered the statement without DuckDB making rows, if one did:
        ``"count"`` (a count the relation knows, such as a bitmap index's),
        ``"aggregate"`` (aggregates from storage, such as an array's chunk folds) or
        ``"lookup"`` (plain columns of the rows its scan found, filtered by the engine
        exactly as SQL would); None when DuckDB ran the statement over scanned rows."""

    @property
    def columns(self) -> list[str]:
        return list(self._table.column_names)

    @property
    def num_rows(self) -> int:
        return self._table.num_rows

    def __len__(self) -> int:
        return self._table.num_rows

    def arrow(self) -> pa.Table:
        """The rows as a ``pyarrow.Table`` (no copy)."""
        return self._table

    def df(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame."""
        return self._table.to_pandas()

    def fetchall(self) -> list[tuple[Any, ...]]:
        """The rows as a list of tuples, like a DB-API cursor."""
        columns = [_python_values(c) for c in self._table.columns]
        return list(zip(*columns, strict=True)) if columns else []

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self._table.slice(0, 1)
        return tuple(_python_values(c)[0] for c in rows.columns) if rows.num_rows else None

    def scalar(self) -> Any:
        """The first column of the first row (``None`` if there are no rows)."""
        row = self.fetchone()
        return row[0] if row else None

    def numpy(self) -> dict[str, np.ndarray]:
        """Column name to numpy array; a column with NULLs becomes a masked array."""
        import numpy as np

        out: dict[str, np.ndarray] = {}
        for name, column in zip(self._table.column_names, self._table.columns, strict=True):
            if column.null_count:
                mask = column.is_null().to_numpy(zero_copy_only=False)
                filled = column.to_numpy(zero_copy_only=False)
                out[name] = np.ma.masked_array(filled, mask=mask)
            else:
                out[name] = column.to_numpy(zero_copy_only=False)
        return out

    def to_pylist(self) -> list[dict[str, Any]]:
        """The rows as a list of dicts."""
        names = self._table.column_names
        return [dict(zip(names, row, strict=True)) for row in self.fetchall()]

    def to_polars(self) -> Any:
        """The rows as a polars DataFrame (no copy where Arrow allows)."""
        import polars as pl

        from tesseradb.errors import ExportError

        try:
            return pl.from_arrow(self._table)
        except (pl.exceptions.PolarsError, TypeError, ValueError) as err:
            kinds = ", ".join(f"{f.name} ({f.type})" for f in self._table.schema)
            raise ExportError(
                f"Result.to_polars: polars cannot take these columns [{kinds}]: {err}"
            ) from None

    def to_parquet(self, path: str | os.PathLike[str]) -> None:
        """Write the rows to a Parquet file (every DuckDB type, nested ones included)."""
        self._write(path, "parquet")

    def to_csv(self, path: str | os.PathLike[str]) -> None:
        """Write the rows to a CSV file with a header line (nested values as DuckDB prints them)."""
        self._write(path, "csv")

    def _write(self, path: str | os.PathLike[str], fmt: str) -> None:
        from tesseradb.errors import InvalidArgumentError
        from tesseradb.transfer import write_rows

        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentError(
                f"Result.to_{fmt}: path is a file name, not {type(path).__name__}"
            )
        table = self._table
        write_rows(lambda sink: sink(table.to_reader()), os.fspath(path), fmt, None)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())

    def __repr__(self) -> str:
        return f"Result({self._table.num_rows} rows: {', '.join(self.columns)})"


def _python_values(column: Any) -> list[Any]:
    """A column as Python values; integral decimals (DuckDB's HUGEINT sums) as ints, as DuckDB gives them."""
    import pyarrow as pa

    values = column.to_pylist()
    if pa.types.is_decimal(column.type) and column.type.scale == 0:
        return [None if v is None else int(v) for v in values]
    return values
