"""An attachment: HDF5 files mapped to tables in place, and their bitmap indexes.

The catalog keeps what was attached (the files, their layout, the options);
nothing is copied and the files are only ever opened read-only. Sidecar
index files live under ``attached/<name>/`` in the database directory. A table's scans
and aggregates are in ``_table.py``.
"""

from __future__ import annotations

import contextlib
import functools
import glob as globlib
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import Lifetime, refuses_when_closed
from tesseradb.attached._bitmap import Binning, BitmapIndex, IndexFileError
from tesseradb.attached._bytes import (
    RemoteBytes,
    RemoteFile,
    opening_identity,
    remote_identity,
    warm_object_headers,
)
from tesseradb.attached._layout import TableLayout, discover
from tesseradb.attached._reader import FileReader
from tesseradb.attached._table import AttachedTable
from tesseradb.checks import Finding, Verified
from tesseradb.errors import AttachedFileError, AttachError, ObjectNotFoundError, TesseraError
from tesseradb.executor import Executor, ExecutorSlot, Threads, default_slot
from tesseradb.storage import Credentials, Location, Storage, is_url, parse_url

if TYPE_CHECKING:
    import numpy as np

    from tesseradb.progress import Tracker

__all__ = ["AttachError", "Attachment", "TableRef", "attach_spec"]

DEFAULT_BATCH_BYTES = 32 << 20  # the paper's finding: about 32 MB per read


def file_identity(path: str) -> dict[str, Any]:
    """What identifies a file's current content: any write changes ctime."""
    st = os.stat(path)
    return {
        "path": path,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "inode": st.st_ino,
    }


def attach_spec(
    pattern: str,
    options: dict[str, Any],
    tracker: Tracker | None = None,
    storage: Storage | None = None,
) -> dict[str, Any]:
    """Inspect the files ``pattern`` names and describe them for the catalog (``tracker``
    counts the files and may cancel: nothing is stored before this returns). An ``s3://``
    pattern names objects in a bucket, read in place with ``storage``'s credentials."""
    is_glob = any(ch in pattern for ch in "*?[")
    if is_url(pattern):
        remote = _remote_files(pattern, is_glob, storage)
        paths = [url for url, _ in remote]
        identities = [identity for _, identity in remote]
    else:
        found_paths = (
            sorted(globlib.glob(os.path.expanduser(pattern)))
            if is_glob
            else [os.path.expanduser(pattern)]
        )
        paths = [os.path.abspath(p) for p in found_paths]
        identities = []
    if not paths:
        raise AttachError(f"no files match {pattern!r}")
    layouts: dict[str, TableLayout] | None = None
    skipped: list[tuple[str, str]] = []
    rows: dict[str, list[int]] = {}
    if tracker is not None:
        tracker.set_total(len(paths))
    for number, path in enumerate(paths):
        if tracker is not None:
            tracker.check()
        if identities:
            found = _inspect_remote(path, identities[number], storage)
        else:
            found = _inspect_local(path)
        if layouts is None:
            layouts = found.tables
            skipped = found.skipped
            if not layouts:
                reasons = "; ".join(f"{p}: {r}" for p, r in skipped[:5]) or "it holds no datasets"
                raise AttachError(f"cannot attach {path}: no table found ({reasons})")
        else:
            _same_layout(paths[0], layouts, path, found.tables)
        for name, layout in found.tables.items():
            rows.setdefault(name, []).append(layout.rows)
        if tracker is not None:
            tracker.advance(1)
    assert layouts is not None
    return {
        "pattern": pattern,
        "glob": is_glob,
        "files": paths,
        "identities": identities or [file_identity(p) for p in paths],
        "tables": {name: t.to_spec() for name, t in layouts.items()},
        "rows": rows,
        "skipped": skipped,
        "options": options,
    }


def _not_hdf5(path: str, magic: bytes) -> AttachError:
    if magic[:3] == b"CDF" and magic[3:4] in (b"\x01", b"\x02", b"\x05"):
        return AttachError(
            f"cannot attach {path}: it is a NetCDF3 (classic) file, not HDF5; "
            "attached files are read in place through HDF5: load it instead "
            "(db.load, tessera load)"
        )
    return AttachError(f"cannot attach {path}: not an HDF5 (or NetCDF4) file")


def _inspect_local(path: str) -> Any:
    import h5py

    if not os.path.exists(path):
        raise AttachError(f"cannot attach {path}: no such file")
    if not h5py.is_hdf5(path):
        magic = b""
        if os.path.isfile(path):
            with contextlib.suppress(OSError), open(path, "rb") as head:
                magic = head.read(4)
        raise _not_hdf5(path, magic)
    try:
        with h5py.File(path, "r") as f:
            return discover(f)
    except OSError as err:
        raise AttachError(f"cannot attach {path}: {err}") from err


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _inspect_remote(url: str, identity: dict[str, Any], storage: Storage | None) -> Any:
    import h5py

    source = _remote_bytes(url, identity, storage)
    source.prefetch()  # (a small file whole, in parallel: its signature's block among them)
    # the signature is at 0, or after a user block of 512, 1024, 2048... bytes
    offsets = [0] + [512 << i for i in range(12) if (512 << i) + 8 <= source.size]
    if not any(source.pread(8, at) == _HDF5_SIGNATURE for at in offsets):
        raise _not_hdf5(url, source.pread(4, 0))
    try:
        with h5py.File(RemoteFile(source), "r") as f:
            warm_object_headers(f, source)
            return discover(f)
    except OSError as err:
        if isinstance(err.__context__, TesseraError):
            raise err.__context__ from None
        raise AttachError(f"cannot attach {url}: {err}") from err


def _remote_files(
    pattern: str, is_glob: bool, storage: Storage | None
) -> list[tuple[str, dict[str, Any]]]:
    """The objects an ``s3://`` name or glob matches, with their identities (one listing
    for a glob, one HEAD for a name)."""
    if storage is None:
        raise AttachError(f"cannot attach {pattern}: object storage needs an open database")
    where = f"db.attach {pattern!r}"
    if not is_glob:
        bucket, key = parse_url(pattern, where)
        root = storage.at(f"s3://{bucket}", where)
        return [(f"{root.url}/{key}", opening_identity(root, key))]
    root, found = storage.matching(pattern, where)
    return [
        (f"{root.url}/{o.path}", {"path": f"{root.url}/{o.path}", "size": o.size, "etag": o.etag})
        for o in found
    ]


def _remote_bytes(url: str, identity: dict[str, Any], storage: Storage | None) -> RemoteBytes:
    if storage is None:
        raise AttachedFileError(f"attached file {url}: object storage needs an open database")
    bucket, key = parse_url(url, f"attached file {url}")
    return RemoteBytes(
        storage.at(f"s3://{bucket}"), key, int(identity["size"]), identity.get("etag")
    )


def _same_layout(
    first: str, expected: dict[str, TableLayout], path: str, found: dict[str, TableLayout]
) -> None:
    if set(expected) != set(found):
        raise AttachError(
            f"cannot attach {path}: its tables {sorted(found)} differ from {first}'s {sorted(expected)}"
        )
    for name, layout in expected.items():
        if layout.signature() != found[name].signature():
            raise AttachError(
                f"cannot attach {path}: table {name} has other columns or types than in {first}"
            )


@dataclass
class _FileState:
    identity: dict[str, Any]
    reader: FileReader | None = None
    plans: dict[str, Any] = field(default_factory=dict)
    # per file version: index identities by dataset, and index candidates by (table, predicate)
    index_ids: dict[str, Any] = field(default_factory=dict)
    candidates: dict[Any, Any] = field(default_factory=dict)


@refuses_when_closed
class Attachment:
    """The files attached under one name, and their tables (``db.attached(name)``)."""

    _lifetime: Lifetime | None = None  # (set by the database that opened it)

    def _check_open(self) -> None:
        if self._lifetime is not None:
            self._lifetime.check(f"attachment {self.name!r}")

    def __init__(
        self,
        name: str,
        spec: dict[str, Any],
        index_dir: Path,
        read_only: bool,
        storage: Storage | None = None,
    ) -> None:
        self.name = name
        self.storage = storage  # reaches the files that are objects in a bucket
        self.spec = spec
        self.index_dir = index_dir
        self.read_only = read_only
        self.files: list[str] = list(spec["files"])
        self.layouts = {n: TableLayout.from_spec(t) for n, t in spec["tables"].items()}
        self.skipped = [tuple(s) for s in spec.get("skipped", [])]
        options = spec.get("options", {})
        self.threads = int(options.get("threads") or os.cpu_count() or 1)
        self.batch_bytes = int(options.get("batch_bytes") or DEFAULT_BATCH_BYTES)
        self.stale_index = options.get("stale_index", "rebuild")
        self._states = [_FileState(dict(i)) for i in spec["identities"]]
        self._tables: dict[str, AttachedTable] = {}
        self._lock = threading.RLock()
        self._holds = 0
        self._bytes_read = 0
        self._indexes: dict[tuple[str, str, int], BitmapIndex] = {}
        self.index_specs: dict[str, dict[str, Any]] = dict(spec.get("indexes", {}))
        self.executors: ExecutorSlot = default_slot()  # the database's, set by the kind

    def executor(self) -> Executor:
        """Where this attachment's tasks run: the database's cluster, or this process's
        threads (as many as the attachment's ``threads`` option)."""
        executor = self.executors.current
        return executor if executor.remote else Threads(max(self.threads, 1))

    def ref(self, table: str) -> TableRef:
        """A picklable handle on ``table`` that a Dask worker opens read-only itself."""
        import json

        credentials = self.storage.credentials if self._remote() else None
        return TableRef(self.name, json.dumps(self.spec), str(self.index_dir), table, credentials)

    def _remote(self) -> bool:
        return any(is_url(f) for f in self.files)

    # --- files ------------------------------------------------------------------------
    @contextmanager
    def hold(self) -> Iterator[None]:
        """Keep the files open for the block (a statement, an index build).

        Files are open only while something holds them: HDF5 will not let
        anyone write a file another handle has open, and scientists append to
        their files between queries. What is costly to learn about a file (its
        chunk maps) is kept while the file is unchanged.
        """
        with self._lock:
            self._holds += 1
        try:
            yield
        finally:
            with self._lock:
                self._holds -= 1
                if self._holds == 0:
                    for state in self._states:
                        if state.reader is not None:
                            self._bytes_read += state.reader.bytes_read
                            state.reader.close()
                            state.reader = None

    @property
    def bytes_read(self) -> int:
        """Bytes read from the attached files since the attachment was opened."""
        with self._lock:
            return self._bytes_read + sum(
                s.reader.bytes_read for s in self._states if s.reader is not None
            )

    @property
    def file_bytes(self) -> int:
        """The attached files' total size."""
        if self._remote():
            return sum(int(s.identity.get("size", 0)) for s in self._states)
        return sum(os.stat(p).st_size for p in self.files)

    def reader(self, file_no: int) -> FileReader:
        """The open reader of one file; call it within :meth:`hold`."""
        with self._lock:
            state = self._states[file_no]
            if state.reader is not None:
                return state.reader  # unchanged for the whole hold: a consistent view
            path = self.files[file_no]
            try:
                current = self._identity(path)
            except FileNotFoundError as err:
                raise AttachedFileError(
                    f"attached file {path} (of {self.name}) no longer exists"
                ) from err
            changed = current != state.identity or not state.plans
            if current != state.identity:
                state.plans, state.index_ids, state.candidates = {}, {}, {}
                state.identity = current
            remote = _remote_bytes(path, current, self.storage) if is_url(path) else None
            reader = FileReader(path, state.plans, remote)
            if changed:  # a new version of the file: it must still hold what was attached
                try:
                    self._check_layout(file_no, reader)
                except BaseException:
                    reader.close()
                    raise
            state.reader = reader
            return reader

    def _identity(self, path: str) -> dict[str, Any]:
        """The file's identity now: a stat, or one HEAD request for an object in a bucket
        (its entity tag pins every later read of this hold to this version)."""
        if not is_url(path):
            return file_identity(path)
        if self.storage is None:
            raise AttachedFileError(f"attached file {path}: object storage needs an open database")
        bucket, key = parse_url(path, f"attached file {path}")
        return remote_identity(self.storage.at(f"s3://{bucket}"), key)

    def _check_layout(self, file_no: int, reader: FileReader) -> None:
        """A changed file must still hold the attached columns; row counts may change."""
        for layout in self.layouts.values():
            for col in layout.columns:
                if col.dataset not in reader.h5:
                    raise AttachedFileError(
                        f"attached file {self.files[file_no]} no longer has {col.dataset} (table {self.name}.{layout.name})"
                    )

    def rows(self, table: str, file_no: int) -> int:
        with self.hold():
            return self._rows(table, file_no)

    def _rows(self, table: str, file_no: int) -> int:
        layout = self.layouts[table]
        reader = self.reader(file_no)
        if layout.kind == "array":
            shape = reader.dataset(layout.path).shape
            total = 1
            for n in shape:
                total *= n
            return total
        return reader.plan(layout.columns[0].dataset).length

    def close(self) -> None:
        with self._lock:
            for state in self._states:
                if state.reader is not None:
                    state.reader.close()
                    state.reader = None

    # --- tables -----------------------------------------------------------------------
    def table(self, name: str) -> AttachedTable:
        if not isinstance(name, str):
            raise AttachError(f"{self.name}: a table is named by a str, not {type(name).__name__}")
        if name not in self.layouts:
            import difflib

            close = difflib.get_close_matches(name, list(self.layouts), n=3)
            hint = (
                f"; did you mean {', '.join(repr(f'{self.name}.{c}') for c in close)}?"
                if close
                else ""
            )
            raise ObjectNotFoundError(f"{self.name} has no table {name!r}{hint}", close)
        with self._lock:
            if name not in self._tables:
                self._tables[name] = AttachedTable(self, self.layouts[name])
            return self._tables[name]

    def tables(self) -> list[str]:
        return sorted(self.layouts)

    def read(
        self, path: str, box: Sequence[slice | int] | None = None, file: int = 0
    ) -> np.ndarray:
        """A slab of an N-D (or any) dataset as numpy: ``read('/grid/t', (slice(0, 10), 5))``."""
        if not isinstance(path, str):
            raise AttachError(f"{self.name}: a dataset path is a str, not {type(path).__name__}")
        if not isinstance(file, int) or isinstance(file, bool) or not 0 <= file < len(self.files):
            raise AttachError(
                f"{self.name}: file is the number of an attached file, 0 to {len(self.files) - 1}, "
                f"not {file!r}"
            )
        with self.hold():
            try:
                ds = self.reader(file).dataset(path)
            except (KeyError, TypeError, ValueError):
                raise AttachError(
                    f"{self.name}: {self.files[file]} has no dataset {path!r}"
                ) from None
            try:
                return ds[tuple(box)] if box is not None else ds[()]
            except (TypeError, ValueError, IndexError) as err:
                raise AttachError(
                    f"{self.name}: box {box!r} does not select from {path} (shape {ds.shape}): {err}"
                ) from None

    # --- indexes ----------------------------------------------------------------------
    def index_path(self, table: str, column: str, file_no: int) -> Path:
        return self.index_dir / self._index_name(table, column, file_no)

    @staticmethod
    def _index_name(table: str, column: str, file_no: int) -> str:
        return f"{table}.{column}.{file_no}.bmi"

    def _index_location(self) -> Location | None:
        """Where the sidecar indexes are when not in ``index_dir``: the database's storage."""
        url = self.spec.get("index_location")
        if not url or self.storage is None:
            return None
        return self.storage.at(url)

    def _save_index(self, table: str, column: str, file_no: int, index: BitmapIndex) -> None:
        remote = self._index_location()
        if remote is None:
            index.save(self.index_path(table, column, file_no))
        else:  # (one PUT: whole or absent)
            remote.write(self._index_name(table, column, file_no), index.to_bytes())

    def _load_index(self, table: str, column: str, file_no: int) -> BitmapIndex:
        """The saved index (FileNotFoundError when there is none, IndexFileError when it is
        torn, corrupt or foreign)."""
        remote = self._index_location()
        if remote is None:
            return BitmapIndex.load(self.index_path(table, column, file_no))
        name = self._index_name(table, column, file_no)
        # (a missing one is a StoredObjectMissingError: a FileNotFoundError, as on disk)
        return BitmapIndex.from_bytes(remote.read(name), f"{remote.url}/{name}")

    def create_index(
        self,
        table: str,
        columns: Sequence[str],
        binning: Binning,
        encoding: str,
        threads: int | None = None,
        tracker: Tracker | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Build bitmap indexes on ``columns`` of ``table``, one task per (column, file), in
        parallel; ``tracker`` counts the tasks and may cancel them. Every index is built
        before any is saved, so a cancelled or failed build leaves the old indexes."""
        if not isinstance(table, str):
            raise AttachError(f"{self.name}: a table is named by a str, not {type(table).__name__}")
        layout = self.layouts[table] if table in self.layouts else self.table(table).layout
        if layout.kind == "array":
            raise AttachError(
                f"bitmap indexes are built on table columns; {self.name}.{table} is an N-D dataset"
            )
        sources = {c.name.lower(): c for c in layout.columns}
        for column in columns:
            if column.lower() not in sources:
                raise ObjectNotFoundError(f"{self.name}.{table} has no column {column!r}")
        tasks = [(sources[c.lower()].name, f) for c in columns for f in range(len(self.files))]
        if tracker is not None:
            tracker.set_total(len(tasks))

        executor = self.executor()
        what = f"index build on {self.name}.{table}"
        if executor.remote:
            # each worker reads its file's column and returns the index; progress and
            # cancel follow the results (a task on a worker is not interrupted)
            task = functools.partial(_build_on_worker, self.ref(table), binning, encoding)
            built = []
            for index in executor.stream(task, tasks, what=what):
                if tracker is not None:
                    tracker.check()
                    tracker.advance(1)
                built.append(index)
        else:

            def build(task: tuple[str, int]) -> BitmapIndex:
                if tracker is not None:
                    tracker.check()
                index = self._build_index(table, task[0], task[1], binning, encoding)
                if tracker is not None:
                    tracker.advance(1)
                return index

            with self.hold():
                run = Threads(threads) if threads else executor
                built = run.map(build, tasks, what=what)
        for (column, file_no), index in zip(tasks, built, strict=True):
            if not self.read_only:
                self._save_index(table, column, file_no, index)
            with self._lock:
                self._indexes[(table, column, file_no)] = index
        for column in columns:
            name = sources[column.lower()].name
            self.index_specs[f"{table}.{name}"] = {
                "binning": binning.to_spec(),
                "encoding": encoding,
            }
        for state in self._states:
            state.candidates = {}  # answers computed without these indexes
        return self.index_specs

    def _build_index(
        self, table: str, column: str, file_no: int, binning: Binning, encoding: str
    ) -> BitmapIndex:
        source = next(c for c in self.layouts[table].columns if c.name == column)
        reader = self.reader(file_no)
        plan = reader.plan(source.dataset)
        values = reader.read_range(source.dataset, 0, plan.length)
        if source.field:
            values = values[source.field]
        identity = self._index_identity(file_no, source.dataset)
        return BitmapIndex.build(column, values, binning, encoding, identity)

    def _rebuild_index(
        self, table: str, column: str, file_no: int, binning: Binning, encoding: str
    ) -> BitmapIndex:
        """One index built, saved beside the file and kept (a stale or damaged one's repair)."""
        index = self._build_index(table, column, file_no, binning, encoding)
        if not self.read_only:
            self._save_index(table, column, file_no, index)
        with self._lock:
            self._indexes[(table, column, file_no)] = index
        return index

    def _index_identity(self, file_no: int, dataset: str) -> dict[str, Any]:
        reader = self.reader(file_no)
        state = self._states[file_no]
        cached = state.index_ids.get(dataset)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        plan = reader.plan(dataset)
        with self._lock:
            file_id = dict(self._states[file_no].identity)
        storage: list[Any] = [plan.contiguous_offset]
        if plan.chunk_rows:
            storage = [
                int(plan.chunk_offsets.sum()),
                int(plan.chunk_sizes.sum()),
                len(plan.chunk_starts),
            ]
        identity = {
            "file": file_id,
            "dataset": dataset,
            "length": plan.length,
            "dtype": str(plan.dtype),
            "storage": storage,
        }
        state.index_ids[dataset] = identity
        return identity

    def index(self, table: str, column: str, file_no: int) -> BitmapIndex | None:
        """A fresh index for (table, column, file), or None (no index, or stale and bypassed).

        A stale index (the file changed since it was built) is rebuilt, or
        bypassed if the attachment says so; a corrupt or foreign sidecar is
        rebuilt. An index is never used against data it was not built from.
        """
        key = f"{table}.{column}"
        if key not in self.index_specs:
            return None
        with self.hold():
            return self._fresh_index(table, column, file_no, key)

    def _fresh_index(self, table: str, column: str, file_no: int, key: str) -> BitmapIndex | None:
        source = next(c for c in self.layouts[table].columns if c.name == column)
        current = self._index_identity(file_no, source.dataset)
        with self._lock:
            index = self._indexes.get((table, column, file_no))
        if index is None:
            try:
                index = self._load_index(table, column, file_no)
            except (OSError, IndexFileError):
                index = None  # missing, torn or foreign: rebuild below
        if index is not None and index.identity == current and index.column == column:
            with self._lock:
                self._indexes[(table, column, file_no)] = index
            return index
        if index is not None and self.stale_index == "bypass":
            return None
        spec = self.index_specs[key]
        binning = Binning.from_spec(spec["binning"])
        return self._rebuild_index(table, column, file_no, binning, spec["encoding"])

    # --- checking -------------------------------------------------------------------
    def check(self, repair: bool) -> tuple[list[Finding], Verified]:
        """Findings about the attached files and the sidecar indexes; ``repair`` rebuilds
        missing or unreadable indexes (the attached files are never written)."""
        findings: list[Finding] = []
        files_ok = indexes_ok = stale = 0
        for file_no, path in enumerate(self.files):
            try:
                with self.hold():
                    for table in self.layouts:
                        self._rows(table, file_no)  # opens the file and checks its layout
            except (TesseraError, OSError) as err:
                findings.append(Finding(self.name, f"file {path}", str(err)))
                continue
            files_ok += 1
            for key, spec in self.index_specs.items():
                table, column = key.split(".", 1)
                index_path = self.index_path(table, column, file_no)
                try:
                    index = self._load_index(table, column, file_no)
                except FileNotFoundError:
                    problem = "is missing"
                except (OSError, IndexFileError) as err:
                    problem = f"cannot be read ({err})"
                else:
                    source = next(c for c in self.layouts[table].columns if c.name == column)
                    with self.hold():
                        current = self._index_identity(file_no, source.dataset)
                    if index.identity != current or index.column != column:
                        stale += 1  # the file changed since: rebuilt when next used
                    indexes_ok += 1
                    continue
                if repair:
                    binning = Binning.from_spec(spec["binning"])
                    with self.hold():
                        self._rebuild_index(table, column, file_no, binning, spec["encoding"])
                findings.append(
                    Finding(
                        self.name,
                        f"index of {key} for file {file_no} ({index_path.name})",
                        problem,
                        action="rebuilt from the file" if repair else "",
                        repaired=repair,
                    )
                )
        what = f"{files_ok} of {len(self.files)} file(s) readable, {indexes_ok} index file(s) whole"
        if stale:
            what += f" ({stale} built from an older version of their file, rebuilt when next used)"
        return findings, Verified(self.name, "attachment", what)


@dataclass(frozen=True)
class TableRef:
    """A table of an attachment as a task on a Dask worker reaches it: by its catalog spec."""

    name: str
    spec: str  # the attachment's catalog spec, as JSON
    index_dir: str
    table: str
    credentials: Credentials | None = None  # for files in a bucket: the worker opens them

    def open(self) -> AttachedTable:
        """The table, from an attachment opened read-only once per worker process."""
        import json

        key = (self.name, self.spec, self.index_dir)
        with _WORKER_LOCK:
            attachment = _WORKER_ATTACHMENTS.get(key)
            if attachment is None:
                if len(_WORKER_ATTACHMENTS) > 64:
                    _WORKER_ATTACHMENTS.clear()
                storage = None
                if self.credentials is not None:
                    storage = Storage.with_credentials(self.credentials)
                attachment = Attachment(
                    self.name, json.loads(self.spec), Path(self.index_dir), True, storage
                )
                _WORKER_ATTACHMENTS[key] = attachment
        return attachment.table(self.table)


_WORKER_ATTACHMENTS: dict[tuple[str, str, str], Attachment] = {}
_WORKER_LOCK = threading.Lock()


def _build_on_worker(
    ref: TableRef, binning: Binning, encoding: str, task: tuple[str, int]
) -> BitmapIndex:
    """One (column, file) bitmap index, built by a Dask worker and returned to be saved."""
    table = ref.open()
    with table.attachment.hold():
        return table.attachment._build_index(ref.table, task[0], task[1], binning, encoding)
