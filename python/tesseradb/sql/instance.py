"""A DuckDB instance of the engine: its connection, table store, kept cursors and the
views that give dotted relations (``ptf.candidate``) their names.

The engine runs statements on its main instance, which holds the table store for
writing. A served database's users without the admin right run their queries on a
*restricted* instance instead: one whose file system, extensions and settings are out
of reach by DuckDB's own configuration (``enable_external_access`` off, extensions
neither installed nor loaded on demand, the configuration locked), reading the table
store's published snapshot through a private directory, so that neither a file path of
the server nor any file but that snapshot can be named.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._sqltext import quote_identifier
from tesseradb.errors import SQLExecutionError
from tesseradb.sql.relation import RelationScan
from tesseradb.sql.store import STORE_ALIAS, TableStore

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from tesseradb.sql.small_results import SmallResultKey

__all__ = ["DuckDBInstance", "KeptCursor"]


class _ScanSlot:
    """What a kept cursor has registered under a relation's name: each statement puts
    its own scan in it. Registering costs more than a small statement; DuckDB asks
    the registered object for its stream (and schema) anew at every statement."""

    def __init__(self) -> None:
        self.scan: RelationScan | None = None

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        if self.scan is None:
            raise SQLExecutionError("internal: a relation was read outside its statement")
        return self.scan.__arrow_c_stream__(requested_schema)


class KeptCursor:
    """A DuckDB cursor kept between statements, with the slots registered on it."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self.cursor = cursor
        self.slots: dict[str, _ScanSlot] = {}  # lower registered name -> slot
        # the small-result queries prepared on this cursor: key -> (name, EXECUTE statement)
        self.prepared: OrderedDict[SmallResultKey, tuple[str, Any]] = OrderedDict()

    def bind(self, scans: dict[str, RelationScan], other_names: set[str] | None) -> None:
        """Put this statement's scans in their slots (registering new names). A slot
        whose name the statement uses for something else (``other_names``; None: it
        is not known, so any) is unregistered first, so that it cannot shadow a table."""
        wanted = {name.lower(): scan for name, scan in scans.items()}
        for name in [n for n in self.slots if n not in wanted]:
            if other_names is None or name in other_names:
                self.cursor.unregister(name)
                del self.slots[name]
        for name, scan in scans.items():
            slot = self.slots.get(name.lower())
            if slot is None:
                slot = self.slots[name.lower()] = _ScanSlot()
                slot.scan = scan  # registering reads the schema
                self.cursor.register(name, slot)
            slot.scan = scan

    def release(self) -> None:
        """The statement is over: let go of its scans (and what they prefetched)."""
        for slot in self.slots.values():
            slot.scan = None


class DuckDBInstance:
    """One in-memory DuckDB instance with the table store attached as every cursor's
    default database (``restricted``: locked down, reading snapshots; see the module)."""

    POOL = 8  # cursors kept for sessions without state of their own

    def __init__(
        self, store: TableStore, restricted: bool = False, memory_limit: str | None = None
    ) -> None:
        self.store = store
        self.restricted = restricted
        self.memory_limit = memory_limit  # DuckDB's setting (tesseradb._limits)
        store.before_detach = self.drop_kept_cursors
        self._con: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self._cursors: list[KeptCursor] = []
        self._views: dict[str, pa.Schema] = {}  # dotted relation -> the schema its view has
        self._view_lock = threading.Lock()
        self._private: Path | None = None  # (restricted) where its snapshot links live
        self._spill: Path | None = None  # (a reader's) where DuckDB spills, removed at close

    # --- the connection -----------------------------------------------------------------
    def connection(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._con is None:
                import duckdb

                # names resolve to relations and tables, never to Python variables; no
                # extension is installed behind a statement's back
                config = {
                    "python_enable_replacements": False,
                    "autoinstall_known_extensions": False,
                }
                if self.memory_limit is not None:
                    config["memory_limit"] = self.memory_limit
                config["temp_directory"] = str(self._spill_directory())
                if self.restricted:
                    config["autoload_known_extensions"] = False
                    config["allow_community_extensions"] = False
                    # (its settings are locked: fetched losslessly from the start)
                    config["arrow_lossless_conversion"] = True
                con = duckdb.connect(":memory:", config=config)
                if self.restricted:
                    self.store.present = self._present
                    private = str(self._private).replace("'", "''")
                    con.execute(f"SET allowed_directories = ['{private}/']")
                    con.execute("SET enable_external_access = false")
                    con.execute("SET lock_configuration = true")
                self._con = con
            return self._con

    def _spill_directory(self) -> Path:
        """Where DuckDB writes what does not fit in its memory limit. The writer's beside
        the table store (where DuckDB puts a database file's: ``tables.duckdb.tmp``); any
        other instance's in a private directory removed at close (a reader may not write
        the database directory, and DuckDB's default for an in-memory instance is
        ``.tmp`` in the current directory: the user's)."""
        if not self.store.read_only and not self.restricted:
            return self.store.path.with_name(self.store.path.name + ".tmp")
        if self.restricted:
            if self._private is None:
                from tesseradb._snapshots import private_directory

                self._private = private_directory("tessera-restricted-")
            return self._private / "spill"
        if self._spill is None:
            from tesseradb._snapshots import private_directory

            # (named with this process's pid: removed by a later process if this one is
            # killed before its close)
            self._spill = private_directory("tessera-spill-")
        return self._spill

    def _present(self, path: Path) -> Path:
        """(restricted) A snapshot as its private link, the one place the instance may
        read: a statement never learns the database's own directory."""
        from tesseradb._snapshots import link_snapshot

        assert self._private is not None
        links = self._private / "store"
        links.mkdir(exist_ok=True)
        return link_snapshot(path, links)

    def close(self) -> None:
        self.store.close(self._con)
        with self._lock:
            for kept in self._cursors:
                kept.cursor.close()
            self._cursors.clear()
            if self._con is not None:
                self._con.close()
                self._con = None
        for private in (self._private, self._spill):
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)

    # --- cursors ------------------------------------------------------------------------
    def new_cursor(self) -> KeptCursor:
        """A cursor set up for statements (the store must be attached, by the caller)."""
        cursor = self.connection().cursor()
        # fetched losslessly (the Result converts as the user's settings say)
        if not self.restricted:  # (a restricted instance's settings are locked)
            cursor.execute("SET SESSION arrow_lossless_conversion = true")
        cursor.execute(f"USE {STORE_ALIAS}")
        return KeptCursor(cursor)

    def cursor(self) -> KeptCursor:
        """A kept cursor, or a new one, for one statement of a session without state."""
        with self._lock:
            if self._cursors:
                return self._cursors.pop()
        return self.new_cursor()

    def keep(self, kept: KeptCursor) -> None:
        """Keep a cursor that finished its statement cleanly (called while the store is
        still attached for it)."""
        with self._lock:
            if self._con is not None and len(self._cursors) < self.POOL:
                self._cursors.append(kept)
                return
        kept.cursor.close()

    def drop_kept_cursors(self) -> None:
        """The store is about to be detached: close the kept cursors that USE it."""
        with self._lock:
            for kept in self._cursors:
                kept.cursor.close()
            self._cursors.clear()

    # --- dotted relations ---------------------------------------------------------------
    def registered_name(self, scan: RelationScan) -> str:
        """The name a scan is registered under on the statement's cursor."""
        name = scan.relation.name
        if "." not in name:
            return name
        hidden = f"__tessera_{name}"
        schema = scan.relation.schema()
        with self._view_lock:
            if self._views.get(name.lower()) != schema:
                self._make_view(name, hidden, schema)
                self._views[name.lower()] = schema
        return hidden

    def _make_view(self, name: str, hidden: str, schema: pa.Schema) -> None:
        owner, _, table = name.partition(".")
        con = self.connection()
        with self.store.base_lock:
            attached = {
                row[0].lower()
                for row in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
            }
            if owner.lower() not in attached:
                con.execute(f"ATTACH ':memory:' AS {quote_identifier(owner)}")
        setup = con.cursor()
        try:
            setup.register(hidden, schema.empty_table())  # a stand-in to bind the view once
            setup.execute(
                f"CREATE OR REPLACE VIEW {quote_identifier(owner)}.main.{quote_identifier(table)} AS SELECT * FROM temp.main.{quote_identifier(hidden)}"
            )
        finally:
            setup.close()

    def forget_views(self, owner: str) -> None:
        """Drop the views of an object's dotted relations (the object is gone)."""
        with self._view_lock:
            made = [k for k in self._views if k.startswith(owner.lower() + ".")]
            for key in made:
                del self._views[key]
            if not made or self._con is None:
                return
            with self.store.base_lock, contextlib.suppress(Exception):
                attached = {
                    row[0].lower()
                    for row in self._con.execute(
                        "SELECT database_name FROM duckdb_databases()"
                    ).fetchall()
                }
                if owner.lower() in attached:
                    self._con.execute(f"DETACH {quote_identifier(owner)}")
