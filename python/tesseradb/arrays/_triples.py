"""Scattered cells (D4M's putTriple): coordinates and values written into an array.

A Rust kernel buckets the cells by chunk (a counting sort), patches each touched
chunk and encodes it, chunks in parallel; encodings it does not write go through
zarr-python, chunk by chunk in threads. A mixin of the array classes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import refuses_when_closed
from tesseradb.arrays._boxes import ArrayBoundsError, chunk_box
from tesseradb.arrays._encode import scatter_cells, scatter_supported
from tesseradb.executor import default_threads

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    import icechunk
    import numpy as np

    from tesseradb.arrays._repository import ArrayRepository
    from tesseradb.arrays._schema import ArraySchema
    from tesseradb.errors import ArrayCorruptError

__all__ = ["TripleWrites"]


@refuses_when_closed
class TripleWrites:
    """``put_triples`` for an array class (which gives the session and chunk access)."""

    name: str
    schema: ArraySchema
    _repo: ArrayRepository

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...
        def _write_session(self) -> tuple[icechunk.Session, bool]: ...
        def _commit(self, session: icechunk.Session, message: str) -> None: ...
        def extent(self, session: icechunk.Session | None = None) -> tuple[int, ...]: ...
        def _zarr(self, session: icechunk.Session, attr: str) -> Any: ...
        def _blocks(
            self, values: Any, shape: tuple[int, ...], where: str
        ) -> dict[str, np.ndarray]: ...
        def _grow(
            self, session: icechunk.Session, extent: Sequence[int], hi: Sequence[int]
        ) -> None: ...
        def _corrupt(
            self, attr: Any, coords: tuple[int, ...], reason: str
        ) -> ArrayCorruptError: ...

    def put_triples(self, coords: Any, values: Any, workers: int | None = None) -> int:
        """Write scattered cells: their coordinates and values (D4M's putTriple).

        ``coords`` is one sequence per dimension (an integer array, or one
        integer shared by every cell: the slice number of a slice's triples)
        or an n x ndim array. A Rust kernel buckets the cells by chunk (a
        counting sort), patches each touched chunk (its stored cells, or the
        fill value) and encodes it, chunks in parallel. For repeated
        coordinates the last value wins, as in numpy. One commit. Returns the
        number of cells written. ``workers`` bounds the threads of the
        zarr-python path (blosc arrays).
        """
        import numpy as np

        from tesseradb import _core

        where = f"put_triples into {self.name!r}"
        columns, n = self._coordinate_columns(coords, where)
        session, own = self._write_session()
        try:
            extent = list(self.extent(session))
            starts = [dim.start for dim in self.schema.dims]
            if n:
                # (None only for an empty column, and every column has n cells)
                bounds = [b for b in _core.triple_bounds(columns) if b is not None]
                lo = [b[0] - s for b, s in zip(bounds, starts, strict=True)]
                hi = [b[1] - s for b, s in zip(bounds, starts, strict=True)]
                self._check_triple_bounds(lo, hi, extent, where)
            blocks = self._blocks(values, (n,), where)
            if n == 0:
                if own:
                    session.discard_changes()
                return 0
            self._grow(session, extent, tuple(h + 1 for h in hi))
            extent = list(self.extent(session))
            chunk_shape = list(self.schema.chunk_shape)
            repo_dir = self._repo.where
            cells = None  # the cells bucketed by chunk, once for every attribute
            for attr_name, vals in blocks.items():
                attr = self.schema.attribute(attr_name)
                array = self._zarr(session, attr.name)
                written = self._repo.written_chunks(session, attr.name)
                if not scatter_supported(array):
                    pos = np.stack(
                        [np.broadcast_to(np.asarray(c, dtype=np.int64), (n,)) for c in columns],
                        axis=1,
                    ) - np.asarray(starts)
                    self._put_cells_through_zarr(attr, array, pos, vals, extent, written, workers)
                    continue
                if cells is None:
                    cells = _core.TripleCells(columns, starts, chunk_shape, extent)
                damaged = scatter_cells(session, repo_dir, array, cells, vals, written)
                if damaged is not None:
                    raise self._corrupt(attr, *damaged)
        except BaseException:
            if own:
                session.discard_changes()
            raise
        if own:
            self._commit(session, f"put_triples: {n} cells")
        return n

    def _put_cells_through_zarr(
        self,
        attr: Any,
        array: Any,
        pos: np.ndarray,
        vals: np.ndarray,
        extent: Sequence[int],
        written: Collection[tuple[int, ...]],
        workers: int | None,
    ) -> None:
        """put_triples for encodings the Rust kernel does not write: cells sorted into
        chunks, each chunk read, patched with numpy and written back in parallel threads."""
        import numpy as np

        chunks = np.asarray(self.schema.chunk_shape)
        grid = [-(-e // c) for e, c in zip(extent, chunks, strict=True)]
        cid = np.ravel_multi_index(tuple((pos // chunks).T), grid)
        order = np.argsort(cid, kind="stable")
        cid = cid[order]
        starts = np.flatnonzero(np.r_[True, cid[1:] != cid[:-1]])
        ends = np.r_[starts[1:], len(cid)]
        sorted_vals, sorted_pos = vals[order], pos[order]

        def update(k: int) -> None:
            s, e = starts[k], ends[k]
            coords_k = tuple(int(c) for c in np.unravel_index(cid[s], grid))
            box = chunk_box(coords_k, self.schema.chunk_shape, extent)
            if coords_k in written:
                block = np.asarray(array[box.slices])
            else:
                block = np.full(box.shape, attr.fill, dtype=attr.numpy_dtype)
            local = sorted_pos[s:e] - np.asarray(box.lo)
            block[tuple(local.T)] = sorted_vals[s:e]
            array[box.slices] = block

        with ThreadPoolExecutor(workers or default_threads()) as pool:
            list(pool.map(update, range(len(starts))))

    def _coordinate_columns(self, coords: Any, where: str) -> tuple[list[Any], int]:
        """``coords`` as one column per dimension (a contiguous int32 or int64 array, or
        an int for every cell), and the number of cells."""
        import numpy as np

        ndim = self.schema.ndim
        if isinstance(coords, (list, tuple)) and len(coords) == ndim:
            parts = [np.asarray(c) for c in coords]
            if all(p.ndim <= 1 for p in parts) and any(p.ndim == 1 for p in parts):
                return self._checked_columns(parts, where)
        arr = np.asarray(coords)
        if arr.ndim == 1 and ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2 or arr.shape[1] != ndim:
            raise ArrayBoundsError(
                f"{where}: coordinates must be n x {ndim}, or {ndim} sequences (an integer "
                f"for every cell allowed), not shape {arr.shape}"
            )
        return self._checked_columns([arr[:, d] for d in range(ndim)], where)

    def _checked_columns(self, parts: list[np.ndarray], where: str) -> tuple[list[Any], int]:
        import numpy as np

        lengths = {p.shape[0] for p in parts if p.ndim == 1}
        if len(lengths) > 1:
            raise ArrayBoundsError(
                f"{where}: the coordinates of dimensions "
                f"{', '.join(d.name for d in self.schema.dims)} have "
                f"{', '.join(str(p.shape[0]) if p.ndim else 'one' for p in parts)} values"
            )
        n = lengths.pop()
        columns: list[Any] = []
        for dim, p in zip(self.schema.dims, parts, strict=True):
            if p.size == 0:
                columns.append(np.empty(0, dtype=np.int64))
                continue
            if p.dtype.kind not in "iu":
                raise ArrayBoundsError(
                    f"{where}: coordinates of dimension {dim.name!r} must be integers, "
                    f"not {p.dtype}"
                )
            if p.ndim == 0:
                columns.append(int(p))
            elif p.dtype in (np.int32, np.int64):
                columns.append(np.ascontiguousarray(p))
            elif p.dtype.itemsize < 4 or p.dtype == np.uint32:
                columns.append(p.astype(np.int64 if p.dtype == np.uint32 else np.int32))
            else:  # uint64: past int64 is outside any array
                big = p > np.iinfo(np.int64).max
                if big.any():
                    raise ArrayBoundsError(
                        f"{where}: dimension {dim.name!r} index {int(p[big][0])} is too large"
                    )
                columns.append(p.astype(np.int64))
        return columns, n

    def _check_triple_bounds(
        self, lo: Sequence[int], hi: Sequence[int], extent: Sequence[int], where: str
    ) -> None:
        for axis, dim in enumerate(self.schema.dims):
            limit = (dim.end - dim.start) if dim.end is not None else None
            if lo[axis] < 0 or (limit is not None and hi[axis] >= limit):
                bad = int(lo[axis] if lo[axis] < 0 else hi[axis]) + dim.start
                end = dim.end if dim.bounded else "unbounded"
                raise ArrayBoundsError(
                    f"{where}: dimension {dim.name!r} index {bad} is outside [{dim.start}, {end})"
                )
