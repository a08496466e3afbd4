"""Reading rows of 1-D HDF5 datasets, in parallel, without h5py's global lock where possible.

h5py serialises every call into the HDF5 library behind one lock, so threads
reading through it take turns. For the common layouts — contiguous, or
chunked with no filter, shuffle and/or deflate — this module reads the
chunk bytes itself with ``os.pread`` and decodes them with ``zlib`` and
numpy, all of which release the GIL, so a scan split over threads really
runs in parallel. The chunk map comes from HDF5 itself (``chunk_iter``) once
per file version. Any other layout (other filters, variable-length strings,
fletcher32 checksums) is read through h5py.
"""

from __future__ import annotations

import itertools
import threading
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.attached._bytes import LocalBytes, RemoteBytes, RemoteFile
from tesseradb.errors import AttachedFileError, TesseraError

if TYPE_CHECKING:
    import h5py
    import numpy as np
    import pyarrow as pa

__all__ = ["AttachedFileError", "DatasetPlan", "FileReader", "to_arrow"]

_DEFLATE, _SHUFFLE = 1, 2


@dataclass
class DatasetPlan:
    """How to read one dataset of one file: its type, length and where its bytes are."""

    path: str
    dtype: Any  # numpy dtype as stored (compound for compound datasets)
    length: int
    native: bool
    contiguous_offset: int | None = None  # contiguous layout (None: unallocated or chunked)
    chunk_rows: int = 0
    chunk_starts: Any = None  # numpy int64: first row of each stored chunk (sorted)
    chunk_offsets: Any = None  # byte offset of each stored chunk
    chunk_sizes: Any = None  # stored (filtered) size of each chunk
    chunk_masks: Any = None  # HDF5 filter mask: bit i set = filter i skipped for that chunk
    filters: tuple[int, ...] = ()
    chunk_position: Any = (
        None  # for chunk i (by row), its index in chunk_starts, or -1 if not stored
    )
    fill: Any = 0
    vlen_string: bool = False

    @property
    def row_bytes(self) -> int:
        return int(self.dtype.itemsize) if not self.vlen_string else 32


def _lock_as_hdf5_does(source: LocalBytes, path: str) -> None:
    """Take the shared lock HDF5 takes on a file it opens for reading (unless HDF5's file
    locking is turned off), so that, as when HDF5 itself held the file for the whole
    statement, no HDF5 writer changes it meanwhile; and refuse, as HDF5 would, a file
    a writer has open."""
    import fcntl
    import os

    if os.environ.get("HDF5_USE_FILE_LOCKING", "").upper() in ("FALSE", "0"):
        return
    try:
        fcntl.flock(source.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as err:
        source.close()
        raise AttachedFileError(
            f"attached file {path} cannot be read now: another program has it open for "
            f"writing ({err.strerror or err})"
        ) from None


class FileReader:
    """One attached file, opened for reading (h5py for metadata, a raw fd for chunk bytes)."""

    def __init__(
        self,
        path: str,
        plans: dict[str, DatasetPlan] | None = None,
        remote: RemoteBytes | None = None,
    ) -> None:
        """A local file at ``path``, or the object ``remote`` reads (``path`` its URL).

        HDF5 opens the file only when something asks for its metadata (a dataset, a
        chunk map not yet known): reads through known chunk maps need only the raw
        bytes, and opening and closing the file with HDF5 cost a point query 150 µs."""
        self.path = path
        self._remote = remote
        self._h5: h5py.File | None = None
        self._h5_lock = threading.Lock()
        if remote is None:
            try:
                self.source: LocalBytes | RemoteBytes = LocalBytes(path)
            except FileNotFoundError as err:
                raise AttachedFileError(f"attached file {path} no longer exists") from err
            except OSError as err:
                raise AttachedFileError(f"attached file {path} cannot be read: {err}") from err
            _lock_as_hdf5_does(self.source, path)
        else:
            self.source = remote
        # Plans (chunk maps) outlive the open file: they hold as long as the file is unchanged.
        self._plans: dict[str, DatasetPlan] = plans if plans is not None else {}
        self.bytes_read = 0  # bytes read from the file (native reads and h5py reads alike)
        self._lock = threading.Lock()

    @property
    def h5(self) -> h5py.File:
        """The file opened by HDF5 (on first use)."""
        import h5py

        with self._h5_lock:
            if self._h5 is not None:
                return self._h5
            try:
                if self._remote is None:
                    self._h5 = h5py.File(self.path, "r")
                else:
                    self._h5 = h5py.File(RemoteFile(self._remote), "r")
            except FileNotFoundError as err:
                raise AttachedFileError(f"attached file {self.path} no longer exists") from err
            except OSError as err:
                if isinstance(err.__context__, TesseraError):  # (the store's error, in HDF5's)
                    raise err.__context__ from None
                raise AttachedFileError(
                    f"attached file {self.path} cannot be read as HDF5: {err}"
                ) from err
            return self._h5

    def close(self) -> None:
        with self._h5_lock:
            if self._h5 is not None:
                self._h5.close()
                self._h5 = None
        self.source.close()

    def _pread(self, size: int, offset: int) -> bytes:
        data = self.source.pread(size, offset)
        self.bytes_read += len(
            data
        )  # a counter for reports: a lost update under a race is harmless
        return data

    def dataset(self, path: str) -> h5py.Dataset:
        try:
            return self.h5[path]
        except KeyError as err:
            raise AttachedFileError(
                f"attached file {self.path} has no dataset {path} any more"
            ) from err

    def plan(self, path: str) -> DatasetPlan:
        with self._lock:
            if path not in self._plans:
                self._plans[path] = _make_plan(self.dataset(path))
            return self._plans[path]

    # --- reading --------------------------------------------------------------------
    def read_range(self, path: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of a 1-D dataset, as stored."""
        import numpy as np

        plan = self.plan(path)
        stop = min(stop, plan.length)
        if stop <= start:
            return np.empty(0, dtype=plan.dtype)
        if not plan.native:
            ds = self.dataset(path)
            values = ds.asstr()[start:stop] if plan.vlen_string else ds[start:stop]
            self.bytes_read += (stop - start) * plan.row_bytes
            return values
        if plan.chunk_rows == 0:
            return self._read_contiguous(plan, start, stop)
        first, last = start // plan.chunk_rows, (stop - 1) // plan.chunk_rows
        if first == last:
            base = first * plan.chunk_rows
            return self._chunk(plan, first)[start - base : stop - base]
        out = np.empty(stop - start, dtype=plan.dtype)
        c = first
        while c <= last:
            run = self._contiguous_run(plan, c, last, start, stop) if not plan.filters else 0
            if run:
                # whole unfiltered chunks adjacent in the file: one read, straight into place
                lo = c * plan.chunk_rows
                hi = min((c + run) * plan.chunk_rows, plan.length)
                self._read_into(out[lo - start : hi - start], self._chunk_offset(plan, c), plan)
                c += run
                continue
            base = c * plan.chunk_rows
            lo, hi = max(start, base), min(stop, base + plan.chunk_rows)
            out[lo - start : hi - start] = self._chunk(plan, c)[lo - base : hi - base]
            c += 1
        return out

    @staticmethod
    def _chunk_offset(plan: DatasetPlan, index: int) -> int:
        return int(plan.chunk_offsets[plan.chunk_position[index]])

    def _contiguous_run(
        self, plan: DatasetPlan, first: int, last: int, start: int, stop: int
    ) -> int:
        """How many chunks from ``first`` are whole, stored, and one after another in the file."""
        rows, pos = plan.chunk_rows, plan.chunk_position
        itemsize = plan.dtype.itemsize
        n = 0
        while first + n <= last:
            c = first + n
            base = c * rows
            whole = base >= start and min(base + rows, plan.length) <= stop
            if not whole or pos[c] < 0:
                break
            if (
                n
                and self._chunk_offset(plan, c) != self._chunk_offset(plan, c - 1) + rows * itemsize
            ):
                break
            n += 1
        return n

    def _read_into(self, target: np.ndarray, offset: int, plan: DatasetPlan) -> None:
        got = self.source.readinto(memoryview(target).cast("B"), offset)
        if got != target.nbytes:
            raise AttachedFileError(
                f"attached file {self.path} is truncated: {plan.path} ends early"
            )
        self.bytes_read += got

    def read_rows(self, path: str, rows: np.ndarray) -> np.ndarray:
        """The given rows (sorted, ascending) of a 1-D dataset; only the chunks holding them are read."""
        import numpy as np

        plan = self.plan(path)
        if len(rows) == 0:
            return np.empty(0, dtype=plan.dtype if not plan.vlen_string else object)
        if not plan.native or plan.chunk_rows == 0:
            lo, hi = int(rows[0]), int(rows[-1]) + 1
            if plan.native:  # contiguous: read the covering range once, then pick
                return self._read_contiguous(plan, lo, hi)[rows - lo]
            # through h5py, a run of nearby rows at a time
            out = []
            for a, b in _runs(rows, 4096):
                block = self.read_range(path, int(rows[a]), int(rows[b - 1]) + 1)
                out.append(block[rows[a:b] - rows[a]])
            return np.concatenate(out)
        step = plan.chunk_rows
        first, last = int(rows[0]) // step, int(rows[-1]) // step
        if first == last:  # an index lookup's rows mostly sit in one chunk
            return self._chunk_part(plan, first, rows - first * step)
        # the rows are sorted: each chunk's rows are one slice of them
        chunk_ids = rows // step
        cuts = (np.flatnonzero(np.diff(chunk_ids)) + 1).tolist()
        out = []
        for a, b in itertools.pairwise([0, *cuts, len(rows)]):
            c = int(chunk_ids[a])
            out.append(self._chunk_part(plan, c, rows[a:b] - c * step))
        return np.concatenate(out)

    def _read_contiguous(self, plan: DatasetPlan, start: int, stop: int) -> np.ndarray:
        import numpy as np

        n = stop - start
        if plan.contiguous_offset is None:
            return np.full(n, plan.fill, dtype=plan.dtype)
        size = plan.dtype.itemsize
        data = self._pread(n * size, plan.contiguous_offset + start * size)
        if len(data) != n * size:
            raise AttachedFileError(
                f"attached file {self.path} is truncated: {plan.path} ends early"
            )
        return np.frombuffer(data, dtype=plan.dtype)

    def _chunk_part(self, plan: DatasetPlan, index: int, local: np.ndarray) -> np.ndarray:
        """Rows ``local`` (sorted, within the chunk) of chunk ``index``. A chunk stored
        without filters is read over their span only: an index lookup's few rows then
        cost a few hundred bytes, not the chunk."""
        import numpy as np

        where = int(plan.chunk_position[index])
        if plan.filters or where < 0:
            return self._chunk(plan, index)[local]
        offset, size = int(plan.chunk_offsets[where]), int(plan.chunk_sizes[where])
        itemsize = plan.dtype.itemsize
        valid = min(plan.chunk_rows, plan.length - index * plan.chunk_rows)
        if offset + size > self.source.size:  # (what reading the whole chunk would find)
            raise AttachedFileError(
                f"attached file {self.path} is truncated: a chunk of {plan.path} ends early"
            )
        if size < valid * itemsize:
            raise AttachedFileError(
                f"attached file {self.path}: a chunk of {plan.path} decodes short"
            )
        lo, hi = int(local[0]), int(local[-1]) + 1
        raw = self._pread((hi - lo) * itemsize, offset + lo * itemsize)
        if len(raw) != (hi - lo) * itemsize:
            raise AttachedFileError(
                f"attached file {self.path} is truncated: a chunk of {plan.path} ends early"
            )
        return np.frombuffer(raw, dtype=plan.dtype)[local - lo]

    def _chunk(self, plan: DatasetPlan, index: int) -> np.ndarray:
        """Decoded rows of chunk ``index`` (the last one may hold fewer rows than chunk_rows)."""
        import numpy as np

        rows = plan.chunk_rows
        base = index * rows
        valid = min(rows, plan.length - base)
        where = int(plan.chunk_position[index])
        if where < 0:
            return np.full(valid, plan.fill, dtype=plan.dtype)  # never written: fill value
        offset, size, mask = (
            int(plan.chunk_offsets[where]),
            int(plan.chunk_sizes[where]),
            int(plan.chunk_masks[where]),
        )
        raw = self._pread(size, offset)
        if len(raw) != size:
            raise AttachedFileError(
                f"attached file {self.path} is truncated: a chunk of {plan.path} ends early"
            )
        itemsize = plan.dtype.itemsize
        for position, code in reversed(list(enumerate(plan.filters))):
            if mask & (1 << position):
                continue
            if code == _DEFLATE:
                try:
                    raw = zlib.decompress(raw)
                except zlib.error as err:
                    raise AttachedFileError(
                        f"attached file {self.path}: a chunk of {plan.path} is corrupt ({err})"
                    ) from err
            elif code == _SHUFFLE:
                raw = np.frombuffer(raw, dtype=np.uint8).reshape(itemsize, -1).T.tobytes()
        values = np.frombuffer(raw, dtype=plan.dtype)
        if len(values) < valid:
            raise AttachedFileError(
                f"attached file {self.path}: a chunk of {plan.path} decodes short"
            )
        return values[:valid]


def _make_plan(ds: h5py.Dataset) -> DatasetPlan:
    import h5py
    import numpy as np

    vlen = (
        h5py.check_string_dtype(ds.dtype) is not None
        and h5py.check_string_dtype(ds.dtype).length is None
    )
    plan = DatasetPlan(
        ds.name, ds.dtype, int(ds.shape[0]) if ds.ndim else 1, native=False, vlen_string=vlen
    )
    if ds.ndim != 1 or vlen or ds.dtype.hasobject:
        return plan
    try:
        plan.fill = ds.fillvalue
    except Exception:  # odd fill values (compound): h5py reads it, we do not need it natively
        return plan
    dcpl = ds.id.get_create_plist()
    filters = tuple(dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters()))
    if any(code not in (_DEFLATE, _SHUFFLE) for code in filters):
        return plan
    if ds.chunks is None:
        if filters or (ds.id.get_offset() is None and ds.id.get_storage_size() > 0):
            return plan  # external or compact storage: leave it to HDF5
        plan.contiguous_offset = ds.id.get_offset()
        plan.native = True
        return plan
    starts, offsets, sizes, masks = [], [], [], []

    def visit(info: Any) -> None:
        starts.append(info.chunk_offset[0])
        offsets.append(info.byte_offset)
        sizes.append(info.size)
        masks.append(info.filter_mask)

    ds.id.chunk_iter(visit)
    order = np.argsort(np.asarray(starts, dtype=np.int64), kind="stable")
    plan.chunk_rows = int(ds.chunks[0])
    plan.chunk_starts = np.asarray(starts, dtype=np.int64)[order]
    plan.chunk_offsets = np.asarray(offsets, dtype=np.int64)[order]
    plan.chunk_sizes = np.asarray(sizes, dtype=np.int64)[order]
    plan.chunk_masks = np.asarray(masks, dtype=np.int64)[order]
    plan.chunk_position = _positions(plan)
    plan.filters = filters
    plan.native = True
    return plan


def _positions(plan: DatasetPlan) -> Any:
    import numpy as np

    count = -(-plan.length // plan.chunk_rows) if plan.chunk_rows else 0
    positions = np.full(count, -1, dtype=np.int64)
    index = plan.chunk_starts // plan.chunk_rows
    inside = index < count
    positions[index[inside]] = np.flatnonzero(inside)
    return positions


def _runs(rows: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """Index ranges of ``rows`` in which consecutive rows are less than ``gap`` apart."""
    import numpy as np

    cuts = np.flatnonzero(np.diff(rows) >= gap) + 1
    bounds = [0, *cuts.tolist(), len(rows)]
    return list(itertools.pairwise(bounds))


def to_arrow(values: np.ndarray, arrow_name: str) -> pa.Array:
    """Stored values (numpy) as an Arrow array of the column's type."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if arrow_name == "string":
        if values.dtype.kind == "S":
            binary = pa.array(values, type=pa.binary())
            try:
                return pc.cast(binary, pa.string())
            except pa.ArrowInvalid:  # not UTF-8: decode what can be decoded
                return pa.array(
                    [v.decode("utf-8", "replace") for v in values.tolist()], pa.string()
                )
        return pa.array(
            [v if isinstance(v, str) else v.decode("utf-8", "replace") for v in values.tolist()],
            pa.string(),
        )
    if values.dtype.byteorder == ">" or (values.dtype.kind == "f" and values.dtype.itemsize == 2):
        target = (
            np.float32
            if values.dtype.kind == "f" and values.dtype.itemsize == 2
            else values.dtype.newbyteorder("=")
        )
        values = values.astype(target)
    if not values.flags.c_contiguous:
        values = np.ascontiguousarray(values)
    return pa.array(values)
