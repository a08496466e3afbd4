"""JSON collections as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

A collection's catalog spec is ``{"backend": ..., "mapping": ...}``; its
rows live on that backend (``documents/documents.<backend>`` for the
embedded ones), shared by every collection on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tesseradb.documents._collection import Collection
from tesseradb.documents._relation import CollectionRelation
from tesseradb.documents._store import DocumentStore
from tesseradb.errors import DocumentBackendError, TesseraError
from tesseradb.kinds import KindContext, ObjectInfo, guarded_check

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.relation import Relation

__all__ = ["CollectionKind"]


class CollectionKind:
    name = "collection"
    aliases: tuple[str, ...] = ()
    directory = "documents"

    def __init__(self, context: KindContext) -> None:
        self.context = context
        self._store: DocumentStore | None = None  # opened with the first collection

    @property
    def store(self) -> DocumentStore:
        if self._store is None:
            self._store = DocumentStore(
                self.context.path / self.directory,
                self.context.read_only,
                on_write=self.context.on_write,
            )
        return self._store

    def create(self, name: str, spec: dict[str, Any]) -> None:
        self.store.check_options(spec["backend"], spec["mapping"])
        collection = self.store.open(name, spec["backend"], spec["mapping"], create=True)
        try:
            collection.create()
        except BaseException:
            self.store.forget(name)
            raise

    def open(self, name: str, spec: dict[str, Any]) -> Collection:
        collection = self.store.open(name, spec["backend"], spec["mapping"])
        collection.upgrade()  # a collection made before the delta tables
        return collection

    def relations(self, opened: Collection) -> Mapping[str, Relation]:
        return {"": CollectionRelation(opened)}

    def relation_names(self, name: str, spec: dict[str, Any]) -> list[str]:
        return [name]

    def close(self, opened: Collection) -> None:
        pass  # its backend is shared: closed by shutdown

    def drop(self, name: str, spec: dict[str, Any], opened: Collection | None) -> None:
        if opened is None:
            try:
                opened = self.open(name, spec)
            except DocumentBackendError:  # its backend file is gone: only the name is left
                return
        opened.drop()
        self.store.forget(name)

    def describe(self, objects: Sequence[CatalogObject]) -> list[ObjectInfo]:
        return [
            ObjectInfo(
                obj.name,
                self.name,
                self.context.objects.get(obj.name).count(),
                None,
                obj.created,
                obj.modified,
            )
            for obj in objects
        ]

    def check(
        self, objects: Sequence[CatalogObject], repair: bool
    ) -> tuple[list[Finding], list[Verified]]:
        from tesseradb.checks import Finding

        findings: list[Finding] = []
        verified: list[Verified] = []
        for obj in objects:
            guarded_check(
                obj.name,
                "collection",
                lambda o=obj: self.context.objects.get(o.name).check(),
                findings,
                verified,
            )
        if objects:
            for backend in self.store.open_backends():
                try:
                    problems = backend.integrity_problems()
                except TesseraError as err:
                    problems = [str(err)]
                findings.extend(
                    Finding("(documents)", f"backend {backend.describe()}", p) for p in problems
                )
        return findings, verified

    def shutdown(self) -> None:
        if self._store is not None:
            self._store.close()
