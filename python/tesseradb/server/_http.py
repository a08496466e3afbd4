"""What every route of the API shares: the server's state (sessions, rights, running
statements), its options, and requests and errors in and out as JSON."""

from __future__ import annotations

import concurrent.futures
import json
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tesseradb.errors import (
    CancelledError,
    InterruptedStatementError,
    ReadOnlyError,
    TesseraError,
)
from tesseradb.server._guard import Refused
from tesseradb.server._users import User, Users

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from tesseradb.database import Database, Session

__all__ = [
    "HTTPError",
    "Running",
    "Server",
    "ServerOptions",
    "StatementFailed",
    "answer_format",
    "error_response",
    "field",
    "jsonable",
    "read_body",
    "read_json",
    "statement_error",
    "time_out",
    "user_of",
]

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


def status_of(err: BaseException) -> int:
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


def error_response(err: BaseException, status: int | None = None) -> Response:
    from starlette.responses import JSONResponse

    kind = err.kind if isinstance(err, HTTPError) else type(err).__name__
    return JSONResponse({"error": str(err), "type": kind}, status_code=status or status_of(err))


class Watchdog:
    """Stops statements that pass their time limit (one thread for every connection of
    the PostgreSQL protocol and Flight SQL; HTTP's statements use its event loop's
    timers)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._due: dict[int, tuple[float, Running]] = {}
        self._thread: threading.Thread | None = None

    def watch(self, key: int, run: Running, seconds: float) -> None:
        with self._lock:
            self._due[key] = (time.monotonic() + seconds, run)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="tessera-watchdog", daemon=True
                )
                self._thread.start()

    def forget(self, key: int) -> None:
        with self._lock:
            self._due.pop(key, None)

    def _loop(self) -> None:
        while True:
            with self._lock:
                self._lock.wait(0.1)
                now = time.monotonic()
                late = [k for k, (due, _) in self._due.items() if due <= now]
                runs = [self._due.pop(k)[1] for k in late]
            for run in runs:
                time_out(run)


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
        self.watchdog = Watchdog()

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

    def check(self, user: User, text: str) -> None:
        """Refuse ``text`` if ``user``'s rights (or a read-only server) do not allow it."""
        from tesseradb.errors import ReadOnlyError
        from tesseradb.server._guard import check_statement, may_write

        check_statement(text, user.is_admin, user.may, self.kind_of)
        if self.options.read_only and may_write(text):
            raise ReadOnlyError("the server is read-only: it runs queries only")

    @contextmanager
    def statement(self, user: User, text: str, seconds: float | None = None) -> Iterator[Running]:
        """A statement of ``user``'s from a connection that is not HTTP's: refused by the
        guard (its rights, or a read-only server) or listed as running, and stopped past
        ``seconds`` (the server's limit by default) by the watchdog."""
        self.check(user, text)
        run = self.start(user, text, None)
        key = id(run)
        limit = self.options.statement_seconds if seconds is None else seconds
        self.watchdog.watch(key, run, limit)
        try:
            yield run
        finally:
            self.watchdog.forget(key)
            self.finish(run)

    def visible(self, user: User) -> list[Running]:
        with self._lock:
            return [r for r in self.running.values() if user.is_admin or r.user == user.name]


def user_of(request: Request) -> User:
    return request.state.user  # type: ignore[no-any-return]


async def read_body(request: Request, server: Server, types: tuple[str, ...]) -> bytes:
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


async def read_json(request: Request, server: Server) -> Any:
    raw = await read_body(request, server, ("application/json",))
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise HTTPError(400, f"{request.url.path}: the body is not JSON ({err})") from None
    except RecursionError:
        raise HTTPError(400, f"{request.url.path}: the body's JSON is nested too deeply") from None


def field(body: Any, name: str, kind: type, required: bool = True, default: Any = None) -> Any:
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


def answer_format(request: Request, choices: dict[str, str], given: str | None = None) -> str:
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


def jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):  # (DuckDB's sums of integers): a JSON number
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars
        return jsonable(value.item())
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


class StatementFailed(Exception):
    """A statement failed after its answer began: the response is broken off."""


def time_out(run: Running) -> None:
    run.timed_out = True
    run.cancel.cancel()


def statement_error(err: BaseException, run: Running, server: Server) -> BaseException:
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
