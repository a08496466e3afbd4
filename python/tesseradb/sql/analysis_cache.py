"""Reusing the analysis of a statement text that runs again (a query loop, a dashboard).

Parsing a statement with sqlglot and deriving its pushdown takes about a
millisecond, which is most of a selective query on a record stream (the
MDDS taxi queries run in 2-7 ms). ``analyse`` is a function of the text,
the parameters and what the namespace answered when it looked names up
(relation schemas, plain tables' columns): an entry keeps those answers and
is reused only while the same lookups give the same answers, so a relation
created, dropped or altered since, by this process or another, makes the
statement be analysed afresh.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from tesseradb.sql.analysis import Analysis, ColumnsLookup, SchemaLookup, analyse

__all__ = ["AnalysisCache"]

CAPACITY = 256  # statement texts
MAX_TEXT = 64 << 10  # longer texts are analysed every time (generated, rarely repeated)


class _Uncacheable(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class _Entry:
    analysis: Analysis  # never handed out: callers get copies they may change
    schemas: tuple[tuple[str, Any], ...]  # (name, schema or None) as looked up
    columns: tuple[tuple[str, Any], ...]  # (name, columns or None) as looked up


class AnalysisCache:
    """Analyses of the most recent read-only statements, by (text, parameters)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, Any], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # reuses so far (tests read it)

    def analyse(
        self, text: str, params: Any, schema_of: SchemaLookup, columns_of: ColumnsLookup
    ) -> Analysis:
        """``analyse(text, params, schema_of, columns_of)``, reused when nothing it saw changed."""
        try:
            key = (text, _frozen(params)) if len(text) <= MAX_TEXT else None
        except _Uncacheable:
            key = None
        if key is None:
            return analyse(text, params, schema_of, columns_of)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None and _still_valid(entry, schema_of, columns_of):
            with self._lock:
                self.hits += 1
            return _copy(entry.analysis)
        schemas: dict[str, Any] = {}
        columns: dict[str, Any] = {}
        analysis = analyse(
            text, params, _recording(schema_of, schemas), _recording(columns_of, columns)
        )
        if analysis.parsed and analysis.is_query:
            stored = _Entry(_copy(analysis), tuple(schemas.items()), tuple(columns.items()))
            with self._lock:
                self._entries[key] = stored
                self._entries.move_to_end(key)
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)
        return analysis


def _recording(lookup: Callable[[str], Any], seen: dict[str, Any]) -> Callable[[str], Any]:
    def recorded(name: str) -> Any:
        answer = lookup(name)
        seen[name] = answer
        return answer

    return recorded


def _still_valid(entry: _Entry, schema_of: SchemaLookup, columns_of: ColumnsLookup) -> bool:
    for name, schema in entry.schemas:
        now = schema_of(name)
        if (now is None) != (schema is None) or (now is not None and not now.equals(schema)):
            return False
    return all(columns_of(name) == cols for name, cols in entry.columns)


def _copy(analysis: Analysis) -> Analysis:
    """A copy whose mutable parts (the engine narrows predicates, adds notes) are its own;
    predicates themselves are immutable and shared."""
    relations = {
        key: dataclasses.replace(
            use,
            aliases=list(use.aliases),
            notes=list(use.notes),
            columns=None if use.columns is None else list(use.columns),
        )
        for key, use in analysis.relations.items()
    }
    return dataclasses.replace(
        analysis,
        relations=relations,
        table_names=set(analysis.table_names),
        writes=list(analysis.writes),
        equijoins=list(analysis.equijoins),
        prefetched=dict(analysis.prefetched),
    )


def _frozen(value: Any) -> Any:
    """A hashable key for the parameters that tells apart values the analysis tells apart
    (``1``, ``1.0`` and ``True`` are different literals to it)."""
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_frozen(v) for v in value))
    if isinstance(value, dict):
        return ("map", tuple(sorted((str(k), _frozen(v)) for k, v in value.items())))
    try:
        hash(value)
    except TypeError:
        raise _Uncacheable from None
    return (type(value), value)
