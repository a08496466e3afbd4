"""An attachment: HDF5 files mapped to tables in place, their scans and their bitmap indexes.

The catalog keeps what was attached (the files, their layout, the options);
nothing is copied and the files are only ever opened read-only. Sidecar
index files live under ``attached/<name>/`` in the database directory.
"""

from __future__ import annotations

import contextlib
import functools
import glob as globlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import Lifetime, refuses_when_closed
from tesseradb.attached._bitmap import Binning, BitmapIndex, IndexFileError
from tesseradb.attached._layout import TableLayout, discover, to_arrow_type
from tesseradb.attached._reader import AttachedFileError, FileReader, to_arrow
from tesseradb.checks import Finding, Verified
from tesseradb.errors import AttachError, ObjectNotFoundError, TesseraError
from tesseradb.executor import Executor, ExecutorSlot, Threads, default_slot
from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import Estimate

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyroaring import BitMap

    from tesseradb.progress import Tracker

__all__ = ["AttachError", "AttachedTable", "Attachment", "attach_spec"]

FILE_COLUMN = "_file"
DEFAULT_BATCH_BYTES = 32 << 20  # the paper's finding: about 32 MB per read
INDEX_SCAN_FRACTION = 0.25  # above this share of candidate rows, a full scan is cheaper
# Once an index has narrowed the rows, one whose bins hold more than this share of
# the file is not worth its bitmap work: the raw values of the few rows read are checked.
INDEX_SKIP_FRACTION = 0.05
# Candidate rows that fill at least this share of the span they lie in are read as that span.
DENSE_SPAN = 0.5
DENSE_MIN_ROWS = 1 << 16  # below this, reading the rows chunk by chunk costs as little


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
    pattern: str, options: dict[str, Any], tracker: Tracker | None = None
) -> dict[str, Any]:
    """Inspect the files ``pattern`` names and describe them for the catalog (``tracker``
    counts the files and may cancel: nothing is stored before this returns)."""
    import h5py

    is_glob = any(ch in pattern for ch in "*?[")
    paths = (
        sorted(globlib.glob(os.path.expanduser(pattern)))
        if is_glob
        else [os.path.expanduser(pattern)]
    )
    paths = [os.path.abspath(p) for p in paths]
    if not paths:
        raise AttachError(f"no files match {pattern!r}")
    layouts: dict[str, TableLayout] | None = None
    skipped: list[tuple[str, str]] = []
    rows: dict[str, list[int]] = {}
    if tracker is not None:
        tracker.set_total(len(paths))
    for path in paths:
        if tracker is not None:
            tracker.check()
        if not os.path.exists(path):
            raise AttachError(f"cannot attach {path}: no such file")
        if not h5py.is_hdf5(path):
            magic = b""
            if os.path.isfile(path):
                with contextlib.suppress(OSError), open(path, "rb") as head:
                    magic = head.read(4)
            if magic[:3] == b"CDF" and magic[3:] in (b"\x01", b"\x02", b"\x05"):
                raise AttachError(
                    f"cannot attach {path}: it is a NetCDF3 (classic) file, not HDF5; "
                    "attached files are read in place through HDF5: load it instead "
                    "(db.load, tessera load)"
                )
            raise AttachError(f"cannot attach {path}: not an HDF5 (or NetCDF4) file")
        try:
            with h5py.File(path, "r") as f:
                found = discover(f)
        except OSError as err:
            raise AttachError(f"cannot attach {path}: {err}") from err
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
        "identities": [file_identity(p) for p in paths],
        "tables": {name: t.to_spec() for name, t in layouts.items()},
        "rows": rows,
        "skipped": skipped,
        "options": options,
    }


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

    def __init__(self, name: str, spec: dict[str, Any], index_dir: Path, read_only: bool) -> None:
        self.name = name
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

    def ref(self, table: str) -> _TableRef:
        """A picklable handle on ``table`` that a Dask worker opens read-only itself."""
        import json

        return _TableRef(self.name, json.dumps(self.spec), str(self.index_dir), table)

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
        return sum(os.stat(p).st_size for p in self.files)

    def reader(self, file_no: int) -> FileReader:
        """The open reader of one file; call it within :meth:`hold`."""
        with self._lock:
            state = self._states[file_no]
            if state.reader is not None:
                return state.reader  # unchanged for the whole hold: a consistent view
            path = self.files[file_no]
            try:
                current = file_identity(path)
            except FileNotFoundError as err:
                raise AttachedFileError(
                    f"attached file {path} (of {self.name}) no longer exists"
                ) from err
            changed = current != state.identity or not state.plans
            if current != state.identity:
                state.plans, state.index_ids, state.candidates = {}, {}, {}
                state.identity = current
            reader = FileReader(path, state.plans)
            if changed:  # a new version of the file: it must still hold what was attached
                try:
                    self._check_layout(file_no, reader)
                except BaseException:
                    reader.close()
                    raise
            state.reader = reader
            return reader

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
        return self.index_dir / f"{table}.{column}.{file_no}.bmi"

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
                index.save(self.index_path(table, column, file_no))
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
            index.save(self.index_path(table, column, file_no))
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
            path = self.index_path(table, column, file_no)
            try:
                index = BitmapIndex.load(path)
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
                    index = BitmapIndex.load(index_path)
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


@refuses_when_closed
class AttachedTable:
    """One table of an attachment, as a relation (``ptf.candidate``)."""

    def _check_open(self) -> None:
        self.attachment._check_open()

    def __init__(self, attachment: Attachment, layout: TableLayout) -> None:
        self.attachment = attachment
        self.layout = layout
        self.name = f"{attachment.name}.{layout.name}"
        self.multi_file = attachment.spec.get("glob", False)
        self._schema: pa.Schema | None = None

    def session(self) -> Any:
        """Held by the SQL engine for a whole statement: the files stay open."""
        return self.attachment.hold()

    def schema(self) -> pa.Schema:
        if self._schema is None:
            self._schema = self._make_schema()
        return self._schema

    def _make_schema(self) -> pa.Schema:
        import pyarrow as pa

        fields = [pa.field(c.name, to_arrow_type(c.arrow)) for c in self.layout.columns]
        if self.multi_file:
            fields.append(pa.field(FILE_COLUMN, pa.string()))
        return pa.schema(fields)

    # --- planning -----------------------------------------------------------------------
    def _files(self, predicate: Predicate | None) -> list[int]:
        files = list(range(len(self.attachment.files)))
        if predicate is not None and self.multi_file:
            dom = predicate.domain(FILE_COLUMN)
            if dom is not None:
                files = [
                    f for f in files if dom.contains(os.path.basename(self.attachment.files[f]))
                ]
        return files

    def candidates(
        self, file_no: int, predicate: Predicate | None
    ) -> tuple[BitMap | None, list[str]]:
        """Rows of one file that may match, from the bitmap indexes (None: scan the whole file).

        The indexes of the predicate's columns are consulted from the most
        selective (by their bins' sizes, no bitmap work) on; a column whose
        bins hold many rows is left to the check of the raw values on the
        few rows read. Answers are kept for the file's current version.
        """
        if predicate is None or self.layout.kind == "array":
            return None, []
        att = self.attachment
        with att.hold():
            att.reader(file_no)  # brings the file's state up to date (a change drops the cache)
            cache = att._states[file_no].candidates
            key = (self.layout.name, predicate)
            if key in cache:
                return cache[key]  # type: ignore[no-any-return]
            found = []
            for col in self.layout.columns:
                dom = predicate.domain(col.name)
                if dom is None:
                    continue
                index = att.index(self.layout.name, col.name, file_no)
                if index is not None:
                    found.append((index.estimate(dom), col.name, index, dom))
            found.sort(key=lambda item: item[0])
            result, used = None, []
            if found and found[0][0] <= INDEX_SCAN_FRACTION * found[0][2].rows:
                for estimate, name, index, dom in found:
                    if result is not None and estimate > INDEX_SKIP_FRACTION * index.rows:
                        break
                    sure, maybe = index.lookup(dom)
                    rows = sure | maybe
                    result = rows if result is None else result & rows
                    used.append(name)
            if len(cache) > 256:
                cache.clear()
            cache[key] = (result, used)
            return result, used

    def count(self, predicate: Predicate | None) -> int | None:
        """The number of rows matching ``predicate`` if the indexes settle it, else None.

        Settled means: every column the predicate names has a fresh index on
        every file, and the rows the indexes leave are all sure (no edge-bin
        rows that would need their raw values checked). No data is read.
        """
        if self.layout.kind == "array":
            return None
        if predicate is None or predicate.is_true:
            return sum(self.attachment.rows(self.layout.name, f) for f in self._files(None))
        if predicate.is_false:
            return 0
        columns = {c.name.lower(): c.name for c in self.layout.columns}
        if any(name.lower() not in columns and name.lower() != FILE_COLUMN for name in predicate):
            return None
        total = 0
        with self.attachment.hold():
            for f in self._files(predicate):
                sure_rows = maybe_rows = None
                for name in predicate:
                    if name.lower() == FILE_COLUMN:
                        continue  # settled by the choice of files
                    index = self.attachment.index(self.layout.name, columns[name.lower()], f)
                    if index is None:
                        return None
                    sure, maybe = index.lookup(predicate[name])
                    both = sure | maybe
                    sure_rows = sure if sure_rows is None else sure_rows & sure
                    maybe_rows = both if maybe_rows is None else maybe_rows & both
                if sure_rows is None or maybe_rows is None:
                    total += self.attachment.rows(self.layout.name, f)
                    continue
                if len(maybe_rows) != len(sure_rows):
                    return None  # some rows need their values checked: let the scan do it
                total += len(sure_rows)
        return total

    def estimate(self, predicate: Predicate | None = None) -> Estimate:
        if predicate is not None and predicate.is_false:
            return Estimate(0, 0)
        with self.attachment.hold():
            return self._estimate(predicate)

    def _estimate(self, predicate: Predicate | None) -> Estimate:
        rows = 0
        for f in self._files(predicate):
            cand, _ = self.candidates(f, predicate)
            rows += len(cand) if cand is not None else self.attachment.rows(self.layout.name, f)
        width = sum(_width(c.dtype) for c in self.layout.columns)
        return Estimate(rows, rows * width)

    def describe_scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> list[str]:
        with self.attachment.hold():
            return self._describe(columns, predicate)

    def _describe(self, columns: Sequence[str] | None, predicate: Predicate | None) -> list[str]:
        lines = []
        files = self._files(predicate)
        wanted = self._wanted(columns)
        width = sum(_width(c.dtype) for c in self.layout.columns if c.name in wanted)
        for f in files:
            total = self.attachment.rows(self.layout.name, f)
            cand, used = self.candidates(f, predicate)
            if cand is not None and len(cand) <= INDEX_SCAN_FRACTION * total:
                lines.append(
                    f"file {os.path.basename(self.attachment.files[f])}: index read of {len(cand):,} of {total:,} rows "
                    f"(bitmap indexes on {', '.join(used)}), about {len(cand) * width:,} bytes"
                )
            else:
                why = (
                    f" ({len(cand):,} candidate rows from the indexes is too many)"
                    if cand is not None
                    else ""
                )
                lines.append(
                    f"file {os.path.basename(self.attachment.files[f])}: full scan of {total:,} rows{why}, "
                    f"{len(wanted)} of {len(self.layout.columns)} columns, about {total * width:,} bytes, "
                    f"{self.attachment.threads} threads"
                )
        return lines

    def _wanted(self, columns: Sequence[str] | None) -> list[str]:
        names = [c.name for c in self.layout.columns]
        if columns is None:
            return names + ([FILE_COLUMN] if self.multi_file else [])
        lower = {n.lower(): n for n in [*names, FILE_COLUMN]}
        return [lower[c.lower()] for c in columns]

    # --- scanning -----------------------------------------------------------------------
    def scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> pa.RecordBatchReader:
        import pyarrow as pa

        wanted = self._wanted(columns)
        schema = pa.schema([self.schema().field(c) for c in wanted])
        if predicate is not None and predicate.is_false:
            return pa.RecordBatchReader.from_batches(schema, iter(()))
        return pa.RecordBatchReader.from_batches(schema, self._held_run(wanted, predicate, schema))

    def _held_run(
        self, wanted: list[str], predicate: Predicate | None, schema: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        with self.attachment.hold():
            yield from self._run(self._tasks(wanted, predicate), wanted, predicate, schema)

    def _tasks(self, wanted: list[str], predicate: Predicate | None) -> Iterator[tuple[int, Any]]:
        """Units of work: (file, (start, stop)) ranges, or (file, rows) from the indexes."""
        import numpy as np

        att = self.attachment
        workers = max(att.executor().workers, 1)  # threads here, or the cluster's
        width = max(sum(_width(c.dtype) for c in self.layout.columns if c.name in wanted), 1)
        for f in self._files(predicate):
            total = att.rows(self.layout.name, f)
            cand, _ = self.candidates(f, predicate)
            if self.layout.kind == "array":
                step = self._array_step(f, width)
                for start in range(0, att.reader(f).dataset(self.layout.path).shape[0], step):
                    yield f, ("slab", start, start + step)
                continue
            if cand is not None and len(cand) <= INDEX_SCAN_FRACTION * total:
                rows = np.frombuffer(cand.to_array(), dtype=np.uint32).astype(np.int64)
                per_batch = max(att.batch_bytes // width, 1024)
                lo, hi = (int(rows[0]), int(rows[-1]) + 1) if len(rows) else (0, 0)
                if len(rows) >= DENSE_MIN_ROWS and len(rows) >= DENSE_SPAN * (hi - lo):
                    # the candidates fill most of their span (ids that grow with time):
                    # read the span in whole runs and let the predicate filter it
                    step = min(per_batch, max(-(-(hi - lo) // workers), 1))
                    for a in range(lo, hi, step):
                        yield f, (a, min(a + step, hi))
                    continue
                for a in range(0, len(rows), per_batch):
                    yield f, rows[a : a + per_batch]
                continue
            chunk = self._chunk_rows(f)
            per_batch = max(att.batch_bytes // width // chunk, 1) * chunk
            # at least one batch per thread, so that every thread has work
            per_batch = min(per_batch, max(chunk, -(-total // workers) // chunk * chunk or chunk))
            for start in range(0, total, per_batch):
                yield f, (start, min(start + per_batch, total))

    def _chunk_rows(self, file_no: int) -> int:
        reader = self.attachment.reader(file_no)
        plan = reader.plan(self.layout.columns[0].dataset)
        return plan.chunk_rows or 65536

    def _array_step(self, file_no: int, width: int) -> int:
        ds = self.attachment.reader(file_no).dataset(self.layout.path)
        per_row = 1
        for n in ds.shape[1:]:
            per_row *= n
        return max(self.attachment.batch_bytes // max(per_row * width, 1), 1)

    def _run(
        self,
        tasks: Iterator[tuple[int, Any]],
        wanted: list[str],
        predicate: Predicate | None,
        schema: pa.Schema,
    ) -> Iterator[pa.RecordBatch]:
        # ordered results with a bounded window of work in flight
        for batch in self.attachment.executor().stream(
            self._unit_task(wanted, predicate, schema), tasks, what=f"scan of {self.name}"
        ):
            if batch is not None and batch.num_rows:
                yield batch

    def _unit_task(
        self, wanted: list[str], predicate: Predicate | None, schema: pa.Schema
    ) -> Callable[[tuple[int, Any]], pa.RecordBatch | None]:
        """The task reading one unit of work: a method here, a picklable handle on a cluster."""
        if self.attachment.executors.current.remote:
            ref = self.attachment.ref(self.layout.name)
            return functools.partial(_scan_on_worker, ref, wanted, predicate, schema)
        return lambda unit: self._task(unit[0], unit[1], wanted, predicate, schema)

    # --- native aggregates ---------------------------------------------------------------
    def aggregate(
        self,
        items: Sequence[tuple[str, str, str | None]],
        group_by: Sequence[str],
        predicate: Predicate | None,
        ambiguous: Mapping[str, Sequence[float]],
    ) -> pa.Table | None:
        """``count``, ``sum``, ``avg``, ``min`` and ``max`` of the matching rows, without SQL.

        The scan's units of work (a file's row range, or the rows its
        indexes leave) each fold their rows into partial aggregates, in
        parallel threads or on the Dask workers; the client combines them
        (SDS/Q's partial aggregates). None (run the statement as SQL) for
        grouping, N-D datasets, text columns, other functions, or a row
        holding one of the predicate's ``ambiguous`` values.
        """
        import pyarrow as pa

        from tesseradb.sql.partials import Partials, answerable

        if group_by or self.layout.kind == "array":
            return None
        schema = self.schema()
        lower = {n.lower(): n for n in schema.names if n != FILE_COLUMN}
        wanted = answerable(items, schema, hidden=[FILE_COLUMN])
        if wanted is None:
            return None
        points: dict[str, list[float]] = {}
        for column, values in ambiguous.items():
            if column.lower() not in lower:
                return None
            points[lower[column.lower()]] = [float(v) for v in values]
        columns = list(dict.fromkeys(c for _, _, c in wanted if c is not None))
        needed = list(dict.fromkeys([*columns, *points])) or [self.layout.columns[0].name]
        read_schema = pa.schema([schema.field(c) for c in needed])
        total = Partials(columns)
        if predicate is None or not predicate.is_false:
            fold = functools.partial(_fold_unit, self._unit_task(needed, predicate, read_schema))
            with self.attachment.hold():
                units = list(self._tasks(needed, predicate))
                parts = self.attachment.executor().map(
                    fold,
                    [(unit, columns, points) for unit in units],
                    what=f"aggregate of {self.name}",
                )
            for part in parts:
                if part is None:
                    return None  # a NULL, or a row holding an ambiguous value: SQL decides
                total.merge(part)
        return pa.Table.from_arrays(
            [total.result(fn, c, schema) for _, fn, c in wanted], names=[o for o, _, _ in wanted]
        )

    def _task(
        self,
        file_no: int,
        unit: Any,
        wanted: list[str],
        predicate: Predicate | None,
        schema: pa.Schema,
    ) -> pa.RecordBatch | None:
        if isinstance(unit, tuple) and unit and unit[0] == "slab":
            return self._array_task(file_no, unit[1], unit[2], wanted, predicate, schema)
        import numpy as np
        import pyarrow as pa

        reader = self.attachment.reader(file_no)
        sources = {c.name: c for c in self.layout.columns}
        filter_cols = [
            c for c in sources if predicate is not None and predicate.domain(c) is not None
        ]
        arrays: dict[str, pa.Array] = {}

        def read(name: str, rows: np.ndarray | None) -> pa.Array:
            src = sources[name]
            if rows is None:
                values = reader.read_range(src.dataset, unit[0], unit[1])
            else:
                values = reader.read_rows(src.dataset, rows)
            if src.field:
                values = values[src.field]
            return to_arrow(values, src.arrow)

        rows = None if isinstance(unit, tuple) else unit
        n = (unit[1] - unit[0]) if rows is None else len(rows)
        keep = None
        if filter_cols:
            for name in filter_cols:
                arrays[name] = read(name, rows)
            mask = predicate.mask(pa.table(arrays))  # type: ignore[union-attr]
            if mask is not None:
                keep = np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
                if not keep.any():
                    return None
                if keep.all():
                    keep = None  # every row passes: nothing to filter
                    mask = None
            if mask is not None and keep is not None:
                offsets = np.flatnonzero(keep)
                selected = (offsets + unit[0]) if rows is None else rows[offsets]
                keep_mask = pa.array(keep)
                arrays = {k: v.filter(keep_mask) for k, v in arrays.items()}
                n = len(offsets)
                # late materialisation: read the other columns for the matching rows only
                if len(offsets) < 0.25 * len(keep):
                    rows = selected
                    keep = None
        out = []
        for name in wanted:
            if name == FILE_COLUMN:
                out.append(_constant_string(os.path.basename(self.attachment.files[file_no]), n))
                continue
            if name not in arrays:
                array = read(name, rows)
                if keep is not None:
                    array = array.filter(keep_mask)
                arrays[name] = array
            out.append(arrays[name])
        return pa.RecordBatch.from_arrays(out, schema=schema)

    def _array_task(
        self,
        file_no: int,
        start: int,
        stop: int,
        wanted: list[str],
        predicate: Predicate | None,
        schema: pa.Schema,
    ) -> pa.RecordBatch | None:
        """A slab of an N-D dataset along its first axis, with its dimension columns."""
        import numpy as np
        import pyarrow as pa

        reader = self.attachment.reader(file_no)
        ds = reader.dataset(self.layout.path)
        stop = min(stop, ds.shape[0])
        box: list[slice] = []
        coords: list[np.ndarray] = []
        for col in self.layout.columns[:-1]:
            axis = col.dim or 0
            lo, hi = (start, stop) if axis == 0 else (0, ds.shape[axis])
            index = np.arange(lo, hi)
            values = reader.dataset(col.scale)[lo:hi] if col.scale else index
            dom = predicate.domain(col.name) if predicate is not None else None
            if dom is not None:
                inside = np.flatnonzero(
                    np.asarray(
                        predicate.mask(pa.table({col.name: values})).to_numpy(zero_copy_only=False),
                        bool,
                    )
                )  # type: ignore[union-attr]
                if not len(inside):
                    return None
                lo, hi = lo + int(inside[0]), lo + int(inside[-1]) + 1
                values = values[inside[0] : inside[-1] + 1]
            box.append(slice(lo, hi))
            coords.append(np.asarray(values))
        data = ds[tuple(box)]
        grids = np.meshgrid(*coords, indexing="ij") if coords else []
        columns = {c.name: g.ravel() for c, g in zip(self.layout.columns[:-1], grids, strict=True)}
        columns[self.layout.columns[-1].name] = np.asarray(data).ravel()
        table = pa.table(
            {
                k: to_arrow(v, next(c.arrow for c in self.layout.columns if c.name == k))
                for k, v in columns.items()
            }
        )
        if predicate is not None:
            table = predicate.filter(table)
        if not table.num_rows:
            return None
        out = [
            table.column(n).combine_chunks()
            if n != FILE_COLUMN
            else _constant_string(os.path.basename(self.attachment.files[file_no]), table.num_rows)
            for n in wanted
        ]
        return pa.RecordBatch.from_arrays(out, schema=schema)

    def __repr__(self) -> str:
        return f"AttachedTable({self.name!r}, {len(self.layout.columns)} columns, {len(self.attachment.files)} file(s))"


@dataclass(frozen=True)
class _TableRef:
    """A table of an attachment as a task on a Dask worker reaches it: by its catalog spec."""

    name: str
    spec: str  # the attachment's catalog spec, as JSON
    index_dir: str
    table: str

    def open(self) -> AttachedTable:
        """The table, from an attachment opened read-only once per worker process."""
        import json

        key = (self.name, self.spec, self.index_dir)
        with _WORKER_LOCK:
            attachment = _WORKER_ATTACHMENTS.get(key)
            if attachment is None:
                if len(_WORKER_ATTACHMENTS) > 64:
                    _WORKER_ATTACHMENTS.clear()
                attachment = Attachment(
                    self.name, json.loads(self.spec), Path(self.index_dir), True
                )
                _WORKER_ATTACHMENTS[key] = attachment
        return attachment.table(self.table)


_WORKER_ATTACHMENTS: dict[tuple[str, str, str], Attachment] = {}
_WORKER_LOCK = threading.Lock()


def _scan_on_worker(
    ref: _TableRef,
    wanted: list[str],
    predicate: Predicate | None,
    schema: pa.Schema,
    unit: tuple[int, Any],
) -> pa.RecordBatch | None:
    """One unit of a scan, read by a Dask worker (the files are open for the task only)."""
    table = ref.open()
    with table.attachment.hold():
        return table._task(unit[0], unit[1], wanted, predicate, schema)


def _build_on_worker(
    ref: _TableRef, binning: Binning, encoding: str, task: tuple[str, int]
) -> BitmapIndex:
    """One (column, file) bitmap index, built by a Dask worker and returned to be saved."""
    table = ref.open()
    with table.attachment.hold():
        return table.attachment._build_index(ref.table, task[0], task[1], binning, encoding)


def _fold_unit(
    scan: Callable[[tuple[int, Any]], pa.RecordBatch | None],
    job: tuple[tuple[int, Any], list[str], dict[str, list[float]]],
) -> Any:
    """One unit's rows folded into partial aggregates; None if a row has a NULL or holds an
    ambiguous value of the predicate (the statement then runs as SQL)."""
    import numpy as np

    from tesseradb.sql.partials import Partials

    unit, columns, points = job
    part = Partials(columns)
    batch = scan(unit)
    if batch is None or not batch.num_rows:
        return part
    for name, values in points.items():
        if np.isin(batch.column(name).to_numpy(zero_copy_only=False), values).any():
            return None
    if any(batch.column(c).null_count for c in columns):
        return None
    part.add(batch)
    return part


def _width(dtype: str) -> int:
    import numpy as np

    try:
        return int(np.dtype(dtype).itemsize) or 8
    except TypeError:
        return 16


def _constant_string(value: str, n: int) -> pa.Array:
    import numpy as np
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, np.int32)), pa.array([value])
    ).dictionary_decode()
