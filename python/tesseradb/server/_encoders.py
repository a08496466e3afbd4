"""Answers of the API's SQL as they stream: batches handed from the statement's thread to
the response, and the Arrow IPC, JSON and CSV encoders."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from typing import TYPE_CHECKING, Any

from tesseradb.server._http import ARROW_STREAM, SMALL_ANSWER_BYTES, Running, jsonable

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["END", "Batches", "encoder_for"]

END = object()  # the statement has no more batches


class Batches:
    """Arrow batches handed from the statement's thread to the response: an asyncio queue
    fed from the thread, with backpressure (the thread waits while four are unread)."""

    def __init__(self, run: Running, loop: asyncio.AbstractEventLoop) -> None:
        self.run = run
        self.loop = loop
        self.items: asyncio.Queue[Any] = asyncio.Queue()
        self.room = threading.Semaphore(4)
        self.whole: tuple[pa.Schema, list[pa.RecordBatch]] | None = None

    def put(self, item: Any) -> None:
        while not self.room.acquire(timeout=0.2):
            if self.run.cancel.cancelled:  # the response is gone: stop waiting
                self.run.cancel.check(f"SQL statement {self.run.id}")
        self.loop.call_soon_threadsafe(self.items.put_nowait, item)

    async def get(self) -> Any:
        item = await self.items.get()
        self.room.release()
        return item

    def sink(self, reader: pa.RecordBatchReader) -> None:
        """Keep a small answer whole, for :meth:`end` to hand over once (each handoff
        between threads costs a wake-up), and hand a large one over batch by batch as it
        comes."""
        held: list[pa.RecordBatch] | None = []
        size = 0
        for batch in reader:
            if held is None:
                self.put(("batch", batch))
                continue
            held.append(batch)
            size += batch.nbytes
            if size > SMALL_ANSWER_BYTES:
                self.put(("schema", reader.schema))
                for kept in held:
                    self.put(("batch", kept))
                held = None
        if held is not None:
            self.whole = (reader.schema, held)

    def end(self) -> None:
        """The statement has ended (and committed): the small answer it kept, whole, or
        the end of the batches."""
        if self.whole is not None:
            self.put(("whole", *self.whole))
        else:
            self.put((END, None))


def encoder_for(fmt: str, offset: int, limit: int | None) -> Any:
    return {"arrow": _ArrowEncoder, "json": _JSONEncoder, "csv": _CSVEncoder}[fmt](offset, limit)


class _ArrowEncoder:
    """An Arrow IPC stream: the schema's message, each batch's, the end-of-stream marker
    (each message serialized once, straight into a buffer that is sent as it is)."""

    media = ARROW_STREAM
    _EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"

    def __init__(self, offset: int, limit: int | None) -> None:
        pass

    def start(self, schema: pa.Schema) -> Any:
        return memoryview(schema.serialize())

    def batch(self, batch: pa.RecordBatch) -> Any:
        return memoryview(batch.serialize())

    def end(self) -> bytes:
        return self._EOS

    @property
    def full(self) -> bool:
        return False


class _JSONEncoder:
    """``{"columns": [...], "types": [...], "rows": [[...], ...], "more": bool}``, row by row."""

    media = "application/json"

    def __init__(self, offset: int, limit: int | None) -> None:
        self.skip = offset
        self.left = limit
        self.more = False
        self.first_row = True

    def start(self, schema: pa.Schema) -> bytes:
        from tesseradb.sql.values import Conversion, conversion_of, duckdb_types

        self.conversion = conversion_of(schema) or Conversion(duckdb_types(schema))
        head = {"columns": schema.names, "types": list(self.conversion.types)}
        return (json.dumps(head)[:-1] + ', "rows": [').encode()

    def batch(self, batch: pa.RecordBatch) -> bytes:
        if self.skip >= batch.num_rows:
            self.skip -= batch.num_rows
            return b""
        batch = batch.slice(self.skip)
        self.skip = 0
        if self.left is not None:
            if batch.num_rows > self.left:
                self.more = True
                batch = batch.slice(0, self.left)
            self.left -= batch.num_rows
        import pyarrow as pa

        from tesseradb.sql.values import python_rows

        parts = []
        # (the values DuckDB's fetchall gives, made JSON)
        for row in python_rows(pa.Table.from_batches([batch]), self.conversion):
            parts.append(("" if self.first_row else ",") + json.dumps(jsonable(list(row))))
            self.first_row = False
        return "".join(parts).encode()

    @property
    def full(self) -> bool:
        return self.left is not None and self.left <= 0 and self.more

    def end(self) -> bytes:
        return f'], "more": {json.dumps(self.more)}}}'.encode()


class _CSVEncoder:
    media = "text/csv"

    def __init__(self, offset: int, limit: int | None) -> None:
        self.header = True

    def start(self, schema: pa.Schema) -> bytes:
        return b""

    def batch(self, batch: pa.RecordBatch) -> bytes:
        import pyarrow.csv as pacsv

        out = io.BytesIO()
        pacsv.write_csv(batch, out, pacsv.WriteOptions(include_header=self.header))
        self.header = False
        return out.getvalue()

    @property
    def full(self) -> bool:
        return False

    def end(self) -> bytes:
        return b""
