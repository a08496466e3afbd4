"""Shared fixtures: a fresh database per test, and throwaway database servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import tesseradb
from tests.servers import (  # noqa: F401  (fixtures)
    mariadb_server,
    postgres_server,
    s3_bucket,
    s3_server,
)

# Property tests check answers, not speed: on this shared two-core machine a case can take
# longer than hypothesis's default deadline of 200 ms, which failed them by chance
# (DeadlineExceeded, then FlakyFailure, with the CI run's other workers busy).
settings.register_profile("tessera", deadline=None)
settings.load_profile("tessera")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tesseradb.Database]:
    """A new, empty database in a temporary directory."""
    with tesseradb.connect(tmp_path / "test.tdb") as database:
        yield database


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The project's sample data folder, ../shared/data (skips where it is absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"sample data folder {SHARED_DATA} is absent (a fresh clone has no shared/)")
    return SHARED_DATA


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker of pytest -n hands its counts to the controller (pytest_testnodedown)."""
    from tests.tallies import TALLIES

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["tallies"] = {label: dict(counts) for label, counts in TALLIES.items()}


def pytest_testnodedown(node: Any, error: Any) -> None:
    """(the controller of pytest -n) Add a finished worker's counts to this process's."""
    from tests.tallies import tally

    for label, counts in getattr(node, "workeroutput", {}).get("tallies", {}).items():
        tally(label).update(counts)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print what the counting modules tried (tests/tallies.py)."""
    from tests.tallies import TALLIES

    for label, counts in sorted(TALLIES.items()):
        if counts:
            terminalreporter.section(label)
            for key, count in sorted(counts.items()):
                terminalreporter.write_line(f"{key}: {count}")
