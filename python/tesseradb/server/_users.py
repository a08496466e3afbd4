"""The users of a served database: names, hashed tokens and rights, in ``server/users.json``.

A token is 32 random bytes (``tdb_`` and URL-safe base64), shown once when the
user is made; the file keeps only its SHA-256 (a token has the entropy of a
key, so a slow password hash would add nothing but latency to every request).
Rights are per object kind (``array``, ``stream``, ``collection``, ``table``,
``attached``, ``assoc``, ``sql``) with ``*`` for every kind not named; each is
``none``, ``read``, ``write`` or ``admin``, each level holding the ones below.
Admin alone may reach the file system, extensions and settings through SQL.

The file is written whole to a temporary name, fsynced and renamed, so a
crash leaves the old or the new list; a server reads it again when it changes,
so ``tessera user revoke`` takes effect at the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tesseradb._durable import fsync_path
from tesseradb.errors import InvalidArgumentError, TesseraError

__all__ = ["LEVELS", "User", "UserError", "Users"]

LEVELS = ("none", "read", "write", "admin")


def rights_kinds() -> tuple[str, ...]:
    """What a right may name: every kind (``*``), each registered data model, plain tables
    and ``sql`` (statements that reach no object)."""
    from tesseradb.kinds import registered_kinds

    return ("*", *registered_kinds(), "table", "sql")


USERS_FILE = "users.json"
TOKEN_PREFIX = "tdb_"


class UserError(TesseraError):
    """A user cannot be made, found or revoked as asked."""


@dataclass(frozen=True)
class User:
    name: str
    token_sha256: str
    rights: dict[str, str] = field(default_factory=dict)
    created: str = ""

    def level(self, kind: str) -> str:
        """This user's right on objects of ``kind``."""
        return self.rights.get(kind, self.rights.get("*", "none"))

    def may(self, kind: str, needed: str) -> bool:
        return LEVELS.index(self.level(kind)) >= LEVELS.index(needed)

    @property
    def is_admin(self) -> bool:
        return self.level("*") == "admin"

    def public(self) -> dict[str, Any]:
        """What may be shown of the user (never the token's hash)."""
        return {"name": self.name, "rights": dict(self.rights), "created": self.created}


def parse_rights(texts: list[str]) -> dict[str, str]:
    """``["read"]`` or ``["*=read", "array=write"]`` as a rights mapping, checked."""
    rights: dict[str, str] = {}
    for text in texts or ["read"]:
        kind, _, level = text.rpartition("=")
        kind = kind or "*"
        if kind not in rights_kinds():
            raise InvalidArgumentError(
                f"rights {text!r}: the kind is one of {', '.join(rights_kinds())}, not {kind!r}"
            )
        if level not in LEVELS:
            raise InvalidArgumentError(
                f"rights {text!r}: the level is one of {', '.join(LEVELS)}, not {level!r}"
            )
        rights[kind] = level
    rights.setdefault("*", "none")
    return rights


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Users:
    """The users file of the database at ``path`` (made on the first ``add``)."""

    def __init__(self, database: Path) -> None:
        self.path = Path(database) / "server" / USERS_FILE
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None  # (mtime_ns, size) of the file last read
        self._users: dict[str, User] = {}

    def _read(self) -> dict[str, User]:
        """The users now (the file is read again only when it changed)."""
        with self._lock:
            try:
                stat = self.path.stat()
            except FileNotFoundError:
                self._seen, self._users = None, {}
                return self._users
            key = (stat.st_mtime_ns, stat.st_size)
            if key != self._seen:
                try:
                    data = json.loads(self.path.read_text())
                    users = {u["name"]: User(**u) for u in data["users"]}
                except (OSError, ValueError, KeyError, TypeError) as err:
                    raise UserError(f"{self.path}: not a readable users file ({err})") from None
                self._users, self._seen = users, key
            return self._users

    def _write(self, users: dict[str, User]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"users": [asdict(u) for u in users.values()]}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)
        fsync_path(self.path.parent)

    def list(self) -> list[User]:
        return sorted(self._read().values(), key=lambda u: u.name)

    def add(self, name: str, rights: dict[str, str]) -> str:
        """Make user ``name`` with ``rights``; returns the token (the only time it is shown)."""
        if not name or not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            raise InvalidArgumentError(
                f"user name {name!r}: letters, digits, '_', '-' and '.' only"
            )
        users = dict(self._read())
        if name in users:
            raise UserError(f"user {name!r} exists; revoke it first to give a new token")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        users[name] = User(name, _digest(token), rights, created)
        self._write(users)
        return token

    def revoke(self, name: str) -> None:
        users = dict(self._read())
        if name not in users:
            raise UserError(f"no user {name!r} (users: {', '.join(sorted(users)) or 'none'})")
        del users[name]
        self._write(users)

    def authenticate(self, token: str | None) -> User | None:
        """The user holding ``token``, or None (compared in constant time)."""
        if not token:
            return None
        digest = _digest(token)
        found = None
        for user in self._read().values():
            if hmac.compare_digest(user.token_sha256, digest):
                found = user
        return found
