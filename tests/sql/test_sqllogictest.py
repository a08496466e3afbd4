"""scripts/sqllogictest: DuckDB's sqllogictest files run through TesseraDB and DuckDB, the
differences counted by class (issue 41). Files of our own here; DuckDB's test/sql is
what the runner is for (docs/contributing.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tesseradb.testing.sqllogictest import parse, run_paths

SESSIONS = """\
# name: sessions.test
statement ok
CREATE TABLE integers(i INTEGER)

loop i 0 3

statement ok
INSERT INTO integers VALUES (${i})

endloop

query I rowsort
SELECT i FROM integers
----
0
1
2

statement ok con1
BEGIN

statement ok con1
INSERT INTO integers VALUES (10)

query I con2
SELECT count(*) FROM integers
----
3

statement ok con1
ROLLBACK

statement error
SELECT * FROM nope
----
does not exist

statement ok
SET default_null_order = 'nulls_first'

query I
SELECT * FROM (VALUES (1), (NULL)) t(x) ORDER BY x
----
NULL
1

restart

query I
SELECT count(*) FROM integers
----
3

query I
SELECT 340282366920938463463374607431768211455::UHUGEINT
----
340282366920938463463374607431768211455
"""

REFUSED = """\
statement ok
CREATE TABLE "My Table"(a INTEGER)
"""


def test_the_runner_finds_no_difference_where_there_is_none(tmp_path: Path) -> None:
    (tmp_path / "sessions.test").write_text(SESSIONS)
    report = run_paths([tmp_path], timeout=30, jobs=1)
    assert report.files == 1
    assert report.records == 14  # (the loop unrolls to three inserts)
    assert report.differences == [], report.summary()


def test_the_runner_names_a_difference_by_its_class(tmp_path: Path) -> None:
    (tmp_path / "refused.test").write_text(REFUSED)
    report = run_paths([tmp_path], timeout=30, jobs=1)
    assert report.by_class() == {"we refuse, DuckDB answers": 1}, report.summary()
    assert "InvalidNameError" in report.differences[0].ours


def test_files_the_runner_cannot_reproduce_are_skipped_and_counted() -> None:
    items, why = parse(
        textwrap.dedent("""\
        load __TEST_DIR__/x.db

        statement ok
        SELECT 1
    """)
    )
    assert (items, why) == ([], "load")
