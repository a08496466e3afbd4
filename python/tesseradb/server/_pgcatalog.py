"""The catalog queries of psql (``\\d NAME``, ``\\l``) and of drivers (ADBC's type
catalog) that DuckDB's ``pg_catalog`` cannot answer, answered from its catalog.

psql describes a table with a dozen queries of PostgreSQL's own catalog (``pg_class``'s
row-security and persistence columns, ``pg_attribute``'s identity and generated
columns, ``pg_index``, ``pg_constraint``, ``pg_policy``, ``pg_publication`` ...), which
DuckDB's ``pg_catalog`` does not have. Each is recognised by what it asks for, and
answered from ``duckdb_tables()``, ``duckdb_views()``, ``duckdb_columns()`` and
``duckdb_constraints()``, run in the user's own session (its restrictions hold; the
caller says what a user without the read right gets): the table's kind, its columns (DuckDB's type names, defaults, NOT NULL),
its primary key and unique constraints as indexes, its CHECK constraints, and a view's
definition (``\\d+``). What DuckDB has nothing of (policies, triggers, statistics objects,
publications, inheritance, partitions) is answered with no rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tesseradb.server._pgtypes import (
    ARRAY_TYPES,
    BOOL,
    INT2,
    OID,
    TEXT,
    TYPE_CATALOG,
    PgType,
    pg_type,
)

__all__ = ["driver_columns", "driver_types", "psql_describe"]

Run = Callable[[str, list[Any]], list[tuple[Any, ...]]]  # a catalog query, its rows
Answer = tuple[list[str], list[PgType], list[tuple[Any, ...]]]  # columns, types, rows

_OID = re.compile(r"(?:c\.oid|attrelid|conrelid|indrelid|tgrelid|polrelid|stxrelid|inhrelid"
                  r"|inhparent|pr\.prrelid|prrelid|ev_class)\s*=\s*'(\d+)'", re.I)  # fmt: skip
_VIEWDEF = re.compile(r"pg_get_viewdef\('(\d+)'::pg_catalog\.oid(?:, true)?\)", re.I)


# the type catalog a driver reads as it connects (ADBC's PostgreSQL driver: the receive
# function of each type, by which it decodes binary values), answered from the types
# this server sends (DuckDB's pg_type has no receive functions)
_DRIVER_TYPES = re.compile(
    r"^\s*SELECT\s+oid\s*,\s*typname\s*,\s*typreceive\s*,\s*typbasetype\s*,\s*typrelid\s*,"
    r"\s*typarray\s+FROM\s+pg_catalog\.pg_type\b",
    re.IGNORECASE,
)


def driver_types(text: str) -> Answer | None:
    """The answer to a driver's query of the type catalog, or None if ``text`` is not it."""
    if not _DRIVER_TYPES.match(text):
        return None
    rows = [
        (oid, name, receive, 0, 0, ARRAY_TYPES.get(oid, 0))
        for oid, (name, receive) in sorted(TYPE_CATALOG.items())
    ]
    names, kinds = _cols(
        ("oid", OID), ("typname", TEXT), ("typreceive", TEXT), ("typbasetype", OID),
        ("typrelid", OID), ("typarray", OID),
    )  # fmt: skip
    return names, kinds, rows


_DRIVER_COLUMNS = re.compile(
    r"^\s*SELECT\s+attr\.attname\s*,\s*attr\.atttypid\s+FROM\s+pg_catalog\.pg_attribute"
    r"\s+AS\s+attr\s+WHERE\s+attr\.attrelid\s*=\s*\$1::regclass::oid",
    re.IGNORECASE,
)


def driver_columns(text: str, params: list[Any], run: Run) -> Answer | None:
    """The answer to a driver's query of a table's columns by its name (``$1::regclass``,
    which DuckDB lacks: ADBC's ingest into an existing table), or None if ``text`` is not
    it. Each column's type is the PostgreSQL type its values travel as."""
    if not _DRIVER_COLUMNS.match(text) or len(params) != 1 or not isinstance(params[0], str):
        return None
    parts = [p.strip().strip('"').replace('""', '"') for p in params[0].split(".")]
    schema, table = (parts[-2] if len(parts) > 1 else None), parts[-1]
    rows = run(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = $1 "
        "AND ($2 IS NULL OR schema_name = $2) ORDER BY column_index",
        [table, schema],
    )
    names, kinds = _cols(("attname", TEXT), ("atttypid", OID))
    return names, kinds, [(name, pg_type(kind).oid) for name, kind in rows]


def _cols(*spec: tuple[str, int]) -> tuple[list[str], list[PgType]]:
    return [n for n, _ in spec], [PgType(t) for _, t in spec]


def psql_describe(text: str, run: Run, database: str) -> Answer | None:
    """The columns, their types and the rows answering one of psql's describe queries,
    or None when ``text`` is not one (``database``: the name ``\\l`` lists)."""
    compact = " ".join(text.split())
    if "FROM pg_catalog.pg_database d" in compact and 'as "Name"' in compact:
        return _databases(database, compact)  # (\\l)
    viewdef = _VIEWDEF.search(compact)
    if viewdef is not None:
        return _view(int(viewdef.group(1)), run, compact)
    found = _OID.search(compact)
    if found is None or "pg_catalog." not in compact:
        return None
    oid = int(found.group(1))
    for marker, answer in _ANSWERS:
        if marker in compact:
            return answer(oid, run, compact)
    return None


def _relation(oid: int, run: Run) -> tuple[str, str, str, str] | None:
    """(database, schema, name, kind 'r' or 'v') of the table or view with ``oid``."""
    rows = run(
        "SELECT database_name, schema_name, table_name, 'r' FROM duckdb_tables() "
        "WHERE table_oid = $1 UNION ALL SELECT database_name, schema_name, view_name, 'v' "
        "FROM duckdb_views() WHERE view_oid = $1",
        [oid],
    )
    return tuple(rows[0]) if rows else None  # type: ignore[return-value]


def _constraints(oid: int, run: Run) -> list[tuple[Any, ...]]:
    return run(
        "SELECT constraint_type, constraint_text, constraint_name, constraint_column_names "
        "FROM duckdb_constraints() WHERE table_oid = $1 ORDER BY constraint_index",
        [oid],
    )


def _table(oid: int, run: Run, text: str) -> Any:
    names, types = _cols(
        ("relchecks", INT2), ("relkind", TEXT), ("relhasindex", BOOL), ("relhasrules", BOOL),
        ("relhastriggers", BOOL), ("relrowsecurity", BOOL), ("relforcerowsecurity", BOOL),
        ("relhasoids", BOOL), ("relispartition", BOOL), ("reloptions", TEXT),
        ("reltablespace", OID), ("reloftype", TEXT), ("relpersistence", TEXT),
        ("relreplident", TEXT), ("amname", TEXT),
    )  # fmt: skip
    found = _relation(oid, run)
    if found is None:
        return names, types, []
    kind = found[3]
    constraints = _constraints(oid, run) if kind == "r" else []
    checks = sum(1 for c in constraints if c[0] == "CHECK")
    indexed = any(c[0] in ("PRIMARY KEY", "UNIQUE") for c in constraints)
    row = (checks, kind, indexed, False, False, False, False, False, False, "", 0, "", "p", "d",
           "heap" if kind == "r" else None)  # fmt: skip
    return names, types, [row]


def _columns(oid: int, run: Run, text: str) -> Any:
    names, types = _cols(
        ("attname", TEXT), ("format_type", TEXT), ("pg_get_expr", TEXT), ("attnotnull", BOOL),
        ("attcollation", TEXT), ("attidentity", TEXT), ("attgenerated", TEXT),
    )  # fmt: skip
    rows = run(
        "SELECT column_name, lower(data_type), column_default, NOT is_nullable "
        "FROM duckdb_columns() WHERE table_oid = $1 ORDER BY column_index",
        [oid],
    )
    # (psql asks for more columns when it describes a view or with \d+: filled in empty)
    wanted = _top_level_commas(text[: text.index(" FROM pg_catalog.pg_attribute")]) + 1
    answer = [(*r, None, "", "") for r in rows]
    if wanted > len(names):
        extra = wanted - len(names)
        names += [f"extra{i}" for i in range(extra)]
        types += [PgType(TEXT)] * extra
        storage = ["p"] if "a.attstorage" in text else []  # (\\d+: plain, as DuckDB keeps it)
        answer = [(*r, *storage, *([None] * (extra - len(storage)))) for r in answer]
    return names[:wanted], types[:wanted], [r[:wanted] for r in answer]


def _top_level_commas(select: str) -> int:
    """The commas of a select list outside parentheses (between its columns)."""
    depth = count = 0
    for c in select:
        depth += {"(": 1, ")": -1}.get(c, 0)
        count += c == "," and depth == 0
    return count


def _indexes(oid: int, run: Run, text: str) -> Any:
    names, types = _cols(
        ("relname", TEXT), ("indisprimary", BOOL), ("indisunique", BOOL),
        ("indisclustered", BOOL), ("indisvalid", BOOL), ("pg_get_indexdef", TEXT),
        ("pg_get_constraintdef", TEXT), ("contype", TEXT), ("condeferrable", BOOL),
        ("condeferred", BOOL), ("indisreplident", BOOL), ("reltablespace", OID),
    )  # fmt: skip
    found = _relation(oid, run)
    rows = []
    for kind, definition, name, columns in _constraints(oid, run):
        if kind not in ("PRIMARY KEY", "UNIQUE") or found is None:
            continue
        primary = kind == "PRIMARY KEY"
        index = (
            f"CREATE UNIQUE INDEX {name} ON {found[1]}.{found[2]} USING art ({', '.join(columns)})"
        )
        rows.append((name, primary, True, False, True, index, definition,
                     "p" if primary else "u", False, False, False, 0))  # fmt: skip
    rows.sort(key=lambda r: (not r[1], r[0]))
    return names, types, rows


def _checks(oid: int, run: Run, text: str) -> Any:
    names, types = _cols(("conname", TEXT), ("condef", TEXT))
    rows = [(c[2], c[1]) for c in _constraints(oid, run) if c[0] == "CHECK"]
    return names, types, sorted(rows)


def _view(oid: int, run: Run, text: str) -> Any:
    names, types = _cols(("pg_get_viewdef", TEXT))
    rows = run("SELECT sql FROM duckdb_views() WHERE view_oid = $1", [oid])
    return names, types, rows


def _databases(name: str, text: str) -> Any:
    """psql's ``\\l``: the database served, one row under the columns psql names."""
    names = re.findall(r'(?i)\bas "([^"]+)"', text)
    known = {"Name": name, "Owner": "tessera", "Encoding": "UTF8", "Collate": "C", "Ctype": "C"}
    known["Locale Provider"] = "libc"
    return names, [PgType(TEXT)] * len(names), [tuple(known.get(n) for n in names)]


def _nothing(*spec: tuple[str, int]) -> Callable[[int, Run, str], Any]:
    def answer(oid: int, run: Run, text: str) -> Any:
        names, types = _cols(*spec)
        return names, types, []

    return answer


_POLICY = (("polname", TEXT), ("polpermissive", BOOL), ("polroles", TEXT), ("polqual", TEXT))
_STATISTICS = (("oid", OID), ("nsp", TEXT), ("stxname", TEXT), ("columns", TEXT))
_CHECKS = "pg_get_constraintdef(r.oid, true) FROM pg_catalog.pg_constraint r WHERE r.conrelid"

# (a fragment only one of psql's describe queries has, and how to answer it)
_ANSWERS: list[tuple[str, Callable[[int, Run, str], Any]]] = [
    ("c.relchecks, c.relkind, c.relhasindex", _table),
    ("FROM pg_catalog.pg_attribute a WHERE a.attrelid", _columns),
    ("pg_catalog.pg_get_indexdef(i.indexrelid", _indexes),
    (_CHECKS, _checks),
    ("contype = 'f'", _nothing(("conname", TEXT), ("condef", TEXT), ("ontable", TEXT))),
    ("pg_catalog.pg_policy", _nothing(*_POLICY)),
    ("pg_catalog.pg_statistic_ext", _nothing(*_STATISTICS)),
    ("pg_catalog.pg_publication", _nothing(("pubname", TEXT), ("a", TEXT), ("b", TEXT))),
    ("pg_catalog.pg_inherits", _nothing(("oid", OID), ("relname", TEXT))),
    ("pg_catalog.pg_trigger", _nothing(("tgname", TEXT), ("def", TEXT), ("tgenabled", TEXT))),
]
