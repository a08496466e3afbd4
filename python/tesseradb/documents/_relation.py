"""A collection as a relation for ``db.sql``: columns ``objid`` (BIGINT) and ``doc`` (JSON).

Documents can then meet arrays, streams and attached files in one statement
through DuckDB's JSON functions (``doc->>'str1'``). A range or set on
``objid`` is pushed down; everything else is filtered by DuckDB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import Estimate

if TYPE_CHECKING:
    from tesseradb.documents._collection import Collection

__all__ = ["CollectionRelation"]

SCAN_BATCH_OBJECTS = 50_000


class CollectionRelation:
    """The objects of one collection, rebuilt, as Arrow batches of (objid, doc)."""

    def __init__(self, collection: Collection) -> None:
        self.collection = collection
        self.name = collection.name

    def schema(self) -> pa.Schema:
        return pa.schema([("objid", pa.int64()), ("doc", pa.json_())])

    def _objid_bounds(self, predicate: Predicate | None) -> tuple[str, list[int]]:
        if predicate is None:
            return "1 = 1", []
        lower = {k.lower(): v for k, v in predicate.items()}
        domain = lower.get("objid")
        if domain is None:
            return "1 = 1", []
        hull = domain.ranges.hull()
        if hull is None:
            return "1 = 0", []
        parts, params = [], []
        if hull.lo is not None and not (isinstance(hull.lo, float) and math.isnan(hull.lo)):
            parts.append("objid >= ?")
            params.append(math.floor(hull.lo))
        if hull.hi is not None and not (isinstance(hull.hi, float) and math.isnan(hull.hi)):
            parts.append("objid <= ?")
            params.append(math.ceil(hull.hi))
        return (" AND ".join(parts) or "1 = 1"), params

    def scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> pa.RecordBatchReader:
        full = self.schema()
        names = full.names if columns is None else list(columns)
        schema = pa.schema([full.field(n) for n in names])
        if predicate is not None and predicate.is_false:
            return pa.RecordBatchReader.from_batches(schema, iter(()))
        where, params = self._objid_bounds(predicate)
        mapping = self.collection.mapping
        if "doc" not in names:  # objids alone: nothing to rebuild
            sql = f"SELECT objid FROM ({mapping.objids_sql()}) AS ids WHERE {where} ORDER BY objid"
            with self.collection.transaction():
                ids = [row[0] for row in mapping.backend.execute(sql, params)]
            batch = pa.record_batch([pa.array(ids, pa.int64())], names=["objid"])
            return pa.RecordBatchReader.from_batches(schema, iter([batch] if names else []))
        with self.collection.transaction():
            documents = mapping.documents(where, tuple(params))

        def batches() -> Iterator[pa.RecordBatch]:
            objids: list[int] = []
            docs: list[str] = []
            for objid, doc in documents:
                objids.append(objid)
                docs.append(json.dumps(doc, ensure_ascii=False))
                if len(objids) >= SCAN_BATCH_OBJECTS:
                    yield batch(objids, docs)
                    objids, docs = [], []
            if objids:
                yield batch(objids, docs)

        def batch(objids: list[int], docs: list[str]) -> pa.RecordBatch:
            made = {"objid": pa.array(objids, pa.int64()), "doc": pa.array(docs, pa.json_())}
            return pa.record_batch([made[n] for n in names], schema=schema)

        return pa.RecordBatchReader.from_batches(schema, batches())

    def estimate(self, predicate: Predicate | None) -> Estimate:
        return Estimate(rows=self.collection.count())
