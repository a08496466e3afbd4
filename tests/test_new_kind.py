"""Adding a data model is one package and one line (docs/contributing.md, "Adding a data
model"): the toy kind ``notes`` (tests/notes_kind/) is registered by an entry point of a
package of its own, and without touching any file outside its folder it is created, loaded,
exported, described, served, checked, put through the Kind conformance suite and the
crash matrix."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tesseradb
from tesseradb.kinds import registered_kinds
from tesseradb.testing.kinds import KindTests

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def notes_registered(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """What installing a package that declares the kind does: its dist-info on the path,
    with the entry point ``[tesseradb.kinds] notes = tests.notes_kind:NotesKind``
    (child processes see it through PYTHONPATH)."""
    site = tmp_path_factory.mktemp("site")
    info = site / "notes_kind-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: notes-kind\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[tesseradb.kinds]\nnotes = tests.notes_kind:NotesKind\n"
    )
    monkeypatch.syspath_prepend(str(site))
    paths = [str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    registered_kinds.cache_clear()
    yield
    registered_kinds.cache_clear()


def test_the_kind_is_registered_by_its_entry_point() -> None:
    assert registered_kinds()["notes"] == "tests.notes_kind:NotesKind"


class TestNotes(KindTests):
    kind = "notes"
    capabilities = frozenset({"load", "export", "describe", "crash"})

    def make(self, db: Any, folder: Path, name: str) -> None:
        db.create("notes", name).add(["first", "second"])

    def load_source(self, folder: Path) -> Path:
        (folder / "lines.txt").write_text("one\ntwo\nthree\n")
        return folder / "lines.txt"


def test_notes_are_loaded_queried_exported_and_described(tmp_path: Path) -> None:
    (tmp_path / "lines.txt").write_text("alpha\nbeta\n")
    with tesseradb.connect(tmp_path / "db.tdb") as db:
        loaded = db.load(str(tmp_path / "lines.txt"))  # .txt: a notes object, by its ending
        assert (loaded.kind, loaded.name, loaded.items, loaded.unit) == (
            "notes",
            "lines",
            2,
            "notes",
        )
        assert db.sql("SELECT list(line ORDER BY line) FROM lines").scalar() == ["alpha", "beta"]
        db.export("lines", str(tmp_path / "out.txt"))
        assert (tmp_path / "out.txt").read_text() == "alpha\nbeta\n"
        db.export("lines", str(tmp_path / "out.parquet"))  # as rows, as any relation
        assert db.describe("lines")["notes"] == 2
        assert [c["name"] for c in db.describe("lines")["schema"]] == ["call", "line"]
        # damage is found by check, named
        (db.path / "notes" / "lines" / "notes.jsonl").write_text("{not json\n")
        report = db.check()
        assert not report.ok and "notes.jsonl" in str(report)


def test_notes_are_served(tmp_path: Path) -> None:
    from tesseradb.server import ServerProcess, Users, parse_rights

    path = tmp_path / "db.tdb"
    with tesseradb.connect(path) as db:
        db.create("notes", "n").add(["served"])
    token = Users(path).add("reader", parse_rights(["notes=read"]))
    server = ServerProcess(path)  # (a process of its own: it finds the kind as installed)
    try:
        with tesseradb.connect(server.url, token=token) as remote:
            assert remote.describe("n")["notes"] == 1
            assert remote.sql("SELECT line FROM n").fetchall() == [("served",)]
    finally:
        server.stop()


def test_notes_keep_every_promise_in_the_crash_matrix(tmp_path: Path) -> None:
    from tesseradb.testing.crash import run_matrix

    tally = run_matrix("notes", tmp_path / "db.tdb", kills=2, seed=3)
    assert tally.calls_acknowledged > 0 and tally.live_reads >= 2, tally
    assert (tally.durable_lost, tally.torn, tally.torn_reads, tally.check_findings) == (
        0,
        0,
        0,
        0,
    ), tally.problems
