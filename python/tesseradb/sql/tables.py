"""Plain tables and views as a data model of the database (the :class:`~tesseradb.kinds.Kind` contract).

They are made by SQL and live in the table store (``tables.duckdb``), which
the engine owns; the catalog mirrors their names and columns after every
statement that changes them. DuckDB reads them natively, so they expose no
relations of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tesseradb._sqltext import quote_identifier
from tesseradb.errors import TesseraError
from tesseradb.kinds import KindBase, KindContext, LoadRequest, ObjectInfo
from tesseradb.sql.table_load import TABLE_SUFFIXES, load_table

if TYPE_CHECKING:
    from tesseradb.catalog import CatalogObject
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.engine import SQLEngine
    from tesseradb.sql.relation import Namespace, Relation

__all__ = ["PLAIN_KINDS", "TablesKind"]

PLAIN_KINDS = ("table", "view")  # the catalog kinds of what SQL makes in the table store


class TablesKind(KindBase):
    name = PLAIN_KINDS[0]
    aliases = PLAIN_KINDS[1:]
    label = "table"
    # Loading: CSV, Parquet, JSON and Arrow IPC by DuckDB's readers (sql/table_load.py)
    load_suffixes = TABLE_SUFFIXES
    load_defaults = frozenset({"csv", "parquet", "arrow"})
    load_options: frozenset[str] = frozenset()
    load_unit = "rows"

    @staticmethod
    def crash_model() -> Any:
        """What this kind's writers do in the crash matrix (tesseradb.testing.crash)."""
        from tesseradb.sql.table_crash import TableCrashModel

        return TableCrashModel()

    def __init__(self, context: KindContext, engine: SQLEngine, namespace: Namespace) -> None:
        super().__init__(context)
        self.engine = engine
        self.namespace = namespace

    @classmethod
    def factory(
        cls, engine: SQLEngine, namespace: Namespace
    ) -> Callable[[KindContext], TablesKind]:
        """What the registry calls to make the kind (the engine exists before the kinds)."""
        return lambda context: cls(context, engine, namespace)

    def create(self, name: str, spec: dict[str, Any]) -> None:
        raise TesseraError(f"table {name!r}: plain tables and views are made with SQL (db.sql)")

    def open(self, name: str, spec: dict[str, Any]) -> None:
        return None

    def details(self, name: str, opened: None) -> dict[str, Any]:
        # (through the engine: a view may read the database's relations)
        return {
            "rows": self.engine.execute(f"SELECT count(*) FROM {quote_identifier(name)}").scalar()
        }

    def load(self, request: LoadRequest) -> tuple[int, str]:
        return load_table(request)

    def relations(self, opened: None) -> Mapping[str, Relation]:
        return {}  # DuckDB reads them from the table store itself

    def drop(self, name: str, spec: dict[str, Any], opened: None) -> None:
        kind = self.namespace.kind_of(name) or "table"  # the catalog says table or view
        self.engine.execute(f"DROP {kind.upper()} {quote_identifier(name)}")

    def describe(self, objects: Sequence[CatalogObject]) -> list[ObjectInfo]:
        if not objects:
            return []
        rows = {
            str(name).lower(): int(count)
            for name, count in self.engine.store_query(
                "SELECT table_name, estimated_size FROM duckdb_tables() "
                "WHERE database_name = current_database() AND schema_name = 'main'"
            )
        }
        return [
            ObjectInfo(
                obj.name, obj.kind, rows.get(obj.name.lower()), None, obj.created, obj.modified
            )
            for obj in objects
        ]

    def check(
        self, objects: Sequence[CatalogObject], repair: bool
    ) -> tuple[list[Finding], list[Verified]]:
        """Each table read whole, and the catalog's names against the table store."""
        from tesseradb.checks import Finding, Verified

        findings: list[Finding] = []
        store = self.engine.store
        catalog = {o.name.lower(): o.name for o in objects}
        if not catalog and not store.exists:
            return [], []
        try:
            stored = self.engine.store_tables()
        except TesseraError as err:
            return [Finding("(tables)", store.path.name, str(err))], []
        present = {n.lower(): n for n in stored}
        for key in sorted(set(catalog) ^ set(present)):
            where = "the catalog" if key in catalog else "the table store"
            other = "the table store" if key in catalog else "the catalog"
            findings.append(
                Finding(
                    catalog.get(key) or present[key],
                    "catalog entry" if key in catalog else store.path.name,
                    f"is in {where} but not in {other}",
                    action="catalog brought in line with the table store" if repair else "",
                    repaired=repair,
                )
            )
        if repair and set(catalog) != set(present):
            self.namespace.sync_tables(stored)
        rows = 0
        for name, (kind, _) in sorted(stored.items()):
            if kind != "table":
                continue
            try:
                rows += self.engine.read_whole(name)
            except TesseraError as err:
                findings.append(Finding(name, f"table in {store.path.name}", str(err)))
        tables = sum(1 for kind, _ in stored.values() if kind == "table")
        return findings, [
            Verified("(tables)", "table store", f"{tables} table(s), {rows:,} rows read whole")
        ]
