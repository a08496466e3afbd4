"""ArrowRelation passes the relation conformance suite and prunes by zone maps."""

from __future__ import annotations

import pyarrow as pa

from tesseradb.sql import ArrowRelation, Predicate, Relation
from tests.sql.conformance import RelationConformance


class TestArrowRelation(RelationConformance):
    def make_relation(self, table: pa.Table) -> Relation:
        return ArrowRelation("t", table, batch_rows=128)


def test_zone_maps_skip_batches_of_clustered_data() -> None:
    table = pa.table({"k": list(range(10_000)), "v": [i % 7 for i in range(10_000)]})
    rel = ArrowRelation("t", table, batch_rows=1000)
    pred = Predicate.between("k", 2500, 2600)
    assert rel.estimate(pred).rows == 1000  # one batch of ten can hold the range
    assert rel.scan(["k"], pred).read_all().num_rows == 101
    assert rel.estimate(Predicate.between("v", 8, 9)).rows == 0


def test_accepts_batches_streams_and_dicts() -> None:
    table = pa.table({"x": [1, 2, 3]})
    assert ArrowRelation("a", table.to_batches()[0]).table.num_rows == 3
    assert ArrowRelation("b", table.to_reader()).table.num_rows == 3
    assert ArrowRelation("c", {"x": [1, 2]}).table.num_rows == 2
    assert isinstance(ArrowRelation("d", table), Relation)
