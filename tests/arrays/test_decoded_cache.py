"""Reads of a few chunks keep the chunks they decode (``arrays/_decode.py``): what such
a read gives equals what the direct decode gives and what was written, after writes
(a new snapshot), and over chunks never written (the fill value)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.arrays import _decode

SHAPE = (12, 10)
CHUNKS = (5, 4)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with tesseradb.connect(tmp_path_factory.mktemp("decoded") / "db") as database:
        yield database


def _boxes() -> st.SearchStrategy[tuple[slice, slice]]:
    def axis(n: int) -> st.SearchStrategy[slice]:
        return st.tuples(st.integers(0, n - 1), st.integers(1, n)).map(
            lambda ab: slice(min(ab[0], ab[1] - 1), max(ab[0] + 1, ab[1]))
        )

    return st.tuples(axis(SHAPE[0]), axis(SHAPE[1]))


_count = iter(range(10**6))


@settings(max_examples=40, deadline=None)
@given(
    writes=st.lists(
        st.tuples(_boxes(), st.integers(-(2**40), 2**40), st.floats(width=32)),
        max_size=4,
    ),
    reads=st.lists(_boxes(), min_size=1, max_size=6),
)
def test_kept_chunks_answer_what_the_model_holds(
    db: tesseradb.Database,
    writes: list[tuple[tuple[slice, slice], int, float]],
    reads: list[tuple[slice, slice]],
) -> None:
    name = f"a{next(_count)}"
    array = db.create_array(
        name,
        [
            {"name": "i", "end": SHAPE[0], "chunk": CHUNKS[0]},
            {"name": "j", "end": SHAPE[1], "chunk": CHUNKS[1]},
        ],
        {"n": "int64", "f": "float32"},
    )
    model_n = np.zeros(SHAPE, dtype=np.int64)
    model_f = np.full(SHAPE, np.nan, dtype=np.float32)
    fill_f = np.asarray(array[0:1, 0:1]["f"])[0, 0]
    model_f[:] = fill_f
    for box, n, f in writes:
        array[box] = {"n": np.full(model_n[box].shape, n), "f": np.full(model_f[box].shape, f)}
        model_n[box] = n
        model_f[box] = np.float32(f)
        for read in reads:  # twice: the second answered from the kept chunks
            for _ in range(2):
                got = array[read]
                np.testing.assert_array_equal(got["n"], model_n[read])
                np.testing.assert_array_equal(got["f"], model_f[read])
    with pytest.MonkeyPatch.context() as patch:  # the direct decode gives the same
        patch.setattr(_decode, "DECODED_READ_CHUNKS", 0)
        for read in reads:
            np.testing.assert_array_equal(array[read]["n"], model_n[read])
    db.drop(name)


def test_a_point_query_decodes_its_chunk_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tesseradb import _core

    with tesseradb.connect(tmp_path / "db") as db:
        array = db.create_array("p", [{"name": "i", "end": 4096, "chunk": 1024}], {"v": "int64"})
        array[0:4096] = {"v": np.arange(4096)}
        _decode.clear_chunk_cache()
        calls = 0
        real = _core.decode_chunks

        def counting(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            return real(*args)

        monkeypatch.setattr(_core, "decode_chunks", counting)
        for k in (5, 700, 1000, 5, 12):
            assert db.sql("SELECT v FROM p WHERE i = ?", [k]).fetchall() == [(k,)]
        assert calls == 1  # every key lies in chunk 0


def test_a_memory_limit_bounds_the_chunk_caches(tmp_path: Path) -> None:
    kept = [(c, c.budget, c.largest) for c in (_decode.PAYLOADS, _decode.DECODED)]
    try:
        with tesseradb.connect(tmp_path / "db", memory_limit="128MiB") as db:
            array = db.create_array("m", [{"name": "i", "end": 64, "chunk": 8}], {"v": "int64"})
            array[0:64] = {"v": np.arange(64)}
            assert int(array[5:6]["v"][0]) == 5
        for cache in (_decode.PAYLOADS, _decode.DECODED):
            assert cache.budget <= (128 << 20) // 8
            assert cache.largest <= cache.budget // 8
    finally:
        for cache, budget, largest in kept:
            cache.budget, cache.largest = budget, largest
