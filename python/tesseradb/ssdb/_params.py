"""SS-DB's configurations and parameter sets (papers/ssdb-benchmark.txt, II-A and II-F).

Configurations are named as the benchmark's generator (``benchGen.cc``)
names them, with its image counts, sizes and dense-box widths; ``test`` is
ours, small enough for the test suite. Parameter sets are the paper's table.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from tesseradb.errors import InvalidArgumentError

__all__ = ["CONFIGS", "PARAMS", "WORLD_SIZE", "Config", "Params", "config", "params"]

# The paper's world: 0 .. 10^8 in each dimension (the reference code uses 10^6).
WORLD_SIZE = 100_000_000


@dataclass(frozen=True)
class Config:
    """How many images, how large, and how they fall in the world."""

    name: str
    images: int
    size: int  # images are size x size pixels
    dense: int  # width of the dense box centred in the world
    cycle: int = 20  # images per cycle
    chunk: int = 0  # chunk side of the raw array; 0 picks one from the size
    run_here: bool = True  # whether this machine is meant to run it

    @property
    def cycles(self) -> int:
        return -(-self.images // self.cycle)

    @property
    def chunk_side(self) -> int:
        if self.chunk:
            return self.chunk
        # a few chunks per image so cooking runs in parallel, none tiny
        return max(100, -(-self.size // 3))

    @property
    def raw_bytes(self) -> int:
        """Bytes of the raw images uncompressed: 11 int32 values per pixel."""
        return self.images * self.size * self.size * 11 * 4

    def cycle_of(self, image: int) -> int:
        return image // self.cycle

    def images_of(self, cycle: int) -> range:
        return range(cycle * self.cycle, min(self.images, (cycle + 1) * self.cycle))


CONFIGS: dict[str, Config] = {
    c.name: c
    for c in [
        Config("test", images=8, size=300, dense=500, cycle=4),
        Config("tiny", images=10, size=1000, dense=1200),
        Config("very-small", images=40, size=1600, dense=3162),
        Config("small", images=160, size=3750, dense=10_000),
        Config("normal", images=400, size=7500, dense=31_623, run_here=False),
        Config("large", images=1000, size=15_000, dense=100_000, run_here=False),
    ]
}


@dataclass(frozen=True)
class Params:
    """The paper's knobs. D3 is kept as an exact fraction: F2 compares integers."""

    name: str
    d1: int  # largest observation extent; the cooking halo
    d2: int  # most polygon vertices
    d3: Fraction  # largest squared distance per time step
    d4: int  # Q6 tile side
    d5: int  # Q6: tiles with more than D5 observations
    d6: int  # Q8/Q9 tile side
    u1: int  # Q1-Q3 slab side (local coordinates)
    u2: int  # Q4-Q7 slab side (world coordinates)
    u3: int  # Q8/Q9 slab side (world coordinates)


PARAMS: dict[str, Params] = {
    p.name: p
    for p in [
        Params("easy", 25, 25, Fraction("0.05"), 50, 10, 50, 3750, 5000, 500),
        Params("medium", 50, 50, Fraction("0.1"), 100, 20, 100, 7500, 10_000, 1000),
        Params("hard", 100, 100, Fraction("0.2"), 200, 40, 200, 15_000, 20_000, 2000),
    ]
}


def config(name: str) -> Config:
    """The configuration called ``name``; a clear error names the known ones."""
    if not isinstance(name, str) or name not in CONFIGS:
        raise InvalidArgumentError(
            f"unknown SS-DB configuration {name!r}; one of {', '.join(CONFIGS)}"
        )
    return CONFIGS[name]


def params(name: str) -> Params:
    """The parameter set called ``name``; a clear error names the known ones."""
    if not isinstance(name, str) or name not in PARAMS:
        raise InvalidArgumentError(
            f"unknown SS-DB parameter set {name!r}; one of {', '.join(PARAMS)}"
        )
    return PARAMS[name]
