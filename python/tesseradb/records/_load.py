"""Loading records into a stream (``db.load``): CSV, Parquet, Arrow IPC and packed binary
files, one ingest call over the files' blocks, and descriptors inferred from a file's
columns.

The stream's ingest writes its segments as it goes and commits at the end, so memory
stays bounded by a block, and the load is one call: all or nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._rows import ROW_FILE_SUFFIXES
from tesseradb.errors import InvalidArgumentError, LoadError
from tesseradb.progress import PartOf

if TYPE_CHECKING:
    from tesseradb.kinds import LoadRequest
    from tesseradb.progress import Tracker

__all__ = ["LOAD_OPTIONS", "RECORD_SUFFIXES", "infer_descriptor", "load_stream"]

# record formats by file name ending: the row formats, and packed binary records
RECORD_SUFFIXES = {**ROW_FILE_SUFFIXES, ".bin": "binary", ".dat": "binary", ".rec": "binary"}
LOAD_OPTIONS = frozenset({"descriptor", "index", "header", "durable"})


def path_bytes(path: str) -> int:
    """Bytes of a file, or of every file under a directory."""
    if os.path.isdir(path):
        return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    return os.path.getsize(path)


def load_stream(request: LoadRequest, open_stream: Any, create_stream: Any) -> tuple[int, str]:
    """Load ``request``'s files into its stream: ``open_stream()`` gives the existing one,
    ``create_stream(descriptor)`` makes it (the descriptor given, or inferred from the
    first file)."""
    files, fmt, options, watch = request.files, request.format, request.options, request.watch
    if "durable" in options and not isinstance(options["durable"], bool):
        raise InvalidArgumentError(f"db.load: durable is True or False, not {options['durable']!r}")
    descriptor = options.get("descriptor")
    header = options.get("header")
    if request.exists:
        stream = open_stream()
    else:
        if descriptor is None:
            if fmt == "binary":
                raise LoadError(
                    f"{files[0]}: packed binary records need their descriptor (descriptor=)"
                )
            descriptor = infer_descriptor(files[0], fmt, options.get("index"))
        stream = create_stream(descriptor)
    # a load that returned is on disk (durable=False: queryable at once, on disk within
    # the stream's writer period, as a plain ingest); a new stream goes again on an error
    # (the registry's provisionally)
    durable = options.get("durable", True)
    if fmt == "csv" and len(files) == 1:  # the stream reads it, telling its bytes
        records = stream.ingest(
            files[0],
            header=header,
            durable=durable,
            progress=PartOf(watch),
            cancel=watch.cancel_token,
        )
    else:
        parts = _record_parts(files, fmt, stream, watch)
        records = stream.ingest(parts, header=header, durable=durable, cancel=watch.cancel_token)
    watch.advance(max(0, (watch.total or 0) - watch.done))
    return records, stream.descriptor.to_xml()


RECORD_BLOCK_BYTES = 16 << 20  # bytes of packed binary records read at a time


def _record_parts(files: list[str], fmt: str, stream: Any, watch: Tracker) -> Iterator[Any]:
    """The records of every file, a block at a time, for one ingest call (which holds
    only what it has not yet written); the load's bytes advance as blocks are read."""
    import pyarrow as pa

    names = [f.name for f in stream.descriptor.fields]
    for path in files:
        size = path_bytes(path)
        if fmt == "csv":  # the stream parses it
            yield path
            watch.advance(size)
            continue
        if fmt == "binary":
            record = stream.descriptor.record_size
            block = max(record, RECORD_BLOCK_BYTES // record * record)
            if size % record:
                raise LoadError(
                    f"{path}: {size} bytes is not a whole number of {record}-byte records"
                )
            with open(path, "rb") as handle:
                while chunk := handle.read(block):
                    yield chunk
                    watch.advance(len(chunk))
            continue
        try:
            batches, rows = _record_batches(path, fmt)
            done = 0
            for batch in batches:
                yield _select(batch, names, path)
                advanced = size * (done + batch.num_rows) // rows - size * done // rows
                done += batch.num_rows
                watch.advance(advanced)
        except (pa.ArrowInvalid, OSError) as err:
            what = "Parquet file" if fmt == "parquet" else "Arrow IPC file or stream"
            raise LoadError(f"{path}: not a readable {what}: {err}") from None


def _select(batch: Any, names: list[str], path: str) -> Any:
    """The record fields of a batch, by name."""
    import pyarrow as pa

    missing = [n for n in names if n not in batch.schema.names]
    if missing:
        raise LoadError(
            f"{path}: the file has no column {', '.join(missing)}; the records' fields are "
            f"{', '.join(names)}"
        )
    return pa.RecordBatch.from_arrays([batch.column(n) for n in names], names=names)


def _record_batches(path: str, fmt: str) -> tuple[Iterator[Any], int]:
    """A Parquet or Arrow IPC file's record batches (read as iterated) and its row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if fmt == "parquet":
        parquet = pq.ParquetFile(path)
        return parquet.iter_batches(batch_size=65536), max(1, parquet.metadata.num_rows)
    source = pa.memory_map(path)
    try:
        file = pa.ipc.open_file(source)
    except pa.ArrowInvalid:
        source.seek(0)
        stream = pa.ipc.open_stream(source)  # rows unknown until read: read it (mapped)
        batches = list(stream)
        return iter(batches), max(1, sum(b.num_rows for b in batches))
    batches = [file.get_batch(i) for i in range(file.num_record_batches)]  # mapped, no copy
    return iter(batches), max(1, sum(b.num_rows for b in batches))


_ARROW_TO_FIELD = {
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "float": "float",
    "double": "double",
}
_MAX_INDEX = 3  # indexing fields a descriptor infers (the first numeric fields)


def infer_descriptor(path: str, fmt: str, index: Sequence[str] | None) -> dict[str, Any]:
    """A record descriptor from a file's columns: numbers keep their type, timestamps are
    ``epoch_t``, text is ``char`` wide enough for the file's longest value (doubled); the
    first three numeric fields index the records unless ``index`` names others."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if fmt in ("parquet", "arrow"):  # the first block of records is the sample
        try:
            batches, _ = _record_batches(path, fmt)
            first = next(iter(batches), None)
        except (pa.ArrowInvalid, OSError) as err:
            raise LoadError(f"{path}: not a readable {fmt} file: {err}") from None
        if first is None:
            raise LoadError(f"{path}: holds no records to infer the fields from")
        sample = pa.Table.from_batches([first])
    else:
        import pyarrow.csv as pacsv

        try:
            with pacsv.open_csv(path) as reader:
                sample = pa.Table.from_batches([reader.read_next_batch()])
        except (pa.ArrowInvalid, OSError, StopIteration) as err:
            raise LoadError(f"{path}: not a readable CSV file: {err}") from None
    fields = []
    for column in sample.schema:
        t = column.type
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            fields.append({"name": column.name, "type": "epoch_t"})
        elif str(t) in _ARROW_TO_FIELD:
            fields.append({"name": column.name, "type": _ARROW_TO_FIELD[str(t)]})
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            longest = pc.max(pc.binary_length(sample.column(column.name))).as_py() or 1
            fields.append({"name": column.name, "type": "char", "array_len": max(16, 2 * longest)})
        else:
            raise LoadError(
                f"{path}: column {column.name!r} is {t}; record fields are numbers, "
                "timestamps and text"
            )
    numeric = [f["name"] for f in fields if f["type"] != "char"]
    chosen = list(index) if index is not None else numeric[:_MAX_INDEX]
    if not chosen:
        raise LoadError(f"{path}: no numeric column to index the records by; give index=")
    return {"fields": fields, "index": chosen}
