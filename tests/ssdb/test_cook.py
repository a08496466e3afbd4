"""F1: the Rust kernel against an independent scipy cooking, and chunked against whole."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb import ssdb
from tesseradb.bench.ssdb_numpy import cook_numpy, trace_polygon
from tesseradb.errors import InvalidArgumentError, TesseraError
from tesseradb.ssdb._cook import cook_image


@st.composite
def images(draw: st.DrawFn) -> np.ndarray:
    """Sky noise with blobs of every shape: thin lines, rings, touching corners."""
    h = draw(st.integers(1, 40))
    w = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    density = draw(st.sampled_from([0.05, 0.2, 0.45, 0.6]))
    rng = np.random.default_rng(seed)
    pix = rng.integers(0, 900, (h, w))
    hot = rng.random((h, w)) < density
    pix[hot] = rng.integers(1000, 65536, int(hot.sum()))
    return pix.astype(np.int32)


def _as_columns(table: object) -> dict[str, object]:
    return {name: table.column(name).to_numpy() for name in ("x", "y", "pixelsum", "npix")}


@settings(max_examples=150, deadline=None)
@given(images(), st.integers(1, 12), st.integers(1, 60), st.integers(0, 10**8))
def test_kernel_matches_scipy_cooking(pix: np.ndarray, d1: int, d2: int, shift: int) -> None:
    origin = (shift, 10**8 - shift)
    got = ssdb.cook(pix, threshold=1000, d1=d1, d2=d2, origin=origin)
    want = cook_numpy(pix, 1000, d1, d2, origin)
    assert got.num_rows == len(want["x"])
    for name in ("x", "y", "pixelsum", "npix", "xmin", "ymin", "xmax", "ymax"):
        assert np.array_equal(got.column(name).to_numpy(), want[name]), name
    np.testing.assert_allclose(got.column("avgdist").to_numpy(), want["avgdist"], rtol=1e-12)
    polygons = [[(v["x"], v["y"]) for v in p] for p in got.column("polygon").to_pylist()]
    assert polygons == want["polygons"]
    assert got.column("obs_id").to_pylist() == list(range(got.num_rows))


def test_polygon_is_the_clockwise_boundary_trace() -> None:
    pix = np.zeros((5, 5), np.int32)
    pix[1:4, 1:4] = 2000
    pix[2, 2] = 0  # a ring: the hole is not part of the boundary walk's start
    table = ssdb.cook(pix, origin=(10, 20))
    ring = [(v["x"], v["y"]) for v in table.column("polygon")[0].as_py()]
    assert ring == [(11, 21), (12, 21), (13, 21), (13, 22), (13, 23), (12, 23), (11, 23), (11, 22)]
    assert ring == trace_polygon({(x, y) for x, y in ring})
    row = table.to_pylist()[0]
    assert (row["x"], row["y"], row["npix"], row["pixelsum"]) == (12, 22, 8, 16000)
    assert (row["xmin"], row["ymin"], row["xmax"], row["ymax"]) == (11, 21, 13, 23)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    images(),
    st.integers(1, 12),
    st.integers(3, 15),
    st.sampled_from([(0, 0), (7, 3)]),
)
def test_chunks_with_halo_cook_exactly_the_whole_image(
    tmp_path_factory: pytest.TempPathFactory,
    pix: np.ndarray,
    d1: int,
    chunk: int,
    origin: tuple[int, int],
) -> None:
    h, w = pix.shape
    path = tmp_path_factory.mktemp("halo") / "db.tdb"
    with tesseradb.connect(path) as db:
        array = db.create_array(
            "raw",
            [
                {"name": "image", "start": 0, "end": 1, "chunk": 1},
                {"name": "y", "start": 0, "end": h, "chunk": chunk},
                {"name": "x", "start": 0, "end": w, "chunk": chunk},
            ],
            {"pix": "int32"},
        )
        array.write((0, 0, 0), {"pix": pix[None]})
        parts = cook_image(array, 0, origin, 1000, d1, 60)
        whole = ssdb.cook(pix, 1000, d1, 60, origin)
        assert len(parts["x"]) == whole.num_rows
        for name in ("x", "y", "pixelsum", "npix", "xmin", "ymin", "xmax", "ymax", "avgdist"):
            # bit for bit: the same integer sums and the same float operations
            assert np.array_equal(parts[name], whole.column(name).to_numpy()), name
        offsets = whole.column("polygon").combine_chunks().offsets.to_numpy()
        assert np.array_equal(parts["poly_offsets"], offsets)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"pixels": np.zeros(5, np.int32)}, "2-D"),
        ({"pixels": np.zeros((2, 2), np.float64)}, "integers"),
        ({"pixels": np.full((2, 2), 2**40)}, "int32"),
        ({"pixels": np.zeros((2, 2), np.int32), "d1": 0}, "d1"),
        ({"pixels": np.zeros((2, 2), np.int32), "origin": (1,)}, "origin"),
        ({"pixels": np.zeros((2, 2), np.int32), "threshold": 1.5}, "threshold"),
    ],
)
def test_bad_input_is_named(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(InvalidArgumentError, match=needle) as err:
        ssdb.cook(**kwargs)
    assert isinstance(err.value, TesseraError)


def test_generated_field_has_the_papers_statistics() -> None:
    """About 23,000 observations per 7500^2 image, polygons of about 12 vertices."""
    cfg = ssdb.config("tiny")
    counts, vertices = [], []
    for image in range(cfg.images):
        at = ssdb.placement(cfg, image)
        table = ssdb.cook(ssdb.image_pixels(cfg.size, at), origin=(at.x0, at.y0))
        counts.append(table.num_rows * 7500**2 / cfg.size**2)
        vertices += [len(p) for p in table.column("polygon").to_pylist()]
    assert 18_000 < np.mean(counts) < 28_000
    assert 8 < np.mean(vertices) < 16
