"""The Database's methods for attached files (a mixin of :class:`tesseradb.database.Database`):
the typed front of this room, kept here so that the hall holds no data model's API.

They use the database's ``_registry`` and ``_check_open``, and import nothing heavy: a
room's code is imported when one of its objects is first used.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tesseradb.errors import require_str
from tesseradb.kinds import DatabaseMethods

if TYPE_CHECKING:
    from tesseradb.attached._attachment import Attachment
    from tesseradb.progress import Cancel, ProgressLike

__all__ = ["AttachedMethods"]


class AttachedMethods(DatabaseMethods):
    def attach(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        threads: int | None = None,
        batch_bytes: int | None = None,
        stale_index: str = "rebuild",
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> Attachment:
        """Attach HDF5 (or NetCDF4) files in place: every table in them becomes ``<name>.<table>``.

        ``path`` is a file or a glob of files with the same layout (one table
        over all of them, with a ``_file`` column). Nothing is copied and the
        files are never written. ``threads`` and ``batch_bytes`` (about 32 MB)
        shape scans; ``stale_index`` is ``rebuild`` or ``bypass``: what to do
        with an index whose file changed since it was built. ``progress`` counts
        the files inspected; ``cancel`` stops the attach, which keeps nothing.
        """
        self._check_open()
        return self._registry.kind("attached").attach(
            path, name, threads, batch_bytes, stale_index, progress, cancel
        )

    def attached(self, name: str) -> Attachment:
        """The attachment called ``name``: its tables, indexes and slab reads."""
        require_str(name, "name", "db.attached")
        attachment: Attachment = self._registry.get(name, "attached")
        return attachment

    def detach(self, name: str) -> None:
        """Forget an attachment and delete its sidecar indexes (the files are untouched)."""
        require_str(name, "name", "db.detach")
        self._check_open()
        self._registry.check_writable(f"detach {name!r}")
        self._registry.drop(self.catalog.require(name, "attached").name)

    def create_index(
        self,
        table: str,
        columns: str | Sequence[str],
        kind: str = "bitmap",
        *,
        edges: Sequence[float] | None = None,
        count: int | None = None,
        precision: int | None = None,
        exact: bool = False,
        encoding: str = "equality",
        threads: int | None = None,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> None:
        """Build bitmap indexes on columns of an attached table (``db.create_index("ptf.candidate", ["mag"])``).

        Bins come from explicit ``edges``, ``count`` equal-weight bins,
        ``precision`` significant digits, or ``exact`` values; by default
        exact for up to 100,000 distinct values, else 1,000 equal-weight bins.
        ``encoding`` is ``equality`` or ``range``. Indexes are sidecar files
        under the database directory; the attached files are never changed.
        ``progress`` counts the (column, file) indexes built; ``cancel`` stops the
        build before any index is saved, so the old indexes stay.
        """
        self._check_open()
        self._registry.kind("attached").create_index(
            table,
            columns,
            kind,
            edges,
            count,
            precision,
            exact,
            encoding,
            threads,
            progress,
            cancel,
        )
