"""Access rights: a user who is not an admin cannot reach the file system, the network,
extensions or settings through SQL, however the statement is written; an admin can.
Each way in is tried, and a property test hides the forbidden calls in random places."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.server._guard import Refused, check_statement

from .conftest import Served

ATTACKS = [
    "COPY plain TO '{tmp}/stolen.csv'",
    "COPY (SELECT 1) TO '{tmp}/stolen.parquet' (FORMAT parquet)",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM read_parquet('{tmp}/x.parquet')",
    "SELECT * FROM read_json('{tmp}/x.json')",
    "SELECT * FROM parquet_scan('{tmp}/x.parquet')",
    "SELECT * FROM '/etc/passwd'",
    'SELECT * FROM "{tmp}/x.csv"',
    "SELECT * FROM glob('/etc/*')",
    "SELECT getenv('HOME')",
    "SELECT current_setting('memory_limit')",
    "SELECT * FROM query('SELECT * FROM read_text(''/etc/hostname'')')",
    "SELECT * FROM query_table('plain')",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "ATTACH '{tmp}/other.duckdb' AS other",
    "DETACH tessera_store",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET memory_limit = '1MB'",
    "RESET memory_limit",
    "PRAGMA database_list",
    "CALL pragma_version()",
    "EXPORT DATABASE '{tmp}/dump'",
    "IMPORT DATABASE '{tmp}/dump'",
    "CHECKPOINT",
    "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "CREATE MACRO m(a) AS a",
    "SELECT 1; COPY plain TO '{tmp}/stolen2.csv'",
    "WITH x AS (SELECT * FROM read_csv('/etc/passwd')) SELECT * FROM x",
    "SELECT (SELECT count(*) FROM read_text('/etc/hostname')) AS n",
    "SELECT * FROM plain WHERE i IN (SELECT length(content) FROM read_text('/etc/hostname'))",
    "INSERT INTO plain SELECT 1, length(content) FROM read_text('/etc/hostname')",
    "CREATE TABLE leak AS SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM other_db.main.plain",
    "USE memory",
    "VACUUM",
    # table functions named without parentheses are tables to the parser
    "SELECT * FROM duckdb_databases",
    "SELECT path FROM duckdb_databases d",
    "SELECT * FROM pragma_database_list",
    "SELECT sql FROM duckdb_tables",
    # an extension DuckDB would install over the network
    "INSERT INTO plain SELECT * FROM ducklake_snapshots('x')",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_writer_cannot_reach_files_extensions_or_settings(
    served: Served, tokens: dict[str, str], tmp_path: Path, attack: str
) -> None:
    db = served.db
    before = sorted(db.tables())
    text = attack.format(tmp=tmp_path)
    response = served.client(tokens["writer"]).post("/sql", json={"sql": text})
    assert response.status_code == 403, (text, response.text)
    assert response.json()["type"] == "Refused"
    assert not list(tmp_path.glob("stolen*")) and not (tmp_path / "dump").exists()
    assert sorted(db.tables()) == before
    assert db.sql("SELECT count(*) FROM plain").scalar() == 1000


def test_an_admin_may_copy_to_a_file(
    served: Served, tokens: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "out.csv"
    response = served.client(tokens["admin"]).post(
        "/sql", json={"sql": f"COPY (SELECT * FROM plain) TO '{target}'"}
    )
    assert response.status_code == 200, response.text
    assert target.read_text().count("\n") == 1001


def test_ordinary_statements_pass_the_guard(served: Served, tokens: dict[str, str]) -> None:
    client = served.client(tokens["writer"])
    for text in [
        "SELECT count(*) FROM readings WHERE t < 100",
        "WITH a AS (SELECT i FROM plain) SELECT max(i) FROM a",
        "SELECT * FROM range(10)",
        "SELECT sum(v) FROM img WHERE x < 4",
        "SELECT p.i, r.value FROM plain p JOIN readings r ON r.t = p.i LIMIT 5",
        "DESCRIBE plain",
        "CREATE VIEW small AS SELECT * FROM plain WHERE i < 10",
        "SELECT count(*) FROM small",
        "DROP VIEW small",
        "SELECT 'read_csv(''/etc/passwd'')' AS just_text",
    ]:
        response = client.post("/sql", json={"sql": text})
        assert response.status_code == 200, (text, response.text)


FORBIDDEN_CALLS = [
    "read_csv('/etc/passwd')",
    "read_text('/etc/hostname')",
    "glob('/etc/*')",
    "query('SELECT 1')",
    "parquet_scan('x.parquet')",
    "sniff_csv('/etc/passwd')",
    "duckdb_settings()",
    "pragma_database_list()",
]
PLACES = [
    "SELECT * FROM {call}",
    "SELECT * FROM plain WHERE i IN (SELECT 1 FROM {call})",
    "WITH w AS (SELECT * FROM {call}) SELECT * FROM w",
    "SELECT (SELECT count(*) FROM {call}) AS n FROM plain",
    "SELECT * FROM plain, LATERAL (SELECT * FROM {call}) AS l",
    "SELECT * FROM plain UNION ALL SELECT * FROM {call}",
    "INSERT INTO plain SELECT * FROM {call}",
    "SELECT * FROM (SELECT * FROM (SELECT * FROM {call}))",
    "SELECT getenv('X'), * FROM plain",
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(place=st.sampled_from(PLACES), call=st.sampled_from(FORBIDDEN_CALLS), upper=st.booleans())
def test_forbidden_calls_are_refused_wherever_they_hide(place: str, call: str, upper: bool) -> None:
    text = place.format(call=call.upper() if upper else call)
    with pytest.raises(Refused):
        check_statement(text, False, lambda kind, level: True, lambda name: "table")
    # and an admin's statement is never checked
    assert not check_statement(text, True, lambda kind, level: False, lambda name: "table").names


# What a non-admin's queries meet past the guard: the restricted instance itself refuses.
BEHIND_THE_GUARD = [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM ducklake_snapshots('x')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT * FROM leaky",  # a view an admin made, whose body reads a file
]


@pytest.mark.parametrize("attack", BEHIND_THE_GUARD)
def test_a_restricted_session_cannot_reach_files_or_extensions_even_past_the_guard(
    database: tesseradb.Database, attack: str
) -> None:
    database.sql("CREATE OR REPLACE VIEW leaky AS SELECT * FROM read_text('/etc/hostname')")
    with database.session(restricted=True) as session:
        with pytest.raises(tesseradb.errors.SQLExecutionError):
            session.sql(attack).fetchall()
        # what it may read, it reads: plain tables (its own writes too) and every kind
        assert session.sql("SELECT count(*) FROM plain").scalar() == 1000
        session.sql("INSERT INTO plain VALUES (5000, 1.5)")
        assert session.sql("SELECT count(*) FROM plain WHERE i = 5000").scalar() == 1
        assert session.sql("SELECT count(*) FROM readings").scalar() == 5000
        assert session.sql("SELECT count(*) FROM docs").scalar() == 30
        # the paths it can see are its own private links, never the database's
        paths = session.sql("SELECT path FROM duckdb_databases() WHERE path IS NOT NULL")
        assert all(str(database.path) not in str(p) for (p,) in paths.fetchall())
        for setting in ("SET threads = 1", "SET enable_external_access = true"):
            with pytest.raises(tesseradb.errors.TesseraError):
                session.sql(setting)


def test_a_typo_is_a_syntax_error_for_anyone(served: Served, tokens: dict[str, str]) -> None:
    response = served.client(tokens["reader"]).post("/sql", json={"sql": "SELEC 1"})
    assert response.status_code == 400, response.text
    assert response.json()["type"] == "SQLSyntaxError"
