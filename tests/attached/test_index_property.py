"""Indexed scans against a plain h5py read filtered in numpy, for random files and predicates."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.attached import Binning, BitmapIndex
from tesseradb.sql.predicate import ColumnDomain, Interval, Predicate, RangeSet

NUMERIC = ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64", "float32", "float64"]


def extremes(dtype: str) -> list[Any]:
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return [int(info.min), int(info.max), 0, 1]
    info = np.finfo(dtype)
    return [float(info.min), float(info.max), 0.0, -0.0, math.inf, -math.inf, math.nan, 1.5]


@st.composite
def columns(draw: st.DrawFn) -> tuple[str, np.ndarray]:
    dtype = draw(st.sampled_from([*NUMERIC, "S4"]))
    n = draw(st.integers(0, 300))
    if dtype == "S4":
        pool = [b"", b"a", b"ab", b"b", b"zz", b"abcd"]
        return dtype, np.array(
            draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)), dtype="S4"
        )
    small = (
        st.integers(-5, 5)
        if dtype.startswith("int")
        else st.integers(0, 9)
        if dtype.startswith("uint")
        else st.floats(-5, 5, width=32)
    )
    values = draw(
        st.lists(
            st.one_of(small, small, small, st.sampled_from(extremes(dtype))), min_size=n, max_size=n
        )
    )
    with np.errstate(over="ignore", invalid="ignore"):
        return dtype, np.array(values, dtype=dtype) if values else np.empty(0, dtype=dtype)


@st.composite
def domains(draw: st.DrawFn, values: np.ndarray) -> ColumnDomain:
    if values.dtype.kind == "S":
        pool = ["", "a", "ab", "abc", "b", "zz", "zzz"]
    else:
        pool = [v.item() for v in values[:20]] + [0, 1, -1, 2.5, 1e30, -1e30]
        pool = [v for v in pool if not (isinstance(v, float) and math.isnan(v))]
        if values.dtype.kind in "iu":
            pool = [
                int(v) if isinstance(v, int) or float(v).is_integer() else v
                for v in pool
                if abs(v) < 2**63
            ]
    bound = st.one_of(st.none(), st.sampled_from(pool))
    if draw(st.integers(0, 4)) == 0:
        keys = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=80))
        if values.dtype.kind == "f":
            keys = [float(k) for k in keys]
        elif values.dtype.kind in "iu":
            keys = [int(k) for k in keys if float(k).is_integer()] or [0]
        return Predicate.isin("v", keys).domain("v")  # type: ignore[return-value]
    intervals = [
        Interval(draw(bound), draw(bound), draw(st.booleans()), draw(st.booleans()))
        for _ in range(draw(st.integers(1, 3)))
    ]
    return ColumnDomain.values(RangeSet.of(intervals))


binnings = st.one_of(
    st.just(Binning()),
    st.just(Binning(kind="exact")),
    st.integers(1, 20).map(lambda k: Binning(kind="count", count=k)),
    st.integers(1, 3).map(lambda d: Binning(kind="precision", precision=d)),
    st.lists(st.floats(-6, 6), min_size=1, max_size=5).map(
        lambda e: Binning(kind="edges", edges=tuple(sorted(e)))
    ),
)
storages = st.sampled_from(["contiguous", "chunked", "gzip", "compound"])


def write(path: Path, values: np.ndarray, storage: str, chunk: int) -> None:
    ids = np.arange(len(values), dtype=np.int64)
    with h5py.File(path, "w") as f:
        if storage == "compound":
            rec = np.zeros(len(values), dtype=[("id", "<i8"), ("v", values.dtype)])
            rec["id"], rec["v"] = ids, values
            f.create_dataset(
                "t", data=rec, chunks=(chunk,) if len(values) else None, maxshape=(None,)
            )
            return
        g = f.create_group("t")
        kwargs: dict[str, Any] = {}
        if storage in ("chunked", "gzip") and len(values):
            kwargs["chunks"] = (chunk,)
            kwargs["maxshape"] = (None,)
        if storage == "gzip" and len(values):
            kwargs.update(compression="gzip", shuffle=True)
        g.create_dataset("id", data=ids, **kwargs)
        g.create_dataset("v", data=values, **kwargs)


def expected_ids(values: np.ndarray, domain: ColumnDomain) -> list[int]:
    pred = Predicate.on("v", domain)
    decoded = [
        v.decode() if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v
        for v in values
    ]
    return [i for i, v in enumerate(decoded) if pred.matches({"v": v})]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    column=columns(),
    storage=storages,
    chunk=st.integers(1, 64),
    binning=binnings,
    encoding=st.sampled_from(["equality", "range"]),
)
def test_indexed_scan_equals_plain_read(
    data: st.DataObject,
    column: tuple[str, np.ndarray],
    storage: str,
    chunk: int,
    binning: Binning,
    encoding: str,
) -> None:
    dtype, values = column
    if dtype == "S4" and binning.kind in ("count", "precision", "edges"):
        binning = Binning(kind="exact")  # string bins are exact
    domain = data.draw(domains(values))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.h5"
        write(path, values, storage, chunk)
        with tesseradb.connect(Path(tmp) / "db") as db:
            att = db.attach(
                path,
                name="f",
                threads=data.draw(st.sampled_from([1, 2])),
                batch_bytes=data.draw(st.sampled_from([64, 1 << 20])),
            )
            if not len(values):
                return
            table = att.table("t")
            pred = Predicate.on("v", domain)
            plain = table.scan(["id", "v"], pred).read_all()
            db.create_index("f.t", "v", **_binning_args(binning), encoding=encoding)
            index = att.index("t", "v", 0)
            assert index is not None
            sure, maybe = index.lookup(domain)
            wanted = expected_ids(values, domain)
            assert set(sure) <= set(wanted) <= set(sure) | set(maybe)
            counted = table.count(pred)
            assert counted is None or counted == len(
                wanted
            )  # settled by the bins, or left to the scan
            indexed = table.scan(["id", "v"], pred).read_all()
            for scanned in (plain, indexed):
                # the scan may return more rows (a superset); the exact filter is the reference one
                rows = zip(
                    scanned.column("id").to_pylist(), scanned.column("v").to_pylist(), strict=True
                )
                rows = list(rows)
                assert sorted(i for i, v in rows if pred.matches({"v": v})) == wanted
                # and every row read holds its own values (a lookup reads a chunk's span)
                stored = table.scan(["id", "v"], None).read_all().column("v").to_pylist()
                assert all(v == stored[i] or v != v for i, v in rows)


def _binning_args(binning: Binning) -> dict[str, Any]:
    if binning.kind == "auto":
        return {}
    if binning.kind == "exact":
        return {"exact": True}
    if binning.kind == "count":
        return {"count": binning.count}
    if binning.kind == "precision":
        return {"precision": binning.precision}
    return {"edges": list(binning.edges)}


def test_bins_at_the_extremes() -> None:
    values = np.array(
        [np.nan, -np.inf, np.finfo("f8").min, -0.0, 0.0, np.finfo("f8").max, np.inf, np.nan]
    )
    index = BitmapIndex.build("v", values, Binning(kind="count", count=3))
    every = ColumnDomain.values(RangeSet.everything())
    sure, maybe = index.lookup(every)
    assert sorted(sure | maybe) == list(range(8))  # NaN included: it sorts above +inf
    above = ColumnDomain.values(RangeSet.of([Interval(math.inf, None)]))
    sure, maybe = index.lookup(above)
    assert {0, 6, 7} <= set(sure | maybe) and not {1, 2, 3, 4, 5} & set(sure)
    zero = ColumnDomain.values(RangeSet.points([0.0]))
    assert {3, 4} <= set(index.lookup(zero)[0] | index.lookup(zero)[1])
    assert index.count(ColumnDomain.values(RangeSet.of([Interval(None, -math.inf)])))[1] >= 1


@pytest.mark.parametrize("encoding", ["equality", "range"])
def test_sidecar_round_trip_and_corruption(tmp_path: Path, encoding: str) -> None:
    from tesseradb.attached._bitmap import IndexFileError

    values = np.random.default_rng(1).normal(size=5000)
    index = BitmapIndex.build(
        "v", values, Binning(kind="precision", precision=2), encoding, {"x": 1}
    )
    path = tmp_path / "v.bmi"
    index.save(path)
    loaded = BitmapIndex.load(path)
    dom = ColumnDomain.values(RangeSet.of([Interval(-0.5, 0.75)]))
    assert loaded.lookup(dom) == index.lookup(dom) and loaded.identity == {"x": 1}
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFileError, match="checksum"):
        BitmapIndex.load(path)
    path.write_bytes(b"something else entirely, long enough to have a header......")
    with pytest.raises(IndexFileError, match="not a TesseraDB bitmap index"):
        BitmapIndex.load(path)


def test_a_column_of_only_nan_has_no_bins_and_a_nan_bitmap() -> None:
    index = BitmapIndex.build("v", np.array([np.nan, np.nan], dtype=np.float32))
    assert index.bins == 0 and sorted(index.nan) == [0, 1]
    above = ColumnDomain.values(RangeSet.of([Interval(0.0, None)]))
    assert sorted(index.lookup(above)[0]) == [0, 1]  # NaN is above every value
    assert index.count(ColumnDomain.values(RangeSet.points([0.0]))) == (0, 0)
