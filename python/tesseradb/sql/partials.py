"""Partial aggregates folded over batches of rows, and combined over parallel tasks.

A relation that answers ``SELECT count(*), sum(c), ... FROM rel WHERE ...``
itself (a stream from its found records, an attached table from its scan
tasks) folds each batch into :class:`Partials`; tasks that ran apart (threads,
Dask workers) are combined with :meth:`Partials.merge`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Partials", "answerable"]

FUNCTIONS = ("count", "avg", "min", "max", "sum")


def answerable(
    items: Sequence[tuple[str, str, str | None]], schema: pa.Schema, hidden: Sequence[str] = ()
) -> list[tuple[str, str, str | None]] | None:
    """``items`` (output name, function, column or None for ``*``) with each column named as
    ``schema`` names it, or None if :class:`Partials` cannot answer one: a column the schema
    lacks (or ``hidden``), a column not of numbers, a function but count, avg, min, max and
    sum, or one of those but count over ``*``."""
    import pyarrow as pa

    lower = {n.lower(): n for n in schema.names if n not in hidden}
    wanted: list[tuple[str, str, str | None]] = []
    for out, fn, column in items:
        name = lower.get(column.lower()) if column is not None else None
        if column is not None and name is None:
            return None
        if name is not None:
            type_ = schema.field(name).type
            numeric = pa.types.is_integer(type_) or pa.types.is_floating(type_)
            if not numeric or fn not in FUNCTIONS:
                return None
        elif fn != "count":
            return None
        wanted.append((out, fn, name))
    return wanted


class Partials:
    """Running count, sum, min, max and NaN per column over batches of rows.

    ``add`` folds a batch, ``merge`` another ``Partials`` (a parallel task's),
    and ``result`` gives one aggregate as DuckDB gives it: ``count`` is the
    rows (these relations hold no NULLs), integer sums are exact (HUGEINT:
    Arrow's decimal128(38, 0)), NaN is above every number, an empty input
    gives NULL. Picklable: a Dask worker's partials travel to the client.
    """

    def __init__(self, columns: list[str]) -> None:
        self.rows = 0
        self.sums: dict[str, Any] = dict.fromkeys(columns, 0)
        self.lows: dict[str, Any] = dict.fromkeys(columns)
        self.highs: dict[str, Any] = dict.fromkeys(columns)
        self.nan = dict.fromkeys(columns, False)

    def add(self, batch: pa.RecordBatch) -> None:
        import numpy as np

        self.rows += batch.num_rows
        if not batch.num_rows:
            return
        for name in self.sums:
            values = batch.column(name).to_numpy()
            if values.dtype.kind == "f":
                # inf + -inf is NaN and a sum may overflow to inf: SQL's answers, not warnings
                with np.errstate(invalid="ignore", over="ignore"):
                    self.sums[name] += float(np.sum(values, dtype=np.float64))
                nan = np.isnan(values)
                if nan.any():
                    self.nan[name] = True
                    values = values[~nan]
                    if not len(values):
                        continue
            else:
                # exact: in int64 while no overflow is possible, else in Python integers
                bound = max(abs(int(values.min())), abs(int(values.max())))
                if bound * len(values) < 2**63:
                    self.sums[name] += int(np.sum(values, dtype=np.int64))
                else:
                    self.sums[name] += sum(values.tolist())
            low, high = values.min(), values.max()
            if self.lows[name] is None or low < self.lows[name]:
                self.lows[name] = low
            if self.highs[name] is None or high > self.highs[name]:
                self.highs[name] = high

    def merge(self, other: Partials) -> None:
        """Fold in the partials of other rows of the same columns."""
        self.rows += other.rows
        for name in self.sums:
            self.sums[name] += other.sums[name]
            self.nan[name] = self.nan[name] or other.nan[name]
            low, high = other.lows[name], other.highs[name]
            if low is not None and (self.lows[name] is None or low < self.lows[name]):
                self.lows[name] = low
            if high is not None and (self.highs[name] is None or high > self.highs[name]):
                self.highs[name] = high

    def result(self, fn: str, column: str | None, schema: pa.Schema) -> pa.Array:
        import pyarrow as pa

        if fn == "count":
            return pa.array([self.rows], pa.int64())
        assert column is not None
        type_ = schema.field(column).type
        if fn == "avg":
            # as DuckDB: the sum made a double, then divided (an integer sum divided
            # exactly, as Python's int / int does, differs in the last bit past 2**53)
            value = None if not self.rows else float(self.sums[column]) / self.rows
            return pa.array([value], pa.float64())
        if fn == "sum":
            if pa.types.is_integer(type_):
                # exact, as DuckDB's HUGEINT sum of integers (Arrow: decimal128(38, 0))
                from decimal import Decimal

                total = Decimal(self.sums[column]) if self.rows else None
                return pa.array([total], pa.decimal128(38, 0))
            return pa.array([self.sums[column] if self.rows else None], pa.float64())
        if not self.rows:
            return pa.array([None], type_)
        if fn == "max" and self.nan[column]:  # NaN is the largest value
            return pa.array([math.nan], type_)
        value = self.lows[column] if fn == "min" else self.highs[column]
        if value is None:  # only NaN
            return pa.array([math.nan], type_)
        return pa.array([value.item()], type_)
