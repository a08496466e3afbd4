"""Attached HDF5 files in a bucket against plain DuckDB over the same values, for random
files (chunked or not, compressed or not), random range filters and aggregates, with the
remote reading path both ways: a small file fetched whole, and a "large" one read a
block at a time with its headers fetched a level at a time."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import duckdb
import h5py
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.attached import _bytes
from tesseradb.storage import Location, resolve_credentials
from tests.servers import S3Bucket


@st.composite
def files(draw: st.DrawFn) -> dict[str, Any]:
    rows = draw(st.integers(1, 3000))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    return {
        "rows": rows,
        "k": rng.integers(-50, 50, rows).astype(np.int64),
        "x": rng.normal(0, 10, rows).astype(np.float32),
        "tag": np.array([b"a", b"bb", b"c", b""], dtype="S2")[rng.integers(0, 4, rows)],
        "chunks": draw(st.sampled_from([None, 64, 500])),
        "gzip": draw(st.booleans()),
        "large": draw(st.booleans()),
    }


bounds = st.tuples(st.integers(-60, 60), st.integers(-60, 60))

# the reader's own settings, and the ones that make every test file "large"
SMALL_FILE = {n: getattr(_bytes, n) for n in ("WHOLE", "PART", "BLOCK", "LARGE", "HEADER_REACH")}
REAL_GET = _bytes.RemoteBytes._get  # (each example counts the reads through it)
LARGE_FILE = {"WHOLE": 0, "PART": 4096, "BLOCK": 4096, "LARGE": 4 * 4096, "HEADER_REACH": 512}


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(made=files(), k_range=bounds, x_range=bounds, tag=st.sampled_from(["a", "bb", "c", ""]))
def test_answers_equal_plain_duckdb(
    tmp_path: Path,
    s3_bucket: S3Bucket,
    monkeypatch: pytest.MonkeyPatch,
    made: dict[str, Any],
    k_range: tuple[int, int],
    x_range: tuple[int, int],
    tag: str,
) -> None:
    # "large": nothing is fetched whole, the attach's GET keeps only the first 4 KiB block,
    # the rest is read block by block; otherwise the file comes whole with that one GET
    # (the same settings every example: monkeypatch undoes them only when the test ends)
    settings_now = LARGE_FILE if made["large"] else SMALL_FILE
    for setting, value in settings_now.items():
        monkeypatch.setattr(_bytes, setting, value)
    gets: list[tuple[int, int]] = []

    def counted(self: _bytes.RemoteBytes, start: int, end: int) -> bytes:
        gets.append((start, end))
        return REAL_GET(self, start, end)

    monkeypatch.setattr(_bytes.RemoteBytes, "_get", counted)
    name = uuid.uuid4().hex[:12]
    local = tmp_path / f"{name}.h5"
    options: dict[str, Any] = {}
    if made["chunks"]:
        options["chunks"] = (min(made["chunks"], made["rows"]),)
    if made["gzip"]:
        options.update(chunks=options.get("chunks", True), compression="gzip", shuffle=True)
    with h5py.File(local, "w") as f:
        g = f.create_group("obs")
        for column in ("k", "x", "tag"):
            g.create_dataset(column, data=made[column], **options)
    location = Location(f"{s3_bucket.url}/prop", resolve_credentials(s3_bucket.options, "t"))
    location.upload(local, local.name)
    _bytes.clear_remote_cache()

    plain = duckdb.connect()
    plain.register(
        "obs",
        pa.table(
            {
                "k": made["k"],
                "x": made["x"],
                "tag": pa.array([t.decode() for t in made["tag"]], pa.string()),
            }
        ),
    )
    klo, khi = sorted(k_range)
    xlo, xhi = sorted(x_range)
    queries = [
        f"SELECT count(*), sum(k), min(x), max(x) FROM {{t}} WHERE k BETWEEN {klo} AND {khi}",
        f"SELECT k, x, tag FROM {{t}} WHERE x > {xlo} AND x < {xhi} AND tag = '{tag}' "
        "ORDER BY k, x, tag",
        "SELECT tag, count(*), sum(k) FROM {t} GROUP BY tag ORDER BY tag",
    ]
    with tesseradb.connect(tmp_path / f"db-{name}", storage_options=s3_bucket.options) as db:
        db.attach(f"{location.url}/{local.name}", name="there")
        for query in queries:
            got = db.sql(query.format(t="there.obs")).fetchall()
            expected = plain.execute(query.format(t="obs")).fetchall()
            assert got == expected, query
    # the path asked for is the one that answered
    if made["large"]:
        assert gets, "the file was never read block by block"
    else:
        assert gets == [], "a small file was read again after the attach's one GET"
