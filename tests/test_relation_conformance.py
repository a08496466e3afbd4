"""The shipped relation conformance suite (tesseradb.testing.relation), run for every relation kind.

Each class stores the same rows as one kind of relation and declares the
capabilities that kind has; the suite checks the Relation contract and
each capability against the plain rows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa

from tesseradb.database import Database
from tesseradb.testing.relation import RelationTests


class TestArrowRelation(RelationTests):
    def make(self, db: Database, folder: Path, data: pa.Table) -> tuple[str, pa.Table]:
        from tesseradb.sql import ArrowRelation

        # small batches, so that zone maps prune some and keep others
        db.register("arrow_rows", ArrowRelation("arrow_rows", data, batch_rows=32))
        return "arrow_rows", data


class TestStream(RelationTests):
    capabilities = frozenset({"aggregate", "describe_scan", "top"})

    def make(self, db: Database, folder: Path, data: pa.Table) -> tuple[str, pa.Table]:
        fields = [{"name": "k", "type": "int64"}, {"name": "v", "type": "float64"}]
        stream = db.create_stream(
            "stream_rows",
            {"fields": fields, "index": ["k"]},
            max_chunk_records=16,
            indexes=[["k"]],
        )
        stream.ingest(data)
        stream.flush()
        return "stream_rows", data


class TestArray(RelationTests):
    capabilities = frozenset({"aggregate", "describe_scan"})

    def make(self, db: Database, folder: Path, data: pa.Table) -> tuple[str, pa.Table]:
        array = db.create_array(
            "array_rows", [{"name": "k", "end": data.num_rows, "chunk": 32}], {"v": "float64"}
        )
        array[0 : data.num_rows] = {"v": data.column("v").to_numpy()}
        return "array_rows", data


class TestAttachedTable(RelationTests):
    capabilities = frozenset({"count", "aggregate", "session", "describe_scan"})

    def make(self, db: Database, folder: Path, data: pa.Table) -> tuple[str, pa.Table]:
        import h5py

        path = folder / "rows.h5"
        with h5py.File(path, "w") as f:
            f["t/k"] = data.column("k").to_numpy()
            f["t/v"] = data.column("v").to_numpy()
        db.attach(path, name="attached_rows")
        db.create_index("attached_rows.t", ["k", "v"])
        return "attached_rows.t", data


class TestCollection(RelationTests):
    capabilities = frozenset({"paths", "path_values"})
    key = "objid"
    value = None  # its values are inside doc

    def make(self, db: Database, folder: Path, data: pa.Table) -> tuple[str, pa.Table]:
        # a JSON document holds no NaN: that value's key is left out
        docs = [
            {k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}
            for row in data.to_pylist()
        ]
        db.create_collection("collection_rows").insert_many(docs)
        expected = pa.table(
            {
                "objid": pa.array(range(1, len(docs) + 1), pa.int64()),
                "doc": pa.array([json.dumps(d) for d in docs], pa.json_()),
            }
        )
        return "collection_rows", expected
