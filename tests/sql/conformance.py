"""The conformance suite every Relation passes: a scan with a predicate holds
every matching row (a superset), with exactly the columns asked for."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tesseradb.sql import Predicate, Relation
from tesseradb.sql.predicate import ColumnDomain, Interval, RangeSet


class RelationConformance:
    """Subclass per relation kind and implement :meth:`make_relation`.

    The reference data is a pyarrow table with columns ``k`` (int64, sorted),
    ``v`` (float64 with NaN and NULL) and ``s`` (string with NULL); the
    relation under test must hold the same rows.
    """

    def make_relation(self, table: pa.Table) -> Relation:
        raise NotImplementedError

    @staticmethod
    def reference_table(n: int = 2000) -> pa.Table:
        k = list(range(n))
        v = [
            None if i % 17 == 0 else (float("nan") if i % 23 == 0 else (i * 7919 % 1000) / 10)
            for i in k
        ]
        s = [None if i % 13 == 0 else f"s{i % 50:02d}" for i in k]
        return pa.table(
            {
                "k": pa.array(k, pa.int64()),
                "v": pa.array(v, pa.float64()),
                "s": pa.array(s, pa.string()),
            }
        )

    def _rows(self, reader: pa.RecordBatchReader) -> list[tuple[Any, ...]]:
        table = reader.read_all()
        return sorted(
            tuple("nan" if isinstance(x, float) and x != x else x for x in row.values())
            for row in table.to_pylist()
        )

    def test_full_scan_returns_every_row(self) -> None:
        table = self.reference_table()
        rel = self.make_relation(table)
        assert rel.schema().names == table.schema.names
        assert len(self._rows(rel.scan(None, None))) == table.num_rows

    def test_projection_returns_the_asked_columns(self) -> None:
        rel = self.make_relation(self.reference_table())
        out = rel.scan(["s", "k"], None).read_all()
        assert out.column_names == ["s", "k"]

    @settings(max_examples=60, deadline=None)
    @given(
        lo=st.integers(-10, 2100),
        width=st.integers(0, 500),
        vlo=st.one_of(st.none(), st.floats(0, 100)),
        values=st.lists(st.sampled_from(["s01", "s02", "s49", "zz"]), max_size=3),
        nulls=st.booleans(),
    )
    def test_scan_with_predicate_is_a_superset(
        self, lo: int, width: int, vlo: float | None, values: list[str], nulls: bool
    ) -> None:
        table = self.reference_table()
        rel = self.make_relation(table)
        pred = Predicate.between("k", lo, lo + width)
        if vlo is not None:
            pred = pred.and_(
                Predicate.on("v", ColumnDomain(RangeSet.of([Interval(vlo, None)]), nulls))
            )
        if values:
            pred = pred.and_(Predicate.on("s", ColumnDomain(RangeSet.points(values), nulls)))
        scanned = rel.scan(None, pred).read_all()
        expected = table.filter(pred.mask(table)) if pred.mask(table) is not None else table
        got = (
            scanned.filter(pred.mask(scanned))
            if scanned.num_rows and pred.mask(scanned) is not None
            else scanned
        )
        assert self._rows(
            pa.RecordBatchReader.from_batches(got.schema, got.to_batches())
        ) == self._rows(pa.RecordBatchReader.from_batches(expected.schema, expected.to_batches()))
        estimate = rel.estimate(pred)
        assert estimate.rows is None or estimate.rows >= expected.num_rows
