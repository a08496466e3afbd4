"""The paper's two mappings of a collection onto relational tables, and the SQL over them.

``argo1`` keeps a collection in one vertical table with one value column per
JSON type; ``argo3`` in one table per type (plus, beyond the paper, a small
table for ``null``, ``{}`` and ``[]``). Both share the column names
``objid, keystr, ord, valstr, valnum, valint, valbool, valkind``; a
:class:`Source` says which tables and column hold values of one type, so the
predicate translation (:mod:`._plan`) is written once for both.

Beyond the paper, each table has a small twin, its delta (``..._delta``),
that takes the rows of small inserts, as PostgreSQL's GIN indexes keep a
pending list. Every key and value index of a big table puts a new row at a
random page, and SQLite's log holds whole pages: inserting 1,000 NoBench
objects into 1,000,000 dirtied ~198 MB of index pages, against a few MB in
a delta of a few thousand objects. The collection moves the delta into the
main tables in one sorted pass once it has grown (``Collection``); while the
delta holds rows (:attr:`Mapping.delta`), every statement reads both, so
each query is a union over the physical tables of :meth:`Mapping.tables`.

``hybrid``, beyond the paper, is argo3 plus one more table, ``argo_<c>_obj``,
holding each object's JSON text, packed (one zstd frame), by objid. Filters
and projections use the shredded tables as argo3 does; whatever needs whole
objects (a ``SELECT *``, an UPDATE's rebuild, a SQL scan of ``doc``) reads one
row per object there, where argo3 reads and reassembles the object's rows from
four tables.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tesseradb._core import (
    load_documents,
    pack_documents,
    rebuild_documents,
    rebuild_packed_documents,
    unpack_texts,
)
from tesseradb.documents._backends import Backend
from tesseradb.documents._keys import Leaf
from tesseradb.errors import DocumentBackendError

__all__ = ["MAPPINGS", "ROW_COLUMNS", "KeyCondition", "Mapping", "Source", "make_mapping"]

MAPPINGS = ("argo1", "argo3", "hybrid")
# element positions Mapping.element_keys walks before giving up for a range scan
ELEMENT_WALK_LIMIT = 256
ROW_COLUMNS = ("objid", "keystr", "ord", "valstr", "valnum", "valint", "valbool", "valkind")
# the table/column of each JSON type a literal can have
_VALUE_COLUMN = {"str": "valstr", "num": "valnum", "bool": "valbool", "nil": "valkind"}


@dataclass(frozen=True)
class KeyCondition:
    """A condition on ``keystr`` as SQL with its parameters."""

    sql: str
    params: tuple[Any, ...]

    @staticmethod
    def exact(key: str) -> KeyCondition:
        return KeyCondition("keystr = ?", (key,))

    @staticmethod
    def subtree(key: str) -> KeyCondition:
        """The key and everything nested under it (``key.x``, ``key[3]``)."""
        # '/' follows '.' and '\' follows '[' in code point order: half-open ranges
        # that an index on keystr can serve, unlike LIKE with escapes. The three
        # lie in [key, key + '\'), one index range the backend scans once (SQLite
        # would otherwise collect the three ranges' keys in a temporary b-tree).
        return KeyCondition(
            "(keystr >= ? AND keystr < ? AND (keystr = ? OR (keystr >= ? AND keystr < ?) "
            "OR (keystr >= ? AND keystr < ?)))",
            (key, key + "\\", key, key + ".", key + "/", key + "[", key + "\\"),
        )

    @staticmethod
    def element(key: str, backend: Backend) -> KeyCondition:
        """The direct elements ``key[<n>]`` of an array (the paper's ``ANY``)."""
        return KeyCondition(
            f"keystr >= ? AND keystr < ? AND {backend.element_suffix(len(key) + 2)}",
            (key + "[", key + "\\"),
        )

    @staticmethod
    def any_of(conditions: Sequence[KeyCondition]) -> KeyCondition:
        return KeyCondition(
            "(" + " OR ".join(c.sql for c in conditions) + ")",
            tuple(p for c in conditions for p in c.params),
        )


@dataclass(frozen=True)
class Source:
    """Where values of one JSON type live: ``tables`` (main, then delta) and their ``column``."""

    tables: tuple[str, ...]
    column: str


class Mapping:
    """The tables of one collection under one mapping on one backend."""

    name: str
    # Whether each object's JSON text is kept too (the hybrid mapping's object
    # table): the rows made for writing then end with a list of (objid, packed text).
    keeps_text = False
    # Whether the delta tables may hold rows: read by the collection at the start of
    # each transaction. While False, statements read the main tables only.
    delta = False

    def __init__(self, collection: str, backend: Backend) -> None:
        self.collection = collection.lower()
        self.backend = backend
        # Table names and padded column lists, made once: a statement asks for them
        # a dozen times, and a one-object fetch (NoBench Q5) takes ~0.3 ms in all.
        self._parts = {
            d: {self._table(s, d): v for s, v in self.layout().items()} for d in (False, True)
        }
        self._all_tables = {**self._parts[False], **self._parts[True]}
        self._padded_columns: dict[tuple[str, tuple[str, ...]], str] = {}

    def _table(self, suffix: str, delta: bool = False) -> str:
        return f'"argo_{self.collection}_{suffix}{"_delta" if delta else ""}"'

    # --- layout ------------------------------------------------------------------
    def layout(self) -> dict[str, tuple[str, ...]]:
        """Table suffix -> its value columns (after objid, keystr, ord)."""
        raise NotImplementedError

    def type_suffix(self, json_type: str) -> str:
        """The suffix of the table holding values of ``json_type``."""
        raise NotImplementedError

    def part(self, delta: bool) -> dict[str, tuple[str, ...]]:
        """The main (or delta) tables: table name -> its value columns."""
        return self._parts[delta]

    def all_tables(self) -> dict[str, tuple[str, ...]]:
        """Every table of the collection, main then delta."""
        return self._all_tables

    def tables(self) -> dict[str, tuple[str, ...]]:
        """The tables that may hold rows now (the delta's too while :attr:`delta`)."""
        return self.all_tables() if self.delta else self.part(False)

    def source(self, json_type: str) -> Source:
        suffix = self.type_suffix(json_type)
        parts = (False, True) if self.delta else (False,)
        return Source(tuple(self._table(suffix, d) for d in parts), _VALUE_COLUMN[json_type])

    def create(self) -> None:
        self.create_tables(self.all_tables())

    def create_tables(self, tables: dict[str, tuple[str, ...]]) -> None:
        """Create ``tables`` (some of this mapping's) with their indexes."""
        t = self.backend.types
        for table, values in tables.items():
            columns = [
                f"objid {t.objid} NOT NULL",
                f"keystr {t.key} NOT NULL",
                f"ord {t.bigint} NOT NULL",
            ]
            columns += [f"{v} {t.of(v)}" for v in values]
            if self.backend.keyed_by_object:
                columns.append("PRIMARY KEY (objid, keystr)")
            self.backend.execute(
                f"CREATE TABLE {table} ({', '.join(columns)}){self.backend.table_options}"
            )
        self.create_indexes(tables)

    def indexes(self, tables: dict[str, tuple[str, ...]]) -> list[tuple[str, str, list[str]]]:
        """(table, index name, columns) of the paper's indexes on objid, keystr, valstr and valnum.

        They are built as (objid) and (keystr, value): the composite indexes
        serve ``keystr`` alone too; a table without a string or number column
        gets (keystr) by itself. On backends that read an index alone
        (``Backend.covering_indexes``), an argo3 table's index on the key
        carries the rest of the row too, so that reading the rows of a key (a
        projection such as NoBench's Q1) is a scan of the index, without a
        lookup of each row by its primary key, which is in every index of a
        keyed table. (argo1's one table would carry every column a second and
        third time: its indexes stay as they are.) ``'w' = ANY arr``, which
        knows the value but only a range of keys, is a seek per element key
        found by :meth:`element_keys`; on DuckDB, which cannot seek by key,
        strings get (valstr, keystr) for it instead. (An index on values,
        which the paper has, dirtied one more random page per string a
        write inserts; without it a 1M-object NoBench load fell from 106 to
        82.5 s.)
        """
        out = []
        for table, values in tables.items():
            base = table.strip('"')
            covering = self.backend.covering_indexes and not self.wide
            by_key = []
            for v in values:
                if v in ("valstr", "valnum"):
                    rest = ["ord", *(c for c in values if c != v)] if covering else []
                    by_key.append((v, ["keystr", v, *rest]))
            # DuckDB has no seeks by key to walk array elements with (element_keys)
            wants_value = "valstr" in values and not self.backend.seeks_by_key
            by_value = [("value", ["valstr", "keystr"])] if wants_value else []
            # a table keyed by (objid, keystr) needs no separate objid index
            by_objid = [] if self.backend.keyed_by_object else [("objid", ["objid"])]
            by_key = by_key or [("key", ["keystr", *(["ord", *values] if covering else [])])]
            for suffix, columns in [*by_objid, *by_key, *by_value]:
                out.append((table, f'"{base}_{suffix}"', columns))
        return out

    def create_indexes(self, tables: dict[str, tuple[str, ...]]) -> None:
        for table, name, columns in self.indexes(tables):
            cols = ", ".join(self.backend.index_column(c) for c in columns)
            self.backend.execute(f"CREATE INDEX {name} ON {table} ({cols})")

    def drop(self) -> None:
        for table in self.all_tables():
            self.backend.execute(f"DROP TABLE IF EXISTS {table}")

    def exists(self) -> bool:
        return any(self.backend.table_exists(t) for t in self.all_tables())

    # --- writing -------------------------------------------------------------------
    # Rows travel as one list of tuples per table, in the order of layout(), each
    # tuple (objid, keystr, ord, *that table's value columns): the layout that
    # tesseradb._core.flatten_documents makes from JSON text (``wide`` for argo1).
    # On a backend with Backend.rows_per_insert above 1, a tuple from the kernel
    # holds that many rows' values one after another.
    wide: bool

    def row_lists(self) -> list[list[tuple[Any, ...]]]:
        return [[] for _ in self.layout()]

    def add_rows(
        self, rows: list[list[tuple[Any, ...]]], objid: int, leaves: Sequence[Leaf]
    ) -> None:
        """Append one document's leaves to ``rows`` (the Python path of flattening)."""
        raise NotImplementedError

    def insert_rows(self, rows: list[list[tuple[Any, ...]]], delta: bool) -> None:
        """Insert rows into the main tables or (``delta``) the delta tables."""
        for (table, values), table_rows in zip(self.part(delta).items(), rows, strict=True):
            if table_rows:
                self.backend.insert_rows(table, ("objid", "keystr", "ord", *values), table_rows)

    def insert(
        self, objids: Sequence[int], documents: Sequence[Sequence[Leaf]], delta: bool
    ) -> None:
        rows = self.row_lists()
        for objid, leaves in zip(objids, documents, strict=True):
            self.add_rows(rows, objid, leaves)
        self.insert_rows(rows, delta)

    def drop_indexes(self, tables: dict[str, tuple[str, ...]]) -> None:
        """Drop the indexes (a bulk load into an empty collection builds them afterwards)."""
        for table, name, _ in self.indexes(tables):
            self.backend.execute(self.backend.drop_index_sql(name, table))

    def merge_delta(self) -> None:
        """Move the delta's rows into the main tables (inside the caller's transaction).

        One INSERT ... SELECT per table, in primary-key order, all in one
        transaction: an index page that many of the rows land on is written to
        the log once, not once per insert that touched it.
        """
        for (main, values), delta in zip(self.part(False).items(), self.part(True), strict=True):
            columns = ", ".join(("objid", "keystr", "ord", *values))
            self.backend.execute(
                f"INSERT INTO {main} ({columns}) SELECT {columns} FROM {delta} "
                "ORDER BY objid, keystr"
            )
            self.backend.execute(f"DELETE FROM {delta}")

    def delete(self, objids: Sequence[int]) -> None:
        for table in self.tables():
            self._delete_from(table, objids)

    def _delete_from(self, table: str, objids: Sequence[int]) -> None:
        for start in range(0, len(objids), 500):
            part = objids[start : start + 500]
            self.backend.execute(
                f"DELETE FROM {table} WHERE objid IN ({', '.join('?' * len(part))})", part
            )

    # --- reading -------------------------------------------------------------------
    def objids_sql(self) -> str:
        """SQL giving every objid of the collection (no duplicates)."""
        return self.shredded_objids_sql()

    def shredded_objids_sql(self) -> str:
        """SQL giving every objid that has rows in the shredded tables (no duplicates)."""
        return self.keyed_objids(KeyCondition("1 = 1", ()))[0]

    def keyed_objids(self, key: KeyCondition) -> tuple[str, tuple[Any, ...]]:
        """SQL for the objids having a row whose key satisfies ``key`` (no duplicates)."""
        tables = list(self.tables())
        if len(tables) == 1:  # UNION is what removes duplicates otherwise
            return f"SELECT DISTINCT objid FROM {tables[0]} WHERE {key.sql}", key.params
        parts = [f"SELECT objid FROM {t} WHERE {key.sql}" for t in tables]
        return " UNION ".join(parts), key.params * len(parts)

    def rows_sql(self, where: str, params: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
        """SQL for the rows (all of ROW_COLUMNS) satisfying ``where``, by objid and ord."""
        parts = [f"SELECT {self._padded(t)} FROM {t} WHERE {where}" for t in self.tables()]
        return (
            "SELECT * FROM (" + " UNION ALL ".join(parts) + ") AS argo_rows ORDER BY objid, ord",
            params * len(parts),
        )

    def documents(
        self,
        where: str,
        params: tuple[Any, ...],
        keys: Sequence[KeyCondition] | None = None,
        execute: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]] | None = None,
    ) -> list[tuple[int, dict[str, Any]]]:
        """``(objid, object)`` rebuilt from the rows satisfying ``where``, in objid order.

        With ``keys``, only the rows whose key satisfies one of them (a projection).
        ``execute`` runs the SQL (default: the backend's connection; a fetch split
        in two runs one half on ``Backend.twin_reader``'s).
        """
        execute = execute or self.backend.execute
        pack = self.backend.pack_rows()
        if pack is None:  # the backend returns plain rows
            if keys:
                either = KeyCondition.any_of(keys)
                where, params = f"{where} AND {either.sql}", params + either.params
            sql, params = self.rows_sql(where, params)
            with self._rebuilding():
                return rebuild_documents(execute(sql, params))
        # One statement, one packed text per table. Each key is its own range of
        # the index (an OR of ranges would be collected in a temporary b-tree);
        # rows that two keys both select are kept once by the kernel.
        selections = [(where, params)]
        if keys:
            selections = [(f"{where} AND {k.sql}", params + k.params) for k in keys]

        def rows(table: str, condition: str = "") -> tuple[str, list[Any]]:
            sql = " UNION ALL ".join(
                f"SELECT {self._padded(table)} FROM {table} WHERE {w}{condition}"
                for w, _ in selections
            )
            return sql, [p for _, ps in selections for p in ps]

        parts: list[str] = []
        part_params: list[Any] = []
        doubles: list[str] = []
        double_params: list[Any] = []
        for table, own in self.tables().items():
            condition = ""
            if "valnum" in own and not self.backend.packs_doubles:
                condition = " AND (valnum IS NULL OR valint IS NOT NULL)"
                sql, ps = rows(table, " AND valnum IS NOT NULL AND valint IS NULL")
                doubles.append(f"SELECT objid, keystr, ord, valnum FROM ({sql}) AS argo_d")
                double_params += ps
            sql, ps = rows(table, condition)
            parts.append(f"(SELECT {pack} FROM ({sql}) AS argo_u)")
            part_params += ps
        texts = [t for t in execute(f"SELECT {', '.join(parts)}", part_params)[0] if t]
        if doubles:
            plain = execute(" UNION ALL ".join(doubles), double_params)
            # repr is the shortest text that reads back as the same double
            packed = [[o, k, d, None, repr(float(v)), None, None, None] for o, k, d, v in plain]
            texts.append(json.dumps(packed, ensure_ascii=False))
        with self._rebuilding():
            return rebuild_packed_documents(texts)

    def texts(self, where: str, params: tuple[Any, ...]) -> list[tuple[int, str]]:
        """``(objid, JSON text)`` of the objects whose objid satisfies ``where``, in objid
        order: the text as ``json.dumps(object, ensure_ascii=False)`` writes it."""
        dumps = json.dumps
        return [(i, dumps(d, ensure_ascii=False)) for i, d in self.documents(where, params)]

    @contextlib.contextmanager
    def _rebuilding(self) -> Iterator[None]:
        """Rows that do not make objects were damaged on the backend (a written row always
        does): name the collection instead of the kernel's ValueError."""
        try:
            yield
        except (ValueError, TypeError, KeyError) as err:
            raise DocumentBackendError(
                f"collection {self.collection!r}: its rows on {self.backend.describe()} cannot be "
                f"rebuilt into objects ({err}); the backend's files may be damaged "
                "(`tessera check` runs its integrity check)"
            ) from None

    def element_keys(self, key: str, tables: Sequence[str]) -> list[str] | None:
        """The keys ``key[0]``, ``key[1]``, ... that ``tables`` hold; None if too many to walk.

        Found by skipping through the index that leads with keystr, one seek
        per element position (a loose index scan): each key in ``[key[,
        key\\)`` is an element or lies in an element's subtree, which ends
        before ``element + '\\'``. This is what lets ``'w' = ANY arr`` be a seek
        per position on (keystr, valstr) without an index on values.
        """
        found: set[str] = set()
        for table in tables:
            low, high = key + "[", key + "\\"
            while True:
                rows = self.backend.execute(
                    f"SELECT MIN(keystr) FROM {table} WHERE keystr >= ? AND keystr < ?",
                    [low, high],
                )
                following = rows[0][0] if rows else None
                if following is None:
                    break
                digits = following[len(key) + 1 :].split("]", 1)[0]
                element = f"{key}[{digits}]"
                if digits.isascii() and digits.isdigit():
                    found.add(element)
                    if len(found) > ELEMENT_WALK_LIMIT:
                        return None
                low = element + "\\"
        return sorted(found)

    def typed_values(self, key: str, within: str | None = None) -> tuple[str, tuple[Any, ...]]:
        """SQL for ``objid, valstr, valnum, valint, valbool, valkind`` of the exact key ``key``.

        ``within`` names a relation of objids to take the values of only:
        each table is then reached through its objids (by the (objid, keystr) key
        or the objid index) instead of reading every value of the key. Tables
        that hold no value of the key are left out first (one index seek each
        where the backend has one), so the objids are not looked up in them in
        vain: NoBench's Q10 groups 10% of the objects by a number, which the
        three other argo3 tables would have been probed for too.
        """
        tables = list(self.tables())
        if within is not None:
            tables = self.holding(key, tables) or tables[:1]
        parts = []
        for table in tables:
            padded = self._padded(table, leading=("argo_t.objid AS objid",))
            source = f"{table} AS argo_t"
            if within is not None:
                source = f"{within} AS argo_w JOIN {source} ON argo_t.objid = argo_w.objid"
            parts.append(f"SELECT {padded} FROM {source} WHERE argo_t.keystr = ?")
        return " UNION ALL ".join(parts), (key,) * len(parts)

    def holding(self, key: str, tables: Sequence[str]) -> list[str]:
        """Those of ``tables`` that hold a row of the exact key ``key``.

        One index seek each, all in one statement, where the backend seeks by
        key; elsewhere (DuckDB) every table, as a probe would be a scan.
        """
        if not self.backend.seeks_by_key or len(tables) < 2:
            return list(tables)
        probes = " UNION ALL ".join(
            f"SELECT {n} FROM (SELECT 1 AS found FROM {table} WHERE keystr = ? LIMIT 1) AS argo_k{n}"
            for n, table in enumerate(tables)
        )
        return [tables[int(row[0])] for row in self.backend.execute(probes, [key] * len(tables))]

    def _padded(self, table: str, leading: tuple[str, ...] = ("objid", "keystr", "ord")) -> str:
        """The table's value columns as all of ROW_COLUMNS' (NULL where it has none)."""
        found = self._padded_columns.get((table, leading))
        if found is None:
            own = self._all_tables[table]
            null = self.backend.typed_null
            values = [c if c in own else f"{null(c)} AS {c}" for c in ROW_COLUMNS[3:]]
            found = self._padded_columns[table, leading] = ", ".join([*leading, *values])
        return found


class Argo1(Mapping):
    """One vertical table: ``argo_<c>_data``."""

    name = "argo1"
    wide = True

    def layout(self) -> dict[str, tuple[str, ...]]:
        return {"data": ("valstr", "valnum", "valint", "valbool", "valkind")}

    def type_suffix(self, json_type: str) -> str:
        return "data"

    def add_rows(
        self, rows: list[list[tuple[Any, ...]]], objid: int, leaves: Sequence[Leaf]
    ) -> None:
        rows[0].extend(
            (objid, f.keystr, f.ord, f.valstr, f.valnum, f.valint, f.valbool, f.valkind)
            for f in leaves
        )


class Argo3(Mapping):
    """One table per JSON type: ``argo_<c>_str``, ``_num``, ``_bool`` (and ``_nil``)."""

    name = "argo3"
    wide = False

    def layout(self) -> dict[str, tuple[str, ...]]:
        return {
            "str": ("valstr",),
            "num": ("valnum", "valint"),
            "bool": ("valbool",),
            "nil": ("valkind",),
        }

    def type_suffix(self, json_type: str) -> str:
        return json_type

    def add_rows(
        self, rows: list[list[tuple[Any, ...]]], objid: int, leaves: Sequence[Leaf]
    ) -> None:
        strings, numbers, booleans, others = rows  # the order of layout()
        for f in leaves:
            if f.valstr is not None:
                strings.append((objid, f.keystr, f.ord, f.valstr))
            elif f.valnum is not None:
                numbers.append((objid, f.keystr, f.ord, f.valnum, f.valint))
            elif f.valbool is not None:
                booleans.append((objid, f.keystr, f.ord, f.valbool))
            else:
                others.append((objid, f.keystr, f.ord, f.valkind))


class Hybrid(Argo3):
    """argo3's tables, plus ``argo_<c>_obj``: each object's packed JSON text by objid.

    The text is ``json.dumps(object, ensure_ascii=False)`` of the object the
    shredded rows rebuild into (``_core.flatten_documents`` writes it beside
    the rows, the Python path with ``json.dumps`` itself), packed as one zstd
    frame with a checksum (``_core.pack_documents``), so reading it gives
    exactly the object argo3 would rebuild. The object table has no delta:
    objids only grow, so its inserts append at the end of its key.
    """

    name = "hybrid"
    keeps_text = True

    def __init__(self, collection: str, backend: Backend) -> None:
        super().__init__(collection, backend)
        self.objects = self._table("obj")

    def row_lists(self) -> list[list[tuple[Any, ...]]]:
        return [*super().row_lists(), []]

    def add_rows(
        self, rows: list[list[tuple[Any, ...]]], objid: int, leaves: Sequence[Leaf]
    ) -> None:
        super().add_rows(rows[:-1], objid, leaves)
        # -0.0 as the backend gives it back, so the text and the rows agree
        unsigned = self.backend is not None and not self.backend.keeps_negative_zero
        rebuilt = rebuild_documents(
            [
                (
                    objid,
                    f.keystr,
                    f.ord,
                    f.valstr,
                    0.0 if unsigned and f.valnum == 0.0 and f.valint is None else f.valnum,
                    f.valint,
                    f.valbool,
                    f.valkind,
                )
                for f in leaves
            ]
        )
        text = json.dumps(rebuilt[0][1], ensure_ascii=False)
        rows[-1].append((objid, pack_documents([text])[0]))

    def insert_rows(self, rows: list[list[tuple[Any, ...]]], delta: bool) -> None:
        super().insert_rows(rows[:-1], delta)
        if rows[-1]:
            self.backend.insert_rows(self.objects, ("objid", "doc"), rows[-1])

    def create(self) -> None:
        super().create()
        # (no table_options: SQLite's WITHOUT ROWID suits rows of a few dozen bytes;
        # a packed text of hundreds sits better in a rowid table keyed by objid)
        t = self.backend.types
        self.backend.execute(
            f"CREATE TABLE {self.objects} (objid {t.objid} NOT NULL PRIMARY KEY, "
            f"doc {t.blob} NOT NULL)"
        )

    def drop(self) -> None:
        super().drop()
        self.backend.execute(f"DROP TABLE IF EXISTS {self.objects}")

    def exists(self) -> bool:
        return super().exists() or self.backend.table_exists(self.objects)

    def delete(self, objids: Sequence[int]) -> None:
        super().delete(objids)
        self._delete_from(self.objects, objids)

    def objids_sql(self) -> str:
        return f"SELECT objid FROM {self.objects}"

    def documents(
        self,
        where: str,
        params: tuple[Any, ...],
        keys: Sequence[KeyCondition] | None = None,
        execute: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]] | None = None,
    ) -> list[tuple[int, dict[str, Any]]]:
        if keys:  # a projection: from the shredded rows of its keys
            return super().documents(where, params, keys, execute)
        with self._rebuilding():  # (a damaged file may give NULLs or other types too)
            objids, packed = self._packed(where, params, execute)
            return list(zip(objids, load_documents(packed), strict=True))

    def texts(self, where: str, params: tuple[Any, ...]) -> list[tuple[int, str]]:
        # the kept texts, unparsed
        with self._rebuilding():
            objids, packed = self._packed(where, params, None)
            return list(zip(objids, unpack_texts(packed), strict=True))

    def _packed(
        self,
        where: str,
        params: tuple[Any, ...],
        execute: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]] | None,
    ) -> tuple[list[int], list[bytes]]:
        execute = execute or self.backend.execute
        rows = execute(
            f"SELECT objid, doc FROM {self.objects} WHERE {where} ORDER BY objid", params
        )
        return [int(r[0]) for r in rows], [bytes(r[1]) for r in rows]


def make_mapping(name: str, collection: str, backend: Backend) -> Mapping:
    if name == "argo1":
        return Argo1(collection, backend)
    if name == "argo3":
        return Argo3(collection, backend)
    if name == "hybrid":
        return Hybrid(collection, backend)
    from tesseradb.errors import DocumentError

    raise DocumentError(f"unknown mapping {name!r}: use one of {', '.join(MAPPINGS)}")
