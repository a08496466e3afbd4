"""Associative tables whose runs live in an S3 bucket; the manifest stays local."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import tesseradb
from tesseradb.storage import Location
from tests.servers import S3Bucket

PUTS = [
    [("alice", "knows|bob", 1.0), ("bob", "knows|carol", 2.0)],
    [("alice", "knows|bob", 3.0), ("carol", "likes|tea", 1.0)],
    [("dave", "knows|alice", 1.0), ("bob", "likes|tea", 5.0)],
]
MODEL = {
    ("alice", "knows|bob"): 3.0,
    ("bob", "knows|carol"): 2.0,
    ("carol", "likes|tea"): 1.0,
    ("dave", "knows|alice"): 1.0,
    ("bob", "likes|tea"): 5.0,
}


def _triples(table: Any) -> dict[tuple[Any, Any], Any]:
    return {(r, c): v for r, c, v in table[:, :].triples()}


def test_runs_in_the_bucket_are_what_was_put(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options) as db:
        table = db.create_assoc_table("T")
        for put in PUTS:
            rows, cols, vals = zip(*put, strict=True)
            table.put_triples(list(rows), list(cols), list(vals))
        location = Location(db.describe("T")["location"], db.storage.credentials)
        assert _triples(table) == MODEL
    runs = {o.path.split("/")[0] for o in location.list()}
    assert runs == {"run-000001", "run-000002", "run-000003"}
    # another machine: the runs are not in the folder, they come from the bucket
    for cached in (path / "assoc" / "T").glob("run-*"):
        shutil.rmtree(cached)
    with tesseradb.connect(path, read_only=True, storage_options=s3_bucket.options) as reader:
        assert _triples(reader.assoc_table("T")) == MODEL
        assert not list((path / "assoc" / "T").glob("run-*"))  # (a reader fetches elsewhere)
    with tesseradb.connect(path, storage_options=s3_bucket.options) as db:
        table = db.assoc_table("T")
        assert _triples(table) == MODEL
        rows = db.sql("SELECT row, col, val FROM T").fetchall()
        assert {(r, c): v for r, c, v in rows} == MODEL
        table.compact()
        assert table.runs == 1 and _triples(table) == MODEL
        assert {o.path.split("/")[0] for o in location.list()} == {"run-000004"}
        assert db.check().ok
        db.drop("T")
    assert list(location.list()) == []


def test_a_run_no_manifest_names_is_removed_and_never_read(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    path = tmp_path / "db"
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options) as db:
        db.create_assoc_table("T").put_triples(["a"], ["b"], [1.0])
        location = Location(db.describe("T")["location"], db.storage.credentials)
    # what a put killed between its upload and its manifest leaves in the bucket
    location.write("run-000002/meta.json", b'{"triples": 1}')
    with tesseradb.connect(path, storage_options=s3_bucket.options) as db:
        assert _triples(db.assoc_table("T")) == {("a", "b"): 1.0}
    assert {o.path.split("/")[0] for o in location.list()} == {"run-000001"}


@pytest.mark.parametrize("missing", ["row_indptr.npy", "meta.json"])
def test_a_missing_run_object_is_an_error_naming_it(
    tmp_path: Path, s3_bucket: S3Bucket, missing: str
) -> None:
    import obstore

    path = tmp_path / "db"
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=s3_bucket.options) as db:
        db.create_assoc_table("T").put_triples(["a", "b"], ["x", "y"], [1.0, 2.0])
        location = Location(db.describe("T")["location"], db.storage.credentials)
    obstore.delete(location.store(), f"run-000001/{missing}")
    shutil.rmtree(path / "assoc" / "T" / "run-000001")
    with (
        tesseradb.connect(path, storage_options=s3_bucket.options) as db,
        pytest.raises(tesseradb.TesseraError, match="run-000001"),
    ):
        _triples(db.assoc_table("T"))
