"""The crash matrix with the database's storage in a bucket: writers of every kind that
keeps its data there are killed with SIGKILL mid-call (mid-upload), and after each kill
every acknowledged durable call is present, none is served in part, and ``db.check()``
(which reads the objects in the bucket) finds nothing wrong."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import tesseradb
from tesseradb.storage import Location, resolve_credentials
from tesseradb.testing.crash import run_matrix
from tests.servers import S3Bucket

KILLS = 2


@pytest.mark.slow
@pytest.mark.parametrize("model", ["array", "stream", "assoc"])
def test_killed_writers_in_a_bucket_lose_nothing_acknowledged(
    model: str, tmp_path: Path, s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the writers (child processes) reach the bucket through the standard environment;
    # the database records only its storage URL
    for variable, value in s3_bucket.endpoint.environment().items():
        monkeypatch.setenv(variable, value)
    path = tmp_path / "db"
    prefix = f"{s3_bucket.url}/crash-{model}"
    with tesseradb.connect(path, storage=prefix):
        pass
    tally = run_matrix(model, path, KILLS, seed=random.randrange(1 << 30))
    assert tally.kills == KILLS
    assert tally.calls_acknowledged > 0, "the writers never got a call done: nothing was tested"
    assert (tally.durable_lost, tally.torn, tally.torn_reads, tally.check_findings) == (
        0,
        0,
        0,
        0,
    ), tally.problems
    stored = Location(prefix, resolve_credentials(s3_bucket.options, "t"))
    assert any(True for _ in stored.list()), "nothing went to the bucket: nothing was tested"
