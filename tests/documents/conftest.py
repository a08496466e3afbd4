"""One fixture parametrised over every backend and the mappings (the conformance matrix)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tesseradb
from tesseradb.documents import Collection

BACKENDS = ("sqlite", "duckdb", "postgresql", "mariadb")
MAPPINGS = ("argo1", "argo3", "hybrid")
_names = itertools.count()


def backend_url(request: pytest.FixtureRequest, backend: str) -> str:
    """The backend spec for ``create_collection``: the name, or the throwaway server's URL."""
    if backend in ("sqlite", "duckdb"):
        return backend
    fixture = "postgres_server" if backend == "postgresql" else "mariadb_server"
    return str(request.getfixturevalue(fixture).url)


def _marks(backend: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.server] if backend in ("postgresql", "mariadb") else []


# Every backend under the default mapping (hybrid) and argo3, whose shredded tables
# hybrid shares; argo1 on SQLite, and MariaDB (the slowest server) under the default
# only. The whole matrix of twelve took ~7 minutes of the suite's CPU time; `tessera
# bench nobench`'s smoke test still runs every configuration against the others.
MATRIX = {
    "sqlite": MAPPINGS,
    "duckdb": ("argo3", "hybrid"),
    "postgresql": ("argo3", "hybrid"),
    "mariadb": ("hybrid",),
}
CONFIGURATIONS = [
    pytest.param((b, m), id=f"{b}-{m}", marks=_marks(b)) for b in BACKENDS for m in MATRIX[b]
]


@pytest.fixture
def docdb(tmp_path: Path) -> Iterator[tesseradb.Database]:
    with tesseradb.connect(tmp_path / "docs.tdb") as database:
        yield database


@pytest.fixture(params=CONFIGURATIONS)
def make_collection(
    request: pytest.FixtureRequest, docdb: tesseradb.Database
) -> Iterator[Callable[..., Collection]]:
    """Creates collections on the parametrised backend and mapping; drops them afterwards."""
    backend, mapping = request.param
    url = backend_url(request, backend)
    made: list[str] = []

    def make(name: str | None = None) -> Collection:
        # server databases outlive a test: names are unique in the session
        name = name or f"c{next(_names)}"
        if url.startswith(("postgresql", "mysql")):
            name = f"{name}_{next(_names)}"
        made.append(name)
        return docdb.create_collection(name, backend=url, mapping=mapping)

    make.backend = backend  # type: ignore[attr-defined]
    make.mapping = mapping  # type: ignore[attr-defined]
    make.db = docdb  # type: ignore[attr-defined]
    yield make
    for name in made:
        if docdb.catalog.get(name) is not None:
            docdb.drop(name)
