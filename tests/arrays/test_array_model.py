"""Arrays against a numpy model: random schemas, writes, triples, reads, halos, versions."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.arrays import ArrayBoundsError, ArrayDtypeError
from tesseradb.errors import ReadOnlyError

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


class Model:
    """The plain answer: dense numpy arrays plus the set of written chunks."""

    def __init__(
        self,
        shape: tuple[int, ...],
        chunks: tuple[int, ...],
        fills: dict[str, Any],
        dtypes: dict[str, str],
    ) -> None:
        self.data = {k: np.full(shape, fills[k], dtype=dtypes[k]) for k in fills}
        self.chunks = chunks
        self.written: set[tuple[int, ...]] = set()

    def mark(self, lo: tuple[int, ...], hi: tuple[int, ...]) -> None:
        ranges = [
            range(a // c, (b - 1) // c + 1) for a, b, c in zip(lo, hi, self.chunks, strict=True)
        ]
        self.written |= set(itertools.product(*ranges))


@st.composite
def schemas(draw: Any) -> dict[str, Any]:
    ndim = draw(st.integers(1, 3))
    dims = []
    for i in range(ndim):
        length = draw(st.integers(1, 12))
        dims.append(
            {
                "name": f"d{i}",
                "start": draw(st.integers(-5, 5)),
                "length": length,
                "chunk": draw(st.integers(1, 5)),
            }
        )
    attrs = draw(
        st.lists(
            st.sampled_from(["int8", "int32", "uint16", "float32", "float64", "bool"]),
            min_size=1,
            max_size=3,
        )
    )
    return {
        "dims": dims,
        "attrs": attrs,
        "origin": [draw(st.integers(-100, 100)) for _ in range(ndim)],
        # zstd and none are read by the Rust chunk decoder, blosc by zarr-python
        "codec": draw(st.sampled_from(["zstd", "none", "blosc"])),
    }


def _create(db: tesseradb.Database, spec: dict[str, Any]) -> tuple[Any, Model]:
    dims = [
        {
            "name": d["name"],
            "start": d["start"],
            "end": d["start"] + d["length"],
            "chunk": d["chunk"],
        }
        for d in spec["dims"]
    ]
    attrs = [
        {"name": f"a{i}", "dtype": t, "fill": 1 if t != "bool" else True}
        for i, t in enumerate(spec["attrs"])
    ]
    arr = db.create_array("m", dims, attrs, origin=spec["origin"], codec=spec["codec"])
    shape = tuple(d["length"] for d in spec["dims"])
    model = Model(
        shape,
        tuple(d["chunk"] for d in spec["dims"]),
        {a["name"]: a["fill"] for a in attrs},
        {a["name"]: a["dtype"] for a in attrs},
    )
    return arr, model


def _random_values(rng: np.random.Generator, dtype: str, shape: Any) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is not None:
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
    return (rng.standard_normal(shape) * 100).astype(dtype)


def _random_box(
    rng: np.random.Generator, shape: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lo, hi = [], []
    for n in shape:
        a = int(rng.integers(0, n))
        b = int(rng.integers(a + 1, n + 1))
        lo.append(a)
        hi.append(b)
    return tuple(lo), tuple(hi)


@SETTINGS
@given(spec=schemas(), seed=st.integers(0, 2**32 - 1))
def test_writes_triples_and_reads_match_numpy(
    tmp_path_factory: Any, spec: dict[str, Any], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    with tesseradb.connect(tmp_path_factory.mktemp("db") / "a.tdb") as db:
        arr, model = _create(db, spec)
        starts = [d["start"] for d in spec["dims"]]
        shape = tuple(d["length"] for d in spec["dims"])
        for step in range(4):
            lo, hi = _random_box(rng, shape)
            names = list(model.data)
            if step % 2 == 0:
                chosen = names[: 1 + int(rng.integers(0, len(names)))]
                values = {
                    k: _random_values(
                        rng,
                        str(model.data[k].dtype),
                        tuple(b - a for a, b in zip(lo, hi, strict=True)),
                    )
                    for k in chosen
                }
                key = tuple(slice(a + s, b + s) for a, b, s in zip(lo, hi, starts, strict=True))
                arr[key] = values
                for k, v in values.items():
                    model.data[k][tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))] = v
                model.mark(lo, hi)
            else:
                n = int(rng.integers(1, 30))
                pos = np.stack([rng.integers(0, s, n) for s in shape], axis=1)
                vals = {k: _random_values(rng, str(model.data[k].dtype), n) for k in names}
                world = pos + np.asarray(starts)
                form = int(rng.integers(0, 3))
                if form == 0:  # an n x ndim matrix
                    arr.put_triples(world, vals)
                else:  # one column per dimension, int32 or int64, one of them shared
                    dtype = np.int32 if form == 1 else np.int64
                    columns: list[Any] = [world[:, d].astype(dtype) for d in range(len(shape))]
                    if len(shape) > 1:  # (all of them shared would be one cell)
                        shared = int(rng.integers(0, len(shape)))
                        pos[:, shared] = pos[0, shared]
                        columns[shared] = int(world[0, shared])
                    arr.put_triples(tuple(columns), vals)
                for k, v in vals.items():
                    model.data[k][tuple(pos.T)] = v  # numpy also keeps the last of repeated cells
                for p in pos:
                    model.mark(tuple(p), tuple(p + 1))
            # a random box reads back exactly
            lo, hi = _random_box(rng, shape)
            key = tuple(slice(a + s, b + s) for a, b, s in zip(lo, hi, starts, strict=True))
            got = arr[key]
            for k in names:
                np.testing.assert_array_equal(
                    got[k], model.data[k][tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))]
                )
        assert set(arr.written_chunks()) == model.written
        # zarr-python reads what the Rust encoder wrote (edge chunks padded as it pads them)
        session = arr._read_session()
        for k in names:
            np.testing.assert_array_equal(np.asarray(arr._zarr(session, k)[...]), model.data[k])
        # an integer index drops its axis, as in numpy
        first = tuple(starts)
        single = arr[first]
        for k in names:
            assert single[k].shape == ()
            assert single[k] == model.data[k][(0,) * len(shape)]
        # every write was a version: 1 (create) + 4 writes
        assert len(arr.versions()) == 5


@SETTINGS
@given(spec=schemas(), seed=st.integers(0, 2**32 - 1), width=st.integers(0, 3))
def test_halos_match_numpy_at_edges_and_corners(
    tmp_path_factory: Any, spec: dict[str, Any], seed: int, width: int
) -> None:
    rng = np.random.default_rng(seed)
    with tesseradb.connect(tmp_path_factory.mktemp("db") / "a.tdb") as db:
        arr, model = _create(db, spec)
        shape = tuple(d["length"] for d in spec["dims"])
        starts = [d["start"] for d in spec["dims"]]
        values = {k: _random_values(rng, str(v.dtype), shape) for k, v in model.data.items()}
        arr[...] = values
        seen = set()
        for view in arr.chunks(overlap=width):
            seen.add(view.coords)
            outer = tuple(
                slice(s.start - st_, s.stop - st_)
                for s, st_ in zip(view.outer, starts, strict=True)
            )
            core = tuple(
                slice(s.start - st_, s.stop - st_) for s, st_ in zip(view.core, starts, strict=True)
            )
            for axis, (o, c, n) in enumerate(zip(outer, core, shape, strict=True)):
                assert o.start == max(0, c.start - width), axis
                assert o.stop == min(n, c.stop + width), axis
            for k, v in values.items():
                np.testing.assert_array_equal(view.data[k], v[outer])
                np.testing.assert_array_equal(view.core_data()[k], v[core])
            assert view.core_mask().sum() == np.prod([c.stop - c.start for c in core])
        assert seen == model.written | set(
            itertools.product(
                *[range(-(-n // d["chunk"])) for n, d in zip(shape, spec["dims"], strict=True)]
            )
        )
        # map_chunks sees the same chunks, in parallel, results in chunk order
        sums = arr.map_chunks(
            lambda v: (v.coords, int(v.core_mask().sum())), overlap=width, workers=3
        )
        assert [c for c, _ in sums] == sorted(seen)
        assert sum(n for _, n in sums) == int(np.prod(shape))


def test_unbounded_dimension_grows_by_appending(db: tesseradb.Database) -> None:
    arr = db.create_array(
        "log",
        [{"name": "t", "end": None, "chunk": 4}, {"name": "x", "end": 3, "chunk": 3}],
        {"v": "int64"},
    )
    assert arr.shape == (0, 3)
    for t in range(10):
        arr[t, :] = np.full(3, t)
    assert arr.shape == (10, 3)
    np.testing.assert_array_equal(arr[:, 0]["v"], np.arange(10))
    arr.put_triples(np.array([[20, 1]]), np.array([7]))
    assert arr.shape == (21, 3)
    with pytest.raises(ArrayBoundsError, match="outside"):
        arr[22, 0]  # reads stop at the current end


def test_versions_and_time_travel(db: tesseradb.Database) -> None:
    import datetime as dt

    arr = db.create_array("v", [{"name": "x", "end": 4, "chunk": 2}], {"a": "int32"})
    arr[0:4] = np.array([1, 1, 1, 1])
    first = arr.versions()[0]
    arr[0:2] = np.array([2, 2])
    versions = arr.versions()
    assert [v.message for v in versions][:2] == ["write", "write"]
    old = db.array("v", version=first.id)
    np.testing.assert_array_equal(old[:]["a"], [1, 1, 1, 1])
    np.testing.assert_array_equal(arr[:]["a"], [2, 2, 1, 1])
    past = db.array("v", as_of=first.time + dt.timedelta(microseconds=1))
    np.testing.assert_array_equal(past[:]["a"], [1, 1, 1, 1])
    with pytest.raises(ReadOnlyError, match="past version"):
        old[0] = np.int32(5)
    np.testing.assert_array_equal(db.array("v", version=first.id)[:]["a"], [1, 1, 1, 1])


def test_a_transaction_commits_once_and_a_failed_one_keeps_nothing(db: tesseradb.Database) -> None:
    arr = db.create_array(
        "t", [{"name": "x", "end": 10, "chunk": 3}], {"a": "int32", "b": "float64"}
    )
    before = len(arr.versions())
    with arr.transaction("two writes"):
        arr[0:5] = {"a": np.arange(5)}
        arr.put_triples(np.array([[9]]), {"b": np.array([0.5])})
        assert arr[9]["b"] == 0.5  # the transaction reads its own writes
    assert len(arr.versions()) == before + 1
    assert arr.versions()[0].message == "two writes"
    with pytest.raises(ArrayDtypeError), arr.transaction():
        arr[5:10] = {"a": np.arange(5)}
        arr[0:2] = {"a": np.array([1.5, 2.5])}  # lossy: the whole transaction goes
    assert len(arr.versions()) == before + 1
    np.testing.assert_array_equal(arr[:]["a"], [0, 1, 2, 3, 4, 0, 0, 0, 0, 0])


def test_xarray_reads_the_same_values_with_world_coordinates(db: tesseradb.Database) -> None:
    import icechunk
    import xarray as xr

    arr = db.create_array(
        "img",
        [{"name": "y", "end": 6, "chunk": 4}, {"name": "x", "start": 10, "end": 15, "chunk": 4}],
        {"v": "float32"},
        origin=(100, 200),
    )
    values = np.arange(30, dtype=np.float32).reshape(6, 5)
    arr[...] = values
    ds = arr.to_xarray()
    np.testing.assert_array_equal(ds["v"].values, values)
    assert list(ds["y"].values) == list(range(100, 106))
    assert list(ds["x"].values) == list(range(210, 215))
    # without TesseraDB: Icechunk + xarray open the stored group directly
    storage = icechunk.local_filesystem_storage(str(Path(db.path) / "arrays" / "img" / "repo"))
    session = icechunk.Repository.open(storage).readonly_session(branch="main")
    direct = xr.open_zarr(session.store, consolidated=False)
    np.testing.assert_array_equal(direct["v"].values, values)
    assert direct["v"].dims == ("y", "x")


def test_reads_survive_reopening_read_only(tmp_path: Path) -> None:
    path = tmp_path / "a.tdb"
    with tesseradb.connect(path) as db:
        arr = db.create_array(
            "a", [{"name": "x", "end": 8, "chunk": 3}], {"v": {"dtype": "int16", "fill": -1}}
        )
        arr[2:5] = np.array([5, 6, 7])
    with tesseradb.connect(path, read_only=True) as db:
        arr = db.array("a")
        np.testing.assert_array_equal(arr[:]["v"], [-1, -1, 5, 6, 7, -1, -1, -1])
        with pytest.raises(ReadOnlyError):
            arr[0] = np.int16(1)
        assert db.array("a").schema.attribute("v").fill == -1


@pytest.mark.parametrize("codec", ["zstd", "none", "blosc"])
def test_whole_chunks_and_triples_are_encoded_in_rust(
    db: tesseradb.Database, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    """A write's whole chunks go through the Rust encoder (zstd and none), a partial chunk
    through zarr-python's read-patch-write, triples through the Rust scatter kernel; blosc
    is zarr-python's alone."""
    from tesseradb import _core

    encoded: list[int] = []
    encode = _core.encode_chunks
    monkeypatch.setattr(_core, "encode_chunks", lambda *a: encoded.append(len(a[-1])) or encode(*a))
    arr = db.create_array(
        "e",
        [{"name": "y", "end": 10, "chunk": 4}, {"name": "x", "end": 9, "chunk": 4}],
        {"v": {"dtype": "int16", "fill": -1}},
        codec=codec,
    )
    values = np.arange(90, dtype=np.int16).reshape(10, 9)
    arr[...] = values
    arr[1:3, 1:3] = np.zeros((2, 2), dtype=np.int16)  # inside one chunk: patched
    values[1:3, 1:3] = 0
    np.testing.assert_array_equal(arr[...]["v"], values)
    assert encoded == ([] if codec == "blosc" else [9])  # 3 x 3 chunks, edges included
    # triples: bucketed, patched and encoded by the Rust kernel (zstd and none)
    scattered: list[int] = []
    bucket = _core.TripleCells
    monkeypatch.setattr(
        _core, "TripleCells", lambda *a: scattered.append(len(a[0][0])) or bucket(*a)
    )
    arr.put_triples(np.array([[0, 0], [9, 8], [0, 0]]), {"v": np.array([5, 6, 7])})
    values[0, 0], values[9, 8] = 7, 6  # the last of a repeated cell wins
    np.testing.assert_array_equal(arr[...]["v"], values)
    assert scattered == ([] if codec == "blosc" else [3])


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lo=st.tuples(st.integers(0, 300), st.integers(0, 300)),
    size=st.tuples(st.integers(1, 400), st.integers(1, 400)),
    in_transaction=st.booleans(),
)
def test_several_attributes_read_side_by_side_match_numpy(
    db: tesseradb.Database, lo: tuple[int, int], size: tuple[int, int], in_transaction: bool
) -> None:
    """Boxes big enough that attributes are read two at a time (one's fetch beside another's
    decode) give each attribute its own cells, inside a transaction its uncommitted ones."""
    from tesseradb.arrays import _handles

    if "wide" not in db.arrays():
        wide = db.create_array(
            "wide",
            [{"name": "y", "end": 700, "chunk": 128}, {"name": "x", "end": 700, "chunk": 96}],
            {"a": "float64", "b": "int32", "c": "uint8"},
        )
        rng = np.random.default_rng(3)
        wide[0:700, 0:700] = {
            "a": rng.normal(size=(700, 700)),
            "b": rng.integers(-(2**31), 2**31, (700, 700), dtype=np.int64).astype(np.int32),
            "c": rng.integers(0, 256, (700, 700)).astype(np.uint8),
        }
    wide = db.array("wide")
    before = _handles.OVERLAP_CELLS
    _handles.OVERLAP_CELLS = 1 << 60  # the model: one attribute after another
    model = wide.read((slice(0, 700), slice(0, 700)))
    ys, xs = slice(lo[0], min(700, lo[0] + size[0])), slice(lo[1], min(700, lo[1] + size[1]))
    _handles.OVERLAP_CELLS = 1  # (every read of several attributes side by side)
    try:
        if in_transaction:
            with wide.transaction():
                wide[ys, xs] = {"c": np.full((ys.stop - ys.start, xs.stop - xs.start), 7, "uint8")}
                got = wide[ys, xs]
                model["c"][ys, xs] = 7
                assert got["c"].tolist() == model["c"][ys, xs].tolist()
        got = wide[ys, xs]
    finally:
        _handles.OVERLAP_CELLS = before
    for name in ("a", "b", "c"):
        np.testing.assert_array_equal(got[name], model[name][ys, xs])
