"""Partitioned record streams: one ingest process per partition, queries fanned out (MDDS Fig. 1).

MDDS scales ingest past one node by giving each ingestion node a partition
of the stream: a dispatcher deals incoming records to the nodes, each node
builds its own segments and R*-tree, and a query goes to every node, whose
answers are concatenated. Here each partition is a database directory of its
own (``<directory>/part-<k>``) holding one stream, opened for writing by one
*owner*:

- without a cluster, owners are objects of this process and the partitions'
  work runs in parallel threads (ingest and queries release the GIL in Rust);
- with a ``dask.distributed.Client``, each owner is a Dask actor living on a
  worker (partition ``k`` on worker ``k mod workers``): that worker process
  holds the partition's writer lock, builds its segments and answers its
  part of every query. Records travel to their owner once; answers travel
  back.

An ingest call deals its records to the partitions in contiguous runs (the
dispatcher's round robin); each partition keeps its run all or nothing, as a
stream keeps a call. Across partitions a call is not one transaction: if an
owner dies mid-call, the other partitions keep their runs (MDDS's nodes are
independent the same way), and :meth:`PartitionedStream.ingest` raises. See
docs/scale-out.md for the design on many nodes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tesseradb.errors import (
    ClusterError,
    DamagedStorageError,
    InvalidArgumentError,
    ObjectExistsError,
)
from tesseradb.executor import dask_client, shares

__all__ = ["PartitionedStream"]

LAYOUT_FILE = "partitions.json"


class PartitionOwner:
    """One partition's database, open for writing in the process that owns it.

    On a cluster this class is a Dask actor: its methods run on the worker
    holding it, one at a time.
    """

    def __init__(
        self,
        directory: str,
        name: str,
        descriptor: Any | None,
        storage: str | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        from tesseradb.database import Database

        self.db = Database(directory, storage=storage, storage_options=storage_options)
        if descriptor is not None and name not in self.db.streams():
            self.stream = self.db.create_stream(name, descriptor)
        else:
            self.stream = self.db.stream(name)
        # one ingest or flush at a time (a client may call from several threads); queries
        # run beside them, as a stream's do
        self._lock = threading.Lock()

    def ingest(self, data: Any) -> int:
        with self._lock:
            return int(self.stream.ingest(data))

    def range(self, columns: list[str] | None, bounds: dict[str, Any]) -> Any:
        return self.stream.range(columns, **bounds)

    def records(self) -> int:
        return int(self.stream.num_records)

    def flush(self) -> None:
        with self._lock:
            self.stream.flush()

    def close(self) -> None:
        self.db.close()


class PartitionedStream:
    """A record stream split into partitions, each ingested by its own owner (module doc).

    ``PartitionedStream.create(directory, "taxi", descriptor, partitions=4,
    cluster=client)`` makes one; ``PartitionedStream.open(directory,
    cluster=client)`` opens it again. Use as a context manager, or call
    :meth:`close`.
    """

    def __init__(
        self,
        directory: Path,
        layout: dict[str, Any],
        cluster: Any,
        create: bool,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.directory = directory
        self.name: str = layout["name"]
        self.partitions: int = layout["partitions"]
        self.storage: str | None = layout.get("storage")
        self._storage_options = storage_options
        self._descriptor = layout["descriptor"] if create else None
        self._client = None if cluster is None else dask_client(cluster)
        self._owners: list[Any] = []
        self._next = 0  # the partition the next ingest call's first run goes to
        self._pool: Any = None
        try:
            self._start_owners()
        except BaseException:
            self.close()
            raise

    # --- making and opening ----------------------------------------------------------
    @classmethod
    def create(
        cls,
        directory: str | Path,
        name: str,
        descriptor: Any,
        partitions: int,
        cluster: Any = None,
        storage: str | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> PartitionedStream:
        """A new partitioned stream of ``partitions`` parts under ``directory`` (made here).

        With ``storage`` (``s3://bucket/prefix``), partition ``k`` is a database whose
        storage is ``<storage>/part-<k>``: its sealed segments go to the bucket, its
        catalog and call log stay in its folder (docs/storage.md). ``storage_options``
        reach the bucket as in :func:`tesseradb.connect`; they are never written down.
        """
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise InvalidArgumentError(
                f"partitioned stream {name!r}: partitions must be a positive int, not {partitions!r}"
            )
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"a partitioned stream needs a name (a str), not {name!r}")
        root = Path(directory).expanduser().absolute()
        if (root / LAYOUT_FILE).exists():
            raise ObjectExistsError(f"{root} already holds a partitioned stream")
        from tesseradb.records import RecordDescriptor

        checked = RecordDescriptor.parse(descriptor)  # refused here, before anything is made
        layout = {"name": name, "partitions": partitions, "descriptor": checked.to_dict()}
        if storage is not None:
            from tesseradb.storage import Storage

            asked = Storage(storage, storage_options, f"partitioned stream {name!r}")
            if asked.default is not None:
                asked.default.check_reachable()  # a missing bucket or refused keys: nothing made
                layout["storage"] = asked.default.url
        root.mkdir(parents=True, exist_ok=True)
        made = cls(root, layout, cluster, create=True, storage_options=storage_options)
        (root / LAYOUT_FILE).write_text(json.dumps(layout))  # last: a half-made one has none
        return made

    @classmethod
    def open(
        cls,
        directory: str | Path,
        cluster: Any = None,
        storage_options: dict[str, Any] | None = None,
    ) -> PartitionedStream:
        """The partitioned stream under ``directory``; ``storage_options`` reach its bucket."""
        root = Path(directory).expanduser().absolute()
        try:
            layout = json.loads((root / LAYOUT_FILE).read_text())
        except FileNotFoundError:
            raise InvalidArgumentError(
                f"no partitioned stream at {root} (no {LAYOUT_FILE})"
            ) from None
        except (OSError, ValueError) as err:  # unreadable, or not the JSON create wrote
            raise DamagedStorageError(f"{root / LAYOUT_FILE} cannot be read: {err}") from None
        if not isinstance(layout, dict) or not {"name", "partitions", "descriptor"} <= set(layout):
            raise DamagedStorageError(f"{root / LAYOUT_FILE} is not a partitioned stream's layout")
        return cls(root, layout, cluster, create=False, storage_options=storage_options)

    def _owner_arguments(self, k: int) -> tuple[Any, ...]:
        """What partition ``k``'s owner is made with (the same in a thread and an actor)."""
        storage = None if self.storage is None else f"{self.storage}/part-{k}"
        part = str(self.directory / f"part-{k}")
        return (part, self.name, self._descriptor, storage, self._storage_options)

    def _start_owners(self) -> None:
        parts = [self._owner_arguments(k) for k in range(self.partitions)]
        if self._client is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.partitions, thread_name_prefix="tessera-part")
            self._owners = list(self._pool.map(lambda a: PartitionOwner(*a), parts))
            return
        workers = sorted(self._client.scheduler_info()["workers"])
        if not workers:
            raise ClusterError(f"partitioned stream {self.name!r}: the Dask cluster has no workers")
        futures = [
            self._client.submit(
                PartitionOwner,
                *part,
                actor=True,
                workers=[workers[k % len(workers)]],
                pure=False,
            )
            for k, part in enumerate(parts)
        ]
        self._owners = self._wait(futures, "starting the partitions' owners")

    # --- calling the owners ------------------------------------------------------------
    def _wait(self, futures: list[Any], what: str) -> list[Any]:
        """Every future's result; an owner's own error as it is, a lost one as ClusterError."""
        from tesseradb.errors import TesseraError

        results = []
        for k, future in enumerate(futures):
            try:
                results.append(future.result())
            except TesseraError:
                raise
            except Exception as err:
                raise ClusterError(
                    f"partitioned stream {self.name!r}, partition {k}: {what} failed "
                    f"({type(err).__name__}: {err}); its owner is lost. The other partitions "
                    "keep what they committed; reopen the stream to go on"
                ) from None
        return results

    def _each(self, what: str, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``owner.method(*args[k])`` on every owner k, in parallel."""
        if self._client is None:
            futures = [
                self._pool.submit(getattr(owner, method), *a)
                for owner, a in zip(self._owners, args, strict=True)
            ]
        else:
            futures = [
                getattr(owner, method)(*a) for owner, a in zip(self._owners, args, strict=True)
            ]
        return self._wait(futures, what)

    # --- the stream's work --------------------------------------------------------------
    def ingest(self, data: Any) -> int:
        """Deal the records of ``data`` (a pyarrow Table or RecordBatch) to the partitions in
        contiguous runs, each partition's run ingested by its owner; returns how many."""
        import pyarrow as pa

        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise InvalidArgumentError(
                f"partitioned stream {self.name!r}: ingest takes a pyarrow Table or RecordBatch, "
                f"not {type(data).__name__}"
            )
        n = data.num_rows
        if n == 0:
            return 0
        runs: list[tuple[Any, ...]] = [(data.slice(0, 0),) for _ in range(self.partitions)]
        at = 0
        # the longer runs go to the partitions from _next on; the next call starts after them
        sizes = [len(run) for run in shares(range(n), self.partitions)]
        for i, count in enumerate(sizes):
            runs[(self._next + i) % self.partitions] = (data.slice(at, count),)
            at += count
        self._next = (self._next + n % self.partitions) % self.partitions
        return sum(self._each("ingest", "ingest", runs))

    def range(self, columns: Sequence[str] | None = None, **bounds: Any) -> Any:
        """Records with ``lo <= field <= hi`` for each ``field=(lo, hi)``, from every partition."""
        import pyarrow as pa

        cols = None if columns is None else [columns] if isinstance(columns, str) else list(columns)
        parts = self._each("range query", "range", [(cols, bounds)] * self.partitions)
        return pa.concat_tables(parts)

    @property
    def num_records(self) -> int:
        return sum(self.records_per_partition())

    def records_per_partition(self) -> list[int]:
        return list(self._each("counting records", "records", [()] * self.partitions))

    def flush(self) -> None:
        """Every partition's records on disk."""
        self._each("flush", "flush", [()] * self.partitions)

    def close(self) -> None:
        owners, self._owners = self._owners, []
        if owners:
            try:
                self._each_closing(owners)
            finally:
                if self._pool is not None:
                    self._pool.shutdown()
                    self._pool = None

    def _each_closing(self, owners: list[Any]) -> None:
        import contextlib

        for owner in owners:
            with contextlib.suppress(Exception):  # a lost owner has nothing left to close
                done = owner.close()
                if self._client is not None:
                    done.result()

    def __enter__(self) -> PartitionedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "threads" if self._client is None else "Dask actors"
        return f"PartitionedStream({self.name!r}, {self.partitions} partitions on {where})"
