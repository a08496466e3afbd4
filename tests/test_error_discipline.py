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
from tests.tallies import tally

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
    "stream": {
        "scan",
        "estimate",
        "describe_scan",
        "session",
        "aggregate",
        "top",
        "count",
        "close",
    },
    "collection": {
        "transaction",
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

COUNTS = tally("error discipline")


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


# --- the value domain: values a write path cannot keep exactly (issue 40) ----------------
VALUE_DOMAIN: dict[str, list[Any]] = {
    # an int64 attribute/field/column: past its range, signedness, fractions, NaN, inf
    "int64": [np.uint64(2**63), 2**63, -(2**63) - 1, 1.5, math.nan, math.inf, np.float64(2.0**63)],
    # an unsigned one: -1 in every form
    "uint64": [-1, np.int64(-1), np.array([-1], dtype=np.int64), -0.5, math.nan, 2**64],
    "int8": [128, -129, np.int16(300), np.uint8(200), 0.25],
    "float32": [1e39, -1e300],
}
TEXT_DOMAIN = ["a\x00b", "x\ud800y"]


def _attempts(db: tesseradb.Database) -> Iterator[tuple[str, Any]]:
    """(data model, a call writing one value it cannot keep)."""
    array = db.array("vd")
    stream = db.stream("vs")
    table = db.assoc_table("va")
    for kind, values in VALUE_DOMAIN.items():
        for value in values:
            cells = value if isinstance(value, np.ndarray) else np.asarray([value])
            yield "array", lambda v=cells, k=kind: array.__setitem__(slice(0, 1), {f"a_{k}": v})
            yield "array", lambda v=cells, k=kind: array.put_triples([[0]], {f"a_{k}": v})
            plain = value.item() if isinstance(value, np.generic) else value
            if isinstance(plain, np.ndarray):
                plain = plain.tolist()[0]
            arrow = (
                pa.float64()
                if isinstance(plain, float)
                else (pa.uint64() if plain > 2**63 - 1 else pa.int64())
            )
            try:
                column = pa.array([plain], arrow)
            except (pa.ArrowInvalid, OverflowError):
                continue
            yield "stream", lambda c=column, k=kind: _stream_row(stream, f"f_{k}", c)
            # (SQL rounds a fraction into an integer column, as DuckDB does: not a refusal)
            fraction = isinstance(plain, float) and math.isfinite(plain) and not plain.is_integer()
            if kind in ("int64", "uint64", "int8") and not fraction:
                sql_type = {"int64": "BIGINT", "uint64": "UBIGINT", "int8": "TINYINT"}[kind]
                yield (
                    "table",
                    lambda p=plain, t=sql_type: db.sql(f"INSERT INTO vt (c_{t}) VALUES (?)", [p]),
                )
    for text in TEXT_DOMAIN:
        if "\x00" in text:  # (Arrow cannot hold a surrogate: no table carries one)
            yield "stream", lambda t=text: _stream_row(stream, "label", pa.array([t]))
        if "\x00" not in text:  # (NUL is JSON text; a surrogate is not Unicode)
            yield "collection", lambda t=text: db.collection("c").insert({"name": t})
            yield "assoc", lambda t=text: table.put_text(["r,"], [t])
    for value in [2**53 + 1, np.uint64(2**64 - 1), math.nan]:
        yield "assoc", lambda v=value: table.put_triples("r,", "c,", [v])
    for value in [2**64, -(2**63) - 1, math.nan, math.inf]:
        yield "collection", lambda v=value: db.collection("c").insert({"n": v})


def _stream_row(stream: Any, name: str, column: pa.Array) -> None:
    fields = {f.name: f for f in stream.descriptor.fields}
    row = {n: pa.array([0], pa.int64()) if n != "label" else pa.array(["x"]) for n in fields}
    row[name] = column
    stream.ingest(pa.table(row))


def _value_domain_database(path: Path) -> tesseradb.Database:
    db = tesseradb.connect(path)
    attrs = {f"a_{k}": k for k in VALUE_DOMAIN}
    db.create_array("vd", [{"name": "x", "end": 4, "chunk": 4}], attrs)
    fields = [{"name": f"f_{k}", "type": {"float32": "float"}.get(k, k)} for k in VALUE_DOMAIN]
    fields.append({"name": "label", "type": "char", "array_len": 8})
    db.create_stream("vs", {"fields": fields, "index": ["f_int64"]})
    db.create_assoc_table("va", text=True)
    db.create_collection("c")
    db.sql("CREATE TABLE vt (c_BIGINT BIGINT, c_UBIGINT UBIGINT, c_TINYINT TINYINT)")
    return db


def test_values_a_write_path_cannot_keep_are_refused_and_change_nothing(tmp_path: Path) -> None:
    db = _value_domain_database(tmp_path / "db")

    def snapshot() -> tuple[Any, ...]:
        return (
            db.array("vd").version,
            db.sql("SELECT count(*) FROM vs").fetchall(),
            db.sql("SELECT count(*) FROM vt").fetchall(),
            db.collection("c").count(),
            db.assoc_table("va").runs,
        )

    before = snapshot()
    raw, accepted = [], []
    for kind, attempt in _attempts(db):
        COUNTS[f"value domain: {kind} inputs"] += 1
        try:
            attempt()
        except TesseraError:
            COUNTS[f"value domain: {kind} refused"] += 1
            assert snapshot() == before, f"a refused {kind} write changed the database"
            continue
        except Exception as err:
            raw.append(f"{kind}: {type(err).__name__}: {err}")
            continue
        accepted.append(kind)
        before = snapshot()
    db.close()
    assert not raw, "\n".join(raw)
    assert not accepted, f"values no write path can keep were accepted by: {accepted}"


SMALL_ONES = {
    "load of an unknown format": lambda db, tmp: db.load(str(tmp / "x.xls"), format="xls"),
    "JSON nested 5,000 deep": lambda db, tmp: db.load(str(tmp / "deep.json"), into="deep"),
    "a compression level out of range": lambda db, tmp: db.create_array(
        "lv", [{"name": "x", "end": 4}], {"v": "int8"}, level=99
    ),
    "a lone surrogate in put_text": lambda db, tmp: db.assoc_table("tx").put_text(
        ["a,"], ["x\ud800y"]
    ),
    "a stream field named by a reserved word": lambda db, tmp: db.create_stream(
        "sf", {"fields": [{"name": "select", "type": "double"}], "index": ["select"]}
    ),
}


@pytest.mark.parametrize("case", sorted(SMALL_ONES))
def test_small_ones_of_issue_40_are_clear_errors(case: str, tmp_path: Path) -> None:
    (tmp_path / "x.xls").write_text("a,b\n1,2\n")
    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000)
    with tesseradb.connect(tmp_path / "db") as db:
        db.create_assoc_table("tx", text=True)
        before = sorted(o.name for o in db.info().objects)
        with pytest.raises(TesseraError):
            SMALL_ONES[case](db, tmp_path)
        assert sorted(o.name for o in db.info().objects) == before


def test_an_absent_key_of_degrees_is_an_empty_answer(tmp_path: Path) -> None:
    with tesseradb.connect(tmp_path / "db") as db:
        table = db.create_assoc_table("t")
        table.put_triples("a,", "b,", [1.0])
        assert table.deg["nope,", :].nnz == 0
        assert table.deg[:, :].nnz == 1


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "{db}", "--port", "99999"],
        ["sql", "{db}", "SELECT 1", "-f", "csv", "-o", "{missing}/dir/x.csv"],
        ["example-data", "{file}"],
    ],
    ids=["port", "output", "example-data"],
)
def test_more_bad_cli_input_gives_a_message(args: list[str], tmp_path: Path) -> None:
    build(tmp_path / "db", tmp_path).close()
    (tmp_path / "plain.txt").write_text("x")
    given = [
        a.format(db=tmp_path / "db", missing=tmp_path / "missing", file=tmp_path / "plain.txt")
        for a in args
    ]
    result = CliRunner().invoke(app, given)
    assert result.exit_code not in (0, 70), result.output
    assert "Traceback" not in result.output
