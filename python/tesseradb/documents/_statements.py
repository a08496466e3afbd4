"""Argo/SQL statements over a collection (a mixin of :class:`~._collection.Collection`):
selection planned into objids and rebuilt objects, aggregates, joins, updates and
deletes, each one transaction on the collection's backend.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import itertools
import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from tesseradb._lifetime import refuses_when_closed

if TYPE_CHECKING:
    pass
from tesseradb.documents._argosql import (
    And,
    Condition,
    Delete,
    Insert,
    Not,
    Or,
    PathRef,
    Select,
    SelectItem,
    Statement,
    Update,
    push_not,
)
from tesseradb.documents._keys import KIND_NULL, flatten_document
from tesseradb.documents._mappings import KeyCondition
from tesseradb.documents._plan import objid_set
from tesseradb.errors import (
    DocumentError,
    DocumentTypeError,
)

__all__ = ["Statements", "batched"]

# A fetch of at least this many objects runs as two halves at once (Backend.twin_reader).
SPLIT_FETCH = 256
ID_LIST_LIMIT = 1000  # objids bound as an IN list; more go through a temporary table

_worker_pool: concurrent.futures.ThreadPoolExecutor | None = None
_worker_lock = threading.Lock()


def _worker() -> concurrent.futures.ThreadPoolExecutor:
    """The documents' one worker thread (it fetches the second half of a split fetch)."""
    global _worker_pool
    with _worker_lock:
        if _worker_pool is None:
            _worker_pool = concurrent.futures.ThreadPoolExecutor(1, "tessera-documents")
        return _worker_pool


@refuses_when_closed
class Statements:
    """What a collection runs of Argo/SQL (it has the backend, mapping and transaction)."""

    # --- Argo/SQL -------------------------------------------------------------------
    def _run(self, statement: Statement, other: Statements | None = None) -> list[dict[str, Any]]:
        """Run a parsed statement on this collection (``other``: the right side of a join)."""
        if isinstance(statement, Insert):
            objids = self.insert_many(statement.documents)
            return [{"inserted": len(objids)}]
        if isinstance(statement, Delete):
            return [{"deleted": self._delete(statement.where)}]
        if isinstance(statement, Update):
            return [{"updated": self._update(statement.assignments, statement.where)}]
        with self.transaction():
            if statement.join is not None:
                assert other is not None
                other._refresh()
                return self._join(statement, other)
            if statement.is_aggregate:
                return self._aggregate(statement)
            return self._select(statement)

    def _matching_ids(self, where: Condition | None) -> list[int]:
        matched = objid_set(self.mapping, where)
        rows = self.backend.execute(
            f"SELECT DISTINCT objid FROM ({matched.sql}) AS argo_m ORDER BY objid", matched.params
        )
        return [int(r[0]) for r in rows]

    def _delete(self, where: Condition | None) -> int:
        with self.transaction(write=True):
            objids = self._matching_ids(where)
            self.mapping.delete(objids)
        return len(objids)

    def _update(self, assignments: Sequence[tuple[PathRef, Any]], where: Condition | None) -> int:
        """Set paths of the matching objects; each is rebuilt, changed and written back."""
        with self.transaction(write=True):
            objids = self._matching_ids(where)
            documents = self._fetch(objids, None)
            changed = []
            for objid in objids:
                doc = documents[objid]
                for path, value in assignments:
                    _assign(doc, path.steps, value, objid)
                changed.append(
                    flatten_document(
                        doc,
                        f"collection {self.name!r}, object {objid} after the UPDATE",
                        self.backend.limits,
                    )
                )
            self.mapping.delete(objids)
            if objids:
                self.mapping.insert(objids, changed, delta=True)
                self._grow_delta(len(objids))
        return len(objids)

    # --- selection --------------------------------------------------------------------
    def _projection(self, items: Sequence[SelectItem] | None) -> list[KeyCondition] | None:
        """The key conditions of a projection's paths (None: every key)."""
        if items is None:
            return None
        return [KeyCondition.subtree(i.path.key) for i in items if i.path]

    def _fetch(
        self, objids: Sequence[int], keys: Sequence[KeyCondition] | None
    ) -> dict[int, dict[str, Any]]:
        """The objects (rebuilt from the rows ``keys`` selects) with these objids."""
        if not objids:
            return {}
        with self._selecting(objids, split=True) as selections:
            return self._documents(selections, keys)

    def _texts(self, objids: Sequence[int]) -> list[tuple[int, str]]:
        """``(objid, JSON text)`` of the objects with these objids, in objid order: the
        text as ``json.dumps(object, ensure_ascii=False)`` writes it."""
        if self.mapping.keeps_text:
            if not objids:
                return []
            with self._selecting(objids) as [(where, params)]:
                return self.mapping.texts(where, params)
        fetched = self._fetch(objids, None)
        dumps = json.dumps
        return [(i, dumps(fetched[i], ensure_ascii=False)) for i in sorted(fetched)]

    @contextlib.contextmanager
    def _selecting(
        self, objids: Sequence[int], split: bool = False
    ) -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
        """``(where, params)`` selections of these objids, for the block: IN lists up to
        twice ID_LIST_LIMIT (``split``: two halves from SPLIT_FETCH on, one for each
        reader of :meth:`_documents`), else one over a temporary table of them."""
        if len(objids) > ID_LIST_LIMIT * 2:
            with self._id_table(objids) as table:
                yield [(f"objid IN (SELECT objid FROM {table})", ())]
            return
        ordered = sorted(set(objids))
        parts = [ordered]
        if split and len(ordered) >= SPLIT_FETCH:
            parts = [ordered[: len(ordered) // 2], ordered[len(ordered) // 2 :]]
        yield [(f"objid IN ({', '.join('?' * len(p))})", tuple(p)) for p in parts]

    def _documents(
        self,
        selections: Sequence[tuple[str, tuple[Any, ...]]],
        keys: Sequence[KeyCondition] | None,
        whole: tuple[str, tuple[Any, ...]] | None = None,
    ) -> dict[int, dict[str, Any]]:
        """The objects of each ``(where, params)`` selection (disjoint sets of objects).

        Two selections run at once where the backend has a twin reader: one on
        this thread, the other on the fetch thread, each on its own connection.
        The backends' own work (finding and packing rows) runs without the GIL,
        so a fetch of many objects uses both cores. Without one, ``whole`` (both
        selections as one, where halving only made each scan the same range)
        runs instead of them.
        """
        out: dict[int, dict[str, Any]] = {}
        if len(selections) == 2:
            with self.backend.twin_reader() as twin:
                if twin is not None:
                    (where, params), (twin_where, twin_params) = selections
                    other = _worker().submit(
                        self.mapping.documents, twin_where, twin_params, keys, twin
                    )
                    try:
                        out.update(self.mapping.documents(where, params, keys))
                    finally:
                        out.update(other.result())  # waited for even when this half failed
                    return out
        for where, params in [whole] if whole is not None else selections:
            out.update(self.mapping.documents(where, params, keys))
        return out

    @contextlib.contextmanager
    def _id_table(self, objids: Sequence[int]) -> Iterator[str]:
        """The objids in a temporary table (the paper's ``argo_intermediate``), for the block."""
        name = "argo_intermediate"
        self.backend.execute(
            f"CREATE TEMPORARY TABLE {name} (objid {self.backend.types.bigint} PRIMARY KEY)"
        )
        try:
            self.backend.insert_rows(name, ("objid",), [(i,) for i in sorted(set(objids))])
            yield name
        finally:
            self.backend.execute(f"DROP TABLE {name}")

    def _select(self, select: Select) -> list[dict[str, Any]]:
        keys = self._projection(select.items)
        needs_order = bool(select.order_by) or select.limit is not None or select.offset
        if not needs_order and select.where is None:  # every object: no objid list needed
            middle = self._meta()[0] // 2  # objids are handed out from 1 up
            halves = [("objid < ?", (middle,)), ("objid >= ?", (middle,))]
            return list(self._documents(halves, keys, whole=("1 = 1", ())).values())
        objids = self._ordered_ids(select) if needs_order else self._matching_ids(select.where)
        documents = self._fetch(objids, keys)
        return [documents[i] for i in objids if i in documents]

    def _ordered_ids(self, select: Select) -> list[int]:
        """The objids of the result in order, after ORDER BY, LIMIT and OFFSET."""
        matched = objid_set(self.mapping, select.where)
        sql, params = f"SELECT DISTINCT objid FROM ({matched.sql}) AS argo_s", list(matched.params)
        if select.items is not None:
            # Objects with none of the projected attributes are not in the result, so
            # they must not take places under LIMIT.
            keys = self._projection(select.items)
            assert keys is not None
            having, having_params = self.mapping.keyed_objids(KeyCondition.any_of(keys))
            sql = f"SELECT objid FROM ({sql}) AS argo_m WHERE objid IN ({having})"
            params += having_params
        joins, order = [], []
        for n, (path, descending) in enumerate(select.order_by):
            values, value_params = self.mapping.typed_values(path.key)
            joins.append(f"LEFT JOIN ({values}) AS argo_o{n} ON argo_o{n}.objid = argo_m.objid")
            params += value_params
            o = f"argo_o{n}"
            direction = " DESC" if descending else ""
            rank = (
                f"CASE WHEN {o}.valkind = {KIND_NULL} THEN 0 WHEN {o}.valbool IS NOT NULL THEN 1 "
                f"WHEN {o}.valnum IS NOT NULL THEN 2 WHEN {o}.valstr IS NOT NULL THEN 3 ELSE 4 END"
            )
            # missing attributes last in either direction
            order += [f"CASE WHEN {o}.objid IS NULL THEN 1 ELSE 0 END", rank + direction]
            order += [f"{o}.{c}{direction}" for c in ("valbool", "valnum", "valstr")]
        order.append("argo_m.objid")
        query = f"SELECT argo_m.objid FROM ({sql}) AS argo_m {' '.join(joins)} ORDER BY {', '.join(order)}"
        if select.limit is not None:
            query += f" LIMIT {int(select.limit)}"
            if select.offset:
                query += f" OFFSET {int(select.offset)}"
        elif select.offset:  # MariaDB takes OFFSET only after a LIMIT
            query += f" LIMIT {2**62} OFFSET {int(select.offset)}"
        return [int(r[0]) for r in self.backend.execute(query, params)]

    # --- aggregates -------------------------------------------------------------------
    def _aggregate(self, select: Select) -> list[dict[str, Any]]:
        assert select.items is not None
        matched = objid_set(self.mapping, select.where)
        # parameters follow the text: the base relation, then the joins
        base_params: list[Any] = []
        prefix = ""
        if select.group_by is not None:
            within = None
            if select.where is not None:
                # the group values of the matching objects only, reached by objid
                prefix = f"WITH argo_w AS (SELECT DISTINCT objid FROM ({matched.sql}) AS argo_d) "
                base_params += matched.params
                within = "argo_w"
            values, value_params = self.mapping.typed_values(select.group_by.key, within)
            base = f"({values}) AS argo_g"
            base_params += value_params
            group_cols = [f"argo_g.{c}" for c in ("valstr", "valnum", "valbool", "valkind")]
            outputs = [*group_cols, "MIN(argo_g.valint)", "COUNT(argo_g.valint)", "COUNT(*)"]
        else:
            base = f"(SELECT DISTINCT objid FROM ({matched.sql}) AS argo_d) AS argo_g"
            base_params += matched.params
            group_cols, outputs = [], ["COUNT(*)"]
        joins: list[str] = []
        join_params: list[Any] = []
        for n, item in enumerate(select.items):
            if item.function is None or item.path is None:
                continue
            values, value_params = self.mapping.typed_values(item.path.key)
            a = f"argo_a{n}"
            joins.append(f"LEFT JOIN ({values}) AS {a} ON {a}.objid = argo_g.objid")
            join_params += value_params
            outputs += [
                f"COUNT({a}.valstr)",
                f"COUNT({a}.valnum)",
                f"COUNT({a}.valbool)",
                f"COUNT({a}.valint)",
                f"SUM({a}.valnum)",
                f"SUM({a}.valint)",
                f"MIN({a}.valnum)",
                f"MAX({a}.valnum)",
                f"MIN({a}.valstr)",
                f"MAX({a}.valstr)",
                f"MIN({a}.valint)",
                f"MAX({a}.valint)",
            ]
        query = f"{prefix}SELECT {', '.join(outputs)} FROM {base} {' '.join(joins)}"
        if group_cols:
            query += f" GROUP BY {', '.join(group_cols)}"
        rows = self.backend.execute(query, [*base_params, *join_params])
        results = [self._aggregate_row(select, row) for row in rows]
        if select.group_by is None and not results:
            results = [self._aggregate_row(select, None)]
        return _order_aggregates(select, results)

    def _aggregate_row(self, select: Select, row: tuple[Any, ...] | None) -> dict[str, Any]:
        assert select.items is not None
        out: dict[str, Any] = {}
        position = 0
        group_value: Any = None
        count_all = 0
        if row is not None:
            if select.group_by is not None:
                valstr, valnum, valbool, _valkind, min_int, n_int, count_all = row[:7]
                position = 7
                if valstr is not None:
                    group_value = valstr
                elif valnum is not None:
                    group_value = int(min_int) if n_int else float(valnum)
                elif valbool is not None:
                    group_value = bool(valbool)
                # else JSON null (or an empty container, grouped with it)
            else:
                count_all = row[0]
                position = 1
        if select.group_by is not None and select.group_by.key not in [
            i.path.key for i in select.items if i.function is None and i.path
        ]:
            out[select.group_by.key] = group_value
        for item in select.items:
            if item.function is None:
                out[item.name] = group_value
                continue
            if item.path is None:  # COUNT(*)
                out[item.name] = int(count_all or 0)
                continue
            stats = row[position : position + 12] if row is not None else (0,) * 4 + (None,) * 8
            position += 12
            out[item.name] = _aggregate_value(item, stats)
        return out

    # --- joins ------------------------------------------------------------------------
    def _join(self, select: Select, other: Statements) -> list[dict[str, Any]]:
        join = select.join
        assert join is not None
        if other.backend is not self.backend or other.mapping.name != self.mapping.name:
            raise DocumentError(
                f"cannot join {self.name!r} with {other.name!r}: they live on different backends"
            )
        left_alias = select.alias or self.name
        # Conjuncts that touch one side restrict that side inside every branch of the
        # pair query (so Q11's 0.1% of left objects is joined, not all of them);
        # the rest is a filter over the pairs.
        sides: dict[str, list[Condition]] = {left_alias: [], join.alias: []}
        mixed: list[Condition] = []
        if select.where is not None:
            pushed = push_not(select.where)
            for conjunct in pushed.items if isinstance(pushed, And) else (pushed,):
                aliases = _aliases(conjunct)
                (sides[aliases.pop()] if len(aliases) == 1 else mixed).append(conjunct)
        restrict, restrict_params = "", cast(list[Any], [])
        for alias, column, side in ((left_alias, "argo_l", self), (join.alias, "argo_r", other)):
            if sides[alias]:
                unaliased = [_unaliased(p) for p in sides[alias]]
                matched = objid_set(
                    side.mapping, unaliased[0] if len(unaliased) == 1 else And(tuple(unaliased))
                )
                restrict += f" AND {column}.objid IN ({matched.sql})"
                restrict_params += matched.params
        parts: list[str] = []
        params: list[Any] = []
        # Only the tables holding each side's key take part: NoBench's Q11 joins
        # strings, and its number and boolean branches had looked up every left
        # object in vain (~2,000 seeks).
        left_tables = set(self.mapping.holding(join.left.key, list(self.mapping.tables())))
        right_tables = set(other.mapping.holding(join.right.key, list(other.mapping.tables())))
        for json_type in ("str", "num", "bool"):
            ls, rs = self.mapping.source(json_type), other.mapping.source(json_type)
            # On argo1 a left value of another type is NULL in this column: it is
            # dropped before the right side is searched, which otherwise had no usable
            # key (100 left objects x 100,000 right rows for NoBench Q11 on SQLite:
            # 5.6 s). Written as an expression so that no planner takes it for an
            # index range over every value of the key.
            typed = (
                f" AND COALESCE(argo_l.{ls.column}, NULL) IS NOT NULL" if self.mapping.wide else ""
            )
            # main and delta on each side
            for left_table in [t for t in ls.tables if t in left_tables]:
                for right_table in [t for t in rs.tables if t in right_tables]:
                    parts.append(
                        f"SELECT argo_l.objid AS lid, argo_r.objid AS rid FROM {left_table} "
                        f"AS argo_l JOIN {right_table} AS argo_r "
                        f"ON argo_l.{ls.column} = argo_r.{rs.column} "
                        f"WHERE argo_l.keystr = ? AND argo_r.keystr = ?{typed}{restrict}"
                    )
                    params += [join.left.key, join.right.key, *restrict_params]
        if not parts:  # neither key is anywhere: no pairs, and nothing to fetch
            return []
        pairs_sql = " UNION ".join(parts)
        conditions = ""
        if mixed:
            sql, where_params = self._join_condition(
                And(tuple(mixed)), left_alias, join.alias, other
            )
            conditions = f" WHERE {sql}"
            params += where_params
        query = f"SELECT lid, rid FROM ({pairs_sql}) AS argo_p{conditions} ORDER BY lid, rid"
        pairs = [(int(a), int(b)) for a, b in self.backend.execute(query, params)]
        if select.limit is not None or select.offset:
            end = None if select.limit is None else select.offset + select.limit
            pairs = pairs[select.offset : end]
        left_items = right_items = None
        if select.items is not None:
            left_items = [i for i in select.items if i.path and i.path.alias == left_alias]
            right_items = [i for i in select.items if i.path and i.path.alias == join.alias]
        lefts = (
            self._fetch(sorted({a for a, _ in pairs}), self._projection(left_items))
            if left_items != []
            else {}
        )
        rights = (
            other._fetch(sorted({b for _, b in pairs}), other._projection(right_items))
            if right_items != []
            else {}
        )
        results = []
        for a, b in pairs:
            left, right = lefts.get(a), rights.get(b)
            if select.items is not None and left is None and right is None:
                continue
            results.append({"left": left or {}, "right": right or {}})
        return results

    def _join_condition(
        self, where: Condition, left_alias: str, right_alias: str, other: Statements
    ) -> tuple[str, list[Any]]:
        """A join's WHERE as a boolean over (lid, rid): each leaf is a membership test."""

        def walk(pred: Condition) -> tuple[str, list[Any]]:
            if isinstance(pred, And | Or):
                parts = [walk(p) for p in pred.items]
                joiner = " AND " if isinstance(pred, And) else " OR "
                return "(" + joiner.join(p[0] for p in parts) + ")", [
                    x for p in parts for x in p[1]
                ]
            if isinstance(pred, Not):
                sql, params = walk(pred.item)
                return f"NOT {sql}", params
            path = pred.path
            side = self if path.alias == left_alias else other
            column = "lid" if path.alias == left_alias else "rid"
            matched = objid_set(side.mapping, _unaliased(pred))
            return f"{column} IN ({matched.sql})", list(matched.params)

        return walk(push_not(where))


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` in lists of ``size`` (the last may be shorter), read as they are needed."""
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def _aliases(pred: Condition) -> set[str]:
    """The join sides a (pushed-down) predicate refers to."""
    if isinstance(pred, And | Or):
        return set().union(*(_aliases(p) for p in pred.items))
    if isinstance(pred, Not):
        return _aliases(pred.item)
    return {pred.path.alias or ""}


def _unaliased(pred: Condition) -> Condition:
    if isinstance(pred, And | Or):
        return type(pred)(tuple(_unaliased(p) for p in pred.items))
    if isinstance(pred, Not):
        return Not(_unaliased(pred.item))
    return dataclasses.replace(pred, path=PathRef(pred.path.steps))


def _assign(doc: dict[str, Any], steps: tuple[str | int, ...], value: Any, objid: int) -> None:
    node: Any = doc
    where = ""
    for step, following in zip(steps, [*steps[1:], None], strict=True):
        where += f"[{step}]" if isinstance(step, int) else (f".{step}" if where else step)
        if isinstance(step, int):
            if not isinstance(node, list):
                raise DocumentError(f"UPDATE: {where} of object {objid} is not in an array")
            if step > len(node):
                raise DocumentError(
                    f"UPDATE: {where} of object {objid} is past the end of an array of {len(node)}"
                )
            if following is None:
                if step == len(node):
                    node.append(value)
                else:
                    node[step] = value
                return
            if step == len(node):
                node.append([] if isinstance(following, int) else {})
            node = node[step]
        else:
            if not isinstance(node, dict):
                raise DocumentError(
                    f"UPDATE: the parent of {where} in object {objid} is not an object"
                )
            if following is None:
                node[step] = value
                return
            if step not in node:
                node[step] = [] if isinstance(following, int) else {}
            node = node[step]


def _aggregate_value(item: SelectItem, stats: tuple[Any, ...]) -> Any:
    (
        n_str,
        n_num,
        n_bool,
        n_int,
        sum_num,
        sum_int,
        min_num,
        max_num,
        min_str,
        max_str,
        min_int,
        max_int,
    ) = stats
    function = item.function or ""
    if function == "count":
        return int(n_str or 0) + int(n_num or 0) + int(n_bool or 0)
    if function in ("sum", "avg"):
        if n_str or n_bool:
            what = "strings" if n_str else "booleans"
            raise DocumentTypeError(
                f"{function.upper()}({item.path}) over {what}: it takes numbers only"
            )
        if not n_num:
            return None
        if function == "avg":
            return float(sum_num) / int(n_num)
        return int(sum_int) if n_int == n_num else float(sum_num)
    if n_bool:
        raise DocumentTypeError(f"{function.upper()}({item.path}) over booleans")
    if n_str and n_num:
        raise DocumentTypeError(f"{function.upper()}({item.path}) over both strings and numbers")
    if n_str:
        return min_str if function == "min" else max_str
    if not n_num:
        return None
    if n_int == n_num:
        return int(min_int if function == "min" else max_int)
    return float(min_num if function == "min" else max_num)


def _order_aggregates(select: Select, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Aggregate rows sorted by ORDER BY (output names or the group path), else by group value."""

    def rank(value: Any) -> tuple[int, Any]:
        if value is None:
            return (0, 0)
        if isinstance(value, bool):
            return (1, value)
        if isinstance(value, int | float):
            return (2, value)
        return (3, value)

    if select.group_by is not None:
        results.sort(key=lambda r: rank(r.get(select.group_by.key if select.group_by else "")))
    for path, descending in reversed(select.order_by):
        name = str(path.steps[0]) if len(path.steps) == 1 else path.key
        if results and name not in results[0]:
            raise DocumentError(f"ORDER BY {name}: not an output of the aggregate query")
        results.sort(key=lambda r: rank(r.get(name)), reverse=descending)
    if select.limit is not None or select.offset:
        end = None if select.limit is None else select.offset + select.limit
        results = results[select.offset : end]
    return results
