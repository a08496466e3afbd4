"""The storage of one open database: where each new object's bulk data goes.

A database is a small local directory plus a storage location for bulk data: the
directory itself (the default), or an object-store URL recorded in the catalog when
the database is made (``connect(path, storage="s3://bucket/prefix")``). Each object
records its own location in its catalog spec (a URL, never a credential), so a
database can hold local and remote objects side by side, and ``location=`` on a
create call puts one object somewhere else.
"""

from __future__ import annotations

import uuid
from typing import Any

from tesseradb.errors import StorageError
from tesseradb.storage._credentials import Credentials, resolve_credentials
from tesseradb.storage._location import Location, StoredObject, parse_url

__all__ = ["Storage"]


class Storage:
    """Where an open database puts bulk data, and the credentials it reaches stores with."""

    def __init__(self, default: str | None, options: dict[str, Any] | None, where: str) -> None:
        self.where = where
        self._options = dict(options or {})
        self._credentials: Credentials | None = None
        # (one Location per URL: each holds its HTTP client, made once, reused by every
        # statement instead of a new client per file and per statement)
        self._locations: dict[str, Location] = {}
        if options:  # (checked now: a bad option is an error of connect itself)
            self._credentials = resolve_credentials(self._options, where)
        self.default = self.at(default) if default else None

    @classmethod
    def with_credentials(cls, credentials: Credentials) -> Storage:
        """A storage with no default location that reaches stores with ``credentials``
        (what a Dask worker rebuilds from a task)."""
        made = cls(None, None, "storage")
        made._credentials = credentials
        return made

    @property
    def credentials(self) -> Credentials:
        # (resolved when first needed: a local database never reads ~/.aws)
        if self._credentials is None:
            self._credentials = resolve_credentials(self._options, self.where)
        return self._credentials

    @property
    def url(self) -> str | None:
        """The default location's URL, or None for the database directory."""
        return self.default.url if self.default is not None else None

    def at(self, url: str, where: str | None = None) -> Location:
        """The location at ``url``, reached with this database's credentials."""
        found = self._locations.get(url)
        if found is None:
            found = Location(url, self.credentials, where or self.where)
            if len(self._locations) > 4096:
                self._locations.clear()
            self._locations[url] = found
        return found

    def place(self, directory: str, name: str, location: str | None, where: str) -> str | None:
        """The URL for a new object's bulk data (None: the database directory).

        An explicit ``location`` must be empty, so two objects never share data and a
        drop deletes only its own; under the default, each object gets a fresh prefix
        (``<storage>/<kind directory>/<name>-<random>``), so a name reused after a drop
        whose delete was cut short never meets the old objects.
        """
        if location is not None:
            place = self.at(location, where)
            if not place.is_empty():
                raise StorageError(
                    f"{where}: {place.url} already holds objects; give an empty location "
                    "(to read data that is already there, attach or open it in place)"
                )
            return place.url
        if self.default is None:
            return None
        return self.default.join(directory, f"{name}-{uuid.uuid4().hex[:8]}").url

    def matching(self, pattern: str, where: str) -> tuple[Location, list[StoredObject]]:
        """The bucket of an ``s3://`` name or glob and the objects it matches, sorted by
        path. A glob lists the bucket once, below its literal folder, and matches each
        path part by part: a ``*`` does not cross a ``/``, as in a shell. A name matches
        its object, or every object below it when it names a folder (a Zarr store)."""
        import fnmatch

        bucket, key = parse_url(pattern, where)
        root = self.at(f"s3://{bucket}", where)
        if not any(c in key for c in "*?["):
            below = [o for o in root.list(key + "/")] if key else list(root.list())
            if below:
                return root, sorted(below, key=lambda o: o.path)
            return root, [root.head(key)]
        literal = key[: min(key.index(c) for c in "*?[" if c in key)]
        folder = literal.rsplit("/", 1)[0] + "/" if "/" in literal else ""
        wanted = key.split("/")
        found = [
            stored
            for stored in root.list(folder)
            if len(stored.path.split("/")) == len(wanted)
            and all(
                fnmatch.fnmatchcase(part, want)
                for part, want in zip(stored.path.split("/"), wanted, strict=True)
            )
        ]
        return root, sorted(found, key=lambda o: o.path)
