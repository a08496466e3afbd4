"""The registry of peer systems benchmarks compare TesseraDB with.

A peer says what it is and whether it can run on this machine; benchmarks
name the peers they support, and ``tessera bench --list`` shows them.
"""

from __future__ import annotations

import glob
import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["PEERS", "Peer", "peer"]


@dataclass(frozen=True)
class Peer:
    name: str
    description: str
    check: Callable[[], str | None]  # None if it can run here, else why not

    def unavailable(self) -> str | None:
        return self.check()


def _module(name: str) -> Callable[[], str | None]:
    return lambda: (
        None if importlib.util.find_spec(name) else f"the Python package {name} is not installed"
    )


def _postgres() -> str | None:
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb") and not shutil.which("initdb"):
        return "PostgreSQL is not installed (scripts/install-servers.sh installs it)"
    return _module("psycopg")()


def _mariadb() -> str | None:
    if not shutil.which("mariadbd") and not glob.glob("/usr/sbin/mariadbd"):
        return "MariaDB is not installed (scripts/install-servers.sh installs it)"
    return _module("pymysql")()


def _document_configurations() -> list[Peer]:
    """TesseraDB's collections on each backend under each mapping (``tessera bench nobench``)."""
    from tesseradb.documents import MAPPINGS

    checks = {
        "sqlite": lambda: None,
        "duckdb": lambda: None,
        "postgresql": _postgres,
        "mariadb": _mariadb,
    }
    return [
        Peer(f"tessera-{backend}-{mapping}", f"TesseraDB documents, {mapping} on {backend}", check)
        for backend, check in checks.items()
        for mapping in MAPPINGS
    ]


PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer("tessera", "TesseraDB itself", lambda: None),
        Peer(
            "tessera-dask-1",
            "TesseraDB on a Dask LocalCluster of 1 one-thread worker process",
            _module("distributed"),
        ),
        Peer(
            "tessera-dask-2",
            "TesseraDB on a Dask LocalCluster of 2 one-thread worker processes",
            _module("distributed"),
        ),
        Peer(
            "duckdb", "DuckDB, in-process, vectorised (Arrow in, native tables)", _module("duckdb")
        ),
        Peer("sqlite", "SQLite through Python's sqlite3", _module("sqlite3")),
        Peer(
            "postgresql",
            "PostgreSQL from Debian's packages, a throwaway server on loopback",
            _postgres,
        ),
        Peer("mariadb", "MariaDB from Debian's packages, a throwaway server on loopback", _mariadb),
        Peer("zarr", "plain zarr-python scripts", _module("zarr")),
        Peer(
            "xarray",
            "xarray with dask (the 'bench' extra): open_mfdataset(...).to_zarr(...)",
            _module("dask"),
        ),
        Peer("tiledb", "TileDB-Py dense and sparse arrays (the 'bench' extra)", _module("tiledb")),
        Peer("h5py", "plain h5py and numpy scripts", _module("h5py")),
        Peer(
            "download",
            "download the files from the bucket, load them into DuckDB, then query",
            _module("duckdb"),
        ),
        Peer(
            "h5py-fsspec",
            "h5py over fsspec's HTTP ranged reads of a presigned URL, tables queried in DuckDB",
            _module("aiohttp"),
        ),
        Peer(
            "parquet",
            "Parquet files in a bucket queried with pyarrow's dataset filter (S3FileSystem)",
            _module("pyarrow"),
        ),
        Peer("numpy", "files (.npy) with numpy and scipy scripts", _module("scipy")),
        Peer("scipy", "scipy.sparse matrices, keys interned with np.unique", _module("scipy")),
        Peer(
            "graphblas",
            "python-graphblas (SuiteSparse:GraphBLAS), keys by np.unique; where installed",
            _module("graphblas"),
        ),
        Peer("npy", "one .npy file per image slice, read whole with numpy", _module("numpy")),
        Peer(
            "tiff", "one TIFF file per image slice, read whole with tifffile", _module("tifffile")
        ),
        Peer("postgresql-jsonb", "PostgreSQL jsonb with GIN and expression indexes", _postgres),
        Peer("sqlite-json", "SQLite's JSON functions with expression indexes", _module("sqlite3")),
        Peer("duckdb-json", "DuckDB's JSON type", _module("duckdb")),
        *_document_configurations(),
    )
}


def peer(name: str) -> Peer:
    from tesseradb.errors import BenchmarkError

    if name not in PEERS:
        raise BenchmarkError(f"no peer system named {name!r}; known: {', '.join(PEERS)}")
    return PEERS[name]
