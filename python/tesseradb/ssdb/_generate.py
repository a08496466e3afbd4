"""Synthetic raw images for SS-DB: a star field over a noisy sky.

The benchmark's reference generator cuts its ``pix`` values from real
telescope tiles that are not public; this one draws them instead:

- stars are fixed in world coordinates: each 1024 x 1024 world tile gets a
  Poisson number of stars from a generator seeded by the tile, so every image
  that covers a place sees the same stars, moved by a small proper motion
  (normal, 0.004 pixels per time step on each axis);
- a star's peak brightness follows Euclidean number counts, N(>A) ~ A^-1.5,
  from 300 counts up, with a Gaussian PSF whose width (the seeing) is drawn
  per image between 1.9 and 2.5 pixels;
- the sky is 300 counts with normal noise of 25; values are rounded and
  clipped to 0..65535, so bright stars saturate;
- star density is set so that an image of the paper's 7500 x 7500 pixels
  holds about 23,000 observations above F1's threshold of 1000.

The other ten attributes follow the reference generator: ``var =
int(sqrt(pix))``, ``valid = 1``, ``sat = (pix == 65535)``, ``v0 = max(0,
int((pix - 3000) * 65535 / 62535))`` and ``v1..v6`` from standard normal
draws (truncated to int32). Image positions follow it too: four in five
images fall in the dense box at the world's centre, the rest anywhere; the
second half of a run revisits the first half's positions, each image shifted
by a small offset of its own (up to 1% of its side), so that grouping finds
repeat observations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tesseradb.ssdb._params import WORLD_SIZE, Config

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ATTRS", "Placement", "image_pixels", "placement", "raw_image", "world_box"]

# the 11 int32 attributes of a raw image, in the reference's order
ATTRS = ["pix", "var", "valid", "sat", "v0", "v1", "v2", "v3", "v4", "v5", "v6"]

STAR_TILE = 1024
SKY_LEVEL = 300.0
SKY_NOISE = 25.0
FAINTEST = 300.0  # peak counts of the faintest star drawn
BRIGHTEST = 4.0e6
# stars per pixel at or above FAINTEST (calibrated: ~23,000 observations per 7500^2)
STAR_DENSITY = 1.5e-3
PROPER_MOTION = 0.004  # pixels per time step, standard deviation per axis
STAMP = 6  # PSF drawn to this many pixels from the centre


@dataclass(frozen=True)
class Placement:
    """Where and when image number ``image`` was taken."""

    image: int
    time: int
    x0: int  # world coordinates of pixel [0, 0]
    y0: int
    seeing: float


def _uniform(seed: int, *key: int) -> np.random.Generator:
    import numpy as np

    return np.random.default_rng([seed, *key])


def placement(cfg: Config, image: int, seed: int = 0) -> Placement:
    """The world position of image ``image``: the reference's rules (module doc)."""
    base = image - cfg.images // 2 if image >= cfg.images // 2 else image
    # one stream of draws per run: positions of different images are independent
    dense, u, v = _uniform(seed, 1).random((base + 1, 3))[base]
    if dense < 0.8:
        lo = (WORLD_SIZE - cfg.dense) // 2
        x = lo + int(u * (cfg.dense - cfg.size))
        y = lo + int(v * (cfg.dense - cfg.size))
    else:
        x = int(u * (WORLD_SIZE - cfg.size))
        y = int(v * (WORLD_SIZE - cfg.size))
    own = _uniform(seed, 2, image)
    shift = max(1, cfg.size // 100)
    dx, dy = (int(s) for s in own.integers(-shift, shift + 1, 2))
    x = min(max(0, x + dx), WORLD_SIZE - cfg.size)
    y = min(max(0, y + dy), WORLD_SIZE - cfg.size)
    return Placement(image, image, x, y, float(1.9 + 0.6 * own.random()))


def _stars(seed: int, tx: int, ty: int) -> tuple[np.ndarray, ...]:
    """Stars of world tile (tx, ty): x, y, peak, proper motion x and y."""
    rng = _uniform(seed, 3, tx, ty)
    n = int(rng.poisson(STAR_DENSITY * STAR_TILE * STAR_TILE))
    x = tx * STAR_TILE + rng.random(n) * STAR_TILE
    y = ty * STAR_TILE + rng.random(n) * STAR_TILE
    peak = FAINTEST * (1.0 - rng.random(n)) ** (-1 / 1.5)
    peak = peak.clip(None, BRIGHTEST)
    vx, vy = rng.normal(0.0, PROPER_MOTION, (2, n))
    return x, y, peak, vx, vy


def image_pixels(size: int, at: Placement, seed: int = 0) -> np.ndarray:
    """The ``pix`` values of a ``size`` x ``size`` image taken at ``at``: int32."""
    import numpy as np

    rng = _uniform(seed, 4, at.image)
    sky = rng.normal(SKY_LEVEL, SKY_NOISE, size * size).astype(np.float32)
    reach = STAMP + 2
    lo_x, lo_y = at.x0 - reach, at.y0 - reach
    hi_x, hi_y = at.x0 + size + reach, at.y0 + size + reach
    parts = [
        _stars(seed, tx, ty)
        for tx in range(lo_x // STAR_TILE, hi_x // STAR_TILE + 1)
        for ty in range(lo_y // STAR_TILE, hi_y // STAR_TILE + 1)
    ]
    x, y, peak, vx, vy = (np.concatenate(c) for c in zip(*parts, strict=True))
    fx = x + vx * at.time - at.x0  # local, continuous
    fy = y + vy * at.time - at.y0
    near = (fx > -reach) & (fx < size + reach) & (fy > -reach) & (fy < size + reach)
    fx, fy, peak = fx[near], fy[near], peak[near]
    offsets = np.arange(-STAMP, STAMP + 1)
    ix = np.floor(fx).astype(np.int64)[:, None, None] + offsets[None, None, :]
    iy = np.floor(fy).astype(np.int64)[:, None, None] + offsets[None, :, None]
    d2 = (ix - fx[:, None, None]) ** 2 + (iy - fy[:, None, None]) ** 2
    flux = peak[:, None, None] * np.exp(-d2 / (2.0 * at.seeing**2))
    ix, iy = np.broadcast_arrays(ix, iy)
    inside = (ix >= 0) & (ix < size) & (iy >= 0) & (iy < size)
    light = np.bincount((iy * size + ix)[inside], weights=flux[inside], minlength=size * size)
    total = np.rint(sky + light).clip(0, 65535)
    return total.astype(np.int32).reshape(size, size)


def _truncated(values: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.trunc(values).clip(-(2**31), 2**31 - 1).astype(np.int32)


def raw_image(size: int, at: Placement, seed: int = 0) -> dict[str, np.ndarray]:
    """All 11 attributes of the image taken at ``at`` (module doc), int32 each."""
    import numpy as np

    pix = image_pixels(size, at, seed)
    rng = _uniform(seed, 5, at.image)
    noise = rng.standard_normal((6, size, size), dtype=np.float32)
    out = {
        "pix": pix,
        "var": np.sqrt(pix).astype(np.int32),
        "valid": np.ones_like(pix),
        "sat": (pix == 65535).astype(np.int32),
        "v0": np.maximum(0, ((pix.astype(np.int64) - 3000) * 65535) // 62535).astype(np.int32),
    }
    scales = [(0.0, 65535.0), (32768.0, 32768.0), (-5e8, 1e6), (0.0, 10.0), (1000.0, 100.0)]
    scales.append((1.0, 0.5))
    for k, (mean, spread) in enumerate(scales):
        out[f"v{k + 1}"] = _truncated(mean + spread * noise[k].astype(np.float64))
    return out


def world_box(at: Placement, size: int) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) of the image in world coordinates, half-open."""
    return at.x0, at.y0, at.x0 + size, at.y0 + size
