"""Writing a stream of Arrow rows to a Parquet, CSV, JSON (lines) or Arrow IPC file.

Shared by exports, query results and the CLI; at the bottom of the import graph
(DuckDB's COPY writes the text formats, so every DuckDB type keeps its form).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tesseradb._sqltext import quote_literal
from tesseradb.errors import ExportError
from tesseradb.progress import Tracker

__all__ = ["JSON_FILE_SUFFIXES", "ROW_FILE_SUFFIXES", "write_rows"]

# file name endings of the row formats every row reader knows (streams and plain tables
# load them; JSON besides for tables and collections)
ROW_FILE_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "csv",
    ".csv.gz": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
}
JSON_FILE_SUFFIXES = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def write_rows(
    run: Callable[[Callable[[Any], None]], Any], path: str, fmt: str, watch: Tracker | None
) -> int:
    """Write the rows ``run`` streams to its sink into ``path`` as ``fmt``; the row count."""
    import duckdb
    import pyarrow as pa

    written = [0]
    failed: list[BaseException] = []  # what stopped the rows (a cancel), raised as itself

    def sink(reader: pa.RecordBatchReader) -> None:
        def batches() -> Iterator[pa.RecordBatch]:
            try:
                for batch in reader:
                    if watch is not None:
                        watch.advance(batch.num_rows)
                    written[0] += batch.num_rows
                    yield batch
            except BaseException as err:
                failed.append(err)
                raise

        counted = pa.RecordBatchReader.from_batches(reader.schema, batches())
        if fmt == "arrow":
            with pa.OSFile(path, "wb") as out, pa.ipc.new_file(out, counted.schema) as writer:
                for batch in counted:
                    writer.write_batch(batch)
            return
        copy = {
            "parquet": "FORMAT parquet",
            "csv": "FORMAT csv, HEADER true",
            "jsonl": "FORMAT json",
            "json": "FORMAT json, ARRAY true",
        }[fmt]
        con = duckdb.connect()
        try:
            con.register("tessera_rows", counted)
            con.execute(f"COPY tessera_rows TO {quote_literal(path)} ({copy})")
        except duckdb.Error as err:
            if failed:
                raise failed[0] from None
            raise ExportError(f"{path}: the rows cannot be written as {fmt}: {err}") from None
        finally:
            con.close()

    run(sink)
    return written[0]
