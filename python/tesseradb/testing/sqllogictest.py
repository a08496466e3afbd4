"""Running sqllogictest files (DuckDB's own test suite) through TesseraDB and DuckDB.

Each file runs record by record, twice: through ``db.sql`` on a fresh TesseraDB database
and through a plain DuckDB connection laid out as TesseraDB lays out its table store
(an in-memory instance with a database file attached as ``tessera_store`` and in use),
so that what differs is what TesseraDB's layer changes. The expected results written in
the files are not read: the answer to compare with is DuckDB's, in the same run, on the
same machine. Per record, the two outcomes (answered or refused) must agree, and an
answer's rows must be the same Python values (in the order the record's sort mode asks).
Connection labels (``statement ok con1``) are sessions of their own on both sides
(:meth:`Database.session`, DuckDB's ``cursor()``); ``restart`` closes and reopens both.

Records are skipped (and counted) where the runner cannot reproduce what the file
needs: extensions DuckDB cannot load here, ``load`` of other database files, concurrent
loops, environment requirements.

``scripts/sqllogictest DIR...`` prints the differences by class.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Difference", "Record", "Report", "parse", "run_file", "run_paths"]


@dataclass
class Record:
    """One statement or query of a file."""

    kind: str  # "statement" or "query"
    expect: str  # ok, error, maybe (statements); the sort mode (queries)
    sql: str
    connection: str | None
    line: int


@dataclass
class Difference:
    file: str
    line: int
    sql: str
    kind: str  # the class: refused, accepted, rows, ...
    ours: str
    duckdb: str


@dataclass
class Report:
    files: int = 0
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    differences: list[Difference] = field(default_factory=list)
    # records whose rows are not compared, only whether they ran: EXPLAIN text (plans and
    # timings), values of the moment (random, now), and queries over such values
    outcomes_only: Counter[str] = field(default_factory=Counter)

    def by_class(self) -> Counter[str]:
        return Counter(d.kind for d in self.differences)

    def summary(self, examples: int = 3) -> str:
        lines = [
            f"{self.files} files, {self.records} records compared, "
            f"{len(self.differences)} differences"
        ]
        if self.outcomes_only:
            lines.append(
                "outcomes only (rows not compared): "
                + ", ".join(f"{k} {v}" for k, v in self.outcomes_only.most_common())
            )
        for kind, count in self.by_class().most_common():
            lines.append(f"  {kind}: {count}")
            shown = [d for d in self.differences if d.kind == kind][:examples]
            for d in shown:
                lines.append(f"    {d.file}:{d.line}: {_one_line(d.sql)[:120]}")
                lines.append(f"      ours:   {_one_line(d.ours)[:160]}")
                lines.append(f"      duckdb: {_one_line(d.duckdb)[:160]}")
        if self.skipped:
            lines.append("skipped: " + ", ".join(f"{k} {v}" for k, v in self.skipped.items()))
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "records": self.records,
            "skipped": dict(self.skipped),
            "outcomes_only": dict(self.outcomes_only),
            "by_class": dict(self.by_class()),
            "differences": [d.__dict__ for d in self.differences],
        }


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- parsing ---------------------------------------------------------------------------
_SKIP_FILE = ("load", "require-env", "concurrentloop", "concurrentforeach", "unzip", "cache")


def parse(text: str) -> tuple[list[Any], str | None]:
    """The records and control lines of a file, or (nothing, why the file is skipped)."""
    lines = text.splitlines()
    out: list[Any] = []
    i = 0
    skip_next = False
    while i < len(lines):
        line = lines[i].rstrip()
        words = line.split()
        if not words or line.startswith("#"):
            i += 1
            continue
        head = words[0]
        if head in _SKIP_FILE:
            return [], head
        if head in ("statement", "query"):
            start = i + 1
            i += 1
            body: list[str] = []
            while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
                body.append(lines[i])
                i += 1
            if i < len(lines) and lines[i].strip() == "----":  # expected results: not read
                i += 1
                while i < len(lines) and lines[i].strip():
                    i += 1
            if head == "statement":
                expect = words[1] if len(words) > 1 else "ok"
                connection = words[2] if len(words) > 2 else None
            else:
                rest = words[2:]
                expect = next((w for w in rest if w.endswith("sort")), "nosort")
                labels = [w for w in rest if not w.endswith("sort")]
                connection = labels[-1] if labels and labels[-1].startswith("con") else None
            if skip_next:
                skip_next = False
                continue
            out.append(Record(head, expect, "\n".join(body), connection, start))
            continue
        if head in ("onlyif", "skipif"):
            target = words[1] if len(words) > 1 else ""
            skip_next = (head == "onlyif") != (target == "duckdb")
        elif head in (
            "loop",
            "foreach",
            "endloop",
            "restart",
            "reconnect",
            "halt",
            "mode",
            "require",
        ):
            out.append(words)
        i += 1
    return out, None


def _expand(items: list[Any]) -> Iterator[Any]:
    """Records with loops unrolled (``${name}`` replaced)."""

    def body_of(start: int) -> tuple[list[Any], int]:
        depth, j = 0, start
        while j < len(items):
            item = items[j]
            if isinstance(item, list) and item[0] in ("loop", "foreach"):
                depth += 1
            elif isinstance(item, list) and item[0] == "endloop":
                if depth == 0:
                    return items[start:j], j + 1
                depth -= 1
            j += 1
        return items[start:], len(items)

    i = 0
    while i < len(items):
        item = items[i]
        if isinstance(item, list) and item[0] in ("loop", "foreach"):
            body, i = body_of(i + 1)
            name = item[1]
            if item[0] == "loop":
                values = [str(v) for v in range(int(item[2]), int(item[3]))]
            else:
                values = item[2:]
            for value in values:
                for inner in _expand(body):
                    if isinstance(inner, Record):
                        inner = Record(
                            inner.kind,
                            inner.expect,
                            inner.sql.replace("${" + name + "}", value),
                            inner.connection,
                            inner.line,
                        )
                    yield inner
            continue
        yield item
        i += 1


# --- running -------------------------------------------------------------------------------
class _Sides:
    """TesseraDB and the reference DuckDB for one file, with their sessions by label."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._open()

    def _open(self) -> None:
        import duckdb

        import tesseradb

        self.db = tesseradb.connect(self.folder / "db.tdb")
        self.reference = duckdb.connect(":memory:")
        self.reference.execute("SET python_enable_replacements = false")
        path = str(self.folder / "reference.duckdb").replace("'", "''")
        self.reference.execute(f"ATTACH '{path}' AS tessera_store")
        self.reference.execute("USE tessera_store")
        self.ours: dict[str, Any] = {}
        self.theirs: dict[str, Any] = {}

    def close(self) -> None:
        for session in self.ours.values():
            with contextlib.suppress(Exception):
                session.close()
        for cursor in self.theirs.values():
            with contextlib.suppress(Exception):
                cursor.close()
        with contextlib.suppress(Exception):
            self.db.close()
        with contextlib.suppress(Exception):
            self.reference.close()

    def restart(self) -> None:
        self.close()
        self._open()

    def pair(self, label: str | None) -> tuple[Any, Any]:
        if label is None:
            return self.db, self.reference
        if label not in self.ours:
            self.ours[label] = self.db.session()
            cursor = self.reference.cursor()
            cursor.execute("USE tessera_store")
            self.theirs[label] = cursor
        return self.ours[label], self.theirs[label]


def _sorted(rows: list[tuple[Any, ...]], mode: str) -> list[Any]:
    if mode == "rowsort":
        return sorted(rows, key=repr)
    if mode == "valuesort":
        return sorted((v for row in rows for v in row), key=repr)
    return rows


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


class _Timeout:
    """Interrupts both sides' statement after ``seconds``."""

    def __init__(self, seconds: float, *targets: Any) -> None:
        self.timer = threading.Timer(seconds, self._fire, targets)
        self.fired = False

    def _fire(self, *targets: Any) -> None:
        self.fired = True
        for target in targets:
            with contextlib.suppress(Exception):
                target.interrupt()

    def __enter__(self) -> _Timeout:
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()


def _run_reference(cursor: Any, sql: str) -> tuple[str, Any]:
    import duckdb

    try:
        relation = cursor.sql(sql)
        return "ok", None if relation is None else relation.fetchall()
    except duckdb.Error as err:
        return "error", f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    except (OverflowError, ValueError) as err:  # DuckDB's own Python conversion of a value
        return "error", f"{type(err).__name__} in DuckDB's Python conversion: {err}"


def _run_ours(session: Any, sql: str) -> tuple[str, Any]:
    from tesseradb.errors import TesseraError

    try:
        result = session.sql(sql)
        return "ok", result.fetchall() if result.columns else None
    except TesseraError as err:
        return "error", f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    except Exception as err:  # a raw error leaving the API is a defect of its own
        return "raw", f"{type(err).__name__}: {err}"


def _classify(record: Record, ours: tuple[str, Any], theirs: tuple[str, Any]) -> str | None:
    (o_kind, o_value), (t_kind, t_value) = ours, theirs
    if o_kind == "raw":
        return "raw error (not a TesseraError)"
    if o_kind != t_kind:
        return "we refuse, DuckDB answers" if o_kind == "error" else "we answer, DuckDB refuses"
    if o_kind == "error":
        return None
    if o_value is None or t_value is None:
        return None if (o_value is None) == (t_value is None) else "result shape"
    a, b = _sorted(o_value, record.expect), _sorted(t_value, record.expect)
    if len(a) != len(b):
        return "different rows"
    if all(_same(x, y) for x, y in zip(a, b, strict=True)):
        return None
    if all(repr(x) == repr(y) or x == y for x, y in zip(a, b, strict=True)):
        return "different value types"
    if not _ORDERED.search(record.sql) and all(
        _same(x, y) for x, y in zip(sorted(a, key=repr), sorted(b, key=repr), strict=True)
    ):
        # no ORDER BY: DuckDB's own order is not fixed (a hash UNION, a parallel scan)
        return "same rows in another order (no ORDER BY)"
    return "different rows"


# (what "twice" repeats: a query that only reads; a query record may also be a write
# that returns rows, such as EXECUTE or INSERT ... RETURNING, or WITH ... DELETE)
_READS = re.compile(
    r"\s*\(*\s*(SELECT|WITH|FROM|VALUES|TABLE)\b"
    r"(?!.*\b(INSERT|UPDATE|DELETE|MERGE|COPY|CREATE|DROP|ALTER)\b)",
    re.IGNORECASE | re.DOTALL,
)

_ORDERED = re.compile(r"\bORDER\s+BY\b", re.IGNORECASE)


_VOLATILE = re.compile(
    r"\b(random|uuid|gen_random_uuid|now|current_timestamp|get_current_time|"
    r"current_time|today|current_date|txid_current|nextval|currval|"
    r"duckdb_memory|pragma_database_size|database_size|current_query|version|"
    r"pragma_version|duckdb_temporary_files|duckdb_settings|current_setting|"
    r"query_progress|reservoir_quantile|reservoir_sample|setseed|using\s+sample|tablesample)\b",
    re.IGNORECASE,
)


def run_file(path: Path, report: Report, timeout: float = 10.0, twice: bool = False) -> None:
    """Run one file through both sides, adding to ``report``. ``twice``: every query runs
    twice on our side, and both runs are compared (the second takes the paths the
    engine remembers from the first: small results, parsed and prepared statements)."""
    import duckdb

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        report.skipped["unreadable file"] += 1
        return
    items, why = parse(text)
    if why is not None:
        report.skipped[f"file needs {why}"] += 1
        return
    report.files += 1
    folder = Path(tempfile.mkdtemp(prefix="tessera-slt-"))
    sides = _Sides(folder)
    skipping = False
    drawn = False  # a statement stored values of the moment (random, uuid): rows differ
    try:
        for item in _expand(items):
            if isinstance(item, list):
                head = item[0]
                if head == "halt":
                    break
                if head == "mode":
                    if len(item) > 1 and item[1] == "skip":
                        skipping = True
                    elif len(item) > 1 and item[1] == "unskip":
                        skipping = False
                elif head in ("restart", "reconnect"):
                    sides.restart()
                elif head == "require":
                    try:
                        sides.reference.execute(f"LOAD {item[1]}")
                    except duckdb.Error:
                        report.skipped[f"file requires {item[1]}"] += 1
                        return
                continue
            if skipping:
                report.skipped["mode skip"] += 1
                continue
            ours_session, reference = sides.pair(item.connection)
            with _Timeout(timeout, sides.db, reference) as t:
                began = time.monotonic()
                theirs = _run_reference(reference, item.sql)
                ours = _run_ours(ours_session, item.sql)
                again = (
                    _run_ours(ours_session, item.sql)
                    if twice and _READS.match(item.sql) and not _VOLATILE.search(item.sql)
                    else None
                )
            report.records += 1
            if t.fired:
                report.differences.append(
                    Difference(
                        str(path),
                        item.line,
                        item.sql,
                        "timeout",
                        "",
                        f"{time.monotonic() - began:.0f} s",
                    )
                )
                continue
            why = None
            if item.sql.lstrip().upper().startswith("EXPLAIN"):
                why = "EXPLAIN text"
            elif _VOLATILE.search(item.sql):
                why = "values of the moment"
                if item.kind == "statement" and ours[0] == theirs[0] == "ok":
                    drawn = True  # (what it stored differs between the sides from now on)
            elif drawn:
                why = "rows over values of the moment"
            if why is not None:
                report.outcomes_only[why] += 1
                ours = (ours[0], None if ours[0] == "ok" else ours[1])
                theirs = (theirs[0], None if theirs[0] == "ok" else theirs[1])
            kind = _classify(item, ours, theirs)
            if kind is None and again is not None and why is None:
                second = _classify(item, again, theirs)
                if second is not None:
                    kind, ours = f"second run: {second}", again
            if kind is not None:
                report.differences.append(
                    Difference(
                        str(path),
                        item.line,
                        item.sql,
                        kind,
                        repr(ours[1])[:500],
                        repr(theirs[1])[:500],
                    )
                )
    finally:
        sides.close()
        shutil.rmtree(folder, ignore_errors=True)


def run_paths(
    paths: list[Path],
    timeout: float = 10.0,
    progress: bool = False,
    jobs: int = 2,
    twice: bool = False,
) -> Report:
    """Every ``*.test`` file under ``paths`` (files or directories), in name order, each
    in a process of its own (``jobs`` at a time), so that a crash is one file's finding.
    ``twice``: see :func:`run_file`."""
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob("*.test")) if path.is_dir() else [path])
    report = Report()
    lock = threading.Lock()
    done = 0

    def one(file: Path) -> None:
        nonlocal done
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            command = [sys.executable, "-m", "tesseradb.testing.sqllogictest", "--one"]
            command += [str(file), "--json", out.name, "--timeout", str(timeout)]
            command += ["--twice"] if twice else []
            try:
                run = subprocess.run(command, capture_output=True, text=True, timeout=1800)
                part = (
                    json.loads(Path(out.name).read_text() or "{}")
                    if run.returncode in (0, 1)
                    else None
                )
                if part is not None and "files" not in part:
                    part = None  # (it ended without a report: an error of the runner's own)
                why = f"exit status {run.returncode}: {run.stderr.strip().splitlines()[-1:]}"
            except subprocess.TimeoutExpired:
                part, why = None, "the file ran for 30 minutes"
        with lock:
            done += 1
            if progress:
                print(f"[{done}/{len(files)}] {file}", flush=True)
            if part is None:
                report.files += 1
                report.differences.append(Difference(str(file), 0, "", "crash", why, ""))
                return
            report.files += part["files"]
            report.records += part["records"]
            report.skipped.update(part["skipped"])
            report.outcomes_only.update(part.get("outcomes_only", {}))
            report.differences.extend(Difference(**d) for d in part["differences"])

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(one, files))
    report.differences.sort(key=lambda d: (d.file, d.line))
    return report


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="sqllogictest",
        description="Run sqllogictest files through TesseraDB and plain DuckDB; print the differences by class.",
    )
    parser.add_argument("paths", nargs="+", type=Path, help="files or directories of *.test files")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per record")
    parser.add_argument("--json", type=Path, help="write every difference to this file")
    parser.add_argument("--examples", type=int, default=3, help="examples shown per class")
    parser.add_argument("--progress", action="store_true", help="name each file as it runs")
    parser.add_argument("--jobs", type=int, default=2, help="files run at once")
    parser.add_argument(
        "--twice",
        action="store_true",
        help="run every query twice on TesseraDB's side and compare both runs",
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # (one file, in this process: what run_paths starts per file)
        report = Report()
        run_file(args.paths[0], report, args.timeout, args.twice)
        if args.json is not None:
            args.json.write_text(json.dumps(report.as_json(), default=str))
        return 0
    report = run_paths(args.paths, args.timeout, args.progress, args.jobs, args.twice)
    print(report.summary(args.examples))
    if args.json is not None:
        args.json.write_text(json.dumps(report.as_json(), indent=1, default=str))
    return 1 if report.differences else 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
