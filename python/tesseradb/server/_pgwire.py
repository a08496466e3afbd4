"""The PostgreSQL wire protocol (version 3) for ``tessera serve --pg-port``: what psql,
psycopg, JDBC and other PostgreSQL clients speak.

Each connection is a thread with a SQL session of its own (restricted for a user without
the admin right, as over HTTP); its statements go through the same guard, the same
running-statement list (the console sees and cancels them) and the same engine as the
HTTP API's. A user logs in with its name, and its token as the password (cleartext, as
many PostgreSQL-protocol servers ask: use TLS, ``--certfile``/``--keyfile``, off
loopback).

What is spoken: the startup (TLS or not, protocol 3.0; a client asking for a newer minor
version is told 3.0), the simple query protocol (several statements in one query run as
one transaction, as PostgreSQL runs them), the extended one (Parse, Bind, Describe,
Execute with a row limit, Close, Sync, Flush; parameters in text or binary), cancel
requests, and the session settings clients send at start (``SET application_name``,
``extra_float_digits``, ``statement_timeout`` ...). Values go in text, or binary where
the client asks (:mod:`tesseradb.server._pgtypes`).

Differences a client can see: a portal's statement runs when it is first described or
executed, and its rows are then held until sent; statements between two Syncs are not
one implicit transaction (each commits on its own unless ``BEGIN`` opened one).
"""

from __future__ import annotations

import contextlib
import hmac
import io
import re
import secrets
import socket
import socketserver
import ssl
import struct
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from tesseradb.errors import (
    CancelledError,
    InterruptedStatementError,
    ReadOnlyError,
    TesseraError,
)
from tesseradb.server._guard import Refused, may_write
from tesseradb.server._pgcatalog import driver_columns, driver_types, psql_describe
from tesseradb.server._pgcopy import (
    BINARY_HEADER,
    BINARY_TRAILER,
    COPY_IN,
    COPY_OUT,
    CopyError,
    binary_copy_rows,
    copy_options,
    encode_row,
    read_binary_copy,
    read_text_copy,
    text_copy_rows,
)
from tesseradb.server._pgtypes import (
    TEXT,
    ParameterError,
    PgType,
    pg_type,
    read_parameter,
)

if TYPE_CHECKING:
    from tesseradb.database import Session
    from tesseradb.server._http import Running, Server
    from tesseradb.server._users import User

__all__ = ["PgServer"]

PROTOCOL_3 = 3 << 16
SSL_REQUEST = 80877103
GSS_REQUEST = 80877104
CANCEL_REQUEST = 80877102
MAX_STARTUP_BYTES = 10_000  # PostgreSQL's own limit on a startup packet
STARTUP_SECONDS = 30.0  # a connection must have logged in by then
FLUSH_BYTES = 1 << 16  # rows are sent whenever this much is waiting
SERVER_VERSION = "15.0"  # (what clients read to choose their catalog queries)

# settings PostgreSQL clients send that mean nothing to DuckDB: kept per connection,
# shown by SHOW, never passed on
_CLIENT_SETTINGS = {
    "application_name": "",
    "client_encoding": "UTF8",
    "datestyle": "ISO, MDY",
    "intervalstyle": "postgres",
    "extra_float_digits": "1",
    "statement_timeout": "0",
    "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0",
    "client_min_messages": "notice",
    "standard_conforming_strings": "on",
    "bytea_output": "hex",
    "jit": "off",
    "default_transaction_isolation": "serializable",
    "transaction_isolation": "serializable",
    "server_version": SERVER_VERSION,
    "server_encoding": "UTF8",
    "integer_datetimes": "on",
}
_REPORTED = ("application_name", "client_encoding", "DateStyle", "IntervalStyle")
_SET = re.compile(
    r"^\s*SET\s+(?:SESSION\s+|LOCAL\s+)?([A-Za-z_]+)\s*(?:=|\s+TO\s+)\s*(.*?)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_SHOW = re.compile(r"^\s*SHOW\s+([A-Za-z_ ]+?)\s*;?\s*$", re.IGNORECASE)
_FIRST_WORDS = re.compile(
    r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z]+)(?:\s+(?:OR\s+REPLACE\s+)?"
    r"(?:TEMP\s+|TEMPORARY\s+|UNIQUE\s+)?([A-Za-z]+))?",
    re.DOTALL,
)
# what a worker process answers itself (anything else goes to the writer)
_READ_WORDS = {"SELECT", "WITH", "VALUES", "TABLE", "FROM", "SHOW", "DESCRIBE", "SUMMARIZE"}
_ROW_WORDS = _READ_WORDS | {"EXPLAIN", "PIVOT", "UNPIVOT", "CALL", "PRAGMA"}
_COUNT_WORDS = {"INSERT", "UPDATE", "DELETE", "MERGE"}
_TRANSACTION_TAGS = {
    "BEGIN": "BEGIN",
    "START": "START TRANSACTION",
    "COMMIT": "COMMIT",
    "END": "COMMIT",
    "ROLLBACK": "ROLLBACK",
    "ABORT": "ROLLBACK",
}
# SQLSTATEs by the class of DuckDB's error, then by ours
_DUCKDB_STATES = (
    ("Parser Error", "42601"),
    ("Catalog Error", "42P01"),
    ("Binder Error", "42703"),
    ("Conversion Error", "22P02"),
    ("Out of Range Error", "22003"),
    ("Invalid Input Error", "22P02"),
    ("Division by zero", "22012"),
    ("Duplicate key", "23505"),
    ("NOT NULL constraint", "23502"),
    ("CHECK constraint", "23514"),
    ("foreign key", "23503"),
    ("Constraint Error", "23000"),
    ("TransactionContext Error", "25P02"),
    ("Permission Error", "42501"),
)


class ClientGone(Exception):
    """The client's connection broke (reading or sending): the backend ends quietly."""


class ProtocolViolation(Exception):
    """The client broke the protocol: told so (SQLSTATE 08P01), then disconnected."""


class SQLStateError(Exception):
    """An error of this layer with its SQLSTATE."""

    def __init__(self, state: str, message: str) -> None:
        super().__init__(message)
        self.state = state


def sqlstate(err: BaseException) -> str:
    if isinstance(err, SQLStateError):
        return err.state
    if isinstance(err, (Refused, ReadOnlyError)):
        return "42501" if isinstance(err, Refused) else "25006"
    if isinstance(err, (CancelledError, InterruptedStatementError)):
        return "57014"
    if isinstance(err, ParameterError):
        return "22P02"
    text = str(err)
    for marker, state in _DUCKDB_STATES:
        if marker in text:
            return state
    if isinstance(err, LookupError):
        return "42P01"
    if isinstance(err, ValueError):
        return "22023"
    return "XX000" if not isinstance(err, TesseraError) else "42000"


@dataclass
class Outcome:
    """A statement's answer as the protocol sends it: no columns means no RowDescription."""

    tag: str
    names: list[str] = field(default_factory=list)
    types: list[PgType] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    sent: int = 0  # rows sent so far (a portal's Execute may ask for some at a time)

    @property
    def has_rows(self) -> bool:
        return bool(self.names)


@dataclass
class Prepared:
    text: str
    types: list[int]  # the parameter types the client named (0: let the statement say)


@dataclass
class Portal:
    prepared: Prepared
    params: list[Any]
    formats: list[int]  # per result column: 0 text, 1 binary
    outcome: Outcome | None = None


# PostgreSQL-only spellings in the catalog queries of psql and drivers, said as DuckDB
# says them (DuckDB's own pg_catalog answers the rest)
_PG_SPELLINGS = (
    (re.compile(r"OPERATOR\(\s*pg_catalog\.([~!<>=*+-]+)\s*\)", re.I), r"\1"),
    (re.compile(r"\s+COLLATE\s+pg_catalog\.(?:default|\"default\"|\"C\")", re.I), ""),
    (re.compile(r"pg_catalog\.pg_get_userbyid\s*\([^()]*\)", re.I), "'tessera'"),
    (re.compile(r"pg_catalog\.pg_encoding_to_char\s*\([^()]*\)", re.I), "'UTF8'"),
)


def _duckdb_spelling(text: str) -> str:
    """A client's catalog query in DuckDB's spelling (other statements are left alone)."""
    if "pg_catalog" not in text:
        return text
    for pattern, replacement in _PG_SPELLINGS:
        text = pattern.sub(replacement, text)
    return text


def _first_words(text: str) -> tuple[str, str]:
    found = _FIRST_WORDS.match(text)
    if found is None:
        return "", ""
    return found.group(1).upper(), (found.group(2) or "").upper()


def _parameter_count(text: str) -> int:
    """The highest ``$n`` in the text outside quotes and comments."""
    plain = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    numbers = [int(n) for n in re.findall(r"\$(\d+)", plain)]
    return max(numbers, default=0)


def _split(text: str) -> list[str]:
    """The statements of a simple query (DuckDB's parser splits it; one it cannot read
    stays whole, for the engine to name its syntax error)."""
    body = text.strip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    if ";" not in body:
        return [body] if body else []
    import duckdb

    try:
        return [s.query.strip() for s in duckdb.extract_statements(text) if s.query.strip()]
    except duckdb.Error:
        return [body]


class Backend:
    """One client connection: its login, its session, its prepared statements and portals."""

    def __init__(self, pg: PgServer, sock: socket.socket) -> None:
        self.pg = pg
        self.server = pg.server
        self.sock: socket.socket = sock
        self.rfile = _reader(sock)
        self.out = bytearray()
        self.user: User | None = None
        self.session: Session | None = None
        self.settings = dict(_CLIENT_SETTINGS)
        # (the process number in the key's top bits: a cancel request reaching another
        # process of the server is passed to this one)
        self.key = (pg.number << 24 | secrets.randbelow(1 << 24), secrets.randbelow(1 << 31))
        self.token = ""  # (a worker's: to log in to the writer for this client)
        self.upstream: socket.socket | None = None  # the writer, once this client writes
        self.upstream_key: bytes = b""
        self.running: Running | None = None
        self.prepared: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.failed = False  # the open transaction failed: only ROLLBACK helps
        self.skipping = False  # an extended-protocol error: messages are ignored until Sync

    # --- bytes in and out ----------------------------------------------------------
    def read(self, size: int) -> bytes:
        try:
            data = self.rfile.read(size)
        except OSError as err:  # (a reset, a timeout, TLS gone wrong)
            raise ClientGone(str(err)) from None
        if data is None or len(data) < size:
            raise ClientGone("the client disconnected")
        return data

    def read_message(self) -> tuple[bytes, bytes]:
        head = self.read(5)
        kind, size = head[:1], struct.unpack("!i", head[1:])[0]
        if size < 4 or size - 4 > self.server.options.max_body_bytes:
            raise ProtocolViolation(f"a message of {size} bytes (type {kind!r}) is refused")
        return kind, self.read(size - 4)

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        self.out += kind + struct.pack("!i", len(payload) + 4) + payload
        if len(self.out) >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.out:
            try:
                self.sock.sendall(self.out)
            except OSError as err:
                raise ClientGone(str(err)) from None
            self.out.clear()

    def send_error(self, err: BaseException, severity: str = "ERROR") -> None:
        message = str(err) or type(err).__name__
        fields = [b"S" + severity.encode(), b"V" + severity.encode()]
        fields += [b"C" + sqlstate(err).encode(), b"M" + message.encode(errors="replace")]
        self.send(b"E", b"\0".join(fields) + b"\0\0")

    def ready(self) -> None:
        status = b"I"
        if self.session is not None and self.session.in_transaction:
            status = b"E" if self.failed else b"T"
        else:
            self.failed = False
        self.send(b"Z", status)
        self.flush()

    # --- the connection's life -----------------------------------------------------
    def run(self) -> None:
        try:
            self.sock.settimeout(STARTUP_SECONDS)
            if not self.startup():
                return
            self.sock.settimeout(None)
            self.pg.register(self)
            self.serve()
        except ProtocolViolation as err:
            with contextlib.suppress(OSError):
                self.send_error(SQLStateError("08P01", str(err)), "FATAL")
                self.flush()
        except (ClientGone, OSError, ssl.SSLError):
            pass  # (the client left, or its bytes were not TLS, or the writer is gone)
        finally:
            self.pg.unregister(self)
            if self.running is not None:
                self.running.cancel.cancel()
            if self.session is not None:
                with contextlib.suppress(Exception):
                    self.session.close()  # (an open transaction is rolled back)
            with contextlib.suppress(OSError):
                self.rfile.close()
                self.sock.close()

    def startup(self) -> bool:
        """Read the startup packet (after TLS if asked), log the user in; False when the
        connection ends here (a cancel request, a refused login)."""
        while True:
            size = struct.unpack("!i", self.read(4))[0]
            if not 8 <= size <= MAX_STARTUP_BYTES:
                raise ProtocolViolation(f"a startup packet of {size} bytes")
            body = self.read(size - 4)
            code = struct.unpack("!i", body[:4])[0]
            if code == SSL_REQUEST:
                if self.pg.tls is None:
                    self.sock.sendall(b"N")
                    continue
                self.sock.sendall(b"S")
                self.sock = self.pg.tls.wrap_socket(self.sock, server_side=True)
                self.rfile = _reader(self.sock)
                continue
            if code == GSS_REQUEST:
                self.sock.sendall(b"N")
                continue
            if code == CANCEL_REQUEST:
                if len(body) == 12:
                    self.pg.cancel(*struct.unpack("!ii", body[4:12]))
                return False
            break
        major, minor = code >> 16, code & 0xFFFF
        if major != 3:
            raise ProtocolViolation(
                f"protocol version {major}.{minor} is not spoken here; this server speaks 3.0"
            )
        parts = body[4:].split(b"\0")
        if len(parts) < 2 or parts[-1] != b"" or parts[-2] != b"" or len(parts) % 2:
            raise ProtocolViolation("the startup packet's parameters are not name/value pairs")
        try:
            params = {parts[i].decode(): parts[i + 1].decode() for i in range(0, len(parts) - 2, 2)}
        except UnicodeDecodeError:
            raise ProtocolViolation("the startup packet is not UTF-8") from None
        if minor:
            unknown = [k.encode() for k in params if k.startswith("_pq_.")]
            self.send(
                b"v",
                struct.pack("!ii", PROTOCOL_3, len(unknown)) + b"".join(k + b"\0" for k in unknown),
            )
        name = params.get("user", "")
        if not name:
            self.send_error(SQLStateError("28000", "the startup packet names no user"), "FATAL")
            self.flush()
            return False
        self.send(b"R", struct.pack("!i", 3))  # the password, in clear (the user's token)
        self.flush()
        kind, payload = self.read_message()
        if kind != b"p":
            raise ProtocolViolation(f"a password message was expected, not {kind!r}")
        token = payload.rstrip(b"\0").decode(errors="replace")
        user = self.server.users.authenticate(token)
        if user is None or user.name != name:
            self.send_error(
                SQLStateError("28P01", f'password authentication failed for user "{name}"'),
                "FATAL",
            )
            self.flush()
            return False
        self.user = user
        self.token = token
        self.session = self.server.db.session(restricted=not user.is_admin)
        self.settings["application_name"] = params.get("application_name", "")
        self.send(b"R", struct.pack("!i", 0))
        shown = {
            "server_version": SERVER_VERSION,
            "server_encoding": "UTF8",
            "client_encoding": "UTF8",
            "DateStyle": "ISO, MDY",
            "IntervalStyle": "postgres",
            "TimeZone": "UTC",
            "integer_datetimes": "on",
            "standard_conforming_strings": "on",
            "is_superuser": "on" if user.is_admin else "off",
            "session_authorization": user.name,
            "application_name": self.settings["application_name"],
        }
        for key, value in shown.items():
            self.send(b"S", key.encode() + b"\0" + value.encode() + b"\0")
        self.send(b"K", struct.pack("!ii", *self.key))
        self.ready()
        return True

    def serve(self) -> None:
        handlers = {
            b"Q": self.on_query,
            b"P": self.on_parse,
            b"B": self.on_bind,
            b"D": self.on_describe,
            b"E": self.on_execute,
            b"C": self.on_close,
        }
        while True:
            kind, body = self.read_message()
            if kind == b"X":
                return
            if kind == b"S":
                self.skipping = False
                if self.session is not None and not self.session.in_transaction:
                    self.portals.clear()  # (portals live as long as their transaction)
                self.ready()
                continue
            if kind == b"H":
                self.flush()
                continue
            if kind in (b"d", b"c", b"f"):
                continue  # COPY data outside a COPY: ignored, as PostgreSQL does
            handler = handlers.get(kind)
            if handler is None:
                raise ProtocolViolation(f"message type {kind!r} is not known here")
            if self.skipping and kind != b"Q":
                continue
            if self.pg.writer_port is not None and self.writes(kind, body):
                try:
                    self.relay_to_writer(kind, body)
                except (OSError, EOFError, SQLStateError) as err:
                    if self.upstream is not None:
                        return  # (relayed: whichever side ended, the connection ends)
                    gone = SQLStateError("08006", f"the database's writer is not reachable: {err}")
                    self.send_error(gone, "FATAL")
                    self.flush()
                return
            try:
                handler(body)
            except (ProtocolViolation, ClientGone):
                raise
            except Exception as err:  # every statement error goes to the client (an
                # OSError too: a damaged store is one)
                if self.session is not None and self.session.in_transaction:
                    self.failed = True
                self.send_error(err)
                if kind == b"Q":
                    self.ready()
                else:
                    self.skipping = True

    # --- a worker's client that writes: handed to the writer ------------------------
    def writes(self, kind: bytes, body: bytes) -> bool:
        """Whether a worker must hand this client to the writer: a statement that is not
        a plain query (a write, a transaction, a setting), from here on."""
        if kind == b"Q":
            texts = _split(_cstring(body)[0])
        elif kind == b"P":
            texts = [_cstring(_cstring(body)[1])[0]]
        else:
            return False
        for text in texts:
            setting = _SET.match(text)
            if setting is not None and setting.group(1).lower() in _CLIENT_SETTINGS:
                continue
            word = _first_words(text)[0]
            if word not in _READ_WORDS or may_write(text):
                return True
        return False

    def relay_to_writer(self, kind: bytes, body: bytes) -> None:
        """Log in to the writer as this client's user, bring over its prepared statements
        and settings, pass this message on, then relay both ways until either side ends
        (the writer acknowledges writes: nothing is acknowledged here)."""
        assert self.user is not None
        self.flush()
        upstream = socket.create_connection(("127.0.0.1", self.pg.writer_port), timeout=30)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = _reader(upstream)
        payload = struct.pack("!i", PROTOCOL_3) + b"user\0" + self.user.name.encode() + b"\0\0"
        upstream.sendall(struct.pack("!i", len(payload) + 4) + payload)

        def until_ready() -> None:
            while True:
                head = reader.read(5)
                if len(head) < 5:
                    raise EOFError("the writer closed the connection")
                size = struct.unpack("!i", head[1:])[0]
                data = reader.read(size - 4)
                if head[:1] == b"R" and data[:4] == struct.pack("!i", 3):
                    password = self.token.encode() + b"\0"
                    upstream.sendall(b"p" + struct.pack("!i", len(password) + 4) + password)
                elif head[:1] == b"K":
                    self.upstream_key = data
                elif head[:1] == b"E":
                    raise SQLStateError("08006", "the writer refused this client's login")
                elif head[:1] == b"Z":
                    return

        until_ready()
        setup = bytearray()
        timeout = self.settings.get("statement_timeout", "0")
        if timeout != "0":
            text = f"SET statement_timeout = {timeout}".encode() + b"\0"
            setup += b"Q" + struct.pack("!i", len(text) + 4) + text
        for name, prepared in self.prepared.items():
            if name:  # (named statements live on: the client may bind them later)
                parse = name.encode() + b"\0" + prepared.text.encode() + b"\0"
                parse += struct.pack(
                    f"!h{len(prepared.types)}I", len(prepared.types), *prepared.types
                )
                setup += b"P" + struct.pack("!i", len(parse) + 4) + parse
        named = [n for n in self.prepared if n]
        if setup:
            if named:
                setup += b"S\x00\x00\x00\x04"
            upstream.sendall(bytes(setup))
            for _ in range(int(timeout != "0") + int(bool(named))):
                until_ready()
        upstream.settimeout(None)
        self.upstream = upstream
        if self.session is not None:
            self.session.close()  # (the writer's session serves this client now)
            self.session = None
        upstream.sendall(kind + struct.pack("!i", len(body) + 4) + body)

        def down() -> None:
            try:
                while True:
                    data = reader.read1(FLUSH_BYTES)
                    if not data:
                        break
                    self.sock.sendall(data)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=down, name="pg-relay", daemon=True).start()
        try:
            while True:
                data = self.rfile.read1(FLUSH_BYTES)
                if not data:
                    break
                upstream.sendall(data)
        finally:
            with contextlib.suppress(OSError):
                upstream.shutdown(socket.SHUT_RDWR)
            upstream.close()

    # --- statements ----------------------------------------------------------------
    def execute(self, text: str, params: list[Any]) -> Outcome:
        """Run one statement in the session, through the server's guard and running list."""
        assert self.user is not None and self.session is not None
        handled = self.client_setting(text)
        if handled is not None:
            return handled
        described = (
            driver_types(text)
            or driver_columns(text, params, self.catalog_rows)
            or psql_describe(text, self.catalog_rows, self.server.db.path.stem)
        )
        if described is not None:
            names, kinds, rows = described
            return Outcome(f"SELECT {len(rows)}", names, kinds, rows)
        text = _duckdb_spelling(text)
        word, second = _first_words(text)
        if self.failed and word not in ("ROLLBACK", "ABORT", "COMMIT", "END"):
            raise SQLStateError(
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction block",
            )
        limit = self.server.options.statement_seconds
        own = int(self.settings.get("statement_timeout", "0") or 0) / 1000
        seconds = min(limit, own) if own > 0 else limit
        with self.server.statement(self.user, text, seconds) as run:
            self.running = run
            try:
                result = self.session.sql(text, params or None, cancel=run.cancel)
            except (CancelledError, InterruptedStatementError):
                if run.timed_out:
                    raise SQLStateError(
                        "57014",
                        f"the statement ran past its time limit of {seconds:g} s and was "
                        "stopped; nothing was kept",
                    ) from None
                raise SQLStateError(
                    "57014", "the statement was cancelled; nothing was kept"
                ) from None
            finally:
                self.running = None
        if word in ("COMMIT", "END", "ROLLBACK", "ABORT"):
            self.failed = False
        columns = result.columns
        if word in _COUNT_WORDS and columns == ["Count"]:
            count = result.fetchall()
            done = int(count[0][0]) if count and count[0][0] is not None else 0
            return Outcome(f"INSERT 0 {done}" if word == "INSERT" else f"{word} {done}")
        if word in _TRANSACTION_TAGS:
            return Outcome(_TRANSACTION_TAGS[word])
        if word in ("CREATE", "DROP", "ALTER") and second:
            return Outcome(f"{word} {second}")
        if word not in _ROW_WORDS and word not in _COUNT_WORDS and columns in ([], ["Count"]):
            return Outcome(word or "OK")
        rows = _with_intervals(result)
        tag = f"{word} {len(rows)}" if word in _COUNT_WORDS else f"SELECT {len(rows)}"
        if word == "INSERT":
            tag = f"INSERT 0 {len(rows)}"
        return Outcome(tag, columns, [pg_type(t) for t in result.types], rows)

    def catalog_rows(self, text: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """Rows of a catalog query of the server's own (a fixed text, not the user's: it
        runs in the user's session without the guard, which refuses DuckDB's catalog
        functions to others than admins; nothing for a user who may not read tables)."""
        assert self.user is not None and self.session is not None
        if not self.user.may("table", "read"):
            return []
        return self.session.sql(text, params or None).fetchall()

    def client_setting(self, text: str) -> Outcome | None:
        """A ``SET`` or ``SHOW`` of a setting PostgreSQL clients send, answered here."""
        found = _SET.match(text)
        if found is not None:
            name = found.group(1).lower()
            if name not in _CLIENT_SETTINGS:
                return None
            value = found.group(2).strip().strip("'\"")
            if name == "client_encoding" and value.upper().replace("-", "") not in (
                "UTF8",
                "UNICODE",
            ):
                raise SQLStateError("22023", f"client_encoding is UTF8 here, not {value!r}")
            if name == "statement_timeout":
                value = str(_milliseconds(value))
            self.settings[name] = value
            reported = {k.lower(): k for k in _REPORTED}
            if name in reported:
                self.send(b"S", reported[name].encode() + b"\0" + value.encode() + b"\0")
            return Outcome("SET")
        found = _SHOW.match(text)
        if found is not None:
            name = "_".join(found.group(1).lower().split())
            if name == "transaction_isolation_level":
                name = "transaction_isolation"
            if name in _CLIENT_SETTINGS:
                return Outcome("SHOW", [name], [PgType(TEXT)], [(self.settings[name],)])
        return None

    def send_rows(self, outcome: Outcome, formats: list[int], limit: int = 0) -> bool:
        """Send the outcome's rows not yet sent (at most ``limit``; 0: all); True when all
        are sent."""
        kinds = outcome.types
        coders = [t.binary if _format(formats, i) else t.text for i, t in enumerate(kinds)]
        end = len(outcome.rows) if limit <= 0 else min(len(outcome.rows), outcome.sent + limit)
        for row in outcome.rows[outcome.sent : end]:
            self.send(b"D", encode_row(row, coders))
        outcome.sent = end
        return end == len(outcome.rows)

    def describe_rows(self, outcome: Outcome, formats: list[int]) -> None:
        if not outcome.has_rows:
            self.send(b"n")
            return
        fields = [struct.pack("!h", len(outcome.names))]
        for i, (name, kind) in enumerate(zip(outcome.names, outcome.types, strict=True)):
            fmt = _format(formats, i)
            fields.append(name.encode() + b"\0")
            fields.append(struct.pack("!ihihih", 0, 0, kind.oid, kind.width, -1, fmt))
        self.send(b"T", b"".join(fields))

    # --- the simple query protocol -------------------------------------------------
    def on_query(self, body: bytes) -> None:
        self.skipping = False
        text = _cstring(body)[0]
        statements = _split(text)
        if not statements:
            self.send(b"I")
            self.ready()
            return
        assert self.session is not None and self.user is not None
        words = [_first_words(s)[0] for s in statements]
        several = len(statements) > 1 and not self.session.in_transaction
        several = several and not any(w in _TRANSACTION_TAGS for w in words)
        if several and not self.user.is_admin and any(may_write(s) for s in statements):
            raise Refused(
                "a query of several statements that write runs as one transaction, and "
                "transactions are for admins: send them one at a time"
            )
        wrap = several and self.user.is_admin
        if wrap:
            self.session.sql("BEGIN TRANSACTION")
        try:
            for statement in statements:
                if self.copy(statement, []):
                    continue
                outcome = self.execute(statement, [])
                if outcome.has_rows:
                    self.describe_rows(outcome, [])
                self.send_rows(outcome, [])
                self.send(b"C", outcome.tag.encode() + b"\0")
        except BaseException:
            if wrap and self.session.in_transaction:
                with contextlib.suppress(Exception):
                    self.session.sql("ROLLBACK")
            raise
        if wrap:
            self.session.sql("COMMIT")
        self.ready()

    def copy(self, text: str, params: list[Any]) -> bool:
        """Run ``text`` if it is a ``COPY ... TO STDOUT`` or ``FROM STDIN`` (its rows go as
        CopyData, then its CommandComplete); whether it was one."""
        found = COPY_OUT.match(text)
        if found is not None:
            self.send(b"C", self.copy_out(found, params).encode() + b"\0")
            return True
        found = COPY_IN.match(text)
        if found is not None:
            self.send(b"C", self.copy_in(found).encode() + b"\0")
            return True
        return False

    def copy_out(self, copy: re.Match[str], params: list[Any]) -> str:
        """``COPY ... TO STDOUT``: the query's rows as CopyData in PostgreSQL's text, CSV
        or binary COPY format (ADBC's PostgreSQL driver reads every result this way, and
        psql's ``\\copy``); the command tag."""
        options = copy_options(copy.group("options") or "")
        kind = options.get("format", "text")
        if kind not in ("text", "csv", "binary"):
            raise SQLStateError("22023", f"COPY format {kind!r}: text, csv or binary")
        query = copy.group("query")
        if query is None:
            columns = copy.group("columns")
            query = f"SELECT {columns or '*'} FROM {copy.group('table')}"
        outcome = self.execute(query.strip(), params)
        if not outcome.has_rows:
            raise SQLStateError("42601", "COPY ... TO STDOUT needs a statement that returns rows")
        width = len(outcome.types)
        code = 1 if kind == "binary" else 0
        self.send(b"H", struct.pack(f"!bh{width}h", code, width, *([code] * width)))
        # one CopyData message per row, as PostgreSQL sends them (drivers read them so:
        # ADBC's took only the first row of a message); the binary header goes with the
        # first, the trailer alone
        header = b""
        if kind == "binary":
            header = BINARY_HEADER
            rows: Any = binary_copy_rows(outcome.types, outcome.rows)
        else:
            rows = text_copy_rows(
                outcome.names, outcome.types, outcome.rows, kind == "csv", options
            )
        for row in rows:
            self.send(b"d", header + row)
            header = b""
            if len(self.out) >= FLUSH_BYTES:
                self.flush()
        if kind == "binary":
            self.send(b"d", header + BINARY_TRAILER)
        self.send(b"c")
        return f"COPY {len(outcome.rows)}"

    def copy_in(self, copy: re.Match[str]) -> str:
        """``COPY table [(columns)] FROM STDIN``: the client's CopyData in the text, CSV or
        binary format, read whole, each field read as the column's type, then stored by
        one INSERT (so all rows or none, through the same guard and rights as any); the
        command tag."""
        options = copy_options(copy.group("options") or "")
        kind = options.get("format", "text")
        if kind not in ("text", "csv", "binary"):
            raise SQLStateError("22023", f"COPY format {kind!r}: text, csv or binary")
        table, columns = copy.group("table"), copy.group("columns")
        target = self.execute(f"SELECT {columns or '*'} FROM {table} LIMIT 0", [])
        width = len(target.names)
        names = ", ".join(f'"{n}"' for n in (c.replace('"', '""') for c in target.names))
        unnested = ", ".join(f"unnest(${i + 1})" for i in range(width))
        insert = f"INSERT INTO {table} ({names}) SELECT {unnested}"
        assert self.user is not None
        self.server.check(self.user, insert)  # (refused before the data is sent)
        code = 1 if kind == "binary" else 0
        self.send(b"G", struct.pack(f"!bh{width}h", code, width, *([code] * width)))
        self.flush()
        data = bytearray()
        while True:  # (CopyData until CopyDone; Flush and Sync may come between)
            message, body = self.read_message()
            if message == b"d":
                data += body
                if len(data) > self.server.options.max_body_bytes:
                    self.skip_copy()
                    raise SQLStateError(
                        "54000",
                        f"COPY data over {self.server.options.max_body_bytes:,} bytes is "
                        "refused (the server's limit on a request body); nothing was stored",
                    )
            elif message == b"c":
                break
            elif message == b"f":
                reason = _cstring(body)[0]
                raise SQLStateError(
                    "57014", f"COPY from stdin failed: {reason}; nothing was stored"
                )
            elif message not in (b"H", b"S"):
                raise ProtocolViolation(f"a message of type {message!r} inside COPY FROM STDIN")
        try:
            if kind == "binary":
                fields: list[list[Any]] = read_binary_copy(bytes(data), width)
            else:
                fields = read_text_copy(bytes(data), kind == "csv", options)
            rows = [
                _copied_row(row, n, target, kind == "binary")
                for n, row in enumerate(fields, start=1)
            ]
        except CopyError as err:
            raise SQLStateError(
                "22P04", f"COPY {table} FROM STDIN: {err}; nothing was stored"
            ) from None
        if rows:
            self.execute(insert, [[row[i] for row in rows] for i in range(width)])
        return f"COPY {len(rows)}"

    def skip_copy(self) -> None:
        """Read the rest of a refused COPY's data (its CopyDone or CopyFail)."""
        while self.read_message()[0] not in (b"c", b"f"):
            pass

    # --- the extended query protocol -----------------------------------------------
    def on_parse(self, body: bytes) -> None:
        name, rest = _cstring(body)
        text, rest = _cstring(rest)
        count = _short(rest, 0)
        types = [_int(rest, 2 + 4 * i) & 0xFFFFFFFF for i in range(count)]
        if name and name in self.prepared:
            raise SQLStateError("42P05", f'prepared statement "{name}" already exists')
        self.prepared[name] = Prepared(text, types)
        self.send(b"1")

    def on_bind(self, body: bytes) -> None:
        portal, rest = _cstring(body)
        name, rest = _cstring(rest)
        prepared = self.prepared.get(name)
        if prepared is None:
            raise SQLStateError("26000", f'prepared statement "{name}" does not exist')
        at = 0
        nformats = _short(rest, at)
        formats = [_short(rest, at + 2 + 2 * i) for i in range(nformats)]
        at += 2 + 2 * nformats
        nparams = _short(rest, at)
        at += 2
        if nformats not in (0, 1, nparams):
            raise ProtocolViolation(f"{nformats} parameter format codes for {nparams} parameters")
        params = []
        for i in range(nparams):
            size = _int(rest, at)
            at += 4
            data = None
            if size >= 0:
                data = rest[at : at + size]
                if len(data) != size:
                    raise ProtocolViolation("a Bind message ends inside a parameter")
                at += size
            fmt = _format(formats, i)
            oid = prepared.types[i] if i < len(prepared.types) else 0
            params.append(read_parameter(data, oid, fmt == 1, i + 1))
        nresults = _short(rest, at)
        results = [_short(rest, at + 2 + 2 * i) for i in range(nresults)]
        if any(f not in (0, 1) for f in formats + results):
            raise ProtocolViolation("a format code is 0 (text) or 1 (binary)")
        self.portals[portal] = Portal(prepared, params, results)
        self.send(b"2")

    def on_describe(self, body: bytes) -> None:
        what, name = body[:1], _cstring(body[1:])[0]
        if what == b"S":
            prepared = self.prepared.get(name)
            if prepared is None:
                raise SQLStateError("26000", f'prepared statement "{name}" does not exist')
            count = max(_parameter_count(prepared.text), len(prepared.types))
            types = [prepared.types[i] if i < len(prepared.types) else 0 for i in range(count)]
            types = [t or TEXT for t in types]  # (an untyped parameter is read as text)
            self.send(b"t", struct.pack(f"!h{count}I", count, *types))
            self.describe_rows(self.preview(prepared, count), [])
            return
        if what != b"P":
            raise ProtocolViolation(f"Describe of {what!r}: 'S' or 'P'")
        portal = self.portal(name)
        if COPY_OUT.match(portal.prepared.text) or COPY_IN.match(portal.prepared.text):
            self.send(b"n")  # (its rows travel as CopyData when it is executed)
            return
        self.describe_rows(self.outcome(portal), portal.formats)

    def preview(self, prepared: Prepared, count: int) -> Outcome:
        """The columns of a prepared query, from a run with no rows and NULL parameters
        (a statement that is not a query describes no rows)."""
        word = _first_words(prepared.text)[0]
        if word not in ("SELECT", "WITH", "VALUES", "TABLE", "FROM"):
            return Outcome("")
        body = prepared.text.strip().rstrip(";")
        try:
            return self.execute(f"SELECT * FROM ({body}) AS described LIMIT 0", [None] * count)
        except Exception:
            return Outcome("")

    def portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise SQLStateError("34000", f'portal "{name}" does not exist')
        return portal

    def outcome(self, portal: Portal) -> Outcome:
        if portal.outcome is None:
            text = portal.prepared.text
            if not text.strip():
                portal.outcome = Outcome("")
            else:
                portal.outcome = self.execute(text, portal.params)
        return portal.outcome

    def on_execute(self, body: bytes) -> None:
        name, rest = _cstring(body)
        limit = _int(rest, 0)
        portal = self.portal(name)
        if self.copy(portal.prepared.text, portal.params):
            return
        outcome = self.outcome(portal)
        if not outcome.tag:
            self.send(b"I")  # an empty query
            return
        if outcome.has_rows and not self.send_rows(outcome, portal.formats, limit):
            self.send(b"s")  # suspended: the next Execute goes on
            return
        self.send(b"C", outcome.tag.encode() + b"\0")

    def on_close(self, body: bytes) -> None:
        what, name = body[:1], _cstring(body[1:])[0]
        if what == b"S":
            self.prepared.pop(name, None)
        elif what == b"P":
            self.portals.pop(name, None)
        else:
            raise ProtocolViolation(f"Close of {what!r}: 'S' or 'P'")
        self.send(b"3")


def _with_intervals(result: Any) -> list[tuple[Any, ...]]:
    """The result's rows, INTERVAL columns as DuckDB keeps them (months, days and
    microseconds, from its Arrow form): its Python values make a month 30 days."""
    rows = result.fetchall()
    intervals = [i for i, t in enumerate(result.types) if t == "INTERVAL"]
    if not intervals or not rows:
        return rows
    table = result.arrow()
    columns = {i: table.column(i).to_pylist() for i in intervals}
    return [
        tuple(columns[i][n] if i in columns else v for i, v in enumerate(row))
        for n, row in enumerate(rows)
    ]


def _copied_row(row: list[Any], number: int, target: Outcome, binary: bool) -> list[Any]:
    """One row of COPY data, each field read as its column's type."""
    if len(row) != len(target.names):
        raise CopyError(f"row {number} has {len(row)} fields, not {len(target.names)}")
    values = []
    for i, given in enumerate(row):
        data = given.encode() if isinstance(given, str) else given
        try:
            values.append(read_parameter(data, target.types[i].oid, binary, i + 1))
        except ParameterError as err:
            why = str(err).split(": ", 1)[-1]  # (without "parameter $n")
            raise CopyError(f"row {number}, column {target.names[i]!r}: {why}") from None
    return values


def _reader(sock: socket.socket) -> io.BufferedReader:
    return cast(io.BufferedReader, sock.makefile("rb", buffering=FLUSH_BYTES))


def _format(codes: list[int], i: int) -> int:
    """Value ``i``'s format code: the protocol gives none (all text), one for all, or one
    per value."""
    if len(codes) > 1:
        return codes[i]
    return codes[0] if codes else 0


def _milliseconds(value: str) -> int:
    found = re.fullmatch(r"\s*(\d+)\s*(ms|s|min)?\s*", value.lower())
    if found is None:
        raise SQLStateError(
            "22023", f"statement_timeout is a number of milliseconds, not {value!r}"
        )
    scale = {"s": 1000, "min": 60_000}.get(found.group(2) or "ms", 1)
    return int(found.group(1)) * scale


def _cstring(data: bytes) -> tuple[str, bytes]:
    end = data.find(b"\0")
    if end < 0:
        raise ProtocolViolation("a string in the message has no terminating NUL")
    try:
        return data[:end].decode(), data[end + 1 :]
    except UnicodeDecodeError:
        raise ProtocolViolation("a string in the message is not UTF-8") from None


def _short(data: bytes, at: int) -> int:
    if at + 2 > len(data):
        raise ProtocolViolation("the message ends early")
    return int(struct.unpack_from("!h", data, at)[0])


def _int(data: bytes, at: int) -> int:
    if at + 4 > len(data):
        raise ProtocolViolation("the message ends early")
    return int(struct.unpack_from("!i", data, at)[0])


class _Listener(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class _SharedListener(_Listener):
    """A listener sharing its port with the server's other processes (SO_REUSEPORT: the
    kernel spreads new connections over them)."""

    allow_reuse_port = True


class PgServer:
    """The PostgreSQL-protocol listener of a served database (threads of this process)."""

    def __init__(
        self,
        server: Server,
        host: str = "127.0.0.1",
        port: int = 0,
        certfile: str | None = None,
        keyfile: str | None = None,
        processes: Processes | None = None,
    ) -> None:
        self.server = server
        self.processes = processes
        self.number = 0 if processes is None else processes.number
        # a worker's: where the writer takes the clients that write
        self.writer_port = None if processes is None or not processes.number else processes.ports[0]
        self.tls: ssl.SSLContext | None = None
        if certfile is not None:
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(certfile, keyfile)
        self._backends: dict[int, Backend] = {}
        self._lock = threading.Lock()
        pg = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock = self.request
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                Backend(pg, sock).run()

        self._listeners: list[_Listener] = []
        if processes is None:
            self._listeners.append(_Listener((host, port), Handler))
        else:  # (the shared public port, and this process's own on loopback)
            self._listeners.append(_SharedListener((host, port), Handler))
            own = processes.ports[processes.number]
            self._listeners.append(_Listener(("127.0.0.1", own), Handler))
        self.port = int(self._listeners[0].server_address[1])

    def start(self) -> PgServer:
        for listener in self._listeners:
            name = f"tessera-pg-{listener.server_address[1]}"
            threading.Thread(target=listener.serve_forever, name=name, daemon=True).start()
        return self

    def stop(self) -> None:
        for listener in self._listeners:
            listener.shutdown()
            listener.server_close()
        with self._lock:
            backends = list(self._backends.values())
        for backend in backends:  # (their threads end on the closed sockets)
            with contextlib.suppress(OSError):
                backend.sock.shutdown(socket.SHUT_RDWR)

    def register(self, backend: Backend) -> None:
        with self._lock:
            self._backends[backend.key[0]] = backend

    def unregister(self, backend: Backend) -> None:
        with self._lock:
            if self._backends.get(backend.key[0]) is backend:
                del self._backends[backend.key[0]]

    def cancel(self, pid: int, secret: int) -> None:
        """A cancel request: stop the statement of the backend with that key, if any (a
        wrong secret is ignored, as PostgreSQL ignores it)."""
        owner = pid >> 24
        if self.processes is not None and owner != self.number:
            if owner < len(self.processes.ports):  # (another process's client)
                _send_cancel(self.processes.ports[owner], struct.pack("!ii", pid, secret))
            return
        with self._lock:
            backend = self._backends.get(pid)
        if backend is None or not hmac.compare_digest(
            struct.pack("!i", backend.key[1]), struct.pack("!i", secret)
        ):
            return
        if backend.upstream is not None and backend.upstream_key and self.writer_port:
            _send_cancel(self.writer_port, backend.upstream_key)  # (its statement runs there)
            return
        running = backend.running
        if running is not None:
            running.cancel.cancel()


@dataclass(frozen=True)
class Processes:
    """The processes of a server with workers: each one's loopback port (the writer's
    first) and this process's number (0: the writer)."""

    ports: tuple[int, ...]
    number: int


def _send_cancel(port: int, key: bytes) -> None:
    """A cancel request for ``key`` (process id and secret) to a process of the server."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 5) as sock:
        sock.sendall(struct.pack("!ii", 16, CANCEL_REQUEST) + key)
        sock.recv(1)
