"""The Database's methods for arrays (a mixin of :class:`tesseradb.database.Database`):
the typed front of this room, kept here so that the hall holds no data model's API.

They use the database's ``_registry`` and ``_check_open``, and import nothing heavy: a
room's code is imported when one of its objects is first used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tesseradb.errors import require_str
from tesseradb.kinds import DatabaseMethods

if TYPE_CHECKING:
    from datetime import datetime

    from tesseradb.arrays._array import Array

__all__ = ["ArrayMethods"]


class ArrayMethods(DatabaseMethods):
    def create_array(
        self,
        name: str,
        dims: Any,
        attrs: Any,
        *,
        origin: Sequence[int] | None = None,
        codec: str = "zstd",
        level: int = 3,
        metadata: dict[str, Any] | None = None,
        location: str | None = None,
    ) -> Array:
        """Create an array with named ``dims`` and ``attrs`` (SciDB's model on Zarr v3/Icechunk).

        ``dims`` are :class:`~tesseradb.arrays.Dimension` or dicts (``name``,
        ``start``, ``end`` exclusive or None for the one unbounded dimension,
        ``chunk``, ``overlap``); ``attrs`` are
        :class:`~tesseradb.arrays.Attribute`, dicts (``name``, ``dtype``,
        ``fill``, ``nullable``) or a mapping of name to dtype. ``origin`` puts
        the array in a world coordinate system (world = index + origin).
        ``codec`` is ``zstd`` (default), ``blosc`` or ``none``, at ``level``.
        ``location`` (an empty ``s3://bucket/prefix``) keeps this array's repository
        there instead of in the database's storage (docs/storage.md).
        """
        require_str(name, "name", "db.create_array")
        self._check_open()
        self._registry.check_writable("create an array")
        spec = self._registry.kind("array").new_spec(
            name, dims, attrs, origin, codec, level, metadata, location
        )
        array: Array = self._registry.create("array", name, spec)
        return array

    def open_array(self, source: str, name: str) -> Array:
        """Register the Icechunk repository or plain Zarr v3 store at ``source``
        (``s3://bucket/.../repo``) as the read-only array ``name``, in place: nothing is copied, SQL, slabs, versions and
        xarray read it from the store, and dropping it forgets it without touching it
        (docs/storage.md)."""
        require_str(name, "name", "db.open_array")
        self._check_open()
        self._registry.check_writable("open an array in place")
        spec = self._registry.kind("array").in_place_spec(name, source)
        array: Array = self._registry.create("array", name, spec)
        return array

    def array(self, name: str, version: str | None = None, as_of: datetime | None = None) -> Array:
        """The array called ``name``; at a past ``version`` (snapshot id) or ``as_of`` a time: read-only."""
        require_str(name, "name", "db.array")
        head: Array = self._registry.get(name, "array")
        if version is None and as_of is None:
            return head
        return head.at(version, as_of)

    def arrays(self) -> list[str]:
        """Names of the arrays."""
        return [o.name for o in self.catalog.objects("array")]

    def overlay(self, arrays: Sequence[str | Array], into: str) -> Array:
        """One new array ``into`` holding the written cells of ``arrays`` laid over each
        other: later arrays win, a NULL does not overwrite a value.

        The inputs must have the same dimensions (by name) and attributes;
        the result spans their union in world coordinates. (Forks of one
        array are brought together by :meth:`Array.merge` instead.)
        """
        require_str(into, "into", "db.overlay")
        from tesseradb.arrays import overlay_arrays

        self._check_open()
        self._registry.check_writable("overlay arrays")
        inputs = [a if not isinstance(a, str) else self.array(a) for a in arrays]
        return overlay_arrays(inputs, into)
