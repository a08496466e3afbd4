"""The ``tessera`` command line: every command, formats, parameters, errors, the shell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import tesseradb
from tesseradb.cli import app

runner = CliRunner()


@pytest.fixture
def dbpath(tmp_path: Path) -> Path:
    path = tmp_path / "cli.tdb"
    result = runner.invoke(app, ["init", str(path)])
    assert result.exit_code == 0, result.output
    assert "database ready" in result.output
    runner.invoke(
        app,
        ["sql", str(path), "CREATE TABLE t AS SELECT range AS x, range % 3 AS g FROM range(10)"],
    )
    return path


def test_version_and_help() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"tessera {tesseradb.__version__}"
    result = runner.invoke(app, ["--help"])
    for command in ("init", "sql", "shell", "info", "bench"):
        assert command in result.output


def test_sql_formats(dbpath: Path, tmp_path: Path) -> None:
    query = "SELECT g, sum(x) AS s FROM t WHERE x > ? GROUP BY g ORDER BY g"
    table = runner.invoke(app, ["sql", str(dbpath), query, "-p", "2"])
    assert table.exit_code == 0 and "3 rows" in table.output
    out = runner.invoke(app, ["sql", str(dbpath), query, "-p", "2", "--format", "json"])
    assert [json.loads(line) for line in out.output.splitlines()] == [
        {"g": 0, "s": 18},
        {"g": 1, "s": 11},
        {"g": 2, "s": 13},
    ]
    out = runner.invoke(
        app,
        ["sql", str(dbpath), "SELECT x FROM t WHERE x < $n ORDER BY x", "-p", "n=2", "-f", "csv"],
    )
    assert out.output.split() == ["x", "0", "1"]  # as DuckDB writes CSV
    target = tmp_path / "rows.parquet"
    out = runner.invoke(
        app, ["sql", str(dbpath), "SELECT * FROM t", "-f", "parquet", "-o", str(target)]
    )
    assert out.exit_code == 0 and pq.read_table(target).num_rows == 10
    csv_file = tmp_path / "rows.csv"
    runner.invoke(app, ["sql", str(dbpath), "SELECT * FROM t", "-f", "csv", "-o", str(csv_file)])
    assert len(csv_file.read_text().splitlines()) == 11


def test_sql_errors_exit_nonzero_with_a_message(dbpath: Path, tmp_path: Path) -> None:
    out = runner.invoke(app, ["sql", str(dbpath), "SELECT * FROM tt"])
    assert (
        out.exit_code == 1
        and "unknown table 'tt'" in out.output
        and "did you mean 't'" in out.output
    )
    out = runner.invoke(app, ["sql", str(dbpath), "SELEC 1"])
    assert out.exit_code == 1 and "line 1, column 1" in out.output
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.txt").write_text("x")
    out = runner.invoke(app, ["sql", str(tmp_path / "plain"), "SELECT 1"])
    assert out.exit_code == 1 and "not a TesseraDB database" in out.output


def test_argo_inserts_and_queries_collections(dbpath: Path) -> None:
    path = str(dbpath)
    out = runner.invoke(
        app, ["argo", path, 'INSERT INTO people OBJECT {"name": "Ann", "kids": ["Bo"], "age": 41}']
    )
    assert out.exit_code == 0 and json.loads(out.output) == {"inserted": 1}
    runner.invoke(app, ["argo", path, 'INSERT INTO people OBJECT {"name": "Cy", "age": 7}'])
    out = runner.invoke(app, ["argo", path, "SELECT name FROM people WHERE age > ?", "-p", "5"])
    assert [json.loads(line) for line in out.output.splitlines()] == [
        {"name": "Ann"},
        {"name": "Cy"},
    ]
    out = runner.invoke(
        app, ["argo", path, "SELECT * FROM people WHERE :kid = ANY kids", "-p", "kid=Bo"]
    )
    assert [json.loads(line) for line in out.output.splitlines()] == [
        {"name": "Ann", "kids": ["Bo"], "age": 41}
    ]
    out = runner.invoke(app, ["argo", path, "SELEC name FROM people"])
    assert out.exit_code == 1 and "line 1, column 1" in out.output
    out = runner.invoke(app, ["argo", path, "SELECT * FROM nobody"])
    assert out.exit_code == 1 and "nobody" in out.output
    out = runner.invoke(app, ["argo", path, "SELECT name FROM people", "--read-only"])
    assert out.exit_code == 0 and len(out.output.splitlines()) == 2


def test_sql_on_a_locked_database_reads(dbpath: Path) -> None:
    with tesseradb.connect(dbpath):
        out = runner.invoke(app, ["sql", str(dbpath), "SELECT count(*) AS n FROM t", "-f", "json"])
        assert out.exit_code == 0 and '{"n":10}' in out.output
        out = runner.invoke(app, ["sql", str(dbpath), "INSERT INTO t VALUES (1, 1)"])
        assert out.exit_code == 1 and "read-only" in out.output


def test_info(dbpath: Path) -> None:
    out = runner.invoke(app, ["info", str(dbpath)])
    assert out.exit_code == 0 and "t" in out.output and "table" in out.output and "10" in out.output


def test_shell_statements_and_dot_commands(dbpath: Path) -> None:
    script = "\n".join(
        [
            ".help",
            ".tables",
            ".schema t",
            ".timer on",
            "SELECT count(*) AS n",
            "  FROM t WHERE x > 4;",
            ".explain SELECT * FROM t",
            ".explain on",
            "SELECT 1 AS one;",
            ".bogus",  # a script stops at its first error (sqlite3 -bail), exit status 1
            "SELECT 'not reached';",
        ]
    )
    out = runner.invoke(app, ["shell", str(dbpath)], input=script + "\n")
    assert out.exit_code == 1, out.output
    text = out.output
    assert ".schema NAME" in text  # the help
    assert "t  (table)" in text
    assert "x  int64" in text
    assert "│ 5 │" in text and "time:" in text
    assert "no relations read" in text
    assert "unknown command .bogus" in text
    assert "not reached" not in text


def test_the_installed_command_answers_help() -> None:
    exe = Path(sys.executable).parent / "tessera"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    assert "Usage" in out.stdout


@pytest.mark.bench
def test_bench_command_writes_agreeing_results(tmp_path: Path) -> None:
    json_out, md_out = tmp_path / "out.json", tmp_path / "out.md"
    out = runner.invoke(
        app,
        [
            "bench",
            "pushdown",
            "--scale",
            "tiny",
            "--repeat",
            "2",
            "--json",
            str(json_out),
            "--md",
            str(md_out),
        ],
    )
    assert out.exit_code == 0, out.output
    report = json.loads(json_out.read_text())
    assert report["benchmark"] == "pushdown" and report["scale"] == "tiny"
    assert {r["system"] for r in report["results"]} == {"tessera", "duckdb"}
    assert all(c["agree"] for c in report["checks"]) and report["checks"]
    row = next(r for r in report["results"] if r["case"] == "selective_range")
    assert row["metric"] == "seconds" and len(row["runs"]) == 2 and row["value"] > 0
    assert "selective_range" in md_out.read_text()
    listing = runner.invoke(app, ["bench", "--list"])
    assert (
        "pushdown" in listing.output
        and "peer systems" in listing.output
        and "postgresql" in listing.output
    )
    bad = runner.invoke(app, ["bench", "nosuch"])
    assert bad.exit_code == 1 and "no benchmark named" in bad.output


def test_attach_index_query_and_detach(tmp_path: Path) -> None:
    import h5py
    import numpy as np

    data = tmp_path / "obs.h5"
    with h5py.File(data, "w") as f:
        f["cand/mag"] = np.linspace(15, 25, 1000)
        f["cand/sub_id"] = np.arange(1000) // 10
        f["bad/a"], f["bad/b"] = np.arange(2), np.arange(3)
    db = tmp_path / "db"
    out = runner.invoke(app, ["attach", str(db), str(data), "--name", "obs", "--create"])
    assert out.exit_code == 0, out.output
    assert "obs.cand: 2 columns" in out.output and "skipped /bad" in out.output
    out = runner.invoke(app, ["index", str(db), "obs.cand", "mag", "sub_id", "--count", "20"])
    assert out.exit_code == 0 and "indexed obs.cand on mag, sub_id" in out.output
    out = runner.invoke(
        app, ["sql", str(db), "SELECT count(*) AS n FROM obs.cand WHERE mag < 16", "-f", "json"]
    )
    assert '{"n":100}' in out.output
    out = runner.invoke(app, ["index", str(db), "obs.cand", "nope"])
    assert out.exit_code == 1 and "no column 'nope'" in out.output
    out = runner.invoke(app, ["attach", str(db), str(tmp_path / "missing.h5")])
    assert out.exit_code == 1 and "no such file" in out.output
    out = runner.invoke(app, ["detach", str(db), "obs"])
    assert out.exit_code == 0 and "detached obs" in out.output


def test_a_path_that_is_not_a_database_is_refused_unless_create(tmp_path: Path) -> None:
    typo = tmp_path / "lab.tbd"
    out = runner.invoke(app, ["sql", str(typo), "SELECT 1"])
    assert out.exit_code == 1 and "does not exist" in out.output and "--create" in out.output
    assert not typo.exists()  # nothing made
    out = runner.invoke(app, ["sql", str(typo), "--create", "SELECT 42"])
    assert out.exit_code == 0 and "42" in out.output
    assert (typo / "catalog.sqlite").is_file()


NESTED = (
    "SELECT [1, 2] AS l, {'a': 1, 'b': [1.5]} AS s, MAP {'k': 1} AS m, "
    "INTERVAL '1 year 2 months 3 days 04:05:06.5' AS i, NULL::INT[] AS n"
)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "table"])
def test_every_format_writes_nested_types_and_intervals(
    dbpath: Path, tmp_path: Path, fmt: str
) -> None:
    target = tmp_path / f"out.{fmt}"
    out = runner.invoke(app, ["sql", str(dbpath), NESTED, "-f", fmt, "-o", str(target)])
    assert out.exit_code == 0, out.output
    if fmt == "csv":  # as DuckDB writes CSV (COPY ... TO 'x.csv')
        import csv

        (row,) = list(csv.DictReader(target.open()))
        assert row["l"] == "[1, 2]"
        assert row["s"] == "{'a': 1, 'b': [1.5]}"
        assert row["m"] == "{k=1}"
        assert row["i"] == "1 year 2 months 3 days 04:05:06.5"
        assert row["n"] == ""
    elif fmt == "json":
        row = json.loads(target.read_text())
        assert row == {
            "l": [1, 2],
            "s": {"a": 1, "b": [1.5]},
            "m": {"k": 1},
            "i": "1 year 2 months 3 days 04:05:06.5",
            "n": None,
        }
    elif fmt == "parquet":  # DuckDB's Parquet writer: an INTERVAL is Parquet's INTERVAL
        table = pq.read_table(target)
        assert table.column("l").to_pylist() == [[1, 2]]
        import duckdb

        [(interval,)] = duckdb.sql(f"SELECT i FROM '{target}'").fetchall()
        [(expected,)] = duckdb.sql("SELECT INTERVAL '1 year 2 months 3 days 04:05:06.5'").fetchall()
        assert interval == expected


def test_a_piped_shell_script_stops_at_its_first_error(dbpath: Path) -> None:
    script = "CREATE TABLE a (x INTEGER);\nSELECT * FROM nope;\nCREATE TABLE b (x INTEGER);\n"
    run = subprocess.run(
        [sys.executable, "-m", "tesseradb.cli", "shell", str(dbpath)],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    assert "unknown table 'nope'" in run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    with tesseradb.connect(dbpath, read_only=True) as db:
        assert "a" in db.tables() and "b" not in db.tables()  # the rest never ran


CTRL_C_SCRIPT = """
import io, signal, sys, threading, time
from rich.console import Console
import tesseradb
from tesseradb.cli.shell import Shell

lines = iter([
    "CREATE TABLE slow AS SELECT count(*) AS n FROM range(100000000000) a, range(9) b;",
    "SELECT 7 AS after;",
])

def read_line(_prompt):
    try:
        return next(lines)
    except StopIteration:
        raise EOFError from None

# As a terminal starts a shell: a test run launched in the background (a non-interactive
# shell's `cmd &`) hands its children SIGINT ignored, and Python keeps it so
signal.signal(signal.SIGINT, signal.default_int_handler)
main = threading.main_thread().ident
out = io.StringIO()
with tesseradb.connect(sys.argv[1]) as db:

    def ctrl_c_while_it_runs():
        # (once DuckDB runs the statement: a timer raced a slow start on a busy machine)
        while not db._engine._running:
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGINT)

    if sys.argv[2] == "running":
        threading.Thread(target=ctrl_c_while_it_runs, daemon=True).start()
    else:  # Ctrl-C while the shell starts the statement's thread
        real_start = threading.Thread.start

        def slow_start(self):
            if self.name == "tessera-shell-statement":
                signal.pthread_kill(main, signal.SIGINT)
                time.sleep(0.2)  # the handler runs here, inside Thread.start
            real_start(self)

        threading.Thread.start = slow_start
    shell = Shell(db, Console(file=out, width=100), read_line)
    shell.interactive = True  # as at a terminal: go on after an error
    shell.run()
    print("tables:", db.tables())
print(out.getvalue())
"""


@pytest.mark.parametrize("when", ["running", "starting"])
def test_ctrl_c_in_the_shell_cancels_the_statement_and_returns_to_the_prompt(
    dbpath: Path, when: str
) -> None:
    # in a process of its own, as a shell runs: a SIGINT delivered to a test
    # process that has loaded every peer library (TileDB, GraphBLAS, ...)
    # may reach a C library's own handler instead of Python's
    run = subprocess.run(
        [sys.executable, "-c", CTRL_C_SCRIPT, str(dbpath), when],
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = f"stdout: {run.stdout[-1500:]}\nstderr: {run.stderr[-1500:]}"
    assert run.returncode == 0, said
    tables, _, text = run.stdout.partition("\n")
    assert "slow" not in tables, said  # nothing of it kept
    assert "interrupted" in text and "7" in text.split("interrupted", 1)[1], said


def test_the_cli_never_prints_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a database")
    for argv in (
        ["sql", str(tmp_path / "file"), "SELECT 1", "--create"],
        ["info", str(tmp_path / "nowhere")],
        ["sql", str(tmp_path / "file")],
        ["nosuchcommand"],
        ["attach", str(tmp_path / "nowhere"), "x.h5", "--create"],
    ):
        run = subprocess.run(
            [sys.executable, "-m", "tesseradb.cli", *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode != 0, argv
        assert "Traceback" not in run.stderr + run.stdout, (argv, run.stderr)


def test_bench_refuses_ssdb_options_for_other_benchmarks() -> None:
    out = runner.invoke(app, ["bench", "pushdown", "--params", "hard"])
    assert out.exit_code != 0
    assert "belong to `tessera bench ssdb`" in out.output
    assert "Traceback" not in out.output
    out = runner.invoke(app, ["bench", "ssdb", "--config", "test", "--scale", "tiny"])
    assert out.exit_code != 0 and "disagree" in out.output


EXACT = (
    "SELECT 340282366920938463463374607431768211455::UHUGEINT AS u, '0101'::BIT AS b, "
    "'14:44:56+05:30'::TIMETZ AS tz, TIME '24:00:00' AS t, 'infinity'::DATE AS d"
)


@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
def test_every_format_writes_values_as_duckdb_writes_them(dbpath: Path, fmt: str) -> None:
    """Issue 41: the CLI's formats are DuckDB's own (to_json, COPY ... TO, its text form)."""
    import duckdb

    out = runner.invoke(app, ["sql", str(dbpath), EXACT, "-f", fmt])
    assert out.exit_code == 0, out.output
    if fmt == "json":
        [expected] = duckdb.sql(f"SELECT to_json(x)::VARCHAR FROM ({EXACT}) x").fetchall()
        assert json.loads(out.output) == json.loads(expected[0])
        assert json.loads(out.output)["u"] == 2**128 - 1
    elif fmt == "csv":
        assert out.output.splitlines()[1].split(",") == [
            "340282366920938463463374607431768211455",
            "0101",
            "14:44:56+05:30",
            "24:00:00",
            "infinity",
        ]
    else:  # (a narrow terminal may wrap the long number: the others are whole)
        for text in ("0101", "24:00:00", "infinity"):
            assert text in out.output
