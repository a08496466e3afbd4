"""Loading array files into an array: one file, a stack of files along a new dimension, or
files concatenated along their first dimension; all or nothing per call.

Every file's header is read and checked against the first (dimensions, shape,
cell types) before anything is written, so a mismatched file in a glob is
named and nothing changes. The cells are then read in slabs by a pool of
threads (FITS and TIFF decoding, byte swapping and h5py reads release the
GIL for much of their work) while the calling thread writes the slabs it has
in order, each write encoding its whole chunks in parallel in Rust; at most
``_IN_FLIGHT`` slabs are held at once, so memory stays bounded by about
``_IN_FLIGHT x _SLAB_BYTES`` whatever the input size. All writes are one
transaction of the array (one version); a new array is dropped again if the
load fails or is cancelled.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tesseradb.arrays._files import ArrayFile, check_cells, open_array_file
from tesseradb.errors import LoadError
from tesseradb.executor import default_threads

if TYPE_CHECKING:
    from tesseradb.executor import Executor
    from tesseradb.progress import Tracker

__all__ = ["LOAD_OPTIONS", "ArrayLoad", "load_arrays"]

# the options of a load into an array (ArrayLoad's fields)
LOAD_OPTIONS = frozenset({"along", "dims", "chunks", "variables", "hdu", "attr", "threads"})

_SLAB_BYTES = 128 << 20  # cells read and written per step
_IN_FLIGHT = 3  # slabs read ahead of the writes (the memory bound is about this many slabs)
_CHUNK_BYTES = 4 << 20  # default chunks of about this size (whole images of 1024^2 float32)


class ArrayLoad:
    """Options of an array load (see ``db.load``)."""

    def __init__(
        self,
        along: str | None = None,
        dims: Sequence[str] | None = None,
        chunks: Sequence[int] | None = None,
        variables: Sequence[str] | None = None,
        hdu: int | str | None = None,
        attr: str | None = None,
        threads: int | None = None,
    ) -> None:
        self.along = along
        self.dims = list(dims) if dims is not None else None
        self.chunks = list(chunks) if chunks is not None else None
        self.variables = list(variables) if variables is not None else None
        self.hdu = hdu
        self.attr = attr
        self.threads = threads or default_threads()


def load_arrays(
    objects: Any,
    files: list[str],
    fmt: str,
    into: str,
    options: ArrayLoad,
    exists: bool,
    tracker: Tracker,
    executor: Executor | None = None,
) -> tuple[Any, int]:
    """Load ``files`` into the array ``into`` (made if it does not exist); the array and the
    cells written. ``objects`` is the database's open objects.

    On a Dask cluster (``executor``), each slab is read and written by a worker into a fork
    of the array, and the forks are merged into the load's one version.
    """
    opened = _open_all(files, fmt, options, tracker)
    try:
        first = opened[0]
        stacked = len(files) > 1 or options.along is not None
        along = options.along or "file"
        concat = along in first.dims
        if concat and first.dims[0] != along:
            raise LoadError(
                f"{first.path}: files are joined along a new dimension or along their first "
                f"dimension ({first.dims[0]!r}), not along {along!r}"
            )
        if exists:
            array = objects.get(into)
            concat = array.schema.ndim == len(first.dims)
            _check_alike(opened, concat)
            plan = _plan_existing(array, opened)
        else:
            _check_alike(opened, concat)
            array = objects.create(
                "array", into, _new_spec(opened, stacked, concat, along, options)
            )
            plan = _plan_new(array, opened, stacked, concat)
        tracker.set_total(sum(f.nbytes for f in opened))
        message = f"load {len(files)} file(s) of {fmt.upper()}"
        try:
            if executor is not None and executor.remote:
                _write_on_workers(array, opened, plan, executor, options, message, tracker)
            else:
                with array.transaction(message):
                    _write_all(array, opened, plan, options.threads, tracker)
        except BaseException:
            if not exists:  # the array this load made goes again
                objects.drop(into)
            raise
        cells = sum(math.prod(f.shape) for f in opened) * len(first.dtypes)
        return array, cells
    finally:
        for f in opened:
            f.close()


def _open_all(files: list[str], fmt: str, options: ArrayLoad, tracker: Tracker) -> list[ArrayFile]:
    opened: list[ArrayFile] = []
    try:
        for path in files:
            tracker.check()
            f = open_array_file(
                path, fmt, variables=options.variables, hdu=options.hdu, attr=options.attr
            )
            opened.append(f)
            if options.dims is not None:
                if len(options.dims) != len(f.dims):
                    raise LoadError(
                        f"{path}: dims names {len(options.dims)} dimensions; the file has "
                        f"{len(f.dims)} ({', '.join(f.dims)})"
                    )
                f.coords = {
                    options.dims[f.dims.index(d)]: v for d, v in f.coords.items() if d in f.dims
                }
                f.dims = list(options.dims)
    except BaseException:
        for f in opened:
            f.close()
        raise
    return opened


def _check_alike(opened: list[ArrayFile], concat: bool) -> None:
    first = opened[0]
    for f in opened[1:]:
        if f.dims != first.dims:
            raise LoadError(
                f"{f.path}: its dimensions are ({', '.join(f.dims)}); {first.path} has "
                f"({', '.join(first.dims)})"
            )
        if (f.shape[1:] if concat else f.shape) != (first.shape[1:] if concat else first.shape):
            raise LoadError(f"{f.path}: holds {f.shape} cells; {first.path} holds {first.shape}")
        if f.dtypes != first.dtypes:
            theirs = ", ".join(f"{k} {v}" for k, v in f.dtypes.items())
            ours = ", ".join(f"{k} {v}" for k, v in first.dtypes.items())
            raise LoadError(f"{f.path}: holds {theirs}; {first.path} holds {ours}")


def default_chunks(shape: Sequence[int], itemsize: int, first: int | None = None) -> list[int]:
    """Chunks of about _CHUNK_BYTES: the largest axis halved until they fit; with ``first``,
    at most that many rows of the first axis (so a slab of whole chunks stays bounded)."""
    chunks = [max(1, int(n)) for n in shape]
    if first is not None and chunks:
        chunks[0] = max(1, min(chunks[0], first))
    while math.prod(chunks) * itemsize > _CHUNK_BYTES:
        axis = max(range(len(chunks)), key=lambda i: chunks[i])
        if chunks[axis] == 1:
            break
        chunks[axis] = -(-chunks[axis] // 2)
    return chunks


def _new_spec(
    opened: list[ArrayFile], stacked: bool, concat: bool, along: str, options: ArrayLoad
) -> dict[str, Any]:
    from tesseradb.arrays._schema import ArraySchema

    first = opened[0]
    itemsize = max(d.itemsize for d in first.dtypes.values())
    # files read along their first axis are written in slabs of whole chunks of it
    rows = None if stacked and not concat else max(1, _SLAB_BYTES // max(1, first.row_bytes))
    chunks = options.chunks or default_chunks(first.shape, itemsize, rows)
    if len(chunks) != len(first.dims):
        raise LoadError(
            f"chunks names {len(chunks)} sizes for the {len(first.dims)} dimensions "
            f"({', '.join(first.dims)})"
        )
    dims: list[dict[str, Any]] = [
        {"name": d, "start": 0, "end": n, "chunk": c}
        for d, n, c in zip(first.dims, first.shape, chunks, strict=True)
    ]
    origin = list(first.origin)
    coords = dict(first.coords)
    if concat:
        dims[0]["end"] = None
        if along in coords:
            coords[along] = [v for f in opened for v in f.coords.get(along, [])]
    elif stacked:
        dims.insert(0, {"name": along, "start": 0, "end": None, "chunk": 1})
        origin.insert(0, 0)
    attrs = [
        {
            "name": name,
            "dtype": dtype.name,
            **({"fill": first.fills[name], "nullable": True} if name in first.fills else {}),
        }
        for name, dtype in first.dtypes.items()
    ]
    extra = {
        **first.metadata,
        "loaded_from": {"format": first.format, "files": len(opened), "first": first.path},
    }
    if coords:
        extra["coords"] = coords
    try:
        schema = ArraySchema.build(dims, attrs, origin, extra=extra)
    except LoadError:
        raise
    except Exception as err:  # the file's names or sizes do not make a valid array
        raise LoadError(f"{first.path}: cannot become an array: {err}") from None
    return {"schema": schema.to_dict()}


def _plan_new(array: Any, opened: list[ArrayFile], stacked: bool, concat: bool) -> list[int]:
    """Where each file's first row goes along the array's first dimension."""
    if concat:
        return list(np.cumsum([0] + [f.shape[0] for f in opened[:-1]]))
    if stacked:
        return list(range(len(opened)))
    return [0]


def _plan_existing(array: Any, opened: list[ArrayFile]) -> list[int]:
    """Where each file's first row goes in an existing array: after its cells along its
    unbounded first dimension, one slice per file or the files' rows concatenated."""
    first = opened[0]
    schema = array.schema
    extent = array.shape
    names = list(schema.dim_names)
    if schema.unbounded_axis != 0:
        raise LoadError(
            f"array {array.name!r} has no unbounded first dimension to append {first.path} "
            "along; load into a new array instead"
        )
    if len(names) == len(first.dims) + 1:  # a new slice per file
        per_file, slice_shape = [1] * len(opened), tuple(extent[1:])
        if tuple(first.shape) != slice_shape:
            raise LoadError(
                f"{first.path}: holds {first.shape} cells; a slice of array {array.name!r} "
                f"holds {slice_shape}"
            )
    elif len(names) == len(first.dims):  # rows appended along the first dimension
        per_file = [f.shape[0] for f in opened]
        if tuple(first.shape[1:]) != tuple(extent[1:]):
            raise LoadError(
                f"{first.path}: holds {first.shape} cells; the rows of array {array.name!r} "
                f"hold {tuple(extent[1:])}"
            )
    else:
        raise LoadError(
            f"{first.path}: has {len(first.dims)} dimensions; array {array.name!r} has "
            f"{len(names)} ({', '.join(names)})"
        )
    theirs = [d.lower() for d in names[len(names) - len(first.dims) :]]
    if [d.lower() for d in first.dims] != theirs:
        raise LoadError(
            f"{first.path}: its dimensions are ({', '.join(first.dims)}); array "
            f"{array.name!r} has ({', '.join(names)})"
        )
    rename = _attribute_names(array, first)
    for f in opened:
        for name, dtype in f.dtypes.items():
            target = schema.attribute(rename[name])
            if not np.can_cast(dtype, target.numpy_dtype, "safe"):
                raise LoadError(
                    f"{f.path}: {name!r} holds {dtype} cells, which attribute "
                    f"{target.name!r} ({target.dtype}) of array {array.name!r} cannot hold exactly"
                )
        f.dtypes = {rename[k]: schema.attribute(rename[k]).numpy_dtype for k in f.dtypes}
        _rename_reads(f, rename)
    return [int(x) for x in extent[0] + np.cumsum([0, *per_file[:-1]])]


def _attribute_names(array: Any, first: ArrayFile) -> dict[str, str]:
    """The array attribute each of the file's values goes to (a lone one to the lone one)."""
    schema = array.schema
    if len(first.dtypes) == 1 and len(schema.attrs) == 1:
        return {next(iter(first.dtypes)): schema.attrs[0].name}
    attrs = {a.name.lower(): a.name for a in schema.attrs}
    rename = {}
    for name in first.dtypes:
        if name.lower() not in attrs:
            raise LoadError(
                f"{first.path}: holds {name!r}; array {array.name!r} has attributes "
                f"{', '.join(schema.attr_names)}"
            )
        rename[name] = attrs[name.lower()]
    return rename


def _rename_reads(f: ArrayFile, rename: dict[str, str]) -> None:
    read = f.read

    def renamed(lo: int, hi: int) -> dict[str, np.ndarray]:
        return {rename[k]: v for k, v in read(lo, hi).items()}

    f.read = renamed
    f.renames = dict(rename)


@dataclass(frozen=True)
class _FileSpec:
    """How a worker opens one file of a load as the client did."""

    path: str
    format: str
    variables: list[str] | None
    hdu: int | str | None
    attr: str | None
    dtypes: dict[str, Any]  # attribute -> cell type, after the client's renames
    renames: dict[str, str]

    def open(self) -> ArrayFile:
        f = open_array_file(
            self.path, self.format, variables=self.variables, hdu=self.hdu, attr=self.attr
        )
        if self.renames:
            _rename_reads(f, self.renames)
        f.dtypes = dict(self.dtypes)
        return f


def _write_on_workers(
    array: Any,
    opened: list[ArrayFile],
    plan: list[int],
    executor: Executor,
    options: ArrayLoad,
    message: str,
    tracker: Tracker,
) -> None:
    """The slabs of :func:`_write_all`, each read and written into a fork by a worker; the
    forks merged as one version. Nothing is kept on an error or a cancel."""
    stack = array.schema.ndim == len(opened[0].dims) + 1
    steps = _steps(opened, plan, stack, array.schema.dims[0].chunk)
    specs = [
        _FileSpec(
            f.path, f.format, options.variables, options.hdu, options.attr, f.dtypes, f.renames
        )
        for f in opened
    ]
    index = {id(f): i for i, f in enumerate(opened)}
    rows = plan[0] + sum(1 if stack else f.shape[0] for f in opened)
    extent = [int(max(rows, array.shape[0])), *(int(n) for n in array.shape[1:])]
    starts = [d.start for d in array.schema.dims]
    try:
        items = [
            (array.fork(extent), start, [(index[id(f)], lo, hi) for f, lo, hi in pieces])
            for start, pieces in steps
        ]
        task = functools.partial(_load_slab, specs, stack, starts)
        forks = []
        for fork, nbytes in executor.stream(task, items, what=f"load into array {array.name!r}"):
            tracker.check()
            tracker.advance(nbytes)
            forks.append(fork)
        tracker.check()  # the merge commits next: the last moment to stop
    except BaseException:
        array.discard_forks()
        raise
    array.merge(forks, message)


def _load_slab(
    specs: list[_FileSpec], stack: bool, starts: list[int], item: tuple[Any, int, list[Any]]
) -> tuple[Any, int]:
    """A task of a load on a cluster: read one slab's pieces, write it into its fork."""
    fork, start, pieces = item
    files: dict[int, ArrayFile] = {}
    try:
        parts = []
        for i, lo, hi in pieces:
            if i not in files:
                files[i] = specs[i].open()
            parts.append((files[i], lo, hi))
        slab = _empty_slab(parts, stack)
        row = 0
        for f, lo, hi in parts:
            _read_piece(f, lo, hi, slab, row, stack)
            row += 1 if stack else hi - lo
        fork.write([starts[0] + start, *starts[1:]], slab)
        return fork, sum(v.nbytes for v in slab.values())
    finally:
        for f in files.values():
            f.close()


def _write_all(
    array: Any, opened: list[ArrayFile], plan: list[int], threads: int, tracker: Tracker
) -> None:
    """Read slabs in a pool, write them in order from this thread (inside the transaction).

    Each slab is allocated once and every piece (a file, or rows of one) is a
    task of its own that reads straight into its place, converting byte order
    and type on the way: no piece is copied again before the write.
    """
    stack = array.schema.ndim == len(opened[0].dims) + 1
    steps = _steps(opened, plan, stack, array.schema.dims[0].chunk)
    with ThreadPoolExecutor(threads, thread_name_prefix="tessera-load") as pool:
        pending: deque[tuple[int, dict[str, np.ndarray], list[Future[None]]]] = deque()
        try:
            for start, pieces in steps:
                slab = _empty_slab(pieces, stack)
                row, futures = 0, []
                for f, lo, hi in pieces:
                    futures.append(pool.submit(_read_piece, f, lo, hi, slab, row, stack))
                    row += 1 if stack else hi - lo
                pending.append((start, slab, futures))
                while len(pending) >= _IN_FLIGHT:
                    _write_slab(array, *pending.popleft(), tracker)
            while pending:
                _write_slab(array, *pending.popleft(), tracker)
            tracker.check()  # the transaction commits next: the last moment to stop
        except BaseException:
            for _, _, futures in pending:
                for future in futures:
                    future.cancel()
            raise


def _empty_slab(pieces: list[tuple[ArrayFile, int, int]], stack: bool) -> dict[str, np.ndarray]:
    f = pieces[0][0]
    rows = len(pieces) if stack else sum(hi - lo for _, lo, hi in pieces)
    shape = (rows, *f.shape) if stack else (rows, *f.shape[1:])
    return {name: np.empty(shape, dtype) for name, dtype in f.dtypes.items()}


def _steps(
    opened: list[ArrayFile], plan: list[int], stack: bool, chunk: int
) -> list[tuple[int, list[tuple[ArrayFile, int, int]]]]:
    """The writes: (first row in the array, pieces of files (file, lo, hi)).

    The files' rows (a file is one row when stacking) follow each other from
    ``plan[0]``; each write is about _SLAB_BYTES and ends on a boundary of the
    array's chunks along the first axis (``chunk`` rows), so no chunk is
    written twice (a chunk written in part is read back and rewritten).
    """
    sizes = [1 if stack else f.shape[0] for f in opened]
    offsets = [0, *np.cumsum(sizes)[:-1].tolist()]
    row_bytes = opened[0].nbytes if stack else opened[0].row_bytes
    target = max(1, _SLAB_BYTES // max(1, row_bytes))
    if stack:
        target = min(target, 64)
    per = max(chunk, target // chunk * chunk)
    start, total = plan[0], sum(sizes)
    steps: list[tuple[int, list[tuple[ArrayFile, int, int]]]] = []
    lo = 0
    while lo < total:
        here = start + lo
        hi = min(total, here - here % chunk + per - start)
        pieces = []
        for f, offset, size in zip(opened, offsets, sizes, strict=True):
            a, b = max(lo, offset), min(hi, offset + size)
            if a < b:
                pieces.append((f, 0, f.shape[0]) if stack else (f, a - offset, b - offset))
        steps.append((here, pieces))
        lo = hi
    return steps


def _read_piece(
    f: ArrayFile, lo: int, hi: int, slab: dict[str, np.ndarray], row: int, stack: bool
) -> None:
    """Rows ``[lo, hi)`` of ``f`` into ``slab`` at ``row`` (a whole slice when stacking)."""
    for name, values in f.read(lo, hi).items():
        values = np.asarray(values)
        if name not in slab:
            raise LoadError(f"{f.path}: holds {name!r}, which the first file does not")
        check_cells(f.path, values, f.dtypes, name)
        expected = (hi - lo, *f.shape[1:])
        if values.shape != expected:
            raise LoadError(f"{f.path}: {name!r} gave {values.shape} cells, not {expected}")
        if stack:
            slab[name][row] = values
        else:
            slab[name][row : row + hi - lo] = values
    if hi == f.shape[0]:
        f.close()  # the file is read: let its decoded cells go


def _write_slab(
    array: Any,
    start: int,
    slab: dict[str, np.ndarray],
    futures: list[Future[None]],
    tracker: Tracker,
) -> None:
    tracker.check()
    for future in futures:
        future.result()
    first, *rest = (d.start for d in array.schema.dims)
    array.write([first + start, *rest], slab)
    tracker.advance(sum(v.nbytes for v in slab.values()))
