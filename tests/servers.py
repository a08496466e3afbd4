"""Session fixtures with throwaway PostgreSQL and MariaDB servers (``tesseradb.bench.servers``).

Where a server cannot be had, its tests skip with the reason, unless
``TESSERA_REQUIRE_SERVERS=1`` (as in CI), where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager

import pytest

from tesseradb.bench import servers
from tesseradb.bench.servers import Server, ServerUnavailable

__all__ = ["Server", "mariadb_server", "postgres_server"]


def _serve(start: AbstractContextManager[Server]) -> Iterator[Server]:
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
