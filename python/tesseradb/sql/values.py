"""Exact values of every DuckDB type, whatever way a result is taken out.

A statement's rows are fetched from DuckDB as Arrow with ``arrow_lossless_conversion``
on, so that no value is lost on the way (a ``UHUGEINT`` beyond 10^38, a ``TIMETZ``'s
offset, a ``BIT`` string), and each column keeps the DuckDB type it had. Python values,
pandas and numpy are then made by DuckDB itself from that Arrow table, cast back to the
recorded types (an ``ENUM``, a ``ROW`` or a ``UUID`` that Arrow carries as something
else), so they are the very values DuckDB's own API gives; and ``arrow()`` is DuckDB's
own Arrow for the user's Arrow settings. Columns of types whose values Arrow and DuckDB
give alike (integers, floats, booleans, text, blobs) skip the round trip.

The conversions run on a DuckDB instance of this module's own, with the settings that
change them (time zone, calendar, the Arrow settings) copied from the statement's
session, so a result can still be read after its database is closed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import pyarrow as pa

__all__ = [
    "CONVERSION_SETTINGS",
    "Conversion",
    "arrow_lossy",
    "as_duckdb_arrow",
    "as_duckdb_arrow_batches",
    "conversion_of",
    "described",
    "duckdb_types",
    "python_rows",
    "to_numpy",
    "to_pandas",
]

# The settings that change how DuckDB turns its values into Python, pandas or Arrow.
CONVERSION_SETTINGS = (
    "TimeZone",
    "Calendar",
    "arrow_large_buffer_size",
    "arrow_output_list_view",
    "arrow_output_version",
)

# Types whose Python values pyarrow gives exactly as DuckDB does.
_PLAIN = re.compile(
    r"(BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT"
    r"|FLOAT|DOUBLE|VARCHAR|BLOB|DECIMAL\(\d+,\d+\))"
)
# Types whose default Arrow form differs from their lossless one (a test asks DuckDB).
_LOSSY = re.compile(r"\b(U?HUGEINT|BIT|TIME WITH TIME ZONE|UUID|BOOLEAN|JSON)\b")
# ... of which pyarrow turns these, at the top level, into the default form itself
_CHEAP = ("BOOLEAN", "JSON")


@dataclass(frozen=True)
class Conversion:
    """What a result's conversions need besides its rows: the DuckDB type of each column,
    and the session's settings that change conversions (``lossless``: the user's own
    ``arrow_lossless_conversion``)."""

    types: tuple[str, ...]
    settings: tuple[tuple[str, str], ...] = ()
    lossless: bool = False

    @property
    def plain(self) -> bool:
        """Every column of a type pyarrow turns into the values DuckDB gives."""
        return all(_PLAIN.fullmatch(t) for t in self.types)

    def described(self, schema: pa.Schema) -> pa.Schema:
        """``schema`` carrying this conversion in its metadata (what the server sends)."""
        import json

        about = {"types": self.types, "settings": self.settings, "lossless": self.lossless}
        return schema.with_metadata({**(schema.metadata or {}), _METADATA: json.dumps(about)})


_METADATA = b"tessera.conversion"


def conversion_of(schema: pa.Schema) -> Conversion | None:
    """The conversion a schema carries (:meth:`Conversion.described`), if it carries one."""
    import json

    about = (schema.metadata or {}).get(_METADATA)
    if about is None:
        return None
    try:
        found = json.loads(about)
        return Conversion(
            tuple(str(t) for t in found["types"]),
            tuple((str(n), str(v)) for n, v in found["settings"]),
            bool(found["lossless"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def arrow_lossy(types: tuple[str, ...]) -> bool:
    """Whether DuckDB's default Arrow form of these types differs from the lossless one."""
    return any(_LOSSY.search(t) for t in types)


def duckdb_types(schema: pa.Schema) -> tuple[str, ...]:
    """The DuckDB type of each column of an Arrow table made without DuckDB (an answer of
    a relation's own): the type DuckDB would have given the column. A ``decimal128(38,
    0)`` is a sum of integers, which DuckDB gives as a ``HUGEINT``."""
    import pyarrow as pa

    names = {
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INTEGER",
        pa.int64(): "BIGINT",
        pa.uint8(): "UTINYINT",
        pa.uint16(): "USMALLINT",
        pa.uint32(): "UINTEGER",
        pa.uint64(): "UBIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
        pa.string(): "VARCHAR",
        pa.large_string(): "VARCHAR",
        pa.string_view(): "VARCHAR",
        pa.binary(): "BLOB",
        pa.large_binary(): "BLOB",
        pa.decimal128(38, 0): "HUGEINT",
    }
    types = [names.get(f.type) for f in schema]
    if all(t is not None for t in types):
        return tuple(types)  # type: ignore[arg-type]
    read = _cursor().from_arrow(schema.empty_table()).types
    return tuple(t if t is not None else str(r) for t, r in zip(types, read, strict=True))


_local = threading.local()
_instance_lock = threading.Lock()
_instance: duckdb.DuckDBPyConnection | None = None


def _cursor(settings: tuple[tuple[str, str], ...] = (), lossless: bool = True) -> Any:
    """This thread's cursor of the conversion instance, set to ``settings``."""
    global _instance
    cursor = getattr(_local, "cursor", None)
    if cursor is None:
        import duckdb

        with _instance_lock:
            if _instance is None:
                _instance = duckdb.connect(":memory:")
                _instance.execute("SET python_enable_replacements = false")
            cursor = _local.cursor = _instance.cursor()
            _local.applied = {}
    wanted = dict(settings)
    wanted["arrow_lossless_conversion"] = "true" if lossless else "false"
    applied: dict[str, str] = _local.applied
    for name in set(applied) | set(wanted):
        value = wanted.get(name)
        if applied.get(name) == value:
            continue
        if value is None:
            cursor.execute(f"RESET SESSION {name}")
            del applied[name]
        else:
            cursor.execute(f"SET SESSION {name} = '{value.replace(chr(39), chr(39) * 2)}'")
            applied[name] = value
    return cursor


def _converted(what: str, convert: Any) -> Any:
    """``convert()``, with DuckDB's refusal (a type numpy cannot hold) said as ours."""
    import duckdb

    from tesseradb.errors import ExportError

    try:
        return convert()
    except duckdb.Error as err:
        raise ExportError(f"Result.{what}: {str(err).splitlines()[0]}") from None
    except (OverflowError, ValueError) as err:
        # (DuckDB's conversion of a value Python's own type cannot hold: an INTERVAL of
        # more than 999,999,999 days is no timedelta)
        raise ExportError(
            f"Result.{what}: a value has no Python form here ({err}); "
            "Result.arrow() gives every value"
        ) from None


def _relation(table: pa.Table, conversion: Conversion, lossless: bool) -> Any:
    """``table`` as a DuckDB relation of the recorded types, columns named c0, c1, ..."""
    names = [f"c{i}" for i in range(table.num_columns)]
    cursor = _cursor(conversion.settings, lossless)
    relation = cursor.from_arrow(table.rename_columns(names))
    read = [str(t) for t in relation.types]
    if read == list(conversion.types):
        return relation
    items = []
    for name, got, wanted in zip(names, read, conversion.types, strict=True):
        items.append(name if got == wanted else f"CAST({name} AS {wanted}) AS {name}")
    try:
        return relation.project(", ".join(items))
    except Exception:  # a type no cast reaches (AGGREGATE_STATE): the values as read
        return relation


def python_rows(table: pa.Table, conversion: Conversion) -> list[tuple[Any, ...]]:
    """The rows as DuckDB's ``fetchall`` gives them."""
    if conversion.plain:
        columns = [c.to_pylist() for c in table.columns]
        return list(zip(*columns, strict=True)) if columns else []
    if table.num_columns == 0:
        return []
    rows: list[tuple[Any, ...]] = _converted(
        "fetchall", lambda: _relation(table, conversion, True).fetchall()
    )
    return rows


def to_pandas(table: pa.Table, conversion: Conversion) -> pd.DataFrame:
    """The rows as DuckDB's ``df()`` gives them."""
    if table.num_columns == 0:
        import pandas as pd

        return pd.DataFrame(index=range(table.num_rows))
    frame = _converted("df", lambda: _relation(table, conversion, True).df())
    frame.columns = table.column_names
    return frame


def to_numpy(table: pa.Table, conversion: Conversion) -> dict[str, Any]:
    """Column name to numpy array as DuckDB's ``fetchnumpy()`` gives them (columns with
    NULLs are masked arrays)."""
    if table.num_columns == 0:
        return {}
    arrays = _converted("numpy", lambda: _relation(table, conversion, True).fetchnumpy())
    return dict(zip(table.column_names, arrays.values(), strict=True))


def as_duckdb_arrow(table: pa.Table, conversion: Conversion) -> pa.Table:
    """The rows as DuckDB's ``arrow()`` gives them under the session's Arrow settings."""
    if conversion.lossless or not arrow_lossy(conversion.types):
        return table  # (fetched under the session's other Arrow settings already)
    if all(t in _CHEAP or not _LOSSY.search(t) for t in conversion.types):
        return _cheaply_to_default(table, conversion.types)
    converted = _converted(
        "arrow", lambda: _relation(table, conversion, conversion.lossless).to_arrow_table()
    )
    return converted.rename_columns(table.column_names)


def _cheaply_to_default(table: pa.Table, types: tuple[str, ...]) -> pa.Table:
    """Top-level BOOLEAN (lossless: ``arrow.bool8``) and JSON (``arrow.json``) columns in
    DuckDB's default form (``bool``, ``string``), without a round trip through DuckDB."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for column, kind in zip(table.columns, types, strict=True):
        if kind in _CHEAP and isinstance(column.type, pa.BaseExtensionType):
            storage = pa.chunked_array(
                [chunk.storage for chunk in column.chunks], column.type.storage_type
            )
            column = pc.cast(storage, pa.bool_()) if kind == "BOOLEAN" else storage
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def text_columns(table: pa.Table, conversion: Conversion) -> pa.Table:
    """Every column as DuckDB writes its values as text (``CAST(x AS VARCHAR)``: a list as
    ``[1, 2]``, a struct as ``{'a': 1}``, an interval as ``1 month``); NULLs stay NULL."""
    if table.num_columns == 0:
        return table
    relation = _relation(table, conversion, True)
    items = ", ".join(f"CAST(c{i} AS VARCHAR) AS c{i}" for i in range(table.num_columns))
    texts = _converted("text", lambda: relation.project(items).to_arrow_table())
    return texts.rename_columns(table.column_names)


def json_lines(table: pa.Table, conversion: Conversion) -> list[str]:
    """Each row as the JSON object DuckDB's ``to_json`` makes of it."""
    if table.num_columns == 0:
        return []
    relation = _relation(table, conversion, True)
    fields = ", ".join(f"{_quoted_key(name)}: c{i}" for i, name in enumerate(table.column_names))
    rows = _converted(
        "json", lambda: relation.project(f"to_json({{{fields}}})::VARCHAR").fetchall()
    )
    return [row[0] for row in rows]


def _quoted_key(name: str) -> str:
    return "'" + name.replace("'", "''") + "'"


def write_parquet(table: pa.Table, conversion: Conversion, path: str) -> None:
    """The rows as DuckDB writes them to Parquet."""
    relation = _relation(table, conversion, True)
    names = ", ".join(
        f'c{i} AS "{name.replace(chr(34), chr(34) * 2)}"'
        for i, name in enumerate(table.column_names)
    )
    _converted("to_parquet", lambda: relation.project(names).write_parquet(path))


def write_csv(table: pa.Table, conversion: Conversion, path: str) -> None:
    """The rows as DuckDB writes them to CSV (with a header line)."""
    relation = _relation(table, conversion, True)
    names = ", ".join(
        f'c{i} AS "{name.replace(chr(34), chr(34) * 2)}"'
        for i, name in enumerate(table.column_names)
    )
    _converted("to_csv", lambda: relation.project(names).write_csv(path, header=True))


def as_duckdb_arrow_batches(
    reader: pa.RecordBatchReader, conversion: Conversion
) -> pa.RecordBatchReader:
    """``reader``'s lossless batches in DuckDB's default Arrow form, as they come."""
    import pyarrow as pa

    first = as_duckdb_arrow(reader.schema.empty_table(), conversion)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield from as_duckdb_arrow(pa.Table.from_batches([batch]), conversion).to_batches()

    return pa.RecordBatchReader.from_batches(first.schema, batches())


def described(reader: pa.RecordBatchReader, conversion: Conversion) -> pa.RecordBatchReader:
    """``reader`` whose schema carries ``conversion`` (see :meth:`Conversion.described`)."""
    import pyarrow as pa

    schema = conversion.described(reader.schema)
    return pa.RecordBatchReader.from_batches(
        schema, (pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in reader)
    )
