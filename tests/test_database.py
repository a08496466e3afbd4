"""The database directory, catalog, names, writer lock and format version."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pytest

import tesseradb
from tesseradb.catalog import validate_name
from tesseradb.errors import (
    DatabaseClosedError,
    DatabaseLockedError,
    FormatVersionError,
    InvalidArgumentError,
    InvalidNameError,
    NotADatabaseError,
    ObjectExistsError,
    ObjectNotFoundError,
    TesseraError,
)
from tests.processes import python_process


def test_creates_and_reopens(tmp_path: Path) -> None:
    path = tmp_path / "new" / "db.tdb"
    with tesseradb.connect(path) as db:
        assert (path / "catalog.sqlite").exists()
        assert db.format_version == 1
        assert repr(db).endswith("read-write)")
    with tesseradb.connect(path) as db:
        assert db.info().objects == []
    # the catalog is SQLite in WAL mode
    con = sqlite3.connect(path / "catalog.sqlite")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_paths_that_are_not_databases(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("hello")
    with pytest.raises(NotADatabaseError, match="is a file"):
        tesseradb.connect(tmp_path / "file.txt")
    full = tmp_path / "full"
    full.mkdir()
    (full / "data.csv").write_text("a,b")
    with pytest.raises(NotADatabaseError, match="not empty"):
        tesseradb.connect(full)
    assert sorted(p.name for p in full.iterdir()) == ["data.csv"]  # nothing was written
    with pytest.raises(NotADatabaseError, match="does not exist"):
        tesseradb.connect(tmp_path / "missing", read_only=True)
    assert not (tmp_path / "missing").exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    sqlite3.connect(foreign / "catalog.sqlite").execute("CREATE TABLE x (y)").connection.close()
    with pytest.raises(NotADatabaseError, match="not a TesseraDB catalog"):
        tesseradb.connect(foreign)


def test_future_format_version_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "db"
    tesseradb.connect(path).close()
    con = sqlite3.connect(path / "catalog.sqlite")
    con.execute("UPDATE meta SET value = '99' WHERE key = 'format_version'")
    con.commit()
    con.close()
    with pytest.raises(FormatVersionError, match="format version 99"):
        tesseradb.connect(path)
    with pytest.raises(FormatVersionError):
        tesseradb.connect(path, read_only=True)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("1abc", "starts with a digit"),
        ("a-b", "'-' at position 2"),
        ("", "empty"),
        ("select", "reserved"),
        ("x" * 200, "at most 128"),
        ("naïve", "'ï' at position 3"),
    ],
)
def test_invalid_names(name: str, fragment: str) -> None:
    with pytest.raises(InvalidNameError, match=fragment):
        validate_name(name)


def test_names_share_one_case_insensitive_namespace(db: tesseradb.Database) -> None:
    db.sql("CREATE TABLE Stars (x INT)")
    with pytest.raises(ObjectExistsError):
        db.register("stars", pa.table({"x": [1]}))
    with pytest.raises(ObjectExistsError):
        db.catalog.create("STARS", "array", {})
    with pytest.raises(InvalidNameError):
        db.register("bad name", pa.table({"x": [1]}))
    assert validate_name("ok_Name_2") == "ok_Name_2"
    db.catalog.create("grid", "array", {})
    with pytest.raises(ObjectExistsError, match=r"'grid' already exists \(an array\)"):
        db.catalog.create("grid", "stream", {})


def test_info_lists_kinds_and_sizes(db: tesseradb.Database) -> None:
    db.sql("CREATE TABLE t AS SELECT * FROM range(100)")
    db.register("mem", pa.table({"x": list(range(7))}))
    info = db.info()
    by_name = {o.name: o for o in info.objects}
    assert by_name["t"].kind == "table" and by_name["t"].rows == 100
    assert by_name["mem"].rows == 7 and by_name["mem"].bytes > 0
    assert info.bytes > 0 and info.path == db.path


def test_unknown_objects(db: tesseradb.Database) -> None:
    db.sql("CREATE TABLE galaxies (x INT)")
    with pytest.raises(ObjectNotFoundError, match="did you mean 'galaxies'"):
        db.catalog.require("galaxy")
    with pytest.raises(ObjectNotFoundError):
        db.drop("nothing")
    with pytest.raises(ObjectNotFoundError):
        db.unregister("nothing")


def test_closed_database(tmp_path: Path) -> None:
    db = tesseradb.connect(tmp_path / "c")
    db.close()
    db.close()  # idempotent
    with pytest.raises(DatabaseClosedError):
        db.sql("SELECT 1")


def test_second_writer_process_gets_a_clear_error_and_readers_are_allowed(tmp_path: Path) -> None:
    path = tmp_path / "locked"
    with tesseradb.connect(path) as db:
        db.sql("CREATE TABLE t AS SELECT 42 AS x")
        other = python_process(f"""
            import tesseradb
            try:
                tesseradb.connect({str(path)!r})
            except tesseradb.errors.DatabaseLockedError as err:
                print("LOCKED", err)
            with tesseradb.connect({str(path)!r}, read_only=True) as ro:
                print("READ", ro.sql("SELECT x FROM t").scalar())
        """)
        out, err = other.communicate(timeout=60)
        assert other.returncode == 0, err
        assert "LOCKED database" in out and "is open for writing by process" in out
        assert "READ 42" in out
        # the same process opening a second writer also gets the error, naming itself
        with pytest.raises(DatabaseLockedError, match="this process"):
            tesseradb.connect(path)


def test_lock_is_released_when_the_writer_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "killed"
    writer = python_process(f"""
        import sys, time, tesseradb
        db = tesseradb.connect({str(path)!r})
        db.sql("CREATE TABLE t AS SELECT 1 AS x")
        print("READY", flush=True)
        time.sleep(60)
    """)
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "READY"
    with pytest.raises(DatabaseLockedError):
        tesseradb.connect(path)
    writer.kill()  # SIGKILL: no cleanup runs
    writer.wait()
    time.sleep(0.1)
    with tesseradb.connect(path) as db:
        assert db.sql("SELECT x FROM t").scalar() == 1


def test_errors_form_one_hierarchy() -> None:
    from tesseradb import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), TesseraError)
    assert issubclass(errors.InvalidNameError, ValueError)
    assert issubclass(errors.ObjectNotFoundError, LookupError)


def test_import_is_lazy() -> None:
    code = (
        "import sys, tesseradb\n"
        "heavy = [m for m in ('duckdb', 'pyarrow', 'sqlglot', 'numpy', 'zarr', 'icechunk', 'h5py', 'scipy', 'pandas') if m in sys.modules]\n"
        "print(heavy)\n"
        "tesseradb.connect\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_core_extension_is_loaded() -> None:
    from tesseradb import _core

    facts = _core.build_info()
    assert facts["version"] == tesseradb.__version__
    assert facts["threads"] >= 1 and facts["profile"] in ("release", "debug")


def test_modified_moves_with_writes_to_every_kind(tmp_path: Path) -> None:
    import time

    import numpy as np
    import pyarrow as pa

    def modified(db: tesseradb.Database) -> dict[str, str]:
        return {o.name: o.modified for o in db.info().objects if o.modified}

    with tesseradb.connect(tmp_path / "db") as db:
        db.sql("CREATE TABLE t (a INTEGER)")
        stream = db.create_stream(
            "s", {"fields": [{"name": "a", "type": "double"}], "index": ["a"]}
        )
        array = db.create_array("a", [{"name": "x", "end": 10, "chunk": 10}], {"v": "int32"})
        people = db.create_collection("people")
        before = modified(db)
        time.sleep(1.1)  # the catalog's times have milliseconds; collections touch once a second
        db.sql("INSERT INTO t VALUES (1)")
        stream.ingest(pa.table({"a": [1.0]}), durable=True)
        array[0:10] = np.arange(10, dtype=np.int32)
        people.insert({"name": "x"})
        after = modified(db)
    for name in ("t", "s", "a", "people"):
        assert after[name] > before[name], name


@pytest.mark.parametrize("sole_writer", [False, True])
def test_catalog_lookups_see_every_change_at_once(tmp_path: Path, sole_writer: bool) -> None:
    """Catalog.get keeps the rows it read until any connection commits: its own
    transactions, another connection's (unless it holds the writer lock, when there can
    be none), and what a transaction has written so far."""
    from tesseradb.catalog import Catalog

    catalog = Catalog(tmp_path, create=True, sole_writer=sole_writer)
    assert catalog.get("a") is None
    catalog.create("a", "table", {"columns": ["x"]})
    assert catalog.get("a").spec == {"columns": ["x"]}  # this connection's commit
    catalog.get("a").spec["columns"].append("changed by a caller")  # (a copy)
    assert catalog.get("a").spec == {"columns": ["x"]}
    with catalog.transaction() as tx:
        catalog.create("b", "table", {"columns": ["y"]}, tx=tx)
        assert catalog.get("b") is not None  # inside the transaction, its own write
    assert catalog.get("b") is not None
    with pytest.raises(RuntimeError), catalog.transaction() as tx:
        catalog.drop("b", tx=tx)
        assert catalog.get("b") is None
        raise RuntimeError("rolled back")
    assert catalog.get("b") is not None  # the rollback is seen too
    if sole_writer:
        catalog.close()
        return
    other = sqlite3.connect(tmp_path / "catalog.sqlite", isolation_level=None)
    other.execute("UPDATE objects SET spec = '{\"columns\": [\"z\"]}' WHERE name = 'a'")
    other.execute("DELETE FROM objects WHERE name = 'b'")
    other.close()
    assert catalog.get("a").spec == {"columns": ["z"]}  # another connection's commit
    assert catalog.get("b") is None
    catalog.close()


@pytest.mark.parametrize(
    ("given", "shown"),
    [("256MiB", "256.0 MiB"), (512 * 2**20, "512.0 MiB"), ("1.5GiB", "1.5 GiB")],
)
def test_memory_limit_bounds_every_duckdb_instance_holding_data(
    tmp_path: Path, given: int | str, shown: str
) -> None:
    """connect(memory_limit=...) reaches the SQL engine's DuckDB instance and a DuckDB
    document backend's; a read-only database's too."""
    path = tmp_path / "db.tdb"
    query = "SELECT current_setting('memory_limit')"
    with tesseradb.connect(path, memory_limit=given) as db:
        assert db.sql(query).fetchall() == [(shown,)]
        guest = db._engine.new_session("guest", restricted=True)  # a served user's instance
        assert db._engine.execute(query, session=guest).fetchall() == [(shown,)]
        docs = db.create_collection("docs", backend="duckdb")
        docs.insert({"a": 1})
        assert docs.backend.execute(query) == [(shown,)]
    with tesseradb.connect(path, read_only=True, memory_limit=given) as db:
        assert db.sql(query).fetchall() == [(shown,)]
        assert db.collection("docs").backend.execute(query) == [(shown,)]
    with tesseradb.connect(path) as db:  # (not kept: the next connection has DuckDB's default)
        assert db.sql(query).fetchall() != [(shown,)]


def test_memory_limit_bounds_the_stream_and_block_caches(tmp_path: Path) -> None:
    """A stream's segment cache takes at most an eighth of the limit (for that connection
    only), and so does the process's cache of blocks of files in buckets."""
    import h5py
    import numpy as np

    from tesseradb.attached._bytes import BLOCK_CACHE

    path = tmp_path / "db.tdb"
    fields = [{"name": "t", "type": "int64"}]
    kept = (BLOCK_CACHE.budget, BLOCK_CACHE.largest)
    try:
        with tesseradb.connect(path, memory_limit="256MiB") as db:
            stream = db.create_stream("s", {"fields": fields, "index": ["t"]}, cache_bytes=1 << 30)
            assert stream._cache.capacity == (256 << 20) // 8
            small = db.create_stream(
                "small", {"fields": fields, "index": ["t"]}, cache_bytes=1 << 20
            )
            assert small._cache.capacity == 1 << 20  # (a smaller cache stays as asked)
            with h5py.File(tmp_path / "f.h5", "w") as f:
                f["t/x"] = np.arange(4)
            db.attach(tmp_path / "f.h5", name="f")  # (attached files come in when first used)
            assert BLOCK_CACHE.budget <= (256 << 20) // 8
            assert BLOCK_CACHE.largest <= BLOCK_CACHE.budget
        with tesseradb.connect(path) as db:  # (not kept: the stream's own option stands)
            assert db.stream("s")._cache.capacity == 1 << 30
            assert db.describe("s")["records"] == 0
    finally:
        BLOCK_CACHE.budget, BLOCK_CACHE.largest = kept


@pytest.mark.parametrize("bad", ["lots", "-1GB", "12", "1 parsec", 0, -5, 1.5, True, [], "1MB"])
def test_a_bad_memory_limit_is_refused_before_anything_opens(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "never.tdb"
    with pytest.raises(InvalidArgumentError, match="memory_limit"):
        tesseradb.connect(path, memory_limit=bad)  # type: ignore[arg-type]
    assert not path.exists()


def test_a_statement_past_the_memory_limit_spills_where_the_database_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB spills beside the table store (the writer) or into a private directory
    removed at close (a reader, a served user), never into the current directory."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "db.tdb"
    big = "SELECT count(*), sum(r) FROM (SELECT range AS r FROM range(6000000) ORDER BY random())"
    where = "SELECT current_setting('temp_directory')"
    with tesseradb.connect(path, memory_limit="64MiB") as db:
        assert db.sql(where).fetchall() == [(str(path / "tables.duckdb.tmp"),)]
        assert db.sql(big).fetchall() == [(6000000, 17999997000000)]
        guest = db._engine.new_session("guest", restricted=True)
        (spill,) = db._engine.execute(where, session=guest).fetchall()[0]
        assert db._engine.execute(big, session=guest).fetchall() == [(6000000, 17999997000000)]
    assert not Path(spill).parent.exists()  # the restricted instance's private directory
    with tesseradb.connect(path, read_only=True, memory_limit="64MiB") as db:
        (spill,) = db.sql(where).fetchall()[0]
        assert Path(spill).parent == Path(tempfile.gettempdir())
        assert db.sql(big).fetchall() == [(6000000, 17999997000000)]
    assert not Path(spill).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.tdb"]  # no .tmp here
    with tesseradb.connect(path) as db:
        assert db.check().ok


def test_the_environment_gives_the_memory_limit_when_connect_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "SELECT current_setting('memory_limit')"
    monkeypatch.setenv("TESSERA_MEMORY_LIMIT", "300MiB")
    with tesseradb.connect(tmp_path / "a.tdb") as db:
        assert db.sql(query).fetchall() == [("300.0 MiB",)]
    with tesseradb.connect(tmp_path / "a.tdb", memory_limit="200MiB") as db:  # the call wins
        assert db.sql(query).fetchall() == [("200.0 MiB",)]
    monkeypatch.setenv("TESSERA_MEMORY_LIMIT", "plenty")
    with pytest.raises(InvalidArgumentError, match="TESSERA_MEMORY_LIMIT"):
        tesseradb.connect(tmp_path / "b.tdb")
    assert not (tmp_path / "b.tdb").exists()
    run = subprocess.run(  # a command says what is wrong, without a traceback
        [sys.executable, "-m", "tesseradb.cli", "sql", str(tmp_path / "a.tdb"), "SELECT 1"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TESSERA_MEMORY_LIMIT": "plenty"},
    )
    assert run.returncode != 0
    assert "TESSERA_MEMORY_LIMIT" in run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
