"""The Database's methods for associative tables (a mixin of :class:`tesseradb.database.Database`):
the typed front of this room, kept here so that the hall holds no data model's API.

They use the database's ``_registry`` and ``_check_open``, and import nothing heavy: a
room's code is imported when one of its objects is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tesseradb.errors import require_str
from tesseradb.kinds import DatabaseMethods

if TYPE_CHECKING:
    from tesseradb.assoc._table import AssocTable

__all__ = ["AssocMethods"]


class AssocMethods(DatabaseMethods):
    def create_assoc_table(
        self,
        name: str,
        transpose: bool = True,
        degrees: bool = True,
        text: bool = False,
        location: str | None = None,
    ) -> AssocTable:
        """Create a persistent associative table in D4M 2.0's schema.

        It keeps its triples in row order (``Tedge``) and, with ``transpose``,
        in column order (``TedgeT``); with ``degrees`` the column degrees
        summed on insert (``TedgeDeg``); with ``text`` raw texts by row key
        (``TedgeTxt``). See docs/assoc.md. ``location`` (an empty ``s3://bucket/prefix``)
        keeps the table's runs there instead of in the database's storage.
        """
        require_str(name, "name", "db.create_assoc_table")
        self._check_open()
        self._registry.check_writable("create an associative table")
        if location is not None:
            require_str(location, "location", "db.create_assoc_table")
        spec = self._registry.kind("assoc").new_spec(name, transpose, degrees, text, location)
        table: AssocTable = self._registry.create("assoc", name, spec)
        return table

    def assoc_table(self, name: str) -> AssocTable:
        """The associative table called ``name``: put, T[rows, cols], T.T, T.deg, T.txt."""
        require_str(name, "name", "db.assoc_table")
        table: AssocTable = self._registry.get(name, "assoc")
        return table

    def assoc_tables(self) -> list[str]:
        """Names of the associative tables."""
        return [o.name for o in self.catalog.objects("assoc")]
