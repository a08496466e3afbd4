"""Object-store locations: one URL (``s3://bucket/prefix``) and the credentials to reach it.

Arrays hand a location to Icechunk's own S3 storage; everything else (listing, sizes,
deletes, ranged reads of files attached in place) goes through ``obstore``, the Python
face of the Rust ``object_store`` crate: concurrent requests off the GIL, retries with
backoff, and the same S3 signing and environment handling as Icechunk (both are built
on it). A library error leaves here as a :class:`StorageError` naming the URL and the
operation, with the credentials scrubbed out.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tesseradb.errors import (
    InvalidArgumentError,
    StorageError,
    StoredObjectMissingError,
    TesseraError,
)
from tesseradb.storage._credentials import Credentials

__all__ = [
    "SCHEMES",
    "Location",
    "StoredObject",
    "is_url",
    "parse_url",
    "storage_error",
    "transport_failure",
]

SCHEMES = ("s3",)  # what this build reaches; gs:// and az:// are refused by name
_OTHER_SCHEMES = ("gs", "gcs", "az", "abfs", "abfss", "azure", "http", "https", "file")

# Requests that fail for a passing reason (5xx, throttling, a reset connection) are tried
# again with backoff; past these limits the operation fails with a StorageError
RETRIES = 3
FIRST_BACKOFF = timedelta(milliseconds=100)
LAST_BACKOFF = timedelta(seconds=1)
RETRY_TIMEOUT = timedelta(seconds=30)
CONNECT_TIMEOUT = "5s"
REQUEST_TIMEOUT = "60s"
# a bucket name as S3 accepts it (3-63 lower-case letters, digits, dots and dashes)
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


def is_url(text: object) -> bool:
    """Whether ``text`` is an object-store URL (any ``scheme://``), not a local path."""
    return isinstance(text, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", text) is not None


def parse_url(url: str, where: str) -> tuple[str, str]:
    """The bucket and the prefix (no leading or trailing ``/``) of an ``s3://`` URL."""
    if not isinstance(url, str):
        raise InvalidArgumentError(
            f"{where}: a storage location must be a str, not {type(url).__name__}"
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        shown = f"{scheme}://" if scheme else repr(url.split("/", 1)[0])
        also = (
            " (Google Cloud and Azure storage are not supported yet)"
            if scheme in _OTHER_SCHEMES[:6]
            else ""
        )
        raise StorageError(
            f"{where}: unknown storage scheme {shown}{also}; a storage location is an "
            "s3://bucket/prefix URL (Amazon S3 or any S3-compatible endpoint)"
        )
    if "@" in parts.netloc or parts.query or parts.fragment:
        # (never echo it: the part before @ may be a key)
        raise InvalidArgumentError(
            f"{where}: a storage URL carries no credentials, query or fragment; give keys "
            "through storage_options= or the standard AWS environment"
        )
    bucket = parts.netloc
    if not _BUCKET.match(bucket):
        raise InvalidArgumentError(f"{where}: {bucket!r} in {url!r} is not a valid S3 bucket name")
    prefix = "/".join(p for p in parts.path.split("/") if p)
    if any(p in (".", "..") for p in prefix.split("/")):
        raise InvalidArgumentError(f"{where}: {url!r} has '.' or '..' in its path")
    return bucket, prefix


@dataclass(frozen=True)
class StoredObject:
    """One object under a location: its path below the location, size and entity tag."""

    path: str
    size: int
    etag: str | None


class Location:
    """A place in an object store: where one object's bulk data lives, or a file attached
    in place. Picklable (a Dask worker opens the store itself with the same credentials);
    its ``repr`` and ``str`` show the URL only."""

    def __init__(self, url: str, credentials: Credentials, where: str = "storage") -> None:
        self.bucket, self.prefix = parse_url(url, where)
        self.url = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        self.credentials = credentials
        self._store: Any = None
        self._store_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Location({self.url!r})"

    def __str__(self) -> str:
        return self.url

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and (self.url, self.credentials) == (
            other.url,
            other.credentials,
        )

    def __hash__(self) -> int:
        return hash(self.url)

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "credentials": self.credentials}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"], state["credentials"])  # type: ignore[misc]

    def join(self, *parts: str) -> Location:
        """The location ``parts`` below this one."""
        path = "/".join(p.strip("/") for p in (self.prefix, *parts) if p.strip("/"))
        return Location(f"s3://{self.bucket}/{path}", self.credentials)

    # --- the libraries' handles ----------------------------------------------------------
    def icechunk_storage(self) -> Any:
        """Icechunk's S3 storage for a repository at this location."""
        import icechunk

        c = self.credentials
        keys: dict[str, Any] = {}
        if c.anonymous:
            keys["anonymous"] = True
        elif c.has_keys:
            keys.update(
                access_key_id=c.access_key_id,
                secret_access_key=c.secret_access_key,
                session_token=c.session_token,
            )
        else:
            keys["from_env"] = True  # the library's own chain: instance roles, web identity
        return icechunk.s3_storage(
            bucket=self.bucket,
            prefix=self.prefix or None,
            region=c.region,
            endpoint_url=c.endpoint_url,
            allow_http=c.allow_http,
            force_path_style=c.force_path_style,
            **keys,
        )

    @staticmethod
    def icechunk_config() -> Any:
        """Icechunk repository settings: retries with backoff like every other request."""
        import icechunk

        retries = icechunk.StorageRetriesSettings(
            max_tries=RETRIES + 1,
            initial_backoff_ms=int(FIRST_BACKOFF.total_seconds() * 1000),
            max_backoff_ms=int(LAST_BACKOFF.total_seconds() * 1000),
        )
        return icechunk.RepositoryConfig(storage=icechunk.StorageSettings(retries=retries))

    def store(self) -> Any:
        """An ``obstore`` S3 store rooted at this location (made once, shared by threads)."""
        with self._store_lock:
            if self._store is None:
                from obstore.store import S3Store

                c = self.credentials
                config: dict[str, Any] = {"region": c.region}
                if c.endpoint_url:
                    config["endpoint"] = c.endpoint_url
                    config["virtual_hosted_style_request"] = not c.force_path_style
                if c.anonymous:
                    config["skip_signature"] = True
                elif c.has_keys:
                    config["access_key_id"] = c.access_key_id
                    config["secret_access_key"] = c.secret_access_key
                    if c.session_token:
                        config["session_token"] = c.session_token
                retry = {
                    "max_retries": RETRIES,
                    "backoff": {
                        "init_backoff": FIRST_BACKOFF,
                        "max_backoff": LAST_BACKOFF,
                        "base": 2,
                    },
                    "retry_timeout": RETRY_TIMEOUT,
                }
                client = {
                    "allow_http": c.allow_http,
                    "connect_timeout": CONNECT_TIMEOUT,
                    "timeout": REQUEST_TIMEOUT,
                }
                with self.failures("open the store"):
                    self._store = S3Store(
                        self.bucket,
                        prefix=self.prefix or None,
                        config=config,  # type: ignore[arg-type]
                        client_options=client,  # type: ignore[arg-type]
                        retry_config=retry,  # type: ignore[arg-type]
                    )
            return self._store

    # --- operations ---------------------------------------------------------------------
    def list(self, below: str = "") -> Iterator[StoredObject]:
        """Every object under this location (or under ``below`` inside it)."""
        import obstore

        with self.failures("list", below):
            for batch in obstore.list(self.store(), below or None, chunk_size=1000):
                for meta in batch:
                    yield StoredObject(str(meta["path"]), int(meta["size"]), meta.get("e_tag"))

    def total_size(self) -> int:
        return sum(o.size for o in self.list())

    def is_empty(self) -> bool:
        """Whether nothing is stored under this location (one small listing: the top
        level only, however much is below it; fails fast when the store is unreachable)."""
        import obstore

        with self.failures("list"):
            top = obstore.list_with_delimiter(self.store())
        return not top["objects"] and not top["common_prefixes"]

    def head(self, path: str) -> StoredObject:
        import obstore

        with self.failures("read the size of", path):
            meta = obstore.head(self.store(), path)
        return StoredObject(path, int(meta["size"]), meta.get("e_tag"))

    def read(self, path: str) -> bytes:
        import obstore

        with self.failures("read", path):
            return bytes(obstore.get(self.store(), path).bytes())

    def write(self, path: str, data: bytes) -> str | None:
        """Store ``data`` as object ``path`` (whole or not at all); its new entity tag."""
        import obstore

        with self.failures("write", path):
            done = obstore.put(self.store(), path, data)
        return done.get("e_tag")

    def download(self, key: str, target: Path, advance: Callable[[int], None]) -> None:
        """Stream object ``key`` into the local file ``target`` (``advance`` is told each
        piece's size, and may raise to stop: the partial file is then removed)."""
        import obstore

        try:
            with self.failures("read", key), open(target, "wb") as out:
                for piece in obstore.get(self.store(), key).stream(min_chunk_size=8 << 20):
                    out.write(piece)
                    advance(len(piece))
        except BaseException:
            target.unlink(missing_ok=True)
            raise

    def upload(self, source: Path, key: str) -> None:
        """Write the local file ``source`` as object ``key`` (in parts when it is large)."""
        import obstore

        with self.failures("write", key):
            obstore.put(self.store(), key, source)

    def delete(self, path: str) -> None:
        """Delete one object (an object already gone is no error: S3 answers 204)."""
        import obstore

        with self.failures("delete", path):
            obstore.delete(self.store(), path)

    def delete_all(self) -> int:
        """Delete every object under this location; how many there were."""
        import obstore

        paths = [o.path for o in self.list()]
        with self.failures("delete the objects under"):
            for i in range(0, len(paths), 1000):
                obstore.delete(self.store(), paths[i : i + 1000])
        return len(paths)

    def check_reachable(self) -> None:
        """Fail with a clear StorageError unless the bucket answers a listing."""
        self.is_empty()

    # --- errors -------------------------------------------------------------------------
    @contextlib.contextmanager
    def failures(self, operation: str, path: str = "") -> Iterator[None]:
        """Turn an object-store library's error inside the block into a StorageError."""
        try:
            yield
        except TesseraError:
            raise
        except Exception as err:  # (only the store's calls run in the block)
            raise storage_error(err, self, operation, path) from None


def storage_error(
    err: BaseException, location: Location, operation: str, path: str = ""
) -> StorageError:
    """A StorageError for ``err`` raised while doing ``operation`` on ``path`` at ``location``."""
    target = f"{location.url}/{path}" if path else location.url
    text = location.credentials.redact(f"{type(err).__name__}: {err}")
    if isinstance(err, FileNotFoundError) or type(err).__name__ == "NotFoundError":
        # (told by the error's type, its text may hold any digits; callers catch it as a
        # FileNotFoundError)
        return StoredObjectMissingError(
            f"cannot {operation} {target} ({location.credentials.describe()}): no such object"
        )
    if isinstance(err, PermissionError) or type(err).__name__ in (
        "PermissionDeniedError",
        "UnauthenticatedError",
    ):
        reason = explain(text) if _matches(text, _REFUSED) else "access denied"
    else:
        reason = explain(text)
    return StorageError(
        f"cannot {operation} {target} ({location.credentials.describe()}): {reason}"
    )


# What a library's error text says, as patterns: HTTP statuses only with their reason
# phrase (a bare "403" would match a port, a byte count or a request id)
_NO_BUCKET = (r"nosuchbucket", r"bucket does not exist")
_REFUSED = (
    r"invalidaccesskeyid",
    r"signaturedoesnotmatch",
    r"unauthenticated",
    r"invalidtoken",
    r"expiredtoken",
)
_DENIED = (r"accessdenied", r"permissiondenied", r"\b403 forbidden")
_MISSING = (r"nosuchkey", r"\b404 not found", r"\bnot found\b")
_CHANGED = (r"precondition", r"\b412 precondition")
_UNREACHABLE = (
    r"connection refused",
    r"connection reset",
    r"dns error",
    r"connect error",
    r"tcp connect",
    r"error sending request",
    r"dispatch failure",
)
_SLOW = (r"timed out", r"\btimeout\b")
_FAILING = (
    r"slowdown",
    r"slow down",
    r"\b50[0-4] [a-z]",
    r"service unavailable",
    r"internal ?error",
    r"response error",
    r"end of file before message length",
    r"retries exhausted",
    r"max retries",
)
# what says the store was not reached or refused, as opposed to stored bytes being bad
_TRANSPORT = (*_NO_BUCKET, *_REFUSED, *_DENIED, *_UNREACHABLE, *_SLOW, *_FAILING)


def _matches(text: str, patterns: tuple[str, ...]) -> bool:
    lowered = text.lower()
    return any(re.search(p, lowered) for p in patterns)


def transport_failure(text: str) -> bool:
    """Whether a library's error text says the store was not reached or refused."""
    return _matches(text, _TRANSPORT)


def explain(text: str) -> str:
    """The reason in a library's S3 error text, in a line."""
    for patterns, reason in (
        (_NO_BUCKET, "the bucket does not exist"),
        (_REFUSED, "the credentials were refused (check the access key, secret and token)"),
        (_DENIED, "access denied"),
        (_MISSING, "no such object"),
        (_CHANGED, "the object changed while it was being read"),
        (_UNREACHABLE, "the endpoint cannot be reached"),
        (_SLOW, "the endpoint did not answer in time"),
        (_FAILING, "the endpoint kept failing"),
    ):
        if _matches(text, patterns):
            status = re.search(r"\b([45]\d\d) [A-Z][A-Za-z ]+", text)
            retried = re.search(r"after (\d+) retries", text)
            detail = [status.group(0).strip()] if status else []
            detail += [f"after {retried.group(1)} retries"] if retried else []
            return f"{reason} ({', '.join(detail)})" if detail else reason
    return _first_line(text)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    short = " ".join(lines[:3])
    return short if len(short) <= 400 else short[:400] + "..."
