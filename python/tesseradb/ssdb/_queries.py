"""SS-DB's nine queries (papers/ssdb-benchmark.txt, II-D) over a loaded run.

Where the paper leaves a choice open, these are the choices (docs/ssdb.md):

- a slab of side U starting at X holds the cells X .. X+U-1; local slabs
  (Q1-Q3) are clipped to the image, world slabs must lie inside the world;
- Q1 and Q4 average an attribute named by the caller (the benchmark draws
  it); Q2 recooks the slab of the cycle's first image with F1' (threshold
  900) as if the slab were the whole image; Q3 regrids every attribute of the
  cycle's images 10:3 with area weighting and stores the result;
- Q5 keeps observations whose polygon (the closed ring through its
  vertices) shares a point with the slab;
- Q6 puts a D4 x D4 tile on every observation centre in the slab (cells
  c - D4/2 .. c - D4/2 + D4 - 1 on each axis) and keeps the centres whose
  tile holds more than D5 of the slab's observations;
- Q7 keeps groups whose centre (the mean of their members' centres) lies in
  the slab; Q8 groups whose trajectory (the polyline through their members'
  centres in time order) shares a point with the slab; Q9 groups one of whose
  members' polygons does;
- Q8 and Q9 return, for every member of a kept group taken by an image that
  intersects the slab, the ``pix`` values of the D6 x D6 tile centred on the
  member's centre (cells c - D6/2 .. c - D6/2 + D6 - 1), clipped to that
  image.

Q1, Q4 and Q7 are SQL through ``db.sql``; the others are Python over the
run's objects, with SQL for their index lookups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.errors import InvalidArgumentError
from tesseradb.ssdb._generate import ATTRS
from tesseradb.ssdb._params import WORLD_SIZE

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from tesseradb.ssdb._run import Run

__all__ = [
    "OBS_ATTRS",
    "QueryPoint",
    "q1",
    "q2",
    "q3",
    "q4",
    "q5",
    "q6",
    "q7",
    "q8",
    "q9",
    "query_points",
]

# the observation attributes Q4 may average (the paper's "observation attribute Oi")
OBS_ATTRS = ["pixelsum", "avgdist"]


@dataclass(frozen=True)
class QueryPoint:
    """One of the benchmark's starting points: a cycle, a local and a world corner."""

    cycle: int
    x1: int  # local slab corner (Q1-Q3)
    y1: int
    x2: int  # world slab corner (Q4-Q9)
    y2: int
    raw_attr: str  # Q1's attribute
    obs_attr: str  # Q4's attribute


def query_points(run: Run, count: int = 5, seed: int = 42) -> list[QueryPoint]:
    """``count`` starting points drawn as the paper says from ``seed``.

    Local corners are uniform over the image; world corners fall four times
    in five uniformly in the dense box, otherwise uniformly in the world.
    """
    import numpy as np

    cfg, prm = run.config, run.params
    if run.cycles_done == 0:
        raise InvalidArgumentError(
            f"SS-DB run {run.name!r} has no loaded cycle to query yet; run.load() first"
        )
    rng = np.random.default_rng([seed, 7])
    points = []
    for _ in range(count):
        cycle = int(rng.integers(0, run.cycles_done))
        x1, y1 = (int(v) for v in rng.integers(0, max(1, cfg.size - prm.u1) + 1, 2))
        if rng.random() < 0.8:
            lo = (WORLD_SIZE - cfg.dense) // 2
            x2, y2 = (int(v) for v in rng.integers(lo, lo + cfg.dense, 2))
        else:
            x2, y2 = (int(v) for v in rng.integers(0, WORLD_SIZE - prm.u2, 2))
        x2, y2 = min(x2, WORLD_SIZE - prm.u2), min(y2, WORLD_SIZE - prm.u2)
        raw_attr = ATTRS[int(rng.integers(0, len(ATTRS)))]
        obs_attr = OBS_ATTRS[int(rng.integers(0, len(OBS_ATTRS)))]
        points.append(QueryPoint(cycle, x1, y1, x2, y2, raw_attr, obs_attr))
    return points


# --- slabs ------------------------------------------------------------------------------
def _int(value: Any, what: str) -> int:
    import numbers

    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise InvalidArgumentError(f"SS-DB query: {what} must be an integer, not {value!r}")
    return int(value)


def local_slab(run: Run, x1: int, y1: int) -> tuple[int, int, int, int]:
    """(row0, row1, col0, col1) of the U1 slab at local (x1, y1), clipped to the image."""
    size, u = run.config.size, run.params.u1
    x1, y1 = _int(x1, "x1"), _int(y1, "y1")
    if not (0 <= x1 < size and 0 <= y1 < size):
        raise InvalidArgumentError(
            f"SS-DB query: local slab corner ({x1}, {y1}) is outside the {size} x {size} image"
        )
    return y1, min(size, y1 + u), x1, min(size, x1 + u)


def world_slab(x2: int, y2: int, side: int) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) inclusive of the slab of ``side`` at world (x2, y2)."""
    x2, y2 = _int(x2, "x2"), _int(y2, "y2")
    if not (x2 >= 0 and y2 >= 0 and x2 + side <= WORLD_SIZE and y2 + side <= WORLD_SIZE):
        raise InvalidArgumentError(
            f"SS-DB query: the slab of side {side} at world ({x2}, {y2}) is outside the "
            f"world 0..{WORLD_SIZE - 1}"
        )
    return x2, y2, x2 + side - 1, y2 + side - 1


def _cycle_images(run: Run, cycle: int) -> range:
    run._check_cycle(cycle)
    return run.config.images_of(cycle)


# --- raw data ---------------------------------------------------------------------------
def q1(run: Run, cycle: int, x1: int, y1: int, attr: str) -> float:
    """Average of raw attribute ``attr`` over the U1 slab of the cycle's images (SQL)."""
    if attr not in ATTRS:
        raise InvalidArgumentError(f"SS-DB Q1: unknown attribute {attr!r}; one of {ATTRS}")
    images = _cycle_images(run, cycle)
    r0, r1, c0, c1 = local_slab(run, x1, y1)
    return float(
        run.db.sql(
            f"SELECT avg({attr}) FROM {run.name}_raw WHERE image BETWEEN ? AND ? "
            "AND y BETWEEN ? AND ? AND x BETWEEN ? AND ?",
            [images[0], images[-1], r0, r1 - 1, c0, c1 - 1],
        ).scalar()
    )


def q2(run: Run, cycle: int, x1: int, y1: int) -> pa.Table:
    """F1' (threshold 900) over the U1 slab of the cycle's first image."""
    from tesseradb.ssdb._cook import observations_table

    image = _cycle_images(run, cycle)[0]
    columns = run.cook(image, threshold=900, box=local_slab(run, x1, y1))
    return observations_table(columns)


def q3(run: Run, cycle: int, x1: int, y1: int) -> Any:
    """Every attribute of the cycle's images over the U1 slab regridded 10:3, stored as ``<run>_q3``."""
    images = _cycle_images(run, cycle)
    r0, r1, c0, c1 = local_slab(run, x1, y1)
    run.db.drop(f"{run.name}_q3", missing_ok=True)
    return run.raw.regrid(
        [1, "10:3", "10:3"],
        box=(slice(images[0], images[-1] + 1), slice(r0, r1), slice(c0, c1)),
        into=f"{run.name}_q3",
    )


# --- observations -----------------------------------------------------------------------
def q4(run: Run, cycle: int, x2: int, y2: int, attr: str) -> float | None:
    """Average of observation attribute ``attr`` over the cycle's centres in the U2 slab (SQL)."""
    if attr not in OBS_ATTRS:
        raise InvalidArgumentError(f"SS-DB Q4: unknown attribute {attr!r}; one of {OBS_ATTRS}")
    run._check_cycle(cycle)
    x0, y0, xe, ye = world_slab(x2, y2, run.params.u2)
    value = run.db.sql(
        f"SELECT avg({attr}) FROM {run.name}_obs{cycle} "
        "WHERE x BETWEEN ? AND ? AND y BETWEEN ? AND ?",
        [x0, xe, y0, ye],
    ).scalar()
    return None if value is None else float(value)


def _overlapping(polygons: pa.Table, box: tuple[int, int, int, int]) -> np.ndarray:
    """Which of the polygons (a table with a ``polygon`` column) share a point with ``box``."""
    import numpy as np
    import pyarrow as pa

    from tesseradb import _core

    column = polygons.column("polygon").combine_chunks()
    if len(column) == 0:
        return np.zeros(0, dtype=bool)
    offsets = np.asarray(column.offsets, dtype=np.int64)
    points = column.values
    xs = np.asarray(pa.compute.struct_field(points, "x"), dtype=np.int64)
    ys = np.asarray(pa.compute.struct_field(points, "y"), dtype=np.int64)
    if offsets[0]:
        xs, ys, offsets = xs[offsets[0] :], ys[offsets[0] :], offsets - offsets[0]
    return np.asarray(
        _core.ssdb_polygons_overlap_box(offsets, xs, ys, (box[0], box[1]), (box[2], box[3]))
    )


def q5(run: Run, cycle: int, x2: int, y2: int) -> pa.Table:
    """Observations of the cycle whose polygons overlap the U2 slab: obs_id, polygon.

    The centre index narrows the search (a polygon is never wider than D1,
    so its centre lies within D1 of any slab it touches); the polygons are
    then tested exactly.
    """
    run._check_cycle(cycle)
    box = world_slab(x2, y2, run.params.u2)
    d = run.params.d1
    n = run.name
    candidates = run.db.sql(
        f"SELECT p.obs_id, p.polygon FROM {n}_polygons p JOIN ("
        f"SELECT obs_id FROM {n}_obs{cycle} WHERE x BETWEEN ? AND ? AND y BETWEEN ? AND ? "
        "AND xmin <= ? AND xmax >= ? AND ymin <= ? AND ymax >= ?) c USING (obs_id) "
        "WHERE p.cycle = ? ORDER BY p.obs_id",
        [box[0] - d, box[2] + d, box[1] - d, box[3] + d, box[2], box[0], box[3], box[1], cycle],
    ).arrow()
    return candidates.filter(_overlapping(candidates, box))


def q6(run: Run, cycle: int, x2: int, y2: int) -> pa.Table:
    """Centres of the cycle in the U2 slab whose D4 tile holds more than D5 of them: x, y, count."""
    import numpy as np
    import pyarrow as pa

    from tesseradb import _core

    run._check_cycle(cycle)
    x0, y0, xe, ye = world_slab(x2, y2, run.params.u2)
    centres = run.db.sql(
        f"SELECT x, y FROM {run.name}_obs{cycle} WHERE x BETWEEN ? AND ? AND y BETWEEN ? AND ?",
        [x0, xe, y0, ye],
    ).numpy()
    xs = np.ascontiguousarray(centres["x"], np.int64)
    ys = np.ascontiguousarray(centres["y"], np.int64)
    d4 = run.params.d4
    counts = np.asarray(_core.ssdb_density_counts(xs, ys, -(d4 // 2), d4 - d4 // 2 - 1))
    dense = counts > run.params.d5
    order = np.lexsort((xs[dense], ys[dense]))
    return pa.table({"x": xs[dense][order], "y": ys[dense][order], "count": counts[dense][order]})


# --- groups -----------------------------------------------------------------------------
def q7(run: Run, x2: int, y2: int) -> pa.Table:
    """Groups whose centre lies in the U2 slab: group_id, members, cx, cy (SQL)."""
    x0, y0, xe, ye = world_slab(x2, y2, run.params.u2)
    return run.db.sql(
        f"SELECT group_id, members, cx, cy FROM {run.name}_groups "
        "WHERE cx >= ? AND cx < ? AND cy >= ? AND cy < ? ORDER BY group_id",
        [x0, xe + 1, y0, ye + 1],
    ).arrow()


def _trajectory_groups(run: Run, box: tuple[int, int, int, int]) -> np.ndarray:
    """Groups whose polyline of member centres (time order) shares a point with ``box``."""
    import numpy as np

    from tesseradb import _core

    n = run.name
    members = run.db.sql(
        f"SELECT m.group_id, m.x, m.y FROM {n}_members m JOIN (SELECT group_id FROM {n}_groups "
        "WHERE xmin <= ? AND xmax >= ? AND ymin <= ? AND ymax >= ?) g USING (group_id) "
        "ORDER BY m.group_id, m.image, m.obs_id",
        [box[2], box[0], box[3], box[1]],
    ).numpy()
    group = np.asarray(members["group_id"], np.int64)
    if len(group) == 0:
        return group
    xs, ys = np.asarray(members["x"], np.int64), np.asarray(members["y"], np.int64)
    # each segment between consecutive members of a group as a two-vertex ring;
    # a group of one member as its single point
    last = np.r_[group[1:] != group[:-1], True]
    first = np.r_[True, group[1:] != group[:-1]]
    single = first & last
    seg = ~last  # a segment starts at every member but a group's last
    starts = np.flatnonzero(seg)
    alone = np.flatnonzero(single)
    px = np.concatenate([np.stack([xs[starts], xs[starts + 1]], 1).ravel(), xs[alone]])
    py = np.concatenate([np.stack([ys[starts], ys[starts + 1]], 1).ravel(), ys[alone]])
    lengths = np.r_[np.full(len(starts), 2), np.ones(len(alone), np.int64)]
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    hit = np.asarray(
        _core.ssdb_polygons_overlap_box(offsets, px, py, (box[0], box[1]), (box[2], box[3]))
    )
    owners = np.concatenate([group[starts], group[alone]])
    return np.unique(owners[hit])


def _polygon_groups(run: Run, box: tuple[int, int, int, int]) -> np.ndarray:
    """Groups one of whose members' polygons shares a point with ``box``."""
    import numpy as np

    n = run.name
    candidates = run.db.sql(
        f"SELECT m.group_id, p.polygon FROM {n}_members m JOIN {n}_polygons p USING (obs_id) "
        f"WHERE m.xmin <= ? AND m.xmax >= ? AND m.ymin <= ? AND m.ymax >= ? "
        f"AND m.group_id IN (SELECT group_id FROM {n}_groups "
        "WHERE pxmin <= ? AND pxmax >= ? AND pymin <= ? AND pymax >= ?)",
        [box[2], box[0], box[3], box[1]] * 2,
    ).arrow()
    hit = _overlapping(candidates, box)
    return np.unique(np.asarray(candidates.column("group_id"), np.int64)[hit])


def _tiles(run: Run, groups: np.ndarray, box: tuple[int, int, int, int]) -> pa.Table:
    """The D6 tiles around every member of ``groups`` taken by an image meeting ``box``."""
    import numpy as np
    import pyarrow as pa

    n, d6, size = run.name, run.params.d6, run.config.size
    run.db.register(f"{n}_chosen", pa.table({"group_id": groups}))
    try:
        rows = run.db.sql(
            f"SELECT m.group_id, m.obs_id, m.image, m.x, m.y, i.x0, i.y0 FROM {n}_members m "
            f"JOIN {n}_chosen USING (group_id) JOIN {n}_images i USING (image) "
            "WHERE i.x0 <= ? AND i.x0 + i.size > ? AND i.y0 <= ? AND i.y0 + i.size > ? "
            "ORDER BY m.group_id, m.image, m.obs_id",
            [box[2], box[0], box[3], box[1]],
        ).numpy()
    finally:
        run.db.unregister(f"{n}_chosen")
    out: dict[str, list[Any]] = {k: [] for k in ("group_id", "obs_id", "image", "tx", "ty")}
    out.update(width=[], height=[], pix=[])
    raw = run.raw
    images = np.asarray(rows["image"], np.int64)
    for image in np.unique(images):
        pick = np.flatnonzero(images == image)
        x0, y0 = int(rows["x0"][pick[0]]), int(rows["y0"][pick[0]])
        cols0 = np.clip(np.asarray(rows["x"][pick], np.int64) - x0 - d6 // 2, 0, size)
        rows0 = np.clip(np.asarray(rows["y"][pick], np.int64) - y0 - d6 // 2, 0, size)
        cols1 = np.clip(np.asarray(rows["x"][pick], np.int64) - x0 - d6 // 2 + d6, 0, size)
        rows1 = np.clip(np.asarray(rows["y"][pick], np.int64) - y0 - d6 // 2 + d6, 0, size)
        keep = (cols1 > cols0) & (rows1 > rows0)
        if not keep.any():
            continue
        top, bottom = int(rows0[keep].min()), int(rows1[keep].max())
        left, right = int(cols0[keep].min()), int(cols1[keep].max())
        pix = raw.read(
            (slice(int(image), int(image) + 1), slice(top, bottom), slice(left, right)), "pix"
        )["pix"][0]
        for k in np.flatnonzero(keep):
            i = pick[k]
            tile = pix[rows0[k] - top : rows1[k] - top, cols0[k] - left : cols1[k] - left]
            out["group_id"].append(int(rows["group_id"][i]))
            out["obs_id"].append(int(rows["obs_id"][i]))
            out["image"].append(int(image))
            out["tx"].append(x0 + int(cols0[k]))
            out["ty"].append(y0 + int(rows0[k]))
            out["width"].append(tile.shape[1])
            out["height"].append(tile.shape[0])
            out["pix"].append(tile.ravel())
    table = pa.table(
        {
            "group_id": pa.array(out["group_id"], pa.int64()),
            "obs_id": pa.array(out["obs_id"], pa.int64()),
            "image": pa.array(out["image"], pa.int32()),
            "tx": pa.array(out["tx"], pa.int64()),
            "ty": pa.array(out["ty"], pa.int64()),
            "width": pa.array(out["width"], pa.int32()),
            "height": pa.array(out["height"], pa.int32()),
            "pix": pa.array(out["pix"], pa.list_(pa.int32())),
        }
    )
    return table.sort_by([("group_id", "ascending"), ("obs_id", "ascending")])


def q8(run: Run, x2: int, y2: int) -> pa.Table:
    """Raw D6 tiles around the members of groups whose trajectory meets the U3 slab."""
    box = world_slab(x2, y2, run.params.u3)
    return _tiles(run, _trajectory_groups(run, box), box)


def q9(run: Run, x2: int, y2: int) -> pa.Table:
    """Raw D6 tiles around the members of groups one of whose polygons meets the U3 slab."""
    box = world_slab(x2, y2, run.params.u3)
    return _tiles(run, _polygon_groups(run, box), box)
