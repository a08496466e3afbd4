"""Plain Zarr v3 stores opened in place (``db.open_array("s3://.../store.zarr")``).

A plain store keeps no versions and no snapshots: every object is overwritten in
place. So that no cache ever answers from a store that has changed, a read session
is named by the store's listing (each object's key, size and entity tag): one
LIST request per 1,000 objects when a statement begins, and a new name as soon as
any chunk or metadata object changes. The same listing tells which chunks were
written, without a request per chunk. What a plain store cannot give is isolation
from a writer busy with it while a statement reads: that needs Icechunk.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb.arrays._repository import ArrayRepository, Version
from tesseradb.errors import ReadOnlyError, VersionNotFoundError

if TYPE_CHECKING:
    from tesseradb.storage import Location

__all__ = ["StoreSession", "ZarrStoreRepository", "is_zarr_store"]


def is_zarr_store(location: Location, where: str) -> bool:
    """Whether ``location`` is the root of a plain Zarr v3 store (its ``zarr.json``)."""
    from tesseradb.errors import StorageError, StoredObjectMissingError

    try:
        location.head("zarr.json")
    except StoredObjectMissingError:
        return False
    except StorageError as err:
        raise StorageError(f"{where}: {err}") from None
    return True


class StoreSession:
    """A read session of a plain Zarr store at one listing: what an Icechunk read-only
    session gives the readers (``store``, ``snapshot_id``, ``chunk_coordinates``), and
    picklable, so a Dask worker reads the same listing's chunks."""

    read_only = True
    has_uncommitted_changes = False

    def __init__(self, location: Location, listing: dict[str, tuple[int, str | None]]) -> None:
        self.location = location
        self.listing = listing
        digest = hashlib.sha256()
        for key in sorted(listing):
            size, tag = listing[key]
            digest.update(f"{key}\0{size}\0{tag}\n".encode())
        self.snapshot_id = "zarr-" + digest.hexdigest()[:20]
        self._store: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"location": self.location, "listing": self.listing}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["location"], state["listing"])  # type: ignore[misc]

    @property
    def store(self) -> Any:
        """The store as zarr-python reads it; the object store's errors become StorageErrors."""
        if self._store is None:
            self._store = _checked_store(self.location)
        return self._store

    async def chunk_coordinates(self, path: str) -> AsyncIterator[tuple[int, ...]]:
        """The grid coordinates of every stored chunk of the array at ``path``."""
        import zarr.api.asynchronous as zarr_async

        name = path.strip("/")
        array = await zarr_async.open_array(store=self.store, path=name, mode="r", zarr_format=3)
        encoding = array.metadata.chunk_key_encoding
        prefix = f"{name}/"
        for key in self.listing:
            if key.startswith(prefix):
                coords = _chunk_coordinates(encoding, key[len(prefix) :])
                if coords is not None:
                    yield coords

    def discard_changes(self) -> None:
        """(Nothing to discard: a store session never writes.)"""


def _chunk_coordinates(encoding: Any, key: str) -> tuple[int, ...] | None:
    """The grid coordinates a chunk key names under ``encoding`` (``c/1/2`` by default, ``1.2``
    for the v2 style), or None for any other object (metadata, a stray file)."""
    # (parsed here: zarr 3.1's decode_chunk_key mistakes the separator after the "c")
    separator = getattr(encoding, "separator", "/")
    body = key
    if getattr(encoding, "name", "default") == "default":
        if key == "c":
            return ()
        if not key.startswith("c" + separator):
            return None
        body = key[2:]
    try:
        coords = tuple(int(part) for part in body.split(separator))
    except ValueError:
        return None
    return coords if encoding.encode_chunk_key(coords) == key else None


def _checked_store(location: Location) -> Any:
    """zarr-python's ObjectStore over ``location``, read-only, naming the URL in its errors."""
    from zarr.storage import ObjectStore

    class CheckedStore(ObjectStore):  # type: ignore[type-arg]
        async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
            with location.failures("read", key):
                return await super().get(key, prototype, byte_range)

    return CheckedStore(location.store(), read_only=True)


class ZarrStoreRepository(ArrayRepository):
    """A plain Zarr v3 store read as an array's repository: one version, the store as it is
    now, named by its listing (module docstring)."""

    def __init__(self, name: str, directory: Path, location: Location) -> None:
        super().__init__(name, directory, location)
        self.store_location = location
        self._session_lock = threading.Lock()
        self._last: StoreSession | None = None

    def _listed(self) -> StoreSession:
        listing = {o.path: (o.size, o.etag) for o in self.store_location.list()}
        session = StoreSession(self.store_location, listing)
        with self._session_lock:
            # the same listing keeps the same session: its opened arrays stay warm
            if self._last is not None and self._last.snapshot_id == session.snapshot_id:
                return self._last
            self._last = session
        return session

    def readonly(self, version: str | None = None, as_of: datetime | None = None) -> Any:
        session = self._listed()
        if as_of is not None or (version is not None and version != session.snapshot_id):
            asked = f"version {version!r}" if version is not None else f"version as of {as_of}"
            raise VersionNotFoundError(
                f"array {self.name!r} has no {asked}: it is a plain Zarr store at {self.where}, "
                f"which keeps no versions; only the store as it is now ({session.snapshot_id})"
            )
        return session

    def head(self) -> str:
        return str(self._listed().snapshot_id)

    def versions(self) -> list[Version]:
        return []  # (a plain store keeps none)

    def writable(self) -> Any:
        raise ReadOnlyError(f"cannot write array {self.name!r}: a Zarr store opened in place")
