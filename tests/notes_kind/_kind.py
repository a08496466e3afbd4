"""``notes`` as a data model of the database: the Kind contract and the Loading, Exporting
and Describing capabilities, and a crash model."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from tesseradb.kinds import ExportRequest, KindBase, LoadRequest, ObjectInfo
from tests.notes_kind._notes import FILE, Notes, NotesRelation


class NotesKind(KindBase):
    name = "notes"
    label = "notes"
    directory = "notes"
    # Loading and Exporting: a text file, one note per line
    load_suffixes: ClassVar[dict[str, str]] = {".txt": "text"}
    load_defaults = frozenset({"text"})
    load_options: frozenset[str] = frozenset()
    load_unit = "notes"
    export_suffixes: ClassVar[dict[str, str]] = {".txt": "text"}
    export_options: frozenset[str] = frozenset()
    export_unit = "notes"
    export_rows = True

    @staticmethod
    def crash_model() -> Any:
        from tests.notes_kind._crash import NotesCrashModel

        return NotesCrashModel()

    def create(self, name: str, spec: dict[str, Any]) -> None:
        if spec:
            raise ValueError(f"notes take no spec, not {sorted(spec)}")
        self.folder(name).mkdir(parents=True)

    def open(self, name: str, spec: dict[str, Any]) -> Notes:
        return Notes(name, self.folder(name), self.context.read_only)

    def relations(self, opened: Notes) -> Mapping[str, Any]:
        return {"": NotesRelation(opened)}

    def drop(self, name: str, spec: dict[str, Any], opened: Notes | None) -> None:
        shutil.rmtree(self.folder(name), ignore_errors=True)

    def describe_one(self, obj: Any) -> list[ObjectInfo]:
        notes: Notes = self.context.objects.get(obj.name)
        size = sum(p.stat().st_size for p in notes.folder.glob("*"))
        return [
            ObjectInfo(obj.name, self.name, len(notes.lines()), size, obj.created, obj.modified)
        ]

    def check_one(self, obj: Any, repair: bool) -> tuple[list[Any], Any]:
        from tesseradb.checks import Finding, Verified
        from tesseradb.errors import DamagedStorageError

        notes: Notes = self.context.objects.get(obj.name)
        try:
            count = len(notes.lines())
        except DamagedStorageError as err:
            return [Finding(obj.name, f"notes/{obj.name}/{FILE}", str(err))], None
        return [], Verified(obj.name, self.label, f"{count} notes")

    def details(self, name: str, opened: Notes) -> dict[str, Any]:
        return {"notes": len(opened.lines())}

    def load(self, request: LoadRequest) -> tuple[int, str]:
        objects = self.context.objects
        notes = (
            objects.get(request.name)
            if request.exists
            else objects.create(self.name, request.name, {})
        )
        lines = [line for path in request.files for line in Path(path).read_text().splitlines()]
        request.watch.advance(request.watch.total or 0)
        return notes.add(lines), "call BIGINT, line VARCHAR"

    def export(self, name: str, opened: Notes, request: ExportRequest) -> int:
        rows = opened.lines()
        with open(request.path, "w") as out:
            out.write("".join(row["line"] + "\n" for row in rows))
        return len(rows)
