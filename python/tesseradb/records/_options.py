"""A stream's settings (:class:`StreamOptions`), checked when made: MDDS's knobs, the
segment cache, the writers, and the stream's indexes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tesseradb.errors import InvalidArgumentError
from tesseradb.records._segments import DEFAULT_CHUNK_RECORDS, DEFAULT_SCHEME, check_segmentation

__all__ = ["StreamOptions"]


@dataclass(frozen=True)
class StreamOptions:
    """A stream's settings, with MDDS's meanings (defaults from its Table III where it gives them)."""

    max_chunk_records: int = (
        DEFAULT_CHUNK_RECORDS  # records per chunk, the unit split into segments
    )
    segment_bytes: int = 1 << 20  # target segment size (the paper's 1M)
    scheme: str = DEFAULT_SCHEME  # segmentation: kd-tree partitioning or random assignment
    overpacking: float = 4.0  # kd-tree scheme: a segment may hold this many x segment_bytes
    iterator: str = "auto"  # record iterator for queries: auto, kdtree or sequential
    cache_bytes: int = 1 << 30  # memory for segments read back from disk
    writer_threads: int = 1
    writer_period_ms: int = 500  # how often writers wake to persist queued segments
    compression: str = "zstd"  # per column in segment files: zstd or none
    seed: int | None = None  # for the random scheme, to make segmentation reproducible
    # key orders per segment, each on a few indexing fields (a composite index, as
    # CREATE INDEX ... (element_id, element_value)): see SegmentStore
    indexes: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "indexes", _index_lists(self.indexes))
        # types first: a string where a number belongs is a clear error, not a TypeError
        for name, wanted in (
            ("max_chunk_records", int),
            ("segment_bytes", int),
            ("overpacking", (int, float)),
            ("cache_bytes", int),
            ("writer_threads", int),
            ("writer_period_ms", (int, float)),
            ("scheme", str),
            ("iterator", str),
            ("compression", str),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, wanted):
                kind = "a string" if wanted is str else "a number"
                raise InvalidArgumentError(
                    f"stream option {name} must be {kind}, not {type(value).__name__} {value!r}"
                )
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int)
        ):
            raise InvalidArgumentError(f"stream option seed must be an integer, not {self.seed!r}")
        check_segmentation(
            self.max_chunk_records, self.segment_bytes, self.scheme, self.overpacking, self.iterator
        )
        if self.compression not in ("zstd", "none"):
            raise InvalidArgumentError(
                f"compression must be 'zstd' or 'none', not {self.compression!r}"
            )
        if self.writer_threads < 1:
            raise InvalidArgumentError(
                f"writer_threads must be at least 1, not {self.writer_threads}"
            )
        if self.cache_bytes < 0 or self.writer_period_ms < 0:
            raise InvalidArgumentError("cache_bytes and writer_period_ms must not be negative")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StreamOptions:
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise InvalidArgumentError(
                f"unknown stream options {sorted(unknown)}; "
                f"options are {', '.join(cls.__dataclass_fields__)}"
            )
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _index_lists(indexes: Any) -> tuple[tuple[str, ...], ...]:
    """The ``indexes`` option as a tuple of tuples of field names, or a clear error."""
    wrong = InvalidArgumentError(
        "stream option indexes must be a list of lists of field names, "
        f"e.g. [['element_id', 'element_value']], not {indexes!r}"
    )
    if isinstance(indexes, (str, bytes)) or not isinstance(indexes, (list, tuple)):
        raise wrong
    out = []
    for index in indexes:
        if isinstance(index, (str, bytes)) or not isinstance(index, (list, tuple)):
            raise wrong
        if not index or not all(isinstance(name, str) for name in index):
            raise wrong
        out.append(tuple(index))
    return tuple(out)
