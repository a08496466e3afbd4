"""The Database's methods for JSON collections (a mixin of :class:`tesseradb.database.Database`):
the typed front of this room, kept here so that the hall holds no data model's API.

They use the database's ``_registry`` and ``_check_open``, and import nothing heavy: a
room's code is imported when one of its objects is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb.errors import require_str
from tesseradb.kinds import DatabaseMethods

if TYPE_CHECKING:
    from tesseradb.documents._collection import Collection

__all__ = ["CollectionMethods"]


class CollectionMethods(DatabaseMethods):
    def create_collection(
        self, name: str, backend: str | None = None, mapping: str | None = None
    ) -> Collection:
        """Create a JSON collection (Argo) on ``backend`` under ``mapping``.

        ``backend`` is ``sqlite`` or ``duckdb`` (files inside the database
        directory) or a server URL (``postgresql://user@host:port/db``,
        ``mysql://user:password@host:port/db``); ``mapping`` is ``argo1`` (one
        vertical table), ``argo3`` (a table per JSON type) or ``hybrid`` (argo3
        plus each object's packed text). Both default to the best embedded
        configuration measured by ``tessera bench nobench``.
        """
        require_str(name, "name", "db.create_collection")
        self._check_open()
        self._registry.check_writable("create a collection")
        spec = self._registry.kind("collection").new_spec(name, backend, mapping)
        collection: Collection = self._registry.create("collection", name, spec)
        return collection

    def collection(self, name: str) -> Collection:
        """The JSON collection called ``name``: insert, load, find, Argo/SQL."""
        require_str(name, "name", "db.collection")
        self._check_open()
        return self._registry.kind("collection").collection(name)

    def collections(self) -> list[str]:
        """Names of the JSON collections."""
        return [o.name for o in self.catalog.objects("collection")]

    def argo(self, text: str, params: Any = None, into: str | None = None) -> list[dict[str, Any]]:
        """Run one Argo/SQL statement; its result objects (in objid order unless ORDER BY).

        ``INSERT INTO c OBJECT {...}`` creates ``c`` on the default backend if
        it does not exist, as Argo does. ``params`` binds ``?`` (a sequence)
        or ``:name`` (a mapping) placeholders. Each statement is one
        transaction on the collection's backend.

        ``into`` keeps a SELECT's results as a temporary collection of that name (the
        Argo paper's "the final result is inserted into a temporary table"): later
        Argo/SQL statements, ``db.collection`` and ``db.sql`` read it until the database
        closes. It is in no catalog and no other process sees it, so a read-only
        database makes them too; the same ``into`` again replaces it.
        """
        self._check_open()
        return self._registry.kind("collection").argo(text, params, into)
