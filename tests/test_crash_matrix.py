"""The crash matrix in short: a few SIGKILLed writers per data model (scripts/crash-matrix: 100).

After each kill the database is reopened: every acknowledged durable call
must be present, no call may be served in part, and ``db.check()`` must find
nothing wrong. The last test shows the verifier does see a torn call.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import tesseradb
from tesseradb.testing.crash import MODELS, Round, Tally, crash_model, run_matrix, verify

KILLS = 3


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_killed_writers_lose_no_acknowledged_write_and_tear_nothing(
    model: str, tmp_path: Path
) -> None:
    tally = run_matrix(model, tmp_path / "db", KILLS, seed=random.randrange(1 << 30))
    assert tally.kills == KILLS
    assert tally.calls_acknowledged > 0, "the writers never got a call done: nothing was tested"
    if crash_model(model).reads:  # a reader read while each writer wrote
        assert tally.live_reads >= KILLS, tally
    assert (tally.durable_lost, tally.torn, tally.torn_reads, tally.check_findings) == (
        0,
        0,
        0,
        0,
    ), tally.problems
    print(tally)


def test_the_verifier_sees_a_torn_call_and_a_lost_one(tmp_path: Path) -> None:
    path = tmp_path / "db"
    model = crash_model("table")
    seed = 7
    with tesseradb.connect(path) as db:
        model.create(db)
        n = model.batch_size(seed, 1)
        db.sql(f"INSERT INTO t SELECT 1, range FROM range({n - 1})")  # one row short
    tally = Tally("table")
    state = Round(1, started=[1, 2], acked=[1, 2], durable=[1, 2])  # 2 was never written
    verify("table", path, seed, [state], tally, model.initial_base())
    assert (tally.torn, tally.durable_lost) == (1, 1), tally.problems


def test_every_kind_that_writes_is_in_the_matrix() -> None:
    assert set(MODELS) == {"array", "stream", "collection", "assoc", "table"}
