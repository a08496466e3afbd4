"""The one seam through which chunk- and file-parallel work runs.

Every operation that splits into independent tasks (a chunk of an array, an
image of an SS-DB cycle, a dataset row range of an attached file, a slice of
triples) hands its task function and items to :meth:`Executor.map`. Three
implementations exist:

- :class:`Threads`, threads of this process: the default. Numpy, zstd and
  the Rust kernels release the GIL, so the threads run in parallel.
- :class:`DaskExecutor`, a ``dask.distributed.Client``: the tasks run on the
  cluster's workers, which read the database's storage themselves (it must be
  a path they see). Task functions and items are pickled (cloudpickle), so
  operations hand tasks a snapshot of what they read, never the open database.
- :class:`Processes`, forkserver processes of this machine, for tasks that
  hold the GIL (parallel triple ingest's sources); pickled as for a cluster.

Tasks only read, or write into forks the caller merges: the process holding
the database's writer lock is the only one that commits. A worker dying
mid-task is replaced and its tasks rerun by Dask (they have no side effect
but their result); a cluster that is lost raises :class:`ClusterError`, and
the operation commits nothing.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from tesseradb.errors import ClusterError, InvalidArgumentError, TesseraError

__all__ = [
    "DaskExecutor",
    "Executor",
    "ExecutorSlot",
    "Processes",
    "Threads",
    "as_executor",
    "dask_client",
    "default_slot",
    "default_threads",
    "shares",
]

T = TypeVar("T")
R = TypeVar("R")


def shares(items: Sequence[T], parts: int) -> list[list[T]]:
    """``items`` in ``parts`` contiguous runs whose sizes differ by one at most (fewer
    runs when there are fewer items); the first runs are the longer ones."""
    items = list(items)
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    runs, at = [], 0
    for k in range(parts):
        n = size + (k < extra)
        runs.append(items[at : at + n])
        at += n
    return runs


class Executor:
    """Runs a function over items in parallel; results in item order."""

    #: True when tasks run in other processes: functions and items are pickled
    remote = False

    @property
    def workers(self) -> int:
        """How many tasks run at once."""
        raise NotImplementedError

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, what: str, limit: int | None = None
    ) -> list[R]:
        """``fn`` over ``items``, at most ``limit`` at once; an error of a task is raised as is.

        ``what`` names the operation for errors ("regrid of array 'sky'").
        """
        raise NotImplementedError

    def stream(
        self, fn: Callable[[T], R], items: Iterable[T], *, what: str, window: int | None = None
    ) -> Iterator[R]:
        """``fn`` over ``items`` as they come, results in order, at most ``window`` tasks in
        flight (twice the workers by default): a scan's memory holds a window, not the scan."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


def default_threads() -> int:
    """Threads for chunk-parallel work on this machine: the cores, at least 2, at most 8."""
    return max(2, min(8, os.cpu_count() or 2))


class Threads(Executor):
    """Threads of this process (the default executor)."""

    def __init__(self, threads: int | None = None) -> None:
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise InvalidArgumentError(f"Threads: threads must be a positive int, not {threads!r}")
        self.threads = threads or default_threads()

    @property
    def workers(self) -> int:
        return self.threads

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, what: str, limit: int | None = None
    ) -> list[R]:
        items = list(items)
        width = min(len(items), self.threads, limit or self.threads)
        if width <= 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(width, thread_name_prefix="tessera-task") as pool:
            return list(pool.map(fn, items))

    def stream(
        self, fn: Callable[[T], R], items: Iterable[T], *, what: str, window: int | None = None
    ) -> Iterator[R]:
        iterator = iter(items)
        first = list(itertools.islice(iterator, 2))
        if self.threads == 1 or len(first) < 2:  # one task: a pool would only add its cost
            for item in itertools.chain(first, iterator):
                yield fn(item)
            return
        width = window or 2 * self.threads
        with ThreadPoolExecutor(self.threads, thread_name_prefix="tessera-task") as pool:
            pending: deque[Future[R]] = deque()
            try:
                for item in itertools.chain(first, iterator):
                    pending.append(pool.submit(fn, item))
                    if len(pending) >= width:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            finally:  # a consumer that stops early (LIMIT, an error) drops the rest
                for future in pending:
                    future.cancel()

    def describe(self) -> str:
        return f"{self.threads} threads in this process"


class Processes(Executor):
    """Worker processes of this machine (``forkserver``: Icechunk's I/O threads do not
    survive ``fork()``), for work that holds the GIL in Python (parallel triple ingest's
    sources). Functions and items are pickled, as for a cluster."""

    remote = True

    def __init__(self, processes: int) -> None:
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise InvalidArgumentError(
                f"Processes: processes must be a positive int, not {processes!r}"
            )
        self.processes = processes

    @property
    def workers(self) -> int:
        return self.processes

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, what: str, limit: int | None = None
    ) -> list[R]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        items = list(items)
        if not items:
            return []
        context = multiprocessing.get_context("forkserver")
        width = min(len(items), self.processes, limit or self.processes)
        try:
            with ProcessPoolExecutor(width, mp_context=context) as pool:
                return list(pool.map(fn, items))
        except BrokenProcessPool:
            raise ClusterError(
                f"{what}: a worker process died before it finished; nothing was committed"
            ) from None

    def stream(
        self, fn: Callable[[T], R], items: Iterable[T], *, what: str, window: int | None = None
    ) -> Iterator[R]:
        yield from self.map(fn, list(items), what=what)

    def describe(self) -> str:
        return f"{self.processes} worker processes on this machine"


def _each(fn: Callable[[T], R], batch: list[T]) -> list[R]:
    """One Dask task: ``fn`` over a batch of items, in order."""
    return [fn(item) for item in batch]


class DaskExecutor(Executor):
    """The workers of a ``dask.distributed.Client``."""

    remote = True
    BATCHES_PER_WORKER = 4

    def __init__(self, client: Any) -> None:
        self.client = dask_client(client)
        self.address = str(getattr(client.scheduler, "address", None) or "?")

    @property
    def workers(self) -> int:
        try:
            info = self.client.scheduler_info()
        except Exception as err:  # any failure here means the cluster is gone
            raise self._lost("asking for its workers", err) from None
        return max(1, sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()))

    def _lost(self, what: str, err: BaseException | str) -> ClusterError:
        return ClusterError(
            f"{what}: the Dask cluster at {self.address} is lost ({err}); nothing was committed"
        )

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, what: str, limit: int | None = None
    ) -> list[R]:
        items = list(items)
        if not items:
            return []
        # Dask spends a few milliseconds on every task: many small items go as batches,
        # BATCHES_PER_WORKER per worker thread, each one task
        groups = shares(items, self.BATCHES_PER_WORKER * self.workers)
        with self._errors(what):
            # pure=False: every call is new work (the same chunk may hold new data);
            # a worker that dies mid-task has its tasks rerun elsewhere by the scheduler
            futures = self.client.map(functools.partial(_each, fn), groups, pure=False)
            try:
                results: list[list[R]] = self.client.gather(futures)
            except BaseException:
                with contextlib.suppress(Exception):  # a lost client cannot cancel
                    self.client.cancel(futures)
                raise
            return [r for batch in results for r in batch]

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """The cluster's failures as :class:`ClusterError`; a task's own error as it is."""
        import asyncio
        import concurrent.futures

        from distributed.client import FutureCancelledError
        from distributed.comm.core import CommClosedError
        from distributed.scheduler import KilledWorker

        if self.client.status not in ("running", "connecting"):
            raise self._lost(what, f"the client is {self.client.status}")
        try:
            yield
        except TesseraError:
            raise
        except KilledWorker as err:
            raise ClusterError(
                f"{what}: a task killed every worker that ran it ({err}); nothing was committed"
            ) from None
        except (
            FutureCancelledError,
            concurrent.futures.CancelledError,
            asyncio.CancelledError,
            CommClosedError,
            TimeoutError,
        ) as err:
            raise self._lost(what, err or type(err).__name__) from None
        except Exception as err:
            # a task's own error comes back as it is; anything while the client is no
            # longer connected is the cluster's
            if self.client.status != "running":
                raise self._lost(what, f"{type(err).__name__}: {err}") from None
            raise

    def stream(
        self, fn: Callable[[T], R], items: Iterable[T], *, what: str, window: int | None = None
    ) -> Iterator[R]:
        width = window or 2 * self.workers
        pending: deque[Any] = deque()
        try:
            with self._errors(what):
                for item in items:
                    pending.append(self.client.submit(fn, item, pure=False))
                    if len(pending) >= width:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
        finally:
            if pending:
                with contextlib.suppress(Exception):  # a lost client cannot cancel
                    self.client.cancel(list(pending))

    def describe(self) -> str:
        try:
            return f"a Dask cluster at {self.address} ({self.workers} worker threads)"
        except ClusterError:
            return f"a Dask cluster at {self.address} (lost)"


def dask_client(value: Any) -> Any:
    """``value`` if it is a ``dask.distributed.Client``; else an error saying what a cluster is."""
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - dask is an optional extra
        raise InvalidArgumentError(
            "a Dask cluster needs dask.distributed: pip install 'tesseradb[dask]'"
        ) from None
    if not isinstance(value, Client):
        raise InvalidArgumentError(
            f"cluster must be a dask.distributed.Client, not {type(value).__name__}"
        )
    return value


def as_executor(value: Any) -> Executor:
    """An executor from what ``connect(cluster=)`` and ``db.use`` take: None (threads),
    an :class:`Executor`, or a ``dask.distributed.Client``."""
    if value is None:
        return Threads()
    if isinstance(value, Executor):
        return value
    return DaskExecutor(value)


class ExecutorSlot:
    """The executor a database's objects use now; ``db.use`` changes it for all of them."""

    def __init__(self, executor: Executor | None = None) -> None:
        self.current: Executor = executor or Threads()

    def set(self, executor: Executor) -> None:
        self.current = executor


_DEFAULT = ExecutorSlot()


def default_slot() -> ExecutorSlot:
    """The slot of objects made outside a database (threads, unless changed)."""
    return _DEFAULT
