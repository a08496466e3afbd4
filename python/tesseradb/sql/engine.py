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
import re
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._sqltext import quote_identifier
from tesseradb.catalog import validate_name, with_article
from tesseradb.errors import (
    InterruptedStatementError,
    ObjectExistsError,
    ReadOnlyError,
    SQLExecutionError,
    TableStoreError,
)
from tesseradb.sql.analysis import Analysis
from tesseradb.sql.analysis_cache import AnalysisCache
from tesseradb.sql.diagnostics import (
    MissingColumn,
    StaleSnapshot,
    execution_error,
    first_line,
)
from tesseradb.sql.explain import Explain, explain
from tesseradb.sql.instance import DuckDBInstance, KeptCursor
from tesseradb.sql.joins import answer_join
from tesseradb.sql.relation import (
    Namespace,
    RelationScan,
    SessionHolding,
    can,
)
from tesseradb.sql.resolve import analyse, without_pushdown
from tesseradb.sql.result import Result
from tesseradb.sql.semijoin import reduce_semijoins
from tesseradb.sql.session import (
    SettingsTracker,
    SQLSession,
    changes_session,
    commits,
    statements,
    transaction_after_error,
    transaction_state,
)
from tesseradb.sql.shortcuts import answer_aggregate, answer_count, answer_lookup
from tesseradb.sql.small_results import SmallResultKey, SmallResults
from tesseradb.sql.store import SNAPSHOT_WAIT, STORE_ALIAS, TableStore, store_objects
from tesseradb.sql.tops import answer_top
from tesseradb.sql.values import (
    Conversion,
    arrow_lossy,
    as_duckdb_arrow_batches,
    described,
)
from tesseradb.sql.watching import watching

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from tesseradb.progress import Tracker

__all__ = ["Namespace", "SQLEngine", "SQLSession"]

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
        memory_limit: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.memory_limit = memory_limit
        self.read_only = read_only
        self.store = TableStore(store_path, read_only, writer_elsewhere)
        self._store_path = store_path
        self._main = DuckDBInstance(self.store, memory_limit=memory_limit)
        # (made when a restricted session first runs a query: see tesseradb.sql.instance)
        self._restricted: DuckDBInstance | None = None
        self._catalog_in_line = -1  # the store's attachment the catalog was last synced in
        self._lock = threading.Lock()
        self._running: set[duckdb.DuckDBPyConnection] = set()  # cursors of running statements
        self.analyses = AnalysisCache()
        self.session = SQLSession("database")  # the database's own session
        self._sessions_made: list[SQLSession] = [self.session]
        self.settings = SettingsTracker(self._main)
        self.small_results = SmallResults()

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
                self._restricted = DuckDBInstance(
                    store, restricted=True, memory_limit=self.memory_limit
                )
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
        self.settings.read(session)
        if session.changed_settings:
            without_pushdown(analysis)
        elif session.in_transaction:
            # DuckDB answers inside a transaction (one it aborted refuses every statement)
            analysis.drop_shortcuts()
        with self._sessions(analysis):
            try:
                result = self._execute(text, params, analysis, session, found, sink, watch, exact)
            except StaleSnapshot:
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
            return _hand_over(result, sink, exact)  # a shortcut answered
        return result

    def _sessions(self, analysis: Analysis) -> ExitStack:
        """Enter each relation's ``session()`` (if it has one) for the whole statement.

        An attached table keeps its files open for the statement instead of
        reopening them for the semi-join key reads and each scan.
        """
        stack = ExitStack()
        seen: set[int] = set()
        for use in analysis.relations.values():
            relation = self.namespace.relation(use.name)
            if not can(relation, SessionHolding) or id(relation) in seen:
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
        counted = answer_count(self.namespace, analysis)
        if counted is not None:
            return counted
        aggregated = answer_aggregate(self.namespace, analysis)
        if aggregated is not None:
            return aggregated
        looked_up = answer_lookup(self.namespace, analysis)
        if looked_up is not None:
            return looked_up
        reduce_semijoins(self.namespace, analysis)
        joined = answer_join(self.namespace, analysis)
        if joined is not None:
            return joined
        topped = answer_top(self.namespace, analysis)
        if topped is not None:
            return topped
        self._check_writes(analysis, found)
        scans = self._scans(analysis)
        run = _Run(text, params, analysis, session, found, sink, watch, exact, retried)
        try:
            result = self._run(run, scans)
        except MissingColumn:
            # The analysis left out a column the statement uses (a construct it
            # does not know): run again reading every column.
            scans = {k: RelationScan(s.relation, None, s.predicate) for k, s in scans.items()}
            result = self._run(run, scans)
        if sink is not None and not run.sunk:
            return _hand_over(result, sink, exact)  # a small result, fetched whole
        return result

    def explain(self, text: str, params: Any = None, session: SQLSession | None = None) -> Explain:
        session = session if session is not None else self.session
        analysis = self._analyse(text, params)
        self.settings.read(session)
        if session.changed_settings:
            without_pushdown(analysis)
        with self._sessions(analysis):
            return explain(self.namespace, text, analysis)

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
                return store_objects(cursor) if have_store else {}
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
                f"table {table!r} in {self.store.path} cannot be read: {first_line(str(err))}"
            ) from None
        return int(rows[0][0])

    # --- steps ------------------------------------------------------------------
    def _analyse(self, text: str, params: Any) -> Analysis:
        return analyse(
            self.namespace, self.analyses, self.connection(), text, params, self._view_sql
        )

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
                self.store.attached(
                    con, refresh=not session.in_transaction, fresh=run.retried
                ) as have_store,
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
        fresh = run.retried
        if session.wrote or not self.store.published_once():
            self.publish_store()
            session.wrote = False
            fresh = True  # (not the snapshot other statements hold: it lacks the write)
        instance = self._restricted_instance()
        with instance.store.attached(instance.connection(), fresh=fresh) as have_store:
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
            if before and have_store and commits(run.found):
                # the session's transaction is about to commit: its new tables are checked
                # first, and a refused one rolls the whole transaction back (one DuckDB
                # aborted answers nothing: its COMMIT rolls it back anyway)
                try:
                    tables_now = store_objects(cursor)
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
            tables = None
            try:
                try:
                    # (inside: an interrupt may land on any statement run on the cursor)
                    kept.bind(
                        {instance.registered_name(scan): scan for scan in scans.values()},
                        analysis.table_names if analysis.parsed else None,
                    )
                    if wrap:
                        cursor.execute("BEGIN TRANSACTION")
                    with watching(cursor, run.watch):
                        fetched = self._fetch(kept, run)
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
                        tables = store_objects(cursor)
                        self._check_new_tables(tables)
                    if wrap:
                        cursor.execute("COMMIT")
                except BaseException:
                    if wrap:
                        with contextlib.suppress(duckdb.Error):
                            cursor.execute("ROLLBACK")
                    raise
            except duckdb.InterruptException:
                after = transaction_after_error(cursor, run.found, before)
                if run.watch is not None:
                    run.watch.check()  # cancelled through its token: say so
                raise InterruptedStatementError(
                    "the statement was interrupted; nothing of it was kept"
                ) from None
            except duckdb.Error as err:
                after = transaction_after_error(cursor, run.found, before)
                for scan in scans.values():
                    if scan.error is not None:
                        raise scan.error from None
                raise execution_error(
                    err,
                    run.text,
                    self.namespace,
                    # (the store this instance attached: a restricted instance's own, whose
                    # damage, if its attach failed, says why a table is missing)
                    instance.store,
                    snapshot_reader=self.read_only or session.restricted,
                    retried=run.retried,
                    pruned=any(s.columns is not None for s in scans.values()),
                ) from None
            finally:
                session.in_transaction = after
                if run.found is not None:
                    self.settings.changed(session, run.text)
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
        conversion = Conversion(fetched.types, session.conversion_settings, session.lossless)
        stats = {scan.relation.name: scan.stats for scan in scans.values()}
        if fetched.rows is not None and fetched.schema is not None:
            return Result._of_rows(fetched.rows, fetched.schema, stats, conversion=conversion)
        assert fetched.table is not None
        return Result(fetched.table, stats, conversion=conversion)

    def _small_result_key(self, run: _Run) -> SmallResultKey | None:
        """The key under which a query's result shape is remembered, or None when the
        statement is not a lone query read straight into a result."""
        analysis = run.analysis
        if run.found is not None or analysis.statement_count != 1 or _may_write(run):
            return None
        return (run.text, self.settings.epoch, run.session.restricted)

    def _fetch(self, kept: KeptCursor, run: _Run) -> _Fetched:
        """Run the text and take its rows: Arrow that loses no value (the cursor fetches
        losslessly), or handed to the sink (as DuckDB's own Arrow, unless ``exact``); and
        the DuckDB type of each column.

        A query seen before with a small result of plain types runs the short way (see
        :mod:`tesseradb.sql.small_results`) and is fetched with ``fetchall``, a sink's
        too (its rows are handed over once fetched). Its columns' names and types are
        checked against the earlier run's; the Arrow form, if asked for, is built from
        the rows with the earlier run's schema."""
        import duckdb
        import pyarrow as pa

        cursor = kept.cursor
        key = self._small_result_key(run)
        shape = self.small_results.get(key) if key is not None else None
        if key is not None and shape is not None:
            try:
                self.small_results.execute(
                    kept,
                    key,
                    shape,
                    run.params,
                    # (a relation's scan, even one read through a view, is never prepared)
                    run.session.in_transaction or bool(run.analysis.relations),
                    lambda name: self.namespace.kind_of(name) in ("table", "view"),
                )
                columns = tuple((d[0], str(d[1])) for d in cursor.description or ())
                if columns == shape.described:
                    return _Fetched(None, shape.types, cursor.fetchall(), shape.schema)
            except BaseException:
                # (a result cut short by an error must not hold the cursor: the next
                # statement on it would be refused)
                with contextlib.suppress(duckdb.Error):
                    cursor.abort()
                raise
            # another shape than last time (a table changed): the query, which writes
            # nothing, runs again as a relation, whose Arrow is the lossless form
            cursor.abort()
            self.small_results.forget(key)
        relation = (
            cursor.sql(run.text, params=run.params)
            if run.params is not None
            else cursor.sql(run.text)
        )
        if relation is None:
            run.sunk = True  # (no rows: a sink is not called)
            return _Fetched(pa.table({}), ())
        types = tuple(str(t) for t in relation.types)
        if any("AGGREGATE_STATE" in t for t in types):
            # (DuckDB 2.0.1 crashes exporting some aggregate states losslessly; they have
            # no lossless form of their own anyway)
            cursor.execute("SET SESSION arrow_lossless_conversion = false")
            try:
                return _Fetched(relation.to_arrow_table(), types)
            finally:
                cursor.execute("SET SESSION arrow_lossless_conversion = true")
        if run.sink is None:
            table = relation.to_arrow_table()
            if key is not None:
                self.small_results.learn(key, table, types)
            return _Fetched(table, types)
        reader = relation.to_arrow_reader(_SINK_BATCH_ROWS)
        if key is not None:
            reader = self.small_results.learning(reader, key, types)
        conversion = Conversion(types, run.session.conversion_settings, run.session.lossless)
        run.sunk = True
        if run.exact:  # lossless, saying how to read it exactly
            run.sink(described(reader, conversion))
        elif conversion.lossless or not arrow_lossy(types):
            run.sink(reader)
        else:  # as DuckDB's own Arrow, batch by batch
            run.sink(as_duckdb_arrow_batches(reader, conversion))
        return _Fetched(pa.table({}), types)

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

    def _check_new_tables(self, tables: dict[str, tuple[str, list[str]]]) -> None:
        """Refuse a plain table or view the statement made under a name the catalog cannot take."""
        for name, (kind, _) in tables.items():
            existing = self.namespace.kind_of(name)
            if existing in ("table", "view"):
                continue
            if existing is not None:
                raise ObjectExistsError(
                    f"cannot create {kind} {name!r}: an object named {name!r} already exists "
                    f"({with_article(existing)}); nothing of the statement was kept"
                )
            validate_name(name, kind)


@dataclass(frozen=True)
class _Fetched:
    """What a statement gave: lossless Arrow, or the rows of a small plain result with
    the Arrow schema they have as a table; and each column's DuckDB type."""

    table: pa.Table | None
    types: tuple[str, ...]
    rows: list[tuple[Any, ...]] | None = None
    schema: pa.Schema | None = None


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
    sunk: bool = False  # the rows went to the sink (a small result is handed over after)


def _hand_over(result: Result, sink: Callable[[pa.RecordBatchReader], Any], exact: bool) -> Result:
    """Give ``sink`` the rows of a result answered whole (a shortcut's, a small one's) as
    the sink path would have (``exact``: lossless, described); a Result without rows."""
    import pyarrow as pa

    if exact:
        table = result.exact_arrow()
        sink(described(table.to_reader(), result.conversion))
    else:
        sink(result.arrow().to_reader())
    return Result(pa.table({}), result.scan_stats, result.shortcut)


def _may_write(run: _Run) -> bool:
    """Whether the statement may change the table store (a snapshot waits for it)."""
    analysis = run.analysis
    if analysis.parsed and analysis.is_query:
        return _WRITING_FUNCTIONS.search(run.text) is not None
    return True


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
