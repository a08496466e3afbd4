"""``can(relation, capability)`` answers what ``isinstance`` answers for every capability
protocol, on every kind's relation (it only skips typing's slow runtime check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import tesseradb
from tesseradb.sql import relation as rel

CAPABILITIES = [
    rel.Relation,
    rel.Counting,
    rel.Aggregating,
    rel.SessionHolding,
    rel.ScanDescribing,
    rel.PathFiltering,
]


class _Partial:
    def session(self) -> Any: ...

    count = None  # (an attribute that is not a method does not count)


def test_can_agrees_with_isinstance_on_every_kind(tmp_path: Path) -> None:
    import h5py

    with tesseradb.connect(tmp_path / "db") as db:
        db.register("arrow", pa.table({"a": [1, 2]}))
        db.create_stream("s", {"fields": [{"name": "x", "type": "float64"}], "index": ["x"]})
        db.create_array("arr", [{"name": "i", "end": 4, "chunk": 2}], {"v": "int64"})
        db.create_collection("docs").insert_many([{"a": 1}])
        with h5py.File(tmp_path / "f.h5", "w") as f:
            f["t/x"] = np.arange(3)
        db.attach(tmp_path / "f.h5", name="att")
        names = ["arrow", "s", "arr", "docs", "att.t"]
        relations = [db._engine.namespace.relation(n) for n in names]
        assert all(r is not None for r in relations)
        for obj in [*relations, _Partial(), object()]:
            for capability in CAPABILITIES:
                assert rel.can(obj, capability) == isinstance(obj, capability), (obj, capability)
