"""Attached HDF5 scans, aggregates and index builds on a Dask cluster equal them in threads."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import tesseradb
from tests.scaleout.plain import plain_answer, same_rows

QUERIES = [
    "SELECT count(*), sum(code), avg(mag), min(mag), max(mag) FROM h.t",
    "SELECT count(*), sum(id), min(code) FROM h.t WHERE mag BETWEEN 14 AND 22.5 AND code <> 3",
    "SELECT count(*) FROM h.t WHERE code = 2 AND mag < 17.5",
    "SELECT code, count(*), avg(mag) FROM h.t GROUP BY code ORDER BY code",
    "SELECT * FROM h.t WHERE id % 997 = 0 ORDER BY id",
    "SELECT _file, count(*) FROM h.t GROUP BY _file ORDER BY _file",
]


def _files(folder: Path) -> str:
    rng = np.random.default_rng(5)
    for part in range(3):
        with h5py.File(folder / f"obs{part}.h5", "w") as f:
            n = 150_000 + part * 1000
            f.create_dataset(
                "t/id", data=np.arange(n, dtype=np.int64) + part * 10**6, chunks=(8192,)
            )
            f.create_dataset("t/code", data=rng.integers(0, 7, n).astype(np.int16), chunks=(8192,))
            f.create_dataset("t/mag", data=rng.uniform(10, 30, n), chunks=(8192,))
    return str(folder / "obs*.h5")


def _answers(db: tesseradb.Database) -> dict[str, Any]:
    out: dict[str, Any] = {q: db.sql(q).fetchall() for q in QUERIES}
    out["shortcut"] = db.sql(QUERIES[1]).shortcut
    # the partial aggregates (on the workers, when the database uses them) answer as
    # plain DuckDB does over the table's rows
    for q in QUERIES[:2]:
        assert same_rows(out[q], plain_answer(db, "h.t", q)), q
    return out


def test_scans_aggregates_and_index_builds_equal_threads(tmp_path: Path, client: Any) -> None:
    pattern = _files(tmp_path)
    results = []
    for cluster in (None, client):
        with tesseradb.connect(tmp_path / f"{cluster is None}.tdb", cluster=cluster) as db:
            db.attach(pattern, name="h")
            before = _answers(db)
            db.create_index("h.t", ["code", "mag"])
            indexed = _answers(db)
            indexes = sorted(p.name for p in (tmp_path / f"{cluster is None}.tdb").rglob("*.bmi"))
            results.append((before, indexed, len(indexes)))
    (local_before, local_indexed, local_count), (remote_before, remote_indexed, remote_count) = (
        results
    )
    # DuckDB's own parallel GROUP BY sums floats in no fixed order (whatever ran the
    # scan): that one query's averages are compared to 1e-12; every other answer exactly
    grouped = QUERIES[3]
    for ours, theirs in ((remote_before, local_before), (remote_indexed, local_indexed)):
        assert {k: v for k, v in ours.items() if k != grouped} == {
            k: v for k, v in theirs.items() if k != grouped
        }
        for a, b in zip(ours[grouped], theirs[grouped], strict=True):
            assert a[:2] == b[:2] and math.isclose(a[2], b[2], rel_tol=1e-12)
    assert local_before["shortcut"] == remote_before["shortcut"] == "aggregate"
    assert remote_count == local_count > 0
    # the indexes change the plan, never the answer
    assert {q: local_indexed[q] for q in QUERIES if q != grouped} == {
        q: local_before[q] for q in QUERIES if q != grouped
    }
    logged = [
        str(e[0])
        for w in client.run(lambda dask_worker: list(dask_worker.state.log)).values()
        for e in w
    ]
    assert any("_scan_on_worker" in k or "_fold_unit" in k for k in logged)
    assert any("_build_on_worker" in k for k in logged)
