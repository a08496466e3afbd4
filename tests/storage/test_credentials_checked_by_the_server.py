"""Against an S3 server that checks every request's signature, as AWS does: the right key
works end to end, and a wrong secret or an unknown key is a clear StorageError that
changes nothing and never shows the secret."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest

import tesseradb
from tesseradb.bench import servers
from tesseradb.bench.servers import S3Endpoint
from tesseradb.errors import StorageError
from tesseradb.storage import Location, resolve_credentials
from tests.servers import _serve

WRONG_SECRET = "not-the-secret-0123456789"


@pytest.fixture(scope="module")
def signed_server() -> Iterator[S3Endpoint]:
    yield from _serve(servers.s3_server(checks_signatures=True))


def _wrong(endpoint: S3Endpoint) -> list[dict[str, str]]:
    right = endpoint.storage_options()
    return [
        {**right, "secret_access_key": WRONG_SECRET},
        {**right, "access_key_id": "AKIAUNKNOWNKEY000000"},
    ]


def _catalog_bytes(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix in (".json", ".sqlite", ".db", "")
    }


def test_the_right_key_works_and_a_wrong_one_changes_nothing(
    tmp_path: Path, signed_server: S3Endpoint
) -> None:
    url = signed_server.create_bucket("signed-checks")
    right = signed_server.storage_options()
    h5 = tmp_path / "night.h5"
    with h5py.File(h5, "w") as f:
        f.create_group("obs").create_dataset("mag", data=np.linspace(15, 21, 500))
    Location(f"{url}/raw", resolve_credentials(right, "test")).upload(h5, "night.h5")
    folder = tmp_path / "db"
    with tesseradb.connect(folder, storage=url, storage_options=right) as db:
        img = db.create_array("img", [{"name": "x", "end": 100, "chunk": 25}], {"v": "float64"})
        img[0:100] = {"v": np.arange(100.0)}
        db.attach(f"{url}/raw/*.h5", name="night")
        expected = db.sql("SELECT sum(v) FROM img").fetchone()
        assert expected == (4950.0,)
        assert db.sql("SELECT count(*) FROM night.obs WHERE mag < 18").fetchone() == (250,)
    before = sorted((o.path, o.etag) for o in Location(url, resolve_credentials(right, "t")).list())
    kept = _catalog_bytes(folder)

    for wrong in _wrong(signed_server):
        # a new database in the bucket: refused before anything is made
        with pytest.raises(StorageError, match="credentials were refused") as refused:
            tesseradb.connect(tmp_path / "new", storage=url, storage_options=wrong)
        assert WRONG_SECRET not in str(refused.value)
        assert url in str(refused.value)
        assert not (tmp_path / "new").exists() or not any((tmp_path / "new").rglob("*.json"))
        # the existing database, opened with the wrong key: each reach into the bucket fails
        with tesseradb.connect(folder, storage_options=wrong) as db:
            for attempt in (
                lambda: db.sql("SELECT sum(v) FROM img").fetchone(),
                lambda: db.sql("SELECT count(*) FROM night.obs").fetchone(),
                lambda: db.attach(f"{url}/raw/night.h5", name="again"),
                lambda: db.open_array(f"{url}/arrays", name="elsewhere"),
            ):
                with pytest.raises(StorageError) as failed:
                    attempt()
                assert WRONG_SECRET not in str(failed.value)
                assert "s3://signed-checks" in str(failed.value)
            assert sorted(o.name for o in db.catalog.objects()) == ["img", "night"]

    after = sorted((o.path, o.etag) for o in Location(url, resolve_credentials(right, "t")).list())
    assert after == before
    assert _catalog_bytes(folder) == kept
    with tesseradb.connect(folder, storage_options=right) as db:
        assert db.sql("SELECT sum(v) FROM img").fetchone() == expected
