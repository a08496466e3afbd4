"""Session fixtures with throwaway PostgreSQL and MariaDB servers (``tesseradb.bench.servers``).

Where a server cannot be had, its tests skip with the reason, unless
``TESSERA_REQUIRE_SERVERS=1`` (as in CI), where they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pytest

from tesseradb.bench import servers
from tesseradb.bench.servers import S3Endpoint, Server, ServerUnavailable

__all__ = ["S3Bucket", "Server", "mariadb_server", "postgres_server", "s3_bucket", "s3_server"]


def _serve(start: AbstractContextManager[Any]) -> Iterator[Any]:
    try:
        server = start.__enter__()
    except ServerUnavailable as err:
        if os.environ.get("TESSERA_REQUIRE_SERVERS") == "1":
            pytest.fail(f"TESSERA_REQUIRE_SERVERS=1 but {err}")
        pytest.skip(str(err))
    try:
        yield server
    finally:
        start.__exit__(None, None, None)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    yield from _serve(servers.postgres_server())


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[Server]:
    yield from _serve(servers.mariadb_server())


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Endpoint]:
    """A real S3 HTTP endpoint on loopback (moto's standalone server), one per test process."""
    yield from _serve(servers.s3_server())


@dataclass(frozen=True)
class S3Bucket:
    """A fresh bucket: its URL and what connect(storage_options=) needs to reach it."""

    url: str
    endpoint: S3Endpoint

    @property
    def options(self) -> dict[str, str]:
        return self.endpoint.storage_options()


@pytest.fixture
def s3_bucket(s3_server: S3Endpoint) -> S3Bucket:
    """A new, empty bucket on the loopback S3 server."""
    return S3Bucket(s3_server.create_bucket(f"tessera-{uuid.uuid4().hex[:16]}"), s3_server)
