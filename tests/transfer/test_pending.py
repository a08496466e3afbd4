"""What a load makes is whole or gone, also across kill -9 (issue 40): the object it creates
is pending until its data is in, other processes do not see it meanwhile, and the next
writer drops what a killed one left pending."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np

import tesseradb
from tests.processes import python_process


def test_an_object_made_by_a_load_is_hidden_until_whole_and_dropped_if_the_writer_dies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.tdb"
    source = tmp_path / "cells.npy"
    np.save(source, np.arange(64, dtype=np.int64).reshape(8, 8))
    with tesseradb.connect(path) as db:
        db.create_array("kept", [{"name": "x", "end": 2}], {"v": "int64"})
    # a writer that stops inside a load, after the array is made and before its data is in
    writer = python_process(f"""
        import os, signal, sys, tesseradb
        from tesseradb.arrays import Array
        real = Array.transaction
        def stop(self, *args, **kwargs):
            print("MADE", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
            return real(self, *args, **kwargs)
        Array.transaction = stop
        db = tesseradb.connect({str(path)!r})
        db.load({str(source)!r}, into="half")
    """)
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "MADE"
        with tesseradb.connect(path, read_only=True) as db:
            assert db.arrays() == ["kept"]  # the half-made array is not seen
            assert "half" not in {o.name for o in db.info().objects}
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    with tesseradb.connect(path) as db:  # the next writer drops it
        assert db.arrays() == ["kept"]
        report = db.check()
        assert report.ok, report
        assert not (path / "arrays" / "half").exists()
        loaded = db.load(str(source), into="half")  # the name is free again
        assert loaded.created
        np.testing.assert_array_equal(db.array("half")[:, :][loaded_attr(db)], np.load(source))


def loaded_attr(db: tesseradb.Database) -> str:
    return db.array("half").schema.attrs[0].name


def test_a_failed_load_leaves_no_object_and_a_good_one_is_seen_by_readers(tmp_path: Path) -> None:
    path = tmp_path / "db.tdb"
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text('{"a": 1}\n{"a": 2}\n')
    bad.write_text('{"a": 1}\n{"a": \n')
    with tesseradb.connect(path) as db:
        try:
            db.load(str(bad), into="c")
        except tesseradb.TesseraError:
            pass
        else:
            raise AssertionError("a broken JSON line was loaded")
        assert db.collections() == []
        db.load(str(good), into="c")
        with tesseradb.connect(path, read_only=True) as reader:
            assert reader.collection("c").count() == 2
