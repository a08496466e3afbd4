"""Associative tables as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

A table's catalog spec holds its options (``transpose``, ``degrees``,
``text``); its storage is the runs and manifest under ``assoc/<name>/``.
The table is the relation ``<name>`` (``row, col, val``), with
``<name>.deg`` and ``<name>.txt`` where it keeps degrees and texts.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tesseradb.kinds import KeptInStorage, ObjectInfo

if TYPE_CHECKING:
    from tesseradb.assoc._table import AssocTable
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.relation import Relation

__all__ = ["AssocTableKind"]


class AssocTableKind(KeptInStorage):
    name = "assoc"
    label = "associative table"
    directory = "assoc"

    @staticmethod
    def crash_model() -> Any:
        """What this kind's writers do in the crash matrix (tesseradb.testing.crash)."""
        from tesseradb.assoc._crash import AssocCrashModel

        return AssocCrashModel()

    def new_spec(
        self,
        name: str,
        transpose: bool,
        degrees: bool,
        text: bool,
        location: str | None = None,
    ) -> dict[str, Any]:
        """The catalog spec of a new table (``db.create_assoc_table``'s arguments, checked)."""
        from tesseradb.assoc._table import table_options
        from tesseradb.catalog import validate_name

        validate_name(name, "associative table")
        return self.placed(name, {"options": table_options(transpose, degrees, text)}, location)

    def open(self, name: str, spec: dict[str, Any]) -> AssocTable:
        # (imported when a table is first opened: it brings scipy, which a database that
        # only asks the kinds what they load and export need not pay for)
        from tesseradb.assoc._table import AssocTable

        return AssocTable(
            name,
            self.folder(name),
            spec["options"],
            self.context.read_only,
            self.context.on_write,
            self.stored_location(spec),
        )

    def details(self, name: str, opened: AssocTable) -> dict[str, Any]:
        return {
            "runs": opened.runs,
            "triples_written": opened.triples_written,
            "bytes": opened.bytes_on_disk(),
            **({"location": opened.location.url} if opened.location is not None else {}),
        }

    def relations(self, opened: AssocTable) -> Mapping[str, Relation]:
        found: Mapping[str, Relation] = opened.relations()
        return found

    def relation_names(self, name: str, spec: dict[str, Any]) -> list[str]:
        options = spec.get("options", {})
        extra = [
            f"{name}.{part}"
            for part in ("deg", "txt")
            if options.get("degrees" if part == "deg" else "text")
        ]
        return [name, *extra]

    def close(self, opened: AssocTable) -> None:
        opened.close()

    def drop(self, name: str, spec: dict[str, Any], opened: AssocTable | None) -> None:
        if opened is not None:
            opened.close()
        shutil.rmtree(self.folder(name), ignore_errors=True)
        self.delete_stored(name, spec)

    def describe_one(self, obj: CatalogObject) -> list[ObjectInfo]:
        table: AssocTable = self.context.objects.get(obj.name)
        return [
            ObjectInfo(
                obj.name,
                self.name,
                table.triples_written,
                table.bytes_on_disk(),
                obj.created,
                obj.modified,
            )
        ]

    def check_one(self, obj: CatalogObject, repair: bool) -> tuple[list[Finding], Verified | None]:
        from tesseradb.checks import QUARANTINE, Finding, Verified

        table: AssocTable = self.context.objects.get(obj.name)
        findings: list[Finding] = []
        for problem_run, problem in table.verify():
            part = f"assoc/{obj.name}/{problem_run}"
            if not repair:
                findings.append(
                    Finding(
                        obj.name,
                        part,
                        problem,
                        action="`tessera check --repair` sets the run aside; or restore it "
                        "from a backup",
                    )
                )
                continue
            target = self.context.path / QUARANTINE / f"assoc__{obj.name}__{problem_run}"
            while target.exists():
                target = target.with_name(target.name + "_")
            lost = table.set_aside(problem_run, target)
            findings.append(
                Finding(
                    obj.name,
                    part,
                    problem,
                    action=f"moved to {target.relative_to(self.context.path)}",
                    lost=lost,
                    repaired=True,
                )
            )
        if findings and not repair:
            return findings, None  # (nothing of it is said to be whole)
        triples = table.triples_written
        return findings, Verified(obj.name, self.label, f"{table.runs} runs, {triples:,} triples")
