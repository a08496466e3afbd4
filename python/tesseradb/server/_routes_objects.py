"""Reading the database's objects: the catalog, one object's description, the check, array
slabs and cells, stream ranges and plots, a collection's documents."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from tesseradb.server._http import (
    ARROW_STREAM,
    NPY,
    HTTPError,
    Server,
    answer_format,
    jsonable,
    user_of,
)

if TYPE_CHECKING:
    from starlette.requests import Request


async def catalog(server: Server, request: Request) -> Response:
    info = await run_in_threadpool(server.db.info)
    user = user_of(request)
    objects = [
        {
            "name": o.name,
            "kind": o.kind,
            "rows": o.rows,
            "bytes": o.bytes,
            "created": o.created,
            "modified": o.modified,
        }
        for o in info.objects
        if user.may(server.kind_of(o.name.partition(".")[0]), "read")
    ]
    return JSONResponse({"objects": objects, "bytes": info.bytes, "read_only": info.read_only})


async def describe(server: Server, request: Request) -> Response:
    name = request.path_params["name"]
    entry = server.db.catalog.get(name)
    if entry is None and name not in server.db.tables():
        raise HTTPError(404, f"no object {name!r} in the database", "ObjectNotFoundError")
    server.require(user_of(request), server.kind_of(name), "read", name)
    return JSONResponse(jsonable(await run_in_threadpool(server.db.describe, name)))


async def check(server: Server, request: Request) -> Response:
    server.require(user_of(request), "*", "read")
    report = await run_in_threadpool(server.db.check)
    return JSONResponse(
        {
            "ok": report.ok,
            "text": str(report),
        }
    )


async def slab(server: Server, request: Request) -> Response:
    from tesseradb.server._views import read_slab

    name = server.object_kind(request.path_params["name"], "array")
    server.require(user_of(request), "array", "read", name)
    q = request.query_params
    choices = {  # (the first is the default: it holds any attributes)
        "arrow": ARROW_STREAM,
        "npy": NPY,
        "json": "application/json",
        "png": "image/png",
    }
    fmt = answer_format(request, choices, q.get("format"))
    data, media = await run_in_threadpool(read_slab, server.db, name, dict(q), fmt, server.options)
    return Response(data, media_type=media)


async def cell(server: Server, request: Request) -> Response:
    from tesseradb.server._views import read_cell

    name = server.object_kind(request.path_params["name"], "array")
    server.require(user_of(request), "array", "read", name)
    q = request.query_params
    return JSONResponse(
        jsonable(
            await run_in_threadpool(read_cell, server.db, name, q.get("at", ""), q.get("version"))
        )
    )


async def stream_range(server: Server, request: Request) -> Response:
    from tesseradb.server._views import stream_range as read_range

    name = server.object_kind(request.path_params["name"], "stream")
    server.require(user_of(request), "stream", "read", name)
    choices = {"arrow": ARROW_STREAM, "json": "application/json"}
    fmt = answer_format(request, choices, request.query_params.get("format"))
    data, media = await run_in_threadpool(
        read_range, server.db, name, dict(request.query_params), fmt
    )
    return Response(data, media_type=media)


async def stream_plot(server: Server, request: Request) -> Response:
    from tesseradb.server._views import stream_plot as plot

    name = server.object_kind(request.path_params["name"], "stream")
    server.require(user_of(request), "stream", "read", name)
    png = await run_in_threadpool(plot, server.db, name, dict(request.query_params))
    return Response(png, media_type="image/png")


async def documents(server: Server, request: Request) -> Response:
    name = server.object_kind(request.path_params["name"], "collection")
    server.require(user_of(request), "collection", "read", name)
    q = request.query_params
    limit = min(int(q.get("limit", "50")), 1000)
    offset = int(q.get("offset", "0"))
    if limit < 0 or offset < 0:
        raise HTTPError(400, "offset and limit are not negative")
    rows = await run_in_threadpool(
        server.db.argo, f"SELECT * FROM {name} ORDER BY objid LIMIT {limit} OFFSET {offset}"
    )
    return JSONResponse({"documents": jsonable(rows)})
