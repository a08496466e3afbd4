"""Lazy, Dask-backed reads of arrays, and direct xarray opens of the stored repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import icechunk
import numpy as np
import pytest
import xarray as xr

import tesseradb


def _sky(db: tesseradb.Database) -> Any:
    arr = db.create_array(
        "sky",
        dims=[
            {"name": "t", "start": 10, "end": None, "chunk": 3},
            {"name": "dec", "start": -50, "end": 30, "chunk": 16},
            {"name": "ra", "start": 100, "end": 140, "chunk": 16},
        ],
        attrs=[{"name": "flux", "dtype": "float32"}, {"name": "flag", "dtype": "uint8"}],
        origin=[0, 7, -3],
    )
    rng = np.random.default_rng(3)
    arr[10:17] = {
        "flux": rng.normal(size=(7, 80, 40)).astype(np.float32),
        "flag": rng.integers(0, 9, (7, 80, 40)).astype(np.uint8),
    }
    return arr


def test_lazy_xarray_equals_eager_and_reads_nothing_until_computed(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "l.tdb") as db:
        arr = _sky(db)
        box = (slice(11, 16), slice(-45, 20), slice(101, 139))
        eager = arr.to_xarray(box)
        lazy = arr.to_xarray(box, lazy=True)
        assert all(hasattr(v.data, "dask") for v in lazy.data_vars.values())
        # blocks follow the stored chunks, cut at the box's edges
        assert lazy.flux.data.chunks[0] == (2, 3)
        arr[10:17] = {
            "flux": np.zeros((7, 80, 40), np.float32),
            "flag": np.zeros((7, 80, 40), np.uint8),
        }
        # the lazy array reads the version of when it was made, not the later write
        xr.testing.assert_identical(lazy.compute(), eager)
        assert list(lazy.coords) == ["t", "dec", "ra"]
        assert int(lazy.dec[0]) == -45 + 7
        with pytest.raises(tesseradb.errors.InvalidArgumentError, match="lazy"):
            arr.to_xarray(lazy="yes")


def test_to_dask_one_attribute_and_integer_keys(tmp_path: Path, client: Any) -> None:
    with tesseradb.connect(tmp_path / "d.tdb") as db:
        arr = _sky(db)
        whole = arr.read()["flag"]
        lazy = arr.to_dask("flag", box=(12, slice(None), slice(105, 133)))
        assert lazy.shape == (80, 28)
        # computed on the user's cluster (the client is the default scheduler)
        np.testing.assert_array_equal(client.compute(lazy).result(), whole[2, :, 5:33])
        assert float(arr.to_dask("flux").sum().compute()) == pytest.approx(
            float(arr.read()["flux"].astype(np.float64).sum()), rel=1e-5
        )
        with pytest.raises(tesseradb.errors.InvalidArgumentError, match="attr="):
            arr.to_dask()


def test_a_lazy_read_inside_a_transaction_computes_here_and_says_why_not_on_the_cluster(
    tmp_path: Path, client: Any
) -> None:
    with tesseradb.connect(tmp_path / "t.tdb") as db:
        arr = _sky(db)
        before = arr.read()["flag"]
        with arr.transaction() as tx:
            tx[10:12] = {"flag": np.full((2, 80, 40), 200, np.uint8)}
            lazy = tx.to_dask("flag")
            # computed here, it sees the transaction's own writes
            seen = lazy.compute(scheduler="threads")
            assert (seen[0:2] == 200).all()
            np.testing.assert_array_equal(seen[2:], before[2:])
            # the workers cannot: the writes are in this process only, and the error says so
            with pytest.raises(Exception) as raised:
                client.compute(lazy).result()
            chain, err = [], raised.value
            while err is not None:
                chain.append(str(err))
                err = err.__cause__ or err.__context__
            assert any("inside a transaction" in text for text in chain), chain
        np.testing.assert_array_equal(arr.read()["flag"][0:2], 200)  # it committed


def test_xr_open_zarr_directly_has_world_coordinates(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "z.tdb") as db:
        arr = _sky(db)
        arr[17:20] = {
            "flux": np.ones((3, 80, 40), np.float32),
            "flag": np.ones((3, 80, 40), np.uint8),
        }
        eager = arr.to_xarray()
    storage = icechunk.local_filesystem_storage(str(tmp_path / "z.tdb" / "arrays" / "sky" / "repo"))
    session = icechunk.Repository.open(storage).readonly_session("main")
    direct = xr.open_zarr(session.store, consolidated=False)
    # the unbounded dimension's coordinates grew with its writes
    np.testing.assert_array_equal(direct.t.values, np.arange(10, 20))
    np.testing.assert_array_equal(direct.dec.values, eager.dec.values)
    np.testing.assert_array_equal(direct.ra.values, np.arange(97, 137))
    np.testing.assert_array_equal(direct.flux.values, eager.flux.values)
