"""Attached files as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

An attachment's catalog spec describes its files (``attach_spec``) and its
indexes; its only storage is the sidecar bitmap indexes under
``attached/<name>/``. Each table of the files is the relation ``<name>.<table>``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tesseradb.attached._attachment import Attachment
from tesseradb.kinds import KindBase, ObjectInfo

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


class AttachedKind(KindBase):
    name = "attached"
    label = "attachment"
    directory = "attached"

    def open(self, name: str, spec: dict[str, Any]) -> Attachment:
        # its folder holds the sidecar indexes, made when asked for; the files are never written
        attachment = Attachment(name, spec, self.folder(name), self.context.read_only)
        attachment.executors = self.context.executors  # where scans and index builds run
        return attachment

    def details(self, name: str, opened: Attachment) -> dict[str, Any]:
        return {
            "files": list(opened.files),
            "indexes": {k: dict(v) for k, v in opened.index_specs.items()},
            "tables": sorted(opened.layouts),
        }

    def relations(self, opened: Attachment) -> Mapping[str, Relation]:
        return {table: opened.table(table) for table in opened.tables()}

    def relation_names(self, name: str, spec: dict[str, Any]) -> list[str]:
        return [f"{name}.{table}" for table in spec.get("tables", {})]

    def close(self, opened: Attachment) -> None:
        opened.close()

    def drop(self, name: str, spec: dict[str, Any], opened: Attachment | None) -> None:
        if opened is not None:
            opened.close()
        shutil.rmtree(self.folder(name), ignore_errors=True)

    def describe_one(self, obj: CatalogObject) -> list[ObjectInfo]:
        size = sum(i.get("size", 0) for i in obj.spec.get("identities", []))
        tables = [
            ObjectInfo(f"{obj.name}.{table}", "attached table", sum(counts), None, None, None)
            for table, counts in obj.spec.get("rows", {}).items()
        ]
        return [ObjectInfo(obj.name, self.name, None, size, obj.created, obj.modified), *tables]

    def check_one(self, obj: CatalogObject, repair: bool) -> tuple[list[Finding], Verified]:
        checked: tuple[list[Finding], Verified] = self.context.objects.get(obj.name).check(repair)
        return checked
