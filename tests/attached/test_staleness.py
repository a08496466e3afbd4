"""An index whose file changed is rebuilt or bypassed, and never gives a wrong answer."""

from __future__ import annotations

import os
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import tesseradb

QUERY = "SELECT count(*), sum(id) FROM f.t WHERE v BETWEEN 10 AND 20"


def plain_answer(path: Path) -> tuple[int, int]:
    with h5py.File(path, "r") as f:
        v, ids = f["t/v"][:], f["t/id"][:]
    keep = (v >= 10) & (v <= 20)
    return int(keep.sum()), int(ids[keep].sum()) if keep.any() else None  # type: ignore[return-value]


def make(path: Path, n: int = 1000, compression: str | None = None) -> None:
    with h5py.File(path, "w") as f:
        g = f.create_group("t")
        g.create_dataset(
            "id", data=np.arange(n), maxshape=(None,), chunks=(128,), compression=compression
        )
        g.create_dataset(
            "v", data=np.arange(n) % 50, maxshape=(None,), chunks=(128,), compression=compression
        )


def touch_later(path: Path) -> None:
    time.sleep(0.01)  # make sure the change time moves even on coarse clocks
    os.utime(path)


@pytest.mark.parametrize("policy", ["rebuild", "bypass"])
def test_appends_rewrites_and_replacements(tmp_path: Path, policy: str) -> None:
    path = tmp_path / "data.h5"
    make(path)
    with tesseradb.connect(tmp_path / "db") as db:
        att = db.attach(path, name="f", stale_index=policy)
        db.create_index("f.t", ["v"], exact=True)
        assert tuple(db.sql(QUERY).fetchall()[0]) == plain_answer(path)
        built = att.index("t", "v", 0)
        assert built is not None

        # 1. rows appended
        with h5py.File(path, "a") as f:
            for name in ("id", "v"):
                f[f"t/{name}"].resize((1500,))
            f["t/id"][1000:] = np.arange(1000, 1500)
            f["t/v"][1000:] = 15
        assert tuple(db.sql(QUERY).fetchall()[0]) == plain_answer(path)

        # 2. values rewritten in place (same size, same layout)
        with h5py.File(path, "a") as f:
            f["t/v"][0:100] = 12
        touch_later(path)
        assert tuple(db.sql(QUERY).fetchall()[0]) == plain_answer(path)

        # 3. the file replaced by another one
        replacement = tmp_path / "other.h5"
        make(replacement, n=700, compression="gzip")
        os.replace(replacement, path)
        assert tuple(db.sql(QUERY).fetchall()[0]) == plain_answer(path)

        current = att.index("t", "v", 0)
        if policy == "rebuild":
            assert current is not None and current.rows == 700
        else:
            assert current is None  # bypassed: the scan reads the data


@pytest.mark.parametrize("damage", ["corrupt", "foreign", "missing", "truncated"])
def test_damaged_sidecars_are_rebuilt(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "data.h5"
    make(path)
    db_path = tmp_path / "db"
    with tesseradb.connect(db_path) as db:
        db.attach(path, name="f")
        db.create_index("f.t", ["v"])
    sidecar = db_path / "attached" / "f" / "t.v.0.bmi"
    data = sidecar.read_bytes()
    if damage == "corrupt":
        sidecar.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    elif damage == "foreign":
        sidecar.write_bytes(b"PK\x03\x04" + b"\x00" * 200)
    elif damage == "missing":
        sidecar.unlink()
    else:
        sidecar.write_bytes(data[: len(data) // 2])
    with tesseradb.connect(db_path) as db:
        assert tuple(db.sql(QUERY).fetchall()[0]) == plain_answer(path)
        assert db.attached("f").index("t", "v", 0) is not None
    assert sidecar.read_bytes()[:8] == b"TSDBBMI\x01"  # rewritten whole
