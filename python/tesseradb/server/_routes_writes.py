"""Writing through the API: stream ingest, collection inserts and loads, and server-side
file loads (admins only); each answers once what it wrote is committed."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from tesseradb.errors import CancelledError
from tesseradb.server._http import (
    ARROW_STREAM,
    NDJSON,
    HTTPError,
    Server,
    field,
    read_body,
    read_json,
    user_of,
)

if TYPE_CHECKING:
    from starlette.requests import Request


async def ingest(server: Server, request: Request) -> Response:
    import pyarrow as pa

    name = server.object_kind(request.path_params["name"], "stream")
    server.require(user_of(request), "stream", "write", name)
    raw = await read_body(request, server, (ARROW_STREAM,))
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(raw))
        table = reader.read_all()
    except (pa.ArrowInvalid, OSError) as err:
        raise HTTPError(400, f"the body is not an Arrow IPC stream ({err})") from None
    stream = server.db.stream(name)
    # acknowledged only once durable: a write the client saw succeed survives kill -9
    records = await run_in_threadpool(lambda: stream.ingest(table, durable=True))
    return JSONResponse({"records": records})


async def insert(server: Server, request: Request) -> Response:
    name = server.object_kind(request.path_params["name"], "collection")
    server.require(user_of(request), "collection", "write", name)
    body = await read_json(request, server)
    documents = body if isinstance(body, list) else [body]
    if not all(isinstance(d, dict) for d in documents):
        raise HTTPError(400, "insert takes a JSON object or a list of objects")
    ids = await run_in_threadpool(server.db.collection(name).insert_many, documents)
    return JSONResponse({"inserted": len(ids), "objids": ids})


async def load(server: Server, request: Request) -> Response:
    name = server.object_kind(request.path_params["name"], "collection")
    server.require(user_of(request), "collection", "write", name)
    raw = await read_body(request, server, (NDJSON, "application/jsonl"))
    lines = io.BytesIO(raw)
    count = await run_in_threadpool(server.db.collection(name).load_jsonl, lines)
    return JSONResponse({"loaded": count})


async def load_file(server: Server, request: Request) -> Response:
    """``server.db.load`` of a file on the server's machine (admins only: it reads the server's
    files), listed with its progress among the running statements until it ends."""
    user = user_of(request)
    if not user.is_admin:
        raise HTTPError(403, "loading the server's files is for admins only", "Refused")
    if server.options.read_only:
        raise HTTPError(403, "the server is read-only", "ReadOnlyError")
    body = await read_json(request, server)
    source = field(body, "source", str)
    into = field(body, "into", str, False)
    kind = field(body, "kind", str, False)
    options = field(body, "options", dict, False, {})
    run = server.start(user, f"load {source}" + (f" into {into}" if into else ""), None)
    try:
        loaded = await run_in_threadpool(
            lambda: server.db.load(
                source, into=into, kind=kind, progress=run.update, cancel=run.cancel, **options
            )
        )
    except CancelledError:
        raise HTTPError(409, f"the load of {source} was cancelled; nothing was kept") from None
    finally:
        server.finish(run)
    return JSONResponse(
        {
            "name": loaded.name,
            "kind": loaded.kind,
            "created": loaded.created,
            "items": loaded.items,
            "bytes": loaded.bytes,
            "query_id": run.id,
        }
    )
