"""The hybrid mapping: argo3's shredded tables plus each object's JSON text.

Whole objects come from the text, projections and filters from the shredded
rows: both must always give what argo3 gives for the same writes, and the two
forms must not drift apart (``tessera check`` says so when they do).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb._core import pack_documents
from tesseradb.errors import DocumentBackendError

from .test_properties import documents, same_json

EMBEDDED = ("sqlite", "duckdb")


def _pair(db: tesseradb.Database, backend: str, tag: str) -> tuple[Any, Any]:
    return (
        db.create_collection(f"a_{tag}", backend=backend, mapping="argo3"),
        db.create_collection(f"h_{tag}", backend=backend, mapping="hybrid"),
    )


def _sql_texts(db: tesseradb.Database, name: str) -> list[tuple[int, str]]:
    return [
        (int(i), str(d))
        for i, d in db.sql(f"SELECT objid, doc FROM {name} ORDER BY objid").fetchall()
    ]


@pytest.mark.parametrize("backend", EMBEDDED)
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batch=st.lists(documents | st.just({"z": -0.0, "n": [0.0, -0.0]}), min_size=1, max_size=5),
    as_text=st.booleans(),
)
def test_hybrid_answers_as_argo3(
    tmp_path: Path, backend: str, batch: list[dict[str, Any]], as_text: bool
) -> None:
    with tesseradb.connect(tmp_path / f"h{os.urandom(4).hex()}.tdb") as db:
        argo3, hybrid = _pair(db, backend, "t")
        items = [json.dumps(d) for d in batch] if as_text else batch
        argo3.insert_many(items)
        hybrid.insert_many(items)
        # whole objects: the text against argo3's rebuild, with types and key order
        for a, h in zip(argo3.find(), hybrid.find(), strict=True):
            assert same_json(a, h)
        # the SQL relation hands the text on: the same bytes argo3's dump gives
        assert _sql_texts(db, "a_t") == _sql_texts(db, "h_t")
        # projections and filters come from the shredded rows in both
        for statement in ("SELECT * FROM {} WHERE objid >= 2", "SELECT objid FROM {}"):
            got_a = db.argo(statement.format("a_t"))
            got_h = db.argo(statement.format("h_t"))
            assert json.dumps(got_a) == json.dumps(got_h)
        assert argo3.count() == hybrid.count()
        assert hybrid.check()[0] == []


@pytest.mark.parametrize("backend", EMBEDDED)
def test_updates_and_deletes_keep_text_and_rows_together(tmp_path: Path, backend: str) -> None:
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        argo3, hybrid = _pair(db, backend, "u")
        docs = [{"i": i, "s": f"v{i}", "o": {"k": [i, -0.0, 1.5]}} for i in range(300)]
        for c in (argo3, hybrid):
            c.insert_many(docs)
            db.argo(f"UPDATE {c.name} SET o.k = 'changed', extra = 1 WHERE i < 50")
            db.argo(f"DELETE FROM {c.name} WHERE i >= 250")
            c.insert_many([{"late": True}])
        assert json.dumps(argo3.find()) == json.dumps(hybrid.find())
        assert db.argo("SELECT o.k FROM h_u WHERE i = 3") == [{"o": {"k": "changed"}}]
        assert json.dumps(db.argo("SELECT * FROM a_u WHERE extra = 1")) == json.dumps(
            db.argo("SELECT * FROM h_u WHERE extra = 1")
        )
        assert _sql_texts(db, "a_u") == _sql_texts(db, "h_u")
        assert hybrid.count() == 251 and hybrid.check()[0] == []
    with tesseradb.connect(tmp_path / "db.tdb") as db:  # and after a reopen
        assert json.dumps(db.collection("a_u").find()) == json.dumps(db.collection("h_u").find())


def test_a_bulk_load_writes_texts_beside_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tesseradb.documents import _collection

    monkeypatch.setattr(_collection, "LOAD_BATCH", 100)  # a load of several batches
    lines = tmp_path / "in.jsonl"
    docs = [{"i": i, "f": i / 7, "big": 1e300 * (i % 2), "t": "é\n\u0001"} for i in range(1000)]
    lines.write_text("".join(json.dumps(d) + "\n" for d in docs))
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        argo3, hybrid = _pair(db, "sqlite", "l")
        assert argo3.load_jsonl(lines) == hybrid.load_jsonl(lines) == 1000
        assert hybrid.find() == docs
        assert _sql_texts(db, "a_l") == _sql_texts(db, "h_l")
        assert hybrid.check()[0] == []


def test_check_finds_texts_and_rows_apart(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        hybrid = db.create_collection("h", backend="sqlite", mapping="hybrid")
        hybrid.insert_many([{"i": i} for i in range(10)])
        backend = hybrid.backend
        with backend.transaction(write=True):  # damage from outside: a text lost
            backend.execute('DELETE FROM "argo_h_obj" WHERE objid = 3')
        findings, _ = hybrid.check()
        assert any(
            "9 objects kept whole but 10 in the shredded tables" in f.problem for f in findings
        )
        for damage in (b"not zstd", pack_documents(['{"i": '])[0]):
            with backend.transaction(write=True):  # a packed text damaged from outside
                backend.execute('UPDATE "argo_h_obj" SET doc = ? WHERE objid = 4', [damage])
            with pytest.raises(DocumentBackendError, match=r"collection 'h'.*cannot be rebuilt"):
                hybrid.find()
            with pytest.raises(DocumentBackendError, match=r"collection 'h'.*cannot be rebuilt"):
                db.sql("SELECT doc FROM h").fetchall()
