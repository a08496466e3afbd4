"""The database's memory limit bounds the embedded SQLite document backend too: its page
cache (which also bounds the sorter of a bulk load's index builds) and its memory map."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tesseradb
from tesseradb.errors import CancelledError
from tesseradb.progress import Cancel


def _settings(collection: object) -> tuple[int, int]:
    backend = collection.backend  # type: ignore[attr-defined]
    [(cache,)] = backend.execute("PRAGMA cache_size")
    [(mapped,)] = backend.execute("PRAGMA mmap_size")
    return cache, mapped


def test_the_memory_limit_sizes_the_sqlite_cache_and_map(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "free") as db:
        cache, mapped = _settings(db.create_collection("c"))
        assert cache == -(256 << 20) // 1024  # (KiB when negative)
        assert mapped >= 256 << 20  # (SQLite caps the map at its compile-time limit)
    with tesseradb.connect(tmp_path / "bounded", memory_limit="128MiB") as db:
        assert _settings(db.create_collection("c")) == (-(32 << 20) // 1024, 64 << 20)
        db.argo("SELECT * FROM c", into="kept")  # a temporary collection's backend too
        assert _settings(db.collection("kept")) == (-(32 << 20) // 1024, 64 << 20)


def test_a_bulk_load_under_a_small_limit_keeps_every_object(tmp_path: Path) -> None:
    """A load of more than one batch builds its indexes at the end: under a 64 MiB limit
    the sorter spills to temporary files, and the objects are all there."""
    objects = [
        {"i": i, "s": f"value {i % 997:05d}", "tags": [i % 7, str(i)]} for i in range(45_000)
    ]
    source = tmp_path / "objects.jsonl"
    source.write_text("".join(json.dumps(o) + "\n" for o in objects))
    with tesseradb.connect(tmp_path / "db", memory_limit="64MiB") as db:
        c = db.create_collection("c")
        assert c.load_jsonl(source) == len(objects)
    with tesseradb.connect(tmp_path / "db") as db:
        c = db.collection("c")
        assert sorted(c.find(), key=lambda o: o["i"]) == objects
        assert [o["i"] for o in c.find("s = 'value 00005'")] == [
            o["i"] for o in objects if o["s"] == "value 00005"
        ]
        assert db.check().ok


def test_a_cancelled_load_keeps_nothing_and_gives_back_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a small cache a big load writes its pages into SQLite's log as it goes; the
    cancel rolls it back and cuts the log back (at 10M objects it would be gigabytes)."""
    from tesseradb.documents._embedded import SQLiteBackend

    monkeypatch.setattr(SQLiteBackend, "LOG_LEFT", 1 << 20)
    source = tmp_path / "objects.jsonl"
    source.write_text(
        "".join(json.dumps({"i": i, "s": "x" * 200 + str(i)}) + "\n" for i in range(100_000))
    )
    log = tmp_path / "db" / "documents" / "documents.sqlite-wal"
    with tesseradb.connect(tmp_path / "db", memory_limit="64MiB") as db:
        c = db.create_collection("c")
        c.insert({"first": 1})
        cancel = Cancel()
        grown: list[int] = []

        def progress(event: Any) -> None:
            if event.done > source.stat().st_size * 0.7:
                grown.append(log.stat().st_size)
                cancel.cancel()

        with pytest.raises(CancelledError):
            c.load_jsonl(source, cancel=cancel, progress=progress)
        assert grown and grown[0] > 4 << 20  # (the load had spilled into the log)
        assert log.stat().st_size <= 1 << 20
        assert c.find() == [{"first": 1}]
        c.insert({"second": 2})  # and the collection takes writes as before
    with tesseradb.connect(tmp_path / "db") as db:
        assert sorted(map(list, db.collection("c").find())) == [["first"], ["second"]]
        assert db.check().ok
