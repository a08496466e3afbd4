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
import re
import secrets
import socket
import ssl
import struct
from typing import TYPE_CHECKING, Any

from tesseradb.errors import (
    CancelledError,
    InterruptedStatementError,
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
from tesseradb.server._pgmessages import (
    CANCEL_REQUEST,
    FLUSH_BYTES,
    GSS_REQUEST,
    PROTOCOL_3,
    SSL_REQUEST,
    ClientGone,
    ProtocolViolation,
    cstring,
    format_code,
    int_at,
    reader_of,
    short_at,
)
from tesseradb.server._pgrelay import needs_writer, relay_to_writer
from tesseradb.server._pgstatements import (
    CLIENT_SETTINGS,
    COUNT_WORDS,
    REPORTED,
    ROW_WORDS,
    SERVER_VERSION,
    SET_STATEMENT,
    SHOW_STATEMENT,
    TRANSACTION_TAGS,
    Outcome,
    Portal,
    Prepared,
    SQLStateError,
    duckdb_spelling,
    first_words,
    parameter_count,
    split_statements,
    sqlstate,
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
    from tesseradb.server._http import Running
    from tesseradb.server._pgserver import PgServer
    from tesseradb.server._users import User

__all__ = ["Backend"]

MAX_STARTUP_BYTES = 10_000  # PostgreSQL's own limit on a startup packet
STARTUP_SECONDS = 30.0  # a connection must have logged in by then


class Backend:
    """One client connection: its login, its session, its prepared statements and portals."""

    def __init__(self, pg: PgServer, sock: socket.socket) -> None:
        self.pg = pg
        self.server = pg.server
        self.sock: socket.socket = sock
        self.rfile = reader_of(sock)
        self.out = bytearray()
        self.user: User | None = None
        self.session: Session | None = None
        self.settings = dict(CLIENT_SETTINGS)
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
                self.rfile = reader_of(self.sock)
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
            if self.pg.writer_port is not None and needs_writer(kind, body):
                try:
                    relay_to_writer(self, kind, body)
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
        text = duckdb_spelling(text)
        word, second = first_words(text)
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
        if word in COUNT_WORDS and columns == ["Count"]:
            count = result.fetchall()
            done = int(count[0][0]) if count and count[0][0] is not None else 0
            return Outcome(f"INSERT 0 {done}" if word == "INSERT" else f"{word} {done}")
        if word in TRANSACTION_TAGS:
            return Outcome(TRANSACTION_TAGS[word])
        if word in ("CREATE", "DROP", "ALTER") and second:
            return Outcome(f"{word} {second}")
        if word not in ROW_WORDS and word not in COUNT_WORDS and columns in ([], ["Count"]):
            return Outcome(word or "OK")
        rows = _with_intervals(result)
        tag = f"{word} {len(rows)}" if word in COUNT_WORDS else f"SELECT {len(rows)}"
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
        found = SET_STATEMENT.match(text)
        if found is not None:
            name = found.group(1).lower()
            if name not in CLIENT_SETTINGS:
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
            reported = {k.lower(): k for k in REPORTED}
            if name in reported:
                self.send(b"S", reported[name].encode() + b"\0" + value.encode() + b"\0")
            return Outcome("SET")
        found = SHOW_STATEMENT.match(text)
        if found is not None:
            name = "_".join(found.group(1).lower().split())
            if name == "transaction_isolation_level":
                name = "transaction_isolation"
            if name in CLIENT_SETTINGS:
                return Outcome("SHOW", [name], [PgType(TEXT)], [(self.settings[name],)])
        return None

    def send_rows(self, outcome: Outcome, formats: list[int], limit: int = 0) -> bool:
        """Send the outcome's rows not yet sent (at most ``limit``; 0: all); True when all
        are sent."""
        kinds = outcome.types
        coders = [t.binary if format_code(formats, i) else t.text for i, t in enumerate(kinds)]
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
            fmt = format_code(formats, i)
            fields.append(name.encode() + b"\0")
            fields.append(struct.pack("!ihihih", 0, 0, kind.oid, kind.width, -1, fmt))
        self.send(b"T", b"".join(fields))

    # --- the simple query protocol -------------------------------------------------
    def on_query(self, body: bytes) -> None:
        self.skipping = False
        text = cstring(body)[0]
        statements = split_statements(text)
        if not statements:
            self.send(b"I")
            self.ready()
            return
        assert self.session is not None and self.user is not None
        words = [first_words(s)[0] for s in statements]
        several = len(statements) > 1 and not self.session.in_transaction
        several = several and not any(w in TRANSACTION_TAGS for w in words)
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
                reason = cstring(body)[0]
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
        name, rest = cstring(body)
        text, rest = cstring(rest)
        count = short_at(rest, 0)
        types = [int_at(rest, 2 + 4 * i) & 0xFFFFFFFF for i in range(count)]
        if name and name in self.prepared:
            raise SQLStateError("42P05", f'prepared statement "{name}" already exists')
        self.prepared[name] = Prepared(text, types)
        self.send(b"1")

    def on_bind(self, body: bytes) -> None:
        portal, rest = cstring(body)
        name, rest = cstring(rest)
        prepared = self.prepared.get(name)
        if prepared is None:
            raise SQLStateError("26000", f'prepared statement "{name}" does not exist')
        at = 0
        nformats = short_at(rest, at)
        formats = [short_at(rest, at + 2 + 2 * i) for i in range(nformats)]
        at += 2 + 2 * nformats
        nparams = short_at(rest, at)
        at += 2
        if nformats not in (0, 1, nparams):
            raise ProtocolViolation(f"{nformats} parameter format codes for {nparams} parameters")
        params = []
        for i in range(nparams):
            size = int_at(rest, at)
            at += 4
            data = None
            if size >= 0:
                data = rest[at : at + size]
                if len(data) != size:
                    raise ProtocolViolation("a Bind message ends inside a parameter")
                at += size
            fmt = format_code(formats, i)
            oid = prepared.types[i] if i < len(prepared.types) else 0
            params.append(read_parameter(data, oid, fmt == 1, i + 1))
        nresults = short_at(rest, at)
        results = [short_at(rest, at + 2 + 2 * i) for i in range(nresults)]
        if any(f not in (0, 1) for f in formats + results):
            raise ProtocolViolation("a format code is 0 (text) or 1 (binary)")
        self.portals[portal] = Portal(prepared, params, results)
        self.send(b"2")

    def on_describe(self, body: bytes) -> None:
        what, name = body[:1], cstring(body[1:])[0]
        if what == b"S":
            prepared = self.prepared.get(name)
            if prepared is None:
                raise SQLStateError("26000", f'prepared statement "{name}" does not exist')
            count = max(parameter_count(prepared.text), len(prepared.types))
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
        word = first_words(prepared.text)[0]
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
        name, rest = cstring(body)
        limit = int_at(rest, 0)
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
        what, name = body[:1], cstring(body[1:])[0]
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


def _milliseconds(value: str) -> int:
    found = re.fullmatch(r"\s*(\d+)\s*(ms|s|min)?\s*", value.lower())
    if found is None:
        raise SQLStateError(
            "22023", f"statement_timeout is a number of milliseconds, not {value!r}"
        )
    scale = {"s": 1000, "min": 60_000}.get(found.group(2) or "ms", 1)
    return int(found.group(1)) * scale
