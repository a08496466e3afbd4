"""Running SQL: resolve names, push predicates into relations, execute on DuckDB.

One in-memory DuckDB instance per database runs every statement, each on
a cursor of its own (kept for later statements), so concurrent statements
never see each other's scans; a session that changed what DuckDB keeps per
connection runs its statements on its own cursor (:mod:`tesseradb.sql.session`).
Each relation a statement reads is a re-scannable Arrow stream carrying its
pushed-down columns and predicate, put in a slot registered once per cursor
under the relation's name. Plain tables live in the database's own DuckDB
file, the *table store* (:mod:`tesseradb.sql.store`), attached as the
default database of every cursor.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tesseradb._sqltext import quote_identifier
from tesseradb.catalog import validate_name
from tesseradb.errors import (
    InterruptedStatementError,
    ObjectExistsError,
    ReadOnlyError,
    SQLExecutionError,
    SQLSyntaxError,
    TableStoreError,
    UnknownTableError,
)
from tesseradb.sql.analysis import Analysis, RelationUse
from tesseradb.sql.analysis_cache import AnalysisCache
from tesseradb.sql.instance import DuckDBInstance, KeptCursor
from tesseradb.sql.paths import JsonPath
from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import (
    Aggregating,
    Counting,
    Estimate,
    PathFiltering,
    Relation,
    RelationScan,
    ScanDescribing,
    ScanStats,
    SessionHolding,
)
from tesseradb.sql.result import Result
from tesseradb.sql.session import (
    SQLSession,
    changes_session,
    read_settings,
    statements,
    transaction_state,
)
from tesseradb.sql.settings import RESULT_SETTINGS
from tesseradb.sql.store import SNAPSHOT_WAIT, STORE_ALIAS, TableStore
from tesseradb.sql.values import CONVERSION_SETTINGS, Conversion, arrow_lossy, as_duckdb_arrow

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from tesseradb.progress import Tracker

__all__ = ["Explain", "ExplainedRelation", "Namespace", "SQLEngine", "SQLSession"]

# words that may begin or end a transaction in a text (a cheap test before asking DuckDB)
_TRANSACTION_WORDS = re.compile(r"\b(begin|commit|rollback|abort|end|start)\b", re.IGNORECASE)
# statement types that run on their own, never inside a transaction of the engine's
_UNWRAPPED = frozenset(
    {"SET", "VARIABLE_SET", "PREPARE", "PRAGMA", "CALL", "ATTACH", "DETACH", "LOAD", "EXPLAIN"}
)
# functions that write the table store from inside a query (a sequence's next value)
_WRITING_FUNCTIONS = re.compile(r"\b(nextval|setval|checkpoint|force_checkpoint)\b", re.IGNORECASE)
# rows per Arrow batch handed to an execute() sink (an export streams them to a file)
_SINK_BATCH_ROWS = 1 << 17
# how often a watched statement's progress is read from DuckDB
_WATCH_PERIOD = 0.2
# Semi-join reduction: a partner narrows a relation only if it is at least this many
# times smaller (by estimate), and its keys are handed over up to this many.
SEMIJOIN_SELECTIVITY = 2
SEMIJOIN_MAX_KEYS = 1_000_000
# A lookup (a selection the engine answers from the scan) is for small answers: once a
# scan has given more rows than this, the statement runs in DuckDB (where it can be
# interrupted) with a fresh scan; the rows read so far are the most a lookup wastes.
LOOKUP_MAX_ROWS = 65_536


class Namespace(Protocol):
    """What the engine needs to know about the database's names."""

    def relation(self, name: str) -> Relation | None:
        """The relation of that name (case-insensitive), or None if it is not one."""
        ...

    def kind_of(self, name: str) -> str | None:
        """The kind of the object of that name (``table``, ``view``, ``array``, ...), or None."""
        ...

    def known_names(self) -> list[str]:
        """Every name a statement may refer to, for suggestions."""
        ...

    def columns_of(self, name: str) -> list[str] | None:
        """The column names of a plain table or view, or None if unknown."""
        ...

    def sync_tables(
        self, tables: dict[str, tuple[str, list[str]]], written: Sequence[str] = ()
    ) -> None:
        """The store now holds exactly these plain tables/views (name -> (kind, columns));
        ``written`` names the ones the statement changed."""
        ...


@dataclass
class ExplainedRelation:
    name: str
    aliases: list[str]
    columns: list[str] | None
    predicate: Predicate
    estimate: Estimate
    notes: list[str] = field(default_factory=list)
    stats: ScanStats | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aliases": self.aliases,
            "columns": self.columns,
            "predicate": str(self.predicate),
            "estimated_rows": self.estimate.rows,
            "estimated_bytes": self.estimate.bytes,
            "notes": self.notes,
        }


@dataclass
class Explain:
    """What a statement reads from each relation: the pushed-down predicate and columns."""

    sql: str
    relations: list[ExplainedRelation]
    pushdown: bool
    note: str = ""

    def relation(self, name: str) -> ExplainedRelation:
        for rel in self.relations:
            if rel.name.lower() == name.lower():
                return rel
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "sql": self.sql,
            "pushdown": self.pushdown,
            "note": self.note,
            "relations": [r.as_dict() for r in self.relations],
        }

    def __str__(self) -> str:
        lines = []
        if self.note:
            lines.append(self.note)
        if not self.relations:
            lines.append("no relations read (plain tables and table functions only)")
        for rel in self.relations:
            alias = (
                f" (as {', '.join(rel.aliases)})"
                if rel.aliases and rel.aliases != [rel.name.lower()]
                else ""
            )
            cols = "all columns" if rel.columns is None else ", ".join(rel.columns) or "(none)"
            lines.append(f"relation {rel.name}{alias}")
            lines.append(f"  columns:   {cols}")
            lines.append(f"  predicate: {rel.predicate}")
            est = rel.estimate
            if est.rows is not None or est.bytes is not None:
                lines.append(
                    f"  estimate:  {est.rows if est.rows is not None else '?'} rows, "
                    f"{est.bytes if est.bytes is not None else '?'} bytes"
                )
            for note in rel.notes:
                lines.append(f"  note:      {note}")
        return "\n".join(lines)


class SQLEngine:
    """Executes SQL texts for one database.

    ``writer_elsewhere()`` says whether another process holds the database's writer lock
    (see :class:`~tesseradb.sql.store.TableStore`).
    """

    def __init__(
        self,
        namespace: Namespace,
        store_path: Path,
        read_only: bool,
        writer_elsewhere: Callable[[], bool] = lambda: False,
    ) -> None:
        self.namespace = namespace
        self.read_only = read_only
        self.store = TableStore(store_path, read_only, writer_elsewhere)
        self._store_path = store_path
        self._main = DuckDBInstance(self.store)
        # (made when a restricted session first runs a query: see tesseradb.sql.instance)
        self._restricted: DuckDBInstance | None = None
        self._catalog_in_line = -1  # the store's attachment the catalog was last synced in
        self._lock = threading.Lock()
        self._running: set[duckdb.DuckDBPyConnection] = set()  # cursors of running statements
        self.analyses = AnalysisCache()
        self.session = SQLSession("database")  # the database's own session
        self._sessions_made: list[SQLSession] = [self.session]
        # settings: their values when the database was opened, and an epoch that moves
        # whenever a statement may have changed one (sessions read theirs again then)
        self._default_settings: dict[str, str] | None = None
        self._settings_epoch = 0

    # --- lifecycle ----------------------------------------------------------
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The main instance's connection (statements' texts are parsed there too)."""
        return self._main.connection()

    def close(self) -> None:
        with self._lock:
            sessions = list(self._sessions_made)
        for session in sessions:
            self.close_session(session)
        if self._restricted is not None:
            self._restricted.close()
        self._main.close()

    def new_session(self, name: str = "", restricted: bool = False) -> SQLSession:
        """A session of its own (a served client's): settings, prepared statements,
        temporary objects and transactions apart from every other session's.
        ``restricted``: its queries run where no file, extension or setting can be
        reached (a served user without the admin right)."""
        session = SQLSession(name, restricted)
        with self._lock:
            self._sessions_made.append(session)
        return session

    def close_session(self, session: SQLSession) -> None:
        """Let go of a session's cursor (an open transaction is rolled back)."""
        with session.lock:
            session.closed = True
            if session.cursor is not None:
                with contextlib.suppress(Exception):
                    session.cursor.cursor.close()
                session.cursor = None
        with self._lock:
            if session in self._sessions_made and session is not self.session:
                self._sessions_made.remove(session)

    def release_store(self) -> None:
        """Let go of the table store now (it is attached again when next needed)."""
        if self._main._con is not None:
            self.store.release(self._main._con)

    def publish_store(self) -> None:
        """Publish a snapshot of the table store for readers now, if it changed."""
        if not self.read_only and self.store.exists:
            self.store.publish_now(self.connection())

    def _restricted_instance(self) -> DuckDBInstance:
        with self._lock:
            if self._restricted is None:
                # it reads the newest snapshot (the writer publishes what a restricted
                # session wrote before that session reads again)
                store = TableStore(self._store_path, read_only=True, writer_elsewhere=lambda: True)
                self._restricted = DuckDBInstance(store, restricted=True)
            return self._restricted

    # --- public ---------------------------------------------------------------
    def execute(
        self,
        text: str,
        params: Any = None,
        sink: Callable[[pa.RecordBatchReader], Any] | None = None,
        watch: Tracker | None = None,
        session: SQLSession | None = None,
        exact: bool = False,
    ) -> Result:
        """Run ``text`` in ``session`` (the database's own by default); with ``sink``, its
        rows are streamed to ``sink`` (an Arrow reader, read while the statement runs)
        instead of gathered, and the Result is empty (``exact``: in the lossless Arrow
        form :meth:`Result.exact_arrow` gives, else as DuckDB's ``arrow()``). ``watch``
        receives DuckDB's progress (percent) and may cancel the statement."""
        session = session if session is not None else self.session
        if session.closed:
            from tesseradb.errors import DatabaseClosedError

            raise DatabaseClosedError("the SQL session is closed")
        analysis = self._analyse(text, params)
        if watch is not None:
            watch.check()
        found = changes_session(self.connection(), text, analysis)
        self._read_settings(session)
        if session.changed_settings:
            self._without_pushdown(analysis)
        elif session.in_transaction:
            # DuckDB answers inside a transaction (one it aborted refuses every statement)
            analysis.aggregate_only = analysis.lookup = None
        with self._sessions(analysis):
            try:
                result = self._execute(text, params, analysis, session, found, sink, watch, exact)
            except _StaleSnapshot:
                # a reader's catalog names a table its snapshot lacks: the writer publishes
                # one soon (or a table store lost it, which the next attempt says)
                if session.restricted and not self.read_only:
                    self.publish_store()  # (the writer is this process)
                else:
                    self.store.wait_for_newer(SNAPSHOT_WAIT)
                analysis = self._analyse(text, params)
                result = self._execute(
                    text, params, analysis, session, found, sink, watch, exact, retried=True
                )
        if sink is not None and result.shortcut is not None:
            # a shortcut answered: hand its rows over
            if exact:
                table = result.exact_arrow()
                sink(_described(table.to_reader(), result.conversion))
            else:
                sink(result.arrow().to_reader())
            return Result(_empty_table(), result.scan_stats, result.shortcut)
        return result

    def _read_settings(self, session: SQLSession) -> None:
        """Bring what is known of ``session``'s settings up to date (after any statement
        that may have changed a setting, in any session: most are global)."""
        if session.settings_epoch == self._settings_epoch or session.restricted:
            return  # (a restricted session's instance keeps DuckDB's defaults, locked)
        epoch = self._settings_epoch
        import duckdb

        main = self._main
        with session.lock, main.store.attached(main.connection(), refresh=False):
            # (read on a cursor set up as statements' are: USE sets the search path)
            try:
                if session.cursor is not None:
                    values = read_settings(session.cursor.cursor)
                else:
                    kept = main.cursor()
                    try:
                        values = read_settings(kept.cursor)
                    finally:
                        main.keep(kept)
            except duckdb.Error:
                return  # (a transaction DuckDB aborted answers nothing: read them later)
        if self._default_settings is None:
            self._default_settings = values  # (read before any statement could change one)
        defaults = self._default_settings
        session.changed_settings = frozenset(
            n for n in RESULT_SETTINGS if n in values and values[n] != defaults.get(n)
        )
        session.conversion_settings = tuple(
            (n, values[n])
            for n in CONVERSION_SETTINGS
            if n in values and values[n] != defaults.get(n)
        )
        session.settings_epoch = epoch

    @staticmethod
    def _without_pushdown(analysis: Analysis) -> None:
        """A setting changes how DuckDB compares, sorts or converts: no relation answers
        the statement itself, and every scan gives every row (columns are still pruned)."""
        analysis.aggregate_only = None
        analysis.lookup = None
        analysis.equijoins = []
        for use in analysis.relations.values():
            use.predicate = Predicate()
            note = "no pushdown: a setting that changes answers is not at its default"
            if note not in use.notes:
                use.notes.append(note)

    def _sessions(self, analysis: Analysis) -> ExitStack:
        """Enter each relation's ``session()`` (if it has one) for the whole statement.

        An attached table keeps its files open for the statement instead of
        reopening them for the semi-join key reads and each scan.
        """
        stack = ExitStack()
        seen: set[int] = set()
        for use in analysis.relations.values():
            relation = self.namespace.relation(use.name)
            if not isinstance(relation, SessionHolding) or id(relation) in seen:
                continue
            seen.add(id(relation))
            stack.enter_context(relation.session())
        return stack

    def _execute(
        self,
        text: str,
        params: Any,
        analysis: Analysis,
        session: SQLSession,
        found: list[tuple[str, str]] | None,
        sink: Callable[[pa.RecordBatchReader], Any] | None = None,
        watch: Tracker | None = None,
        exact: bool = False,
        retried: bool = False,
    ) -> Result:
        counted = self._count_without_scan(analysis)
        if counted is not None:
            return counted
        aggregated = self._aggregate_without_rows(analysis)
        if aggregated is not None:
            return aggregated
        looked_up = self._lookup_without_duckdb(analysis)
        if looked_up is not None:
            return looked_up
        self._reduce_semijoins(analysis)
        self._check_writes(analysis, found)
        scans = self._scans(analysis)
        run = _Run(text, params, analysis, session, found, sink, watch, exact, retried)
        try:
            result = self._run(run, scans)
        except _MissingColumn:
            # The analysis left out a column the statement uses (a construct it
            # does not know): run again reading every column.
            scans = {k: RelationScan(s.relation, None, s.predicate) for k, s in scans.items()}
            result = self._run(run, scans)
        return result

    def explain(self, text: str, params: Any = None, session: SQLSession | None = None) -> Explain:
        session = session if session is not None else self.session
        analysis = self._analyse(text, params)
        self._read_settings(session)
        if session.changed_settings:
            self._without_pushdown(analysis)
        with self._sessions(analysis):
            return self._explain(text, analysis)

    def _explain(self, text: str, analysis: Analysis) -> Explain:
        self._reduce_semijoins(analysis)
        relations = []
        native = analysis.aggregate_only
        for use in analysis.relations.values():
            relation = self.namespace.relation(use.name)
            if relation is None:
                continue
            if native is not None and isinstance(relation, Aggregating):
                use.notes.append(
                    "aggregates computed from storage, no rows made (when the relation can)"
                )
            if analysis.lookup is not None:
                use.notes.append("answered from the scan, filtered exactly: no DuckDB statement")
            relations.append(
                ExplainedRelation(
                    name=relation.name,
                    aliases=use.aliases,
                    columns=use.columns,
                    predicate=use.predicate,
                    estimate=relation.estimate(None if use.predicate.is_true else use.predicate),
                    notes=list(use.notes) + list(_describe(relation, use)),
                )
            )
        note = ""
        if not analysis.parsed:
            note = f"sqlglot could not parse this statement, so nothing is pushed down ({analysis.parse_error})"
        return Explain(text, relations, pushdown=analysis.parsed, note=note)

    def store_query(self, text: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run a query with the table store attached and current (for metadata)."""
        con = self.connection()
        cursor = con.cursor()
        try:
            with self.store.attached(con) as have_store:
                if not have_store:
                    if self.store.damage is not None:
                        raise TableStoreError(self.store.damage)
                    return []
                cursor.execute(f"USE {STORE_ALIAS}")
                return cursor.execute(text, params).fetchall()
        finally:
            cursor.close()

    def store_tables(self) -> dict[str, tuple[str, list[str]]]:
        """The table store's plain tables and views: name -> (kind, column names)."""
        con = self.connection()
        cursor = con.cursor()
        try:
            with self.store.attached(con) as have_store:
                if not have_store and self.store.damage is not None:
                    raise TableStoreError(self.store.damage)
                return self._store_tables(cursor) if have_store else {}
        finally:
            cursor.close()

    def read_whole(self, table: str) -> int:
        """Read every value of the store's ``table`` (DuckDB checks its blocks' checksums as
        it reads them); its row count, or :class:`TableStoreError` naming the damage."""
        import duckdb

        from tesseradb.errors import TableStoreError

        try:
            rows = self.store_query(f"SELECT count(hash(t)) FROM {quote_identifier(table)} AS t")
        except duckdb.Error as err:
            raise TableStoreError(
                f"table {table!r} in {self.store.path} cannot be read: {_first_line(str(err))}"
            ) from None
        return int(rows[0][0])

    # --- steps ------------------------------------------------------------------
    def _analyse(self, text: str, params: Any) -> Analysis:
        def schema_of(name: str) -> pa.Schema | None:
            relation = self.namespace.relation(name)
            return relation.schema() if relation is not None else None

        analysis = self.analyses.analyse(text, params, schema_of, self.namespace.columns_of)
        if analysis.parsed:
            self._keep_paths_for_path_filtering(analysis)
            self._read_through_views(analysis)
            return analysis
        # sqlglot does not know every DuckDB construct: if DuckDB parses the
        # text, run it without pushdown; otherwise report the syntax error.
        import duckdb

        try:
            self.connection().extract_statements(text)
        except duckdb.Error as err:
            raise _syntax_error(text, analysis.parse_error, err) from None
        names = _referenced_names(text)
        relations = {}
        for name in names:
            relation = self.namespace.relation(name)
            if relation is not None:
                relations[name] = RelationUse(
                    name=relation.name,
                    columns=None,
                    references=1,
                    notes=["read whole: statement not understood by the pushdown analysis"],
                )
        analysis.relations = relations
        analysis.table_names = names - set(relations)
        self._read_through_views(analysis)
        return analysis

    def _read_through_views(self, analysis: Analysis) -> None:
        """A plain view may read relations (``CREATE VIEW v AS SELECT ... FROM rel``): DuckDB
        binds its body at each statement, so the relations it names (through views over
        views too) are read whole for the statement, as any name it does not understand."""
        views = [n for n in analysis.table_names if self.namespace.kind_of(n) == "view"]
        seen: set[str] = set()
        while views:
            view = views.pop().lower()
            if view in seen:
                continue
            seen.add(view)
            body = self._view_sql(view)
            if body is None:
                continue
            for name in _referenced_names(body):
                if name in analysis.relations or name in seen:
                    continue
                relation = self.namespace.relation(name)
                if relation is not None:
                    analysis.relations[name] = RelationUse(
                        name=relation.name,
                        columns=None,
                        references=1,
                        notes=[f"read whole: through the view {view}"],
                    )
                elif self.namespace.kind_of(name) == "view":
                    views.append(name)
        if seen:  # (a statement over a view is DuckDB's to answer)
            analysis.aggregate_only = analysis.lookup = None

    def _view_sql(self, view: str) -> str | None:
        """A plain view's definition, as the table store holds it."""
        import duckdb

        try:
            rows = self.store_query(
                "SELECT sql FROM duckdb_views() WHERE database_name = current_database() "
                "AND schema_name = 'main' AND lower(view_name) = ?",
                [view],
            )
        except (duckdb.Error, TableStoreError):
            return None
        return str(rows[0][0]) if rows else None

    def _keep_paths_for_path_filtering(self, analysis: Analysis) -> None:
        """Conditions on paths into JSON columns (:class:`JsonPath` keys) stay only in the
        predicates of relations that narrow by them (:class:`PathFiltering`)."""
        for use in analysis.relations.values():
            paths = {c: JsonPath.parse(c) for c in use.predicate}
            if not any(paths.values()):
                continue
            relation = self.namespace.relation(use.name)
            columns: set[str] = (
                {c.lower() for c in relation.path_columns()}
                if isinstance(relation, PathFiltering)
                else set()
            )
            use.predicate = use.predicate.restricted_to(
                lambda c, paths=paths, columns=columns: (
                    paths[c] is None or paths[c].column.lower() in columns  # type: ignore[union-attr]
                )
            )

    def _count_without_scan(self, analysis: Analysis) -> Result | None:
        """``SELECT count(*) FROM rel [WHERE ...]`` answered by the relation, when it can say exactly.

        Only when the WHERE clause is exactly the derived predicate (the
        analysis checks) and the relation knows the count without reading
        rows (an attached table whose bitmap indexes settle it).
        """
        import pyarrow as pa

        if analysis.count_only is None:
            return None
        key, name, predicate = analysis.count_only
        relation = self.namespace.relation(key)
        if not isinstance(relation, Counting):
            return None
        rows = relation.count(predicate)
        if rows is None:
            return None
        return Result(
            pa.table({name: pa.array([rows], pa.int64())}),
            {relation.name: ScanStats()},
            shortcut="count",
        )

    def _aggregate_without_rows(self, analysis: Analysis) -> Result | None:
        """A single-relation aggregate query answered by the relation's ``aggregate``.

        The relation computes it from its storage (an array's chunks, folded
        in Rust or reduced with numpy; a stream's found records) or returns None, and the
        statement then runs as usual. ``ambiguous`` gives, per column, the
        values at which the WHERE is not exact (see ``AggregateQuery``); a
        relation that finds a candidate row holding one, or cannot look,
        returns None. Tests check both paths give the same answers.
        """
        query = analysis.aggregate_only
        if query is None:
            return None
        relation = self.namespace.relation(query.relation)
        if not isinstance(relation, Aggregating):
            return None
        table = relation.aggregate(
            list(query.items),
            list(query.group_by),
            None if query.predicate.is_true else query.predicate,
            dict(query.ambiguous),
        )
        if table is None:
            return None
        if query.order:
            table = table.sort_by(
                [(name, "descending" if desc else "ascending") for name, desc in query.order]
            )
        return Result(table, {relation.name: ScanStats()}, shortcut="aggregate")

    def _lookup_without_duckdb(self, analysis: Analysis) -> Result | None:
        """A selection of plain columns under an exact predicate, answered from the relation's
        scan: its rows filtered by the predicate (Arrow compute, with SQL's semantics),
        sorted as asked, renamed; no statement in DuckDB.

        Only for columns of types that come out of DuckDB as they went in (integers,
        floats, booleans; strings and JSON come out as ``string``), so the answer is the
        one DuckDB would give, Arrow types included; tests compare the two. A scan that
        gives more than ``LOOKUP_MAX_ROWS`` rows is abandoned to DuckDB.
        """
        import pyarrow as pa

        query = analysis.lookup
        if query is None:
            return None
        relation = self.namespace.relation(query.relation)
        if relation is None:
            return None
        types = {f.name: f.type for f in relation.schema()}
        if not all(c in types and _passes_through_duckdb(types[c]) for c in query.needed):
            return None
        scan = RelationScan(relation, query.needed, query.predicate)
        schema = scan.schema()
        batches = []
        for batch in scan.reader():
            kept = query.predicate.filter_exactly(batch)
            if kept is None or scan.stats.rows > LOOKUP_MAX_ROWS:
                return None  # a column Arrow cannot compare as SQL does, or a large scan
            batches.append(kept)
        table = pa.Table.from_batches(batches, schema)
        if query.order:
            keys = [(c, "descending" if desc else "ascending", "at_end") for c, desc in query.order]
            table = table.sort_by(keys)  # NULLs last either way, as DuckDB by default
        columns = [_as_duckdb_gives(table.column(c)) for c, _ in query.columns]
        table = pa.Table.from_arrays(columns, names=[out for _, out in query.columns])
        return Result(table, {relation.name: scan.stats}, shortcut="lookup")

    def _reduce_semijoins(self, analysis: Analysis) -> None:
        """Narrow relations to the join keys of selective partners (semi-join reduction).

        For an equi-join ``a.x = b.y`` that lets ``a`` be narrowed (an inner
        join, the right side of a LEFT or ANTI join), when ``b`` is selective
        (its predicate or an earlier reduction leaves it far smaller than
        ``a``), the distinct ``y`` of ``b``'s rows are read first and given to
        ``a``'s scan as ``x IN (...)``: a relation with a bitmap index on ``x``
        then reads only the rows that can join (SDS/Q's index semi-join).
        Rows of ``a`` without a partner in ``b`` cannot be in the answer, and
        ``b``'s keys come from a superset of its matching rows, so the scan
        stays a superset. Each relation is narrowed at most once, the most
        selective partner first, so reductions chain along the joins.
        """
        uses = analysis.relations
        if len(uses) < 2 or not analysis.equijoins:
            return
        relations = {k: self.namespace.relation(u.name) for k, u in uses.items()}
        estimates: dict[str, int | None] = {}

        def rows(key: str) -> int | None:
            if key not in estimates:
                relation = relations.get(key)
                pred = uses[key].predicate
                estimates[key] = (
                    None
                    if relation is None
                    else relation.estimate(None if pred.is_true else pred).rows
                )
            return estimates[key]

        narrowed: set[str] = set()
        for _ in range(len(uses)):
            best: tuple[int, str, str, str, str] | None = None
            for edge in analysis.equijoins:
                for target, tcol, source, scol, allowed in (
                    (edge.left, edge.left_column, edge.right, edge.right_column, edge.reduce_left),
                    (edge.right, edge.right_column, edge.left, edge.left_column, edge.reduce_right),
                ):
                    if (
                        not allowed
                        or target in narrowed
                        or target not in uses
                        or source not in uses
                    ):
                        continue
                    if (
                        uses[target].references != 1
                        or relations.get(target) is None
                        or relations.get(source) is None
                    ):
                        continue
                    if uses[source].predicate.is_true and source not in narrowed:
                        continue  # an unfiltered partner narrows nothing
                    src_rows, tgt_rows = rows(source), rows(target)
                    if src_rows is None or tgt_rows is None or src_rows > SEMIJOIN_MAX_KEYS:
                        continue
                    if src_rows * SEMIJOIN_SELECTIVITY > tgt_rows:
                        continue
                    if best is None or src_rows < best[0]:
                        best = (src_rows, target, tcol, source, scol)
            if best is None:
                return
            _, target, tcol, source, scol = best
            keys, rows_read = self._distinct_keys(relations[source], scol, uses[source])  # type: ignore[arg-type]
            if rows_read is not None:
                analysis.prefetched[source] = (uses[source].predicate, rows_read)
            narrowed.add(target)
            if keys is None:
                continue
            uses[target].predicate = uses[target].predicate.and_(
                Predicate.isin(tcol, keys, distinct=True)
            )
            uses[target].notes.append(
                f"semi-join: {tcol} in the {len(keys):,} distinct {scol} of {uses[source].name} "
                f"(its predicate: {uses[source].predicate})"
            )
            estimates.pop(target, None)

    @staticmethod
    def _distinct_keys(relation: Relation, column: str, use: RelationUse) -> tuple[Any, Any]:
        """The distinct non-NULL values of ``column`` over the rows ``use.predicate`` allows.

        Also returns what was read, when it holds every column the statement
        needs from the relation: its scan for DuckDB then reuses it.
        """
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        predicate = use.predicate
        needed = None if use.columns is None else {c.lower() for c in use.columns}
        wanted = [
            f.name
            for f in relation.schema()
            if needed is None
            or f.name.lower() in needed
            or f.name.lower() == column.lower()
            or predicate.domain(f.name) is not None
        ]
        read = relation.scan(wanted, None if predicate.is_true else predicate).read_all()
        mask = predicate.mask(read)
        table = read.filter(mask) if mask is not None else read
        values = pc.unique(
            table.column(next(w for w in wanted if w.lower() == column.lower()))
        ).drop_null()
        if len(values) > SEMIJOIN_MAX_KEYS:
            return None, read
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            return np.asarray(values.to_pylist(), dtype=str), read
        return values.to_numpy(zero_copy_only=False), read

    def _check_writes(self, analysis: Analysis, found: list[tuple[str, str]] | None) -> None:
        # (a read-only database lets DuckDB refuse what a statement of the session's own
        # writes: a temporary table is the session's, the table store is read-only)
        refuse = self.read_only and found is None
        for kind, target in analysis.writes:
            if refuse:
                raise ReadOnlyError(
                    f"{kind} {target}: the database is open read-only".replace("  ", " ")
                )
            if not target:
                continue
            existing = self.namespace.kind_of(target)
            if existing is None or existing in ("table", "view"):
                continue
            if kind.startswith("CREATE"):
                raise ObjectExistsError(
                    f"{kind} {target}: an object named {target!r} already exists (a {existing})"
                )
            raise SQLExecutionError(
                f"{kind} {target}: {target!r} is a {existing}, which SQL can read but not change; "
                f"use its Python API"
            )
        if refuse and not analysis.is_query and analysis.parsed:
            raise ReadOnlyError("this statement writes, and the database is open read-only")

    def _scans(self, analysis: Analysis) -> dict[str, RelationScan]:
        scans = {}
        for key, use in analysis.relations.items():
            relation = self.namespace.relation(use.name)
            if relation is None:
                continue
            columns = use.columns
            if columns is not None and not columns:
                columns = [relation.schema().names[0]]  # keep the row count, read the least
            scan = RelationScan(relation, columns, use.predicate)
            prefetched = analysis.prefetched.get(key)
            if prefetched is not None and prefetched[0] == use.predicate:
                scan.prefetched = prefetched[
                    1
                ]  # read for the semi-join keys, under the same predicate
            scans[key] = scan
        return scans

    def _wraps_in_transaction(self, run: _Run) -> bool:
        """Whether the call runs in one transaction of ours, so that it is all or nothing.

        A single query needs none (DuckDB runs each statement atomically), nor does a
        statement in the session's own open transaction; several statements or a write
        do, unless the text begins and ends its own transactions.
        """
        analysis = run.analysis
        if run.session.in_transaction:
            return False
        if analysis.parsed and analysis.is_query and analysis.statement_count == 1:
            return False
        found = run.found
        if found is None and _TRANSACTION_WORDS.search(run.text) is not None:
            found = statements(self.connection(), run.text)
        if found is None:
            return True
        if any(kind == "TRANSACTION" for kind, _ in found):
            return False
        # one statement that makes no table is atomic on its own (and some, such as
        # CHECKPOINT or ATTACH, cannot run inside a transaction at all)
        return len(found) > 1 or found[0][0] not in _UNWRAPPED

    def _run(self, run: _Run, scans: dict[str, RelationScan]) -> Result:
        """Run the text on a cursor: its session's own if the session keeps state (or this
        statement makes it), otherwise a kept one; a write or several statements as one
        transaction, unless the session has a transaction open.

        Plain tables the call creates or renames are checked before it commits (names
        must be identifiers the catalog accepts, not taken by another kind of object): a
        refused name rolls the whole call back, or the session's transaction at COMMIT.
        """
        session = run.session
        may_write = _may_write(run)
        if session.restricted:
            if run.found is not None:
                raise ReadOnlyError(
                    "a restricted session runs queries and writes of plain tables; "
                    "settings, prepared statements, transactions and the like are refused"
                )
            if not may_write:
                return self._run_restricted(run, scans)
        on_session = session.stateful or run.found is not None
        main = self._main
        with session.lock if on_session else contextlib.nullcontext():
            if session.closed:
                from tesseradb.errors import DatabaseClosedError

                raise DatabaseClosedError("the SQL session is closed")
            con = main.connection()
            with (
                self.store.attached(con, refresh=not session.in_transaction) as have_store,
                self.store.writing(may_write),
            ):
                if not have_store and self.store.damage is not None and may_write:
                    raise TableStoreError(self.store.damage)
                if may_write:
                    session.wrote = True  # (a restricted session's next read waits for it)
                if on_session:
                    if session.cursor is None:
                        session.cursor = main.new_cursor()
                    return self._run_on(run, scans, main, session.cursor, have_store, keep=False)
                return self._run_on(run, scans, main, main.cursor(), have_store, keep=True)

    def _run_restricted(self, run: _Run, scans: dict[str, RelationScan]) -> Result:
        """A query of a restricted session, on the restricted instance: over the newest
        snapshot of the table store, published first if this session has written since
        (it reads its own writes)."""
        session = run.session
        if session.wrote or not self.store.published_once():
            self.publish_store()
            session.wrote = False
        instance = self._restricted_instance()
        with instance.store.attached(instance.connection()) as have_store:
            return self._run_on(run, scans, instance, instance.cursor(), have_store, keep=True)

    def _run_on(
        self,
        run: _Run,
        scans: dict[str, RelationScan],
        instance: DuckDBInstance,
        kept: KeptCursor,
        have_store: bool,
        keep: bool,
    ) -> Result:
        import duckdb

        analysis, session = run.analysis, run.session
        before = session.in_transaction
        # a statement that only changes rows leaves the catalog as it was, once a full
        # look at the store since it was attached has brought the catalog in line (the
        # first write repairs what a process killed between DuckDB's commit and the
        # catalog's left)
        row_write = _rows_only(analysis)
        rows_only = (
            row_write
            and self._catalog_in_line == self.store.attachments
            and not before
            and not instance.restricted
        )
        # (such a statement is atomic on its own: no transaction around it)
        wrap = not rows_only and self._wraps_in_transaction(run)
        cursor = kept.cursor
        with self._lock:
            self._running.add(cursor)
        clean = False
        after = before
        try:
            kept.bind(
                {instance.registered_name(scan): scan for scan in scans.values()},
                analysis.table_names if analysis.parsed else None,
            )
            if before and have_store and _commits(run.found):
                # the session's transaction is about to commit: its new tables are checked
                # first, and a refused one rolls the whole transaction back (one DuckDB
                # aborted answers nothing: its COMMIT rolls it back anyway)
                try:
                    tables_now = self._store_tables(cursor)
                except duckdb.Error:
                    tables_now = None
                try:
                    if tables_now is not None:
                        self._check_new_tables(tables_now)
                except BaseException:
                    with contextlib.suppress(duckdb.Error):
                        cursor.execute("ROLLBACK")
                    session.in_transaction = False
                    raise
            if wrap:
                cursor.execute("BEGIN TRANSACTION")
            tables = None
            try:
                try:
                    with _watching(cursor, run.watch):
                        table, types = self._fetch(cursor, run)
                    after = (
                        transaction_state(run.found, before) if run.found is not None else before
                    )
                    if (
                        (analysis.writes or not analysis.parsed or before)
                        and have_store
                        and not rows_only
                        and not after
                        and not self.read_only
                        and not instance.restricted
                    ):
                        tables = self._store_tables(cursor)
                        self._check_new_tables(tables)
                    if wrap:
                        cursor.execute("COMMIT")
                except BaseException:
                    if wrap:
                        with contextlib.suppress(duckdb.Error):
                            cursor.execute("ROLLBACK")
                    raise
            except duckdb.InterruptException:
                after = self._transaction_after_error(cursor, run, before)
                if run.watch is not None:
                    run.watch.check()  # cancelled through its token: say so
                raise InterruptedStatementError(
                    "the statement was interrupted; nothing of it was kept"
                ) from None
            except duckdb.Error as err:
                after = self._transaction_after_error(cursor, run, before)
                for scan in scans.values():
                    if scan.error is not None:
                        raise scan.error from None
                raise self._execution_error(run, err, scans) from None
            finally:
                session.in_transaction = after
                if run.found is not None:
                    self._session_changed(session, run)
            if tables is not None:
                self._catalog_in_line = -1
                self.namespace.sync_tables(tables, [target for _, target in analysis.writes])
                self._catalog_in_line = self.store.attachments
            elif rows_only:
                self.namespace.rows_written([target for _, target in analysis.writes])
            # a statement that may have changed the cursor's own settings leaves it (one
            # that only changed rows cannot have)
            clean = analysis.parsed and (analysis.is_query or row_write)
        finally:
            kept.release()
            with self._lock:
                self._running.discard(cursor)
            if keep:
                if clean:
                    instance.keep(kept)
                else:
                    cursor.close()
        conversion = Conversion(types, session.conversion_settings, session.lossless)
        return Result(
            table,
            {scan.relation.name: scan.stats for scan in scans.values()},
            conversion=conversion,
        )

    def _fetch(
        self, cursor: duckdb.DuckDBPyConnection, run: _Run
    ) -> tuple[pa.Table, tuple[str, ...]]:
        """Run the text and take its rows: Arrow that loses no value (the cursor fetches
        losslessly), or handed to the sink (as DuckDB's own Arrow, unless ``exact``); and
        the DuckDB type of each column."""
        import pyarrow as pa

        relation = (
            cursor.sql(run.text, params=run.params)
            if run.params is not None
            else cursor.sql(run.text)
        )
        if relation is None:
            return pa.table({}), ()
        types = tuple(str(t) for t in relation.types)
        if any("AGGREGATE_STATE" in t for t in types):
            # (DuckDB 2.0.1 crashes exporting some aggregate states losslessly; they have
            # no lossless form of their own anyway)
            cursor.execute("SET SESSION arrow_lossless_conversion = false")
            try:
                return relation.to_arrow_table(), types
            finally:
                cursor.execute("SET SESSION arrow_lossless_conversion = true")
        if run.sink is None:
            return relation.to_arrow_table(), types
        reader = relation.to_arrow_reader(_SINK_BATCH_ROWS)
        conversion = Conversion(types, run.session.conversion_settings, run.session.lossless)
        if run.exact:  # lossless, saying how to read it exactly
            run.sink(_described(reader, conversion))
        elif conversion.lossless or not arrow_lossy(types):
            run.sink(reader)
        else:  # as DuckDB's own Arrow, batch by batch
            run.sink(_as_duckdb_arrow_batches(reader, conversion))
        return pa.table({}), types

    def _transaction_after_error(
        self, cursor: duckdb.DuckDBPyConnection, run: _Run, before: bool
    ) -> bool:
        """Whether the session's transaction is open after its statement failed: as it was,
        unless the text begins or ends one (then DuckDB is asked)."""
        import duckdb

        if run.found is None or not any(kind == "TRANSACTION" for kind, _ in run.found):
            return before
        if len(run.found) == 1:
            return transaction_state(run.found, before)  # (a failed COMMIT still ends it)
        try:
            cursor.execute("BEGIN TRANSACTION")
        except duckdb.Error:
            return True  # "cannot start a transaction within a transaction"
        with contextlib.suppress(duckdb.Error):
            cursor.execute("ROLLBACK")
        return False

    def _session_changed(self, session: SQLSession, run: _Run) -> None:
        """A statement that may have changed the session ran: settings are read again
        (by every session: most settings are global), and the user's own Arrow setting
        is noted while the session's cursor keeps fetching losslessly."""
        import duckdb

        self._settings_epoch += 1
        if session.cursor is None or "arrow_lossless_conversion" not in run.text.lower():
            return
        cursor = session.cursor.cursor
        read = "SELECT current_setting('arrow_lossless_conversion')"
        with contextlib.suppress(duckdb.Error):
            effective = cursor.execute(read).fetchone()
            cursor.execute("RESET SESSION arrow_lossless_conversion")
            overall = cursor.execute(read).fetchone()
            # (SET SESSION ... = false shows in the effective value; a plain SET, global
            # for this setting, under the session's own value)
            session.lossless = bool(effective and effective[0]) and bool(overall and overall[0])
            cursor.execute("SET SESSION arrow_lossless_conversion = true")

    def interrupt(self) -> None:
        """Cancel the statements running now (from another thread or a signal handler)."""
        with self._lock:
            running = list(self._running)
        for cursor in running:
            with contextlib.suppress(Exception):
                cursor.interrupt()

    def forget_catalog(self, owner: str) -> None:
        """Drop the views of an object's dotted relations (the object is gone)."""
        self._main.forget_views(owner)
        if self._restricted is not None:
            self._restricted.forget_views(owner)

    def _store_tables(self, cursor: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, list[str]]]:
        """The store's plain tables and views: name -> (kind, column names)."""
        rows = cursor.execute(
            "WITH objects AS ("
            "  SELECT table_name AS name, 'table' AS kind FROM duckdb_tables()"
            "  WHERE database_name = $db AND schema_name = 'main'"
            "  UNION ALL SELECT view_name, 'view' FROM duckdb_views()"
            "  WHERE database_name = $db AND schema_name = 'main' AND NOT internal),"
            " cols AS (SELECT table_name AS name, list(column_name ORDER BY column_index) AS columns"
            "  FROM duckdb_columns() WHERE database_name = $db AND schema_name = 'main' GROUP BY table_name)"
            " SELECT objects.name, kind, coalesce(columns, []) FROM objects LEFT JOIN cols USING (name)",
            {"db": STORE_ALIAS},
        ).fetchall()
        return {name: (kind, list(columns)) for name, kind, columns in rows}

    def _check_new_tables(self, tables: dict[str, tuple[str, list[str]]]) -> None:
        """Refuse a plain table or view the statement made under a name the catalog cannot take."""
        for name, (kind, _) in tables.items():
            existing = self.namespace.kind_of(name)
            if existing in ("table", "view"):
                continue
            if existing is not None:
                raise ObjectExistsError(
                    f"cannot create {kind} {name!r}: an object named {name!r} already exists "
                    f"(a {existing}); nothing of the statement was kept"
                )
            validate_name(name, kind)

    def _execution_error(
        self, run: _Run, err: Exception, scans: dict[str, RelationScan]
    ) -> Exception:
        import duckdb

        text = run.text
        message = str(err)
        if isinstance(err, duckdb.ParserException):
            return _syntax_error(text, None, err)
        missing = re.search(r"Table with name (\S+) does not exist", message)
        if isinstance(err, duckdb.CatalogException) and missing:
            name = missing.group(1)
            if self.namespace.kind_of(name) in ("table", "view"):
                if self.store.damage is not None:
                    return TableStoreError(self.store.damage)
                if (self.read_only or run.session.restricted) and not run.retried:
                    return _StaleSnapshot(name)
                # the catalog names it, the table store lacks it: the store was lost or replaced
                return TableStoreError(
                    f"{self.namespace.kind_of(name)} {name!r} is in the catalog but not in the "
                    f"table store {self.store.path} (missing or replaced); `tessera check` "
                    "lists what is lost, `tessera check --repair` forgets it"
                )
            suggestions = difflib.get_close_matches(
                name, self.namespace.known_names(), n=3, cutoff=0.5
            )
            hint = (
                f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
            )
            return UnknownTableError(
                f"unknown table {name!r}{hint}{_location(text, message)}", name, suggestions
            )
        exists = re.search(r'with name "?([^"\s!]+)"? already exists', message)
        if isinstance(err, duckdb.CatalogException) and exists:
            return ObjectExistsError(
                f"an object called {exists.group(1)!r} already exists (CREATE OR REPLACE or "
                f"CREATE ... IF NOT EXISTS say what to do then){_location(text, message)}"
            )
        if isinstance(err, duckdb.BinderException) and any(
            s.columns is not None for s in scans.values()
        ):
            return _MissingColumn(message)
        if "read-only" in message.lower():
            return ReadOnlyError(f"the database is open read-only: {_first_line(message)}")
        return SQLExecutionError(message)


def _referenced_names(text: str) -> set[str]:
    """Table names a statement may read, when sqlglot could not parse it (lower case).

    DuckDB's own answer where it can give one; otherwise (it refuses texts
    with parameters) every identifier and dotted pair in the text: reading a
    relation that is not used costs time, never answers.
    """
    import duckdb

    try:
        return {n.lower() for n in duckdb.get_table_names(text)}
    except duckdb.Error:
        pass
    words = re.findall(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_]*)', text)
    names = [quoted.replace('""', '"') or plain for quoted, plain in words]
    dotted = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)", text)
    return {n.lower() for n in names} | {f"{a}.{b}".lower() for a, b in dotted}


class _MissingColumn(SQLExecutionError):
    """DuckDB could not bind a statement against the pruned columns: retry with all."""


class _StaleSnapshot(Exception):
    """A read-only database's snapshot lacks a table its catalog names: wait for a newer one."""


@dataclass
class _Run:
    """One statement call on its way through the engine."""

    text: str
    params: Any
    analysis: Analysis
    session: SQLSession
    found: list[tuple[str, str]] | None  # its statements, when one changes the session
    sink: Callable[[pa.RecordBatchReader], Any] | None
    watch: Tracker | None
    exact: bool
    retried: bool = False


def _may_write(run: _Run) -> bool:
    """Whether the statement may change the table store (a snapshot waits for it)."""
    analysis = run.analysis
    if analysis.parsed and analysis.is_query:
        return _WRITING_FUNCTIONS.search(run.text) is not None
    return True


def _commits(found: list[tuple[str, str]] | None) -> bool:
    """Whether these statements commit the session's open transaction."""
    return found is not None and any(
        kind == "TRANSACTION"
        and query.strip().split(None, 1)[0].upper().rstrip(";") in ("COMMIT", "END")
        for kind, query in found
        if query.strip()
    )


def _describe(relation: Relation, use: RelationUse) -> list[str]:
    if not isinstance(relation, ScanDescribing):
        return []
    return [str(line) for line in relation.describe_scan(use.columns, use.predicate)]


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else message


def _location(text: str, message: str) -> str:
    line = re.search(r"LINE (\d+):", message)
    return f" (line {line.group(1)})" if line else ""


def _syntax_error(
    text: str, sqlglot_error: Exception | None, duckdb_error: Exception | None
) -> SQLSyntaxError:
    """A syntax error with 1-based line and column, from sqlglot or DuckDB's message."""
    line = column = None
    description = None
    errors = getattr(sqlglot_error, "errors", None)
    if errors:
        first = errors[0]
        line, column = first.get("line"), first.get("col")
        description = first.get("description")
    if duckdb_error is not None:
        message = str(duckdb_error)
        found = re.search(r"LINE (\d+): (.*)\n(\s*)\^", message)
        if found:
            prefix = len(f"LINE {found.group(1)}: ")
            line = int(found.group(1))
            column = len(found.group(3)) - prefix + 1
        description = _first_line(message).replace("Parser Error: ", "")
    where = f" at line {line}, column {column}" if line is not None else ""
    snippet = ""
    if line is not None:
        lines = text.splitlines() or [""]
        if 1 <= line <= len(lines):
            snippet = f"\n  {lines[line - 1]}\n  {' ' * max((column or 1) - 1, 0)}^"
    return SQLSyntaxError(
        f"SQL syntax error{where}: {description or 'invalid statement'}{snippet}", line, column
    )


def _passes_through_duckdb(arrow_type: pa.DataType) -> bool:
    """Whether DuckDB gives a column of this type back with the same values and type (a
    string type, or JSON text, comes back as ``string`` holding the same text)."""
    import pyarrow as pa
    import pyarrow.types as pt

    return (
        pt.is_integer(arrow_type)
        or pt.is_float32(arrow_type)
        or pt.is_float64(arrow_type)
        or pt.is_boolean(arrow_type)
        or pt.is_string(arrow_type)
        or pt.is_large_string(arrow_type)
        or pt.is_string_view(arrow_type)
        or isinstance(arrow_type, pa.JsonType)
    )


def _as_duckdb_gives(column: pa.ChunkedArray) -> pa.ChunkedArray:
    import pyarrow as pa
    import pyarrow.types as pt

    if isinstance(column.type, pa.JsonType):
        column = pa.chunked_array([c.storage for c in column.chunks], column.type.storage_type)
    if pt.is_large_string(column.type) or pt.is_string_view(column.type):
        return column.cast(pa.string())
    return column


def _as_duckdb_arrow_batches(
    reader: pa.RecordBatchReader, conversion: Conversion
) -> pa.RecordBatchReader:
    """``reader``'s lossless batches in DuckDB's default Arrow form, as they come."""
    import pyarrow as pa

    first = as_duckdb_arrow(reader.schema.empty_table(), conversion)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield from as_duckdb_arrow(pa.Table.from_batches([batch]), conversion).to_batches()

    return pa.RecordBatchReader.from_batches(first.schema, batches())


def _described(reader: pa.RecordBatchReader, conversion: Conversion) -> pa.RecordBatchReader:
    """``reader`` whose schema carries ``conversion`` (see :meth:`Conversion.described`)."""
    import pyarrow as pa

    schema = conversion.described(reader.schema)
    return pa.RecordBatchReader.from_batches(
        schema, (pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in reader)
    )


def _empty_table() -> pa.Table:
    import pyarrow as pa

    return pa.table({})


def _rows_only(analysis: Analysis) -> bool:
    """Whether the statement only changes rows of tables that exist (one INSERT, UPDATE or
    DELETE): the store's tables and columns are as they were, and reading them back to
    bring the catalog in line (2-3 ms, half of a small insert) can be skipped. A text of
    several statements could hide one that makes tables (IMPORT DATABASE), so it is not."""
    return (
        analysis.parsed
        and analysis.statement_count == 1
        and bool(analysis.writes)
        and all(kind in ("INSERT", "UPDATE", "DELETE") for kind, _ in analysis.writes)
    )


@contextmanager
def _watching(cursor: duckdb.DuckDBPyConnection, watch: Tracker | None) -> Iterator[None]:
    """Report ``cursor``'s query progress (percent) to ``watch`` while the block runs, and
    interrupt the statement if ``watch``'s operation is cancelled."""
    if watch is None:
        yield
        return
    entry = _WATCHER.add(cursor, watch)
    try:
        yield
    finally:
        _WATCHER.remove(entry)


class _Watcher:
    """One thread polling every watched statement's progress (a thread per statement cost
    a served point query a millisecond of its few)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, list[Any]] = {}  # id -> [cursor, watch, percent reported]
        self._ids = 0
        self._thread: threading.Thread | None = None

    def add(self, cursor: duckdb.DuckDBPyConnection, watch: Tracker) -> int:
        with self._lock:
            self._ids += 1
            self._entries[self._ids] = [cursor, watch, 0]
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._poll, name="tessera-sql-progress", daemon=True
                )
                self._thread.start()
            return self._ids

    def remove(self, entry: int) -> None:
        with self._lock:
            self._entries.pop(entry, None)

    def _poll(self) -> None:
        from tesseradb.errors import CancelledError

        while True:
            time.sleep(_WATCH_PERIOD)
            # under the lock: once remove() returns, its statement gets no more events
            with self._lock:
                for key, entry in list(self._entries.items()):
                    cursor, watch, reported = entry
                    try:
                        percent = cursor.query_progress()
                    except Exception:
                        continue  # no statement running on the cursor yet, or it has just ended
                    try:
                        step = int(percent or 0) - reported  # (-1 while DuckDB cannot tell)
                        if step > 0:
                            entry[2] = reported + step
                            watch.advance(step)
                        else:
                            watch.check()
                    except CancelledError:
                        with contextlib.suppress(Exception):
                            cursor.interrupt()
                        del self._entries[key]


_WATCHER = _Watcher()
