"""Memory limits: how much memory each DuckDB instance a database opens may use.

``tesseradb.connect(path, memory_limit=...)`` takes bytes (an int) or a size as
DuckDB writes one (``"2GB"``, ``"512MiB"``); the value is checked here once and
handed to every DuckDB instance that holds the database's data (the SQL
engine's, a served restricted session's, the DuckDB document backend's), each
of which then spills to disk or refuses a statement rather than grow past it.
A SQLite document backend sizes its page cache (which also bounds its sorter,
the index builds of a bulk load) and its memory map from the same value.
"""

from __future__ import annotations

import re
from typing import Any

from tesseradb.errors import InvalidArgumentError

__all__ = ["MEMORY_LIMIT_VARIABLE", "MIN_MEMORY_LIMIT", "duckdb_memory_limit", "limit_bytes"]

# the limit when connect() is given none (every `tessera` command, a server)
MEMORY_LIMIT_VARIABLE = "TESSERA_MEMORY_LIMIT"

# below this DuckDB fails to run even small statements (its per-thread buffers)
MIN_MEMORY_LIMIT = 64 * 2**20

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)\s*", re.IGNORECASE)
_UNITS = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def duckdb_memory_limit(value: Any, where: str = "connect") -> str | None:
    """``value`` as DuckDB's ``memory_limit`` setting (None: DuckDB's default, 80% of
    the machine's memory), or :class:`InvalidArgumentError` naming what is wrong."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        _check_floor(value, value, where)
        return f"{value}B"
    if isinstance(value, str):
        found = _SIZE.fullmatch(value)
        if found is None:
            raise InvalidArgumentError(
                f"{where}: memory_limit {value!r} is not a size: bytes as an int, or a "
                "number and a unit such as '2GB' or '512MiB'"
            )
        number, unit = found.groups()
        _check_floor(_size(number, unit), value, where)
        return f"{number}{unit.upper().replace('I', 'i')}"
    raise InvalidArgumentError(
        f"{where}: memory_limit is bytes (an int) or a size such as '2GB', "
        f"not {type(value).__name__}"
    )


def _check_floor(size: float, value: Any, where: str) -> None:
    if size < MIN_MEMORY_LIMIT:
        raise InvalidArgumentError(
            f"{where}: memory_limit {value!r} is below {MIN_MEMORY_LIMIT // 2**20} MiB, the "
            "least a DuckDB instance runs in"
        )


def limit_bytes(setting: str) -> int:
    """The bytes of a setting :func:`duckdb_memory_limit` returned (``"2GB"``, ``"512MiB"``)."""
    found = _SIZE.fullmatch(setting)
    if found is None:  # (only ever given what duckdb_memory_limit made)
        raise InvalidArgumentError(f"memory_limit {setting!r} is not a size")
    return int(_size(*found.groups()))


def _size(number: str, unit: str) -> float:
    """The bytes of a size's number and unit as ``_SIZE`` found them."""
    return float(number) * _UNITS[unit.upper()]
