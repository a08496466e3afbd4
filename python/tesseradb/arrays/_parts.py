"""Parts of a parallel ingest written as arrays of their own, then unioned.

This is the SciDB D4M paper's way to ingest in parallel: each writer builds
its own new array, and one union then brings them into the target. A part is
a standalone Icechunk repository with the target's schema and extent (it is
not in the catalog: the writer runs in another process, which cannot open the
database while its owner holds it). The union copies the parts' stored chunk
payloads as they are (the encodings are the same, so nothing is decoded)
into one commit of the target. Compare :meth:`Array.fork`, whose writers'
chunks become the target's with no copy at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.arrays._decode import chunk_keys, stored_chunks
from tesseradb.arrays._encode import store_payloads
from tesseradb.arrays._handles import ArrayFork
from tesseradb.arrays._repository import ArrayConflictError, ArrayRepository
from tesseradb.arrays._schema import ArraySchema
from tesseradb.errors import ArrayCorruptError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from tesseradb.arrays._array import Array


@dataclass(frozen=True)
class PartSpec:
    """What a writer process needs to make a part of ``name``: a picklable schema and extent."""

    name: str
    schema: dict[str, Any]
    extent: tuple[int, ...]

    @classmethod
    def of(cls, array: Array) -> PartSpec:
        return cls(array.name, array.schema.to_dict(), tuple(array.extent()))


class ArrayPart:
    """A part being written: ``writer`` takes writes like a fork; :meth:`commit` keeps them."""

    def __init__(self, spec: PartSpec, directory: Path) -> None:
        schema = ArraySchema.from_dict(spec.schema)
        self.directory = directory
        self._repo = ArrayRepository.create(f"{spec.name} (part {directory.name})", directory)
        self._repo.initialise(schema)
        self._session = self._repo.writable()
        for attr in schema.attrs:  # an unbounded dimension: the target's current extent
            array = self._repo.zarr_array(self._session, attr.name)
            if tuple(array.shape) != spec.extent:
                array.resize(spec.extent)
        self.writer = ArrayFork(spec.name, schema, self._repo, self._session)

    def commit(self) -> None:
        self._repo.commit(self._session, "parallel ingest part")


def parts_directory(array: Array) -> Path:
    """A new empty directory for the parts of an ingest into ``array``, beside its repository
    (a crash leaves it behind: ``tessera check --repair`` moves it to quarantine)."""
    import uuid

    directory = array._repo.directory.parent / f".ingest-{array.name}-{uuid.uuid4().hex[:12]}"
    directory.mkdir()
    return directory


def union_parts(array: Array, directories: Sequence[Path], message: str) -> str:
    """Copy the chunks of the parts in ``directories`` into ``array`` as one commit.

    Parts must have written different chunks (a chunk is copied whole):
    :class:`ArrayConflictError` otherwise, committing nothing.
    """
    where = f"union into array {array.name!r}"
    parts = [ArrayRepository(f"{array.name} (part {d.name})", d) for d in directories]
    sessions = [p.readonly() for p in parts]
    target = array._repo.writable()
    try:
        for attr in array.schema.attrs:
            owner: dict[tuple[int, ...], int] = {}
            for i, (part, session) in enumerate(zip(parts, sessions, strict=True)):
                chunks = sorted(part.written_chunks(session, attr.name))
                for c in chunks:
                    if c in owner:
                        raise ArrayConflictError(
                            f"{where}: parts {owner[c]} and {i} both wrote chunk {c} of "
                            f"attribute {attr.name!r}; give each writer its own chunks. "
                            "Nothing was committed"
                        )
                    owner[c] = i
                if not chunks:
                    continue
                source = part.zarr_array(session, attr.name)
                payloads, unreadable = stored_chunks(session, where, source, chunks)
                if unreadable is not None:
                    raise ArrayCorruptError(
                        f"{where}: chunk {unreadable[0]} of part {i} ({unreadable[1]})"
                    )
                kept = [(c, p) for c, p in zip(chunks, payloads, strict=True) if p is not None]
                destination = array._repo.zarr_array(target, attr.name)
                store_payloads(
                    target, chunk_keys(destination, [c for c, _ in kept]), [p for _, p in kept]
                )
        return array._repo.commit(target, message)
    except BaseException:
        target.discard_changes()
        raise
