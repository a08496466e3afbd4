"""The answer of a SQL statement: an Arrow table with the conversions users expect, each
giving what DuckDB's own API gives (see :mod:`tesseradb.sql.values`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from tesseradb.sql.relation import ScanStats
    from tesseradb.sql.values import Conversion

__all__ = ["Result"]


class Result:
    """Rows returned by :meth:`Database.sql`, held as one Arrow table (a small result of
    plain types as the rows DuckDB gave, its Arrow table made when first asked for).

    Statements that return nothing (DDL) give an empty result with no columns.
    """

    def __init__(
        self,
        table: pa.Table,
        scan_stats: dict[str, ScanStats] | None = None,
        shortcut: str | None = None,
        conversion: Conversion | None = None,
    ) -> None:
        self._held: pa.Table | None = table  # (lossless Arrow where DuckDB ran the statement)
        self._rows: list[tuple[Any, ...]] | None = None  # (a small result's, see _of_rows)
        self._schema: pa.Schema | None = None
        self._conversion = conversion
        self.scan_stats: dict[str, ScanStats] = scan_stats or {}
        """Per relation read (by name): the scans, batches and rows it produced."""
        self.shortcut = shortcut
        """How a relation answered the statement without DuckDB making rows, if one did:
        ``"count"`` (a count the relation knows, such as a bitmap index's),
        ``"aggregate"`` (aggregates from storage, such as an array's chunk folds) or
        ``"lookup"`` (plain columns of the rows its scan found, filtered by the engine
        exactly as SQL would); None when DuckDB ran the statement over scanned rows."""

    @classmethod
    def _of_rows(
        cls,
        rows: list[tuple[Any, ...]],
        schema: pa.Schema,
        scan_stats: dict[str, ScanStats] | None = None,
        conversion: Conversion | None = None,
    ) -> Result:
        """A small result fetched as rows of plain types (whose Python values DuckDB and
        pyarrow give alike); its Arrow table, with ``schema``, is made when asked for."""
        result = cls(None, scan_stats, conversion=conversion)  # type: ignore[arg-type]
        result._rows, result._schema = rows, schema
        return result

    @property
    def _table(self) -> pa.Table:
        if self._held is None:
            import pyarrow as pa

            assert self._rows is not None and self._schema is not None
            columns = list(zip(*self._rows, strict=True)) if self._rows else []
            self._held = pa.table(
                [
                    _column(list(columns[i]) if columns else [], field.type)
                    for i, field in enumerate(self._schema)
                ],
                schema=self._schema,
            )
        return self._held

    @property
    def columns(self) -> list[str]:
        if self._schema is not None:
            return list(self._schema.names)
        return list(self._table.column_names)

    @property
    def num_rows(self) -> int:
        if self._rows is not None:
            return len(self._rows)
        return self._table.num_rows

    def __len__(self) -> int:
        return self.num_rows

    @property
    def conversion(self) -> Conversion:
        """The DuckDB type of each column and the settings its conversions follow."""
        if self._conversion is None:
            from tesseradb.sql.values import Conversion, duckdb_types

            self._conversion = Conversion(duckdb_types(self._table.schema))
        return self._conversion

    @property
    def types(self) -> list[str]:
        """The DuckDB type of each column (``BIGINT``, ``STRUCT(a INTEGER)``, ...)."""
        return list(self.conversion.types)

    def arrow(self) -> pa.Table:
        """The rows as a ``pyarrow.Table``, as DuckDB's ``arrow()`` gives them (no copy
        unless a column's type has a lossless form the session did not ask for)."""
        from tesseradb.sql.values import as_duckdb_arrow

        return as_duckdb_arrow(self._table, self.conversion)

    def exact_arrow(self) -> pa.Table:
        """The rows as Arrow that loses no value (DuckDB's ``arrow_lossless_conversion``
        form): what the server sends, read back exactly by :class:`Result`."""
        return self._table

    def df(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame, as DuckDB's ``df()`` gives them."""
        from tesseradb.sql.values import to_pandas

        return to_pandas(self._table, self.conversion)

    def fetchall(self) -> list[tuple[Any, ...]]:
        """The rows as a list of tuples of the Python values DuckDB's ``fetchall`` gives."""
        from tesseradb.sql.values import python_rows

        if self._rows is not None:
            return list(self._rows)
        return python_rows(self._table, self.conversion)

    def fetchone(self) -> tuple[Any, ...] | None:
        from tesseradb.sql.values import python_rows

        if self._rows is not None:
            return self._rows[0] if self._rows else None
        rows = python_rows(self._table.slice(0, 1), self.conversion)
        return rows[0] if rows else None

    def scalar(self) -> Any:
        """The first column of the first row (``None`` if there are no rows)."""
        row = self.fetchone()
        return row[0] if row else None

    def numpy(self) -> dict[str, np.ndarray]:
        """Column name to numpy array, as DuckDB's ``fetchnumpy()`` gives them; a column
        with NULLs becomes a masked array."""
        from tesseradb.sql.values import to_numpy

        return to_numpy(self._table, self.conversion)

    def to_pylist(self) -> list[dict[str, Any]]:
        """The rows as a list of dicts."""
        names = self._table.column_names
        return [dict(zip(names, row, strict=True)) for row in self.fetchall()]

    def to_polars(self) -> Any:
        """The rows as a polars DataFrame (no copy where Arrow allows)."""
        import polars as pl

        from tesseradb.errors import ExportError

        try:
            return pl.from_arrow(self.arrow())
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
        from tesseradb._rows import write_rows
        from tesseradb.errors import InvalidArgumentError

        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentError(
                f"Result.to_{fmt}: path is a file name, not {type(path).__name__}"
            )
        table = self.arrow()
        write_rows(lambda sink: sink(table.to_reader()), os.fspath(path), fmt, None)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())

    def __repr__(self) -> str:
        return f"Result({self._table.num_rows} rows: {', '.join(self.columns)})"


def _column(values: list[Any], type_: pa.DataType) -> pa.Array:
    """Python values of a plain column as Arrow of ``type_``; DuckDB's lossless BOOLEAN
    is the ``arrow.bool8`` extension, stored as int8."""
    import pyarrow as pa

    if isinstance(type_, pa.BaseExtensionType):
        storage = pa.array([None if v is None else int(v) for v in values], type_.storage_type)
        return pa.ExtensionArray.from_storage(type_, storage)
    return pa.array(values, type=type_)
