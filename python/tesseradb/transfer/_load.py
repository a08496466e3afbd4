"""``db.load``: a file, a directory store or a glob into an array, a stream, a collection or a
plain table, made when it does not exist and appended to otherwise, all or nothing per call.

The kind comes from the target when it exists, else from ``kind=``, else from
the files' format: images and grids become arrays, CSV/Parquet/Arrow plain
tables, JSON collections, packed binary records a stream (which needs its
descriptor). Memory stays bounded per kind (docs/load-export.md says the
bounds): arrays and tables stream, and a stream's load is one ingest call over
the files' blocks, which writes its segments as it goes and commits at the end.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tesseradb._sqltext import quote_identifier
from tesseradb.errors import (
    CancelledError,
    DocumentError,
    InvalidArgumentError,
    LoadError,
    TesseraError,
)
from tesseradb.progress import Cancel, ProgressLike, Tracker, tracker
from tesseradb.transfer._arrays import ArrayLoad, load_arrays
from tesseradb.transfer._images import expand, file_format

__all__ = ["KINDS", "Loaded", "load"]

KINDS = ("array", "stream", "collection", "table")
# record formats by file name ending
_RECORD_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "csv",
    ".csv.gz": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".bin": "binary",
    ".dat": "binary",
    ".rec": "binary",
}
_DEFAULT_KIND = {
    "csv": "table",
    "parquet": "table",
    "arrow": "table",
    "json": "collection",
    "jsonl": "collection",
    "binary": "stream",
}
_KIND_FORMATS = {
    "array": {"fits", "tiff", "netcdf", "zarr", "npy", "npz"},
    "stream": {"csv", "parquet", "arrow", "binary"},
    "collection": {"json", "jsonl"},
    "table": {"csv", "parquet", "arrow", "json", "jsonl"},
}
_ARRAY_OPTIONS = {"along", "dims", "chunks", "variables", "hdu", "attr", "threads"}
_STREAM_OPTIONS = {"descriptor", "index", "header", "durable"}


@dataclass(frozen=True)
class _Target:
    """The database a load writes to, and its open objects (to make and drop arrays)."""

    db: Any
    objects: Any

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


@dataclass(frozen=True)
class Loaded:
    """What one load did."""

    name: str
    kind: str  # array, stream, collection or table
    created: bool  # the object was made by this load (else appended to)
    files: int
    items: int  # cells (arrays), records, objects or rows loaded
    bytes: int  # bytes of the input files
    schema: str  # the object's schema as text (what was inferred, or what it was)

    def __str__(self) -> str:
        verb = "created" if self.created else "appended to"
        unit = {"array": "cells", "stream": "records", "collection": "objects"}.get(
            self.kind, "rows"
        )
        return (
            f"{verb} {self.kind} {self.name}: {self.items:,} {unit} from {self.files} file(s)"
            f", {self.bytes:,} bytes\n{self.schema}"
        )


def source_format(path: str, given: str | None = None) -> str:
    """The format of ``path``: ``given``, or by its name."""
    if given is not None:
        known = sorted(set().union(*_KIND_FORMATS.values()))
        if not isinstance(given, str) or given not in known:
            raise InvalidArgumentError(
                f"db.load: format is one of {', '.join(known)}, not {given!r}"
            )
        return given
    fmt = file_format(path)
    if fmt is not None:
        return fmt
    lowered = path.lower()
    for suffix in sorted(_RECORD_SUFFIXES, key=len, reverse=True):
        if lowered.endswith(suffix):
            return _RECORD_SUFFIXES[suffix]
    known = ", ".join(sorted({*_RECORD_SUFFIXES, ".fits", ".tif", ".nc", ".h5", ".zarr", ".npy"}))
    raise LoadError(f"{path}: the format is not known by its name ({known}); give format=")


def default_name(source: str) -> str:
    """The object name a load gives when none is: the file's stem (a glob's directory)."""
    path = Path(source)
    stem = path.parent.name if any(c in path.name for c in "*?[") else path.name.split(".")[0]
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "loaded"
    return f"t_{name}" if name[0].isdigit() else name


def load(
    db: Any,
    objects: Any,
    source: str | os.PathLike[str],
    into: str | None = None,
    kind: str | None = None,
    *,
    format: str | None = None,
    progress: ProgressLike = None,
    cancel: Cancel | None = None,
    **options: Any,
) -> Loaded:
    """See ``Database.load``."""
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidArgumentError(
            f"db.load: source is a file name, directory store or glob, not {type(source).__name__}"
        )
    text = os.fspath(source)
    if not isinstance(text, str):
        raise InvalidArgumentError("db.load: source must be text")
    if kind is not None and kind not in KINDS:
        raise InvalidArgumentError(f"db.load: kind is one of {', '.join(KINDS)}, not {kind!r}")
    files = expand(text)
    fmt = source_format(files[0], format)
    existing = db.catalog.get(into) if into is not None else None
    name = into if into is not None else default_name(text)
    if existing is None and into is None:
        existing = db.catalog.get(name)
    have = _kind_of(existing.kind) if existing is not None else None
    if have is not None and kind is not None and kind != have:
        raise LoadError(f"{name!r} is a {have}, not a {kind}; load into another name")
    target = have or kind or ("array" if fmt in _KIND_FORMATS["array"] else _DEFAULT_KIND[fmt])
    if fmt not in _KIND_FORMATS[target]:
        raise LoadError(
            f"{files[0]}: a {fmt} file cannot be loaded into a {target}; a {target} loads "
            f"{', '.join(sorted(_KIND_FORMATS[target]))}"
        )
    if existing is not None:
        name = existing.name
    _check_options(target, options)
    total = sum(path_bytes(f) for f in files)
    task = f"load {text} into {name}"
    with tracker(task, total, "bytes", progress, cancel, "db.load") as watch:
        watch.advance(0)  # the first event: the load has begun
        # an object the load makes is seen by others only once it is whole, and a writer
        # killed mid-load leaves it for the next writer to drop
        with objects.provisionally():
            loaded = _LOADERS[target](
                _Target(db, objects), files, fmt, name, existing is not None, watch, options
            )
    return Loaded(name, target, existing is None, len(files), loaded[0], total, loaded[1])


def _kind_of(catalog_kind: str) -> str:
    if catalog_kind in KINDS:  # (the catalog calls each loadable kind by the same name)
        return catalog_kind
    raise LoadError(f"a {catalog_kind} cannot be loaded into; give another name")


def _check_options(kind: str, options: dict[str, Any]) -> None:
    allowed = {"array": _ARRAY_OPTIONS, "stream": _STREAM_OPTIONS}.get(kind, set())
    unknown = sorted(set(options) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "no options"
        raise InvalidArgumentError(
            f"db.load: a load into a {kind} takes {takes}; not {', '.join(unknown)}"
        )
    if "durable" in options and not isinstance(options["durable"], bool):
        raise InvalidArgumentError(f"db.load: durable is True or False, not {options['durable']!r}")


def path_bytes(path: str) -> int:
    """Bytes of a file, or of every file under a directory (a Zarr store)."""
    if os.path.isdir(path):
        return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    return os.path.getsize(path)


# --- arrays -------------------------------------------------------------------------------
def _load_array(
    db: Any, files: list[str], fmt: str, name: str, exists: bool, watch: Tracker, options: Any
) -> tuple[int, str]:
    if not exists:
        from tesseradb.catalog import validate_name

        validate_name(name, "array")
    array, cells = load_arrays(
        db.objects, files, fmt, name, ArrayLoad(**options), exists, watch, db.executor
    )
    watch.set_total(watch.done)
    return cells, repr(array)


# --- plain tables (DuckDB's readers) ---------------------------------------------------------
def _load_table(
    db: Any, files: list[str], fmt: str, name: str, exists: bool, watch: Tracker, options: Any
) -> tuple[int, str]:

    quoted = quote_identifier(name)
    before = db.sql(f"SELECT count(*) FROM {quoted}").scalar() if exists else 0
    if fmt == "arrow":
        import pyarrow as pa

        tables = [_read_arrow(f) for f in files]
        source = "tessera_load_arrow"
        try:
            db.register(source, pa.concat_tables(tables) if len(tables) > 1 else tables[0])
        except pa.ArrowInvalid as err:
            raise LoadError(f"{files[0]}: the files' columns differ: {err}") from None
        select, params = f"SELECT * FROM {source}", None
    else:
        reader = {
            "csv": "read_csv",
            "parquet": "read_parquet",
            "json": "read_json",
            "jsonl": "read_json",
        }[fmt]
        source = None
        select, params = f"SELECT * FROM {reader}(?)", [files]
    statement = (
        f"INSERT INTO {quoted} BY NAME {select}" if exists else f"CREATE TABLE {quoted} AS {select}"
    )
    part = _Part(watch)
    try:
        db.sql(statement, params, progress=part, cancel=watch.cancel_token or Cancel())
    except TesseraError as err:
        if isinstance(err, (LoadError, CancelledError)):
            raise
        raise LoadError(f"{files[0] if len(files) == 1 else files}: {err}") from None
    finally:
        if source is not None:
            db.unregister(source)
    rows = db.sql(f"SELECT count(*) FROM {quoted}").scalar() - before
    schema = db.schema(name)
    return rows, "\n".join(f"  {f.name} {f.type}" for f in schema)


class _Part:
    """A sub-operation's progress (percent) folded into the load's tracker (bytes)."""

    def __init__(self, watch: Tracker) -> None:
        self.watch = watch
        self._seen = 0

    def __call__(self, event: Any) -> None:
        total = self.watch.total or 0
        share = int(total * (event.fraction or 0))
        if share > self._seen:
            self.watch.advance(share - self._seen)
            self._seen = share


def _read_arrow(path: str) -> Any:
    import pyarrow as pa

    try:
        source = pa.memory_map(path)
        try:
            return pa.ipc.open_file(source).read_all()
        except pa.ArrowInvalid:
            source.seek(0)
            return pa.ipc.open_stream(source).read_all()
    except (pa.ArrowInvalid, OSError) as err:
        raise LoadError(f"{path}: not an Arrow IPC file or stream: {err}") from None


# --- record streams ----------------------------------------------------------------------
def _load_stream(
    db: Any, files: list[str], fmt: str, name: str, exists: bool, watch: Tracker, options: Any
) -> tuple[int, str]:
    descriptor = options.get("descriptor")
    header = options.get("header")
    if exists:
        stream = db.stream(name)
    else:
        if descriptor is None:
            if fmt == "binary":
                raise LoadError(
                    f"{files[0]}: packed binary records need their descriptor (descriptor=)"
                )
            descriptor = infer_descriptor(files[0], fmt, options.get("index"))
        stream = db.create_stream(name, descriptor)
    try:
        # a load that returned is on disk (durable=False: queryable at once, on disk within
        # the stream's writer period, as a plain ingest)
        durable = options.get("durable", True)
        if fmt == "csv" and len(files) == 1:  # the stream reads it, telling its bytes
            records = stream.ingest(
                files[0],
                header=header,
                durable=durable,
                progress=_Part(watch),
                cancel=watch.cancel_token,
            )
        else:
            parts = _record_parts(files, fmt, stream, watch)
            records = stream.ingest(
                parts, header=header, durable=durable, cancel=watch.cancel_token
            )
    except BaseException:
        if not exists:
            db.drop(name)
        raise
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


# --- collections -------------------------------------------------------------------------
def _load_collection(
    db: Any, files: list[str], fmt: str, name: str, exists: bool, watch: Tracker, options: Any
) -> tuple[int, str]:
    collection = db.collection(name) if exists else db.create_collection(name)
    try:
        lines = _Lines(files, fmt, watch)
        try:
            count = collection.load_jsonl(lines)
        except DocumentError as err:
            raise type(err)(lines.locate(str(err))) from None
    except BaseException:
        if not exists:
            db.drop(name)
        raise
    return count, f"collection {collection.name} ({collection.count():,} objects)"


class _Lines:
    """The JSON objects of the files as lines (a JSON array or object becomes one line per
    object), counting bytes into the load's tracker; ``locate`` turns "line N" of the
    chained lines into the file and its own line."""

    def __init__(self, files: list[str], fmt: str, watch: Tracker) -> None:
        self.files = files
        self.fmt = fmt
        self.watch = watch
        self.starts: list[tuple[int, str, bool]] = []  # (first line number, file, lines?)

    def __iter__(self) -> Iterator[bytes]:
        number = 0
        for path in self.files:
            self.starts.append((number + 1, path, True))
            if self.fmt == "json" and not _looks_like_lines(path):
                self.starts[-1] = (number + 1, path, False)
                for line in _json_objects(path, self.watch):
                    number += 1
                    yield line
                continue
            with open(path, "rb") as handle:
                for line in handle:
                    number += 1
                    self.watch.advance(len(line))
                    yield line
        self.watch.check()  # the load commits once the lines run out: a cancel stops it here

    def locate(self, message: str) -> str:
        found = re.search(r"\bline (\d+)", message)
        if not found or not self.starts:
            return f"{self.files[0]}: {message}" if len(self.files) == 1 else message
        number = int(found.group(1))
        first, path, lines = max((s for s in self.starts if s[0] <= number), default=self.starts[0])
        where = f"line {number - first + 1}" if lines else f"object {number - first + 1}"
        return f"{path}, " + message.replace(found.group(0), where, 1)


def _looks_like_lines(path: str) -> bool:
    """Whether a .json file holds one object per line (JSON lines) rather than one value."""
    with open(path, "rb") as handle:
        head = handle.read(1 << 16).lstrip()
    if head.startswith(b"["):
        return False
    first, _, rest = head.partition(b"\n")
    return bool(rest.strip()) and first.rstrip().endswith(b"}")


def _json_objects(path: str, watch: Tracker) -> Iterator[bytes]:
    """The objects of a JSON file holding an object or an array of objects, one per line."""
    import json

    with open(path, "rb") as handle:
        text = handle.read()
    watch.advance(len(text))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise LoadError(f"{path}, line {err.lineno}, column {err.colno}: {err.msg}") from None
    except UnicodeDecodeError as err:
        raise LoadError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except RecursionError:
        raise LoadError(
            f"{path}: JSON nested too deeply (a document nests at most "
            "100 levels; docs/reliability.md)"
        ) from None
    items = value if isinstance(value, list) else [value]
    for k, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise LoadError(
                f"{path}: item {k} of the array is a {type(item).__name__}, not an object"
            )
        yield json.dumps(item, ensure_ascii=False).encode()


_LOADERS = {
    "array": _load_array,
    "table": _load_table,
    "stream": _load_stream,
    "collection": _load_collection,
}
