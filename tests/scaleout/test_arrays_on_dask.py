"""Array work fanned out over a Dask cluster equals the same work in threads, exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.executor import DaskExecutor, Threads
from tests.scaleout.plain import plain_answer, same_rows


def _chunk_sum(view: Any) -> tuple[Any, float, int]:
    core = view.core_data()
    return view.coords, float(core["v"].sum()), int(core["i"].sum())


def _make(db: tesseradb.Database, seed: int = 1) -> Any:
    arr = db.create_array(
        "grid",
        dims=[
            {"name": "x", "start": -20, "end": 380, "chunk": 50, "overlap": 2},
            {"name": "y", "start": 0, "end": 300, "chunk": 64},
        ],
        attrs=[
            {"name": "v", "dtype": "float64"},
            {"name": "i", "dtype": "int32"},
            {"name": "n", "dtype": "float32", "nullable": True},
        ],
    )
    rng = np.random.default_rng(seed)
    n = rng.normal(size=(400, 300)).astype(np.float32)
    n[rng.random((400, 300)) < 0.1] = np.nan
    arr[-20:380, 0:300] = {
        "v": rng.normal(size=(400, 300)),
        "i": rng.integers(-(2**31), 2**31 - 1, (400, 300), dtype=np.int64).astype(np.int32),
        "n": n,
    }
    arr[-20:30, 0:64] = {"v": np.zeros((50, 64))}  # a second version
    return arr


FOLD = "SELECT sum(i), avg(v), min(n), max(n), count(*) FROM grid"


def _answers(db: tesseradb.Database, arr: Any) -> dict[str, Any]:
    return {
        "map_chunks": arr.map_chunks(_chunk_sum, overlap=3),
        "apply": arr.apply("v * 2 + i - x").value.values,
        "apply_fn": arr.apply(
            lambda env: np.hypot(env["v"], env["n"]), box=(slice(0, 200),)
        ).value.values,
        "regrid": arr.regrid([3, "10:3"]).to_array().values,
        "regrid_nullable": arr.regrid(["7:2", 5], attrs="n").n.values,
        "aggregate_by": arr.aggregate("sum", attrs="i", by="x").i.values,
        "aggregate_std": arr.aggregate("stddev", attrs=["v", "n"], by="y").to_array().values,
        "sql_fold": db.sql(FOLD).fetchall(),
        "sql_fold_shortcut": db.sql(FOLD).shortcut,
        "sql_filter": db.sql(
            "SELECT x, count(*), sum(i) FROM grid WHERE v > 0.5 AND y < 100 GROUP BY x ORDER BY x"
        ).fetchall(),
    }


def test_every_array_operation_equals_threads(tmp_path: Path, client: Any) -> None:
    with tesseradb.connect(tmp_path / "t.tdb") as db:
        arr = _make(db)
        assert isinstance(db.executor, Threads)
        local = _answers(db, arr)
        used = db.use(client)
        assert isinstance(used, DaskExecutor) and db.executor is used
        remote = _answers(db, arr)
        # the fold on the workers is the shortcut, and answers as plain DuckDB does
        assert remote["sql_fold_shortcut"] == "aggregate"
        assert same_rows(remote["sql_fold"], plain_answer(db, "grid", FOLD))
        # the work ran on the workers: their task log names the array's tasks
        ran = [t for w in client.run(_tasks_seen).values() for t in w]
        assert any(t.startswith("_each") for t in ran)  # the executor's batches of tasks
        db.use(None)
        assert isinstance(db.executor, Threads)
    for key, value in local.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(remote[key], value, err_msg=key)
        else:
            assert remote[key] == value, key


def _tasks_seen(dask_worker: Any) -> list[str]:
    return [str(event[0]) for event in dask_worker.state.log]


def test_connect_takes_the_cluster(tmp_path: Path, client: Any) -> None:
    with tesseradb.connect(tmp_path / "c.tdb", cluster=client) as db:
        assert isinstance(db.executor, DaskExecutor)
        arr = _make(db)
        assert arr.aggregate("count").v.item() == 400 * 300
    with pytest.raises(tesseradb.errors.InvalidArgumentError, match=r"dask\.distributed\.Client"):
        tesseradb.connect(tmp_path / "d.tdb", cluster="tcp://127.0.0.1:1")
    assert not (tmp_path / "d.tdb").exists()  # refused before anything was made


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    lo=st.tuples(st.integers(-20, 379), st.integers(0, 299)),
    size=st.tuples(st.integers(1, 200), st.integers(1, 300)),
    factor=st.sampled_from([2, 3, "10:3", "5:2"]),
    fn=st.sampled_from(["count", "sum", "avg", "min", "max"]),
)
def test_boxes_equal_threads(
    tmp_path_factory: Any, client: Any, lo: Any, size: Any, factor: Any, fn: str
) -> None:
    path = tmp_path_factory.mktemp("prop") / "p.tdb"
    with tesseradb.connect(path) as db:
        arr = _make(db, seed=lo[0] + 1000)
        hi = [min(a + n, e) for a, n, e in zip(lo, size, (380, 300), strict=True)]
        box = tuple(slice(a, h) for a, h in zip(lo, hi, strict=True))
        where = f"x >= {lo[0]} AND x < {hi[0]} AND y >= {lo[1]} AND y < {hi[1]}"
        sql = f"SELECT {fn}(i), {fn}(v), count(*) FROM grid WHERE {where}"

        def run() -> tuple[Any, ...]:
            return (
                arr.regrid([factor, factor], box=box).to_array().values,
                arr.aggregate(fn, attrs=["i", "n"], box=box).to_array().values,
                db.sql(sql).fetchall(),
            )

        local = run()
        db.use(client)
        remote = run()
        # the fold on the workers is the shortcut, and answers as plain DuckDB does
        assert db.sql(sql).shortcut == "aggregate"
        assert same_rows(remote[2], plain_answer(db, "grid", sql))
    np.testing.assert_array_equal(remote[0], local[0])
    np.testing.assert_array_equal(remote[1], local[1])
    assert remote[2] == local[2]


def test_a_transaction_reads_its_own_writes_on_a_cluster(tmp_path: Path, client: Any) -> None:
    """Its uncommitted writes exist only in this process: its reads run here, not on workers."""
    with tesseradb.connect(tmp_path / "t.tdb", cluster=client) as db:
        arr = _make(db)
        before = arr.aggregate("sum", attrs="v").v.item()
        with arr.transaction("zeroes"):
            arr[-20:380, 0:300] = {"v": np.zeros((400, 300))}
            assert arr.aggregate("sum", attrs="v").v.item() == 0.0
            assert arr.map_chunks(_chunk_sum)[0][1] == 0.0
        assert before != 0.0 and arr.aggregate("sum", attrs="v").v.item() == 0.0
