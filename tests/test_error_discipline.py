"""Error discipline: bad arguments anywhere in the public API give a TesseraError and change nothing.

The walker calls every public method of the database and of each data
model's object with bad values of every kind (None, wrong types, negative and
huge numbers, NaN, empty and malformed text, bytes that are not UTF-8) in
every argument, and asserts that what leaves is a ``TesseraError`` (or the
call succeeds: ``None`` is often a default) and that a refused call left the
database exactly as it was. A new public method is walked automatically; the
engine-facing ones are listed in ENGINE_FACING (the SQL engine calls them
with values it made, never a user).
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import tesseradb
from tesseradb.cli.app import app
from tesseradb.errors import TesseraError

BAD: list[Any] = [
    None,
    -1,
    10**30,
    -(10**30),
    1.5,
    math.nan,
    math.inf,
    "",
    "no_such",
    "bad name!",
    "x\ud800y",  # a lone surrogate: not Unicode text
    b"\xff\xfe",
    [],
    {},
    (1, 2, 3),
    object(),
]

# Methods the SQL engine calls with values it made (the relation and namespace
# protocols), and lifecycle methods without arguments worth walking.
ENGINE_FACING = {
    "db": {"relation", "close", "interrupt"},
    "array": {"aggregate_rows", "scan", "estimate", "describe_scan", "session", "count"},
    "stream": {"scan", "estimate", "describe_scan", "session", "aggregate", "count", "close"},
    "collection": {
        "run",
        "delete",
        "update",
        "transaction",
        "refresh",
        "upgrade",
        "create",
        "drop",
        "compact",
        "key",
    },
    "attachment": {"reader", "rows", "hold", "close", "candidates", "index", "index_path"},
}
# Arguments to try before the bad one, so that the walk reaches past a first name
FRESH = {
    ("db", "create_array"): ("fresh",),
    ("db", "create_stream"): ("fresh",),
    ("db", "create_collection"): ("fresh",),
    ("db", "create_index"): ("h.t",),
    ("db", "register"): ("fresh",),
    ("db", "overlay"): (["a"],),
    ("array", "write"): ((0,),),
}

COUNTS: Counter[str] = Counter()


def build(path: Path, tmp: Path) -> tesseradb.Database:
    db = tesseradb.connect(path)
    db.sql("CREATE TABLE t (a INTEGER)")
    db.sql("INSERT INTO t VALUES (1)")
    a = db.create_array("a", [{"name": "x", "end": 100, "chunk": 10}], {"v": "float64"})
    a[0:100] = {"v": np.arange(100.0)}
    s = db.create_stream("s", {"fields": [{"name": "x", "type": "double"}], "index": ["x"]})
    s.ingest(pa.table({"x": [1.0]}))
    s.flush()
    db.create_collection("c").insert({"n": 1})
    with h5py.File(tmp / "f.h5", "w") as f:
        f["t/x"] = np.arange(10)
    db.attach(tmp / "f.h5", name="h")
    return db


def state(db: tesseradb.Database) -> tuple[Any, ...]:
    """What a refused call must leave as it was."""
    objects = sorted((o.name, o.kind, o.rows) for o in db.info().objects)
    return (
        objects,
        db.sql("SELECT * FROM t ORDER BY a").fetchall(),
        db.array("a").version,
        db.sql("SELECT count(*), sum(x) FROM s").fetchall(),
        db.collection("c").find(),
        sorted(p.name for p in (db.path / "attached").rglob("*")),
    )


def calls(label: str, obj: Any) -> Iterator[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """(method name, args, kwargs) with a bad value in each argument of each public method."""
    for name, member in inspect.getmembers(type(obj)):
        public = not name.startswith("_") or name in ("__getitem__", "__setitem__")
        if not public or name in ENGINE_FACING[label] or not callable(member):
            continue
        try:
            parameters = list(inspect.signature(member).parameters.values())[1:]
        except (TypeError, ValueError):
            continue
        positional = [p for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
        required = [p for p in positional if p.default is p.empty]
        optional = [
            p for p in parameters if p.default is not p.empty and p.kind is not p.VAR_KEYWORD
        ]
        fresh = FRESH.get((label, name), ())
        for value in BAD:
            if required:
                yield name, (value,) * len(required), {}
                if fresh and len(required) > len(fresh):
                    yield name, (*fresh, *(value,) * (len(required) - len(fresh))), {}
            # the other arguments name nothing, so an accepted call cannot drop or change data
            filler = fresh + ("nothing_here",) * (len(required) - len(fresh))
            for parameter in optional:
                yield name, filler, {parameter.name: value}


def test_bad_arguments_give_tessera_errors_and_change_nothing(tmp_path: Path) -> None:
    db = build(tmp_path / "db", tmp_path)
    objects = {
        "db": db,
        "array": db.array("a"),
        "stream": db.stream("s"),
        "collection": db.collection("c"),
        "attachment": db.attached("h"),
    }
    before = state(db)
    raw: list[str] = []
    for label, obj in objects.items():
        for name, args, kwargs in calls(label, obj):
            COUNTS[f"{label} calls"] += 1
            try:
                result = getattr(obj, name)(*args, **kwargs)
                if isinstance(result, Iterator):  # a lazy answer: its first items do the work
                    list(itertools.islice(result, 3))
            except TesseraError as err:
                assert str(err), f"{label}.{name}: an error without a message"
                COUNTS[f"{label} refused"] += 1
                now = state(db)
                assert now == before, (
                    f"{label}.{name}{args!r:.80} {kwargs!r:.80} changed the database"
                )
                continue
            except Exception as err:
                raw.append(
                    f"{label}.{name}{args!r:.60} {kwargs!r:.60}: {type(err).__name__}: {err}"
                )
                continue
            before = state(db)  # accepted (None is often a default): the new state is the norm
    db.close()
    assert not raw, f"{len(raw)} raw errors:\n" + "\n".join(raw[:40])


CLI_CASES = [
    ["sql", "{missing}", "SELECT 1"],
    ["sql", "{db}", "SELEC 1"],
    ["sql", "{db}", "SELECT * FROM nope"],
    ["sql", "{db}", "SELECT 1", "-f", "nope"],
    ["sql", "{db}", "SELECT ?, ?", "-p", "x"],
    ["argo", "{db}", "SELECT * FROM"],
    ["argo", "{db}", "SELECT * FROM nope"],
    ["info", "{missing}"],
    ["info", "{file}"],
    ["attach", "{db}", "{missing}/x.h5"],
    ["attach", "{db}", "{file}"],
    ["detach", "{db}", "nope"],
    ["index", "{db}", "nope.t", "x"],
    ["index", "{db}", "h.t", "x", "--count", "-5"],
    ["check", "{missing}"],
    ["init", "{file}"],
    ["bench", "nope"],
]


@pytest.mark.parametrize("case", CLI_CASES, ids=lambda c: " ".join(c[:2]))
def test_bad_cli_input_gives_a_message_never_a_traceback(case: list[str], tmp_path: Path) -> None:
    db = tmp_path / "db"
    build(db, tmp_path).close()
    file = tmp_path / "plain.txt"
    file.write_text("not a database")
    args = [a.format(db=db, missing=tmp_path / "missing", file=file) for a in case]
    result = CliRunner().invoke(app, args)
    COUNTS["cli calls"] += 1
    assert result.exit_code not in (0, 70), result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    COUNTS["cli refused"] += 1


def test_report_error_discipline_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints how many bad calls were tried and refused (run after the walk: pytest -s)."""
    with capsys.disabled():
        for key, count in sorted(COUNTS.items()):
            print(f"error discipline: {key}: {count}")


LIMITS = {
    "char field too wide": (
        "stream",
        {
            "fields": [
                {"name": "a", "type": "char", "array_len": 10**12},
                {"name": "x", "type": "double"},
            ],
            "index": ["x"],
        },
    ),
    "too many fields": (
        "stream",
        {"fields": [{"name": f"f{i}", "type": "double"} for i in range(2000)], "index": ["f0"]},
    ),
    "field name too long": (
        "stream",
        {"fields": [{"name": "a" * 200, "type": "double"}], "index": ["a" * 200]},
    ),
    "too many dimensions": (
        "array",
        ([{"name": f"d{i}", "end": 2, "chunk": 1} for i in range(40)], {"v": "float64"}),
    ),
    "too many attributes": (
        "array",
        ([{"name": "x", "end": 2}], {f"v{i}": "float64" for i in range(2000)}),
    ),
    "coordinates past 2**62": ("array", ([{"name": "x", "end": 10**30}], {"v": "float64"})),
    "chunk too big": ("array", ([{"name": "x", "end": 10**15, "chunk": 10**15}], {"v": "float64"})),
}


@pytest.mark.parametrize("case", sorted(LIMITS))
def test_limits_are_enforced_at_the_door(case: str, tmp_path: Path) -> None:
    kind, spec = LIMITS[case]
    with tesseradb.connect(tmp_path / "db") as db:
        with pytest.raises(tesseradb.errors.LimitExceededError):
            if kind == "stream":
                db.create_stream("s", spec)
            else:
                db.create_array("a", *spec)
        assert db.info().objects == []  # nothing was made


DEEP = {
    "Argo/SQL predicate": lambda db: db.argo(
        "SELECT * FROM c WHERE " + "(" * 5000 + "n = 1" + ")" * 5000
    ),
    "Argo/SQL NOTs": lambda db: db.argo("SELECT * FROM c WHERE " + "NOT " * 5000 + "n = 1"),
    "Argo/SQL object": lambda db: db.argo(
        "INSERT INTO c OBJECT " + '{"a":' * 5000 + "1" + "}" * 5000
    ),
    "JSON descriptor": lambda db: db.create_stream(
        "d", '{"fields": ' + "[" * 100000 + "]" * 100000 + "}"
    ),
    "JSON text document": lambda db: db.collection("c").insert(
        '{"a": ' + "[" * 100000 + "]" * 100000 + "}"
    ),
    "SQL expression": lambda db: db.sql("SELECT " + "(" * 5000 + "1" + ")" * 5000),
}


@pytest.mark.parametrize("case", sorted(DEEP))
def test_deep_inputs_are_refused_at_the_door(case: str, tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        db.create_collection("c").insert({"n": 1})
        with pytest.raises(TesseraError, match=r"deep|depth"):
            DEEP[case](db)
        assert db.collection("c").find() == [{"n": 1}] and db.streams() == []
