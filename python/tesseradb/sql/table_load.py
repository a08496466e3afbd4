"""Loading files into a plain table (``db.load``): CSV, Parquet, JSON and Arrow IPC read by
DuckDB's own readers in one statement (Arrow through a registered relation)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb._rows import JSON_FILE_SUFFIXES, ROW_FILE_SUFFIXES
from tesseradb._sqltext import quote_identifier
from tesseradb.errors import CancelledError, LoadError, TesseraError
from tesseradb.progress import Cancel, PartOf

if TYPE_CHECKING:
    from tesseradb.kinds import LoadRequest

__all__ = ["TABLE_SUFFIXES", "load_table"]

TABLE_SUFFIXES = {**ROW_FILE_SUFFIXES, **JSON_FILE_SUFFIXES}  # (DuckDB's readers)


def load_table(request: LoadRequest) -> tuple[int, str]:
    """Load ``request``'s files with DuckDB's readers: ``CREATE TABLE ... AS`` a new table,
    ``INSERT ... BY NAME`` into one that exists; one statement, all or nothing."""
    db, files, fmt, name, exists = (
        request.database,
        request.files,
        request.format,
        request.name,
        request.exists,
    )
    watch = request.watch
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
    part = PartOf(watch)
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
