"""Arrays: SciDB's array model on versioned Zarr v3 (Icechunk).

An array has named integer dimensions (chunked, with an overlap read as a
halo) and named numeric attributes, each stored as its own Zarr array in the
array's Icechunk repository. Writes are commits (versions); reads see one
version; chunk-parallel functions see each chunk with its halo. The
:class:`Array` is also a relation for SQL: one row per cell of the written
chunks, dimension columns in world coordinates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tesseradb._lazy import exports

if TYPE_CHECKING:
    from tesseradb.arrays._array import Array, ArrayCorruptError, ArrayDtypeError, ArrayView
    from tesseradb.arrays._boxes import ArrayBoundsError
    from tesseradb.arrays._check import check_array
    from tesseradb.arrays._decode import clear_chunk_cache
    from tesseradb.arrays._handles import ArrayFork, ChunkView
    from tesseradb.arrays._kind import ArrayKind
    from tesseradb.arrays._methods import ArrayMethods
    from tesseradb.arrays._operators import overlay_arrays
    from tesseradb.arrays._parts import ArrayPart, PartSpec, parts_directory, union_parts
    from tesseradb.arrays._repository import ArrayConflictError, Version, VersionNotFoundError
    from tesseradb.arrays._schema import ArraySchema, ArraySchemaError, Attribute, Dimension


__all__ = [
    "Array",
    "ArrayBoundsError",
    "ArrayConflictError",
    "ArrayCorruptError",
    "ArrayDtypeError",
    "ArrayFork",
    "ArrayKind",
    "ArrayMethods",
    "ArrayPart",
    "ArraySchema",
    "ArraySchemaError",
    "ArrayView",
    "Attribute",
    "ChunkView",
    "Dimension",
    "PartSpec",
    "Version",
    "VersionNotFoundError",
    "check_array",
    "clear_chunk_cache",
    "overlay_arrays",
    "parts_directory",
    "union_parts",
]

# each name imported from its module when first used (tesseradb._lazy)
__getattr__, __dir__ = exports(
    __name__,
    {
        "ArrayMethods": "tesseradb.arrays._methods",
        "Array": "tesseradb.arrays._array",
        "ArrayCorruptError": "tesseradb.arrays._array",
        "ArrayDtypeError": "tesseradb.arrays._array",
        "ArrayFork": "tesseradb.arrays._handles",
        "ArrayView": "tesseradb.arrays._array",
        "ChunkView": "tesseradb.arrays._handles",
        "ArrayBoundsError": "tesseradb.arrays._boxes",
        "check_array": "tesseradb.arrays._check",
        "clear_chunk_cache": "tesseradb.arrays._decode",
        "ArrayKind": "tesseradb.arrays._kind",
        "overlay_arrays": "tesseradb.arrays._operators",
        "ArrayPart": "tesseradb.arrays._parts",
        "PartSpec": "tesseradb.arrays._parts",
        "parts_directory": "tesseradb.arrays._parts",
        "union_parts": "tesseradb.arrays._parts",
        "ArrayConflictError": "tesseradb.arrays._repository",
        "Version": "tesseradb.arrays._repository",
        "VersionNotFoundError": "tesseradb.arrays._repository",
        "ArraySchema": "tesseradb.arrays._schema",
        "ArraySchemaError": "tesseradb.arrays._schema",
        "Attribute": "tesseradb.arrays._schema",
        "Dimension": "tesseradb.arrays._schema",
    },
)
