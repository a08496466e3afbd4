"""An SS-DB cycle loaded and cooked on a Dask cluster equals the same cycle in threads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import tesseradb

TABLES = ("images", "members", "groups", "polygons", "obs0", "obs1")


def _load(path: Path, cluster: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    with tesseradb.connect(path, cluster=cluster) as db:
        run = db.ssdb("r", config="test")
        run.load()
        tables = {t: db.sql(f"SELECT * FROM r_{t} ORDER BY ALL").fetchall() for t in TABLES}
        raw = db.array("r_raw").read()
        slab = run.cook(5, box=(20, 230, 40, 300))  # Q2's cook of a slab, windows as tasks
        versions = len(db.array("r_raw").versions())
    return tables | {"versions": versions}, {"raw": raw, "slab": slab}


def test_load_and_cook_equal_threads(tmp_path: Path, client: Any) -> None:
    local_tables, local_arrays = _load(tmp_path / "local.tdb")
    remote_tables, remote_arrays = _load(tmp_path / "remote.tdb", client)
    assert remote_tables == local_tables
    assert local_tables["versions"] == 3  # created, then one merged version per cycle
    for name in local_arrays["raw"]:
        np.testing.assert_array_equal(remote_arrays["raw"][name], local_arrays["raw"][name])
    for name in local_arrays["slab"]:
        np.testing.assert_array_equal(remote_arrays["slab"][name], local_arrays["slab"][name])
    assert len(local_tables["obs1"]) > 0
