"""Array handles: what every one does — reads, writes, chunk views with halos, Dask and
xarray — and the picklable ones that parallel tasks and writer processes get.

:class:`ArraySnapshot` reads the version a session holds; pickled to a Dask worker,
it opens the repository's files there. :class:`ArrayFork` is a snapshot that
writes into a fork of a session, which :meth:`Array.merge` commits.
"""

from __future__ import annotations

import functools
import itertools
import numbers
import threading
from collections import abc
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import Lifetime, refuses_when_closed
from tesseradb.arrays._boxes import ArrayBoundsError, Box, chunk_grid, parse_key
from tesseradb.arrays._decode import read_box, regrid_box
from tesseradb.arrays._encode import write_box
from tesseradb.arrays._repository import ArrayRepository, chunk_error
from tesseradb.arrays._triples import TripleWrites
from tesseradb.arrays._values import fit_values
from tesseradb.errors import (
    ArrayCorruptError,
    ArrayDtypeError,
    ArraySchemaError,
    InvalidArgumentError,
    ReadOnlyError,
)
from tesseradb.executor import ExecutorSlot, Threads, default_slot, default_threads

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    import icechunk
    import numpy as np
    import xarray as xr

    from tesseradb.arrays._schema import ArraySchema

__all__ = ["ArrayBase", "ArrayFork", "ArraySnapshot", "ChunkView", "require_callable"]

# Reads of several attributes over a box of at least OVERLAP_CELLS cells go two at a time,
# so fetching one attribute's chunks overlaps decoding another's
OVERLAP_CELLS = 1 << 18


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


def require_callable(fn: object, where: str) -> None:
    if not callable(fn):
        raise InvalidArgumentError(f"{where} takes a function, not {type(fn).__name__}")


@refuses_when_closed
class ArrayBase(TripleWrites):
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
        wanted = self._attrs(attrs)
        if len(wanted) > 1 and region.size >= OVERLAP_CELLS:
            # one attribute's chunks are fetched (I/O, the GIL released) while another's
            # are decoded (in Rust, the GIL released): the two overlap instead of alternating
            boxes = Threads(2).map(
                lambda a: self._read_box(session, a, region), wanted, what=f"read of {self.name!r}"
            )
            return {a.name: region.squeeze(b) for a, b in zip(wanted, boxes, strict=True)}
        return {a.name: region.squeeze(self._read_box(session, a, region)) for a in wanted}

    def __getitem__(self, key: Any) -> dict[str, np.ndarray]:
        return self.read(key)

    def _read_box(self, session: icechunk.Session, attr: Any, box: Box) -> np.ndarray:
        import numpy as np

        if box.empty:
            return np.full(box.shape, attr.fill, dtype=attr.numpy_dtype)
        array = self._zarr(session, attr.name)
        decoded = read_box(
            session,
            self._repo.where,
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
        where = self._repo.where
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
        require_callable(fn, f"array {self.name!r}: map_chunks")
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
        require_callable(fn, f"array {self.name!r}: map_boxes")
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


class ArraySnapshot(ArrayBase):
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
            "location": self._repo.location,
            "session": self._session,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        from pathlib import Path

        from tesseradb.arrays._schema import ArraySchema

        self.name = state["name"]
        self.schema = ArraySchema.from_dict(state["schema"])
        self._repo = _worker_repository(self.name, Path(state["dir"]), state.get("location"))
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


_WORKER_LOCK = threading.Lock()
_WORKER_REPOSITORIES: dict[str, ArrayRepository] = {}


def _worker_repository(name: str, directory: Path, location: Any = None) -> ArrayRepository:
    """The repository at ``directory`` or ``location``, opened once per process (a worker
    runs many tasks). A remote one is opened from the store: the worker needs no view of
    the database directory."""
    key = f"{name}\0{directory}\0{location}"
    with _WORKER_LOCK:
        repo = _WORKER_REPOSITORIES.get(key)
        if repo is None:
            if len(_WORKER_REPOSITORIES) > 256:
                _WORKER_REPOSITORIES.clear()
            repo = _WORKER_REPOSITORIES[key] = ArrayRepository(name, directory, location)
        return repo


class ArrayFork(ArraySnapshot):
    """A writer in another process: pickle it there, write, pickle it back, ``arr.merge([...])``."""

    _carries_writes = True

    def _write_session(self) -> tuple[Any, bool]:
        return self._session, False
