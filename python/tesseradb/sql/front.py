"""The Database's SQL front (a mixin of :class:`tesseradb.database.Database`): ``sql``,
``stream_sql``, ``explain``, ``interrupt`` and ``session``, and the :class:`Session` a
``session()`` gives; the engine behind them is :mod:`tesseradb.sql.engine`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tesseradb.errors import require_bool, require_params, require_str
from tesseradb.kinds import DatabaseMethods

if TYPE_CHECKING:
    import pyarrow as pa

    from tesseradb.progress import Cancel, ProgressLike
    from tesseradb.sql.engine import SQLSession
    from tesseradb.sql.explain import Explain
    from tesseradb.sql.result import Result

__all__ = ["SQLMethods", "Session"]


class Session:
    """A SQL session of its own on an open database (:meth:`Database.session`): what
    DuckDB keeps per connection (settings, prepared statements, temporary tables,
    ``USE``, an open transaction) is this session's alone."""

    def __init__(self, database: Any, session: SQLSession) -> None:
        self.database = database
        self._session = session

    def sql(
        self,
        text: str,
        params: Any = None,
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> Result:
        """As :meth:`Database.sql`, in this session."""
        self._check_open()
        return self.database._sql(text, params, progress, cancel, self._session, "session.sql")

    def stream_sql(
        self,
        text: str,
        sink: Callable[[pa.RecordBatchReader], Any],
        params: Any = None,
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
        exact: bool = False,
    ) -> Result:
        """As :meth:`Database.stream_sql`, in this session; ``exact`` hands the rows over
        in the lossless Arrow form :meth:`Result.exact_arrow` gives."""
        self._check_open()
        return self.database._sql(
            text, params, progress, cancel, self._session, "session.stream_sql", sink, exact
        )

    def explain(self, text: str, params: Any = None) -> Explain:
        """As :meth:`Database.explain`, under this session's settings."""
        self._check_open()
        return self.database._explain(text, params, self._session, "session.explain")

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction begun with ``BEGIN`` is open in this session."""
        return bool(self._session.in_transaction)

    def _check_open(self) -> None:
        from tesseradb.errors import DatabaseClosedError

        if self._session.closed:
            raise DatabaseClosedError("this SQL session is closed")

    def close(self) -> None:
        """End the session (an open transaction is rolled back)."""
        if not self.database._closed:
            self.database._engine.close_session(self._session)
        self._session.closed = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SQLMethods(DatabaseMethods):
    _engine: Any
    _closed: bool

    def sql(
        self,
        text: str,
        params: Any = None,
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> Result:
        """Run SQL (DuckDB's dialect) over every relation and plain table of the database.

        ``params`` binds ``?`` placeholders (a sequence) or ``$name`` ones (a
        mapping); values are never pasted into the statement's text.
        ``progress`` (True: a bar on stderr; or a callable taking a
        :class:`~tesseradb.progress.ProgressEvent`) reports DuckDB's progress
        in percent; ``cancel`` (a :class:`~tesseradb.progress.Cancel`) stops
        the statement, which then keeps nothing.

        Calls share one session, as the statements of one DuckDB connection do:
        ``SET``, ``PREPARE``, temporary tables, ``USE`` and a transaction begun
        with ``BEGIN`` last until changed, ended or the database is closed
        (:meth:`session` gives a session of its own).
        """
        return self._sql(text, params, progress, cancel, None, "db.sql")

    def stream_sql(
        self,
        text: str,
        sink: Callable[[pa.RecordBatchReader], Any],
        params: Any = None,
        *,
        progress: ProgressLike = None,
        cancel: Cancel | None = None,
    ) -> Result:
        """Run a query and hand its rows to ``sink`` as an Arrow reader, batch by batch, while
        it runs (rows are never gathered in memory: what an export of a big result uses).
        ``progress`` and ``cancel`` are as for :meth:`sql`. Returns a Result without rows
        that says how the statement was answered (``scan_stats``, ``shortcut``)."""
        return self._sql(text, params, progress, cancel, None, "db.stream_sql", sink)

    def session(self, restricted: bool = False) -> Session:
        """A SQL session of its own, as a DuckDB connection's ``cursor()`` is: its settings,
        prepared statements, temporary tables and transactions are apart from those of
        :meth:`sql` and of every other session. Close it (or use it as a context manager)
        when done; an open transaction is then rolled back.

        ``restricted``: its queries run in a DuckDB instance where no file, extension or
        setting can be reached (what a served user without the admin right gets), over
        the newest snapshot of the plain tables (:mod:`tesseradb.sql.instance`).
        """
        require_bool(restricted, "restricted", "db.session")
        self._check_open()
        return Session(self, self._engine.new_session("session", restricted))

    def _sql(
        self,
        text: str,
        params: Any,
        progress: ProgressLike,
        cancel: Cancel | None,
        session: SQLSession | None,
        where: str,
        sink: Callable[[pa.RecordBatchReader], Any] | None = None,
        exact: bool = False,
    ) -> Result:
        require_str(text, "the SQL text", where)
        require_params(params, where)
        self._check_open()
        if progress is None and cancel is None:
            return self._engine.execute(text, params, sink=sink, session=session, exact=exact)
        from tesseradb.progress import tracker

        with tracker("SQL statement", 100, "percent", progress, cancel, where) as watch:
            return self._engine.execute(
                text, params, sink=sink, watch=watch, session=session, exact=exact
            )

    def interrupt(self) -> None:
        """Cancel the SQL statements running now; each raises InterruptedStatementError and
        keeps nothing (call it from another thread, or a signal handler)."""
        self._engine.interrupt()

    def explain(self, text: str, params: Any = None) -> Explain:
        """What ``text`` would read from each relation: the predicate pushed down and the columns."""
        return self._explain(text, params, None, "db.explain")

    def _explain(self, text: str, params: Any, session: SQLSession | None, where: str) -> Explain:
        require_str(text, "the SQL text", where)
        require_params(params, where)
        self._check_open()
        return self._engine.explain(text, params, session)
