"""Record streams as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

A stream's catalog spec is ``{"descriptor": ..., "options": ...}``; its
storage is the call log and segment files under ``streams/<name>/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tesseradb.kinds import KeptInStorage, LoadRequest, ObjectInfo, iso
from tesseradb.records._check import check_stream
from tesseradb.records._descriptor import RecordDescriptor
from tesseradb.records._load import LOAD_OPTIONS, RECORD_SUFFIXES, load_stream
from tesseradb.records._options import StreamOptions
from tesseradb.records._segments import key_orders
from tesseradb.records._stream import Stream

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.relation import Relation

__all__ = ["StreamKind"]


class StreamKind(KeptInStorage):
    name = "stream"
    label = "stream"
    directory = "streams"
    # Loading: CSV, Parquet, Arrow IPC and packed binary records (records/_load.py)
    load_suffixes = RECORD_SUFFIXES
    load_defaults = frozenset({"binary"})
    load_options = LOAD_OPTIONS
    load_unit = "records"

    @staticmethod
    def crash_model() -> Any:
        """What this kind's writers do in the crash matrix (tesseradb.testing.crash)."""
        from tesseradb.records._crash import StreamCrashModel

        return StreamCrashModel()

    def new_spec(
        self, name: str, descriptor: Any, options: dict[str, Any], location: str | None = None
    ) -> dict[str, Any]:
        """The catalog spec of a new stream (``db.create_stream``'s arguments, checked)."""
        from tesseradb.catalog import validate_name
        from tesseradb.errors import DescriptorError, InvalidNameError

        validate_name(name, "stream")
        parsed = RecordDescriptor.parse(descriptor)
        for field in parsed.fields:  # (a field is a column: named as columns are)
            try:
                validate_name(field.name, "field")
            except InvalidNameError as err:
                raise DescriptorError(f"stream {name!r}: {err}") from None
        checked = StreamOptions.from_dict(options)
        key_orders(parsed, checked.indexes)  # (each index on indexing fields: refused here)
        spec = {"descriptor": parsed.to_dict(), "options": checked.to_dict()}
        return self.placed(name, spec, location)

    def load(self, request: LoadRequest) -> tuple[int, str]:
        objects = self.context.objects
        return load_stream(
            request,
            lambda: objects.get(request.name),
            lambda descriptor: objects.create(
                self.name, request.name, self.new_spec(request.name, descriptor, {})
            ),
        )

    def open(self, name: str, spec: dict[str, Any]) -> Stream:
        options = StreamOptions.from_dict(spec["options"])
        if self.context.memory_limit is not None:  # its segment cache takes an eighth at most
            from dataclasses import replace

            from tesseradb._limits import limit_bytes

            bound = limit_bytes(self.context.memory_limit) // 8
            options = replace(options, cache_bytes=min(options.cache_bytes, bound))
        return Stream(
            name,
            RecordDescriptor.from_dict(spec["descriptor"]),
            options,
            self.folder(name),  # made when the stream opens
            self.context.read_only,
            self.stored_location(spec),
        )

    def details(self, name: str, opened: Stream) -> dict[str, Any]:
        return {
            "descriptor": {
                "fields": [f.name for f in opened.descriptor.fields],
                "index": list(opened.descriptor.index),
            },
            "records": opened.num_records,
            "segments": opened.num_segments,
            "bytes": opened.bytes_on_disk,
            **({"location": opened.location} if opened.location else {}),
        }

    def relations(self, opened: Stream) -> Mapping[str, Relation]:
        return {"": opened}

    def close(self, opened: Stream) -> None:
        opened.close()  # writes what is still in memory

    def drop(self, name: str, spec: dict[str, Any], opened: Stream | None) -> None:
        if opened is not None:
            opened.close(flush=False)
        shutil.rmtree(self.folder(name), ignore_errors=True)
        self.delete_stored(name, spec)

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
        location = self.stored_location(obj.spec)
        if location is not None:
            from tesseradb.records._check import check_remote_stream

            opened = stream if stream is not None else self.context.objects.get(obj.name)
            return check_remote_stream(obj.name, opened)
        found, ok = check_stream(obj.name, descriptor, directory, repair)
        if stream is not None and any(f.repaired for f in found):
            stream.reload()  # serve what repair kept
        return found, ok
