"""The Database's methods for record streams (a mixin of :class:`tesseradb.database.Database`):
the typed front of this room, kept here so that the hall holds no data model's API.

They use the database's ``_registry`` and ``_check_open``, and import nothing heavy: a
room's code is imported when one of its objects is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb.errors import require_str
from tesseradb.kinds import DatabaseMethods

if TYPE_CHECKING:
    from tesseradb.records._stream import Stream

__all__ = ["StreamMethods"]


class StreamMethods(DatabaseMethods):
    def create_stream(
        self, name: str, descriptor: Any, location: str | None = None, **options: Any
    ) -> Stream:
        """Create a record stream (MDDS) whose records ``descriptor`` describes.

        ``descriptor`` is the paper's XML record descriptor, the same as a dict
        or JSON text, or a :class:`RecordDescriptor`. ``options`` are those of
        :class:`StreamOptions`: ``max_chunk_records``, ``segment_bytes``,
        ``scheme`` (``kdtree``, the default, or ``random``), ``overpacking``,
        ``iterator`` (``auto``, the default, ``kdtree`` or ``sequential``),
        ``cache_bytes``, ``writer_threads``,
        ``writer_period_ms``, ``compression`` (``zstd`` or ``none``), ``seed``.
        ``location`` (an empty ``s3://bucket/prefix``) keeps this stream's sealed
        segments there instead of in the database's storage (docs/storage.md).
        """
        require_str(name, "name", "db.create_stream")
        self._check_open()
        self._registry.check_writable("create a stream")
        if location is not None:
            require_str(location, "location", "db.create_stream")
        spec = self._registry.kind("stream").new_spec(name, descriptor, options, location)
        stream: Stream = self._registry.create("stream", name, spec)
        return stream

    def stream(self, name: str) -> Stream:
        """The record stream called ``name``: ingest, flush, range queries."""
        require_str(name, "name", "db.stream")
        stream: Stream = self._registry.get(name, "stream")
        return stream

    def streams(self) -> list[str]:
        """Names of the record streams."""
        return [o.name for o in self.catalog.objects("stream")]
