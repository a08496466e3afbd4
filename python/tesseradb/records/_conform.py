"""Records as a stream takes them: the user's data (an Arrow table or batch, a numpy
structured array, a buffer of packed binary records) made into exactly the
descriptor's columns and types, or refused with the column and row that do not fit:
a NULL, a value out of the type's range, a char field too long, holding a NUL, or
not UTF-8.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb.records._descriptor import DescriptorError, RecordDescriptor

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["conform"]

UNPACK_RECORDS = 1 << 20  # binary records unpacked per Rust call
UNPACK_BYTES = 1 << 30  # and at most these many bytes (text offsets are 32-bit)


def conform(descriptor: RecordDescriptor, data: Any) -> pa.Table:
    """The data as a table of exactly the descriptor's columns and types, or a clear error."""
    import numpy as np
    import pyarrow as pa

    if isinstance(data, (bytes, bytearray, memoryview)):
        data = _from_binary(descriptor, data)
    elif isinstance(data, np.ndarray):
        data = _from_structured(descriptor, data)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if not isinstance(data, pa.Table):
        raise DescriptorError(
            "ingest takes a pyarrow Table or RecordBatch, a numpy structured array or a buffer "
            f"of packed binary records, not {type(data).__name__}"
        )
    missing = [f.name for f in descriptor.arrow_schema if f.name not in data.column_names]
    if missing:
        raise DescriptorError(
            f"the data has no column {', '.join(repr(m) for m in missing)} of the record"
        )
    columns = []
    for field in descriptor.arrow_schema:
        column = data.column(field.name)
        if column.null_count:
            row = next(i for i, v in enumerate(column.is_null().to_pylist()) if v)
            raise DescriptorError(
                f"column {field.name!r} has a NULL at row {row}: records have no NULLs"
            )
        try:
            if column.type != field.type:
                cast = column.cast(field.type, safe=True)
                _check_no_overflow(field.name, column, cast)
                column = cast
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise DescriptorError(
                f"column {field.name!r} ({column.type}) does not fit {field.type}: {err}"
            ) from None
        columns.append(column)
    for f, column in zip(descriptor.fields, columns, strict=True):
        if f.type == "char":
            long_row = _first_too_long(column, f.array_len or 0)
            if long_row is not None:
                raise DescriptorError(
                    f"column {f.name!r} at row {long_row} is longer than its array_len of {f.array_len} bytes"
                )
            nul_row = _first_with_nul(column)
            if nul_row is not None:
                raise DescriptorError(
                    f"column {f.name!r} at row {nul_row} holds a NUL character: a char field "
                    "is NUL-padded on disk, so a NUL inside its text would cut it short"
                )
    return pa.Table.from_arrays(columns, schema=descriptor.arrow_schema)


def _from_binary(descriptor: RecordDescriptor, buffer: Any) -> pa.Table:
    """Packed binary records laid out as the descriptor says (the paper's binary form).

    Unpacked into columns by a Rust kernel, in pieces whose text fits
    Arrow's 32-bit string offsets.
    """
    import numpy as np
    import pyarrow as pa

    from tesseradb import _core

    size = descriptor.record_size
    raw = np.frombuffer(buffer, dtype=np.uint8)
    if raw.nbytes % size:
        raise DescriptorError(
            f"a buffer of {raw.nbytes} bytes is not whole records: each record is {size} bytes, "
            f"and {raw.nbytes % size} bytes are left over after {raw.nbytes // size} records"
        )
    fields = descriptor.fields
    layout = [(f.size, f.type == "char") for f in fields]
    piece = max(1, min(UNPACK_RECORDS, UNPACK_BYTES // size))
    batches = []
    for first in range(0, raw.nbytes // size, piece):
        part = raw[first * size : (first + piece) * size]
        columns, not_text = _core.unpack_records(part, layout)
        if not_text is not None:
            record, field = not_text
            raise DescriptorError(
                f"record {first + record}: char field {fields[field].name!r} is not UTF-8 text"
            )
        n = len(part) // size
        arrays = [
            pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(c[0]), pa.py_buffer(c[1])])
            if isinstance(c, tuple)
            else pa.Array.from_buffers(f.arrow_type, n, [None, pa.py_buffer(c)])
            for f, c in zip(fields, columns, strict=True)
        ]
        batches.append(pa.RecordBatch.from_arrays(arrays, schema=descriptor.arrow_schema))
    return pa.Table.from_batches(batches, schema=descriptor.arrow_schema)


def _from_structured(descriptor: RecordDescriptor, records: np.ndarray) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    if records.dtype == descriptor.numpy_dtype:  # the packed binary form itself
        return _from_binary(descriptor, np.ascontiguousarray(records).view(np.uint8).reshape(-1))
    names = records.dtype.names or ()
    missing = [f.name for f in descriptor.fields if f.name not in names]
    if missing:
        raise DescriptorError(
            f"the structured array has no field {', '.join(repr(m) for m in missing)} of the record"
        )
    columns = {}
    for field in descriptor.fields:
        values = records[field.name]
        if field.type != "char":
            columns[field.name] = pa.array(values.astype(values.dtype.newbyteorder("=")))
            continue
        binary = pa.array(values.astype(f"S{field.array_len}"), type=pa.binary())
        try:
            columns[field.name] = binary.cast(pa.string())
        except pa.ArrowInvalid:
            bad = next(i for i, v in enumerate(binary.to_pylist()) if not _utf8(v))
            raise DescriptorError(
                f"record {bad}: char field {field.name!r} is not UTF-8 text"
            ) from None
    return pa.table(columns)


def _check_no_overflow(name: str, before: Any, after: Any) -> None:
    """A float cast that made a finite value infinite (1e39 into float32) is refused:
    Arrow's safe casts check integers, not float overflow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_floating(after.type):
        return
    was_finite = pc.invert(pc.is_inf(before)) if pa.types.is_floating(before.type) else None
    grown = pc.is_inf(after) if was_finite is None else pc.and_(pc.is_inf(after), was_finite)
    if pc.any(grown).as_py():
        row = pc.index(grown, True).as_py()
        raise DescriptorError(
            f"column {name!r} at row {row}: {before[row].as_py()!r} is outside the range of "
            f"{after.type}"
        )


def _first_with_nul(column: pa.ChunkedArray) -> int | None:
    """The first row whose text holds a NUL character, if any.

    Looks at each piece's text bytes as one array (a vectorised minimum)
    instead of matching row by row: this check runs on every ingested
    record, and ``match_substring`` cost a fifth of ingest.
    """
    import numpy as np

    base = 0
    for piece in column.chunks:
        offsets, text = _string_buffers(piece)
        if len(text):
            at = int(text.argmin())
            if text[at] == 0:
                return base + int(np.searchsorted(offsets, offsets[0] + at, side="right")) - 1
        base += len(piece)
    return None


def _first_too_long(column: pa.ChunkedArray, limit: int) -> int | None:
    """The first row of a string column longer than ``limit`` bytes, or None."""
    import numpy as np

    base = 0
    for piece in column.chunks:
        offsets, _ = _string_buffers(piece)
        too_long = np.diff(offsets) > limit
        if too_long.any():
            return base + int(too_long.argmax())
        base += len(piece)
    return None


def _string_buffers(piece: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's ``len + 1`` offsets and the text bytes they point into
    (from the first offset to the last), without copying."""
    import numpy as np
    import pyarrow as pa

    width = np.int64 if pa.types.is_large_string(piece.type) else np.int32
    _, offset_buffer, text_buffer = piece.buffers()
    offsets = np.frombuffer(
        offset_buffer,
        dtype=width,
        count=len(piece) + 1,
        offset=piece.offset * np.dtype(width).itemsize,
    )
    if text_buffer is None:
        return offsets, np.zeros(0, dtype=np.uint8)
    return offsets, np.frombuffer(text_buffer, dtype=np.uint8)[offsets[0] : offsets[-1]]


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
