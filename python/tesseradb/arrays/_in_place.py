"""Icechunk repositories and Zarr v3 stores opened in place (``db.open_array("s3://...")``).

The repository is registered as a read-only array without copying a byte: its catalog
spec records the location and the schema. A repository TesseraDB made keeps its schema
in the group's attributes; any other is read as zarr-python would: the root group's
arrays of the largest rank that share one shape, chunking and dimension names are the
attributes, and 1-D arrays named after a dimension are its coordinates (left out).
Dropping it forgets it; the repository is never written or deleted.
"""

from __future__ import annotations

from typing import Any

from tesseradb.arrays._repository import ArrayRepository
from tesseradb.arrays._schema import ArraySchema
from tesseradb.errors import ArraySchemaError, TesseraError

__all__ = ["in_place_schema"]


def in_place_schema(repo: ArrayRepository, where: str) -> ArraySchema:
    """The schema of the Icechunk repository or Zarr store ``repo``, read from its head."""
    import zarr

    session = repo.readonly()
    with repo.damage("its root group"):
        group = zarr.open_group(session.store, mode="r", zarr_format=3)
        made_here = group.attrs.get("tessera")
        if isinstance(made_here, dict):
            return ArraySchema.from_dict(made_here)
        arrays = {n: a for n, a in group.arrays()}
    if not arrays:
        raise ArraySchemaError(f"{where}: the repository's root group holds no arrays")
    named_dims = {d for a in arrays.values() for d in _dimension_names(a) if d}
    candidates = {
        n: a for n, a in arrays.items() if not (a.ndim == 1 and n in named_dims and len(arrays) > 1)
    }
    if not candidates:
        raise ArraySchemaError(
            f"{where}: the repository's root group holds only coordinate arrays "
            f"({', '.join(sorted(arrays))})"
        )
    rank = max(a.ndim for a in candidates.values())
    ranked = sorted((n, a) for n, a in candidates.items() if a.ndim == rank)
    first = ranked[0][1]
    # (a sharded array is read a shard at a time: its shards are the chunks stored)
    shape, chunks = first.shape, _stored_chunks(first)
    dim_names = _dimension_names(first) or tuple(f"dim_{i}" for i in range(rank))
    chosen = [
        (n, a)
        for n, a in ranked
        if a.shape == shape
        and _stored_chunks(a) == chunks
        and _dimension_names(a) in ((), dim_names)
    ]
    skipped = sorted(set(arrays) - {n for n, _ in chosen})
    dims = [
        {"name": dim, "start": 0, "end": int(shape[i]), "chunk": int(chunks[i])}
        for i, dim in enumerate(dim_names)
    ]
    attrs = []
    for attr_name, array in chosen:
        fill = array.fill_value
        attrs.append(
            {
                "name": attr_name,
                "dtype": str(array.dtype),
                **(
                    {"fill": fill.item() if hasattr(fill, "item") else fill}
                    if fill is not None
                    else {}
                ),
            }
        )
    try:
        return ArraySchema.build(
            dims, attrs, extra={"in_place_skipped": skipped} if skipped else None
        )
    except TesseraError as err:
        raise ArraySchemaError(
            f"{where}: its arrays {', '.join(n for n, _ in chosen)} cannot be read as one "
            f"array ({err})"
        ) from None


def _stored_chunks(array: Any) -> tuple[int, ...]:
    """The shape of the pieces ``array`` stores: its shards when sharded, else its chunks."""
    return tuple(getattr(array, "shards", None) or array.chunks)


def _dimension_names(array: Any) -> tuple[str, ...]:
    """A Zarr array's dimension names (none for Zarr v2 metadata, or when unnamed)."""
    names = getattr(array.metadata, "dimension_names", None) or ()
    return tuple(n for n in names if n)


def check_source(source: Any, where: str) -> str:
    from tesseradb.errors import InvalidArgumentError
    from tesseradb.storage import is_url

    if not isinstance(source, str) or not is_url(source):
        raise InvalidArgumentError(
            f"{where}: give the s3:// URL of an Icechunk repository or a Zarr v3 store "
            "(a repository in the database directory is an array of it already)"
        )
    return source
