"""The HTTP API of a served database (Starlette), its console's files and its access rights.

The server process holds the database (its single writer) and runs each
request's work on a thread of its own, so clients read and write
concurrently; each statement reads a consistent snapshot, as in-process.
Every request but ``/health`` and the console's static files carries
``Authorization: Bearer <token>``; what a token's user may do is checked
before anything runs (:mod:`._guard`, :mod:`._users`). Errors are JSON
``{"error": message, "type": class}`` with a status that says what went
wrong (400 bad input, 401 no or unknown token, 403 not allowed, 404 no such
object, 408 over the time limit, 409 cancelled, 413 too large, 415 wrong
content type); none carries a token.

Query results stream: ``POST /sql`` runs the statement on a thread whose
Arrow batches go through a small queue to the response as they come (Arrow
IPC, JSON or CSV by ``Accept``), so a large result is never held whole; a
client that goes away, ``POST /queries/{id}/cancel`` or the time limit stop
it, keeping nothing.

This module assembles the application; the routes live by what they touch
(``_routes_sql``, ``_routes_objects``, ``_routes_writes``), each a function of
the :class:`~tesseradb.server._http.Server` and the request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

from tesseradb.errors import TesseraError
from tesseradb.server._http import HTTPError, Server, ServerOptions, error_response, user_of
from tesseradb.server._users import Users

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from tesseradb.database import Database

__all__ = ["ServerOptions", "make_app"]

Route_ = Callable[[Server, "Request"], Awaitable["Response"]]


def make_app(db: Database, options: ServerOptions | None = None) -> Starlette:
    """The ASGI application serving ``db`` (its users are in the database's directory)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from tesseradb.server import _routes_objects as objects
    from tesseradb.server import _routes_sql as sql
    from tesseradb.server import _routes_writes as writes

    server = Server(db, Users(db.path), options or ServerOptions())

    # --- authentication, and errors as JSON -----------------------------------
    def authenticate(request: Request) -> Response | None:
        """Put the token's user on the request, or answer 401 (a cheap hash and dict look-up:
        done in each handler rather than in a middleware, which costs more per request)."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        user = server.users.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            why = "no token" if not header else "an unknown or revoked token"
            return JSONResponse(
                {
                    "error": f"{request.url.path}: {why}; send Authorization: Bearer <token>",
                    "type": "Unauthorized",
                },
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        request.state.user = user
        return None

    def handler(fn: Route_, public: bool = False) -> Callable[[Request], Any]:
        async def wrapped(request: Request) -> Response:
            try:
                if not public:
                    refused = authenticate(request)
                    if refused is not None:
                        return refused
                return await fn(server, request)
            except (HTTPError, TesseraError) as err:
                return error_response(err)
            except (ValueError, KeyError, TypeError) as err:
                return error_response(
                    HTTPError(400, f"{request.url.path}: {err}", "InvalidArgumentError")
                )

        return wrapped

    # --- public ---------------------------------------------------------------
    async def health(server: Server, request: Request) -> Response:
        return JSONResponse({"status": "ok", "read_only": server.options.read_only})

    async def console(server: Server, request: Request) -> Response:
        html = resources.files("tesseradb.server").joinpath("static/index.html").read_text()
        return Response(html, media_type="text/html")

    async def openapi(server: Server, request: Request) -> Response:
        from tesseradb.server._openapi import OPENAPI

        return JSONResponse(OPENAPI)

    async def whoami(server: Server, request: Request) -> Response:
        user = user_of(request)
        return JSONResponse({**user.public(), "read_only": server.options.read_only})

    routes = [
        Route("/sql", handler(sql.sql), methods=["POST"]),  # (first: routes are tried in order)
        Route("/health", handler(health, public=True)),
        Route("/", handler(console, public=True)),
        Route("/console", handler(console, public=True)),
        Route("/openapi.json", handler(openapi)),
        Route("/api/whoami", handler(whoami)),
        Route("/explain", handler(sql.explain), methods=["POST"]),
        Route("/session", handler(sql.end_session), methods=["DELETE"]),
        Route("/argo", handler(sql.argo), methods=["POST"]),
        Route("/queries", handler(sql.queries)),
        Route("/queries/{qid}", handler(sql.query)),
        Route("/queries/{qid}/cancel", handler(sql.cancel), methods=["POST"]),
        Route("/catalog", handler(objects.catalog)),
        Route("/objects/{name}", handler(objects.describe)),
        Route("/check", handler(objects.check)),
        Route("/arrays/{name}/slab", handler(objects.slab)),
        Route("/arrays/{name}/cell", handler(objects.cell)),
        Route("/streams/{name}/range", handler(objects.stream_range)),
        Route("/streams/{name}/plot", handler(objects.stream_plot)),
        Route("/streams/{name}/ingest", handler(writes.ingest), methods=["POST"]),
        Route("/collections/{name}/insert", handler(writes.insert), methods=["POST"]),
        Route("/collections/{name}/load", handler(writes.load), methods=["POST"]),
        Route("/collections/{name}/documents", handler(objects.documents)),
        Route("/load", handler(writes.load_file), methods=["POST"]),
        Mount(
            "/static",
            app=StaticFiles(packages=[("tesseradb.server", "static")]),
            name="static",
        ),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        # (Starlette's own: no route (404), another method (405)): JSON, as every error
        assert isinstance(exc, HTTPException)
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return error_response(HTTPError(exc.status_code, message, "HTTPError"), exc.status_code)

    async def internal_error(request: Request, exc: Exception) -> Response:
        return error_response(
            HTTPError(
                500, f"{request.url.path}: internal error ({type(exc).__name__})", "InternalError"
            ),
            500,
        )

    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Exception: internal_error},
    )
    app.state.server = server
    return app
