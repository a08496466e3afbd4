"""Checking an array's repository, and dropping chunks that cannot be read (``tessera check``).

The head version's written chunks are fetched from disk and decoded one by
one (the codec's CRC-32C catches flipped bits; a missing or cut file fails
its fetch); every older version's snapshot and chunk lists are opened. Repair
deletes the unreadable chunks of the head in a new version, so they read as
the fill value (NULL for a nullable attribute) and the rest stays queryable;
older versions are history and are never rewritten.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tesseradb.arrays._boxes import chunk_box
from tesseradb.arrays._decode import clear_chunk_cache
from tesseradb.arrays._repository import icechunk_reason
from tesseradb.checks import Finding, Verified
from tesseradb.errors import ArrayCorruptError, TesseraError

if TYPE_CHECKING:
    from tesseradb.arrays._array import Array

__all__ = ["check_array"]


def check_array(array: Array, repair: bool) -> tuple[list[Finding], Verified]:
    """Findings about ``array`` (open at its head), with the bad chunks dropped if ``repair``."""
    from zarr.core.sync import sync

    clear_chunk_cache()  # read what is on disk now, not what an earlier read cached
    findings: list[Finding] = []
    repo = array._repo
    session = repo.readonly()
    extent = array.extent(session)
    chunks_read = 0
    bad: list[tuple[str, tuple[int, ...], str, int]] = []  # attr, chunk, reason, cells
    for attr in array.schema.attrs:
        for coords in sorted(repo.written_chunks(session, attr.name)):
            box = chunk_box(coords, array.schema.chunk_shape, extent)
            chunks_read += 1
            try:
                array._read_box(session, attr, box)
            except ArrayCorruptError as err:
                reason = str(err).split(": ", 1)[-1]
                bad.append((attr.name, coords, reason, math.prod(box.shape)))
    # the dimensions' world coordinates are derived from the schema: a damaged or wrong
    # coordinate variable is rewritten, no cell is lost
    bad_axes: list[tuple[int, str]] = []
    # (a repository opened in place keeps its owner's coordinates, whatever they are)
    for axis in range(0 if array.in_place else array.schema.ndim):
        problem = _coordinate_problem(array, session, axis, extent[axis])
        if problem is not None:
            bad_axes.append((axis, problem))
    old_versions = 0
    for version in array.versions()[1:]:
        try:
            past = repo.readonly(version=version.id)
            for attr in array.schema.attrs:
                repo.written_chunks(past, attr.name)
            old_versions += 1
        except TesseraError as err:
            findings.append(
                Finding(array.name, f"version {version.id}", f"cannot be opened: {err}")
            )

    if (bad or bad_axes) and repair:
        writable = repo.writable()
        for attr_name, coords, _, _ in bad:
            zarr_array = repo.zarr_array(writable, attr_name)
            prefix = f"{zarr_array.path}/" if zarr_array.path else ""
            with repo.damage(f"chunk {coords} of attribute {attr_name!r}"):
                sync(writable.store.delete(prefix + zarr_array.metadata.encode_chunk_key(coords)))
        for axis, _ in bad_axes:
            coordinate = repo.coordinate_array(writable, array.schema.dims[axis].name)
            if coordinate is not None and extent[axis]:
                coordinate[:] = array.schema.world_axis(axis, 0, extent[axis])
        done = [f"dropped {len(bad)} unreadable chunk(s)"] if bad else []
        done += [f"rewrote {len(bad_axes)} dimension(s)' world coordinates"] if bad_axes else []
        repaired_in = repo.commit(writable, f"tessera check --repair: {', '.join(done)}")
        clear_chunk_cache()
    for axis, reason in bad_axes:
        findings.append(
            Finding(
                array.name,
                f"world coordinates of dimension {array.schema.dims[axis].name!r}",
                reason,
                action=f"rewritten in version {repaired_in}" if repair else "",
                repaired=repair,
            )
        )
    for attr_name, coords, reason, cells in bad:
        findings.append(
            Finding(
                array.name,
                f"attribute {attr_name!r}, chunk {coords}",
                reason,
                action=f"dropped in version {repaired_in}: reads as the fill value"
                if repair
                else "",
                lost=f"{cells:,} cells" if repair else "",
                repaired=repair,
            )
        )
    what = (
        f"{chunks_read - len(bad):,} of {chunks_read:,} chunks decoded at the head, "
        f"{old_versions:,} older version(s) opened"
    )
    return findings, Verified(array.name, "array", what)


def _coordinate_problem(array: Array, session: Any, axis: int, length: int) -> str | None:
    """What is wrong with the coordinate variable of dimension ``axis``, or None.

    A repository made before arrays kept coordinate variables has none: nothing is wrong.
    """
    import numpy as np

    dim = array.schema.dims[axis].name
    try:
        coordinate = array._repo.coordinate_array(session, dim)
        if coordinate is None:
            return None
        values = np.asarray(coordinate[:]) if length else np.empty(0, np.int64)
    except Exception as err:  # any failure to read them is what the check reports
        return f"cannot be read ({type(err).__name__}: {icechunk_reason(err)})"
    if values.shape != (length,) or not np.array_equal(
        values, array.schema.world_axis(axis, 0, length)
    ):
        return "do not match the array's dimension"
    return None
