"""The server document backends: PostgreSQL (psycopg) and MySQL/MariaDB (PyMySQL),
reached by URL."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlparse

from tesseradb._core import sql_insert_values
from tesseradb.documents._backends import Backend, ColumnTypes
from tesseradb.documents._keys import DocumentLimits
from tesseradb.errors import DocumentBackendError

__all__ = ["MariaDBBackend", "PostgresBackend"]


class _ServerBackend(Backend):
    """PostgreSQL and MariaDB: DB-API drivers with ``%s`` placeholders."""

    def __init__(self, url: str, read_only: bool = False) -> None:
        super().__init__(read_only)
        self.url = url
        self._con: Any = None

    def describe(self) -> str:
        parsed = urlparse(self.url)
        return f"{self.kind} at {parsed.hostname}:{parsed.port}/{parsed.path.lstrip('/')}"

    def _run(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        # Every literal is a parameter, so '%' only appears where we put it.
        text = sql.replace("%", "%%").replace("?", "%s")
        with self._con.cursor() as cur:
            cur.execute(text, tuple(params))
            if cur.description is None:
                return []
            return list(cur.fetchall())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._con.close()


class PostgresBackend(_ServerBackend):
    kind = "postgresql"
    # A string sits in a btree index beside its key (keystr, valstr, ...), and a
    # btree entry holds at most 2,704 bytes: a longer pair would fail at insert, or
    # pass only when PostgreSQL can compress it, so the door refuses it plainly.
    # Its text holds no U+0000 either.
    limits = DocumentLimits(key_and_string_bytes=2_600, nul=False)
    types = ColumnTypes(
        "BIGINT",
        'TEXT COLLATE "C"',
        'TEXT COLLATE "C"',
        "DOUBLE PRECISION",
        "BIGINT",
        "BOOLEAN",
        "SMALLINT",
        "BYTEA",
    )

    def __init__(self, url: str, read_only: bool = False) -> None:
        import psycopg

        super().__init__(url, read_only)
        try:
            self._con = psycopg.connect(url, autocommit=True)
        except psycopg.Error as err:
            raise DocumentBackendError(f"cannot connect to {self.describe()}: {err}") from err

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        with (
            self._lock,
            self._con.cursor() as cur,
            cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)

    def after_bulk_load(self, tables: Sequence[str]) -> None:
        # Until autovacuum gets to them the new tables have no statistics, and the
        # planner guessed half of a table for any objid IN (...) and scanned it
        # all: fetching 100 objects of 20,000 took 30 ms instead of under 1.
        for table in tables:
            self.execute(f"ANALYZE {table}")

    def typed_null(self, column: str) -> str:
        # PostgreSQL types a UNION column pair by pair: a pair of NULLs would become
        # text and then clash with the boolean or number branch.
        return "CAST(NULL AS " + self.types.of(column).removesuffix(' COLLATE "C"') + ")"

    def pack_rows(self) -> str | None:
        # float8 text is the shortest exact decimal (extra_float_digits >= 1, the
        # default since PostgreSQL 12); ::text so that psycopg leaves the JSON as text
        return (
            "CAST(json_agg(json_build_array(objid, keystr, ord, valstr, CAST(valnum AS TEXT), "
            "valint, CAST(valbool AS INTEGER), valkind)) AS TEXT)"
        )

    def element_suffix(self, start: int) -> str:
        start_param = int(start)  # our own integer, never query text
        return f"substr(keystr, {start_param}) ~ '^[0-9]+\\]$'"

    def table_exists(self, table: str) -> bool:
        return bool(self.execute("SELECT to_regclass(?) IS NOT NULL", [table])[0][0])


class MariaDBBackend(_ServerBackend):
    kind = "mariadb"
    # valstr is TEXT (65,535 bytes); keystr VARCHAR(512) holds the default key limit
    limits = DocumentLimits(string_bytes=65_535)
    keeps_negative_zero = False
    transactional_ddl = False
    covering_indexes = False
    _COLLATE = "CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
    types = ColumnTypes(
        "BIGINT",
        f"VARCHAR(512) {_COLLATE}",  # with valstr(255): under InnoDB's 3072-byte index key
        f"TEXT {_COLLATE}",
        "DOUBLE",
        "BIGINT",
        "BOOLEAN",
        "SMALLINT",
        "LONGBLOB",
    )

    def __init__(self, url: str, read_only: bool = False) -> None:
        import pymysql

        super().__init__(url, read_only)
        parsed = urlparse(url)
        try:
            self._con = pymysql.connect(
                host=parsed.hostname or "localhost",
                port=parsed.port or 3306,
                user=unquote(parsed.username or ""),
                password=unquote(parsed.password or ""),
                database=parsed.path.lstrip("/") or None,
                charset="utf8mb4",
                autocommit=True,
            )
        except pymysql.Error as err:
            raise DocumentBackendError(f"cannot connect to {self.describe()}: {err}") from err
        # ANSI_QUOTES: "name" is an identifier, as on the other backends.
        self._run("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')", ())

    def _begin(self) -> None:
        self._con.begin()

    def _commit(self) -> None:
        self._con.commit()

    def _rollback(self) -> None:
        self._con.rollback()

    # The text of one multi-row INSERT (and one row), as PyMySQL's executemany makes
    # them: under max_allowed_packet, 16 MiB in MariaDB, 4 MiB in MySQL 5.7, 1 MiB before
    STATEMENT_BYTES = 1 << 20

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        # The statements' text is written by the Rust kernel: PyMySQL quoting each value
        # in Python had been 60% of a 40,000-object NoBench load (a profile).
        prefix = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
        statements = sql_insert_values(prefix, list(rows), len(columns), self.STATEMENT_BYTES)
        with self._lock, self._con.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def index_column(self, column: str) -> str:
        return f"{column}(255)" if column == "valstr" else column

    def drop_index_sql(self, index: str, table: str) -> str:
        return f"DROP INDEX {index} ON {table}"

    def element_suffix(self, start: int) -> str:
        start_param = int(start)  # our own integer, never query text
        return f"substr(keystr, {start_param}) REGEXP '^[0-9]+[]]$'"

    def table_exists(self, table: str) -> bool:
        rows = self.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
            [table.strip('"')],
        )
        return bool(rows)
