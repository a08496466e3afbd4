"""Closed means closed (issue 40, item 3): once its database is closed, every handle
refuses every call with DatabaseClosedError, before touching anything."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyarrow as pa
import pytest

import tesseradb
from tesseradb.errors import DatabaseClosedError

EXEMPT = {"close"}  # (closing again is allowed)


def _handles(db: tesseradb.Database, folder: Path) -> dict[str, Any]:
    array = db.create_array("a", [{"name": "x", "end": 8, "chunk": 4}], {"v": "int64"})
    array[0:8] = {"v": np.arange(8)}
    stream = db.create_stream("s", {"fields": [{"name": "t", "type": "double"}], "index": ["t"]})
    stream.ingest(pa.table({"t": [1.0, 2.0]}), durable=True)
    collection = db.create_collection("c")
    collection.insert({"k": 1})
    table = db.create_assoc_table("edges", text=True)
    table.put_triples(["r,"], ["c,"], [1.0])
    with h5py.File(folder / "f.h5", "w") as f:
        f["g/x"] = np.arange(5)
    attachment = db.attach(folder / "f.h5", name="h")
    run = db.ssdb("run", "test")
    return {
        "array": array,
        "array at a version": array.at(array.version),
        "array view": array.between((slice(0, 4),)),
        "stream": stream,
        "collection": collection,
        "associative table": table,
        "transposed": table.T,
        "degrees": table.deg,
        "texts": table.txt,
        "attachment": attachment,
        "attached table": attachment.table("g"),
        "ssdb run": run,
    }


def _public(handle: Any) -> list[str]:
    names = []
    for name in dir(type(handle)):
        if name in EXEMPT or (name.startswith("_") and name not in ("__getitem__", "__setitem__")):
            continue
        member = inspect.getattr_static(type(handle), name)
        if isinstance(member, (staticmethod, classmethod)):
            continue  # (not a call on the handle)
        if callable(member) or isinstance(member, property):
            names.append(name)
    return names


def test_every_handle_refuses_every_call_once_closed(tmp_path: Path) -> None:
    db = tesseradb.connect(tmp_path / "db.tdb")
    handles = _handles(db, tmp_path)
    db.close()
    tried = 0
    for what, handle in handles.items():
        for name in _public(handle):
            member = inspect.getattr_static(type(handle), name)
            with pytest.raises(DatabaseClosedError, match="closed"):
                if isinstance(member, property):
                    getattr(handle, name)
                elif name == "__getitem__":
                    handle[0]
                elif name == "__setitem__":
                    handle[0] = 0
                else:
                    getattr(handle, name)()
            tried += 1
        assert tried, what
    # nothing was touched: the database is as it was
    with tesseradb.connect(tmp_path / "db.tdb", read_only=True) as again:
        assert again.array("a")[0:8]["v"].tolist() == list(range(8))
        assert again.sql("SELECT count(*) FROM s").scalar() == 2
        assert again.sql("SELECT count(*) FROM c").scalar() == 1


@pytest.mark.parametrize(
    "write",
    [
        lambda h: h["array"].__setitem__(slice(0, 8), {"v": np.zeros(8, dtype="int64")}),
        lambda h: h["stream"].ingest(pa.table({"t": [9.0]})),
        lambda h: h["collection"].insert({"k": 2}),
        lambda h: h["associative table"].put_triples(["q,"], ["c,"], [2.0]),
        lambda h: (
            h["attachment"].create_index("g", ["x"])
            if hasattr(h["attachment"], "create_index")
            else h["attachment"].table("g")
        ),
    ],
    ids=["array", "stream", "collection", "assoc", "attachment"],
)
def test_a_write_after_close_keeps_nothing_even_with_another_writer(
    tmp_path: Path, write: Any
) -> None:
    db = tesseradb.connect(tmp_path / "db.tdb")
    handles = _handles(db, tmp_path)
    db.close()
    with tesseradb.connect(tmp_path / "db.tdb") as other:  # holds the writer lock now
        with pytest.raises(DatabaseClosedError):
            write(handles)
        assert other.array("a")[0:8]["v"].tolist() == list(range(8))
        assert other.sql("SELECT count(*) FROM s").scalar() == 2
        assert other.sql("SELECT count(*) FROM c").scalar() == 1
        assert other.sql("SELECT count(*) FROM edges").scalar() == 1
