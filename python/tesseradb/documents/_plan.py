"""Argo/SQL predicates to SQL over a mapping: the set of matching objids (paper section 3.2.2).

A leaf (``num > 5``) is one SELECT on the table and column of its literal's
type, so a numeric literal only ever meets numbers and a missing attribute
never matches. ``AND`` is INTERSECT, ``OR`` is UNION, except that leaves on
the same table are OR-ed inside one SELECT (the paper's Argo/1 optimisation,
and on Argo/3 for leaves of one type). Negations arrive pushed to the leaves;
the few that cannot be a leaf (``NOT EXISTS``, ``IS NOT NULL``, ``NOT ... ANY``)
are EXCEPTs from the objects that have the attribute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tesseradb.documents._argosql import (
    And,
    AnyCompare,
    Between,
    Compare,
    Condition,
    Exists,
    In,
    IsNull,
    Like,
    Or,
    PathRef,
    literal_type,
    push_not,
)
from tesseradb.documents._keys import KIND_NULL
from tesseradb.documents._mappings import KeyCondition, Mapping

__all__ = ["ObjidSet", "like_pattern", "objid_set"]

NO_KEY = KeyCondition("1 = 0", ())  # an array with no elements of the type asked for


@dataclass(frozen=True)
class ObjidSet:
    """SQL selecting the ``objid`` of matching objects (duplicates possible)."""

    sql: str
    params: tuple[Any, ...]
    # a row condition on the tables of one type (main and delta), kept so OR can
    # merge it with its siblings
    tables: tuple[str, ...] | None = None
    where: str | None = None
    where_params: tuple[Any, ...] = ()

    @property
    def compound(self) -> bool:
        return self.tables is None or len(self.tables) > 1


def _leaf(tables: tuple[str, ...], where: str, params: tuple[Any, ...]) -> ObjidSet:
    sql = " UNION ALL ".join(f"SELECT objid FROM {t} WHERE {where}" for t in tables)
    return ObjidSet(sql, params * len(tables), tables, where, params)


def _combine(operator: str, items: list[ObjidSet]) -> ObjidSet:
    if len(items) == 1:
        return items[0]
    parts: list[str] = []
    params: list[Any] = []
    for i, item in enumerate(items):
        parts.append(f"SELECT objid FROM ({item.sql}) AS argo_q{i}" if item.compound else item.sql)
        params.extend(item.params)
    # Wrapped so that SQLite (which has no precedence between set operators) and
    # the others read nested sets alike.
    return ObjidSet(f" {operator} ".join(parts), tuple(params))


def like_pattern(pattern: str) -> str:
    r"""An Argo/SQL LIKE pattern (``%``, ``_``, ``\`` escapes) for ``LIKE ? ESCAPE '!'``."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            literal = pattern[i + 1]
            out.append("!" + literal if literal in "%_!" else literal)
            i += 2
            continue
        out.append("!!" if c == "!" else c)
        i += 1
    return "".join(out)


def _number(value: Any) -> Any:
    # Numbers compare as doubles (valnum); bind them as such on every backend.
    return float(value) if literal_type(value) == "num" else value


class _Planner:
    def __init__(self, mapping: Mapping) -> None:
        self.mapping = mapping

    def exists(self, path: PathRef) -> ObjidSet:
        sql, params = self.mapping.keyed_objids(KeyCondition.subtree(path.key))
        return ObjidSet(sql, params)

    def elements(self, key: str, json_type: str) -> KeyCondition:
        """The direct elements of array ``key`` among values of one type: the keys
        themselves where the backend can find them by seeking, else a key range."""
        backend = self.mapping.backend
        if backend.seeks_by_key:
            keys = self.mapping.element_keys(key, self.mapping.source(json_type).tables)
            if keys is not None:
                marks = ", ".join("?" * len(keys))
                return KeyCondition(f"keystr IN ({marks})", tuple(keys)) if keys else NO_KEY
        return KeyCondition.element(key, backend)

    def everything(self) -> ObjidSet:
        return ObjidSet(self.mapping.objids_sql(), ())

    def typed(
        self,
        path: PathRef,
        json_type: str,
        condition: str,
        params: tuple[Any, ...],
        key: KeyCondition | None = None,
    ) -> ObjidSet:
        source = self.mapping.source(json_type)
        key = key or KeyCondition.exact(path.key)
        return _leaf(
            source.tables,
            f"{key.sql} AND {condition.format(col=source.column)}",
            key.params + params,
        )

    def plan(self, pred: Condition) -> ObjidSet:
        if isinstance(pred, And):
            return _combine("INTERSECT", [self.plan(p) for p in pred.items])
        if isinstance(pred, Or):
            return self.disjunction([self.plan(p) for p in pred.items])
        if isinstance(pred, Compare):
            kind = literal_type(pred.value)
            return self.typed(pred.path, kind, f"{{col}} {pred.op} ?", (_number(pred.value),))
        if isinstance(pred, AnyCompare):
            kind = literal_type(pred.value)
            key = self.elements(pred.path.key, kind)
            some = self.typed(pred.path, kind, f"{{col}} {pred.op} ?", (_number(pred.value),), key)
            return _combine("EXCEPT", [self.exists(pred.path), some]) if pred.negated else some
        if isinstance(pred, Between):
            kind = literal_type(pred.low)
            bounds = (_number(pred.low), _number(pred.high))
            if pred.negated:
                return self.typed(pred.path, kind, "({col} < ? OR {col} > ?)", bounds)
            return self.typed(pred.path, kind, "{col} BETWEEN ? AND ?", bounds)
        if isinstance(pred, Like):
            if pred.pattern == "%" and not pred.negated:  # every string (an index seek, no scan)
                return self.typed(pred.path, "str", "{col} IS NOT NULL", ())
            op = "NOT LIKE" if pred.negated else "LIKE"
            return self.typed(
                pred.path, "str", f"{{col}} {op} ? ESCAPE '!'", (like_pattern(pred.pattern),)
            )
        if isinstance(pred, In):
            by_type: dict[str, list[Any]] = {}
            for value in pred.values:
                by_type.setdefault(literal_type(value), []).append(_number(value))
            op = "NOT IN" if pred.negated else "IN"
            leaves = [
                self.typed(
                    pred.path, kind, f"{{col}} {op} ({', '.join('?' * len(values))})", tuple(values)
                )
                for kind, values in by_type.items()
            ]
            # x NOT IN (1, 'a') is x != 1 AND x != 'a': by De Morgan, an intersection
            return _combine("INTERSECT", leaves) if pred.negated else self.disjunction(leaves)
        if isinstance(pred, IsNull):
            null = self.typed(pred.path, "nil", "{col} = ?", (KIND_NULL,))
            return _combine("EXCEPT", [self.exists(pred.path), null]) if pred.negated else null
        if isinstance(pred, Exists):
            if pred.negated:
                return _combine("EXCEPT", [self.everything(), self.exists(pred.path)])
            return self.exists(pred.path)
        raise AssertionError(f"unplanned predicate {pred!r}")

    def disjunction(self, items: list[ObjidSet]) -> ObjidSet:
        merged: dict[tuple[str, ...], list[ObjidSet]] = {}
        rest: list[ObjidSet] = []
        for item in items:
            if item.tables is not None:
                merged.setdefault(item.tables, []).append(item)
            else:
                rest.append(item)
        parts = []
        for tables, leaves in merged.items():
            if len(leaves) == 1:
                parts.append(leaves[0])
                continue
            where = " OR ".join(f"({leaf.where})" for leaf in leaves)
            parts.append(_leaf(tables, where, tuple(p for x in leaves for p in x.where_params)))
        return _combine("UNION", parts + rest)


def objid_set(mapping: Mapping, predicate: Condition | None) -> ObjidSet:
    """The objects of the collection matching ``predicate`` (all of them if None)."""
    planner = _Planner(mapping)
    if predicate is None:
        return planner.everything()
    return planner.plan(push_not(predicate))
