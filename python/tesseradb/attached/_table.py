"""A table of an attachment as a relation: planning with bitmap indexes, scans in
units of about ``batch_bytes``, and aggregates folded unit by unit.

A predicate the table's indexes cover narrows the rows read to the candidates
(SDS/Q): below ``INDEX_SCAN_FRACTION`` of the rows the scan reads only those,
dense runs as spans; otherwise it reads everything. Units run on the database's
executor, on Dask workers through a reference that reopens the attachment there.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import refuses_when_closed
from tesseradb.attached._layout import TableLayout, to_arrow_type
from tesseradb.attached._reader import to_arrow
from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import Estimate

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyroaring import BitMap

    from tesseradb.attached._attachment import Attachment, TableRef

__all__ = ["FILE_COLUMN", "AttachedTable"]

FILE_COLUMN = "_file"  # a glob's tables say which file a row came from
INDEX_SCAN_FRACTION = 0.25  # above this share of candidate rows, a full scan is cheaper
# Once an index has narrowed the rows, one whose bins hold more than this share of
# the file is not worth its bitmap work: the raw values of the few rows read are checked.
INDEX_SKIP_FRACTION = 0.05
# Candidate rows that fill at least this share of the span they lie in are read as that span.
DENSE_SPAN = 0.5
DENSE_MIN_ROWS = 1 << 16  # below this, reading the rows chunk by chunk costs as little


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
        filtered = set() if predicate is None else {c.lower() for c in predicate}
        filter_cols = [c for c in sources if c.lower() in filtered]  # (as Predicate.domain)
        arrays: dict[str, pa.Array] = {}

        def read(name: str, rows: np.ndarray | None, keep: np.ndarray | None = None) -> pa.Array:
            src = sources[name]
            if rows is None:
                values = reader.read_range(src.dataset, unit[0], unit[1])
            else:
                values = reader.read_rows(src.dataset, rows)
            if src.field:
                values = values[src.field]
            if keep is not None:
                values = values[keep]  # (numpy's filter costs a fifth of Arrow's)
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
                arrays[name] = read(name, rows, keep)
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


def _scan_on_worker(
    ref: TableRef,
    wanted: list[str],
    predicate: Predicate | None,
    schema: pa.Schema,
    unit: tuple[int, Any],
) -> pa.RecordBatch | None:
    """One unit of a scan, read by a Dask worker (the files are open for the task only)."""
    table = ref.open()
    with table.attachment.hold():
        return table._task(unit[0], unit[1], wanted, predicate, schema)


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


@functools.lru_cache(maxsize=256)
def _width(dtype: str) -> int:
    """Bytes a value of ``dtype`` takes (memoised: every estimate sums a table's)."""
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
