"""Writing a collection's objects to a file (``db.export``): JSON lines, or one JSON array,
in objid order, streamed from the backend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb._sqltext import quote_identifier

if TYPE_CHECKING:
    from tesseradb.progress import Tracker

__all__ = ["export_collection"]


def export_collection(db: Any, name: str, path: str, fmt: str, watch: Tracker) -> int:
    """The objects as JSON lines (or one JSON array), in objid order."""
    count = [0]

    def sink(reader: Any) -> None:
        with open(path, "wb") as out:
            out.write(b"[" if fmt == "json" else b"")
            for batch in reader:
                watch.advance(batch.num_rows)
                docs = (
                    batch.column(0).storage
                    if hasattr(batch.column(0), "storage")
                    else batch.column(0)
                )
                for doc in docs.to_pylist():
                    if fmt == "json":
                        out.write(b",\n" if count[0] else b"\n")
                    out.write(doc.encode())
                    if fmt == "jsonl":
                        out.write(b"\n")
                    count[0] += 1
            out.write(b"\n]\n" if fmt == "json" else b"")

    db.stream_sql(f"SELECT doc FROM {quote_identifier(name)}", sink)
    return count[0]
