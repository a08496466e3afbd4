"""Arrow Flight SQL for ``tessera serve --flight-port``: ADBC's Flight SQL driver, JDBC's
Flight SQL driver and other Flight SQL clients get results as Arrow streams.

The transport is pyarrow's Flight server (gRPC, in C++: batches leave without a copy
through Python); what this module adds is Flight SQL's commands, which travel as
protocol-buffer messages inside ``google.protobuf.Any``, read and written by
:mod:`._flightproto`.

A user authenticates with ``authorization: Bearer <token>``, or with HTTP Basic
(its name and its token as the password), which is answered with the bearer header.
Every statement goes through the HTTP API's guard, rights and running list, in a
session of its own (restricted for a user without the admin right).

Spoken: statements (``CommandStatementQuery`` through GetFlightInfo and DoGet,
``CommandStatementUpdate`` through DoPut), prepared statements (create, bind
parameters with DoPut, query, update, close), and the catalog calls
(``GetCatalogs``, ``GetDbSchemas``, ``GetTables`` with their schemas,
``GetTableTypes``, ``GetSqlInfo``), and transactions (``BeginTransaction``,
``EndTransaction``; a statement or prepared statement naming a transaction runs in
it, and one left idle for TRANSACTION_SECONDS is rolled back). Savepoints are not.
Without a transaction, each statement commits on its own.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import queue
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.flight as flight

from tesseradb.errors import CancelledError, InterruptedStatementError, ReadOnlyError
from tesseradb.server._flightproto import Proto, pack_any, unpack_any
from tesseradb.server._guard import Refused, may_write

if TYPE_CHECKING:
    from tesseradb.server._http import Server
    from tesseradb.server._users import User

__all__ = ["FlightSQLServer"]

MAX_HELD = 256  # results and prepared statements kept for their clients, at most
HELD_SECONDS = 600.0  # a result nobody fetched is dropped after this
CLAIM_SECONDS = 30.0  # a large answer nobody starts to fetch by then is stopped
SMALL_ANSWER_BYTES = 1 << 20  # an answer up to this size is kept whole, not streamed
TRANSACTION_SECONDS = 600.0  # a transaction idle this long is rolled back
MAX_TRANSACTIONS = 64  # open transactions, at most
# the table types GetTables gives the database's objects that are not DuckDB tables
KIND_TABLE_TYPES = ("ARRAY", "STREAM", "COLLECTION", "ASSOC", "ATTACHED")


# --- users ------------------------------------------------------------------------------
class _Authenticated(flight.ServerMiddleware):
    def __init__(self, user: User, token: str | None) -> None:
        self.user = user
        self.token = token  # sent back once, to a client that logged in with Basic

    def sending_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}


class _Auth(flight.ServerMiddlewareFactory):
    def __init__(self, server: Server) -> None:
        self.server = server

    def start_call(self, info: Any, headers: dict[str, list[str]]) -> _Authenticated:
        given = (headers.get("authorization") or headers.get("Authorization") or [""])[0]
        scheme, _, value = given.partition(" ")
        user, answer = None, None
        if scheme.lower() == "bearer":
            user = self.server.users.authenticate(value.strip())
        elif scheme.lower() == "basic":
            try:
                name, _, token = base64.b64decode(value.strip()).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                name, token = "", ""
            user = self.server.users.authenticate(token)
            if user is not None and user.name != name:
                user = None
            answer = token
        if user is None:
            why = "no credentials" if not given else "unknown or revoked credentials"
            raise flight.FlightUnauthenticatedError(
                f"{why}: send authorization: Bearer <token>, or Basic with the user's "
                "name and its token as the password"
            )
        return _Authenticated(user, answer)


class _NoHandshake(flight.ServerAuthHandler):
    """The handshake carries nothing: the headers authenticate (see :class:`_Auth`)."""

    def authenticate(self, outgoing: Any, incoming: Any) -> None:
        return None

    def is_valid(self, token: bytes) -> str:
        return ""


# --- results and prepared statements kept between calls ---------------------------------
_END = object()  # a query's last batch was handed over


class _Rows:
    """A query's rows on their way from its statement's thread to the DoGet fetching
    them: four batches in flight at most, and the statement stopped when the client
    leaves (or never comes)."""

    def __init__(self) -> None:
        self.ready = threading.Event()  # the schema is known, or the statement failed
        self.claimed = threading.Event()  # a DoGet is reading
        self.schema: pa.Schema | None = None
        self.error: BaseException | None = None
        self.whole: list[pa.RecordBatch] | None = None  # a small answer's batches
        self.left = False
        self.items: queue.Queue[Any] = queue.Queue(maxsize=4)

    def put(self, item: Any) -> None:
        while True:
            if self.left:
                raise CancelledError("the client stopped reading the result")
            try:
                self.items.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def batches(self) -> Iterator[pa.RecordBatch]:
        self.claimed.set()
        try:
            while True:
                item = self.items.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise _flight_error(item)
                yield item
        finally:
            self.left = True  # (done, or the client went away: the statement stops)


@dataclass
class _Held:
    user: str
    made: float = field(default_factory=time.monotonic)
    text: str = ""
    table: pa.Table | None = None
    rows: _Rows | None = None
    params: list[list[Any]] = field(default_factory=list)
    transaction: bytes = b""  # (a prepared statement's, if it was prepared in one)


@dataclass
class _Transaction:
    """A client's open transaction: a session of its own, one statement at a time."""

    user: str
    session: Any
    peer: str = ""  # (the client's connection: its CloseSession ends the transaction)
    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = field(default_factory=time.monotonic)
    ended: bool = False
    # DuckDB's transaction begins with the first statement: clients (ADBC's) begin the
    # next transaction as they end one, and leave that one open when they close
    begun: bool = False


class _Keep:
    """What clients fetch in a later call, by random handle, bounded in count and age."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[bytes, _Held] = OrderedDict()

    def put(self, item: _Held) -> bytes:
        handle = secrets.token_bytes(16)
        now = time.monotonic()
        with self._lock:
            self._items[handle] = item
            while self._items:
                oldest = next(iter(self._items.values()))
                if len(self._items) <= MAX_HELD and now - oldest.made < HELD_SECONDS:
                    break
                self._items.popitem(last=False)
        return handle

    def get(self, handle: bytes, user: User, take: bool = False) -> _Held:
        with self._lock:
            item = self._items.get(handle)
            if item is not None and item.user == user.name and take:
                del self._items[handle]
        if item is None or item.user != user.name:
            raise flight.FlightServerError(
                "no such statement or result (fetched, closed or expired)"
            )
        return item

    def drop(self, handle: bytes) -> None:
        with self._lock:
            self._items.pop(handle, None)


# --- the server ---------------------------------------------------------------------------
_TABLES_SCHEMA = pa.schema(
    [
        pa.field("catalog_name", pa.utf8()),
        pa.field("db_schema_name", pa.utf8()),
        pa.field("table_name", pa.utf8(), nullable=False),
        pa.field("table_type", pa.utf8(), nullable=False),
    ]
)
_SQL_INFO_VALUE = pa.dense_union(
    [
        pa.field("string_value", pa.utf8()),
        pa.field("bool_value", pa.bool_()),
        pa.field("bigint_value", pa.int64()),
        pa.field("int32_bitmask", pa.int32()),
        pa.field("string_list", pa.list_(pa.utf8())),
        pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32()))),
    ]
)
_SQL_INFO_SCHEMA = pa.schema(
    [pa.field("info_name", pa.uint32(), nullable=False), pa.field("value", _SQL_INFO_VALUE)]
)


def _like(pattern: str | None) -> re.Pattern[str] | None:
    """A Flight SQL filter pattern (SQL LIKE: % and _) as a regular expression."""
    if pattern is None:
        return None
    parts = [".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern]
    return re.compile("".join(parts) + r"\Z", re.S)


class FlightSQLServer(flight.FlightServerBase):
    """The Flight SQL listener of a served database (gRPC threads of this process)."""

    def __init__(
        self,
        server: Server,
        host: str = "127.0.0.1",
        port: int = 0,
        certfile: str | None = None,
        keyfile: str | None = None,
    ) -> None:
        tls = []
        scheme = "grpc+tcp"
        if certfile is not None and keyfile is not None:
            with open(certfile, "rb") as c, open(keyfile, "rb") as k:
                tls = [(c.read(), k.read())]
            scheme = "grpc+tls"
        super().__init__(
            f"{scheme}://{host}:{port}",
            auth_handler=_NoHandshake(),
            tls_certificates=tls,
            middleware={"auth": _Auth(server)},
        )
        self.server = server
        self.held = _Keep()
        self.transactions: dict[bytes, _Transaction] = {}
        self._transactions_lock = threading.Lock()
        # the statements of queries, apart from gRPC's threads: a large answer's
        # statement streams from here to its DoGet (at most this many at once)
        self.executor = concurrent.futures.ThreadPoolExecutor(32, "tessera-flight-sql")
        self._thread = threading.Thread(target=self.serve, name="tessera-flight", daemon=True)

    def start(self) -> FlightSQLServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.executor.shutdown(wait=False, cancel_futures=True)
        with self._transactions_lock:
            left, self.transactions = list(self.transactions.values()), {}
        for transaction in left:  # (rolled back: nobody committed them)
            with contextlib.suppress(Exception):
                transaction.session.close()

    # --- statements ------------------------------------------------------------------
    def _user(self, context: Any) -> User:
        middleware = context.get_middleware("auth")
        assert middleware is not None
        return middleware.user  # type: ignore[no-any-return]

    def _run(
        self,
        user: User,
        text: str,
        params: list[Any] | None = None,
        sink: Any = None,
        transaction: bytes = b"",
    ) -> Any:
        """Run one statement for ``user`` in a session of its own, or in the session of
        the open ``transaction`` it names; its Result (with ``sink``, the rows go to it
        as they come: :meth:`Session.stream_sql`)."""
        if transaction:
            if _ends_transaction(text):
                raise flight.FlightServerError(
                    "a Flight SQL transaction ends with the EndTransaction action, not "
                    "with a statement"
                )
            opened = self._transaction(transaction, user)
            with opened.lock:
                if opened.ended:
                    raise flight.FlightServerError("the transaction has ended")
                opened.used = time.monotonic()
                try:
                    if not opened.begun:
                        opened.session.sql("BEGIN TRANSACTION")
                        opened.begun = True
                    return self._run_in(user, text, params, sink, opened.session)
                finally:
                    opened.used = time.monotonic()
        session = self.server.db.session(restricted=not user.is_admin)
        try:
            return self._run_in(user, text, params, sink, session)
        finally:
            session.close()

    def _run_in(
        self, user: User, text: str, params: list[Any] | None, sink: Any, session: Any
    ) -> Any:
        with self.server.statement(user, text) as run:
            try:
                if sink is not None:
                    return session.stream_sql(text, sink, params or None, cancel=run.cancel)
                return session.sql(text, params or None, cancel=run.cancel)
            except (CancelledError, InterruptedStatementError):
                if run.timed_out:
                    raise flight.FlightTimedOutError(
                        f"the statement ran past the server's time limit of "
                        f"{self.server.options.statement_seconds:g} s; nothing was kept"
                    ) from None
                raise flight.FlightCancelledError(
                    "the statement was cancelled; nothing was kept"
                ) from None

    # --- transactions ------------------------------------------------------------------
    def _transaction(self, handle: bytes, user: User) -> _Transaction:
        with self._transactions_lock:
            found = self.transactions.get(handle)
        if found is None or found.user != user.name:
            raise flight.FlightServerError(
                "no such transaction (ended, rolled back after "
                f"{TRANSACTION_SECONDS:g} s idle, or never begun)"
            )
        return found

    def _begin(self, user: User, peer: str) -> bytes:
        if not user.is_admin:
            raise Refused(
                f"user {user.name!r} has no transactions: a user without the admin right "
                "runs each statement on its own (GetSqlInfo says so; use autocommit)"
            )
        self._roll_back_idle()
        with self._transactions_lock:
            if len(self.transactions) >= MAX_TRANSACTIONS:
                raise flight.FlightServerError(
                    f"{MAX_TRANSACTIONS} transactions are open: end one first"
                )
        session = self.server.db.session()  # (an admin's: not restricted)
        handle = secrets.token_bytes(16)
        with self._transactions_lock:
            self.transactions[handle] = _Transaction(user.name, session, peer)
        return handle

    def _close_session(self, user: User, peer: str) -> None:
        """The client's connection closes (ADBC says so): roll back what it left open."""
        with self._transactions_lock:
            left = [
                h for h, t in self.transactions.items() if t.user == user.name and t.peer == peer
            ]
        for handle in left:
            with contextlib.suppress(flight.FlightError):
                self._end(user, handle, 2)

    def _end(self, user: User, handle: bytes, action: int) -> None:
        if action not in (1, 2):
            raise flight.FlightServerError(
                f"EndTransaction's action is {action}: 1 (commit) or 2 (roll back)"
            )
        found = self._transaction(handle, user)
        with found.lock:  # (after the transaction's statement under way)
            try:
                if found.begun:
                    found.session.sql("COMMIT" if action == 1 else "ROLLBACK")
            finally:
                self._forget(handle, found)  # (its session's close rolls back what is left)

    def _roll_back_idle(self) -> None:
        now = time.monotonic()
        with self._transactions_lock:
            idle = [
                (h, t) for h, t in self.transactions.items() if now - t.used > TRANSACTION_SECONDS
            ]
        for handle, transaction in idle:
            if transaction.lock.acquire(blocking=False):  # (not while a statement runs)
                try:
                    self._forget(handle, transaction)
                finally:
                    transaction.lock.release()

    def _forget(self, handle: bytes, transaction: _Transaction) -> None:
        """(its lock held) The transaction ended: closing its session rolls back what
        it did not commit."""
        with self._transactions_lock:
            self.transactions.pop(handle, None)
        transaction.ended = True
        with contextlib.suppress(Exception):
            transaction.session.close()

    def _guarded(self, call: Any) -> Any:
        """``call()``, its errors said as Flight errors (what, and why)."""
        try:
            return call()
        except Exception as err:  # every statement error goes to the client
            raise _flight_error(err) from None

    def _streamed(self, user: User, text: str, params: list[Any] | None) -> _Rows:
        """A query started on the server's statement threads, its rows handed to the
        DoGet that fetches them as they come (a download is never held whole); returns
        once its schema is known."""
        rows = _Rows()

        def sink(reader: pa.RecordBatchReader) -> None:
            rows.schema = reader.schema
            held: list[pa.RecordBatch] = []
            size = 0
            for batch in reader:  # a small answer is kept whole: the statement ends now
                held.append(batch)
                size += batch.nbytes
                if size > SMALL_ANSWER_BYTES:
                    break
            else:
                rows.whole = held
                return
            rows.ready.set()  # a large one waits for its DoGet, then streams
            if not rows.claimed.wait(CLAIM_SECONDS):
                raise CancelledError("nobody fetched the result")
            for batch in held:
                rows.put(batch)
            for batch in reader:
                rows.put(batch)

        def produce() -> None:
            try:
                self._run(user, text, params, sink)
                if rows.schema is None:
                    rows.schema = pa.schema([])
                rows.ready.set()
                rows.put(_END)
            except BaseException as err:  # handed to the client's call
                rows.error = err
                rows.ready.set()
                with contextlib.suppress(CancelledError):
                    rows.put(err)

        self.executor.submit(produce)
        rows.ready.wait()
        if rows.error is not None:
            raise _flight_error(rows.error)
        return rows

    def _info(
        self, descriptor: Any, user: User, table: pa.Table | None = None, rows: _Rows | None = None
    ) -> flight.FlightInfo:
        if rows is not None and rows.whole is not None:  # (a small answer, whole)
            assert rows.schema is not None
            table = pa.Table.from_batches(rows.whole, rows.schema)
            rows = None
        handle = self.held.put(_Held(user.name, table=table, rows=rows))
        ticket = flight.Ticket(pack_any("TicketStatementQuery", Proto.encode((1, handle))))
        endpoint = flight.FlightEndpoint(ticket, [])
        if table is not None:
            return flight.FlightInfo(
                table.schema, descriptor, [endpoint], table.num_rows, table.nbytes
            )
        assert rows is not None and rows.schema is not None
        return flight.FlightInfo(rows.schema, descriptor, [endpoint], -1, -1)

    def _statement_info(
        self,
        descriptor: Any,
        user: User,
        text: str,
        params: list[Any] | None,
        transaction: bytes = b"",
    ) -> flight.FlightInfo:
        """A statement's FlightInfo: a query's rows stream to the DoGet; a statement that
        may write runs to its commit first (its answer acknowledges a kept write), and so
        does one in a transaction (whose next statement must not wait for a fetch)."""
        if may_write(text) or transaction:
            table = self._guarded(lambda: self._run(user, text, params, None, transaction).arrow())
            return self._info(descriptor, user, table=table)
        return self._info(descriptor, user, rows=self._streamed(user, text, params))

    def get_flight_info(self, context: Any, descriptor: Any) -> flight.FlightInfo:
        user = self._user(context)
        name, message = unpack_any(descriptor.command or b"")

        if name == "CommandStatementQuery":
            text = message.text(1) or ""
            return self._statement_info(descriptor, user, text, None, message.blob(2))
        if name == "CommandPreparedStatementQuery":
            held = self.held.get(message.blob(1), user)
            params = held.params[0] if held.params else None
            return self._statement_info(descriptor, user, held.text, params, held.transaction)

        def answer() -> pa.Table:
            if name == "CommandGetCatalogs":
                return self._query_table(
                    user, "SELECT DISTINCT catalog_name FROM information_schema.schemata ORDER BY 1"
                ).cast(pa.schema([pa.field("catalog_name", pa.utf8(), False)]))
            if name == "CommandGetDbSchemas":
                return self._schemas(user, message)
            if name == "CommandGetTables":
                return self._tables(user, message)
            if name == "CommandGetTableTypes":
                kinds = ["BASE TABLE", "VIEW", "LOCAL TEMPORARY", *KIND_TABLE_TYPES]
                return pa.table({"table_type": pa.array(kinds, pa.utf8())}).cast(
                    pa.schema([pa.field("table_type", pa.utf8(), False)])
                )
            if name == "CommandGetSqlInfo":
                return self._sql_info(message.integers(1), user)
            raise NotImplementedError(f"{name} is not served here")

        return self._info(descriptor, user, table=self._guarded(answer))

    def get_schema(self, context: Any, descriptor: Any) -> flight.SchemaResult:
        return flight.SchemaResult(self.get_flight_info(context, descriptor).schema)

    def do_get(self, context: Any, ticket: Any) -> Any:
        user = self._user(context)
        name, message = unpack_any(ticket.ticket)
        if name != "TicketStatementQuery":
            raise flight.FlightServerError(f"a ticket of {name or 'no kind'} is not served here")
        held = self.held.get(message.blob(1), user, take=True)
        if held.rows is not None:
            assert held.rows.schema is not None
            return flight.GeneratorStream(held.rows.schema, held.rows.batches())
        assert held.table is not None
        return flight.RecordBatchStream(held.table)

    def do_put(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        user = self._user(context)
        name, message = unpack_any(descriptor.command or b"")
        if name == "CommandStatementUpdate":
            text, transaction = message.text(1) or "", message.blob(2)
            count = self._guarded(lambda: _count(self._run(user, text, None, None, transaction)))
            writer.write(pa.py_buffer(Proto.encode((1, count))))
            return
        if name in ("CommandPreparedStatementQuery", "CommandPreparedStatementUpdate"):
            handle = message.blob(1)
            held = self.held.get(handle, user)
            rows = [list(r.values()) for r in reader.read_all().to_pylist()]
            if name == "CommandPreparedStatementQuery":
                held.params = rows  # (bound for the query's GetFlightInfo)
                writer.write(pa.py_buffer(Proto.encode((1, handle))))
                return
            sets = rows or [[]]
            count = 0
            for params in sets:
                count += self._guarded(
                    lambda p=params: _count(self._run(user, held.text, p, None, held.transaction))
                )
            writer.write(pa.py_buffer(Proto.encode((1, count))))
            return
        raise flight.FlightServerError(f"DoPut of {name or 'no command'} is not served here")

    def do_action(self, context: Any, action: Any) -> Any:
        user = self._user(context)
        kind = action.type
        body = action.body.to_pybytes() if action.body is not None else b""
        if kind == "CreatePreparedStatement":
            _, message = unpack_any(body)
            text = message.text(1) or ""
            # (checked now, so that a refused statement fails where it is prepared)
            self._guarded(lambda: self.server.check(user, text))
            transaction = message.blob(2)
            if transaction:
                self._transaction(transaction, user)  # (one of this user's, open)
            handle = self.held.put(_Held(user.name, text=text, transaction=transaction))
            result = Proto.encode((1, handle))
            return [
                flight.Result(pa.py_buffer(pack_any("ActionCreatePreparedStatementResult", result)))
            ]
        if kind == "ClosePreparedStatement":
            _, message = unpack_any(body)
            self.held.drop(message.blob(1))
            return []
        if kind == "BeginTransaction":
            handle = self._guarded(lambda: self._begin(user, context.peer()))
            result = Proto.encode((1, handle))
            return [flight.Result(pa.py_buffer(pack_any("ActionBeginTransactionResult", result)))]
        if kind == "EndTransaction":
            _, message = unpack_any(body)
            self._guarded(lambda: self._end(user, message.blob(1), message.integer(2)))
            return []
        if kind == "CloseSession":  # (Flight's own session action: CloseSessionResult)
            self._guarded(lambda: self._close_session(user, context.peer()))
            return [flight.Result(pa.py_buffer(Proto.encode((1, 1))))]  # (status: closed)
        raise flight.FlightServerError(f"action {kind!r} is not served here")

    def list_actions(self, context: Any) -> list[tuple[str, str]]:
        return [
            ("CreatePreparedStatement", "prepare a statement"),
            ("ClosePreparedStatement", "close a prepared statement"),
            ("BeginTransaction", "begin a transaction"),
            ("EndTransaction", "commit or roll back a transaction"),
            ("CloseSession", "roll back the transactions this connection left open"),
        ]

    # --- the catalog ----------------------------------------------------------------------
    def _query_table(self, user: User, text: str) -> pa.Table:
        """The server's own catalog query (a fixed text, not the user's: it runs without
        the guard, in a session like the user's own, so that it lists the tables the
        user's queries see; the rows are filtered by the user's rights)."""
        with self.server.db.session(restricted=not user.is_admin) as session:
            return session.sql(text).arrow()

    def _relations(self, user: User) -> pa.Table:
        """DuckDB's tables and views, and the database's arrays, streams, collections and
        attached files (table types ARRAY, STREAM, ...), those the user may read."""
        tables = self._query_table(
            user,
            "SELECT table_catalog, table_schema, table_name, table_type "
            "FROM information_schema.tables ORDER BY 1, 2, 3",
        ).to_pylist()
        home = self._query_table(user, "SELECT current_database(), current_schema()").to_pylist()
        catalog, schema = home[0].values()
        rows = [list(r.values()) for r in tables] if user.may("table", "read") else []
        for entry in self.server.db.catalog.objects():
            kind = self.server.kind_of(entry.name)
            if kind != "table" and user.may(kind, "read"):
                rows.append([catalog, schema, entry.name, kind.upper()])
        return pa.Table.from_pylist(
            [dict(zip(_TABLES_SCHEMA.names, r, strict=True)) for r in rows], schema=_TABLES_SCHEMA
        )

    def _schemas(self, user: User, message: Proto) -> pa.Table:
        catalog, pattern = message.text(1), _like(message.text(2))
        rows = self._query_table(
            user,
            "SELECT catalog_name, schema_name FROM information_schema.schemata ORDER BY 1, 2",
        ).to_pylist()
        kept = [
            r
            for r in rows
            if (catalog is None or r["catalog_name"] == catalog)
            and (pattern is None or pattern.match(r["schema_name"]))
        ]
        return pa.table(
            {
                "catalog_name": pa.array([r["catalog_name"] for r in kept], pa.utf8()),
                "db_schema_name": pa.array([r["schema_name"] for r in kept], pa.utf8()),
            },
            schema=pa.schema(
                [pa.field("catalog_name", pa.utf8()), pa.field("db_schema_name", pa.utf8(), False)]
            ),
        )

    def _tables(self, user: User, message: Proto) -> pa.Table:
        catalog = message.text(1)
        schema_pattern, name_pattern = _like(message.text(2)), _like(message.text(3))
        types = set(message.texts(4))
        rows = [
            r
            for r in self._relations(user).to_pylist()
            if (catalog is None or r["catalog_name"] == catalog)
            and (schema_pattern is None or schema_pattern.match(r["db_schema_name"] or ""))
            and (name_pattern is None or name_pattern.match(r["table_name"]))
            and (not types or r["table_type"] in types)
        ]
        table = pa.Table.from_pylist(rows, schema=_TABLES_SCHEMA)
        if not message.integer(5):  # include_schema
            return table
        schemas = []
        for r in rows:
            quoted = ".".join(
                '"' + str(p).replace('"', '""') + '"'
                for p in (r["catalog_name"], r["db_schema_name"], r["table_name"])
            )
            found = self._query_table(user, f"SELECT * FROM {quoted} LIMIT 0").schema
            schemas.append(found.serialize().to_pybytes())
        return table.append_column(pa.field("table_schema", pa.binary(), False), [schemas])

    def _sql_info(self, wanted: list[int], user: User) -> pa.Table:
        from tesseradb import __version__

        # (Flight SQL's SqlInfo numbers: server name, version, Arrow version, read-only,
        # transactions)
        known: dict[int, tuple[int, Any]] = {
            0: (0, "TesseraDB"),
            1: (0, __version__),
            2: (0, pa.__version__),
            3: (1, bool(self.server.options.read_only)),
            # transactions (BeginTransaction and EndTransaction, no savepoints): an
            # admin's; a restricted session has none (its reads are of the snapshot)
            8: (3, 1 if user.is_admin else 0),
        }
        numbers = [n for n in (wanted or sorted(known)) if n in known]
        strings = [known[n][1] for n in numbers if known[n][0] == 0]
        bools = [known[n][1] for n in numbers if known[n][0] == 1]
        ints = [known[n][1] for n in numbers if known[n][0] == 3]
        type_ids, offsets, seen = [], [], [0, 0, 0, 0]
        for n in numbers:
            kind = known[n][0]
            type_ids.append(kind)
            offsets.append(seen[kind])
            seen[kind] += 1
        value = pa.UnionArray.from_dense(
            pa.array(type_ids, pa.int8()),
            pa.array(offsets, pa.int32()),
            [
                pa.array(strings, pa.utf8()),
                pa.array(bools, pa.bool_()),
                pa.array([], pa.int64()),
                pa.array(ints, pa.int32()),
                pa.array([], pa.list_(pa.utf8())),
                pa.array([], pa.map_(pa.int32(), pa.list_(pa.int32()))),
            ],
            [f.name for f in _SQL_INFO_VALUE],
        )
        return pa.Table.from_arrays(
            [pa.array(numbers, pa.uint32()), value], schema=_SQL_INFO_SCHEMA
        )


def _flight_error(err: BaseException) -> BaseException:
    """A statement's error as the Flight error a client sees (what, and why)."""
    if isinstance(err, flight.FlightError):
        return err
    if isinstance(err, (Refused, ReadOnlyError)):
        return flight.FlightUnauthorizedError(str(err))
    return flight.FlightServerError(f"{type(err).__name__}: {err}")


def _ends_transaction(text: str) -> bool:
    """Whether ``text`` begins, commits or rolls back a transaction itself."""
    head = text.lstrip().split(None, 1)
    return bool(head) and head[0].rstrip(";").upper() in {
        "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT",
    }  # fmt: skip


def _count(result: Any) -> int:
    """The rows a write changed (DuckDB's ``Count`` column), else -1 (unknown)."""
    if result.columns == ["Count"]:
        rows = result.fetchall()
        if rows and rows[0][0] is not None:
            return int(rows[0][0])
    return -1
