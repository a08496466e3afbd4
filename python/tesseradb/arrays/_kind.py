"""Arrays as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

An array's catalog spec is ``{"schema": ArraySchema.to_dict()}``; its
storage is the Icechunk repository under ``arrays/<name>/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tesseradb.arrays._array import Array
from tesseradb.arrays._check import check_array
from tesseradb.arrays._repository import ArrayRepository
from tesseradb.arrays._schema import ArraySchema
from tesseradb.kinds import KindContext, ObjectInfo, guarded_check, iso

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.relation import Relation

__all__ = ["ArrayKind"]


class ArrayKind:
    name = "array"
    aliases: tuple[str, ...] = ()
    directory = "arrays"

    def __init__(self, context: KindContext) -> None:
        self.context = context

    def _directory(self, name: str) -> Any:
        return self.context.path / self.directory / name

    def create(self, name: str, spec: dict[str, Any]) -> None:
        directory = self._directory(name)
        if directory.exists():  # left by a crash between repository and catalog
            shutil.rmtree(directory)
        try:
            ArrayRepository.create(name, directory).initialise(
                ArraySchema.from_dict(spec["schema"])
            )
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise

    def open(self, name: str, spec: dict[str, Any]) -> Array:
        repo = ArrayRepository(name, self._directory(name))
        array = Array(name, ArraySchema.from_dict(spec["schema"]), repo, self.context.read_only)
        array._siblings = self.context.objects  # operators' into= make arrays beside it
        return array

    def relations(self, opened: Array) -> Mapping[str, Relation]:
        return {"": opened.relation}

    def relation_names(self, name: str, spec: dict[str, Any]) -> list[str]:
        return [name]

    def close(self, opened: Array) -> None:
        pass  # an array holds no open files between calls

    def drop(self, name: str, spec: dict[str, Any], opened: Array | None) -> None:
        shutil.rmtree(self._directory(name), ignore_errors=True)

    def describe(self, objects: Sequence[CatalogObject]) -> list[ObjectInfo]:
        described = []
        for obj in objects:
            array = self.context.objects.get(obj.name)
            modified = obj.modified
            versions = array.versions()
            if versions:
                modified = max(modified, iso(versions[0].time) or "")
            described.append(
                ObjectInfo(
                    obj.name,
                    self.name,
                    array.relation.estimate(None).rows,
                    array.bytes_on_disk,
                    obj.created,
                    modified,
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
                obj.name, "array", lambda o=obj: self._check(o.name, repair), findings, verified
            )
        return findings, verified

    def _check(self, name: str, repair: bool) -> tuple[list[Finding], Verified]:
        if not self._directory(name).is_dir():
            from tesseradb.checks import Finding, Verified

            return [
                Finding(
                    name,
                    f"directory arrays/{name}",
                    "is missing",
                    action="restore it from a backup, or drop the array",
                )
            ], Verified(name, "array", "nothing to read")
        self.context.objects.forget(name)  # reopen at the head (after a repair too)
        return check_array(self.context.objects.get(name), repair)

    def shutdown(self) -> None:
        pass
