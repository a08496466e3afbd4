"""The API's SQL: statements streamed as Arrow, JSON or CSV, explain, sessions, Argo/SQL,
and the running statements (list, look at, cancel)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response, StreamingResponse

from tesseradb.errors import CancelledError
from tesseradb.server._encoders import END, Batches, encoder_for
from tesseradb.server._guard import check_statement, may_write
from tesseradb.server._http import (
    ARROW_STREAM,
    HTTPError,
    Server,
    StatementFailed,
    answer_format,
    field,
    jsonable,
    read_json,
    statement_error,
    time_out,
    user_of,
)

if TYPE_CHECKING:
    from starlette.requests import Request


async def sql(server: Server, request: Request) -> Response:
    user = user_of(request)
    body = await read_json(request, server)
    text = field(body, "sql", str)
    params = body.get("params")
    if params is not None and not isinstance(params, (list, dict)):
        raise HTTPError(400, "params are a list (for ?) or an object (for $name)")
    offset = field(body, "offset", int, False, 0)
    limit = field(body, "limit", int, False, None)
    if offset < 0 or (limit is not None and limit < 0):
        raise HTTPError(400, "offset and limit are not negative")
    choices = {"arrow": ARROW_STREAM, "json": "application/json", "csv": "text/csv"}
    fmt = answer_format(request, choices, request.query_params.get("format"))
    if fmt == "json":
        cap = server.options.max_json_rows
        limit = cap if limit is None else min(limit, cap)
    # (the statement's shape is cached by its text: checked here, not on a thread)
    check_statement(text, user.is_admin, user.may, server.kind_of)
    if server.options.read_only and may_write(text):
        raise HTTPError(403, "the server is read-only: it runs queries only", "ReadOnlyError")
    run = server.start(user, text, field(body, "query_id", str, False))
    session, own = server.session(user, request)
    loop = asyncio.get_running_loop()
    batches = Batches(run, loop)
    timer = loop.call_later(server.options.statement_seconds, time_out, run)

    def execute() -> None:
        try:
            # (Arrow and JSON carry every value exactly; CSV is DuckDB's plain Arrow)
            session.stream_sql(
                text,
                batches.sink,
                params,
                progress=run.update,
                cancel=run.cancel,
                exact=fmt != "csv",
            )
            batches.end()
        except BaseException as err:  # handed to the response, which reports it
            with contextlib.suppress(CancelledError):
                batches.put(("error", err))
        finally:
            if own:
                session.close()

    def finish() -> None:
        timer.cancel()
        if not run.finished:
            run.cancel.cancel()  # the client left, or the page is whole
        server.finish(run)

    loop.run_in_executor(server.executor, execute)
    first = await batches.get()
    if first[0] == "error":
        finish()
        raise statement_error(first[1], run, server)
    encoder = encoder_for(fmt, offset, limit)
    head: list[bytes] = []
    if first[0] in (END, "whole"):  # a small answer (or none) goes in one body
        import pyarrow as pa

        if first[0] is END:  # a statement without rows
            head.append(encoder.start(pa.schema([])))
        else:  # (handed over once the statement committed: an acknowledged write is
            # a committed one)
            head.append(encoder.start(first[1]))
            for batch in first[2]:
                run.rows += batch.num_rows
                head.append(encoder.batch(batch))
                if encoder.full:
                    break
        head.append(encoder.end())
        finish()
        return Response(
            b"".join(head), media_type=encoder.media, headers={"X-Tessera-Query": run.id}
        )
    head.append(encoder.start(first[1]))

    async def rows() -> AsyncIterator[bytes]:
        try:
            yield b"".join(head)
            while True:
                item = await batches.get()
                if item[0] is END:
                    break
                if item[0] == "error":
                    # The status is sent, and an Arrow stream without its end marker
                    # still reads as whole: raising makes the server drop the connection
                    # before the body's last chunk, which every client sees as a cut
                    # answer rather than a short one.
                    raise StatementFailed(str(item[1])) from item[1]
                run.rows += item[1].num_rows
                chunk = encoder.batch(item[1])
                if chunk:
                    yield chunk
                if encoder.full:  # a JSON page is whole: stop the statement
                    break
            yield encoder.end()
        finally:
            finish()

    return StreamingResponse(rows(), media_type=encoder.media, headers={"X-Tessera-Query": run.id})


async def explain(server: Server, request: Request) -> Response:
    user = user_of(request)
    body = await read_json(request, server)
    text = field(body, "sql", str)
    check_statement(text, user.is_admin, user.may, server.kind_of)
    session, own = server.session(user, request)
    try:
        plan = await run_in_threadpool(session.explain, text, body.get("params"))
    finally:
        if own:
            session.close()
    return JSONResponse({"plan": str(plan)})


async def end_session(server: Server, request: Request) -> Response:
    await run_in_threadpool(server.end_session, user_of(request), request)
    return JSONResponse({"ended": True})


async def argo(server: Server, request: Request) -> Response:
    user = user_of(request)
    body = await read_json(request, server)
    text = field(body, "statement", str)
    level = "read" if text.lstrip()[:6].upper() == "SELECT" else "write"
    server.require(user, "collection", level)
    rows = await run_in_threadpool(server.db.argo, text, body.get("params"))
    return JSONResponse({"rows": jsonable(rows)})


async def queries(server: Server, request: Request) -> Response:
    return JSONResponse({"queries": [r.public() for r in server.visible(user_of(request))]})


async def query(server: Server, request: Request) -> Response:
    qid = request.path_params["qid"]
    for run in server.visible(user_of(request)):
        if run.id == qid:
            return JSONResponse(run.public())
    raise HTTPError(404, f"no running query {qid!r} of yours", "ObjectNotFoundError")


async def cancel(server: Server, request: Request) -> Response:
    qid = request.path_params["qid"]
    for run in server.visible(user_of(request)):
        if run.id == qid:
            run.cancel.cancel()
            return JSONResponse({"cancelled": qid})
    raise HTTPError(404, f"no running query {qid!r} of yours", "ObjectNotFoundError")
