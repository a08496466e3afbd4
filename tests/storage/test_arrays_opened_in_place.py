"""Icechunk repositories in a bucket opened in place (db.open_array): read, never written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tesseradb
from tesseradb.errors import ArrayCorruptError, InvalidArgumentError, ReadOnlyError
from tesseradb.storage import Location, resolve_credentials
from tests.servers import S3Bucket


def _foreign_repository(bucket: S3Bucket, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """A repository written by plain zarr-python and Icechunk, as another group would."""
    import icechunk
    import zarr

    location = Location(f"{bucket.url}/{prefix}", resolve_credentials(bucket.options, "test"))
    repo = icechunk.Repository.create(location.icechunk_storage())
    session = repo.writable_session("main")
    group = zarr.group(store=session.store, zarr_format=3)
    rng = np.random.default_rng(4)
    temp = rng.normal(280, 5, (6, 40, 50)).astype("float32")
    salt = rng.integers(0, 40, (6, 40, 50)).astype("int16")
    for name, values in (("temp", temp), ("salt", salt)):
        made = group.create_array(
            name,
            shape=values.shape,
            chunks=(1, 20, 25),
            dtype=values.dtype,
            dimension_names=["time", "lat", "lon"],
        )
        made[:] = values
    group.create_array("lat", shape=(40,), chunks=(40,), dtype="float64", dimension_names=["lat"])
    session.commit("an ocean model's output")
    return temp, salt


def test_a_foreign_repository_is_read_in_place(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    temp, salt = _foreign_repository(s3_bucket, "ocean/run1.icechunk")
    source = f"{s3_bucket.url}/ocean/run1.icechunk"
    before = sorted(
        o.path for o in Location(source, resolve_credentials(s3_bucket.options, "t")).list()
    )
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        ocean = db.open_array(source, name="ocean")
        assert [d.name for d in ocean.schema.dims] == ["time", "lat", "lon"]
        assert [a.name for a in ocean.schema.attrs] == ["salt", "temp"]  # (lat: a coordinate)
        np.testing.assert_array_equal(ocean[2, 0:40, 0:50]["temp"], temp[2])
        (total, hottest) = db.sql("SELECT sum(salt), max(temp) FROM ocean").fetchone()
        assert total == int(salt.astype(np.int64).sum())
        assert hottest == pytest.approx(float(temp.max()))
        assert db.describe("ocean")["in_place"] is True
        dataset = ocean.to_xarray()
        np.testing.assert_array_equal(dataset["salt"].values, salt)
        with pytest.raises(ReadOnlyError, match="opened in place"):
            ocean[0, 0:2, 0:2] = {
                "temp": np.zeros((2, 2), "float32"),
                "salt": np.zeros((2, 2), "int16"),
            }
        assert db.check().ok
        db.drop("ocean")
    after = sorted(
        o.path for o in Location(source, resolve_credentials(s3_bucket.options, "t")).list()
    )
    assert after == before  # never written, never deleted


def test_a_tessera_array_in_a_bucket_opens_in_another_database(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    dims = [
        {"name": "y", "start": 100, "end": 140, "chunk": 16},
        {"name": "x", "end": 30, "chunk": 16},
    ]
    with tesseradb.connect(
        tmp_path / "a", storage=s3_bucket.url, storage_options=s3_bucket.options
    ) as db:
        img = db.create_array("img", dims, {"v": "float64", "n": "int32"})
        img[100:140, 0:30] = {
            "v": np.arange(1200.0).reshape(40, 30),
            "n": np.ones((40, 30), "int32"),
        }
        location = db.describe("img")["location"]
        expected = db.sql("SELECT y, x, v, n FROM img ORDER BY y, x").fetchall()
    with tesseradb.connect(tmp_path / "b", storage_options=s3_bucket.options) as other:
        shared = other.open_array(location, name="shared")
        assert shared.schema.dims[0].start == 100  # its own schema, world coordinates and all
        assert other.sql("SELECT y, x, v, n FROM shared ORDER BY y, x").fetchall() == expected


def test_what_cannot_be_opened_in_place_is_refused(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        with pytest.raises(InvalidArgumentError, match="s3:// URL of an Icechunk repository"):
            db.open_array(str(tmp_path), name="local")
        with pytest.raises(ArrayCorruptError, match="is missing"):
            db.open_array(f"{s3_bucket.url}/nothing/here", name="empty")
        assert db.arrays() == []


def _zarr_store(bucket: S3Bucket, prefix: str) -> tuple[Location, dict[str, np.ndarray]]:
    """A plain Zarr v3 store (no Icechunk) written by zarr-python straight into the bucket:
    one zstd array, one blosc-compressed, one sharded, and a coordinate."""
    import zarr
    from zarr.codecs import BloscCodec
    from zarr.storage import ObjectStore

    location = Location(f"{bucket.url}/{prefix}", resolve_credentials(bucket.options, "test"))
    group = zarr.group(store=ObjectStore(location.store()), zarr_format=3)
    rng = np.random.default_rng(9)
    values = {
        "rain": rng.gamma(2.0, 3.0, (4, 30, 36)).astype("float32"),
        "cloud": rng.integers(0, 100, (4, 30, 36)).astype("uint8"),
        "wind": rng.normal(0, 4, (4, 30, 36)).astype("float64"),
    }
    dims = ["time", "lat", "lon"]
    group.create_array(
        "rain", shape=(4, 30, 36), chunks=(1, 15, 12), dtype="float32", dimension_names=dims
    )[:] = values["rain"]
    group.create_array(
        "cloud",
        shape=(4, 30, 36),
        chunks=(1, 15, 12),
        dtype="uint8",
        compressors=[BloscCodec()],
        dimension_names=dims,
    )[:] = values["cloud"]
    group.create_array(
        "wind",
        shape=(4, 30, 36),
        chunks=(1, 5, 6),
        shards=(1, 15, 12),
        dtype="float64",
        dimension_names=dims,
    )[:] = values["wind"]
    group.create_array("lat", shape=(30,), chunks=(30,), dtype="float64", dimension_names=["lat"])[
        :
    ] = np.linspace(-30, 30, 30)
    return location, values


def test_a_plain_zarr_store_is_read_in_place(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    import pickle

    location, values = _zarr_store(s3_bucket, "climate/run.zarr")
    before = sorted((o.path, o.etag) for o in location.list())
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        climate = db.open_array(location.url, name="climate")
        assert [d.name for d in climate.schema.dims] == ["time", "lat", "lon"]
        assert [a.name for a in climate.schema.attrs] == ["cloud", "rain", "wind"]
        assert climate.schema.chunk_shape == (1, 15, 12)  # (wind's shards are its pieces)
        slab = climate[1:3, 5:20, 7:30]
        for name, expected in values.items():
            np.testing.assert_array_equal(slab[name], expected[1:3, 5:20, 7:30])
        total, wettest, calm = db.sql(
            "SELECT sum(cloud), max(rain), min(wind) FROM climate WHERE time = 2"
        ).fetchone()
        assert total == int(values["cloud"][2].astype(np.int64).sum())
        assert wettest == pytest.approx(float(values["rain"][2].max()))
        assert calm == float(values["wind"][2].min())
        dataset = climate.to_xarray()
        np.testing.assert_array_equal(dataset["wind"].values, values["wind"])
        # a task's snapshot travels to another process with its listing
        lazy = pickle.loads(pickle.dumps(climate.to_dask("rain")))
        np.testing.assert_array_equal(lazy.compute(scheduler="sync"), values["rain"])
        assert climate.versions() == []
        with pytest.raises(ReadOnlyError, match="opened in place"):
            climate[0, 0:2, 0:2] = {n: np.zeros((2, 2), v.dtype) for n, v in values.items()}
        assert db.check().ok
        db.drop("climate")
    assert sorted((o.path, o.etag) for o in location.list()) == before  # untouched


def test_a_changed_zarr_store_is_never_answered_from_a_cache(
    tmp_path: Path, s3_bucket: S3Bucket
) -> None:
    import zarr
    from zarr.storage import ObjectStore

    from tesseradb.errors import VersionNotFoundError

    location, values = _zarr_store(s3_bucket, "climate/live.zarr")
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        climate = db.open_array(location.url, name="climate")
        query = "SELECT sum(rain), count(*) FROM climate WHERE time = 0"
        first = db.sql(query).fetchone()
        assert first[0] == pytest.approx(float(values["rain"][0].sum(dtype=np.float64)), rel=1e-6)
        seen = climate.version
        assert db.sql(query).fetchone() == first  # warm: the same listing, the same answer
        # another program rewrites one chunk of the store
        rain = zarr.open_array(ObjectStore(location.store()), path="rain", mode="r+")
        rain[0, 0:15, 0:12] = np.full((15, 12), 1000.0, "float32")
        changed = values["rain"][0].copy()
        changed[0:15, 0:12] = 1000.0
        after = db.sql(query).fetchone()
        assert after[0] == pytest.approx(float(changed.sum(dtype=np.float64)), rel=1e-6)
        np.testing.assert_array_equal(climate[0, 0:15, 0:12]["rain"], changed[0:15, 0:12])
        assert climate.version != seen
        with pytest.raises(VersionNotFoundError, match="keeps no versions"):
            db.array("climate", version=seen)
