"""The Kind conformance suite (tesseradb.testing.kinds) over every data model of this package;
tests/test_new_kind.py runs it over a kind from another package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyarrow as pa

from tesseradb.testing.kinds import KindTests


class TestArrays(KindTests):
    kind = "array"
    capabilities = frozenset({"load", "export", "describe", "crash"})

    def make(self, db: Any, folder: Path, name: str) -> None:
        array = db.create_array(name, [{"name": "x", "end": 6, "chunk": 3}], {"v": "int64"})
        array[0:6] = {"v": np.arange(6)}

    def load_source(self, folder: Path) -> Path:
        np.save(folder / "cells.npy", np.arange(12, dtype=np.int64).reshape(3, 4))
        return folder / "cells.npy"

    def first_load_options(self) -> dict[str, Any]:
        return {"along": "file"}  # (a stack of files: the next load appends one)


class TestStreams(KindTests):
    kind = "stream"
    capabilities = frozenset({"load", "describe", "crash"})

    def make(self, db: Any, folder: Path, name: str) -> None:
        stream = db.create_stream(
            name, {"fields": [{"name": "t", "type": "double"}], "index": ["t"]}
        )
        stream.ingest(pa.table({"t": [1.0, 2.0]}), durable=True)

    def load_source(self, folder: Path) -> Path:
        (folder / "records.csv").write_text("t,u\n1.5,2\n2.5,3\n")
        return folder / "records.csv"


class TestCollections(KindTests):
    kind = "collection"
    capabilities = frozenset({"load", "export", "describe", "crash"})

    def make(self, db: Any, folder: Path, name: str) -> None:
        db.create_collection(name).insert_many([{"a": 1}, {"a": [2, 3]}])

    def load_source(self, folder: Path) -> Path:
        (folder / "objects.jsonl").write_text('{"a": 1}\n{"b": "x"}\n')
        return folder / "objects.jsonl"


class TestAttachments(KindTests):
    kind = "attached"
    capabilities = frozenset({"describe"})

    def make(self, db: Any, folder: Path, name: str) -> None:
        path = folder / f"{name.lower()}.h5"
        if not path.exists():
            with h5py.File(path, "w") as f:
                f.create_dataset("g/x", data=np.arange(4.0))
        db.attach(str(path), name)


class TestAssociativeTables(KindTests):
    kind = "assoc"
    capabilities = frozenset({"describe", "crash"})

    def make(self, db: Any, folder: Path, name: str) -> None:
        db.create_assoc_table(name).put_triples(["a,b,"], ["x,y,"], [1.0, 2.0])
