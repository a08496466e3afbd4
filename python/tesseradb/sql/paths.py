"""Paths into a JSON column as the columns of a predicate: ``doc->>'$.a.b' = 'x'``.

A relation holding JSON documents (a collection's ``doc``) can narrow its scan
by a condition on a value inside them when it has indexes by path, as the
Argo mappings do. The analysis names such a value by a :class:`JsonPath`,
whose :attr:`~JsonPath.key` stands in a :class:`~tesseradb.sql.predicate.Predicate`
beside the real columns; the engine hands these keys only to relations that
declare :class:`~tesseradb.sql.relation.PathFiltering` and removes them for
every other relation.

The domain of a path key holds the values DuckDB computes for the
expression: the text of the JSON value (``->>``, ``json_extract_string``) or
that value cast to a number (``(doc->>'a')::BIGINT``, ``CAST(doc->'a' AS
DOUBLE)``). Turning that into a superset of the matching documents is the
relation's business: a number's text is also text, a string may cast to a
number, ``true`` cast from JSON is 1.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = ["JsonPath"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CASTS = {"int": "BIGINT", "float": "DOUBLE"}
_KEY = re.compile(
    r"\(?(?P<column>[A-Za-z_][A-Za-z0-9_]*)(?P<operator>->>|->)'(?P<path>\$[^']*)'"
    r"(?:\)::(?P<cast>BIGINT|DOUBLE))?"
)
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]+)\]")


@dataclass(frozen=True)
class JsonPath:
    """A value inside the JSON column ``column`` at ``steps`` (keys and array subscripts).

    ``operator`` is ``->>`` (the value's text, SQL NULL for JSON null) or
    ``->`` (the JSON value itself, which only a ``cast`` makes comparable);
    ``cast`` is None, ``"int"`` (any integer type) or ``"float"`` (any other
    number type: DOUBLE, FLOAT, DECIMAL, HUGEINT, unsigned).
    """

    column: str
    steps: tuple[str | int, ...]
    operator: str = "->>"
    cast: str | None = None

    def __post_init__(self) -> None:
        if not _IDENTIFIER.fullmatch(self.column):
            raise ValueError(f"not a plain column name: {self.column!r}")
        if not self.steps or not isinstance(self.steps[0], str):
            raise ValueError("a path starts with a key")
        for step in self.steps:
            if isinstance(step, str) and not _IDENTIFIER.fullmatch(step):
                raise ValueError(f"not a plain key: {step!r}")
            if isinstance(step, int) and (isinstance(step, bool) or step < 0):
                raise ValueError(f"not an array subscript: {step!r}")
        if self.operator not in ("->>", "->"):
            raise ValueError(f"not a JSON operator: {self.operator!r}")
        if self.cast not in (None, *_CASTS):
            raise ValueError(f"not a cast class: {self.cast!r}")
        if self.operator == "->" and self.cast is None:
            raise ValueError("a JSON value is compared only once cast")

    @property
    def path(self) -> str:
        """The path as DuckDB writes it: ``$.a.b[0]``."""
        return "$" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in self.steps)

    @property
    def key(self) -> str:
        """The predicate column standing for this value: ``doc->>'$.a'``, ``(doc->>'$.a')::BIGINT``."""
        text = f"{self.column}{self.operator}'{self.path}'"
        return text if self.cast is None else f"({text})::{_CASTS[self.cast]}"

    def readings(self) -> list[tuple[str | int, ...]]:
        """The paths DuckDB may have meant: ``steps``, and for a longer path written without
        ``$`` (``doc->>'a.b'``), the one key ``"a.b"``. The SQL parser gives both spellings
        the same tree, so a superset must look at both."""
        if len(self.steps) == 1:
            return [self.steps]
        return [self.steps, (self.path[2:],)]

    @classmethod
    def parse(cls, key: str) -> JsonPath | None:
        """The path a predicate column stands for, or None for a plain column."""
        return _parsed(cls, key)

    @classmethod
    def _parse(cls, key: str) -> JsonPath | None:
        match = _KEY.fullmatch(key)
        if match is None:
            return None
        steps: list[str | int] = []
        text, position = match["path"], 1
        while position < len(text):
            step = _STEP.match(text, position)
            if step is None:
                return None
            steps.append(step[1] if step[1] is not None else int(step[2]))
            position = step.end()
        cast = {v: k for k, v in _CASTS.items()}.get(match["cast"] or "")
        try:
            path = cls(match["column"], tuple(steps), match["operator"], cast)
        except ValueError:
            return None
        return path if path.key == key else None


@functools.lru_cache(maxsize=4096)
def _parsed(cls: type[JsonPath], key: str) -> JsonPath | None:
    # a statement asks for the same keys several times (the pushdown, the mapping's
    # condition, a lookup), and a JsonPath never changes
    return cls._parse(key)
