"""The Kind conformance suite: what every data model must do through the database, as tests
to subclass (like :mod:`tesseradb.testing.relation` for relations)::

    class TestMyKind(KindTests):
        kind = "mykind"
        capabilities = frozenset({"load", "export", "describe", "crash"})

        def make(self, db, folder, name):
            ...  # create an object of the kind called ``name``, with some content

        def load_source(self, folder):  # (kinds that load)
            ...  # a file the kind loads, with some content

The suite creates, opens, reopens (read-write and read-only), describes,
checks, drops and looks for strays through the database's public API, loads
and exports where the kind says it can, and holds the declared capabilities to
what the kind has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

import tesseradb
from tesseradb.errors import ObjectExistsError, ReadOnlyError, TesseraError
from tesseradb.kinds import Describing, Exporting, Loading

__all__ = ["KIND_CAPABILITIES", "KindTests"]

# capability name -> the protocol (or attribute) a kind with it has
KIND_CAPABILITIES: dict[str, Any] = {
    "load": Loading,
    "export": Exporting,
    "describe": Describing,
    "crash": "crash_model",
}


class KindTests:
    kind: ClassVar[str]
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def make(self, db: Any, folder: Path, name: str) -> None:
        raise NotImplementedError

    def load_source(self, folder: Path) -> Path:
        raise NotImplementedError

    def first_load_options(self) -> dict[str, Any]:
        """Options of the load that makes the object, so that a second load may append."""
        return {}

    # --- helpers -------------------------------------------------------------------------
    def _db(self, tmp_path: Path, **kwargs: Any) -> Any:
        return tesseradb.connect(tmp_path / "kind.tdb", **kwargs)

    def _listed(self, db: Any) -> dict[str, str]:
        return {o.name: o.kind for o in db.info().objects if "." not in o.name}

    # --- the contract --------------------------------------------------------------------
    def test_the_declared_capabilities_are_the_kinds(self, tmp_path: Path) -> None:
        with self._db(tmp_path) as db:
            made = db._registry.kind(self.kind)  # (the suite is white-box)
            has = {
                name
                for name, what in KIND_CAPABILITIES.items()
                if (hasattr(made, what) if isinstance(what, str) else isinstance(made, what))
            }
        assert has == set(self.capabilities)

    def test_an_object_is_listed_described_and_kept_across_reopening(self, tmp_path: Path) -> None:
        with self._db(tmp_path) as db:
            self.make(db, tmp_path, "one")
            assert self._listed(db).get("one") == self.kind
            before = db.describe("one")
        with self._db(tmp_path) as db:
            assert self._listed(db).get("one") == self.kind
            assert db.describe("one") == before
        with self._db(tmp_path, read_only=True) as db:
            assert db.describe("one") == before
            assert db.check().ok

    def test_a_name_is_taken_once(self, tmp_path: Path) -> None:
        with self._db(tmp_path) as db:
            self.make(db, tmp_path, "one")
            before = db.describe("one")
            with pytest.raises(ObjectExistsError):
                self.make(db, tmp_path, "ONE")
            assert db.describe("one") == before

    def test_drop_removes_the_object_and_its_storage(self, tmp_path: Path) -> None:
        with self._db(tmp_path) as db:
            self.make(db, tmp_path, "one")
            self.make(db, tmp_path, "two")
            db.drop("one")
            assert "one" not in self._listed(db) and "two" in self._listed(db)
            report = db.check()  # (a folder left behind would be a stray: a finding)
            assert report.ok, report
            self.make(db, tmp_path, "one")  # the name is free again
            assert self._listed(db).get("one") == self.kind

    def test_a_read_only_database_refuses_to_drop(self, tmp_path: Path) -> None:
        with self._db(tmp_path) as db:
            self.make(db, tmp_path, "one")
        with self._db(tmp_path, read_only=True) as db:
            with pytest.raises(ReadOnlyError):
                db.drop("one")
            assert "one" in self._listed(db)

    def test_check_names_what_belongs_to_no_object(self, tmp_path: Path) -> None:
        with self._db(tmp_path) as db:
            self.make(db, tmp_path, "one")
            directory = db._registry.kind(self.kind).directory
            if directory is None:
                pytest.skip("this kind keeps no directory of its own")
            stray = db.path / directory / "stray_thing"
            stray.parent.mkdir(parents=True, exist_ok=True)
            stray.write_text("not an object's")
            report = db.check()
            assert not report.ok and any("stray_thing" in str(f) for f in report.findings), report
            db.check(repair=True)
            assert not stray.exists() and db.check().ok
            assert self._listed(db).get("one") == self.kind

    def test_a_load_makes_then_appends_and_a_failed_one_leaves_nothing(
        self, tmp_path: Path
    ) -> None:
        if "load" not in self.capabilities:
            pytest.skip("this kind does not load")
        source = self.load_source(tmp_path)
        with self._db(tmp_path) as db:
            first = db.load(str(source), into="loaded", kind=self.kind, **self.first_load_options())
            assert first.created and first.items > 0 and first.kind == self.kind
            again = db.load(str(source), into="loaded")
            assert not again.created and again.items == first.items
            with pytest.raises(TesseraError):
                db.load(str(tmp_path / "nowhere" / source.name), into="never", kind=self.kind)
            assert "never" not in self._listed(db)
            assert db.check().ok

    def test_every_own_export_format_is_written(self, tmp_path: Path) -> None:
        if "export" not in self.capabilities:
            pytest.skip("this kind writes no formats of its own")
        with self._db(tmp_path) as db:
            self.make(db, tmp_path, "one")
            made = db._registry.kind(self.kind)
            for suffix in dict.fromkeys(made.export_suffixes):
                target = tmp_path / f"out{suffix}"
                exported = db.export("one", str(target))
                assert target.exists() and exported.unit == made.export_unit
