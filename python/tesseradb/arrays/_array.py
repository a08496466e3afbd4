"""An array: reads, writes, scattered triples, transactions, forks, versions and chunk views.

Writes go to an Icechunk session and become one commit (one version) per
call, or per ``with arr.transaction():`` block; a failure discards the
session, so nothing of the call is visible. Reads open a read-only session
of the head (or of the version the array was opened at), so a reader never
sees half of a commit. Parallel writer processes each take a picklable
:class:`ArrayFork`; ``arr.merge(forks)`` commits their work as one version.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import numbers
import threading
from collections import abc
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import Lifetime, refuses_when_closed
from tesseradb.arrays._boxes import ArrayBoundsError, Box, chunk_box, chunk_grid, parse_key
from tesseradb.arrays._decode import read_box, regrid_box
from tesseradb.arrays._encode import scatter_cells, scatter_supported, write_box
from tesseradb.arrays._repository import ArrayConflictError, ArrayRepository, chunk_error
from tesseradb.errors import (
    ArrayCorruptError,
    ArrayDtypeError,
    ArraySchemaError,
    InvalidArgumentError,
    ReadOnlyError,
    TesseraError,
    require_text,
)
from tesseradb.executor import ExecutorSlot, Threads, default_slot, default_threads

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator, Sequence
    from datetime import datetime
    from pathlib import Path

    import icechunk
    import numpy as np
    import xarray as xr

    from tesseradb.arrays._relation import ArrayRelation
    from tesseradb.arrays._repository import Version
    from tesseradb.arrays._schema import ArraySchema
    from tesseradb.kinds import OpenObjects
    from tesseradb.progress import Cancel, ProgressLike

__all__ = ["Array", "ArrayCorruptError", "ArrayDtypeError", "ArrayFork", "ArrayView", "ChunkView"]


@dataclass
class ChunkView:
    """One chunk of an array with its halo, as :meth:`Array.chunks` gives it.

    ``core`` and ``outer`` are the chunk's own cells and the cells read
    (core plus halo, clipped at the array's edges), in indexes; ``data``
    holds each attribute over ``outer``; ``core_slices`` is where the core
    lies inside ``data``.
    """

    coords: tuple[int, ...]
    core: tuple[slice, ...]
    outer: tuple[slice, ...]
    core_slices: tuple[slice, ...]
    data: dict[str, Any]
    world_origin: tuple[int, ...]  # world coordinate of data[0, 0, ...]

    def core_mask(self) -> np.ndarray:
        """True on core cells of ``data``, False on halo cells."""
        import numpy as np

        shape = next(iter(self.data.values())).shape
        mask = np.zeros(shape, dtype=bool)
        mask[self.core_slices] = True
        return mask

    def core_data(self) -> dict[str, np.ndarray]:
        return {k: v[self.core_slices] for k, v in self.data.items()}


def fit_values(values: Any, attr: Any, shape: tuple[int, ...], where: str) -> np.ndarray:
    """``values`` as an array of ``attr``'s type and ``shape``; error if anything would be lost.

    Scalars broadcast. A cast that is not safe for the types is allowed only
    when every value survives it exactly (an int64 array of small numbers
    into int32). Masked cells of a numpy masked array become the fill value
    of a nullable attribute.
    """
    import numpy as np

    dtype = attr.numpy_dtype
    if isinstance(values, np.ma.MaskedArray):
        if values.mask is not np.ma.nomask and values.mask.any():
            if not attr.nullable:
                raise ArrayDtypeError(
                    f"{where}: masked (NULL) cells given for attribute {attr.name!r}, which is not nullable"
                )
            values = values.filled(attr.fill)
        else:
            values = values.data
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise ArrayDtypeError(
            f"{where}: attribute {attr.name!r} takes {attr.dtype} values, not {arr.dtype}"
        )
    if arr.shape != shape:
        if arr.ndim == 0:
            arr = np.broadcast_to(arr, shape)
        elif arr.size == int(np.prod(shape)) and tuple(n for n in arr.shape if n != 1) == tuple(
            n for n in shape if n != 1
        ):
            arr = arr.reshape(shape)
        else:
            raise ArrayDtypeError(
                f"{where}: attribute {attr.name!r} got values of shape {arr.shape} for a box of shape {shape}"
            )
    if arr.dtype == dtype:
        return arr
    # (numpy calls int64 into float64 "safe", though 2**53 + 1 does not survive it)
    widening_float = arr.dtype.kind in "iu" and np.dtype(dtype).kind == "f"
    if np.can_cast(arr.dtype, dtype, casting="safe") and not widening_float:
        return arr.astype(dtype)
    kept = kept_by_cast(arr, dtype)
    if not bool(np.all(kept)):
        bad = np.argwhere(~kept)[0]
        raise ArrayDtypeError(
            f"{where}: attribute {attr.name!r} is {attr.dtype}; value {arr[tuple(bad)].item()!r} at "
            f"{tuple(int(i) for i in bad)} of the {arr.dtype} input would change (no lossy casts)"
        )
    with np.errstate(all="ignore"):
        return arr.astype(dtype)


def kept_by_cast(arr: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """Per value of ``arr``, whether casting it to ``dtype`` keeps it exactly.

    Integers are compared with the target's bounds (a round trip through a
    wrapping cast would not tell: uint64 2**63 becomes int64 -2**63 and comes
    back the same); floats into integers must be whole and within the bounds
    (the upper bound, a power of two, is exact as a float); anything into a
    float must come back the same (NaN as NaN).
    """
    import numpy as np

    target = np.dtype(dtype)
    if arr.dtype.kind == "b":
        return np.ones(arr.shape, dtype=bool)
    if target.kind in "iu":
        info = np.iinfo(target)
        if arr.dtype.kind in "iu":
            if arr.size == 0:
                return np.ones(arr.shape, dtype=bool)
            source = np.iinfo(arr.dtype)
            kept = np.ones(arr.shape, dtype=bool)
            if source.min < info.min:
                kept &= arr >= (info.min if info.min >= source.min else source.min)
            if source.max > info.max:
                kept &= arr <= np.array(info.max).astype(arr.dtype)
            return kept
        with np.errstate(all="ignore"):
            whole = np.isfinite(arr) & (np.floor(arr) == arr)
            return whole & (arr >= float(info.min)) & (arr < float(int(info.max) + 1))
    if target.kind == "b":
        return (arr == 0) | (arr == 1)
    with np.errstate(all="ignore"):
        cast = arr.astype(target)
        if arr.dtype.kind in "iu":
            # back into the source's integers only where the float is within their range
            unsigned = arr.dtype.kind == "u"
            low, high = (0.0, 2.0**64) if unsigned else (-(2.0**63), 2.0**63)
            fits = np.isfinite(cast) & (cast >= low) & (cast < high)
            back = np.where(fits, cast, 0).astype(np.uint64 if unsigned else np.int64)
            return fits & (back == arr)
        back = cast.astype(arr.dtype)
        return (back == arr) | (np.isnan(arr) & np.isnan(back))


def _require_callable(fn: object, where: str) -> None:
    if not callable(fn):
        raise InvalidArgumentError(f"{where} takes a function, not {type(fn).__name__}")


@refuses_when_closed
class _ArrayBase:
    """Reads, writes and chunk iteration over one session source; shared by arrays and forks."""

    _lifetime: Lifetime | None = None  # an array of a database (snapshots for tasks have none)

    def _check_open(self) -> None:
        if self._lifetime is not None:
            self._lifetime.check(f"array {self.name!r}")

    name: str
    schema: ArraySchema
    _repo: ArrayRepository
    # where chunk-parallel work runs: the database's slot (set by the array kind)
    _executors: ExecutorSlot = default_slot()

    # session policy (subclasses decide)
    def _read_session(self) -> icechunk.Session:
        raise NotImplementedError

    def _write_session(self) -> tuple[icechunk.Session, bool]:
        """A session to write to and whether this call must commit it."""
        raise NotImplementedError

    def _commit(self, session: icechunk.Session, message: str) -> None:
        raise NotImplementedError

    # --- parallel tasks -----------------------------------------------------------
    def _fan_out(
        self,
        session: icechunk.Session,
        task: Callable[[ArraySnapshot, Any], Any],
        items: Sequence[Any],
        what: str,
        limit: int | None = None,
    ) -> list[Any]:
        """``task(snapshot, item)`` for every item through the database's executor.

        The snapshot reads the version ``session`` holds: in this process it
        shares the open repository; on a Dask worker it is unpickled there and
        reads the repository's files itself.
        """
        source = ArraySnapshot(self.name, self.schema, self._repo, session)
        executor = self._executors.current
        if executor.remote and not session.read_only:
            # inside a transaction: its uncommitted writes exist only in this process
            executor = Threads()
        return executor.map(
            functools.partial(task, source),
            items,
            what=f"{what} of array {self.name!r}",
            limit=limit,
        )

    # --- zarr access ---------------------------------------------------------------
    def _zarr(self, session: icechunk.Session, attr: str) -> Any:
        return self._repo.zarr_array(session, attr)

    def extent(self, session: icechunk.Session | None = None) -> tuple[int, ...]:
        """Cells per dimension now (the unbounded dimension's grows by appending)."""
        if session is not None and not hasattr(session, "snapshot_id"):
            raise InvalidArgumentError(
                f"array {self.name!r}: extent takes a session of this array (or none), "
                f"not {type(session).__name__}"
            )
        session = session or self._read_session()
        return tuple(self._zarr(session, self.schema.attrs[0].name).shape)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.extent()

    def _box(self, box: Any, extent: Sequence[int] | None = None) -> Box:
        """``box`` as a :class:`Box` (a key is parsed against the current extent)."""
        if isinstance(box, Box):
            return box
        return parse_key(box, self.schema, extent or self.extent(), self.name)

    def _attrs(self, attrs: Sequence[str] | str | None) -> list[Any]:
        if attrs is None:
            return list(self.schema.attrs)
        if not isinstance(attrs, (str, list, tuple)):
            raise ArraySchemaError(
                f"array {self.name!r}: attrs is an attribute name or a list of them, "
                f"not {type(attrs).__name__}"
            )
        names = [attrs] if isinstance(attrs, str) else list(attrs)
        return [self.schema.attribute(a) for a in names]

    # --- reads --------------------------------------------------------------------
    def read(
        self, box: Any = None, attrs: Sequence[str] | str | None = None
    ) -> dict[str, np.ndarray]:
        """The attributes over ``box`` (indexes; see :func:`parse_key`) as numpy arrays."""
        session = self._read_session()
        region = parse_key(box, self.schema, self.extent(session), self.name)
        return {
            a.name: region.squeeze(self._read_box(session, a, region)) for a in self._attrs(attrs)
        }

    def __getitem__(self, key: Any) -> dict[str, np.ndarray]:
        return self.read(key)

    def _read_box(self, session: icechunk.Session, attr: Any, box: Box) -> np.ndarray:
        import numpy as np

        if box.empty:
            return np.full(box.shape, attr.fill, dtype=attr.numpy_dtype)
        array = self._zarr(session, attr.name)
        decoded = read_box(
            session,
            str(self._repo.directory),
            array,
            attr.fill,
            attr.numpy_dtype,
            box,
            self.schema.chunk_shape,
        )
        if decoded is not None:
            values, failed = decoded
            if failed is not None:
                raise self._corrupt(attr, *failed)
            return values
        try:
            return np.asarray(array[box.slices])
        except Exception as err:
            if not chunk_error(err):
                raise
            self._locate_damage(array, attr, box, err)
            raise

    def _regrid_box(
        self, session: icechunk.Session, attr: Any, box: Box, weights: Any
    ) -> np.ndarray | None:
        """The regrid of ``box`` of a non-nullable ``attr`` straight from its stored chunks;
        None where only the plain path (read, then regrid) can do it."""
        array = self._zarr(session, attr.name)
        where = str(self._repo.directory)
        chunks = self.schema.chunk_shape
        done = regrid_box(session, where, array, attr.numpy_dtype, box, chunks, weights)
        if done is None:
            return None
        result, failed = done
        if failed is not None:
            raise self._corrupt(attr, *failed)
        return result

    def _corrupt(self, attr: Any, coords: tuple[int, ...], reason: str) -> ArrayCorruptError:
        return ArrayCorruptError(
            f"array {self.name!r}, attribute {attr.name!r}, chunk {coords}: the stored "
            f"chunk cannot be decoded ({reason})"
        )

    def _locate_damage(self, array: Any, attr: Any, box: Box, err: BaseException) -> None:
        for coords, part in chunk_grid(box, self.schema.chunk_shape):
            try:
                array[part.slices]
            except Exception as inner:
                if chunk_error(inner):
                    raise self._corrupt(attr, coords, f"{type(inner).__name__}: {inner}") from None
                raise
        raise ArrayCorruptError(
            f"array {self.name!r}, attribute {attr.name!r}: stored data cannot be decoded ({err})"
        ) from None

    def written_chunks(self, attrs: Sequence[str] | str | None = None) -> list[tuple[int, ...]]:
        """Grid coordinates of the chunks ever written (of any of ``attrs``), in C order."""
        session = self._read_session()
        return self._written(session, self._attrs(attrs))

    def _written_parts(
        self, session: icechunk.Session, box: Box
    ) -> list[tuple[tuple[int, ...], Box]]:
        """The parts of ``box`` in written chunks (of any attribute), with the chunks' coordinates."""
        written = set(self._written(session, list(self.schema.attrs)))
        return [(c, p) for c, p in chunk_grid(box, self.schema.chunk_shape) if c in written]

    def _written(self, session: icechunk.Session, attrs: Sequence[Any]) -> list[tuple[int, ...]]:
        found: set[tuple[int, ...]] = set()
        for a in attrs:
            found |= self._repo.written_chunks(session, a.name)
        return sorted(found)

    # --- writes ----------------------------------------------------------------------
    def __setitem__(self, key: Any, values: Any) -> None:
        self._write_key(key, values, "write")

    def write(self, start: Sequence[int], values: Any, message: str | None = None) -> None:
        """Write dense blocks whose first cell is at index ``start`` (one commit)."""
        import numpy as np

        blocks = values if isinstance(values, dict) else None
        sample = next(iter(blocks.values())) if blocks else values
        try:
            shape = np.shape(sample)
            len(start)
        except TypeError:
            raise ArrayDtypeError(
                f"array {self.name!r}: write takes a start (a sequence of indexes) and values "
                f"(an array, or a dict of arrays by attribute), not {type(start).__name__} "
                f"and {type(sample).__name__}"
            ) from None
        if len(start) != self.schema.ndim or len(shape) != self.schema.ndim:
            raise ArrayBoundsError(
                f"array {self.name!r} has {self.schema.ndim} dimensions; write got a start of "
                f"{len(start)} and values of {len(shape)} dimensions"
            )
        key = tuple(slice(s, s + n) for s, n in zip(start, shape, strict=True))
        self._write_key(key, values, message or "write")

    def _write_key(self, key: Any, values: Any, message: str) -> None:
        session, own = self._write_session()
        try:
            extent = self.extent(session)
            box = parse_key(key, self.schema, extent, self.name, growing=True)
            blocks = self._blocks(values, box.shape, f"write to {self.name!r}")
            self._grow(session, extent, box.hi)
            targets = [(self._zarr(session, attr), data) for attr, data in blocks.items()]

            def put(target: tuple[Any, np.ndarray]) -> None:
                write_box(session, target[0], target[1], box, self.schema.chunk_shape)

            if len(targets) == 1:
                put(targets[0])
            else:
                # attributes in parallel threads: one stores its chunks while another
                # encodes, and zarr's partial chunks keep a core each
                with ThreadPoolExecutor(min(len(targets), default_threads())) as pool:
                    list(pool.map(put, targets))
        except BaseException:
            if own:
                session.discard_changes()
            raise
        if own:
            if session.has_uncommitted_changes:
                self._commit(session, message)
            else:  # an empty box: nothing to write, and no version is made
                session.discard_changes()

    def _blocks(self, values: Any, shape: tuple[int, ...], where: str) -> dict[str, np.ndarray]:
        if isinstance(values, dict):
            out = {}
            for key, v in values.items():
                attr = self.schema.attribute(key)
                out[attr.name] = fit_values(v, attr, shape, where)
            if not out:
                raise ArrayDtypeError(f"{where}: no attributes given")
            return out
        if len(self.schema.attrs) != 1:
            raise ArrayDtypeError(
                f"{where}: the array has attributes {', '.join(self.schema.attr_names)}; "
                "give a dict of attribute name to values"
            )
        attr = self.schema.attrs[0]
        return {attr.name: fit_values(values, attr, shape, where)}

    def _grow(self, session: icechunk.Session, extent: Sequence[int], hi: Sequence[int]) -> None:
        axis = self.schema.unbounded_axis
        if axis is None or hi[axis] <= extent[axis]:
            return
        if isinstance(self, ArrayFork):
            raise ArrayBoundsError(
                f"array {self.name!r}: a fork cannot grow dimension {self.schema.dims[axis].name!r} "
                f"past {extent[axis]} cells; grow the array before forking"
            )
        shape = list(extent)
        shape[axis] = hi[axis]
        for a in self.schema.attrs:
            self._zarr(session, a.name).resize(tuple(shape))
        dim = self.schema.dims[axis].name
        coordinate = self._repo.coordinate_array(session, dim)
        if coordinate is not None:  # the world coordinates grow with the dimension
            coordinate.resize((hi[axis],))
            coordinate[extent[axis] : hi[axis]] = self.schema.world_axis(
                axis, extent[axis], hi[axis]
            )

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
            repo_dir = str(self._repo.directory)
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

    # --- chunk views (halos) ----------------------------------------------------------
    def chunks(
        self,
        box: Any = None,
        overlap: int | Sequence[int] | None = None,
        attrs: Sequence[str] | str | None = None,
        written_only: bool = True,
    ) -> Iterator[ChunkView]:
        """Each chunk touching ``box`` with a halo of ``overlap`` cells read from its neighbours.

        ``overlap`` is one width for every dimension or one per dimension;
        ``None`` takes the dimensions' own overlaps. Halos are clipped at the
        array's edges. Only chunks that were written, unless ``written_only``
        is false.
        """
        session = self._read_session()
        for plan in self._chunk_plans(session, box, overlap, attrs, written_only):
            yield self._chunk_view(session, *plan)

    def _chunk_plans(
        self, session: icechunk.Session, box: Any, overlap: Any, attrs: Any, written_only: bool
    ) -> list[tuple[tuple[int, ...], Box, Box, list[Any]]]:
        extent = self.extent(session)
        region = self._box(box, extent)
        width = self._overlap(overlap)
        chosen = self._attrs(attrs)
        written = set(self._written(session, chosen)) if written_only else None
        plans = []
        for coords, core in chunk_grid(region, self.schema.chunk_shape):
            if written is not None and coords not in written:
                continue
            plans.append((coords, core, core.grow(width, extent), chosen))
        return plans

    def _chunk_view(
        self,
        session: icechunk.Session,
        coords: tuple[int, ...],
        core: Box,
        outer: Box,
        attrs: list[Any],
    ) -> ChunkView:
        data = {a.name: self._read_box(session, a, outer) for a in attrs}
        return ChunkView(
            coords=coords,
            core=core.indexes(self.schema),
            outer=outer.indexes(self.schema),
            core_slices=core.relative_to(outer),
            data=data,
            world_origin=tuple(
                lo + self.schema.world_shift(axis) for axis, lo in enumerate(outer.lo)
            ),
        )

    def _overlap(self, overlap: int | Sequence[int] | None) -> tuple[int, ...]:
        if overlap is None:
            return tuple(d.overlap for d in self.schema.dims)
        import numbers

        if isinstance(overlap, numbers.Integral) and not isinstance(overlap, bool):
            widths: tuple[Any, ...] = (overlap,) * self.schema.ndim
        elif isinstance(overlap, (list, tuple)):
            widths = tuple(overlap)
        else:
            widths = ()
        if (
            len(widths) != self.schema.ndim
            or not all(isinstance(w, numbers.Integral) and not isinstance(w, bool) for w in widths)
            or any(w < 0 for w in widths)
        ):
            raise ArrayBoundsError(
                f"array {self.name!r}: overlap must be one non-negative width or {self.schema.ndim}, not {overlap!r}"
            )
        return tuple(int(w) for w in widths)

    def map_chunks(
        self,
        fn: Callable[[ChunkView], Any],
        box: Any = None,
        overlap: int | Sequence[int] | None = None,
        attrs: Sequence[str] | str | None = None,
        workers: int | None = None,
    ) -> list[Any]:
        """``fn`` on every written chunk (with its halo) in parallel threads; results in chunk order.

        ``fn`` gets a :class:`ChunkView`; numpy and Rust kernels release the
        GIL, so the threads run in parallel. Reading happens in the threads too.
        """
        _require_callable(fn, f"array {self.name!r}: map_chunks")
        session = self._read_session()
        plans = self._chunk_plans(session, box, overlap, attrs, True)
        return self._fan_out(
            session, functools.partial(_call_on_view, fn), plans, "map_chunks", workers
        )

    def map_boxes(
        self,
        fn: Callable[[ChunkView], Any],
        boxes: Sequence[Any],
        attrs: Sequence[str] | str | None = None,
        workers: int | None = None,
    ) -> list[Any]:
        """``fn`` on each of ``boxes`` (keys in indexes, as for reads) in parallel; results in order.

        Each task reads its own box, so a box is decoded once, by the thread
        or Dask worker that works on it (SS-DB cooks an image per task). ``fn``
        gets a :class:`ChunkView` whose ``coords`` is ``(position in boxes,)``
        and whose core is the whole box.
        """
        _require_callable(fn, f"array {self.name!r}: map_boxes")
        if isinstance(boxes, (str, bytes)) or not isinstance(boxes, abc.Sequence):
            raise InvalidArgumentError(
                f"array {self.name!r}: map_boxes takes a list of boxes, not {type(boxes).__name__}"
            )
        session = self._read_session()
        extent = self.extent(session)
        chosen = self._attrs(attrs)
        plans = []
        for i, key in enumerate(boxes):
            region = parse_key(key, self.schema, extent, self.name)
            box = Box(region.lo, region.hi)
            plans.append(((i,), box, box, chosen))
        return self._fan_out(
            session, functools.partial(_call_on_view, fn), plans, "map_boxes", workers
        )

    # --- Dask -----------------------------------------------------------------------------
    def to_dask(self, attr: str | None = None, box: Any = None) -> Any:
        """One attribute over ``box`` as a lazy ``dask.array.Array``, a block per stored chunk.

        Its tasks read the chunks of the version read now (a later write does
        not change it), in whatever process computes them: threads here, or
        the workers of the user's ``dask.distributed`` cluster. ``attr`` may be
        left out when the array has one attribute.
        """
        if attr is None:
            if len(self.schema.attrs) != 1:
                raise InvalidArgumentError(
                    f"array {self.name!r} has attributes {', '.join(self.schema.attr_names)}; "
                    "to_dask needs attr= to name one"
                )
            chosen = self.schema.attrs[0]
        elif isinstance(attr, str):
            chosen = self._attrs(attr)[0]
        else:
            raise InvalidArgumentError(
                f"array {self.name!r}: to_dask's attr names one attribute (a str), not {attr!r}"
            )
        session = self._read_session()
        region = parse_key(box, self.schema, self.extent(session), self.name)
        lazy = self._lazy(session, chosen, Box(region.lo, region.hi))
        return region.squeeze(lazy)

    def _lazy(self, session: icechunk.Session, attr: Any, box: Box) -> Any:
        import dask.array as da

        source = _LazyAttribute(
            ArraySnapshot(self.name, self.schema, self._repo, session), attr.name, box
        )
        # blocks follow the stored chunks, cut by the box's edges
        blocks = []
        for axis, (lo, hi) in enumerate(zip(box.lo, box.hi, strict=True)):
            side = self.schema.chunk_shape[axis]
            edges = [lo, *range((lo // side + 1) * side, hi, side), hi] if hi > lo else [lo]
            blocks.append(tuple(b - a for a, b in itertools.pairwise(edges)) or (0,))
        name = f"tessera-{self.name}-{attr.name}-{session.snapshot_id}-{box.lo}-{box.hi}"
        return da.from_array(source, chunks=tuple(blocks), name=name, asarray=True, lock=False)

    # --- xarray -------------------------------------------------------------------------
    def to_xarray(
        self, box: Any = None, attrs: Sequence[str] | str | None = None, lazy: bool = False
    ) -> xr.Dataset:
        """The box as an ``xarray.Dataset`` with world coordinates on every dimension.

        ``lazy=True`` gives Dask-backed variables (:meth:`to_dask`): nothing
        is read until they are computed, on the user's own Dask scheduler.
        """
        import xarray as xr

        if not isinstance(lazy, bool):
            raise InvalidArgumentError(
                f"array {self.name!r}: to_xarray's lazy is True or False, not {lazy!r}"
            )
        session = self._read_session()
        region = parse_key(box, self.schema, self.extent(session), self.name)
        coords = region.world_coords(self.schema)
        dims = self.schema.dim_names
        data = {}
        for a in self._attrs(attrs):
            if lazy:
                values = self._lazy(session, a, Box(region.lo, region.hi))
            else:
                values = self._read_box(session, a, region)
            data[a.name] = xr.Variable(
                dims, values, attrs={"fill_value": a.fill, "nullable": a.nullable}
            )
        ds = xr.Dataset(data, coords=coords)
        if region.dropped:
            ds = ds.isel({dims[i]: 0 for i in region.dropped})
        return ds


def _call_on_view(fn: Callable[[ChunkView], Any], source: ArraySnapshot, plan: Any) -> Any:
    """One task of :meth:`map_chunks`: read the chunk with its halo, call ``fn`` on it."""
    return fn(source._chunk_view(source._session, *plan))


@refuses_when_closed
class Array(_ArrayBase):
    """A named array of the database (``db.create_array``, ``db.array``).

    Indexing is numpy-style in indexes (from each dimension's ``start``,
    half-open slices, no steps); reads give a dict of attribute name to
    numpy array. Each write call is one commit (one version).
    """

    def __init__(
        self,
        name: str,
        schema: ArraySchema,
        repo: ArrayRepository,
        read_only: bool = False,
        version: str | None = None,
        as_of: datetime | None = None,
    ) -> None:
        self.name = name
        self.schema = schema
        self._repo = repo
        self._pinned = repo.readonly(version, as_of) if (version or as_of) else None
        self.read_only = read_only or self._pinned is not None
        self._local = threading.local()  # the transaction of each thread
        self._fork_base: icechunk.Session | None = None
        self._grown: tuple[str, str] | None = None  # (growth version, the one before) for forks
        self._relation: ArrayRelation | None = None
        # the database's objects, handed by the array kind: operators' into= create arrays there
        self._siblings: OpenObjects | None = None

    def __repr__(self) -> str:
        dims = ", ".join(
            f"{d.name}={d.start}:{'*' if d.end is None else d.end},{d.chunk},{d.overlap}"
            for d in self.schema.dims
        )
        attrs = ", ".join(f"{a.name}:{a.dtype}" for a in self.schema.attrs)
        return f"Array({self.name!r}, <{attrs}>[{dims}])"

    @property
    def version(self) -> str:
        """The id of the version this array reads."""
        return str(self._read_session().snapshot_id)

    # --- sessions ------------------------------------------------------------------
    def _read_session(self) -> icechunk.Session:
        tx = getattr(self._local, "session", None)
        if tx is not None:
            return tx  # a transaction reads its own writes
        if self._pinned is not None:
            return self._pinned
        return self._repo.readonly()

    def _write_session(self) -> tuple[icechunk.Session, bool]:
        self._check_writable()
        tx = getattr(self._local, "session", None)
        if tx is not None:
            return tx, False
        return self._repo.writable(), True

    def _commit(self, session: icechunk.Session, message: str) -> None:
        self._repo.commit(session, message)

    def _check_writable(self) -> None:
        if self._pinned is not None:
            raise ReadOnlyError(
                f"array {self.name!r} is opened at a past version; versions are never changed"
            )
        if self.read_only:
            raise ReadOnlyError(f"cannot write array {self.name!r}: the database is open read-only")

    # --- transactions and versions ---------------------------------------------------
    @contextlib.contextmanager
    def transaction(self, message: str = "transaction") -> Iterator[Array]:
        """Group the writes of this thread inside the block into one commit; an error keeps none."""
        self._check_writable()
        if getattr(self._local, "session", None) is not None:
            raise TesseraError(f"array {self.name!r}: a transaction is already open in this thread")
        session = self._repo.writable()
        self._local.session = session
        try:
            yield self
        except BaseException:
            session.discard_changes()
            raise
        finally:
            self._local.session = None
        if session.has_uncommitted_changes:
            self._commit(session, message)

    def versions(self) -> list[Version]:
        """Every committed version, newest first: id, time, message."""
        return self._repo.versions()

    # --- forks (parallel writer processes) -----------------------------------------
    def fork(self, extent: Sequence[int] | None = None) -> ArrayFork:
        """A picklable writer for another process; its writes land when :meth:`merge` commits.

        A fork cannot grow the unbounded dimension: ``extent`` (cells per
        dimension) grows it first, in a version of its own, which
        :meth:`discard_forks` takes back if nothing was committed after it.
        """
        self._check_writable()
        if extent is not None and (
            isinstance(extent, (str, bytes))
            or not isinstance(extent, abc.Sequence)
            or not all(
                isinstance(e, numbers.Integral) and not isinstance(e, bool) and e >= 0
                for e in extent
            )
        ):
            raise InvalidArgumentError(
                f"array {self.name!r}: fork's extent is a list of cell counts, not {extent!r}"
            )
        if self._fork_base is None:
            if extent is not None:
                self._grow_for_forks([int(e) for e in extent])
            self._fork_base = self._repo.writable()
        return ArrayFork(self.name, self.schema, self._repo, self._fork_base.fork())

    def _grow_for_forks(self, extent: Sequence[int]) -> None:
        session = self._repo.writable()
        now = self.extent(session)
        if len(extent) != len(now):
            raise ArrayBoundsError(
                f"array {self.name!r}: fork's extent has {len(extent)} dimensions, not {len(now)}"
            )
        if all(e <= n for e, n in zip(extent, now, strict=True)):
            session.discard_changes()
            return
        before = str(session.snapshot_id)
        self._grow(session, now, extent)
        grown = self._repo.commit(session, f"grow to {tuple(extent)} for forks")
        self._grown = (grown, before)

    def discard_forks(self) -> None:
        """Forget the forks made since the last :meth:`merge` (their writes are never
        committed), and a growth made for them (``fork(extent=)``) if nothing came after it."""
        base, self._fork_base = self._fork_base, None
        grown, self._grown = self._grown, None
        self._abandon(base, grown)

    def _abandon(self, base: icechunk.Session | None, grown: tuple[str, str] | None) -> None:
        """Drop the forks' base session, and the growth made for them if nothing came after."""
        if base is not None:
            base.discard_changes()
        if grown is not None:
            self._repo.undo(*grown)

    def merge(
        self,
        forks: Sequence[ArrayFork],
        message: str = "merge",
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> str:
        """Commit the work of ``forks`` (returned from their processes) as one version.

        ``progress`` counts the forks merged (:mod:`tesseradb.progress`);
        ``cancel`` stops the merge before it commits, keeping nothing.
        """
        from tesseradb.progress import tracker

        self._check_writable()
        if isinstance(forks, (str, bytes)) or not isinstance(forks, abc.Sequence):
            raise InvalidArgumentError(
                f"array {self.name!r}: merge takes a list of forks, not {type(forks).__name__}"
            )
        for i, f in enumerate(forks):
            if not isinstance(f, ArrayFork):
                raise InvalidArgumentError(
                    f"array {self.name!r}: merge's item {i} is a {type(f).__name__}, not a fork"
                )
        base = self._fork_base
        if base is None:
            raise TesseraError(
                f"array {self.name!r}: merge needs forks made by this array's fork()"
            )
        self._fork_base = None
        grown, self._grown = self._grown, None
        if not forks:  # nothing to merge: no version is made, and a growth for forks goes
            self._abandon(base, grown)
            return self._repo.head()
        # Icechunk merges forks chunk by chunk, the last fork's chunk winning
        # whole: two forks that wrote one chunk would lose one's cells
        owner: dict[tuple[str, tuple[int, ...]], int] = {}
        for i, f in enumerate(forks):
            for path, chunks in f._session.status().updated_chunks.items():
                for c in chunks:
                    key = (path.strip("/"), tuple(c))
                    if key in owner:
                        self._abandon(base, grown)
                        raise ArrayConflictError(
                            f"array {self.name!r}: forks {owner[key]} and {i} both wrote chunk "
                            f"{tuple(c)} of attribute {key[0]!r}; give each fork its own chunks. "
                            "Nothing was committed"
                        )
                    owner[key] = i
        task = f"merge {len(forks)} forks into array {self.name}"
        with tracker(task, len(forks), "forks", progress, cancel, "array.merge") as watch:
            try:
                watch.advance(0)
                for f in forks:  # one at a time, as one call would, to report and cancel
                    base.merge(f._session)
                    watch.advance()
            except BaseException as err:
                self._abandon(base, grown)
                if isinstance(err, Exception) and not isinstance(err, TesseraError):
                    raise TesseraError(
                        f"array {self.name!r}: the forks cannot be merged ({err}). "
                        "Nothing was committed"
                    ) from None
                raise  # a cancel (CancelledError), Ctrl-C
            self._repo.commit(base, message)
        return str(base.snapshot_id)

    @property
    def bytes_on_disk(self) -> int:
        """Bytes of the array's repository (every version)."""
        return self._repo.bytes_on_disk()

    @property
    def relation(self) -> ArrayRelation:
        """The array as a SQL relation (one row per cell of the written chunks)."""
        from tesseradb.arrays._relation import ArrayRelation

        if self._relation is None:
            self._relation = ArrayRelation(self)
        return self._relation

    # --- operators ---------------------------------------------------------------------
    def aggregate(
        self,
        fn: str,
        attrs: Sequence[str] | str | None = None,
        by: Sequence[str] | str = (),
        box: Any = None,
    ) -> xr.Dataset:
        """``fn`` (count, sum, avg, min, max, stddev) of attributes over the written cells of ``box``.

        Grouped by the dimensions ``by``; computed chunk by chunk in parallel
        threads, never materialising the box. An ``xarray.Dataset`` (0-d
        without ``by``) in world coordinates.
        """
        from tesseradb.arrays._operators import aggregate

        return aggregate(self, fn, attrs, by, self._box(box))

    def regrid(
        self,
        factors: Sequence[Any],
        method: str = "mean",
        attrs: Sequence[str] | str | None = None,
        box: Any = None,
        into: str | None = None,
    ) -> Any:
        """Block-average ``box`` by ``factors`` (input cells per output cell, e.g. ``"10:3"``).

        Returns an ``xarray.Dataset``, or with ``into`` a new float64 array
        of that name (world coordinates divided by the factors).
        """
        from tesseradb.arrays._operators import parse_factor, regrid

        result = regrid(self, factors, self._box(box), attrs, method)
        if into is None:
            return result
        fr = [parse_factor(f, d.name) for f, d in zip(factors, self.schema.dims, strict=True)]
        dims = [
            {
                "name": d.name,
                "start": 0,
                "end": result.sizes[d.name],
                # the input's chunking scaled down, but no smaller than 256 cells a
                # side (or the whole axis): small chunks make many small writes
                "chunk": min(
                    max(1, int(result.sizes[d.name])),
                    max(int(-(-d.chunk // f)), 1 if d.chunk == 1 else 256),
                ),
                "overlap": 0,
            }
            for d, f in zip(self.schema.dims, fr, strict=True)
        ]
        attrs_out = [{"name": v, "dtype": "float64", "nullable": True} for v in result.data_vars]
        origin = [int(result[d.name].values[0]) for d in self.schema.dims]
        return self._create_result(
            into, dims, attrs_out, origin, {str(v): result[v].values for v in result.data_vars}
        )

    def apply(
        self,
        expression: str | Callable[[dict[str, Any]], Any],
        name: str = "value",
        box: Any = None,
        into: str | None = None,
        workers: int | None = None,
    ) -> Any:
        """A derived attribute per cell: ``expression`` over attribute and dimension names.

        Text such as ``"sqrt(v1 * v1 + v2 * v2)"`` (arithmetic, comparisons,
        numpy functions; dimensions are world coordinates) or a function of a
        dict of arrays. Computed chunk by chunk over the written chunks;
        returns an ``xarray.Dataset`` (cells of unwritten chunks NaN or 0), or
        with ``into`` a new array holding just the written chunks.
        """
        import numpy as np
        import xarray as xr

        from tesseradb.arrays._operators import apply

        if not isinstance(expression, str):
            _require_callable(expression, f"array {self.name!r}: apply")
        else:
            require_text(expression, "the expression", f"array {self.name!r}: apply")

        region = self._box(box)
        parts, dtype = apply(self, expression, region, name, workers)
        if into is not None:
            dims = [d.to_dict() for d in self.schema.dims]
            kind = "bool" if dtype == np.bool_ else str(dtype)
            out = self._create_result(
                into, dims, [{"name": name, "dtype": kind}], list(self.schema.origin), None
            )
            with out.transaction(f"apply {name}"):
                for part, values in parts.values():
                    out[part.indexes(self.schema)] = {name: values}
            return out
        fill = np.nan if dtype.kind == "f" else 0
        dense = np.full(region.shape, fill, dtype=dtype)
        for part, values in parts.values():
            dense[part.relative_to(region)] = values
        return xr.Dataset(
            {name: (self.schema.dim_names, dense)}, coords=region.world_coords(self.schema)
        )

    def _create_result(
        self, into: str, dims: Any, attrs: Any, origin: Any, values: dict[str, Any] | None
    ) -> Array:
        from tesseradb.arrays._operators import create_beside

        out = create_beside(self, into, dims, attrs, origin)
        if values is not None:
            try:
                out.write([d["start"] for d in dims], values, message=f"from {self.name}")
            except BaseException:
                out._siblings.drop(into)
                raise
        return out

    def at(self, version: str | None = None, as_of: datetime | None = None) -> Array:
        """This array at a past ``version`` (snapshot id) or ``as_of`` a time, read-only."""
        past = Array(self.name, self.schema, self._repo, True, version, as_of)
        past._executors = self._executors
        past._lifetime = self._lifetime
        return past

    # --- lazy views -------------------------------------------------------------------
    def between(self, box: Any) -> ArrayView:
        """A lazy view of the cells in ``box``: nothing is read until an operator runs."""
        return ArrayView(self, parse_key(box, self.schema, self.extent(), self.name))


class ArraySnapshot(_ArrayBase):
    """One version of an array, for tasks: picklable, so a Dask worker reads it from the files."""

    _carries_writes = False  # (a fork's session travels with its writes; a reader's cannot)

    def __init__(self, name: str, schema: ArraySchema, repo: ArrayRepository, session: Any) -> None:
        self.name = name
        self.schema = schema
        self._repo = repo
        self._session = session

    def __getstate__(self) -> dict[str, Any]:
        if not self._carries_writes and self._session.has_uncommitted_changes:
            # (Icechunk would refuse with a message about forking sessions)
            raise InvalidArgumentError(
                f"array {self.name!r}: this read was made inside a transaction and sees its "
                "uncommitted writes, which exist only in this process; compute it here "
                "(dask's scheduler='threads') or make it after the transaction commits"
            )
        return {
            "name": self.name,
            "schema": self.schema.to_dict(),
            "dir": str(self._repo.directory),
            "session": self._session,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        from pathlib import Path

        from tesseradb.arrays._schema import ArraySchema

        self.name = state["name"]
        self.schema = ArraySchema.from_dict(state["schema"])
        self._repo = _worker_repository(self.name, Path(state["dir"]))
        self._session = state["session"]

    def _read_session(self) -> Any:
        return self._session

    def _write_session(self) -> tuple[Any, bool]:
        raise ReadOnlyError(f"array {self.name!r}: a snapshot for reading tasks is not written")


class _LazyAttribute:
    """One attribute over a box of a snapshot, sliceable as dask.array.from_array wants."""

    def __init__(self, source: ArraySnapshot, attr: str, box: Box) -> None:
        self.source = source
        self.attr = attr
        self.box = box
        attribute = source.schema.attribute(attr)
        self.dtype = attribute.numpy_dtype
        self.shape = box.shape
        self.ndim = len(box.shape)

    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        if not isinstance(key, tuple):
            key = (key,)
        lo, hi = [], []
        for axis, k in enumerate(key):
            start, stop, _ = k.indices(self.shape[axis])
            lo.append(self.box.lo[axis] + start)
            hi.append(self.box.lo[axis] + max(start, stop))
        source = self.source
        attribute = source.schema.attribute(self.attr)
        return source._read_box(source._session, attribute, Box(tuple(lo), tuple(hi)))


_WORKER_REPOSITORIES: dict[str, ArrayRepository] = {}
_WORKER_LOCK = threading.Lock()


def _worker_repository(name: str, directory: Path) -> ArrayRepository:
    """The repository at ``directory``, opened once per process (a worker runs many tasks)."""
    key = f"{name}\0{directory}"
    with _WORKER_LOCK:
        repo = _WORKER_REPOSITORIES.get(key)
        if repo is None:
            if len(_WORKER_REPOSITORIES) > 256:
                _WORKER_REPOSITORIES.clear()
            repo = _WORKER_REPOSITORIES[key] = ArrayRepository(name, directory)
        return repo


class ArrayFork(ArraySnapshot):
    """A writer in another process: pickle it there, write, pickle it back, ``arr.merge([...])``."""

    _carries_writes = True

    def _write_session(self) -> tuple[Any, bool]:
        return self._session, False


@refuses_when_closed
class ArrayView:
    """The cells of an array inside a box (:meth:`Array.between`), read only when asked."""

    def __init__(self, array: Array, box: Box) -> None:
        self.array = array
        self.box = box

    def _check_open(self) -> None:
        self.array._check_open()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.box.shape

    def read(self, attrs: Sequence[str] | str | None = None) -> dict[str, np.ndarray]:
        session = self.array._read_session()
        return {
            a.name: self.array._read_box(session, a, self.box) for a in self.array._attrs(attrs)
        }

    def between(self, box: Any) -> ArrayView:
        inner = parse_key(box, self.array.schema, self.array.extent(), self.array.name)
        return ArrayView(self.array, self.box.intersect(inner))

    def index_key(self) -> tuple[slice, ...]:
        """The view's box as a key in indexes."""
        return self.box.indexes(self.array.schema)

    def chunks(
        self, overlap: Any = None, attrs: Any = None, written_only: bool = True
    ) -> Iterator[ChunkView]:
        return self.array.chunks(self.index_key(), overlap, attrs, written_only)

    def map_chunks(
        self,
        fn: Callable[[ChunkView], Any],
        overlap: Any = None,
        attrs: Any = None,
        workers: int | None = None,
    ) -> list[Any]:
        return self.array.map_chunks(fn, self.index_key(), overlap, attrs, workers)

    def to_xarray(self, attrs: Any = None) -> xr.Dataset:
        return self.array.to_xarray(self.index_key(), attrs)

    def aggregate(self, fn: str, attrs: Any = None, by: Sequence[str] | str = ()) -> xr.Dataset:
        return self.array.aggregate(fn, attrs, by, self.box)

    def regrid(
        self,
        factors: Sequence[Any],
        method: str = "mean",
        attrs: Any = None,
        into: str | None = None,
    ) -> Any:
        return self.array.regrid(factors, method, attrs, self.box, into)

    def apply(
        self,
        expression: Any,
        name: str = "value",
        into: str | None = None,
        workers: int | None = None,
    ) -> Any:
        return self.array.apply(expression, name, self.box, into, workers)
