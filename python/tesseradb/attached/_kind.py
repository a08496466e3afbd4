"""Attached files as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

An attachment's catalog spec describes its files (``attach_spec``) and its
indexes; its only storage is the sidecar bitmap indexes under
``attached/<name>/``. Each table of the files is the relation ``<name>.<table>``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tesseradb.attached._attachment import Attachment
from tesseradb.kinds import KindContext, ObjectInfo, guarded_check

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.relation import Relation

__all__ = ["AttachedKind", "default_name"]


def default_name(path: str) -> str:
    """The name an attachment gets when none is given: the file's stem, as an identifier."""
    import re
    from pathlib import Path

    stem = Path(path).name.split(".")[0]
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "attached"
    return f"f_{name}" if name[0].isdigit() else name


class AttachedKind:
    name = "attached"
    aliases: tuple[str, ...] = ()
    directory = "attached"

    def __init__(self, context: KindContext) -> None:
        self.context = context

    def create(self, name: str, spec: dict[str, Any]) -> None:
        pass  # the files are never written; indexes are made when asked for

    def open(self, name: str, spec: dict[str, Any]) -> Attachment:
        return Attachment(
            name, spec, self.context.path / self.directory / name, self.context.read_only
        )

    def relations(self, opened: Attachment) -> Mapping[str, Relation]:
        return {table: opened.table(table) for table in opened.tables()}

    def relation_names(self, name: str, spec: dict[str, Any]) -> list[str]:
        return [f"{name}.{table}" for table in spec.get("tables", {})]

    def close(self, opened: Attachment) -> None:
        opened.close()

    def drop(self, name: str, spec: dict[str, Any], opened: Attachment | None) -> None:
        if opened is not None:
            opened.close()
        shutil.rmtree(self.context.path / self.directory / name, ignore_errors=True)

    def describe(self, objects: Sequence[CatalogObject]) -> list[ObjectInfo]:
        described = []
        for obj in objects:
            size = sum(i.get("size", 0) for i in obj.spec.get("identities", []))
            described.append(ObjectInfo(obj.name, self.name, None, size, obj.created, obj.modified))
            for table, counts in obj.spec.get("rows", {}).items():
                described.append(
                    ObjectInfo(
                        f"{obj.name}.{table}", "attached table", sum(counts), None, None, None
                    )
                )
        return described

    def check(
        self, objects: Sequence[CatalogObject], repair: bool
    ) -> tuple[list[Finding], list[Verified]]:
        findings: list[Finding] = []
        verified: list[Verified] = []
        for obj in objects:
            guarded_check(
                obj.name,
                "attachment",
                lambda o=obj: self.context.objects.get(o.name).check(repair),
                findings,
                verified,
            )
        return findings, verified

    def shutdown(self) -> None:
        pass
