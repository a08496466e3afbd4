"""Reusing the analysis of a statement text that runs again (a query loop, a dashboard).

Parsing a statement with sqlglot and resolving what it reads takes from a
few hundred microseconds to a millisecond, which is much of a selective
query. What does not depend on the parameters is kept as a
:class:`~tesseradb.sql.analysis.Prepared` per text, so a point query run
with a new key each time only derives its predicates again. Preparing is a
function of the text and of what the namespace answered when it looked
names up (relation schemas, plain tables' columns): an entry keeps those
answers and is reused only while the same lookups give the same answers,
so a relation created, dropped or altered since, by this process or
another, makes the statement be prepared afresh. The analyses of the last
few parameter values of each text are kept too: deriving a WHERE of many
float comparisons (the MDDS taxi boxes) costs about a millisecond, and a
dashboard runs the very same statement again.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from tesseradb.sql.analysis import Analysis, ColumnsLookup, Prepared, SchemaLookup, prepare

__all__ = ["AnalysisCache"]

CAPACITY = 256  # statement texts
BOUND_PER_TEXT = 8  # parameter values whose analysis is kept per text
MAX_TEXT = 64 << 10  # longer texts are analysed every time (generated, rarely repeated)


class _Uncacheable(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class _Entry:
    prepared: Prepared  # only read: each bind makes objects of its own
    schemas: tuple[tuple[str, Any], ...]  # (name, schema or None) as looked up
    columns: tuple[tuple[str, Any], ...]  # (name, columns or None) as looked up
    # analyses by parameters (never handed out: callers get copies they may change)
    bound: OrderedDict[Any, Analysis] = dataclasses.field(default_factory=OrderedDict)
    # the analysis for any parameters, once one showed the text reads no relation: binding
    # only derives relations' predicates, so the parameters change nothing then
    unbound: list[Analysis] = dataclasses.field(default_factory=list)

    def bind(self, params: Any, lock: threading.Lock) -> Analysis:
        if self.unbound:
            return _copy(self.unbound[0])
        try:
            key = _frozen(params)
        except _Uncacheable:
            return self.prepared.bind(params)
        with lock:
            analysis = self.bound.get(key)
            if analysis is not None:
                self.bound.move_to_end(key)
                return _copy(analysis)
        analysis = self.prepared.bind(params)
        if not analysis.relations:
            self.unbound.append(_copy(analysis))
            return analysis
        with lock:
            self.bound[key] = _copy(analysis)
            while len(self.bound) > BOUND_PER_TEXT:
                self.bound.popitem(last=False)
        return analysis


class AnalysisCache:
    """The prepared analyses of the most recent read-only statement texts."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # reuses so far (tests read it)

    def analyse(
        self, text: str, params: Any, schema_of: SchemaLookup, columns_of: ColumnsLookup
    ) -> Analysis:
        """``analyse(text, params, schema_of, columns_of)``, prepared once while nothing it
        looked up changes."""
        if len(text) > MAX_TEXT:
            return prepare(text, schema_of, columns_of).bind(params)
        with self._lock:
            entry = self._entries.get(text)
            if entry is not None:
                self._entries.move_to_end(text)
        if entry is not None and _still_valid(entry, schema_of, columns_of):
            with self._lock:
                self.hits += 1
            return entry.bind(params, self._lock)
        schemas: dict[str, Any] = {}
        columns: dict[str, Any] = {}
        prepared = prepare(text, _recording(schema_of, schemas), _recording(columns_of, columns))
        if not (prepared.parsed and prepared.is_query):
            return prepared.bind(params)
        stored = _Entry(prepared, tuple(schemas.items()), tuple(columns.items()))
        with self._lock:
            self._entries[text] = stored
            self._entries.move_to_end(text)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return stored.bind(params, self._lock)


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
    # (a shallow copy with its containers replaced: dataclasses.replace, which calls the
    # initialiser with every field, cost a small statement 6 µs)
    copied = copy.copy(analysis)
    copied.relations = relations
    copied.table_names = set(analysis.table_names)
    copied.writes = list(analysis.writes)
    copied.equijoins = list(analysis.equijoins)
    copied.prefetched = dict(analysis.prefetched)
    return copied


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
