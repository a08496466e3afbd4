"""Arrays as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

An array's catalog spec is ``{"schema": ArraySchema.to_dict()}``; its
storage is the Icechunk repository under ``arrays/<name>/``, or at the spec's
``location`` (an ``s3://`` URL) with only the commit lock in that folder.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb.arrays._array import Array
from tesseradb.arrays._check import check_array
from tesseradb.arrays._export import EXPORT_SUFFIXES, export_array
from tesseradb.arrays._files import ARRAY_SUFFIXES
from tesseradb.arrays._load import LOAD_OPTIONS, ArrayLoad, load_arrays
from tesseradb.arrays._repository import ArrayRepository
from tesseradb.arrays._schema import ArraySchema
from tesseradb.errors import TesseraError
from tesseradb.kinds import ExportRequest, KeptInStorage, LoadRequest, ObjectInfo, iso

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.relation import Relation

__all__ = ["ArrayKind"]


class ArrayKind(KeptInStorage):
    name = "array"
    label = "array"
    directory = "arrays"
    # Loading: FITS, TIFF, NetCDF/HDF5, Zarr and npy/npz files (arrays/_files.py)
    load_suffixes = ARRAY_SUFFIXES
    load_defaults = frozenset(ARRAY_SUFFIXES.values())
    load_options = LOAD_OPTIONS
    load_unit = "cells"
    # Exporting: Zarr v3, NetCDF, FITS, npy (arrays/_export.py); never as rows
    export_suffixes = EXPORT_SUFFIXES
    export_options = frozenset({"attr"})
    export_unit = "cells"
    export_rows = False

    @staticmethod
    def crash_model() -> Any:
        """What this kind's writers do in the crash matrix (tesseradb.testing.crash)."""
        from tesseradb.arrays._crash import ArrayCrashModel

        return ArrayCrashModel()

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._made: dict[str, ArrayRepository] = {}  # lower name -> repository just created
        if context.memory_limit is not None:  # (the chunk caches are the process's)
            from tesseradb._limits import limit_bytes
            from tesseradb.arrays._decode import bound_chunk_caches

            bound_chunk_caches(limit_bytes(context.memory_limit))

    def create(self, name: str, spec: dict[str, Any]) -> None:
        directory = self.folder(name)
        if directory.exists():  # left by a crash between repository and catalog
            shutil.rmtree(directory)
        location = self.stored_location(spec)
        if spec.get("in_place"):
            directory.mkdir(parents=True)  # (its commit lock's folder; the repository is as it is)
            return
        try:
            made = ArrayRepository.create(name, directory, location)
            made.initialise(ArraySchema.from_dict(spec["schema"]))
            # (open takes it as it is: opening the repository again costs requests, a
            # listing and the repository's configuration, when it is in a bucket)
            self._made[name.lower()] = made
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            if location is not None:
                with contextlib.suppress(TesseraError):
                    location.delete_all()
            raise

    def open(self, name: str, spec: dict[str, Any]) -> Array:
        location = self.stored_location(spec)
        if location is not None:
            # (the folder holds only the commit lock: a worker or a new machine makes it)
            self.folder(name).mkdir(parents=True, exist_ok=True)
        made = self._made.pop(name.lower(), None)
        if made is not None and made.location == location and made.name == name:
            repo = made
        elif spec.get("format") == "zarr" and location is not None:
            from tesseradb.arrays._zarr_store import ZarrStoreRepository

            repo = ZarrStoreRepository(name, self.folder(name), location)
        else:
            repo = ArrayRepository(name, self.folder(name), location)
        array = Array(name, ArraySchema.from_dict(spec["schema"]), repo, self.context.read_only)
        array.in_place = bool(spec.get("in_place"))
        array._siblings = self.context.objects  # operators' into= make arrays beside it
        array._executors = self.context.executors
        return array

    def new_spec(
        self,
        name: str,
        dims: Any,
        attrs: Any,
        origin: Any = None,
        codec: str = "zstd",
        level: int = 3,
        metadata: dict[str, Any] | None = None,
        location: str | None = None,
    ) -> dict[str, Any]:
        """The catalog spec of a new array (``db.create_array``'s arguments, checked)."""
        from tesseradb.catalog import validate_name

        validate_name(name, "array")
        schema = ArraySchema.build(dims, attrs, origin, codec, level, metadata)
        return self.placed(name, {"schema": schema.to_dict()}, location)

    def in_place_spec(self, name: str, source: str) -> dict[str, Any]:
        """The catalog spec of the Icechunk repository or plain Zarr v3 store at ``source``
        opened in place (read-only)."""
        from tesseradb.arrays._in_place import check_source, in_place_schema
        from tesseradb.arrays._zarr_store import ZarrStoreRepository, is_zarr_store
        from tesseradb.catalog import validate_name

        where = f"db.open_array {source!r}"
        validate_name(name, "array")
        location = self.context.storage.at(check_source(source, where), where)
        nowhere = Path("/nonexistent/in-place")  # (reads only: no commit lock is taken)
        if is_zarr_store(location, where):
            repo: ArrayRepository = ZarrStoreRepository(name, nowhere, location)
            spec = {"format": "zarr"}
        else:
            repo, spec = ArrayRepository(name, nowhere, location), {}
        schema = in_place_schema(repo, where)
        return {"schema": schema.to_dict(), "location": location.url, "in_place": True, **spec}

    def load(self, request: LoadRequest) -> tuple[int, str]:
        if not request.exists:
            from tesseradb.catalog import validate_name

            validate_name(request.name, "array")
        array, cells = load_arrays(
            self.context.objects,
            request.files,
            request.format,
            request.name,
            ArrayLoad(**request.options),
            request.exists,
            request.watch,
            self.context.executors.current,
        )
        request.watch.set_total(request.watch.done)
        return cells, repr(array)

    def export(self, name: str, opened: Array, request: ExportRequest) -> int:
        attr = request.options.get("attr")
        return export_array(opened, request.path, request.format, attr, request.watch)

    def details(self, name: str, opened: Array) -> dict[str, Any]:
        return {
            "array": opened.schema.to_dict(),
            "extent": list(opened.extent()),
            "versions": [
                {"id": v.id, "time": v.time.isoformat(), "message": v.message}
                for v in opened.versions()
            ],
            "bytes": opened.bytes_on_disk,
            "location": opened._repo.where,
            "in_place": opened.in_place,
        }

    def relations(self, opened: Array) -> Mapping[str, Relation]:
        return {"": opened.relation}

    def drop(self, name: str, spec: dict[str, Any], opened: Array | None) -> None:
        self._made.pop(name.lower(), None)
        shutil.rmtree(self.folder(name), ignore_errors=True)
        if not spec.get("in_place"):  # (a repository opened in place is never deleted)
            self.delete_stored(name, spec)

    def describe_one(self, obj: CatalogObject) -> list[ObjectInfo]:
        array = self.context.objects.get(obj.name)
        modified = obj.modified
        versions = array.versions()
        if versions:
            modified = max(modified, iso(versions[0].time) or "")
        rows = array.relation.estimate(None).rows
        return [ObjectInfo(obj.name, self.name, rows, array.bytes_on_disk, obj.created, modified)]

    def check_one(self, obj: CatalogObject, repair: bool) -> tuple[list[Finding], Verified]:
        from tesseradb.checks import Finding, Verified

        if self.stored_location(obj.spec) is None and not self.folder(obj.name).is_dir():
            missing = Finding(
                obj.name,
                f"directory arrays/{obj.name}",
                "is missing",
                action="restore it from a backup, or drop the array",
            )
            return [missing], Verified(obj.name, "array", "nothing to read")
        self.context.objects.forget(obj.name)  # reopen at the head (after a repair too)
        # (a repository opened in place is read, never repaired: that is its owner's)
        return check_array(
            self.context.objects.get(obj.name), repair and not obj.spec.get("in_place")
        )
