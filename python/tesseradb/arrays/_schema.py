"""Array schemas (SciDB's array model, SS-DB §III-A): named dimensions and attributes.

A dimension is a named integer axis ``[start, end)`` (``end=None``: unbounded,
growing by appending; at most one per array), cut into chunks of ``chunk``
cells, with an ``overlap`` (SciDB's halo) that operators read from the
neighbouring chunks. An attribute is a named numeric cell value with a fill
value (what never-written cells hold) and a nullable flag (whether the fill
value means NULL). An array may sit at an ``origin`` of a world coordinate
system: world coordinate = index + origin, per dimension.

Indexes (what ``arr[...]`` takes) run from ``start``; world coordinates are
what SQL and xarray show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tesseradb.errors import ArraySchemaError, LimitExceededError

__all__ = ["ATTRIBUTE_TYPES", "ArraySchema", "ArraySchemaError", "Attribute", "Dimension"]

ATTRIBUTE_TYPES = (
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "bool",
)
_TYPE_ALIASES = {"float": "float32", "double": "float64", "boolean": "bool"}
CODECS = ("zstd", "blosc", "none")
# the levels each codec takes (zstd's fast negative ones too; none ignores its level)
CODEC_LEVELS = {"zstd": (-131072, 22), "blosc": (0, 9), "none": (-131072, 22)}
SCHEMA_VERSION = 1
# Limits, checked when an array is created (docs/reliability.md lists them)
MAX_DIMENSIONS = 32
MAX_ATTRIBUTES = 1024
MAX_CHUNK_CELLS = 1 << 28  # a chunk is decoded whole: 2 GiB of float64
MAX_COORDINATE = 1 << 62  # Zarr's shapes are 64-bit; room for halos and offsets


@dataclass(frozen=True)
class Dimension:
    """A named integer dimension ``[start, end)``; ``end=None`` makes it unbounded."""

    name: str
    start: int = 0
    end: int | None = None
    chunk: int = 1000
    overlap: int = 0

    @property
    def bounded(self) -> bool:
        return self.end is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "start": self.start,
            "end": self.end,
            "chunk": self.chunk,
            "overlap": self.overlap,
        }


@dataclass(frozen=True)
class Attribute:
    """A named numeric attribute with its fill value; ``nullable``: the fill value reads as NULL."""

    name: str
    dtype: str = "float64"
    fill: Any = None  # None: 0 (False for bool), or NaN for a nullable float
    nullable: bool = False

    @property
    def numpy_dtype(self) -> Any:
        import numpy as np

        return np.dtype(self.dtype)

    def null_mask(self, values: Any) -> Any:
        """Where ``values`` are NULL (the fill value of a nullable attribute); None if it is not nullable."""
        import numpy as np

        if not self.nullable:
            return None
        if isinstance(self.fill, float) and math.isnan(self.fill):
            return np.isnan(values)
        return values == self.fill

    def to_dict(self) -> dict[str, Any]:
        fill = self.fill
        if isinstance(fill, float) and math.isnan(fill):
            fill = "NaN"  # JSON has no NaN
        return {"name": self.name, "dtype": self.dtype, "fill": fill, "nullable": self.nullable}


@dataclass(frozen=True)
class ArraySchema:
    dims: tuple[Dimension, ...]
    attrs: tuple[Attribute, ...]
    origin: tuple[int, ...] = ()
    codec: str = "zstd"
    level: int = 3
    extra: dict[str, Any] = field(default_factory=dict)  # user metadata kept with the array

    # --- construction and validation --------------------------------------------
    @classmethod
    def build(
        cls,
        dims: Any,
        attrs: Any,
        origin: Any = None,
        codec: str = "zstd",
        level: int = 3,
        extra: dict[str, Any] | None = None,
    ) -> ArraySchema:
        """A validated schema from :class:`Dimension`/:class:`Attribute` objects, dicts or shorthands.

        ``attrs`` may be a mapping of name to dtype (``{"v1": "int32"}``).
        """
        dim_list = [_dimension(d, i) for i, d in enumerate(_as_list(dims, "dims"))]
        if isinstance(attrs, dict):
            attrs = [
                {"name": k, "dtype": v} if isinstance(v, str) else {"name": k, **v}
                for k, v in attrs.items()
            ]
        attr_list = [_attribute(a, i) for i, a in enumerate(_as_list(attrs, "attrs"))]
        if not dim_list:
            raise ArraySchemaError("an array needs at least one dimension")
        if not attr_list:
            raise ArraySchemaError("an array needs at least one attribute")
        if len(dim_list) > MAX_DIMENSIONS or len(attr_list) > MAX_ATTRIBUTES:
            raise LimitExceededError(
                f"{len(dim_list)} dimensions and {len(attr_list)} attributes: an array has at most "
                f"{MAX_DIMENSIONS} dimensions and {MAX_ATTRIBUTES:,} attributes"
            )
        cells = math.prod(d.chunk for d in dim_list)
        if cells > MAX_CHUNK_CELLS:
            raise LimitExceededError(
                f"chunks of {cells:,} cells: a chunk holds at most {MAX_CHUNK_CELLS:,} cells "
                "(it is read and decoded whole)"
            )
        names = [d.name for d in dim_list] + [a.name for a in attr_list]
        lowered = [n.lower() for n in names]
        for i, n in enumerate(lowered):
            if n in lowered[:i]:
                raise ArraySchemaError(
                    f"name {names[i]!r} is used twice (dimensions and attributes share one namespace, case-insensitive)"
                )
        unbounded = [d.name for d in dim_list if not d.bounded]
        if len(unbounded) > 1:
            raise ArraySchemaError(
                f"at most one dimension may be unbounded; {', '.join(unbounded)} all are"
            )
        if origin is None:
            origin_t = (0,) * len(dim_list)
        else:
            origin_t = tuple(_integer(o, f"origin[{i}]") for i, o in enumerate(origin))
            if len(origin_t) != len(dim_list):
                raise ArraySchemaError(
                    f"origin has {len(origin_t)} values for {len(dim_list)} dimensions"
                )
        if codec not in CODECS:
            raise ArraySchemaError(f"unknown codec {codec!r}; one of {', '.join(CODECS)}")
        level = _integer(level, "level")
        low, high = CODEC_LEVELS.get(codec, (level, level))
        if not low <= level <= high:
            raise ArraySchemaError(
                f"level {level} is out of range for codec {codec!r}: {low} to {high}"
            )
        return cls(tuple(dim_list), tuple(attr_list), origin_t, codec, level, dict(extra or {}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SCHEMA_VERSION,
            "dims": [d.to_dict() for d in self.dims],
            "attrs": [a.to_dict() for a in self.attrs],
            "origin": list(self.origin),
            "codec": self.codec,
            "level": self.level,
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> ArraySchema:
        if spec.get("version", SCHEMA_VERSION) > SCHEMA_VERSION:
            raise ArraySchemaError(
                f"array schema version {spec['version']} is newer than this TesseraDB knows ({SCHEMA_VERSION})"
            )
        return cls.build(
            spec["dims"],
            spec["attrs"],
            spec.get("origin"),
            spec.get("codec", "zstd"),
            spec.get("level", 3),
            spec.get("extra"),
        )

    # --- questions -------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.dims)

    @property
    def dim_names(self) -> list[str]:
        return [d.name for d in self.dims]

    @property
    def attr_names(self) -> list[str]:
        return [a.name for a in self.attrs]

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        return tuple(d.chunk for d in self.dims)

    @property
    def unbounded_axis(self) -> int | None:
        return next((i for i, d in enumerate(self.dims) if not d.bounded), None)

    def world_shift(self, axis: int) -> int:
        """What turns a position (0-based, as Zarr indexes) into a world coordinate on ``axis``."""
        return self.dims[axis].start + self.origin[axis]

    def world_axis(self, axis: int, lo: int, hi: int) -> Any:
        """World coordinates (int64) of positions ``lo <= p < hi`` on ``axis``."""
        import numpy as np

        return np.arange(lo, hi, dtype=np.int64) + self.world_shift(axis)

    def dim_index(self, name: str) -> int:
        for i, d in enumerate(self.dims):
            if d.name.lower() == name.lower():
                return i
        raise ArraySchemaError(
            f"unknown dimension {name!r}; the dimensions are {', '.join(self.dim_names)}"
        )

    def attribute(self, name: str) -> Attribute:
        if not isinstance(name, str):
            raise ArraySchemaError(
                f"an attribute is named by a str, not {type(name).__name__}; "
                f"the attributes are {', '.join(self.attr_names)}"
            )
        for a in self.attrs:
            if a.name.lower() == name.lower():
                return a
        raise ArraySchemaError(
            f"unknown attribute {name!r}; the attributes are {', '.join(self.attr_names)}"
        )


def _as_list(value: Any, what: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ArraySchemaError(f"{what} must be a list, not {type(value).__name__}")


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        import numpy as np

        if not isinstance(value, np.integer):
            raise ArraySchemaError(f"{what} must be an integer, not {value!r}")
    return int(value)


def _name(value: Any, what: str) -> str:
    from tesseradb.catalog import validate_name
    from tesseradb.errors import InvalidNameError

    if not isinstance(value, str):
        raise ArraySchemaError(f"{what} needs a name (a string), not {value!r}")
    try:
        validate_name(value, what)
    except InvalidNameError as err:
        raise ArraySchemaError(str(err)) from None
    return value


def _dimension(value: Any, position: int) -> Dimension:
    if isinstance(value, Dimension):
        value = value.to_dict()
    if not isinstance(value, dict):
        raise ArraySchemaError(
            f"dimension {position} must be a Dimension or a dict, not {type(value).__name__}"
        )
    unknown = set(value) - {"name", "start", "end", "chunk", "overlap"}
    if unknown:
        raise ArraySchemaError(f"dimension {position}: unknown keys {sorted(unknown)}")
    name = _name(value.get("name"), "dimension")
    start = _integer(value.get("start", 0), f"dimension {name!r} start")
    for what, bound in (("start", start), ("end", value.get("end"))):
        if isinstance(bound, int) and not -MAX_COORDINATE <= bound <= MAX_COORDINATE:
            raise LimitExceededError(
                f"dimension {name!r}: {what} {bound} is outside the coordinates an array "
                f"can hold (±2**62)"
            )
    end = value.get("end")
    if end is not None:
        end = _integer(end, f"dimension {name!r} end")
        if end <= start:
            raise ArraySchemaError(f"dimension {name!r}: end {end} must be above start {start}")
    chunk = _integer(value.get("chunk", 1000), f"dimension {name!r} chunk")
    if chunk < 1:
        raise ArraySchemaError(f"dimension {name!r}: chunk length must be positive, not {chunk}")
    overlap = _integer(value.get("overlap", 0), f"dimension {name!r} overlap")
    if not 0 <= overlap <= chunk:
        raise ArraySchemaError(
            f"dimension {name!r}: overlap {overlap} must be between 0 and the chunk length {chunk}"
        )
    return Dimension(name, start, end, chunk, overlap)


def _attribute(value: Any, position: int) -> Attribute:
    import numpy as np

    if isinstance(value, Attribute):
        value = value.to_dict()
    if not isinstance(value, dict):
        raise ArraySchemaError(
            f"attribute {position} must be an Attribute or a dict, not {type(value).__name__}"
        )
    unknown = set(value) - {"name", "dtype", "fill", "nullable"}
    if unknown:
        raise ArraySchemaError(f"attribute {position}: unknown keys {sorted(unknown)}")
    name = _name(value.get("name"), "attribute")
    raw = value.get("dtype", "float64")
    dtype = _TYPE_ALIASES.get(str(raw), str(np.dtype(raw)) if not isinstance(raw, str) else raw)
    if dtype not in ATTRIBUTE_TYPES:
        raise ArraySchemaError(
            f"attribute {name!r}: unknown type {raw!r}; one of {', '.join(ATTRIBUTE_TYPES)}"
        )
    nullable = value.get("nullable", False)
    if not isinstance(nullable, bool):
        raise ArraySchemaError(f"attribute {name!r}: nullable must be true or false")
    fill = value.get("fill")
    np_type = np.dtype(dtype)
    if fill is None:
        fill = math.nan if (nullable and np_type.kind == "f") else (False if dtype == "bool" else 0)
    if fill == "NaN":
        fill = math.nan
    try:
        cast = np.array(fill).astype(np_type)
        same = (cast == fill) or (np_type.kind == "f" and math.isnan(float(fill)))
    except (TypeError, ValueError, OverflowError):
        same = False
    if not same or isinstance(fill, str):
        raise ArraySchemaError(f"attribute {name!r}: fill value {fill!r} is not a {dtype}")
    fill = cast.item()
    return Attribute(name, dtype, fill, nullable)
