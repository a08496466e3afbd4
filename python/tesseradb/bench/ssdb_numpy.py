"""SS-DB the way a scientist without a database writes it: files and numpy/scipy.

One ``.npy`` per image and attribute, cooking with ``scipy.ndimage.label``
and per-object sums by ``np.bincount``, the polygon traced in Python,
grouping with ``scipy.spatial.cKDTree``, queries as numpy code. It shares
nothing with TesseraDB but the image generator and the parameters, which
makes it the benchmark's correctness reference as well as a peer.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from tesseradb.ssdb import ATTRS, Config, LoadTimes, Params, placement, raw_image

__all__ = ["FilesRun", "cook_numpy", "trace_polygon"]

_DIRECTIONS = [(0, -1), (1, -1), (1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1)] * 2 + [(0, 0)]


def trace_polygon(pixels: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """The benchmark's polygonizer on a set of (x, y) pixels: the clockwise boundary trace."""
    start = min(pixels)
    if len(pixels) == 1:
        return [start]

    def step(loc: tuple[int, int], heading: tuple[int, int]) -> tuple[Any, Any]:
        turn = 2 if heading[0] ** 2 + heading[1] ** 2 == 2 else 1
        k = _DIRECTIONS.index(heading, turn) - turn
        while True:
            d = _DIRECTIONS[k]
            cand = (loc[0] + d[0], loc[1] + d[1])
            if cand in pixels:
                return cand, d
            k += 1

    nxt, first_heading = step(start, (-1, -1))
    heading, current, out = first_heading, start, []
    while True:
        out.append(current)
        current = nxt
        nxt, new_heading = step(current, heading)
        if len(out) > 2 + 2 * len(pixels):
            break
        heading = new_heading
        if current == start and heading == first_heading:
            break
    return out


def cook_numpy(
    pix: np.ndarray, threshold: int, d1: int, d2: int, origin: tuple[int, int]
) -> dict[str, Any]:
    """F1 with scipy: columns like the kernel's, polygons as a list of vertex lists."""
    from scipy import ndimage

    labels, count = ndimage.label(pix >= threshold, structure=np.ones((3, 3), bool))
    flat = labels.ravel()
    where = np.flatnonzero(flat)
    lab = flat[where] - 1
    rows, cols = np.divmod(where, pix.shape[1])
    x = cols + origin[0]
    y = rows + origin[1]
    v = pix.ravel()[where].astype(np.int64)
    first = np.full(count, np.iinfo(np.int64).max)
    np.minimum.at(first, lab, where)
    npix = np.bincount(lab, minlength=count)
    psum = np.bincount(lab, weights=v, minlength=count).astype(np.int64)
    # exact integer weighted sums (python ints would be slow; int64 holds them here)
    wx = np.zeros(count, np.int64)
    wy = np.zeros(count, np.int64)
    np.add.at(wx, lab, v * x)
    np.add.at(wy, lab, v * y)
    cx = wx / psum
    cy = wy / psum
    dist = np.sqrt((x - cx[lab]) ** 2 + (y - cy[lab]) ** 2)
    avgdist = np.bincount(lab, weights=v * dist, minlength=count) / psum
    xmin = np.full(count, np.iinfo(np.int64).max)
    ymin = xmin.copy()
    xmax = np.full(count, np.iinfo(np.int64).min)
    ymax = xmax.copy()
    np.minimum.at(xmin, lab, x)
    np.minimum.at(ymin, lab, y)
    np.maximum.at(xmax, lab, x)
    np.maximum.at(ymax, lab, y)
    keep = (xmax - xmin + 1 <= d1) & (ymax - ymin + 1 <= d1)
    order = np.argsort(lab, kind="stable")
    bounds = np.r_[0, np.cumsum(npix)]
    polygons: list[list[tuple[int, int]]] = []
    kept = []
    for obj in np.argsort(first):
        if not keep[obj]:
            continue
        members = order[bounds[obj] : bounds[obj + 1]]
        poly = trace_polygon(set(zip(x[members].tolist(), y[members].tolist(), strict=True)))
        if len(poly) > d2:
            continue
        kept.append(obj)
        polygons.append(poly)
    k = np.asarray(kept, dtype=np.int64)
    return {
        "x": np.trunc(cx[k]).astype(np.int64),
        "y": np.trunc(cy[k]).astype(np.int64),
        "pixelsum": psum[k],
        "avgdist": avgdist[k],
        "npix": npix[k].astype(np.int64),
        "xmin": xmin[k],
        "ymin": ymin[k],
        "xmax": xmax[k],
        "ymax": ymax[k],
        "polygons": polygons,
    }


def _overlaps(poly: list[tuple[int, int]], box: tuple[int, int, int, int]) -> bool:
    """Closed polygon against closed box, written out plainly (shapely is not assumed)."""
    x0, y0, x1, y1 = box
    if any(x0 <= px <= x1 and y0 <= py <= y1 for px, py in poly):
        return True
    corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]

    def orient(a: Any, b: Any, c: Any) -> int:
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return (v > 0) - (v < 0)

    def on(a: Any, b: Any, c: Any) -> bool:
        return min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(
            a[1], b[1]
        )

    def cross(p1: Any, p2: Any, q1: Any, q2: Any) -> bool:
        o1, o2, o3, o4 = (
            orient(q1, q2, p1),
            orient(q1, q2, p2),
            orient(p1, p2, q1),
            orient(p1, p2, q2),
        )
        if o1 * o2 < 0 and o3 * o4 < 0:
            return True
        return (
            (o1 == 0 and on(q1, q2, p1))
            or (o2 == 0 and on(q1, q2, p2))
            or (o3 == 0 and on(p1, p2, q1))
            or (o4 == 0 and on(p1, p2, q2))
        )

    n = len(poly)
    for i in range(n):
        a, b = poly[i], poly[(i + 1) % n]
        if any(cross(a, b, corners[k], corners[(k + 1) % 4]) for k in range(4)):
            return True
    if n < 3:
        return False
    inside, (px, py) = False, (x0, y0)
    for i in range(n):
        (ax, ay), (bx, by) = poly[i], poly[(i + 1) % n]
        if (ay > py) != (by > py):
            lhs, rhs = (px - ax) * (by - ay), (py - ay) * (bx - ax)
            if (by > ay and lhs < rhs) or (by < ay and lhs > rhs):
                inside = not inside
    return inside


class FilesRun:
    """An SS-DB run kept as ``.npy`` files in ``root`` and worked on with numpy."""

    def __init__(self, root: Path, cfg: Config, prm: Params, seed: int = 0) -> None:
        self.root = Path(root)
        self.config, self.params, self.seed = cfg, prm, seed
        self.obs: dict[int, dict[str, Any]] = {}  # per cycle
        self.groups_of: list[list[int]] = []  # per observation, in load order
        self.obs_index: list[tuple[int, int]] = []  # (cycle, row) of each observation
        self.group_members: dict[int, list[int]] = {}

    def restart(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)

    def _path(self, image: int, attr: str) -> Path:
        return self.root / f"image{image:04d}_{attr}.npy"

    # --- load, cook, group --------------------------------------------------------------
    def load(self) -> LoadTimes:
        times = LoadTimes()
        self.restart()
        meta = {}
        for cycle in range(self.config.cycles):
            cooked = []
            for image in self.config.images_of(cycle):
                at = placement(self.config, image, self.seed)
                with times.phase("generate"):
                    data = raw_image(self.config.size, at, self.seed)
                with times.phase("load"):
                    for attr in ATTRS:
                        np.save(self._path(image, attr), data[attr])
                    meta[image] = [at.x0, at.y0]
                with times.phase("cook"):
                    pix = np.load(self._path(image, "pix"))
                    p = self.params
                    cooked.append((image, cook_numpy(pix, 1000, p.d1, p.d2, (at.x0, at.y0))))
            with times.phase("cook"):
                self._keep(cycle, cooked)
            with times.phase("group"):
                self._group(cycle)
            times.cycles.append(cycle)
        (self.root / "images.json").write_text(json.dumps(meta))
        return times

    def _keep(self, cycle: int, cooked: list[tuple[int, dict[str, Any]]]) -> None:
        from tesseradb.ssdb import OBS_PER_IMAGE

        columns: dict[str, Any] = {}
        for key in ("x", "y", "pixelsum", "avgdist", "npix", "xmin", "ymin", "xmax", "ymax"):
            columns[key] = np.concatenate([c[key] for _, c in cooked])
        columns["image"] = np.concatenate([np.full(len(c["x"]), i) for i, c in cooked])
        columns["obs_id"] = np.concatenate(
            [i * OBS_PER_IMAGE + np.arange(len(c["x"])) for i, c in cooked]
        )
        columns["polygons"] = [p for _, c in cooked for p in c["polygons"]]
        np.savez(
            self.root / f"obs{cycle}.npz", **{k: v for k, v in columns.items() if k != "polygons"}
        )
        self.obs[cycle] = columns

    def _group(self, cycle: int) -> None:
        from scipy.spatial import cKDTree

        d3 = self.params.d3
        obs = self.obs[cycle]
        earlier = [self.obs[c] for c in range(cycle)]
        for image in np.unique(obs["image"]):
            rows = np.flatnonzero(obs["image"] == image)
            prior = [*earlier, {k: obs[k][: rows[0]] for k in ("x", "y", "image")}]
            px = np.concatenate([p["x"] for p in prior])
            py = np.concatenate([p["y"] for p in prior])
            pim = np.concatenate([p["image"] for p in prior])
            tree = cKDTree(np.c_[px, py]) if len(px) else None
            span = int(image - pim.min()) if len(pim) else 0
            radius = math.sqrt(float(d3) * span) + 1
            for r in rows:
                joined: set[int] = set()
                if tree is not None and span > 0:
                    for b in tree.query_ball_point([obs["x"][r], obs["y"][r]], radius):
                        dt = int(image - pim[b])
                        d2 = int(obs["x"][r] - px[b]) ** 2 + int(obs["y"][r] - py[b]) ** 2
                        if dt > 0 and d2 * d3.denominator < d3.numerator * dt:
                            joined.update(self.groups_of[b])
                if not joined:
                    joined = {len(self.group_members)}
                index = len(self.groups_of)
                self.groups_of.append(sorted(joined))
                self.obs_index.append((cycle, int(r)))
                for g in joined:
                    self.group_members.setdefault(g, []).append(index)

    # --- queries ------------------------------------------------------------------------
    def _image_meta(self) -> dict[int, tuple[int, int]]:
        return {
            i: (placement(self.config, i, self.seed).x0, placement(self.config, i, self.seed).y0)
            for i in range(self.config.images)
        }

    def q1(self, cycle: int, x1: int, y1: int, attr: str) -> float:
        u = self.params.u1
        total, count = 0.0, 0
        for image in self.config.images_of(cycle):
            block = np.load(self._path(image, attr), mmap_mode="r")[y1 : y1 + u, x1 : x1 + u]
            total += float(block.sum(dtype=np.int64))
            count += block.size
        return total / count

    def q2(self, cycle: int, x1: int, y1: int) -> dict[str, Any]:
        u, p = self.params.u1, self.params
        image = self.config.images_of(cycle)[0]
        at = placement(self.config, image, self.seed)
        pix = np.load(self._path(image, "pix"), mmap_mode="r")[y1 : y1 + u, x1 : x1 + u]
        return cook_numpy(np.asarray(pix), 900, p.d1, p.d2, (at.x0 + x1, at.y0 + y1))

    def q3(self, cycle: int, x1: int, y1: int) -> dict[str, np.ndarray]:
        """10:3 area-weighted regrid of every attribute, written to .npy files."""
        u = self.params.u1
        out = {}
        for attr in ATTRS:
            planes = []
            for i in self.config.images_of(cycle):
                block = np.load(self._path(i, attr), mmap_mode="r")[y1 : y1 + u, x1 : x1 + u]
                block = np.asarray(block, dtype=np.float64)
                wr, wc = _weights(block.shape[0]), _weights(block.shape[1])
                num = (wc @ (wr @ block).T).T
                den = (wc @ (wr @ np.ones_like(block)).T).T
                planes.append(num / den)
            out[attr] = np.stack(planes)
            np.save(self.root / f"q3_{attr}.npy", out[attr])
        return out

    def _centres(self, cycle: int, box: tuple[int, int, int, int]) -> np.ndarray:
        o = self.obs[cycle]
        return np.flatnonzero(
            (o["x"] >= box[0]) & (o["x"] <= box[2]) & (o["y"] >= box[1]) & (o["y"] <= box[3])
        )

    def q4(self, cycle: int, x2: int, y2: int, attr: str) -> float | None:
        u = self.params.u2
        rows = self._centres(cycle, (x2, y2, x2 + u - 1, y2 + u - 1))
        return float(self.obs[cycle][attr][rows].mean()) if len(rows) else None

    def q5(self, cycle: int, x2: int, y2: int) -> list[int]:
        u = self.params.u2
        box = (x2, y2, x2 + u - 1, y2 + u - 1)
        o = self.obs[cycle]
        near = np.flatnonzero(
            (o["xmin"] <= box[2])
            & (o["xmax"] >= box[0])
            & (o["ymin"] <= box[3])
            & (o["ymax"] >= box[1])
        )
        return sorted(int(o["obs_id"][r]) for r in near if _overlaps(o["polygons"][r], box))

    def q6(self, cycle: int, x2: int, y2: int) -> list[tuple[int, int, int]]:
        from scipy.spatial import cKDTree

        u, d4, d5 = self.params.u2, self.params.d4, self.params.d5
        o = self.obs[cycle]
        rows = self._centres(cycle, (x2, y2, x2 + u - 1, y2 + u - 1))
        xs, ys = o["x"][rows], o["y"][rows]
        if not len(rows):
            return []
        lo, hi = -(d4 // 2), d4 - d4 // 2 - 1
        tree = cKDTree(np.c_[xs, ys])
        out = []
        # a box query: the L-infinity ball around the box's centre, then exact bounds
        half = (hi - lo) / 2
        for x, y in zip(xs, ys, strict=True):
            near = tree.query_ball_point([x + lo + half, y + lo + half], half + 0.5, p=np.inf)
            n = sum(1 for j in near if x + lo <= xs[j] <= x + hi and y + lo <= ys[j] <= y + hi)
            if n > d5:
                out.append((int(x), int(y), n))
        return sorted(out, key=lambda t: (t[1], t[0]))

    def _members(self) -> tuple[dict[int, list[int]], Any]:
        return self.group_members, self.obs_index

    def _obs_field(self, index: int, key: str) -> Any:
        cycle, row = self.obs_index[index]
        return self.obs[cycle][key][row]

    def q7(self, x2: int, y2: int) -> list[int]:
        u = self.params.u2
        out = []
        for g, members in self.group_members.items():
            cx = np.mean([self._obs_field(m, "x") for m in members])
            cy = np.mean([self._obs_field(m, "y") for m in members])
            if x2 <= cx < x2 + u and y2 <= cy < y2 + u:
                out.append(g)
        return sorted(out)

    def _ordered(self, members: list[int]) -> list[int]:
        return sorted(
            members, key=lambda m: (self._obs_field(m, "image"), self._obs_field(m, "obs_id"))
        )

    def q8_groups(self, x2: int, y2: int) -> list[int]:
        u = self.params.u3
        box = (x2, y2, x2 + u - 1, y2 + u - 1)
        out = []
        for g, members in self.group_members.items():
            pts = [
                (int(self._obs_field(m, "x")), int(self._obs_field(m, "y")))
                for m in self._ordered(members)
            ]
            parts = [pts] if len(pts) == 1 else [[a, b] for a, b in itertools.pairwise(pts)]
            if any(_overlaps(p, box) for p in parts):
                out.append(g)
        return sorted(out)

    def q9_groups(self, x2: int, y2: int) -> list[int]:
        u = self.params.u3
        box = (x2, y2, x2 + u - 1, y2 + u - 1)
        out = []
        for g, members in self.group_members.items():
            for m in members:
                cycle, row = self.obs_index[m]
                if _overlaps(self.obs[cycle]["polygons"][row], box):
                    out.append(g)
                    break
        return sorted(out)

    def tiles(
        self, groups: list[int], x2: int, y2: int
    ) -> list[tuple[int, int, int, int, int, np.ndarray]]:
        """(group, obs_id, image, tile x, tile y, pix) of each tile Q8/Q9 return."""
        u, d6, size = self.params.u3, self.params.d6, self.config.size
        meta = self._image_meta()
        out = []
        for g in groups:
            for m in self._ordered(self.group_members[g]):
                image = int(self._obs_field(m, "image"))
                x0, y0 = meta[image]
                if not (
                    x0 <= x2 + u - 1 and x0 + size > x2 and y0 <= y2 + u - 1 and y0 + size > y2
                ):
                    continue
                cx, cy = int(self._obs_field(m, "x")), int(self._obs_field(m, "y"))
                c0 = min(max(cx - x0 - d6 // 2, 0), size)
                r0 = min(max(cy - y0 - d6 // 2, 0), size)
                c1 = min(max(cx - x0 - d6 // 2 + d6, 0), size)
                r1 = min(max(cy - y0 - d6 // 2 + d6, 0), size)
                if c1 <= c0 or r1 <= r0:
                    continue
                pix = np.load(self._path(image, "pix"), mmap_mode="r")[r0:r1, c0:c1]
                out.append(
                    (g, int(self._obs_field(m, "obs_id")), image, x0 + c0, y0 + r0, np.array(pix))
                )
        return out

    def q8(self, x2: int, y2: int) -> list[Any]:
        return self.tiles(self.q8_groups(x2, y2), x2, y2)

    def q9(self, x2: int, y2: int) -> list[Any]:
        return self.tiles(self.q9_groups(x2, y2), x2, y2)


# written out again rather than imported from tesseradb.arrays: the reference
# shares nothing with the system it checks but the generator and the parameters
@functools.lru_cache(maxsize=16)
def _weights(n: int) -> Any:
    """Sparse area weights of a 10:3 regrid along one axis: output k covers input [10k/3, 10(k+1)/3)."""
    from fractions import Fraction

    from scipy import sparse

    f = Fraction(10, 3)
    out_n = math.ceil(n / f)
    rows, cols, vals = [], [], []
    for k in range(out_n):
        lo, hi = k * f, min(Fraction(n), (k + 1) * f)
        for i in range(math.floor(lo), math.ceil(hi)):
            w = min(hi, Fraction(i + 1)) - max(lo, Fraction(i))
            if w > 0:
                rows.append(k)
                cols.append(i)
                vals.append(float(w))
    return sparse.csr_matrix((vals, (rows, cols)), shape=(out_n, n))
