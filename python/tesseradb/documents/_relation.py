"""A collection as a relation for ``db.sql``: columns ``objid`` (BIGINT) and ``doc`` (JSON).

Documents can then meet arrays, streams and attached files in one statement
through DuckDB's JSON functions (``doc->>'str1'``). A range or set on
``objid`` is pushed down, and so is a condition on a value inside ``doc``
(``doc->>'$.a' = 'x'``, ``(doc->>'a')::BIGINT BETWEEN 5 AND 9``): it
becomes an Argo condition answered by the mapping's indexes, so only the
objects that may match are rebuilt. DuckDB filters everything again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tesseradb.documents._argosql import (
    And,
    Between,
    Compare,
    Condition,
    Exists,
    In,
    Like,
    Or,
    PathRef,
)
from tesseradb.sql.paths import JsonPath
from tesseradb.sql.predicate import ColumnDomain, Interval, Predicate
from tesseradb.sql.relation import Estimate

if TYPE_CHECKING:
    from tesseradb.documents._collection import Collection

__all__ = ["CollectionRelation", "path_condition"]

SCAN_BATCH_OBJECTS = 50_000
# how far a number may lie outside a range and still cast into it (inclusive):
# an integer or decimal cast rounds to nearest (4.5 is 5), a FLOAT keeps 24 bits
_CAST_SLACK = 0.5
_CAST_SLACK_RELATIVE = 1e-6


class CollectionRelation:
    """The objects of one collection, rebuilt, as Arrow batches of (objid, doc)."""

    def __init__(self, collection: Collection) -> None:
        self.collection = collection
        self.name = collection.name

    def schema(self) -> pa.Schema:
        return pa.schema([("objid", pa.int64()), ("doc", pa.json_())])

    def path_columns(self) -> list[str]:
        return ["doc"]

    def _condition(self, predicate: Predicate | None) -> Condition | None:
        """The Argo condition the predicate's paths into ``doc`` imply, or None."""
        if predicate is None:
            return None
        parts = []
        for column in predicate:
            path = JsonPath.parse(column)
            if path is None or path.column.lower() != "doc":
                continue
            part = path_condition(path, predicate[column])
            if part is not None:
                parts.append(part)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def _objid_bounds(self, predicate: Predicate | None) -> tuple[str, list[int]]:
        if predicate is None:
            return "1 = 1", []
        lower = {k.lower(): v for k, v in predicate.items()}
        domain = lower.get("objid")
        if domain is None:
            return "1 = 1", []
        hull = domain.ranges.hull()
        if hull is None:
            return "1 = 0", []
        parts, params = [], []
        if hull.lo is not None and not (isinstance(hull.lo, float) and math.isnan(hull.lo)):
            parts.append("objid >= ?")
            params.append(math.floor(hull.lo))
        if hull.hi is not None and not (isinstance(hull.hi, float) and math.isnan(hull.hi)):
            parts.append("objid <= ?")
            params.append(math.ceil(hull.hi))
        return (" AND ".join(parts) or "1 = 1"), params

    def scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> pa.RecordBatchReader:
        full = self.schema()
        names = full.names if columns is None else list(columns)
        schema = pa.schema([full.field(n) for n in names])
        if predicate is not None and predicate.is_false:
            return pa.RecordBatchReader.from_batches(schema, iter(()))
        condition = self._condition(predicate)
        collection = self.collection
        with collection.transaction():
            if condition is None and "doc" in names:  # every object in the objid range
                where, params = self._objid_bounds(predicate)
                texts = collection.mapping.texts(where, tuple(params))
            else:  # the objects the indexes may match, or objids alone (nothing rebuilt)
                ids = self._candidates(predicate, condition)
                if "doc" in names:
                    texts = collection._texts(ids)
        if "doc" not in names:
            found = pa.record_batch([pa.array(ids, pa.int64())], names=["objid"])
            return pa.RecordBatchReader.from_batches(schema, iter([found] if names else []))

        def batches() -> Iterator[pa.RecordBatch]:
            objids: list[int] = []
            docs: list[str] = []
            for objid, text in texts:
                objids.append(objid)
                docs.append(text)
                if len(objids) >= SCAN_BATCH_OBJECTS:
                    yield batch(objids, docs)
                    objids, docs = [], []
            if objids:
                yield batch(objids, docs)

        def batch(objids: list[int], docs: list[str]) -> pa.RecordBatch:
            made = {"objid": pa.array(objids, pa.int64()), "doc": pa.array(docs, pa.json_())}
            return pa.record_batch([made[n] for n in names], schema=schema)

        return pa.RecordBatchReader.from_batches(schema, batches())

    def read_paths(
        self, columns: Sequence[str], predicate: Predicate | None, max_rows: int
    ) -> pa.Table | None:
        """The objects a scan under ``predicate`` gives, with ``columns``: ``objid``,
        ``doc``, and values at one-key paths into ``doc`` as DuckDB computes them.

        DuckDB's ``->>`` gives a string itself, an integer's digits, ``true`` or
        ``false``, and NULL for JSON null or a missing key; its BIGINT and DOUBLE
        casts of that text give the integer. Everything else (a float, whose text
        is DuckDB's own rendering; an object or array; a string or boolean cast to
        a number; an integer past int64, or past 2**53 as a DOUBLE) declines, and
        so do paths of several keys, which DuckDB may read as one key with dots.
        """
        import json

        wanted = [(c, JsonPath.parse(c)) for c in columns]
        for column, path in wanted:
            if path is None:
                if column not in ("objid", "doc"):
                    return None
            elif path.column.lower() != "doc" or path.operator != "->>" or len(path.steps) != 1:
                return None
        collection = self.collection
        with collection.transaction():  # (one state of the collection for the statement)
            ids = self._candidates(predicate, self._condition(predicate))
            if len(ids) > max_rows:
                return None
            texts = collection._texts(ids) if ids else []
        values: dict[str, list[Any]] = {c: [] for c in columns}
        for objid, text in texts:
            document = json.loads(text)
            for column, path in wanted:
                if path is None:
                    values[column].append(objid if column == "objid" else text)
                    continue
                value = document.get(path.steps[0]) if isinstance(document, dict) else None
                read = _read_as_duckdb(value, path.cast)
                if read is _DECLINED:
                    return None
                values[column].append(read)
        types = {"objid": pa.int64(), "doc": pa.json_()}  # (a path's by its cast, below)
        casts = {None: pa.string(), "int": pa.int64(), "float": pa.float64()}
        try:
            arrays = [
                pa.array(values[c], types[c] if path is None else casts[path.cast])
                for c, path in wanted
            ]
        except (pa.ArrowException, UnicodeEncodeError):  # (a lone surrogate: DuckDB's to refuse)
            return None
        return pa.Table.from_arrays(arrays, names=list(columns))

    def _candidates(self, predicate: Predicate | None, condition: Condition | None) -> list[int]:
        """The objids a scan under ``predicate`` (whose paths imply ``condition``) would
        rebuild, in order (inside a transaction)."""
        if predicate is not None and predicate.is_false:
            return []
        if condition is not None:  # the mapping's indexes find the objects that may match
            within = _objid_filter(predicate)
            return [i for i in self.collection._matching_ids(condition) if within(i)]
        where, params = self._objid_bounds(predicate)
        mapping = self.collection.mapping
        sql = f"SELECT objid FROM ({mapping.objids_sql()}) AS ids WHERE {where} ORDER BY objid"
        return [row[0] for row in mapping.backend.execute(sql, params)]

    def estimate(self, predicate: Predicate | None) -> Estimate:
        return Estimate(rows=self.collection.count())


def _objid_filter(predicate: Predicate | None) -> Callable[[int], bool]:
    domain = None if predicate is None else predicate.domain("objid")
    if domain is None:
        return lambda objid: True
    return domain.contains


_DECLINED = object()
_INT64 = 1 << 63
_EXACT_DOUBLE = 1 << 53


def _read_as_duckdb(value: Any, cast: str | None) -> Any:
    """What DuckDB computes for a JSON value (as Python reads it) under ``->>`` and
    ``cast``, or ``_DECLINED`` where that is not known here exactly."""
    if value is None:
        return None
    if isinstance(value, bool):
        return _DECLINED if cast is not None else ("true" if value else "false")
    if isinstance(value, int):
        if cast == "float":
            return float(value) if -_EXACT_DOUBLE <= value <= _EXACT_DOUBLE else _DECLINED
        if not -_INT64 <= value < _INT64:
            return _DECLINED
        return value if cast == "int" else str(value)
    if isinstance(value, str) and cast is None:
        return value
    return _DECLINED


def path_condition(path: JsonPath, domain: ColumnDomain) -> Condition | None:
    """An Argo condition holding at least every object whose value at ``path`` DuckDB
    finds in ``domain``; None where nothing narrows (every object may match).

    DuckDB compares a text or a cast, not the JSON value, so every kind of
    value that may give a matching text or number is let through:

    - the text (``->>``): a string gives itself, but a number, ``true`` or an
      array gives its JSON text. Only strings that no other value's text can
      equal (``'north'``, not ``'5'``, ``'true'`` or ``'[1]'``) narrow, to the
      objects holding one of them as a string.
    - a number cast from the text: a number in the range (widened for an
      integer cast's rounding and a decimal's digits), or any string (``'5'``
      casts to 5); ``true`` and ``false`` too when cast from the JSON value
      itself (``->``), which makes them 1 and 0. A value of another kind fails
      the cast, and the statement with it.

    A path written without ``$`` may name one key with dots in it, so both
    readings are looked up (:meth:`JsonPath.readings`).
    """
    if domain.nulls or domain.keys is not None:
        return None
    refs = [PathRef(steps) for steps in path.readings()]
    parts: list[Condition] = []
    if path.cast is None:
        points = domain.ranges.point_values()
        if points is None or not all(isinstance(p, str) and _only_a_string(p) for p in points):
            return None
        parts = [In(ref, tuple(points)) for ref in refs]
    else:
        for ref in refs:
            parts.extend(_numbers_within(ref, interval) for interval in domain.ranges)
            parts.append(Like(ref, "%"))  # every string: it may cast into the range
            if path.operator == "->":
                parts.append(In(ref, (True, False)))
    return parts[0] if len(parts) == 1 else Or(tuple(parts))


def _only_a_string(text: str) -> bool:
    """Whether no JSON value but a string has this text under ``->>``."""
    if text in ("true", "false") or text.lstrip()[:1] in ("[", "{"):
        return False
    try:
        float(text)  # a number's text (and the spellings of NaN and infinity)
    except ValueError:
        return True
    return False


def _numbers_within(ref: PathRef, interval: Interval) -> Condition:
    """The numbers at ``ref`` whose cast may fall in ``interval``."""
    lo, hi = _slack(interval.lo, -1), _slack(interval.hi, +1)
    if lo is None and hi is None:
        return Exists(ref)
    if lo is None:
        return Compare(ref, "<=", hi)  # type: ignore[arg-type]
    if hi is None:
        return Compare(ref, ">=", lo)
    return Between(ref, lo, hi)


def _slack(bound: Any, direction: int) -> float | None:
    """``bound`` moved outwards by the cast slack; None for no bound (or one past floats)."""
    if bound is None:
        return None
    try:
        value = float(bound)
    except (OverflowError, TypeError, ValueError):
        return None
    if not math.isfinite(value):
        return None
    return value + direction * (_CAST_SLACK + abs(value) * _CAST_SLACK_RELATIVE)
