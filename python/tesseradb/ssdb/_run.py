"""One SS-DB run inside a database: raw images, observations, groups.

A run called ``sky`` keeps (every name starts with the run's):

- ``sky_raw``: the raw images, one array (image, y, x) with the 11 int32
  attributes, zstd-compressed, chunked so that cooking runs in parallel;
- ``sky_images``: each image's cycle, time and world origin (a table);
- ``sky_obs<c>``: the observations of cycle ``c``, a record stream indexed
  on the centre (x, y), so slab queries descend its R*-tree and kd-trees;
- ``sky_polygons``: each observation's polygon, by id (a table);
- ``sky_members``: which observations each group holds, with their image and
  centre (a table), and ``sky_groups``: each group's size and centre;
- ``sky_run``: the configuration, parameters, seed and cycles done.

A cycle is done when its row in ``sky_run`` says so; loading a cycle first
removes whatever an interrupted attempt left of it, so a run resumes cleanly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import refuses_when_closed
from tesseradb.errors import InvalidArgumentError, ObjectExistsError, ObjectNotFoundError
from tesseradb.ssdb._cook import cook_image, cook_images, observations_table
from tesseradb.ssdb._generate import ATTRS, Placement, placement, raw_image
from tesseradb.ssdb._params import Config, Params, config, params

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from tesseradb.arrays import Array
    from tesseradb.database import Database

__all__ = ["OBS_PER_IMAGE", "LoadTimes", "Run", "new_grouper"]

# observation ids are image * OBS_PER_IMAGE + position in the image
OBS_PER_IMAGE = 1_000_000

_OBS_FIELDS = [
    ("obs_id", "int64_t"),
    ("image", "int32_t"),
    ("x", "int32_t"),
    ("y", "int32_t"),
    ("pixelsum", "int64_t"),
    ("avgdist", "double"),
    ("npix", "int32_t"),
    ("xmin", "int32_t"),
    ("ymin", "int32_t"),
    ("xmax", "int32_t"),
    ("ymax", "int32_t"),
]
OBS_DESCRIPTOR = {
    "fields": [{"name": n, "type": t} for n, t in _OBS_FIELDS],
    "index": ["x", "y"],
}


@dataclass
class LoadTimes:
    """Seconds spent per phase of loading, summed over cycles."""

    generate: float = 0.0
    load: float = 0.0
    cook: float = 0.0
    group: float = 0.0
    cycles: list[int] = field(default_factory=list)

    @property
    def load_cook_group(self) -> float:
        return self.load + self.cook + self.group

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Adds the time the block takes to phase ``name`` (generate, load, cook, group)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, name, getattr(self, name) + time.perf_counter() - start)


def new_grouper(cfg: Config, prm: Params) -> Any:
    """An empty F2 state for a run: D3 as its exact fraction, a grid cell wider
    than the farthest an observation may move over the whole run."""
    import math

    from tesseradb import _core

    d3 = prm.d3
    cell = max(16, math.isqrt(math.ceil(d3 * cfg.images)) + 2)
    return _core.Grouper(d3.numerator, d3.denominator, cell)


def _object_names(name: str, cfg: Config) -> list[str]:
    """Every object a run called ``name`` keeps; its ``_run`` table last."""
    names = [f"{name}_{s}" for s in ("raw", "images", "polygons", "members", "groups", "q3")]
    names += [f"{name}_obs{c}" for c in range(cfg.cycles)]
    return [*names, f"{name}_run"]


@refuses_when_closed
class Run:
    """An SS-DB run: its configuration, its objects in the database, its queries."""

    def _check_open(self) -> None:
        self.db._check_open()

    def __init__(self, db: Database, name: str, cfg: Config, prm: Params, seed: int) -> None:
        self.db = db
        self.name = name
        self.config = cfg
        self.params = prm
        self.seed = seed
        self._grouper: Any = None
        self._grouped_cycles = 0

    # --- making and opening -------------------------------------------------------------
    @classmethod
    def create(
        cls,
        db: Database,
        name: str,
        config_name: str = "test",
        params_name: str = "medium",
        seed: int = 0,
    ) -> Run:
        """A new, empty run called ``name`` (nothing loaded yet)."""
        cfg, prm = config(config_name), params(params_name)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise InvalidArgumentError(f"SS-DB run {name!r}: seed must be a non-negative integer")
        if db.catalog.get(f"{name}_run") is not None:
            raise ObjectExistsError(f"SS-DB run {name!r} already exists; open it with db.ssdb()")
        leftovers = [o for o in _object_names(name, cfg) if db.catalog.get(o) is not None]
        if leftovers:
            raise ObjectExistsError(
                f"SS-DB run {name!r}: {', '.join(leftovers)} already exist without "
                f"{name}_run (left by an interrupted create, or another object's); drop them "
                "or choose another run name"
            )
        # {name}_run, made last, says the run exists: a create that fails midway
        # removes what it made, and one killed midway is named by the check above
        try:
            cls._create_objects(db, name, cfg)
            db.sql(
                f"CREATE TABLE {name}_run (config TEXT, params TEXT, seed BIGINT, "
                "cycles_done INTEGER)"
            )
            db.sql(f"INSERT INTO {name}_run VALUES (?, ?, ?, 0)", [cfg.name, prm.name, seed])
        except BaseException:
            for obj in _object_names(name, cfg):
                db.drop(obj, missing_ok=True)
            raise
        return cls(db, name, cfg, prm, seed)

    @staticmethod
    def _create_objects(db: Database, name: str, cfg: Config) -> None:
        side = cfg.chunk_side
        db.create_array(
            f"{name}_raw",
            [
                {"name": "image", "start": 0, "end": cfg.images, "chunk": 1},
                {"name": "y", "start": 0, "end": cfg.size, "chunk": side},
                {"name": "x", "start": 0, "end": cfg.size, "chunk": side},
            ],
            dict.fromkeys(ATTRS, "int32"),
            level=1,
        )
        db.sql(
            f"CREATE TABLE {name}_images (image INTEGER, cycle INTEGER, time INTEGER, "
            "x0 BIGINT, y0 BIGINT, size INTEGER)"
        )
        db.sql(
            f"CREATE TABLE {name}_polygons (obs_id BIGINT, cycle INTEGER, "
            "polygon STRUCT(x BIGINT, y BIGINT)[])"
        )
        db.sql(
            f"CREATE TABLE {name}_members (group_id BIGINT, obs_id BIGINT, image INTEGER, "
            "cycle INTEGER, x BIGINT, y BIGINT, xmin BIGINT, ymin BIGINT, xmax BIGINT, ymax BIGINT)"
        )
        # per group: its centre, the box of its members' centres (its trajectory) and
        # the box of their polygons, so Q7-Q9 narrow by a scan of one small table
        db.sql(
            f"CREATE TABLE {name}_groups (group_id BIGINT, members BIGINT, cx DOUBLE, cy DOUBLE, "
            "xmin BIGINT, ymin BIGINT, xmax BIGINT, ymax BIGINT, "
            "pxmin BIGINT, pymin BIGINT, pxmax BIGINT, pymax BIGINT)"
        )

    @classmethod
    def open(cls, db: Database, name: str) -> Run:
        """The run called ``name``; a clear error when there is none."""
        if not isinstance(name, str) or db.catalog.get(f"{name}_run") is None:
            raise ObjectNotFoundError(
                f"no SS-DB run called {name!r} in this database (a run keeps its settings in "
                f"the table {name}_run)"
            )
        row = db.sql(f"SELECT config, params, seed FROM {name}_run").fetchone()
        return cls(db, name, config(row[0]), params(row[1]), int(row[2]))

    def drop(self) -> None:
        """Remove every object of the run."""
        for obj in self._objects():
            self.db.drop(obj, missing_ok=True)

    def _objects(self) -> list[str]:
        return _object_names(self.name, self.config)

    # --- what is there ------------------------------------------------------------------
    @property
    def cycles_done(self) -> int:
        return int(self.db.sql(f"SELECT cycles_done FROM {self.name}_run").scalar())

    @property
    def raw(self) -> Array:
        return self.db.array(f"{self.name}_raw")

    def placement(self, image: int) -> Placement:
        return placement(self.config, image, self.seed)

    def images(self, cycle: int | None = None) -> pa.Table:
        """Image number, cycle, time and world origin of each loaded image."""
        where = "" if cycle is None else f" WHERE cycle = {int(cycle)}"
        return self.db.sql(f"SELECT * FROM {self.name}_images{where} ORDER BY image").arrow()

    def observations(self, cycle: int) -> pa.Table:
        """Every observation of ``cycle`` (without polygons)."""
        self._check_cycle(cycle)
        return self.db.sql(f"SELECT * FROM {self.name}_obs{cycle} ORDER BY obs_id").arrow()

    def _check_cycle(self, cycle: Any) -> int:
        done = self.cycles_done
        if not isinstance(cycle, int) or isinstance(cycle, bool) or not 0 <= cycle < done:
            raise InvalidArgumentError(
                f"SS-DB run {self.name!r}: cycle must be one of the {done} loaded "
                f"(0..{done - 1}), not {cycle!r}"
            )
        return cycle

    # --- loading ------------------------------------------------------------------------
    def load(
        self,
        cycles: int | None = None,
        progress: Callable[[str], None] | None = None,
        workers: int | None = None,
    ) -> LoadTimes:
        """Ingest, cook and group the cycles not yet done (all, or up to ``cycles``)."""
        times = LoadTimes()
        last = self.config.cycles if cycles is None else min(cycles, self.config.cycles)
        for cycle in range(self.cycles_done, last):
            self.load_cycle(cycle, times, workers)
            if progress is not None:
                progress(f"cycle {cycle + 1} of {self.config.cycles} loaded, cooked and grouped")
        return times

    def load_cycle(self, cycle: int, times: LoadTimes, workers: int | None = None) -> None:
        """Section II-E for one cycle: ingest its images, cook each, group the observations."""
        if cycle != self.cycles_done:
            raise InvalidArgumentError(
                f"SS-DB run {self.name!r}: cycle {cycle} cannot load before cycle "
                f"{self.cycles_done} is done"
            )
        self._forget_from(cycle)
        images = list(self.config.images_of(cycle))
        placed = {image: self.placement(image) for image in images}
        self._load_images(cycle, placed, times)
        with times.phase("cook"):
            cooked = self._cook_images(placed, workers)
            self._store_observations(cycle, cooked)
        with times.phase("group"):
            self._group(cycle, cooked)
        self.db.sql(f"UPDATE {self.name}_run SET cycles_done = ?", [cycle + 1])
        times.cycles.append(cycle)

    def cook_cycle(
        self, cycle: int, workers: int | None = None
    ) -> list[tuple[Placement, dict[str, np.ndarray]]]:
        """F1 over every stored image of ``cycle``, an image per parallel task (threads, or
        the workers of the database's Dask cluster); nothing is stored."""
        cycle = self._check_cycle(cycle)
        return self._cook_images(
            {i: self.placement(i) for i in self.config.images_of(cycle)}, workers
        )

    def _cook_images(
        self, placed: dict[int, Placement], workers: int | None
    ) -> list[tuple[Placement, dict[str, np.ndarray]]]:
        p = self.params
        origins = {image: (at.x0, at.y0) for image, at in placed.items()}
        columns = cook_images(self.raw, origins, 1000, p.d1, p.d2, workers)
        return [(placed[image], c) for image, c in zip(origins, columns, strict=True)]

    def _load_images(self, cycle: int, placed: dict[int, Placement], times: LoadTimes) -> None:
        """Generate and store a cycle's images: each image is written by a parallel task into
        a fork of the raw array (threads, or Dask workers), and the forks commit as one version.

        Images are generated here (the telescope), as many at a time as there
        are workers (at least two, at most 1 GB of them), so memory holds a
        batch of images, not the cycle.
        """
        import pyarrow as pa

        executor = self.db.executor
        raw = self.raw
        images = list(placed)
        image_bytes = self.config.size**2 * len(ATTRS) * 4
        at_once = max(min(executor.workers, 2), min(executor.workers, (1 << 30) // image_bytes))
        forks = []
        try:
            for start in range(0, len(images), at_once):
                batch = images[start : start + at_once]
                with times.phase("generate"):
                    data = [raw_image(self.config.size, placed[i], self.seed) for i in batch]
                with times.phase("load"):
                    items = [(raw.fork(), i, d) for i, d in zip(batch, data, strict=True)]
                    del data
                    forks += executor.map(
                        _write_image, items, what=f"SS-DB run {self.name!r}, cycle {cycle}"
                    )
                    del items
            with times.phase("load"):
                raw.merge(forks, f"cycle {cycle}: images {images[0]}..{images[-1]}")
        except BaseException:
            raw.discard_forks()
            raise
        with times.phase("load"):
            rows = {
                "image": pa.array(images, pa.int32()),
                "cycle": pa.array([cycle] * len(images), pa.int32()),
                "time": pa.array([placed[i].time for i in images], pa.int32()),
                "x0": pa.array([placed[i].x0 for i in images], pa.int64()),
                "y0": pa.array([placed[i].y0 for i in images], pa.int64()),
                "size": pa.array([self.config.size] * len(images), pa.int32()),
            }
            self._insert("images", pa.table(rows))

    def ingest(self, image: int, data: dict[str, np.ndarray]) -> None:
        """Store raw image number ``image`` (its 11 attributes) and its placement."""
        import numbers

        import numpy as np

        size = self.config.size
        if not isinstance(image, numbers.Integral) or isinstance(image, bool):
            raise InvalidArgumentError(
                f"SS-DB run {self.name!r}: an image number is an integer, not {image!r}"
            )
        if not isinstance(data, dict):
            raise InvalidArgumentError(
                f"SS-DB run {self.name!r}, image {image}: data is a dict of attribute arrays, "
                f"not {type(data).__name__}"
            )
        missing = [a for a in ATTRS if a not in data]
        extra = [a for a in data if a not in ATTRS]
        if missing or extra:
            raise InvalidArgumentError(
                f"SS-DB run {self.name!r}, image {image}: attributes must be {', '.join(ATTRS)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unknown {extra}" if extra else "")
            )
        for attr in ATTRS:
            shape = np.shape(data[attr])
            if shape != (size, size):
                raise InvalidArgumentError(
                    f"SS-DB run {self.name!r}, image {image}: attribute {attr} is {shape}, "
                    f"the run's images are {size} x {size}"
                )
        if not 0 <= image < self.config.images:
            raise InvalidArgumentError(
                f"SS-DB run {self.name!r}: image {image} is outside 0..{self.config.images - 1}"
            )
        at = self.placement(image)
        self.raw.write((image, 0, 0), {a: np.asarray(data[a])[None] for a in ATTRS})
        self.db.sql(
            f"INSERT INTO {self.name}_images VALUES (?, ?, ?, ?, ?, ?)",
            [image, self.config.cycle_of(image), at.time, at.x0, at.y0, size],
        )

    def cook(
        self,
        image: int,
        threshold: int = 1000,
        box: tuple[int, int, int, int] | None = None,
        workers: int | None = None,
    ) -> dict[str, np.ndarray]:
        """F1 over a stored image (or a box of it), chunk by chunk in parallel."""
        at = self.placement(image)
        p = self.params
        origin = (at.x0, at.y0)
        executor = self.db.executor
        return cook_image(self.raw, image, origin, threshold, p.d1, p.d2, box, workers, executor)

    def _forget_from(self, cycle: int) -> None:
        """Remove what an interrupted attempt at ``cycle`` (or later) left behind."""
        n = self.name
        for table in ("images", "polygons", "members"):
            self.db.sql(f"DELETE FROM {n}_{table} WHERE cycle >= ?", [cycle])
        for later in range(cycle, self.config.cycles):
            self.db.drop(f"{n}_obs{later}", missing_ok=True)
        self._grouper = None

    def _store_observations(
        self, cycle: int, cooked: list[tuple[Placement, dict[str, np.ndarray]]]
    ) -> None:
        import numpy as np
        import pyarrow as pa

        tables = [
            observations_table(columns, at.image * OBS_PER_IMAGE)
            .append_column("image", pa.array(np.full(len(columns["x"]), at.image, np.int32)))
            .append_column("cycle", pa.array(np.full(len(columns["x"]), cycle, np.int32)))
            for at, columns in cooked
        ]
        table = pa.concat_tables(tables)
        stream = self.db.create_stream(f"{self.name}_obs{cycle}", OBS_DESCRIPTOR)
        stream.ingest(table.select([n for n, _ in _OBS_FIELDS]))
        stream.flush()
        self._insert("polygons", table.select(["obs_id", "cycle", "polygon"]))

    def _insert(self, table: str, data: pa.Table) -> None:
        temp = f"{self.name}_incoming"
        self.db.register(temp, data)
        try:
            self.db.sql(f"INSERT INTO {self.name}_{table} SELECT * FROM {temp}")
        finally:
            self.db.unregister(temp)

    # --- grouping -----------------------------------------------------------------------
    def _grouper_at(self, cycle: int) -> Any:
        """The grouping state after every cycle before ``cycle`` (rebuilt if need be)."""
        import numpy as np

        if self._grouper is not None and self._grouped_cycles == cycle:
            return self._grouper
        grouper = new_grouper(self.config, self.params)
        for earlier in range(cycle):
            obs = self.db.sql(
                f"SELECT image, x, y FROM {self.name}_obs{earlier} ORDER BY obs_id"
            ).numpy()
            grouper.add(
                np.ascontiguousarray(obs["image"], np.int64),
                np.ascontiguousarray(obs["x"], np.int64),
                np.ascontiguousarray(obs["y"], np.int64),
            )
        self._grouper, self._grouped_cycles = grouper, cycle
        return grouper

    def _group(self, cycle: int, cooked: list[tuple[Placement, dict[str, np.ndarray]]]) -> None:
        """F2 over the cycle's observations in time order; members and group centres stored."""
        import numpy as np
        import pyarrow as pa

        grouper = self._grouper_at(cycle)
        images = np.concatenate([np.full(len(c["x"]), at.image, np.int64) for at, c in cooked])
        column = {
            k: np.concatenate([c[k] for _, c in cooked]).astype(np.int64)
            for k in ("x", "y", "xmin", "ymin", "xmax", "ymax")
        }
        xs, ys = column["x"], column["y"]
        ids = np.concatenate(
            [at.image * OBS_PER_IMAGE + np.arange(len(c["x"])) for at, c in cooked]
        )
        which, groups = grouper.add(images, xs, ys)
        self._grouped_cycles = cycle + 1
        members = pa.table(
            {
                "group_id": groups,
                "obs_id": ids[which],
                "image": images[which].astype(np.int32),
                "cycle": np.full(len(which), cycle, np.int32),
                **{k: v[which] for k, v in column.items()},
            }
        )
        self._insert("members", members)
        n = self.name
        self.db.sql(f"DELETE FROM {n}_groups")
        self.db.sql(
            f"INSERT INTO {n}_groups SELECT group_id, count(*), avg(x), avg(y), min(x), min(y), "
            f"max(x), max(y), min(xmin), min(ymin), max(xmax), max(ymax) "
            f"FROM {n}_members GROUP BY group_id"
        )


def _write_image(item: tuple[Any, int, dict[str, np.ndarray]]) -> Any:
    """A task of a cycle's load: write one image's attributes into its fork; the fork back."""
    fork, image, data = item
    fork.write((image, 0, 0), {a: data[a][None] for a in ATTRS}, message=f"image {image}")
    return fork
