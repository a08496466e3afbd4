"""CSV files into a stream: parsed by pyarrow block by block in bounded memory, every
field checked against the record descriptor, an error named by line and field.

A record never spans lines, so a file is cut into blocks of whole lines; the next
block is parsed on a thread while this one's segments are built. pyarrow's
messages do not say which line is wrong, so on an error (and once per file for
infinities, which pyarrow gives for numbers past float range) a slow reader
looks at the texts to say where.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import IO, TYPE_CHECKING, Any

from tesseradb.errors import CSVError, open_input
from tesseradb.records._descriptor import DescriptorError, RecordDescriptor

if TYPE_CHECKING:
    import pyarrow as pa


__all__ = ["CSV_BLOCK_BYTES", "csv_tables", "file_size", "is_file", "open_binary"]

CSV_BLOCK_BYTES = 16 << 20  # bytes of CSV text parsed at a time
_FLOAT32_LARGEST = 3.4028234663852886e38


def csv_tables(
    source: Any,
    descriptor: RecordDescriptor,
    conform: Callable[[pa.Table], pa.Table],
    header: bool | None,
    count_bytes: Callable[[int], None] | None = None,
) -> Iterator[pa.Table]:
    """A CSV file's records, conformed by ``conform``, block by block (parsed with
    pyarrow); ``header``: whether the first line names the fields (None: detect);
    ``count_bytes`` is told the bytes read after each block."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = [f.name for f in descriptor.fields]
    where = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<file>"
    with open_binary(source) as stream:
        first = _peek_line(stream)
        columns = _header_names(first) if first is not None else None
        if header is None:
            header = columns is not None and {c.lower() for c in columns} == {
                n.lower() for n in names
            }
        if header:
            if columns is None or sorted(c.lower() for c in columns) != sorted(
                n.lower() for n in names
            ):
                raise CSVError(
                    f"{where}, line 1: the header names {columns}; the record's fields are {names}"
                )
            by_lower = {n.lower(): n for n in names}
            columns = [by_lower[c.lower()] for c in columns]
        else:
            columns = names
        convert = pacsv.ConvertOptions(
            column_types={f.name: f.arrow_type for f in descriptor.fields},
            # records have no NULLs: "nan" is NaN, and an empty field an error
            null_values=[],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        )

        def parse(block: bytes, skip: int) -> pa.Table:
            """One block of whole lines, parsed by pyarrow's threads (without the GIL)."""
            options = pacsv.ReadOptions(column_names=columns, skip_rows=skip, use_threads=True)
            return pacsv.read_csv(pa.BufferReader(block), options, convert_options=convert)

        # Blocks of whole lines (a record never spans lines: newlines in values are
        # not allowed); the next block is parsed on a thread while this one's
        # segments are built, so parsing, kd-trees and writes overlap.
        blocks = _line_blocks(stream, CSV_BLOCK_BYTES)
        infinities_checked = False
        with ThreadPoolExecutor(1, thread_name_prefix="tessera-csv") as pool:
            try:
                block = next(blocks, None)
                skip = 1 if header else 0
                pending = pool.submit(parse, block, skip) if block is not None else None
                while pending is not None:
                    table = pending.result().select(names)
                    size = len(block or b"")
                    block = next(blocks, None)
                    pending = pool.submit(parse, block, 0) if block is not None else None
                    try:
                        conformed = conform(table)
                    except DescriptorError as err:
                        raise _CSVRowError(str(err)) from None
                    if not infinities_checked and _has_infinity(conformed):
                        # pyarrow reads 1e400 as inf: only written infinities are kept
                        # (the slow reader looks at the texts, once for the whole file)
                        if _locate_csv_error(source, descriptor, columns, header):
                            raise _CSVRowError("a number outside its type's range")
                        infinities_checked = True
                    yield conformed
                    if count_bytes is not None:
                        count_bytes(size)
            except (pa.ArrowInvalid, _CSVRowError) as err:
                detail = _locate_csv_error(source, descriptor, columns, header)
                raise CSVError(f"{where}, {detail}" if detail else f"{where}: {err}") from None


class _CSVRowError(Exception):
    """A parsed block does not fit the descriptor: the slow reader then finds the line."""


@contextlib.contextmanager
def open_binary(source: Any) -> Iterator[IO[bytes]]:
    if isinstance(source, (str, os.PathLike)):
        with open_input(source, "CSV file") as f:
            yield f
        return
    if isinstance(source, io.TextIOBase):
        yield io.BytesIO(source.read().encode())  # text mode: pyarrow reads bytes
        return
    yield source


def is_file(data: Any) -> bool:
    """A CSV file: a path or a file object."""
    return isinstance(data, (str, os.PathLike)) or hasattr(data, "read")


def file_size(source: Any) -> int | None:
    """A CSV file's size in bytes (None for a file object that cannot say)."""
    if isinstance(source, (str, os.PathLike)):
        with contextlib.suppress(OSError, ValueError):  # (opening it says what is wrong)
            return os.path.getsize(source)
        return None
    with contextlib.suppress(OSError, AttributeError, ValueError):
        if source.seekable():
            at = source.tell()
            end = source.seek(0, os.SEEK_END)
            source.seek(at)
            return int(end - at)
    return None


def _line_blocks(stream: IO[bytes], size: int) -> Iterator[bytes]:
    """The stream's bytes in blocks of about ``size`` that end at a line's end."""
    rest = b""
    while chunk := stream.read(size):
        data = rest + chunk if rest else chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:  # a line longer than the block: read on
            rest = data
            continue
        yield data[:cut]
        rest = data[cut:]
    if rest:
        yield rest


def _peek_line(stream: IO[bytes]) -> bytes | None:
    """The first line, leaving the stream where it was (None if it cannot be rewound)."""
    if not stream.seekable():
        return None
    at = stream.tell()
    line = stream.readline()
    stream.seek(at)
    return line


def _header_names(line: bytes) -> list[str] | None:
    try:
        row = next(csv.reader([line.decode("utf-8").rstrip("\r\n")]))
    except (UnicodeDecodeError, StopIteration, csv.Error):
        return None
    return [c.strip() for c in row]


def _locate_csv_error(
    source: Any, descriptor: RecordDescriptor, columns: list[str], header: bool
) -> str | None:
    """'line N, field F: problem' for the first row that does not fit, read again slowly."""
    if not isinstance(source, (str, os.PathLike)):
        if not (hasattr(source, "seekable") and source.seekable()):
            return None
        source.seek(0)
        text: Any = (
            source
            if isinstance(source, io.TextIOBase)
            else io.TextIOWrapper(source, encoding="utf-8", newline="")
        )
    else:
        text = open(source, encoding="utf-8", newline="")  # noqa: SIM115
    fields = [descriptor.field(c) for c in columns]
    try:
        reader = csv.reader(text)
        for row in reader:
            if header and reader.line_num == 1:
                continue
            if len(row) != len(fields):
                return f"line {reader.line_num}: {len(row)} fields, the record has {len(fields)}"
            for f, value in zip(fields, row, strict=True):
                problem = _field_problem(f.type, f.array_len, value)
                if problem:
                    return f"line {reader.line_num}, field {f.name!r}: {problem}"
    except (UnicodeDecodeError, csv.Error) as err:
        return f"line {reader.line_num}: {err}"
    finally:
        if isinstance(source, (str, os.PathLike)):
            text.close()
        elif text is not source:
            text.detach()  # leave the caller's file open
    return None


_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "epoch_t": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def _field_problem(kind: str, array_len: int | None, value: str) -> str | None:
    if kind == "char":
        size = len(value.encode("utf-8"))
        if size > (array_len or 0):
            return f"{value!r} is {size} bytes, longer than its array_len of {array_len}"
        return None
    if kind in ("float", "double"):
        try:
            number = float(value)
        except ValueError:
            return f"{value!r} is not a number"
        written_infinity = value.strip().lower().lstrip("+-") in ("inf", "infinity")
        if math.isinf(number) and not written_infinity:
            return f"{value.strip()} is outside the range of {kind}"
        if kind == "float" and math.isfinite(number) and abs(number) > _FLOAT32_LARGEST:
            return f"{value.strip()} is outside the range of float (32-bit)"
        return None
    try:
        number = int(value.strip())
    except ValueError:
        return f"{value!r} is not an integer ({kind})"
    lo, hi = _INT_RANGES[kind]
    if not lo <= number <= hi:
        return f"{number} is outside the range of {kind}"
    return None


def _has_infinity(table: pa.Table) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    return any(
        pc.any(pc.is_inf(column)).as_py()
        for column in table.columns
        if pa.types.is_floating(column.type)
    )
