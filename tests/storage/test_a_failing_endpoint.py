"""A throttled or failing S3 endpoint (503 Slow Down, reset connections): passing faults
are retried and answered right; lasting ones are a StorageError and change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest

import tesseradb
from tesseradb.bench.proxy import FaultProxy, fault_proxy
from tesseradb.errors import StorageError
from tesseradb.storage import Location, resolve_credentials
from tests.servers import S3Bucket

DIMS = [{"name": "y", "end": 64, "chunk": 32}, {"name": "x", "end": 64, "chunk": 32}]


@pytest.fixture
def proxy(s3_bucket: S3Bucket) -> Iterator[FaultProxy]:
    with fault_proxy(s3_bucket.endpoint.endpoint_url) as made:
        yield made


def _options(bucket: S3Bucket, proxy: FaultProxy) -> dict[str, str]:
    return {**bucket.options, "endpoint_url": proxy.endpoint_url}


def _values(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(64, 64))  # incompressible: stored chunks


@pytest.mark.parametrize("fault", ["slow_down", "reset"])
def test_passing_faults_are_retried(
    tmp_path: Path, s3_bucket: S3Bucket, proxy: FaultProxy, fault: str
) -> None:
    with tesseradb.connect(
        tmp_path / "db", storage=s3_bucket.url, storage_options=_options(s3_bucket, proxy)
    ) as db:
        img = db.create_array("img", DIMS, {"v": "float64"})
        getattr(proxy, fault)(2)
        img[0:64, 0:64] = {"v": _values(1)}  # a commit through two failed requests
        getattr(proxy, fault)(2)
        db.array("img")  # (and reads)
        from tesseradb.arrays import clear_chunk_cache

        clear_chunk_cache()
        np.testing.assert_array_equal(img[0:64, 0:64]["v"], _values(1))
        assert proxy.requests > 4


def test_a_lasting_fault_is_a_storage_error_and_changes_nothing(
    tmp_path: Path, s3_bucket: S3Bucket, proxy: FaultProxy
) -> None:
    # (one fault: Icechunk's S3 client gives up only after about 10 requests and 20 s
    # whatever its retry settings, so each lasting fault costs that much test time)
    path = tmp_path / "db"
    options = _options(s3_bucket, proxy)
    with tesseradb.connect(path, storage=s3_bucket.url, storage_options=options) as db:
        img = db.create_array("img", DIMS, {"v": "float64"})
        img[0:64, 0:64] = {"v": _values(1)}
        versions = len(img.versions())
        proxy.slow_down(10_000)
        with pytest.raises(StorageError) as caught:
            img[0:64, 0:64] = {"v": _values(2)}
        assert s3_bucket.url in str(caught.value) or "s3://" in str(caught.value)
        assert options["secret_access_key"] not in str(caught.value)
        proxy.heal()
    with tesseradb.connect(path, storage_options=options) as db:
        img = db.array("img")
        assert len(img.versions()) == versions  # the failed write left no version
        np.testing.assert_array_equal(img[0:64, 0:64]["v"], _values(1))


def test_attached_reads_through_faults(
    tmp_path: Path, s3_bucket: S3Bucket, proxy: FaultProxy
) -> None:
    from tesseradb.attached._bytes import BLOCK_CACHE

    file = tmp_path / "obs.h5"
    with h5py.File(file, "w") as f:
        f.create_dataset("t/v", data=np.arange(50_000, dtype=np.float64), chunks=(4096,))
    Location(s3_bucket.url, resolve_credentials(s3_bucket.options, "t")).write(
        "obs.h5", file.read_bytes()
    )
    with tesseradb.connect(tmp_path / "db", storage_options=_options(s3_bucket, proxy)) as db:
        db.attach(f"{s3_bucket.url}/obs.h5", name="o")
        BLOCK_CACHE.clear()
        proxy.slow_down(3)
        assert db.sql("SELECT sum(v) FROM o.t").scalar() == float(np.arange(50_000).sum())
        proxy.slow_down(10_000)
        BLOCK_CACHE.clear()
        with pytest.raises(StorageError, match=r"kept failing|cannot be reached|cannot read"):
            db.sql("SELECT sum(v) FROM o.t").fetchall()
        proxy.heal()
        assert db.sql("SELECT count(*) FROM o.t").scalar() == 50_000
