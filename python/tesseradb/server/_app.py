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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import json
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from typing import TYPE_CHECKING, Any

from tesseradb.errors import (
    CancelledError,
    InterruptedStatementError,
    ReadOnlyError,
    TesseraError,
)
from tesseradb.server._guard import Refused, check_statement, may_write
from tesseradb.server._users import User, Users

if TYPE_CHECKING:
    import pyarrow as pa
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from tesseradb.database import Database, Session

__all__ = ["ServerOptions", "make_app"]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
SMALL_ANSWER_BYTES = 1 << 20  # an answer up to this size is sent whole, not streamed
# a client's SQL session: the header naming it, how long an idle one is kept, how many
SESSION_HEADER = "X-Tessera-Session"
SESSION_IDLE_SECONDS = 600.0
MAX_SESSIONS = 256
NPY = "application/x-npy"
NDJSON = "application/x-ndjson"


@dataclass
class ServerOptions:
    read_only: bool = False
    statement_seconds: float = 300.0  # the server-side time limit of a statement
    max_body_bytes: int = 256 << 20  # the largest request body
    max_slab_cells: int = 64 << 20  # the most cells one array slab request may read
    max_json_rows: int = 100_000  # the most rows a JSON page may hold


class HTTPError(Exception):
    """An error with its HTTP status, turned into a JSON response."""

    def __init__(self, status: int, message: str, kind: str = "TesseraError") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass
class Running:
    """A statement running for a client: its progress, its cancel token, its owner."""

    id: str
    user: str
    text: str
    started: float
    cancel: Any
    done: float = 0.0
    total: float | None = None
    timed_out: bool = False
    finished: bool = False
    rows: int = 0

    def update(self, event: Any) -> None:
        self.done, self.total = event.done, event.total

    def public(self) -> dict[str, Any]:
        fraction = self.done / self.total if self.total else None
        return {
            "id": self.id,
            "user": self.user,
            "sql": self.text[:2000],
            "seconds": round(time.monotonic() - self.started, 3),
            "fraction": fraction,
            "rows": self.rows,
            "finished": self.finished,
        }


def _status_of(err: BaseException) -> int:
    status = getattr(err, "status", None)
    if isinstance(status, int):  # HTTPError, and errors that carry theirs (TooLarge: 413)
        return status
    if isinstance(err, (Refused, ReadOnlyError)):
        return 403
    if isinstance(err, CancelledError):
        return 409
    if isinstance(err, LookupError):  # ObjectNotFoundError, UnknownTableError, ...
        return 404
    return 400


def _error(err: BaseException, status: int | None = None) -> Response:
    from starlette.responses import JSONResponse

    kind = err.kind if isinstance(err, HTTPError) else type(err).__name__
    return JSONResponse({"error": str(err), "type": kind}, status_code=status or _status_of(err))


class Server:
    """The state of one served database: the database, its users, running statements."""

    def __init__(self, db: Database, users: Users, options: ServerOptions) -> None:
        self.db = db
        self.users = users
        self.options = options
        self.running: dict[str, Running] = {}
        self._lock = threading.Lock()
        # statements run here, apart from the request threads (a statement waiting for a
        # slow client must not starve the requests that would read its batches)
        self.executor = concurrent.futures.ThreadPoolExecutor(64, "tessera-sql")
        # each client's SQL session (settings, prepared statements, temporary tables,
        # transactions), by user and the session id its requests carry
        self.sessions: OrderedDict[tuple[str, str], tuple[Session, float]] = OrderedDict()

    # --- SQL sessions ----------------------------------------------------------------
    def session(self, user: User, request: Request) -> tuple[Session, bool]:
        """The client's session (a request without ``X-Tessera-Session`` gets one of its
        own, to close after it: the bool)."""
        sid = request.headers.get(SESSION_HEADER)
        # a user without the admin right: its queries cannot reach files, extensions or
        # settings by DuckDB's own configuration (the statement guard is a second line)
        restricted = not user.is_admin
        if not sid:
            return self.db.session(restricted), True
        if len(sid) > 128:
            raise HTTPError(400, f"{SESSION_HEADER} is at most 128 characters")
        key = (user.name, sid)
        now = time.monotonic()
        expired: list[Session] = []
        with self._lock:
            found = self.sessions.pop(key, None)
            session = found[0] if found is not None else self.db.session(restricted)
            self.sessions[key] = (session, now)
            while self.sessions:
                oldest_key, (oldest, used) = next(iter(self.sessions.items()))
                if len(self.sessions) <= MAX_SESSIONS and now - used < SESSION_IDLE_SECONDS:
                    break
                del self.sessions[oldest_key]
                expired.append(oldest)
        for old in expired:
            old.close()  # (an open transaction is rolled back)
        return session, False

    def end_session(self, user: User, request: Request) -> None:
        sid = request.headers.get(SESSION_HEADER)
        with self._lock:
            found = self.sessions.pop((user.name, sid or ""), None)
        if found is not None:
            found[0].close()

    # --- rights ----------------------------------------------------------------------
    def kind_of(self, name: str) -> str:
        """The rights kind of an object (``table`` for plain tables and unknown names)."""
        entry = self.db.catalog.get(name)
        if entry is None:
            return "table"
        kind = str(entry.kind)
        return {"assoc_table": "assoc"}.get(kind, kind)

    def require(self, user: User, kind: str, level: str, name: str = "") -> None:
        if level != "read" and self.options.read_only:
            raise HTTPError(403, "the server is read-only", "ReadOnlyError")
        if not user.may(kind, level):
            what = f" {kind} {name!r}" if name else f" {kind}s"
            raise HTTPError(
                403,
                f"user {user.name!r} may not {level}{what} (its rights: {user.rights})",
                "Refused",
            )

    def object_kind(self, name: str, expected: str) -> str:
        entry = self.db.catalog.get(name)
        if entry is None:
            raise HTTPError(404, f"no object {name!r} in the database", "ObjectNotFoundError")
        kind = self.kind_of(entry.name)
        if kind != expected:
            raise HTTPError(400, f"{name!r} is a {kind}, not a {expected}", "InvalidArgumentError")
        return str(entry.name)

    # --- running statements ----------------------------------------------------------
    def start(self, user: User, text: str, query_id: str | None) -> Running:
        from tesseradb.progress import Cancel

        with self._lock:
            qid = query_id or uuid.uuid4().hex
            if qid in self.running:
                raise HTTPError(400, f"query id {qid!r} is in use", "InvalidArgumentError")
            run = Running(qid, user.name, text, time.monotonic(), Cancel())
            self.running[qid] = run
        return run

    def finish(self, run: Running) -> None:
        run.finished = True
        with self._lock:
            self.running.pop(run.id, None)

    def visible(self, user: User) -> list[Running]:
        with self._lock:
            return [r for r in self.running.values() if user.is_admin or r.user == user.name]


def _user(request: Request) -> User:
    return request.state.user  # type: ignore[no-any-return]


async def _body(request: Request, server: Server, types: tuple[str, ...]) -> bytes:
    """The request's body, refused when too large or of another content type."""
    given = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if given not in types:
        raise HTTPError(
            415,
            f"{request.url.path}: the body is {given or 'untyped'}; send {' or '.join(types)}",
            "InvalidArgumentError",
        )
    limit = server.options.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPError(413, f"the body is {declared} bytes; this server takes {limit} at most")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, f"the body is over {limit} bytes, the most this server takes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _json(request: Request, server: Server) -> Any:
    raw = await _body(request, server, ("application/json",))
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise HTTPError(400, f"{request.url.path}: the body is not JSON ({err})") from None
    except RecursionError:
        raise HTTPError(400, f"{request.url.path}: the body's JSON is nested too deeply") from None


def _field(body: Any, name: str, kind: type, required: bool = True, default: Any = None) -> Any:
    if not isinstance(body, dict):
        raise HTTPError(400, f"the body is a JSON object, not {type(body).__name__}")
    if name not in body:
        if required:
            raise HTTPError(400, f"the body has no {name!r}")
        return default
    value = body[name]
    if value is None and not required:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise HTTPError(400, f"{name!r} is a {kind.__name__}, not {type(value).__name__}")
    return value


def _format(request: Request, choices: dict[str, str], given: str | None = None) -> str:
    """The answer's format: ``?format=``, else the first known type ``Accept`` names."""
    if given:
        if given not in choices:
            raise HTTPError(400, f"format is one of {', '.join(choices)}, not {given!r}")
        return given
    accept = request.headers.get("accept", "")
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        for name, mime in choices.items():
            if media == mime:
                return name
    return next(iter(choices))  # the first is the default


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):  # (DuckDB's sums of integers): a JSON number
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


# --- result streaming -----------------------------------------------------------------
_END = object()


class _Batches:
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
            self.put((_END, None))


def _encoder(fmt: str, offset: int, limit: int | None) -> Any:
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
            parts.append(("" if self.first_row else ",") + json.dumps(_jsonable(list(row))))
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


# --- the application ---------------------------------------------------------------------
def make_app(db: Database, options: ServerOptions | None = None) -> Starlette:
    """The ASGI application serving ``db`` (its users are in the database's directory)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    server = Server(db, Users(db.path), options or ServerOptions())

    async def threaded(fn: Callable[..., Any], *args: Any) -> Any:
        return await run_in_threadpool(fn, *args)

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

    def handler(fn: Callable[[Request], Any], public: bool = False) -> Callable[[Request], Any]:
        async def wrapped(request: Request) -> Response:
            try:
                if not public:
                    refused = authenticate(request)
                    if refused is not None:
                        return refused
                return await fn(request)  # type: ignore[no-any-return]
            except (HTTPError, TesseraError) as err:
                return _error(err)
            except (ValueError, KeyError, TypeError) as err:
                return _error(HTTPError(400, f"{request.url.path}: {err}", "InvalidArgumentError"))

        return wrapped

    # --- public ---------------------------------------------------------------
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "read_only": server.options.read_only})

    async def console(request: Request) -> Response:
        html = resources.files("tesseradb.server").joinpath("static/index.html").read_text()
        return Response(html, media_type="text/html")

    async def openapi(request: Request) -> Response:
        from tesseradb.server._openapi import OPENAPI

        return JSONResponse(OPENAPI)

    async def whoami(request: Request) -> Response:
        user = _user(request)
        return JSONResponse({**user.public(), "read_only": server.options.read_only})

    # --- SQL ------------------------------------------------------------------
    async def sql(request: Request) -> Response:
        user = _user(request)
        body = await _json(request, server)
        text = _field(body, "sql", str)
        params = body.get("params")
        if params is not None and not isinstance(params, (list, dict)):
            raise HTTPError(400, "params are a list (for ?) or an object (for $name)")
        offset = _field(body, "offset", int, False, 0)
        limit = _field(body, "limit", int, False, None)
        if offset < 0 or (limit is not None and limit < 0):
            raise HTTPError(400, "offset and limit are not negative")
        choices = {"arrow": ARROW_STREAM, "json": "application/json", "csv": "text/csv"}
        fmt = _format(request, choices, request.query_params.get("format"))
        if fmt == "json":
            cap = server.options.max_json_rows
            limit = cap if limit is None else min(limit, cap)
        # (the statement's shape is cached by its text: checked here, not on a thread)
        check_statement(text, user.is_admin, user.may, server.kind_of)
        if server.options.read_only and may_write(text):
            raise HTTPError(403, "the server is read-only: it runs queries only", "ReadOnlyError")
        run = server.start(user, text, _field(body, "query_id", str, False))
        session, own = server.session(user, request)
        loop = asyncio.get_running_loop()
        batches = _Batches(run, loop)
        timer = loop.call_later(server.options.statement_seconds, _time_out, run)

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
            raise _statement_error(first[1], run, server)
        encoder = _encoder(fmt, offset, limit)
        head: list[bytes] = []
        if first[0] in (_END, "whole"):  # a small answer (or none) goes in one body
            import pyarrow as pa

            if first[0] is _END:  # a statement without rows
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
                    if item[0] is _END:
                        break
                    if item[0] == "error":
                        # The status is sent, and an Arrow stream without its end marker
                        # still reads as whole: raising makes the server drop the connection
                        # before the body's last chunk, which every client sees as a cut
                        # answer rather than a short one.
                        raise _StatementFailed(str(item[1])) from item[1]
                    run.rows += item[1].num_rows
                    chunk = encoder.batch(item[1])
                    if chunk:
                        yield chunk
                    if encoder.full:  # a JSON page is whole: stop the statement
                        break
                yield encoder.end()
            finally:
                finish()

        return StreamingResponse(
            rows(), media_type=encoder.media, headers={"X-Tessera-Query": run.id}
        )

    async def explain(request: Request) -> Response:
        user = _user(request)
        body = await _json(request, server)
        text = _field(body, "sql", str)
        check_statement(text, user.is_admin, user.may, server.kind_of)
        session, own = server.session(user, request)
        try:
            plan = await threaded(session.explain, text, body.get("params"))
        finally:
            if own:
                session.close()
        return JSONResponse({"plan": str(plan)})

    async def end_session(request: Request) -> Response:
        await threaded(server.end_session, _user(request), request)
        return JSONResponse({"ended": True})

    async def argo(request: Request) -> Response:
        user = _user(request)
        body = await _json(request, server)
        text = _field(body, "statement", str)
        level = "read" if text.lstrip()[:6].upper() == "SELECT" else "write"
        server.require(user, "collection", level)
        rows = await threaded(db.argo, text, body.get("params"))
        return JSONResponse({"rows": _jsonable(rows)})

    async def queries(request: Request) -> Response:
        return JSONResponse({"queries": [r.public() for r in server.visible(_user(request))]})

    async def query(request: Request) -> Response:
        qid = request.path_params["qid"]
        for run in server.visible(_user(request)):
            if run.id == qid:
                return JSONResponse(run.public())
        raise HTTPError(404, f"no running query {qid!r} of yours", "ObjectNotFoundError")

    async def cancel(request: Request) -> Response:
        qid = request.path_params["qid"]
        for run in server.visible(_user(request)):
            if run.id == qid:
                run.cancel.cancel()
                return JSONResponse({"cancelled": qid})
        raise HTTPError(404, f"no running query {qid!r} of yours", "ObjectNotFoundError")

    # --- the catalog ----------------------------------------------------------
    async def catalog(request: Request) -> Response:
        info = await threaded(db.info)
        user = _user(request)
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

    async def describe(request: Request) -> Response:
        from tesseradb.server._views import describe_object

        name = request.path_params["name"]
        entry = db.catalog.get(name)
        if entry is None and name not in db.tables():
            raise HTTPError(404, f"no object {name!r} in the database", "ObjectNotFoundError")
        kind = server.kind_of(name)
        server.require(_user(request), kind, "read", name)
        return JSONResponse(_jsonable(await threaded(describe_object, db, name, kind)))

    async def check(request: Request) -> Response:
        server.require(_user(request), "*", "read")
        report = await threaded(db.check)
        return JSONResponse(
            {
                "ok": report.ok,
                "text": str(report),
            }
        )

    # --- arrays ---------------------------------------------------------------
    async def slab(request: Request) -> Response:
        from tesseradb.server._views import read_slab

        name = server.object_kind(request.path_params["name"], "array")
        server.require(_user(request), "array", "read", name)
        q = request.query_params
        choices = {  # (the first is the default: it holds any attributes)
            "arrow": ARROW_STREAM,
            "npy": NPY,
            "json": "application/json",
            "png": "image/png",
        }
        fmt = _format(request, choices, q.get("format"))
        data, media = await threaded(read_slab, db, name, dict(q), fmt, server.options)
        return Response(data, media_type=media)

    async def cell(request: Request) -> Response:
        from tesseradb.server._views import read_cell

        name = server.object_kind(request.path_params["name"], "array")
        server.require(_user(request), "array", "read", name)
        q = request.query_params
        return JSONResponse(
            _jsonable(await threaded(read_cell, db, name, q.get("at", ""), q.get("version")))
        )

    # --- streams --------------------------------------------------------------
    async def stream_range(request: Request) -> Response:
        from tesseradb.server._views import stream_range as read_range

        name = server.object_kind(request.path_params["name"], "stream")
        server.require(_user(request), "stream", "read", name)
        choices = {"arrow": ARROW_STREAM, "json": "application/json"}
        fmt = _format(request, choices, request.query_params.get("format"))
        data, media = await threaded(read_range, db, name, dict(request.query_params), fmt)
        return Response(data, media_type=media)

    async def stream_plot(request: Request) -> Response:
        from tesseradb.server._views import stream_plot as plot

        name = server.object_kind(request.path_params["name"], "stream")
        server.require(_user(request), "stream", "read", name)
        png = await threaded(plot, db, name, dict(request.query_params))
        return Response(png, media_type="image/png")

    async def ingest(request: Request) -> Response:
        import pyarrow as pa

        name = server.object_kind(request.path_params["name"], "stream")
        server.require(_user(request), "stream", "write", name)
        raw = await _body(request, server, (ARROW_STREAM,))
        try:
            reader = pa.ipc.open_stream(pa.py_buffer(raw))
            table = reader.read_all()
        except (pa.ArrowInvalid, OSError) as err:
            raise HTTPError(400, f"the body is not an Arrow IPC stream ({err})") from None
        stream = db.stream(name)
        # acknowledged only once durable: a write the client saw succeed survives kill -9
        records = await threaded(lambda: stream.ingest(table, durable=True))
        return JSONResponse({"records": records})

    # --- collections ----------------------------------------------------------
    async def insert(request: Request) -> Response:
        name = server.object_kind(request.path_params["name"], "collection")
        server.require(_user(request), "collection", "write", name)
        body = await _json(request, server)
        documents = body if isinstance(body, list) else [body]
        if not all(isinstance(d, dict) for d in documents):
            raise HTTPError(400, "insert takes a JSON object or a list of objects")
        ids = await threaded(db.collection(name).insert_many, documents)
        return JSONResponse({"inserted": len(ids), "objids": ids})

    async def load(request: Request) -> Response:
        name = server.object_kind(request.path_params["name"], "collection")
        server.require(_user(request), "collection", "write", name)
        raw = await _body(request, server, (NDJSON, "application/jsonl"))
        lines = io.BytesIO(raw)
        count = await threaded(db.collection(name).load_jsonl, lines)
        return JSONResponse({"loaded": count})

    async def load_file(request: Request) -> Response:
        """``db.load`` of a file on the server's machine (admins only: it reads the server's
        files), listed with its progress among the running statements until it ends."""
        user = _user(request)
        if not user.is_admin:
            raise HTTPError(403, "loading the server's files is for admins only", "Refused")
        if server.options.read_only:
            raise HTTPError(403, "the server is read-only", "ReadOnlyError")
        body = await _json(request, server)
        source = _field(body, "source", str)
        into = _field(body, "into", str, False)
        kind = _field(body, "kind", str, False)
        options = _field(body, "options", dict, False, {})
        run = server.start(user, f"load {source}" + (f" into {into}" if into else ""), None)
        try:
            loaded = await threaded(
                lambda: db.load(
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

    async def documents(request: Request) -> Response:
        name = server.object_kind(request.path_params["name"], "collection")
        server.require(_user(request), "collection", "read", name)
        q = request.query_params
        limit = min(int(q.get("limit", "50")), 1000)
        offset = int(q.get("offset", "0"))
        if limit < 0 or offset < 0:
            raise HTTPError(400, "offset and limit are not negative")
        rows = await threaded(
            db.argo, f"SELECT * FROM {name} ORDER BY objid LIMIT {limit} OFFSET {offset}"
        )
        return JSONResponse({"documents": _jsonable(rows)})

    routes = [
        Route("/sql", handler(sql), methods=["POST"]),  # (first: routes are tried in order)
        Route("/health", handler(health, public=True)),
        Route("/", handler(console, public=True)),
        Route("/console", handler(console, public=True)),
        Route("/openapi.json", handler(openapi)),
        Route("/api/whoami", handler(whoami)),
        Route("/explain", handler(explain), methods=["POST"]),
        Route("/session", handler(end_session), methods=["DELETE"]),
        Route("/argo", handler(argo), methods=["POST"]),
        Route("/queries", handler(queries)),
        Route("/queries/{qid}", handler(query)),
        Route("/queries/{qid}/cancel", handler(cancel), methods=["POST"]),
        Route("/catalog", handler(catalog)),
        Route("/objects/{name}", handler(describe)),
        Route("/check", handler(check)),
        Route("/arrays/{name}/slab", handler(slab)),
        Route("/arrays/{name}/cell", handler(cell)),
        Route("/streams/{name}/range", handler(stream_range)),
        Route("/streams/{name}/plot", handler(stream_plot)),
        Route("/streams/{name}/ingest", handler(ingest), methods=["POST"]),
        Route("/collections/{name}/insert", handler(insert), methods=["POST"]),
        Route("/collections/{name}/load", handler(load), methods=["POST"]),
        Route("/collections/{name}/documents", handler(documents)),
        Route("/load", handler(load_file), methods=["POST"]),
        Mount(
            "/static",
            app=StaticFiles(packages=[("tesseradb.server", "static")]),
            name="static",
        ),
    ]
    from starlette.exceptions import HTTPException

    async def http_error(request: Request, exc: Exception) -> Response:
        # (Starlette's own: no route (404), another method (405)): JSON, as every error
        assert isinstance(exc, HTTPException)
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return _error(HTTPError(exc.status_code, message, "HTTPError"), exc.status_code)

    async def internal_error(request: Request, exc: Exception) -> Response:
        return _error(
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


class _StatementFailed(Exception):
    """A statement failed after its answer began: the response is broken off."""


def _time_out(run: Running) -> None:
    run.timed_out = True
    run.cancel.cancel()


def _statement_error(err: BaseException, run: Running, server: Server) -> BaseException:
    if isinstance(err, (CancelledError, InterruptedStatementError)):
        if run.timed_out:
            return HTTPError(
                408,
                f"the statement ran past the server's time limit of "
                f"{server.options.statement_seconds:g} s and was stopped; nothing was kept",
                "CancelledError",
            )
        return HTTPError(409, "the statement was cancelled; nothing was kept", "CancelledError")
    if isinstance(err, (TesseraError, HTTPError)):
        return err
    if isinstance(err, (ValueError, TypeError)):
        return HTTPError(400, str(err), "InvalidArgumentError")
    return HTTPError(500, f"the server failed: {type(err).__name__}: {err}", "ServerError")
