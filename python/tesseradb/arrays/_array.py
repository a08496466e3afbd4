"""An array of a database: transactions, versions, forks and their merge, operators, and
lazy views (what every array handle does is in ``_handles.py``).

Writes go to an Icechunk session and become one commit (one version) per
call, or per ``with arr.transaction():`` block; a failure discards the
session, so nothing of the call is visible. Reads open a read-only session
of the head (or of the version the array was opened at), so a reader never
sees half of a commit. Parallel writer processes each take a picklable
:class:`ArrayFork`; ``arr.merge(forks)`` commits their work as one version.
"""

from __future__ import annotations

import contextlib
import numbers
import threading
from collections import abc
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import refuses_when_closed
from tesseradb.arrays._boxes import ArrayBoundsError, Box, parse_key
from tesseradb.arrays._handles import (
    ArrayBase,
    ArrayFork,
    ChunkView,
    require_callable,
)
from tesseradb.arrays._repository import ArrayConflictError, ArrayRepository
from tesseradb.errors import (
    ArrayCorruptError,
    ArrayDtypeError,
    InvalidArgumentError,
    ReadOnlyError,
    TesseraError,
    require_text,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from datetime import datetime

    import icechunk
    import numpy as np
    import xarray as xr

    from tesseradb.arrays._relation import ArrayRelation
    from tesseradb.arrays._repository import Version
    from tesseradb.arrays._schema import ArraySchema
    from tesseradb.kinds import OpenObjects
    from tesseradb.progress import Cancel, ProgressLike

__all__ = ["Array", "ArrayCorruptError", "ArrayDtypeError", "ArrayView"]


@refuses_when_closed
class Array(ArrayBase):
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
        self.in_place = False  # a repository opened in place (db.open_array): never written
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
        if self.in_place:
            raise ReadOnlyError(
                f"cannot write array {self.name!r}: it is a repository opened in place "
                "(db.open_array), read and never written"
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
            require_callable(expression, f"array {self.name!r}: apply")
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
