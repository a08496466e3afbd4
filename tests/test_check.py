"""``db.check()`` and ``tessera check``: every kind of damage is named, repair keeps the rest.

Streams' own damage (segments, the call log) is tested in
tests/records/test_atomic_calls.py; here: arrays, attachments, collections,
plain tables, the catalog against the files, and foreign files.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb
import h5py
import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import tesseradb
from tesseradb.cli.app import app
from tesseradb.errors import ArrayCorruptError, TesseraError

runner = CliRunner()


def build(path: Path, tmp: Path) -> None:
    """One object of every kind, with data."""
    db = tesseradb.connect(path)
    db.sql("CREATE TABLE t (a INTEGER)")
    db.sql("INSERT INTO t VALUES (1), (2), (3)")
    a = db.create_array("a", [{"name": "x", "end": 4000, "chunk": 1000}], {"v": "float64"})
    # the chunk of x's world coordinates, apart from the attribute's chunks
    (tmp / "coordinates").write_text("\n".join(p.name for p in _chunks_folder(path).iterdir()))
    a[0:4000] = {"v": np.random.default_rng(1).random(4000)}
    s = db.create_stream("s", {"fields": [{"name": "x", "type": "double"}], "index": ["x"]})
    s.ingest(pa.table({"x": [1.0, 2.0, 3.0]}))
    db.create_collection("c").insert_many([{"n": i} for i in range(10)])
    with h5py.File(tmp / "f.h5", "w") as f:
        f["t/x"] = np.arange(100)
    db.attach(tmp / "f.h5", name="h")
    db.create_index("h.t", ["x"])
    db.close()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "db"
    build(path, tmp_path)
    return path


def flip(path: Path, at: int = 40) -> None:
    data = bytearray(path.read_bytes())
    data[min(at, len(data) - 1)] ^= 0xFF
    path.write_bytes(bytes(data))


def _chunks_folder(database: Path) -> Path:
    return database / "arrays" / "a" / "repo" / "chunks"


def chunk_files(database: Path) -> list[Path]:
    """The chunk files of array a's attribute v."""
    coordinates = set((database.parent / "coordinates").read_text().split())
    return sorted(p for p in _chunks_folder(database).iterdir() if p.name not in coordinates)


def test_damaged_world_coordinates_are_named_then_rewritten(database: Path) -> None:
    """The dimension's coordinate variable (for direct xarray opens) is checked, and being
    derived from the schema, rewritten by a repair: no cell is lost."""
    coordinates = (database.parent / "coordinates").read_text().split()
    assert len(coordinates) == 1
    (_chunks_folder(database) / coordinates[0]).write_bytes(b"")
    with tesseradb.connect(database, read_only=True) as db:
        [finding] = db.check().damaged
        assert finding.object == "a" and finding.part == "world coordinates of dimension 'x'"
    result = runner.invoke(app, ["check", "--repair", str(database)])
    assert result.exit_code == 0, result.output
    with tesseradb.connect(database) as db:
        assert db.check().ok
        assert db.sql("SELECT count(*) FROM a").fetchall() == [(4000,)]


def test_a_whole_database_checks_clean(database: Path) -> None:
    with tesseradb.connect(database, read_only=True) as db:
        report = db.check()
    assert report.ok and not report.findings
    kinds = {v.object: v.kind for v in report.verified}
    assert kinds == {
        "a": "array",
        "s": "stream",
        "c": "collection",
        "h": "attachment",
        "(tables)": "table store",
    }
    result = runner.invoke(app, ["check", str(database)])
    assert result.exit_code == 0, result.output
    assert "no problems found" in result.output


@pytest.mark.parametrize("damage", ["flip", "zero", "truncate", "empty", "delete"])
def test_damaged_array_chunks_are_named_then_dropped(database: Path, damage: str) -> None:
    victim = chunk_files(database)[0]
    if damage == "flip":
        flip(victim)
    elif damage == "zero":
        victim.write_bytes(bytes(victim.stat().st_size))
    elif damage == "truncate":
        victim.write_bytes(victim.read_bytes()[:10])
    elif damage == "empty":
        victim.write_bytes(b"")
    else:
        victim.unlink()
    with tesseradb.connect(database, read_only=True) as db:
        report = db.check()
        assert not report.ok
        [finding] = report.damaged
        assert finding.object == "a" and "attribute 'v', chunk (" in finding.part
        with pytest.raises(ArrayCorruptError, match="array 'a'"):
            db.sql("SELECT sum(v) FROM a").fetchall()
    result = runner.invoke(app, ["check", str(database)])
    assert result.exit_code == 1 and "DAMAGED" in result.output and "Traceback" not in result.output

    result = runner.invoke(app, ["check", "--repair", str(database)])
    assert result.exit_code == 0, result.output
    assert "lost: 1,000 cells" in result.output
    with tesseradb.connect(database) as db:
        assert db.check().ok
        # the three readable chunks are still served; the dropped one reads as fill
        assert db.sql("SELECT count(*) FROM a").fetchall() == [(3000,)]
        newest = db.array("a").versions()[0]  # the repair is a version of its own
        assert newest.message.startswith("tessera check --repair: dropped 1")


def test_damaged_sidecar_indexes_are_rebuilt(database: Path) -> None:
    index = database / "attached" / "h" / "t.x.0.bmi"
    flip(index, 100)
    with tesseradb.connect(database, read_only=True) as db:
        [finding] = db.check().damaged
        assert finding.object == "h" and "t.x.0.bmi" in finding.part
        assert "checksum" in finding.problem
    with tesseradb.connect(database) as db:
        report = db.check(repair=True)
        assert report.ok and report.findings[0].action == "rebuilt from the file"
        assert db.check().ok and not db.check().findings
        assert db.sql("SELECT count(*) FROM h.t WHERE x < 10").fetchall() == [(10,)]


def test_a_damaged_attached_file_is_named_never_repaired(database: Path, tmp_path: Path) -> None:
    (tmp_path / "f.h5").write_bytes(b"not an HDF5 file any more")
    with tesseradb.connect(database) as db:
        report = db.check(repair=True)
        [finding] = report.damaged
        assert finding.object == "h" and str(tmp_path / "f.h5") in finding.part
    assert (tmp_path / "f.h5").read_bytes() == b"not an HDF5 file any more"


def test_a_damaged_document_backend_is_named(database: Path) -> None:
    backend = database / "documents" / "documents.sqlite"
    data = bytearray(backend.read_bytes())
    page = 4096
    for at in range(2 * page + 16, len(data), page):  # garble every page after the first two
        data[at : at + 64] = b"\xa5" * 64
    backend.write_bytes(bytes(data))
    with tesseradb.connect(database, read_only=True) as db:
        report = db.check()
        with contextlib.suppress(TesseraError):  # SQLite pages carry no checksum: it may read
            db.collection("c").find()
    assert not report.ok
    assert any(f.object == "(documents)" for f in report.damaged), report  # quick_check
    assert all(f.object in ("c", "(documents)") for f in report.damaged), report


def test_a_missing_document_backend_is_named_and_can_be_dropped(database: Path) -> None:
    import shutil

    shutil.rmtree(database / "documents")
    with tesseradb.connect(database) as db:
        with pytest.raises(
            tesseradb.errors.DocumentBackendError, match=r"documents\.sqlite is missing"
        ):
            db.collection("c").find()
        [finding] = db.check().damaged
        assert finding.object == "c" and "is missing" in finding.problem
        assert not (database / "documents").exists()  # nothing was made anew, empty
        db.drop("c")  # what the error advises
        assert db.check().ok


def test_a_missing_table_store_is_named(database: Path) -> None:
    (database / "tables.duckdb").unlink()
    with tesseradb.connect(database, read_only=True) as db:
        with pytest.raises(tesseradb.errors.TableStoreError, match="in the catalog but not"):
            db.sql("SELECT * FROM t").fetchall()
        [finding] = db.check().damaged
        assert (finding.object, finding.problem) == (
            "t",
            "is in the catalog but not in the table store",
        )
        assert db.sql("SELECT count(*) FROM a").fetchall() == [(4000,)]  # the rest is served


def test_the_catalog_is_checked_against_the_table_store(database: Path) -> None:
    con = duckdb.connect(str(database / "tables.duckdb"))
    con.execute("DROP TABLE t")
    con.execute("CREATE TABLE stray (b INTEGER)")
    con.close()
    with tesseradb.connect(database, read_only=True) as db:
        damaged = {(f.object, f.problem) for f in db.check().damaged}
    assert damaged == {
        ("t", "is in the catalog but not in the table store"),
        ("stray", "is in the table store but not in the catalog"),
    }
    with tesseradb.connect(database) as db:
        assert db.check(repair=True).ok
        assert db.tables() == ["stray"]
        assert db.check().ok


def test_foreign_files_and_orphan_directories_are_moved_aside(database: Path) -> None:
    (database / "notes.txt").write_text("mine")
    (database / "streams" / "ghost").mkdir()
    (database / "documents" / "old.sqlite").write_bytes(b"x")
    with tesseradb.connect(database, read_only=True) as db:
        parts = sorted(f.part for f in db.check().damaged)
    assert parts == ["documents/old.sqlite", "notes.txt", "streams/ghost"]
    with tesseradb.connect(database) as db:
        assert db.check(repair=True).ok
        assert db.check().ok
    assert (database / "quarantine" / "notes.txt").read_text() == "mine"
    assert (database / "quarantine" / "streams__ghost").is_dir()


def test_a_missing_array_directory_is_named(database: Path) -> None:
    import shutil

    shutil.rmtree(database / "arrays" / "a")
    with tesseradb.connect(database) as db:
        report = db.check(repair=True)
        [finding] = report.damaged
        assert (finding.object, finding.part, finding.problem) == (
            "a",
            "directory arrays/a",
            "is missing",
        )
        db.drop("a")  # what the finding advises; the rest was never affected
        assert db.check().ok


def test_repair_needs_a_writable_database(database: Path) -> None:
    with (
        tesseradb.connect(database, read_only=True) as db,
        pytest.raises(tesseradb.errors.ReadOnlyError),
    ):
        db.check(repair=True)
    result = runner.invoke(app, ["check", str(database / "nope")])
    assert result.exit_code == 1 and "does not exist" in result.output
