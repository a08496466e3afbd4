"""Parallel triple ingest into an array, as the SciDB D4M paper measures it.

P writer processes each take a contiguous share of the sources (slices of a
volume, say) and put each source's triples. Their work becomes one version of
the target array in one of two ways:

- ``"fork"``: each writer is a fork of the array (:meth:`Array.fork`); the
  parent merges the forks into one commit. Nothing is copied.
- ``"union"``: the paper's way. Each writer builds a new array of its own (a
  part beside the target), then one union copies the parts' chunks into the
  target in one commit.

Either way all of it lands or none: a source that fails, a writer that dies
(even by ``kill -9``) or two writers that wrote one chunk leave the target as
it was. Writers are processes of this machine started with ``forkserver``
(Icechunk's I/O threads do not survive ``fork()``), or the workers of the
database's Dask cluster (``db.use(client)``), where a writer that dies has its
share rerun by Dask. Sources must be picklable: :class:`ImageSlice`, or a
function defined in a module (a ``functools.partial`` of one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tesseradb.errors import AssocError, ClusterError, TesseraError
from tesseradb.executor import Executor, Processes, shares

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy as np

    from tesseradb.arrays import Array

STRATEGIES = ("fork", "union")


class _OpensArrays(Protocol):
    """What parallel ingest needs of a database: its arrays by name, where work runs."""

    def array(self, name: str) -> Array: ...

    @property
    def executor(self) -> Executor: ...


@dataclass(frozen=True)
class ImageSlice:
    """Slice ``index`` of a volume, a 2-D image in a ``.npy`` file (or a TIFF file, read
    with ``tifffile``), as D4M's putTriple form: coordinates ``(index, row ids, column
    ids)`` and the pixel values."""

    path: str | os.PathLike[str]
    index: int

    def __call__(self) -> tuple[tuple[Any, ...], np.ndarray]:
        import numpy as np

        image = _read_image(self.path)
        if image.ndim != 2:
            raise AssocError(
                f"image slice {os.fspath(self.path)!r}: an image has 2 dimensions, not "
                f"{image.ndim} (shape {image.shape})"
            )
        height, width = image.shape
        rows = np.repeat(np.arange(height, dtype=np.int32), width)
        cols = np.tile(np.arange(width, dtype=np.int32), height)
        return (self.index, rows, cols), image.reshape(-1)


def _read_image(path: str | os.PathLike[str]) -> np.ndarray:
    import numpy as np

    name = os.fspath(path)
    try:
        if name.lower().endswith((".tif", ".tiff")):
            import tifffile

            return np.asarray(tifffile.imread(name))
        return np.load(name, allow_pickle=False)
    except ImportError:
        raise AssocError(
            f"image slice {name!r}: reading TIFF needs tifffile (pip install tifffile)"
        ) from None
    except (OSError, ValueError) as err:
        raise AssocError(f"image slice {name!r} cannot be read: {err}") from None


@dataclass(frozen=True)
class Ingested:
    """What :func:`parallel_ingest` did: cells written, the version made, how."""

    cells: int
    version: str
    workers: int
    merge: str


def parallel_ingest(
    db: _OpensArrays,
    array: Array | str,
    sources: Sequence[Callable[[], tuple[Any, Any]]],
    workers: int = 2,
    merge: str = "fork",
    message: str = "parallel ingest",
) -> Ingested:
    """Put the triples of every source into ``array`` with ``workers`` processes, as one version.

    Each source is a picklable callable returning ``(coords, values)`` as
    :meth:`Array.put_triples` takes them. Writers take contiguous shares of
    ``sources`` and must write different chunks. ``merge`` is ``"fork"`` (forks
    merged, nothing copied) or ``"union"`` (each writer builds its own array,
    then one union copies their chunks). The array's unbounded dimension, if
    any, does not grow: writers cannot grow it, so grow it first.
    """
    target = db.array(array) if isinstance(array, str) else array
    where = f"parallel ingest into array {target.name!r}"
    jobs = _shares(sources, workers, merge, where)
    # writers on the database's cluster when it uses one, else processes here
    run = db.executor if db.executor.remote else Processes(len(jobs))
    if merge == "fork":
        return _with_forks(run, target, jobs, message, where)
    return _with_union(run, target, jobs, message, where)


def _shares(
    sources: Sequence[Any], workers: Any, merge: Any, where: str
) -> list[list[tuple[int, Any]]]:
    if merge not in STRATEGIES:
        raise AssocError(f"{where}: merge must be one of {', '.join(STRATEGIES)}, not {merge!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise AssocError(f"{where}: workers must be a positive int, not {workers!r}")
    try:
        numbered = list(enumerate(sources))
    except TypeError:
        raise AssocError(
            f"{where}: sources must be a sequence of callables, not {type(sources).__name__}"
        ) from None
    if not numbered:
        raise AssocError(f"{where}: no sources given")
    for i, source in numbered:
        if not callable(source):
            raise AssocError(
                f"{where}: source {i} is a {type(source).__name__}, not a callable returning "
                "(coords, values)"
            )
    return shares(numbered, workers)


def _write_share(writer: Any, share: list[tuple[int, Any]]) -> int:
    cells = 0
    for i, source in share:
        try:
            coords, values = source()
        except TesseraError:
            raise
        except Exception as err:
            raise AssocError(f"source {i} failed: {type(err).__name__}: {err}") from None
        try:
            cells += writer.put_triples(coords, values)
        except TesseraError as err:
            raise type(err)(f"source {i}: {err}") from None
    return cells


def _fork_worker(job: tuple[Any, list[tuple[int, Any]]]) -> tuple[Any, int]:
    fork, share = job
    return fork, _write_share(fork, share)


def _union_worker(job: tuple[Any, str, list[tuple[int, Any]]]) -> tuple[str, int]:
    from pathlib import Path

    from tesseradb.arrays import ArrayPart

    spec, directory, share = job
    part = ArrayPart(spec, Path(directory))
    cells = _write_share(part.writer, share)
    part.commit()  # durable: the part is an array of its own
    return directory, cells


def _run(
    executor: Executor, worker: Callable[[Any], Any], jobs: list[Any], where: str
) -> list[Any]:
    """Run ``worker`` over ``jobs`` in writer processes; a TesseraError naming what failed."""
    try:
        return executor.map(worker, jobs, what=where)
    except ClusterError:
        raise
    except TesseraError as err:
        raise type(err)(f"{where}: {err}; nothing was committed") from None
    except Exception as err:  # a source that cannot be pickled, say
        raise TesseraError(f"{where}: {type(err).__name__}: {err}; nothing was committed") from None


def _with_forks(
    executor: Executor, target: Array, shares: list[Any], message: str, where: str
) -> Ingested:
    jobs = [(target.fork(), share) for share in shares]
    try:
        done = _run(executor, _fork_worker, jobs, where)
    except BaseException:
        target.discard_forks()
        raise
    version = target.merge([fork for fork, _ in done], message=message)
    return Ingested(sum(c for _, c in done), version, len(jobs), "fork")


def _with_union(
    executor: Executor, target: Array, shares: list[Any], message: str, where: str
) -> Ingested:
    import shutil
    from pathlib import Path

    from tesseradb.arrays import PartSpec, parts_directory, union_parts

    spec = PartSpec.of(target)
    scratch = parts_directory(target)
    try:
        jobs = [(spec, str(scratch / f"part-{w}"), share) for w, share in enumerate(shares)]
        done = _run(executor, _union_worker, jobs, where)
        version = union_parts(target, [Path(d) for d, _ in done], message)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Ingested(sum(c for _, c in done), version, len(jobs), "union")
