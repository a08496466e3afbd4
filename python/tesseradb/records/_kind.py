"""Record streams as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

A stream's catalog spec is ``{"descriptor": ..., "options": ...}``; its
storage is the call log and segment files under ``streams/<name>/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tesseradb.kinds import KindBase, ObjectInfo, iso
from tesseradb.records._check import check_stream
from tesseradb.records._descriptor import RecordDescriptor
from tesseradb.records._stream import Stream, StreamOptions

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.relation import Relation

__all__ = ["StreamKind"]


class StreamKind(KindBase):
    name = "stream"
    label = "stream"
    directory = "streams"

    def open(self, name: str, spec: dict[str, Any]) -> Stream:
        return Stream(
            name,
            RecordDescriptor.from_dict(spec["descriptor"]),
            StreamOptions.from_dict(spec["options"]),
            self.folder(name),  # made when the stream opens
            self.context.read_only,
        )

    def relations(self, opened: Stream) -> Mapping[str, Relation]:
        return {"": opened}

    def close(self, opened: Stream) -> None:
        opened.close()  # writes what is still in memory

    def drop(self, name: str, spec: dict[str, Any], opened: Stream | None) -> None:
        if opened is not None:
            opened.close(flush=False)
        shutil.rmtree(self.folder(name), ignore_errors=True)

    def describe_one(self, obj: CatalogObject) -> list[ObjectInfo]:
        stream = self.context.objects.get(obj.name)
        # the call log grows with every committed ingest call
        modified = max(obj.modified, iso(stream.last_commit) or "")
        return [
            ObjectInfo(
                obj.name,
                self.name,
                stream.num_records,
                stream.bytes_on_disk,
                obj.created,
                modified,
            )
        ]

    def check_one(self, obj: CatalogObject, repair: bool) -> tuple[list[Finding], Verified | None]:
        from tesseradb.checks import Finding

        stream = self.context.objects.peek(obj.name)
        if stream is not None and not self.context.read_only:
            stream.flush()  # what is in memory is checked on disk too
        directory = self.folder(obj.name)
        if not directory.is_dir():
            return [Finding(obj.name, f"directory streams/{obj.name}", "is missing")], None
        descriptor = RecordDescriptor.from_dict(obj.spec["descriptor"])
        found, ok = check_stream(obj.name, descriptor, directory, repair)
        if stream is not None and any(f.repaired for f in found):
            stream.reload()  # serve what repair kept
        return found, ok
