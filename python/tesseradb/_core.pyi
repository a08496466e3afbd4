"""Typed stub of the Rust extension module ``tesseradb._core``."""

from typing import final

import numpy as np
import numpy.typing as npt

__all__ = [
    "SegmentTree",
    "__version__",
    "box_scan",
    "build_info",
    "kdtree_build",
    "kdtree_partition",
    "kdtree_search",
]

__version__: str

def build_info() -> dict[str, str | int]:
    """Facts about this build of the Rust kernels.

    Returns
    -------
    dict
        ``version`` (the crate version, equal to the package version),
        ``profile`` (``release`` or ``debug``), ``target_arch``, ``target_os``
        and ``threads`` (the size of the rayon pool the kernels share).
    """

def kdtree_build(
    coords: npt.NDArray[np.float64], initial_dimension: int = 0
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """Build the packed kd-tree of the rows of ``coords`` (C-contiguous, shape (n, dims)).

    Median pivots by quickselect, branching dimensions round-robin from
    ``initial_dimension``. Values compare as in DuckDB: -0.0 equals 0.0 and
    NaN sorts above +inf.

    Returns
    -------
    tuple
        ``(records, left, right)``: per node in pre-order, the row of its record
        and the node indices of its children (-1 for none).
    """

def kdtree_search(
    coords: npt.NDArray[np.float64],
    records: npt.NDArray[np.uint32],
    left: npt.NDArray[np.int32],
    right: npt.NDArray[np.int32],
    initial_dimension: int,
    lo: list[float],
    hi: list[float],
) -> npt.NDArray[np.uint32]:
    """Rows of ``coords`` with ``lo[d] <= value <= hi[d]`` in every dimension, through the tree.

    Bounds are inclusive in DuckDB's order; ``-inf`` as ``lo`` opens a range
    below and ``nan`` as ``hi`` opens it above with NaN included. Rows come
    back ascending. Raises ``ValueError`` for arrays that are not a tree of
    these rows.
    """

def kdtree_partition(
    coords: npt.NDArray[np.float64], max_records: int
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """Kd-tree partitioning (MDDS IV-B) of the rows of ``coords`` into segments of at most ``max_records``.

    Builds the chunk's kd-tree, then from the root, larger subtrees first,
    makes each subtree that fits a segment. Returns per row its segment
    number, and per segment the depth of its root (its own kd-tree starts
    from that dimension).
    """

def box_scan(
    coords: npt.NDArray[np.float64], lo: list[float], hi: list[float]
) -> npt.NDArray[np.uint32]:
    """The rows :func:`kdtree_search` finds, by looking at every row (the sequential iterator)."""

@final
class SegmentTree:
    """An R*-tree of segment boxes over 1 to 9 indexing dimensions (thread-safe).

    Queries return a superset of the segments whose boxes meet the query box
    (boxes are indexed under a monotone, bounded transform of the values).
    """

    def __new__(cls, dims: int) -> SegmentTree: ...
    @property
    def dims(self) -> int:
        """The number of indexing dimensions."""
    def __len__(self) -> int: ...
    def insert(self, id: int, lo: list[float], hi: list[float]) -> None:
        """Add segment ``id`` with the box ``[lo, hi]``."""
    def remove(self, id: int, lo: list[float], hi: list[float]) -> bool:
        """Remove segment ``id`` (with the box it was inserted with); whether it was there."""
    def query(self, lo: list[float], hi: list[float]) -> npt.NDArray[np.uint64]:
        """Ids of the segments whose boxes may meet ``[lo, hi]``, ascending."""
