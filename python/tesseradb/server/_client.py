"""A served database from another process: ``tesseradb.connect("http://host:port", token=...)``.

:class:`RemoteDatabase` has the in-process database's ``sql()``, ``stream_sql()``,
``argo()``, ``explain()``, ``info()``, ``schema()`` and ``check()``, and remote
handles for arrays (``read``/``[...]``, images, cells, versions), streams
(``range``, ``ingest``) and collections (``insert``, ``load_jsonl``). Results come
as Arrow IPC and are the same :class:`~tesseradb.sql.result.Result`. An error
the server reports is raised as the TesseraError class it names (else
:class:`ServerError`); 401 and 403 are :class:`AccessDeniedError`.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import select
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tesseradb import errors
from tesseradb.errors import AccessDeniedError, InvalidArgumentError, ServerError, TesseraError
from tesseradb.kinds import ObjectInfo

if TYPE_CHECKING:
    import httpx
    import numpy as np
    import pyarrow as pa

    from tesseradb.progress import Cancel
    from tesseradb.sql.result import Result

__all__ = ["RemoteArray", "RemoteCollection", "RemoteDatabase", "RemoteStream"]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
SESSION_HEADER = "X-Tessera-Session"  # (as the server reads it)


def _raise_for(response: httpx.Response, where: str) -> None:
    """Raise the error a failed response carries, as the class the server named."""
    if response.status_code < 400:
        return
    _raise_status(response.status_code, response.read(), response.reason_phrase, where)


def _raise_status(status: int, content: bytes, reason: str, where: str) -> None:
    """Raise the error of a failed answer (its status and body)."""
    try:
        body = json.loads(content)
        message, kind = str(body["error"]), str(body.get("type", ""))
    except (ValueError, KeyError, TypeError):
        message, kind = content[:500].decode(errors="replace") or reason, ""
    text = f"{where}: {message}"
    if status in (401, 403):
        raise AccessDeniedError(text)
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, TesseraError):
        try:
            error = cls(text)
        except TypeError:  # a class that takes more than the message (UnknownTableError)
            error = cls.__new__(cls)
            Exception.__init__(error, text)
        raise error
    raise ServerError(f"{text} (HTTP {status})")


class _SQLConnections:
    """Keep-alive connections for ``POST /sql``, one per calling thread, on the standard
    library's ``http.client``.

    httpx (used for every other request) parses a streamed body in small pieces in pure
    Python: a large Arrow answer arrived at a third of the speed ``http.client`` reads it,
    whose chunked reader copies each of the server's large chunks straight from the socket
    into pyarrow's buffer, and a point query paid half a millisecond more.
    """

    # uvicorn closes a connection idle for 5 s: one idle this long is not reused (reusing
    # one the server is closing could lose a request that was sent)
    IDLE_SECONDS = 3.0

    def __init__(self, url: str, token: str, timeout: float) -> None:
        import urllib.parse

        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgumentError(f"connect({url!r}): not an http:// or https:// URL")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.timeout = timeout
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": ARROW_STREAM,
        }
        self._local = threading.local()
        self._lock = threading.Lock()
        # every open connection, by the thread that holds it (those of threads that ended
        # are closed when a new one is made)
        self._all: dict[http.client.HTTPConnection, threading.Thread] = {}

    def _fresh(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            import ssl

            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        with self._lock:
            for other, thread in list(self._all.items()):
                if not thread.is_alive():
                    other.close()
                    del self._all[other]
            self._all[connection] = threading.current_thread()
        return connection

    def take(self) -> http.client.HTTPConnection:
        """This thread's connection: its kept one when still good, else a new one."""
        kept = getattr(self._local, "connection", None)
        self._local.connection = None
        if kept is not None:
            sock = kept.sock
            idle = time.monotonic() - self._local.since
            # a readable idle socket is one the server closed (or that holds stray bytes)
            if sock is None or idle > self.IDLE_SECONDS or select.select([sock], [], [], 0)[0]:
                self.drop(kept)
                kept = None
        return kept if kept is not None else self._fresh()

    def give_back(self, connection: http.client.HTTPConnection) -> None:
        self._local.connection = connection
        self._local.since = time.monotonic()

    def drop(self, connection: http.client.HTTPConnection) -> None:
        connection.close()
        with self._lock:
            self._all.pop(connection, None)

    def close(self) -> None:
        with self._lock:
            connections, self._all = list(self._all), {}
        for connection in connections:
            connection.close()


def ipc_bytes(table: pa.Table) -> bytes:
    """A table as an Arrow IPC stream (the API's Arrow bodies and answers)."""
    import pyarrow as pa

    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _read_all(reader: pa.RecordBatchReader, where: str) -> pa.Table:
    """A whole Arrow answer (a damaged one is the server's error, said as such)."""
    import pyarrow as pa

    try:
        return reader.read_all()
    except pa.ArrowInvalid as err:
        raise ServerError(f"{where}: the answer is not whole Arrow ({err})") from None


def _arrow_table(content: bytes, where: str) -> pa.Table:
    import pyarrow as pa

    try:
        return _read_all(pa.ipc.open_stream(content), where)
    except pa.ArrowInvalid as err:
        raise ServerError(f"{where}: the answer is not Arrow ({err})") from None


def _ranges(bounds: dict[str, Any]) -> dict[str, str]:
    """``field=(lo, hi)`` bounds as the API's ``field=lo:hi`` parameters (None: open)."""
    return {
        name: f"{'' if lo is None else lo}:{'' if hi is None else hi}"
        for name, (lo, hi) in bounds.items()
    }


def _key_text(key: Any) -> str:
    """A numpy-style key (ints, slices) as the server's box text."""
    parts = key if isinstance(key, tuple) else (key,)
    out = []
    for part in parts:
        if isinstance(part, slice):
            if part.step not in (None, 1):
                raise InvalidArgumentError(f"a box has steps of 1, not {part.step}")
            lo = "" if part.start is None else str(int(part.start))
            hi = "" if part.stop is None else str(int(part.stop))
            out.append(f"{lo}:{hi}")
        elif part is Ellipsis or part is None:
            out.append(":")
        else:
            out.append(str(int(part)))
    return ",".join(out)


class RemoteDatabase:
    """A database served by ``tessera serve``, used through its HTTP API."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 300.0) -> None:
        import httpx

        if token is None:
            token = os.environ.get("TESSERA_TOKEN")
        if not token:
            raise InvalidArgumentError(
                f"connect({url!r}): a served database needs token= (or TESSERA_TOKEN)"
            )
        self.url = url.rstrip("/")
        # this client's SQL session on the server (settings, prepared statements,
        # temporary tables and transactions last between its statements)
        self.session_id = uuid.uuid4().hex
        self._http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}", SESSION_HEADER: self.session_id},
            timeout=httpx.Timeout(timeout, connect=10.0),
        )
        self._sql = _SQLConnections(self.url, token, timeout)
        self._sql.headers[SESSION_HEADER] = self.session_id
        self.user = self._get("/api/whoami")
        self.read_only = bool(self.user.get("read_only"))

    def __repr__(self) -> str:
        return f"RemoteDatabase({self.url!r}, user {self.user.get('name')!r})"

    # --- plumbing -------------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        import httpx

        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as err:
            raise ServerError(f"{self.url}{path}: {type(err).__name__}: {err}") from None
        _raise_for(response, f"{self.url}{path}")
        return response

    def _get(self, path: str, **params: Any) -> Any:
        return self._request("GET", path, params=params).json()

    def _post_json(self, path: str, body: Any) -> Any:
        return self._request("POST", path, json=body).json()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # (the server may be gone: it expires sessions)
            self._http.delete("/session")
        self._http.close()
        self._sql.close()

    def __enter__(self) -> RemoteDatabase:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()

    # --- SQL ------------------------------------------------------------------------
    def stream_sql(
        self,
        text: str,
        sink: Callable[[pa.RecordBatchReader], Any],
        params: Any = None,
        *,
        cancel: Cancel | None = None,
    ) -> None:
        """Run a statement; its rows reach ``sink`` as an Arrow reader while they arrive."""
        import pyarrow as pa

        if not isinstance(text, str):
            raise InvalidArgumentError(
                f"db.sql: the SQL text must be a str, not {type(text).__name__}"
            )
        query_id = uuid.uuid4().hex
        body = json.dumps({"sql": text, "params": params, "query_id": query_id}).encode()
        stop = threading.Event()
        if cancel is not None:
            threading.Thread(
                target=self._cancel_when, args=(cancel, query_id, stop), daemon=True
            ).start()
        where = f"{self.url}/sql"
        connection = self._sql.take()
        reusable = False
        try:
            connection.request("POST", "/sql", body=body, headers=self._sql.headers)
            response = connection.getresponse()
            if response.status >= 400:
                content = response.read()
                reusable = not response.will_close
                _raise_status(response.status, content, response.reason, where)
            try:
                reader = pa.ipc.open_stream(response)
            except pa.ArrowInvalid as err:
                raise ServerError(f"{where}: the answer is not Arrow ({err})") from None
            try:
                sink(reader)
            except pa.ArrowInvalid as err:  # the body ended before its end-of-stream marker
                raise ServerError(f"{where}: the answer was cut short ({err})") from None
            # what follows the end-of-stream marker (the body's last chunk) is read, so
            # that the connection can carry the next statement
            if response.read(1 << 16) == b"" and response.isclosed() and not response.will_close:
                reusable = True
        except TesseraError:  # (the server's own, some of which are OSErrors too)
            raise
        except (OSError, http.client.HTTPException) as err:  # the connection's
            raise ServerError(f"{where}: {type(err).__name__}: {err}") from None
        finally:
            stop.set()
            if reusable:
                self._sql.give_back(connection)
            else:
                self._sql.drop(connection)

    def _cancel_when(self, cancel: Cancel, query_id: str, stop: threading.Event) -> None:
        while not stop.wait(0.1):
            if cancel.cancelled:
                with contextlib.suppress(Exception):  # the statement may have ended meanwhile
                    self._http.post(f"/queries/{query_id}/cancel")
                return

    def sql(self, text: str, params: Any = None, *, cancel: Cancel | None = None) -> Result:
        """Run SQL on the server (DuckDB's dialect, as in-process); the rows as a Result."""
        from tesseradb.sql.result import Result
        from tesseradb.sql.values import conversion_of

        tables: list[pa.Table] = []
        self.stream_sql(
            text, lambda reader: tables.append(_read_all(reader, self.url)), params, cancel=cancel
        )
        table = tables[0]
        # (the server sends values losslessly, with how to read them as DuckDB gives them)
        return Result(table.replace_schema_metadata(None), conversion=conversion_of(table.schema))

    def explain(self, text: str, params: Any = None) -> str:
        return str(self._post_json("/explain", {"sql": text, "params": params})["plan"])

    def argo(self, text: str, params: Any = None) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._post_json(
            "/argo", {"statement": text, "params": params}
        )["rows"]
        return rows

    def queries(self) -> list[dict[str, Any]]:
        """The statements running on the server (yours; an admin sees all)."""
        found: list[dict[str, Any]] = self._get("/queries")["queries"]
        return found

    def cancel(self, query_id: str) -> None:
        self._request("POST", f"/queries/{query_id}/cancel")

    # --- the catalog ----------------------------------------------------------------
    def info(self) -> list[ObjectInfo]:
        """The objects you may read, with kinds and sizes."""
        return [ObjectInfo(**o) for o in self._get("/catalog")["objects"]]

    def describe(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self._get(f"/objects/{name}")
        return found

    def schema(self, name: str) -> pa.Schema:
        from tesseradb._sqltext import quote_identifier

        return self.sql(f"SELECT * FROM {quote_identifier(name)} LIMIT 0").arrow().schema

    def check(self) -> dict[str, Any]:
        found: dict[str, Any] = self._get("/check")
        return found

    # --- objects --------------------------------------------------------------------
    def array(self, name: str, version: str | None = None) -> RemoteArray:
        return RemoteArray(self, name, version)

    def stream(self, name: str) -> RemoteStream:
        return RemoteStream(self, name)

    def collection(self, name: str) -> RemoteCollection:
        return RemoteCollection(self, name)


class RemoteArray:
    """An array of a served database: boxes as numpy arrays or images, cells, versions."""

    def __init__(self, db: RemoteDatabase, name: str, version: str | None) -> None:
        self.db, self.name, self.version = db, name, version

    def _params(self, **extra: Any) -> dict[str, Any]:
        params = {k: v for k, v in extra.items() if v is not None}
        if self.version:
            params["version"] = self.version
        return params

    def read(
        self, box: Any = None, attrs: Sequence[str] | str | None = None
    ) -> dict[str, np.ndarray]:
        """The attributes over ``box`` (a numpy-style key in indexes), as numpy arrays."""

        wanted = [attrs] if isinstance(attrs, str) else list(attrs or [])
        params = self._params(
            box=_key_text(box) if box is not None else "",
            attrs=",".join(wanted) or None,
            format="arrow",
        )
        response = self.db._request("GET", f"/arrays/{self.name}/slab", params=params)
        table = _arrow_table(response.content, f"{self.db.url}/arrays/{self.name}/slab")
        shape = tuple(json.loads((table.schema.metadata or {})[b"shape"]))
        return {c: table.column(c).to_numpy().reshape(shape) for c in table.column_names}

    def __getitem__(self, key: Any) -> dict[str, np.ndarray]:
        return self.read(key)

    def image(
        self,
        box: Any,
        attr: str,
        cmap: str = "gray",
        vmin: float | None = None,
        vmax: float | None = None,
        max_side: int = 1024,
    ) -> bytes:
        """A 2-D slice rendered by the server as PNG bytes."""
        params = self._params(
            box=_key_text(box), attr=attr, format="png", cmap=cmap, vmin=vmin, vmax=vmax,
            max_side=max_side,
        )  # fmt: skip
        return self.db._request("GET", f"/arrays/{self.name}/slab", params=params).content

    def cell(self, *at: int) -> dict[str, Any]:
        params = self._params(at=",".join(str(int(i)) for i in at))
        found: dict[str, Any] = self.db._get(f"/arrays/{self.name}/cell", **params)["values"]
        return found

    def versions(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.db.describe(self.name)["versions"]
        return found

    def at(self, version: str) -> RemoteArray:
        return RemoteArray(self.db, self.name, version)


class RemoteStream:
    """A record stream of a served database: range queries and durable ingest."""

    def __init__(self, db: RemoteDatabase, name: str) -> None:
        self.db, self.name = db, name

    def range(self, columns: Sequence[str] | None = None, **bounds: Any) -> pa.Table:
        """Records with ``lo <= field <= hi`` for each ``field=(lo, hi)`` (None: open)."""

        params: dict[str, Any] = {"format": "arrow", **_ranges(bounds)}
        if columns:
            params["columns"] = ",".join(columns)
        response = self.db._request("GET", f"/streams/{self.name}/range", params=params)
        return _arrow_table(response.content, f"{self.db.url}/streams/{self.name}/range")

    def ingest(self, data: Any) -> int:
        """Send records (a pyarrow Table or RecordBatch); returns once they are durable."""
        import pyarrow as pa

        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise InvalidArgumentError(
                f"stream {self.name!r}: a remote ingest takes a pyarrow Table, not {type(data).__name__}"
            )
        response = self.db._request(
            "POST",
            f"/streams/{self.name}/ingest",
            content=ipc_bytes(data),
            headers={"Content-Type": ARROW_STREAM},
        )
        return int(response.json()["records"])

    def plot(self, x: str, y: str, **bounds: Any) -> bytes:
        params: dict[str, Any] = {"x": x, "y": y, **_ranges(bounds)}
        return self.db._request("GET", f"/streams/{self.name}/plot", params=params).content


class RemoteCollection:
    """A document collection of a served database."""

    def __init__(self, db: RemoteDatabase, name: str) -> None:
        self.db, self.name = db, name

    def insert(self, document: dict[str, Any]) -> int:
        return int(self.db._post_json(f"/collections/{self.name}/insert", document)["objids"][0])

    def insert_many(self, documents: Sequence[dict[str, Any]]) -> list[int]:
        ids: list[int] = self.db._post_json(f"/collections/{self.name}/insert", list(documents))[
            "objids"
        ]
        return ids

    def load_jsonl(self, source: str | os.PathLike[str] | Iterable[str]) -> int:
        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as handle:
                data = handle.read()
        else:
            data = "\n".join(line.rstrip("\n") for line in source).encode()
        response = self.db._request(
            "POST",
            f"/collections/{self.name}/load",
            content=data,
            headers={"Content-Type": "application/x-ndjson"},
        )
        return int(response.json()["loaded"])

    def documents(self, offset: int = 0, limit: int = 50) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.db._get(
            f"/collections/{self.name}/documents", offset=offset, limit=limit
        )["documents"]
        return found
