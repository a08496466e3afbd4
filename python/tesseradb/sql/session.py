"""SQL sessions: what DuckDB keeps per connection, kept between ``db.sql`` calls.

A DuckDB connection is a session: its settings (``SET``), prepared statements,
temporary tables, macros and secrets, variables, ``USE``, and an open transaction
(``BEGIN`` ... ``COMMIT``) all last from one statement to the next. A database has one
session (and the server one per client); statements that change such state run on the
session's own cursor, and from then on so does every statement of that session, one at
a time, so that each sees what the earlier ones left. A session that never changed any
runs its statements on cursors of a shared pool, concurrently.
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import TYPE_CHECKING, Any

from tesseradb.sql.settings import RESULT_SETTINGS
from tesseradb.sql.values import CONVERSION_SETTINGS

if TYPE_CHECKING:
    import duckdb

    from tesseradb.sql.analysis import Analysis
    from tesseradb.sql.instance import DuckDBInstance

__all__ = [
    "SQLSession",
    "SettingsTracker",
    "changes_session",
    "commits",
    "read_settings",
    "transaction_after_error",
    "transaction_state",
]

# statement types (DuckDB's own parser) that change or read what a session keeps
_SESSION_TYPES = frozenset(
    {
        "SET",  # SET, RESET, USE, SET VARIABLE
        "VARIABLE_SET",
        "PREPARE",
        "EXECUTE",
        "TRANSACTION",
        "CALL",
        "PRAGMA",
        "ATTACH",
        "DETACH",
        "LOAD",
        "EXTENSION",
        "INVALID",
    }
)
# CREATE/DROP of what lives in the session (temporary objects, secrets, DEALLOCATE)
_SESSION_OBJECTS = re.compile(r"\b(TEMP|TEMPORARY|SECRET|DEALLOCATE)\b", re.IGNORECASE)
# functions that read or change the session's own state
_SESSION_FUNCTIONS = re.compile(r"\b(setseed|getvariable)\s*\(", re.IGNORECASE)
_TRANSACTION_BEGIN = ("BEGIN", "START")
_TRANSACTION_END = ("COMMIT", "END", "ROLLBACK", "ABORT")


def statements(con: duckdb.DuckDBPyConnection, text: str) -> list[tuple[str, str]] | None:
    """(statement type, text) of each statement, by DuckDB's parser; None if it fails."""
    import duckdb

    try:
        return [(st.type.name, st.query) for st in con.extract_statements(text)]
    except duckdb.Error:
        return None


def changes_session(
    con: duckdb.DuckDBPyConnection, text: str, analysis: Analysis
) -> list[tuple[str, str]] | None:
    """The statements of ``text`` if one of them changes (or needs) the session's state;
    None if none does."""
    if analysis.parsed and analysis.is_query:
        if _SESSION_FUNCTIONS.search(text) is None:
            return None
    elif (
        analysis.parsed
        and analysis.statement_count == 1
        and analysis.writes
        and all(kind in ("INSERT", "UPDATE", "DELETE") for kind, _ in analysis.writes)
        and _SESSION_FUNCTIONS.search(text) is None
    ):
        return None
    found = statements(con, text)
    if found is None:
        return None  # DuckDB cannot parse it: running it says why
    if _SESSION_FUNCTIONS.search(text) is not None:
        return found
    for kind, query in found:
        if kind in _SESSION_TYPES:
            return found
        if kind in ("CREATE", "DROP") and _SESSION_OBJECTS.search(query):
            return found
    return None


def transaction_state(found: list[tuple[str, str]], before: bool) -> bool:
    """Whether a transaction is open after these statements ran, one was before."""
    state = before
    for kind, query in found:
        if kind != "TRANSACTION":
            continue
        word = query.strip().split(None, 1)[0].upper().rstrip(";") if query.strip() else ""
        if word in _TRANSACTION_BEGIN:
            state = True
        elif word in _TRANSACTION_END:
            state = False
    return state


def read_settings(cursor: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The values of the settings that change answers or conversions, as ``cursor`` sees them."""
    wanted = sorted(RESULT_SETTINGS | set(CONVERSION_SETTINGS))
    rows = cursor.execute(
        "SELECT name, value FROM duckdb_settings() WHERE list_contains($names, name)",
        {"names": wanted},
    ).fetchall()
    return {str(name): "" if value is None else str(value) for name, value in rows}


class SQLSession:
    """One session of the engine (a database's own, or a served client's).

    ``cursor`` is made when the first statement changes the session; from then on every
    statement runs on it, one at a time (``lock``). What the engine learnt of the
    session: whether a transaction is open, the settings that change answers and how
    they differ from the database's defaults, and the user's ``arrow_lossless_conversion``.
    """

    def __init__(self, name: str = "", restricted: bool = False) -> None:
        self.name = name
        # its queries run where no file, extension or setting is reachable (a served user
        # without the admin right; tesseradb.sql.instance)
        self.restricted = restricted
        self.wrote = False  # it wrote since its last restricted read (which waits for it)
        self.cursor: Any = None  # the engine's kept cursor (with its registered slots)
        self.lock = threading.RLock()
        self.in_transaction = False
        self.attachment = -1  # the table store's attachment this cursor was set up in
        self.use: str | None = None  # the user's last USE, run again after a re-attach
        self.settings_epoch = -1  # the engine's settings epoch last read
        self.changed_settings: frozenset[str] = frozenset()  # RESULT_SETTINGS not default
        self.conversion_settings: tuple[tuple[str, str], ...] = ()
        self.lossless = False  # the user's arrow_lossless_conversion
        self.closed = False

    @property
    def stateful(self) -> bool:
        return self.cursor is not None


def transaction_after_error(
    cursor: duckdb.DuckDBPyConnection, found: list[tuple[str, str]] | None, before: bool
) -> bool:
    """Whether a session's transaction is open after its statement (``found``) failed: as
    it was, unless the text begins or ends one (then DuckDB is asked)."""
    import duckdb

    if found is None or not any(kind == "TRANSACTION" for kind, _ in found):
        return before
    if len(found) == 1:
        return transaction_state(found, before)  # (a failed COMMIT still ends it)
    try:
        cursor.execute("BEGIN TRANSACTION")
    except duckdb.Error:
        return True  # "cannot start a transaction within a transaction"
    with contextlib.suppress(duckdb.Error):
        cursor.execute("ROLLBACK")
    return False


def commits(found: list[tuple[str, str]] | None) -> bool:
    """Whether these statements commit the session's open transaction."""
    return found is not None and any(
        kind == "TRANSACTION"
        and query.strip().split(None, 1)[0].upper().rstrip(";") in ("COMMIT", "END")
        for kind, query in found
        if query.strip()
    )


class SettingsTracker:
    """What is known of each session's DuckDB settings.

    The values when the database was opened are the defaults; ``epoch`` moves whenever
    a statement may have changed a setting (in any session: most are global), and each
    session reads its own again before its next statement. A session whose settings
    differ from the defaults in one of :data:`RESULT_SETTINGS` runs without shortcuts.
    """

    def __init__(self, main: DuckDBInstance) -> None:
        self._main = main
        self.epoch = 0
        self._defaults: dict[str, str] | None = None
        # (epoch, values) of the settings a fresh cursor sees, read once per epoch
        self._fresh: tuple[int, dict[str, str]] | None = None

    def read(self, session: SQLSession) -> None:
        """Bring what is known of ``session``'s settings up to date (after any statement
        that may have changed a setting, in any session: most are global)."""
        if session.settings_epoch == self.epoch or session.restricted:
            return  # (a restricted session's instance keeps DuckDB's defaults, locked)
        epoch = self.epoch
        import duckdb

        main = self._main
        with session.lock, main.store.attached(main.connection(), refresh=False):
            # (read on a cursor set up as statements' are: USE sets the search path)
            try:
                if session.cursor is not None:
                    values = read_settings(session.cursor.cursor)
                elif self._fresh is not None and self._fresh[0] == epoch:
                    # every session without a cursor of its own sees what a fresh cursor
                    # sees: read once per epoch (the read is a DuckDB statement of
                    # milliseconds, and a served client's request makes a new session)
                    values = self._fresh[1]
                else:
                    kept = main.cursor()
                    try:
                        values = read_settings(kept.cursor)
                    finally:
                        main.keep(kept)
                    self._fresh = (epoch, values)
            except duckdb.Error:
                return  # (a transaction DuckDB aborted answers nothing: read them later)
        if self._defaults is None:
            self._defaults = values  # (read before any statement could change one)
        defaults = self._defaults
        session.changed_settings = frozenset(
            n for n in RESULT_SETTINGS if n in values and values[n] != defaults.get(n)
        )
        session.conversion_settings = tuple(
            (n, values[n])
            for n in CONVERSION_SETTINGS
            if n in values and values[n] != defaults.get(n)
        )
        session.settings_epoch = epoch

    def changed(self, session: SQLSession, text: str) -> None:
        """A statement that may have changed the session ran: settings are read again
        (by every session: most settings are global), and the user's own Arrow setting
        is noted while the session's cursor keeps fetching losslessly."""
        import duckdb

        self.epoch += 1
        if session.cursor is None or "arrow_lossless_conversion" not in text.lower():
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
