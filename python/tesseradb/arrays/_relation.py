"""An array as a SQL relation: chunk pruning, vectorised filters, native aggregates
(the rows are made in ``_rows.py``, the aggregates in ``_aggregate.py``).

Rows are the cells of every written chunk: the dimension columns (world
coordinates, int64) then the attributes; a nullable attribute's fill value
reads as NULL. Predicates on dimensions become a box that prunes chunks and
clips the cells read; predicates on attributes filter each chunk's cells with
Arrow compute. ``SELECT agg(attr), ... FROM array [WHERE ...] [GROUP BY
dims]`` is answered by :func:`aggregate` from the chunks directly, without
making rows: per chunk, numpy reductions over the non-grouped axes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tesseradb.arrays._aggregate import aggregate
from tesseradb.arrays._rows import estimate_rows, match, relation_schema, scan_batches

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pyarrow as pa

    from tesseradb.arrays._array import Array
    from tesseradb.sql.predicate import Predicate
    from tesseradb.sql.relation import Estimate

__all__ = ["ArrayRelation"]


class ArrayRelation:
    """The :class:`Relation` of an array (what ``db.sql`` reads)."""

    def __init__(self, array: Array) -> None:
        self.array = array
        self.name = array.name

    def schema(self) -> pa.Schema:
        return relation_schema(self.array.schema)

    def scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> pa.RecordBatchReader:
        """The cells of the written chunks matching ``predicate``, one batch per chunk part."""
        import pyarrow as pa

        full = self.schema()
        out = full if columns is None else pa.schema([full.field(match(full, c)) for c in columns])
        return pa.RecordBatchReader.from_batches(
            out, scan_batches(self.array, out.names, predicate)
        )

    def estimate(self, predicate: Predicate | None = None) -> Estimate:
        from tesseradb.sql.relation import Estimate

        rows, _, _ = estimate_rows(self.array, predicate)
        schema = self.array.schema
        per_cell = 8 * schema.ndim + sum(a.numpy_dtype.itemsize for a in schema.attrs)
        return Estimate(rows=rows, bytes=rows * per_cell)

    def describe_scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> list[str]:
        rows, touched, written = estimate_rows(self.array, predicate)
        return [f"chunks read: {touched} of {written} written ({rows} cells)"]

    def aggregate(
        self,
        items: Sequence[tuple[str, str, str | None]],
        group_by: Sequence[str],
        predicate: Predicate | None,
        ambiguous: Mapping[str, Sequence[float]],
    ) -> pa.Table | None:
        """A single-array aggregate query answered from the chunks (None: run it as SQL).

        A WHERE with ``ambiguous`` float values goes to SQL: the chunk
        reductions do not look at the rows the filter keeps.
        """
        if ambiguous:
            return None
        return aggregate(self.array, items, group_by, predicate)
