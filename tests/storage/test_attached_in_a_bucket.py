"""HDF5 files in an S3 bucket, attached and queried in place (a real S3 server on loopback).

Every answer equals the answer over the same files on local disk; nothing is copied
into the database; an object replaced under an attachment is re-read or refused, never
mixed; a vanished object is a clear error.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import h5py
import numpy as np
import pytest

import tesseradb
from tesseradb.attached import AttachedFileError, AttachError
from tesseradb.errors import StorageError
from tesseradb.storage import Location, resolve_credentials
from tests.servers import S3Bucket

QUERIES = [
    "SELECT count(*), sum(id), min(mag), max(mag) FROM {t}.obs",
    "SELECT id, mag, band, note, flux FROM {t}.obs WHERE id IN (0, 5, 99, 150) ORDER BY id",
    "SELECT band, count(*), avg(flux) FROM {t}.obs GROUP BY band ORDER BY band",
    "SELECT _file, count(*) FROM {t}.obs WHERE flux > 100 GROUP BY _file ORDER BY _file",
    "SELECT sum(k), max(tag), avg(x) FROM {t}.catalog",
]


def _same(db: tesseradb.Database, query: str) -> bool:
    """Whether the query gives the same rows over the bucket's files as over the local ones
    (float sums compared to 12 digits: partial sums run in whatever order threads finish)."""

    def rows(table: str) -> list[tuple[object, ...]]:
        return [
            tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in row)
            for row in db.sql(query.format(t=table)).fetchall()
        ]

    return rows("there") == rows("here")


def _night(path: Path, night: int, rows: int = 200) -> None:
    rng = np.random.default_rng(night)
    with h5py.File(path, "w") as f:
        g = f.create_group("obs")
        g["id"] = np.arange(rows, dtype=np.int64) + 1000 * night
        g["mag"] = rng.uniform(15, 25, rows).astype(np.float32)
        g["band"] = np.array([b"g", b"r", b"i", b"z"] * (rows // 4), dtype="S2")
        g.create_dataset("note", data=[f"n{i}é" for i in range(rows)], dtype=h5py.string_dtype())
        g.create_dataset(
            "flux", data=rng.normal(100, 30, rows), chunks=(32,), compression="gzip", shuffle=True
        )
        rec = np.zeros(10, dtype=[("x", "<f8"), ("k", "<i4"), ("tag", "S3")])
        rec["x"] = np.arange(10) / 2 + night
        rec["k"] = np.arange(10) * 3
        rec["tag"] = [b"ab"] * 10
        f["catalog"] = rec


def _upload(bucket: S3Bucket, files: list[Path], folder: str) -> Location:
    location = Location(f"{bucket.url}/{folder}", resolve_credentials(bucket.options, "test"))
    for file in files:
        location.write(file.name, file.read_bytes())
    return location


@pytest.fixture
def nights(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "nights"
    folder.mkdir()
    files = [folder / f"night{n}.h5" for n in range(3)]
    for n, file in enumerate(files):
        _night(file, n)
    return files


def test_answers_equal_the_local_files(
    tmp_path: Path, s3_bucket: S3Bucket, nights: list[Path]
) -> None:
    _upload(s3_bucket, nights, "ptf/2026")
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        local = db.attach(str(nights[0].parent / "night*.h5"), name="here")
        remote = db.attach(f"{s3_bucket.url}/ptf/2026/night*.h5", name="there")
        assert remote.files == [f"{s3_bucket.url}/ptf/2026/night{n}.h5" for n in range(3)]
        assert remote.tables() == local.tables()
        for query in QUERIES:
            assert _same(db, query), query
        # with bitmap indexes beside them, the same answers
        db.create_index("there.obs", ["mag", "flux"])
        db.create_index("here.obs", ["mag", "flux"])
        where = "SELECT id FROM {t}.obs WHERE mag BETWEEN 17 AND 17.5 AND flux > 90 ORDER BY id"
        assert _same(db, where)
        assert db.describe("there")["files"] == remote.files
    # nothing of the files was copied into the database directory
    size = sum(p.stat().st_size for p in (tmp_path / "db").rglob("*") if p.is_file())
    assert size < sum(f.stat().st_size for f in nights) * 10 + (8 << 20)
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        assert _same(db, QUERIES[0])


def test_a_large_file_s_headers_come_a_level_at_a_time(
    tmp_path: Path, s3_bucket: S3Bucket, nights: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the size fetched whole, a file's object headers are found from their groups'
    links and fetched together; answers stay those of the local files."""
    from tesseradb.attached import _bytes

    monkeypatch.setattr(_bytes, "WHOLE", 0)  # every file is "large"
    monkeypatch.setattr(_bytes, "BLOCK", 4096)  # (so the small test files span many blocks)
    monkeypatch.setattr(_bytes, "LARGE", 4 * 4096)
    monkeypatch.setattr(_bytes, "HEADER_REACH", 512)
    location = _upload(s3_bucket, nights, "large")
    gets: list[tuple[int, int]] = []
    real_get = _bytes.RemoteBytes._get

    def counted(self: _bytes.RemoteBytes, start: int, end: int) -> bytes:
        gets.append((start, end))
        return real_get(self, start, end)

    monkeypatch.setattr(_bytes.RemoteBytes, "_get", counted)
    source = _bytes.RemoteBytes(
        location, "night0.h5", nights[0].stat().st_size, location.head("night0.h5").etag
    )
    _bytes.clear_remote_cache()
    with h5py.File(_bytes.RemoteFile(source), "r") as f:
        _bytes.warm_object_headers(f, source)
        warmed = len(gets)
        names: list[tuple[str, object]] = []
        f.visititems(lambda name, obj: names.append((name, getattr(obj, "shape", None))))
        later = gets[warmed:]
    with h5py.File(nights[0], "r") as f:
        expected: list[tuple[str, object]] = []
        headers: list[int] = []
        f.visititems(lambda name, obj: expected.append((name, getattr(obj, "shape", None))))
        f.visititems(lambda name, obj: headers.append(h5py.h5o.get_info(obj.id).addr))
        chunked = sum(1 for _, obj in f["obs"].items() if obj.chunks is not None)
    assert names == expected
    # no header was read one by one; what is left is each chunked dataset's chunk index,
    # which opening a dataset reads (at most two blocks each here)
    assert not [h for h in headers for start, end in later if start <= h < end]
    assert len(later) <= 2 * chunked
    # a level of very many headers fetches at most HEADER_BLOCKS blocks at once
    monkeypatch.setattr(_bytes, "HEADER_BLOCKS", 2)
    _bytes.clear_remote_cache()
    gets.clear()
    source.warm(range(0, source.size, 4096))
    assert sum((end - start) // 4096 for start, end in gets) <= 2
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        db.attach(str(nights[0].parent / "night*.h5"), name="here")
        db.attach(f"{s3_bucket.url}/large/night*.h5", name="there")
        for query in QUERIES:
            assert _same(db, query), query


def test_a_first_answer_costs_one_get_and_one_head(
    tmp_path: Path, s3_bucket: S3Bucket, nights: list[Path]
) -> None:
    """Attaching one object by name is one GET (its size and entity tag come with the
    body); the first statement adds only its staleness HEAD, a warm one only that."""
    from tesseradb.attached import clear_remote_cache
    from tesseradb.bench.proxy import fault_proxy

    location = _upload(s3_bucket, nights[:1], "counted")
    clear_remote_cache()
    with fault_proxy(s3_bucket.endpoint.endpoint_url) as proxy:
        options = {**s3_bucket.options, "endpoint_url": proxy.endpoint_url}
        with tesseradb.connect(tmp_path / "db", storage_options=options) as db:
            before = proxy.requests
            db.attach(f"{location.url}/night0.h5", name="there")
            assert proxy.requests - before == 1
            db.attach(str(nights[0]), name="here")
            before = proxy.requests
            assert _same(db, QUERIES[0])
            assert proxy.requests - before == 1
            before = proxy.requests
            assert _same(db, QUERIES[2])
            assert proxy.requests - before == 1


def test_one_object_and_a_glob_that_matches_nothing(
    tmp_path: Path, s3_bucket: S3Bucket, nights: list[Path]
) -> None:
    _upload(s3_bucket, nights, "one")
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        db.attach(f"{s3_bucket.url}/one/night1.h5", name="n1")
        assert db.sql("SELECT min(id), count(*) FROM n1.obs").fetchall() == [(1000, 200)]
        with pytest.raises(AttachError, match="no files match"):
            db.attach(f"{s3_bucket.url}/one/*.nc", name="none")
        with pytest.raises(AttachedFileError, match="no longer exists"):
            db.attach(f"{s3_bucket.url}/one/missing.h5", name="gone")
        with pytest.raises(StorageError, match="the bucket does not exist"):
            db.attach("s3://no-such-bucket-at-all/x/*.h5", name="nobucket")
        assert [o.name for o in db.catalog.objects("attached")] == ["n1"]


def test_an_object_that_is_not_hdf5_is_refused(tmp_path: Path, s3_bucket: S3Bucket) -> None:
    location = _upload(s3_bucket, [], "junk")
    location.write("table.h5", b"not an HDF5 file at all" * 10)
    location.write("classic.nc", b"CDF\x01" + bytes(100))
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        with pytest.raises(AttachError, match="not an HDF5"):
            db.attach(f"{s3_bucket.url}/junk/table.h5", name="junk")
        with pytest.raises(AttachError, match="NetCDF3"):
            db.attach(f"{s3_bucket.url}/junk/classic.nc", name="classic")
        assert db.catalog.get("junk") is None


def test_a_replaced_object_is_read_again_and_a_vanished_one_is_an_error(
    tmp_path: Path, s3_bucket: S3Bucket, nights: list[Path]
) -> None:
    location = _upload(s3_bucket, nights[:1], "swap")
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        db.attach(f"{s3_bucket.url}/swap/night0.h5", name="s")
        assert db.sql("SELECT min(id) FROM s.obs").scalar() == 0
        # replaced by another night's file (same layout): the next statement reads it
        location.write("night0.h5", nights[2].read_bytes())
        assert db.sql("SELECT min(id) FROM s.obs").scalar() == 2000
        # replaced by something that lost the attached columns: an error, no answer
        other = tmp_path / "other.h5"
        with h5py.File(other, "w") as f:
            f["elsewhere/v"] = np.arange(3)
        location.write("night0.h5", other.read_bytes())
        with pytest.raises(AttachedFileError, match="no longer has /"):
            db.sql("SELECT count(*) FROM s.obs").fetchall()
        location.delete_all()
        with pytest.raises(AttachedFileError, match="no longer exists"):
            db.sql("SELECT count(*) FROM s.obs").fetchall()


def test_a_read_pinned_to_one_version_refuses_a_replaced_object(
    tmp_path: Path, s3_bucket: S3Bucket, nights: list[Path]
) -> None:
    from tesseradb.attached._bytes import BLOCK_CACHE, RemoteBytes

    location = _upload(s3_bucket, nights[:1], "pin")
    stored = location.head("night0.h5")
    source = RemoteBytes(location, "night0.h5", stored.size, stored.etag)
    head = source.pread(8, 0)
    assert head == nights[0].read_bytes()[:8]
    location.write("night0.h5", nights[1].read_bytes())
    BLOCK_CACHE.clear()
    with pytest.raises(AttachedFileError, match="was replaced while it was being read"):
        source.pread(100, 0)


def test_a_task_reaches_the_bucket_with_the_table_ref(
    tmp_path: Path, s3_bucket: S3Bucket, nights: list[Path]
) -> None:
    _upload(s3_bucket, nights, "refs")
    with tesseradb.connect(tmp_path / "db", storage_options=s3_bucket.options) as db:
        attachment = db.attach(f"{s3_bucket.url}/refs/night*.h5", name="r")
        expected = db.sql("SELECT count(*) FROM r.obs").scalar()
        ref = pickle.loads(pickle.dumps(attachment.ref("obs")))
    assert s3_bucket.options["secret_access_key"] not in repr(ref)
    table = ref.open()  # as a Dask worker does: from the spec and the credentials
    with table.attachment.hold():
        assert sum(table.attachment._rows("obs", f) for f in range(3)) == expected


def test_sidecar_indexes_live_in_the_database_storage(
    tmp_path: Path, s3_bucket: S3Bucket, nights: list[Path]
) -> None:
    _upload(s3_bucket, nights, "indexed")
    path = tmp_path / "db"
    query = "SELECT id FROM {t}.obs WHERE mag BETWEEN 17 AND 17.5 AND flux > 90 ORDER BY id"
    with tesseradb.connect(
        path, storage=f"{s3_bucket.url}/db", storage_options=s3_bucket.options
    ) as db:
        db.attach(str(nights[0].parent / "night*.h5"), name="here")
        db.attach(f"{s3_bucket.url}/indexed/night*.h5", name="there")
        db.create_index("there.obs", ["mag", "flux"])
        assert _same(db, query)
        indexes = Location(db.catalog.get("there").spec["index_location"], db.storage.credentials)
        names = sorted(o.path for o in indexes.list())
        assert names == sorted(f"obs.{c}.{f}.bmi" for c in ("flux", "mag") for f in range(3))
    assert not list((path / "attached").rglob("*.bmi"))  # none in the directory
    with tesseradb.connect(path, storage_options=s3_bucket.options) as db:
        assert _same(db, query)
        assert db.check().ok
        db.drop("there")
    assert list(indexes.list()) == []
    # the attached files themselves are untouched
    assert len(list(_upload(s3_bucket, [], "indexed").list())) == 3
