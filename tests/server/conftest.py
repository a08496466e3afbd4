"""A served database with one object of each kind and users of each right."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import tesseradb
from tesseradb.server import ServerThread, Users, parse_rights

DESCRIPTOR = {
    "fields": [
        {"name": "t", "type": "double"},
        {"name": "sensor", "type": "int32"},
        {"name": "value", "type": "double"},
    ],
    "index": ["t", "sensor"],
}


def fill(db: tesseradb.Database) -> None:
    img = db.create_array(
        "img",
        [{"name": "y", "end": 64, "chunk": 32}, {"name": "x", "end": 48, "chunk": 16}],
        {"v": "float32", "w": "int16"},
    )
    y, x = np.mgrid[0:64, 0:48]
    img[0:64, 0:48] = {"v": (y * 48 + x).astype("f4"), "w": (x % 7).astype("i2")}
    stream = db.create_stream("readings", DESCRIPTOR)
    t = np.arange(5000, dtype="f8")
    stream.ingest(
        pa.table({"t": t, "sensor": (t % 10).astype("i4"), "value": np.sin(t / 100)}),
        durable=True,
    )
    docs = db.create_collection("docs")
    docs.insert_many([{"k": i, "name": f"doc {i}", "tags": ["a", "b"][: i % 3]} for i in range(30)])
    db.sql("CREATE TABLE plain AS SELECT range AS i, range * 0.5 AS f FROM range(1000)")


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tesseradb.Database]:
    db = tesseradb.connect(tmp_path / "db")
    fill(db)
    yield db
    db.close()


@pytest.fixture
def tokens(database: tesseradb.Database) -> dict[str, str]:
    users = Users(database.path)
    return {
        "admin": users.add("admin", parse_rights(["admin"])),
        "reader": users.add("reader", parse_rights(["read"])),
        "writer": users.add("writer", parse_rights(["write"])),
        "arrays": users.add("arrays", parse_rights(["none", "array=read"])),
    }


class Served(ServerThread):
    """A database served on a loopback port from a thread of this process."""

    def client(self, token: str | None = None) -> Any:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


@pytest.fixture
def served(database: tesseradb.Database, tokens: dict[str, str]) -> Iterator[Served]:
    server = Served(database, statement_seconds=5.0)
    yield server
    server.stop()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by openssl (the TLS tests skip
    without it)."""
    import subprocess

    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
