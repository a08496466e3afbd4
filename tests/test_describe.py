"""``db.describe(name)``: every kind says what it adds about one object (the Describing
capability), and ``tessera info PATH NAME`` and the server show the same."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import tesseradb
from tesseradb.cli import app
from tesseradb.errors import ObjectNotFoundError

# what each kind adds, beyond name, kind and schema
EXPECTED = {
    "a": ("array", {"array", "extent", "versions", "bytes"}),
    "s": ("stream", {"descriptor", "records", "segments", "bytes"}),
    "c": ("collection", {"objects"}),
    "h": ("attached", {"files", "indexes", "tables"}),
    "e": ("assoc", {"runs", "triples_written", "bytes"}),
    "t": ("table", {"rows"}),
    "v": ("view", {"rows"}),
}


def _build(path: Path, folder: Path) -> None:
    with h5py.File(folder / "f.h5", "w") as f:
        f.create_dataset("g/x", data=np.arange(5.0))
    with tesseradb.connect(path) as db:
        array = db.create_array("a", [{"name": "x", "end": 4, "chunk": 4}], {"v": "int64"})
        array[0:4] = {"v": np.arange(4)}
        stream = db.create_stream(
            "s", {"fields": [{"name": "t", "type": "double"}], "index": ["t"]}
        )
        stream.ingest(pa.table({"t": [1.0, 2.0, 3.0]}), durable=True)
        db.create_collection("c").insert_many([{"k": 1}, {"k": 2}])
        db.attach(str(folder / "f.h5"), "h")
        db.create_assoc_table("e").put_triples(["r1,"], ["c1,"], [1.0])
        db.sql("CREATE TABLE t AS SELECT range AS i FROM range(7)")
        db.sql("CREATE VIEW v AS SELECT i FROM t WHERE i < 3")


def test_every_kind_describes_its_objects(tmp_path: Path) -> None:
    path = tmp_path / "db.tdb"
    _build(path, tmp_path)
    with tesseradb.connect(path, read_only=True) as db:
        for name, (kind, adds) in EXPECTED.items():
            described = db.describe(name)
            assert described["name"] == name and described["kind"] == kind
            assert adds <= set(described), (name, sorted(described))
            json.dumps(described)  # plain data
        assert db.describe("s")["records"] == 3
        assert db.describe("c")["objects"] == 2
        assert db.describe("t")["rows"] == 7 and db.describe("v")["rows"] == 3
        assert db.describe("a")["extent"] == [4]
        assert [c["name"] for c in db.describe("t")["schema"]] == ["i"]
        with pytest.raises(ObjectNotFoundError):
            db.describe("nope")


def test_tessera_info_describes_one_object(tmp_path: Path) -> None:
    path = tmp_path / "db.tdb"
    _build(path, tmp_path)
    result = CliRunner().invoke(app, ["info", str(path), "s"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["records"] == 3
    missing = CliRunner().invoke(app, ["info", str(path), "nope"])
    assert missing.exit_code != 0 and "Traceback" not in missing.output
    assert "nope" in missing.output
