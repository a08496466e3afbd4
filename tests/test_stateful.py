"""What each data model acknowledged is what it keeps (issue 40): hypothesis state
machines drive arrays, record streams, collections, associative tables and plain tables
with random sequences of writes (every attribute type, from every Python and numpy
input type, signed and unsigned pairs and extreme values among them), reads, flushes,
closes, calls after close, reopens (read-only too), a child writer killed with SIGKILL,
and drops, and compare the stored state with an in-memory model of what was
acknowledged after every step. A write the model says cannot be stored exactly must be
refused with a TesseraError and change nothing.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import tesseradb
from tesseradb.errors import DatabaseClosedError, ReadOnlyError, TesseraError

STEPS = int(os.environ.get("TESSERA_STATEFUL_STEPS", "10"))
EXAMPLES = int(os.environ.get("TESSERA_STATEFUL_EXAMPLES", "5"))
# a child writer costs a process start: at most this many per example (more: the env)
KILLS_PER_EXAMPLE = int(os.environ.get("TESSERA_STATEFUL_KILLS", "1"))
MACHINE_SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOATS = ["float32", "float64"]


# --- inputs of every type, and whether a target type holds them exactly -----------------
def edges(dtype: str) -> list[int]:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    return [lo, lo + 1, hi - 1, hi, 0, 1, -1, lo - 1, hi + 1]


@st.composite
def scalar_inputs(draw: st.DrawFn) -> Any:
    """A value as a user hands it over: a Python int, float or bool, or a numpy scalar of
    any type, often at (or just past) some integer type's limits."""
    kind = draw(st.sampled_from(["int", "float", "bool", "numpy"]))
    edge = st.sampled_from([e for t in INTS for e in edges(t)])
    if kind == "int":  # (within int64 or uint64: numpy holds the value itself)
        value = draw(st.one_of(edge, st.integers(-(2**63), 2**64 - 1)))
        return min(max(value, -(2**63)), 2**64 - 1)
    if kind == "float":
        return draw(
            st.one_of(
                st.sampled_from([0.5, -0.0, 1e300, float(2**63), float(2**64), 3.0, 1e-5]),
                st.floats(allow_nan=False, allow_infinity=False, width=64),
            )
        )
    if kind == "bool":
        return draw(st.booleans())
    dtype = draw(st.sampled_from(INTS + FLOATS + ["bool"]))
    if dtype in INTS:
        info = np.iinfo(dtype)
        value = draw(st.one_of(st.sampled_from(edges(dtype)), st.integers(-3, 3)))
        return np.dtype(dtype).type(min(max(value, int(info.min)), int(info.max)))
    if dtype == "bool":
        return np.bool_(draw(st.booleans()))
    return np.dtype(dtype).type(draw(st.floats(width=32 if dtype == "float32" else 64)))


def holds_exactly(target: str, value: Any) -> bool:
    """Whether a cell of ``target`` type holds ``value`` exactly (the oracle)."""
    value = value.item() if isinstance(value, np.generic) else value
    if target == "bool":
        return value in (0, 1)
    if isinstance(value, float) and math.isnan(value):
        return target in FLOATS
    if target in INTS:
        if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
            return False
        info = np.iinfo(target)
        return int(info.min) <= int(value) <= int(info.max)
    if isinstance(value, float) and math.isinf(value):
        return True
    with np.errstate(all="ignore"):
        stored = np.dtype(target).type(value)
    return bool(np.isfinite(stored)) and Fraction(float(stored)) == Fraction(value)


def stored_as(target: str, value: Any) -> Any:
    value = value.item() if isinstance(value, np.generic) else value
    return np.dtype(target).type(value).item()


# --- a child writer killed with SIGKILL -------------------------------------------------
def run_child_and_kill(code: str, acks: int) -> list[Any]:
    """Run ``code`` (it prints ``ACK <json>`` after each acknowledged write) in a child
    process, kill it with SIGKILL once ``acks`` writes were acknowledged (or it ends),
    and return what it acknowledged."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    acknowledged: list[Any] = []
    deadline = time.monotonic() + 60
    while len(acknowledged) < acks and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        if line.startswith("ACK "):
            acknowledged.append(json.loads(line[4:]))
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode in (-signal.SIGKILL, 0), child.stderr.read() if child.stderr else ""
    return acknowledged


class DatabaseMachine(RuleBasedStateMachine):
    """What every data model's machine shares: a database that is closed, reopened
    (read-only too) and used after close; subclasses hold one object and its model."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="tessera-stateful-"))
        self.path = self.folder / "db.tdb"
        self.db: tesseradb.Database | None = tesseradb.connect(self.path)
        self.read_only = False
        self.stale: list[Any] = []  # handles of databases since closed
        self.kills = 0
        self.make()

    def teardown(self) -> None:
        if self.db is not None:
            self.db.close()
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)

    # subclasses: make the object, give a handle to it, read all of it back
    def make(self) -> None:
        raise NotImplementedError

    def handle(self) -> Any:
        raise NotImplementedError

    def stored(self) -> Any:
        raise NotImplementedError

    def expected(self) -> Any:
        raise NotImplementedError

    def a_write(self, handle: Any) -> None:
        """One write through ``handle`` (to try after close)."""
        raise NotImplementedError

    @property
    def writable(self) -> bool:
        return self.db is not None and not self.read_only

    @rule()
    def close(self) -> None:
        if self.db is not None:
            self.stale.append(self.handle())
            self.db.close()
            self.db = None

    @precondition(lambda self: self.db is None)
    @rule(read_only=st.booleans())
    def reopen(self, read_only: bool) -> None:
        self.db = tesseradb.connect(self.path, read_only=read_only)
        self.read_only = read_only

    @precondition(lambda self: bool(self.stale))
    @rule()
    def use_after_close(self) -> None:
        """A handle of a closed database refuses, and nothing changes."""
        with pytest.raises(DatabaseClosedError):
            self.a_write(self.stale[-1])

    @precondition(lambda self: self.db is not None and self.read_only)
    @rule()
    def write_read_only(self) -> None:
        with pytest.raises((ReadOnlyError, TesseraError)):
            self.a_write(self.handle())

    @invariant()
    def kept_what_was_acknowledged(self) -> None:
        if self.db is None:
            self.db = tesseradb.connect(self.path, read_only=True)
            self.read_only = True
        assert self.stored() == self.expected()

    def reopen_for_writing(self) -> None:
        if self.db is not None:
            self.db.close()
        self.db = tesseradb.connect(self.path)
        self.read_only = False


# --- arrays -------------------------------------------------------------------------------
ARRAY_TYPES = [*INTS, *FLOATS, "bool"]
CELLS = 6


class ArrayMachine(DatabaseMachine):
    def make(self) -> None:
        assert self.db is not None
        attrs = {f"a_{t}": t for t in ARRAY_TYPES}
        self.db.create_array("a", [{"name": "x", "end": CELLS, "chunk": 4}], attrs)
        self.model = {f"a_{t}": [stored_as(t, 0)] * CELLS for t in ARRAY_TYPES}

    def handle(self) -> Any:
        assert self.db is not None
        return self.db.array("a")

    def stored(self) -> Any:
        assert self.db is not None
        read = self.db.array("a")[0:CELLS]
        return {k: [v.item() for v in read[k]] for k in self.model}

    def expected(self) -> Any:
        return {k: list(v) for k, v in self.model.items()}

    def a_write(self, handle: Any) -> None:
        handle[0:1] = {"a_int8": 1}

    @precondition(lambda self: self.writable)
    @rule(
        dtype=st.sampled_from(ARRAY_TYPES),
        at=st.integers(0, CELLS - 1),
        value=scalar_inputs(),
        as_array=st.booleans(),
    )
    def write(self, dtype: str, at: int, value: Any, as_array: bool) -> None:
        assert self.db is not None
        given: Any = np.asarray([value]) if as_array else value
        name = f"a_{dtype}"
        if holds_exactly(dtype, value):
            self.db.array("a")[at : at + 1] = {name: given}
            self.model[name][at] = stored_as(dtype, value)
        else:
            with pytest.raises(TesseraError):
                self.db.array("a")[at : at + 1] = {name: given}

    @precondition(lambda self: self.writable)
    @rule(dtype=st.sampled_from(ARRAY_TYPES), at=st.integers(0, CELLS - 1), value=scalar_inputs())
    def put_triple(self, dtype: str, at: int, value: Any) -> None:
        assert self.db is not None
        name = f"a_{dtype}"
        values = np.asarray([value])
        if holds_exactly(dtype, value):
            self.db.array("a").put_triples([[at]], {name: values})
            self.model[name][at] = stored_as(dtype, value)
        else:
            with pytest.raises(TesseraError):
                self.db.array("a").put_triples([[at]], {name: values})

    @precondition(lambda self: self.writable)
    @rule(at=st.integers(0, CELLS - 1), value=st.integers(-100, 100))
    def fork_and_merge(self, at: int, value: int) -> None:
        assert self.db is not None
        array = self.db.array("a")
        fork = array.fork()
        fork[at : at + 1] = {"a_int16": np.asarray([value], dtype="int16")}
        array.merge([fork])
        self.model["a_int16"][at] = value

    @precondition(lambda self: self.kills < KILLS_PER_EXAMPLE)
    @rule(acks=st.integers(0, 3))
    def killed_writer(self, acks: int) -> None:
        """A child process writes cells one commit at a time and is killed: every
        acknowledged commit is kept, and the one in flight whole or not at all."""
        if self.db is not None:
            self.db.close()
            self.db = None
        code = f"""
            import json, numpy as np, tesseradb
            db = tesseradb.connect({str(self.path)!r})
            a = db.array("a")
            for i in range(6):
                a[i : i + 1] = {{"a_int32": np.asarray([1000 + i], dtype="int32")}}
                print("ACK " + json.dumps(i), flush=True)
        """
        self.kills += 1
        done = run_child_and_kill(code, acks)
        for i in done:
            self.model["a_int32"][i] = 1000 + i
        self.reopen_for_writing()
        stored = self.stored()["a_int32"]
        for i in range(len(done), CELLS):  # an unacknowledged commit: whole or not at all
            if stored[i] == 1000 + i:
                self.model["a_int32"][i] = 1000 + i


# --- record streams ------------------------------------------------------------------------
STREAM_TYPES = {t: t for t in INTS} | {"float32": "float", "float64": "double"}


class StreamMachine(DatabaseMachine):
    def make(self) -> None:
        assert self.db is not None
        fields = [{"name": "n", "type": "int64"}]
        fields += [{"name": f"f_{t}", "type": kind} for t, kind in STREAM_TYPES.items()]
        fields.append({"name": "label", "type": "char", "array_len": 8})
        self.db.create_stream("s", {"fields": fields, "index": ["n"]})
        self.rows: list[tuple[Any, ...]] = []
        self.next = 0

    def handle(self) -> Any:
        assert self.db is not None
        return self.db.stream("s")

    def stored(self) -> Any:
        assert self.db is not None
        columns = ["n", *(f"f_{t}" for t in STREAM_TYPES), "label"]
        return sorted(self.db.sql(f"SELECT {', '.join(columns)} FROM s").fetchall())

    def expected(self) -> Any:
        return sorted(self.rows)

    def a_write(self, handle: Any) -> None:
        handle.ingest(self._table({"n": 0}))

    def _table(self, row: dict[str, Any], arrow_type: Any = None, field: str = "") -> pa.Table:
        columns = {"n": pa.array([row["n"]], pa.int64())}
        for t in STREAM_TYPES:
            name = f"f_{t}"
            kind = pa.from_numpy_dtype(np.dtype(t))
            if name == field and arrow_type is not None:
                kind = arrow_type
            columns[name] = pa.array([row.get(name, 0)], kind)
        columns["label"] = pa.array([row.get("label", "")], pa.string())
        return pa.table(columns)

    @precondition(lambda self: self.writable)
    @rule(
        dtype=st.sampled_from(list(STREAM_TYPES)),
        value=scalar_inputs(),
        label=st.text(max_size=4),
        durable=st.booleans(),
    )
    def ingest(self, dtype: str, value: Any, label: str, durable: bool) -> None:
        assert self.db is not None
        name = f"f_{dtype}"
        plain = value.item() if isinstance(value, np.generic) else value
        if isinstance(plain, bool):
            plain = int(plain)
        # the value arrives in a column of its own Arrow type (int64, uint64 or double)
        if isinstance(plain, float):
            kind = pa.float64()
        elif plain <= 2**63 - 1:
            kind = pa.int64()
        else:
            kind = pa.uint64()
        table = self._table({"n": self.next, name: plain, "label": label}, kind, name)
        if dtype in FLOATS:  # a float field rounds to its precision, never to infinity
            mantissa = 24 if dtype == "float32" else 53
            if isinstance(plain, float):
                with np.errstate(all="ignore"):
                    fits = not (math.isfinite(plain) and np.isinf(np.dtype(dtype).type(plain)))
            else:
                fits = abs(plain) <= 2**mantissa
        else:
            fits = holds_exactly(dtype, plain)
        text_ok = "\x00" not in label and len(label.encode("utf-8", "replace")) <= 8
        text_ok = text_ok and _is_text(label)
        if fits and text_ok:
            self.db.stream("s").ingest(table, durable=durable)
            row: list[Any] = [self.next, *(0.0 if t in FLOATS else 0 for t in STREAM_TYPES)]
            row[1 + list(STREAM_TYPES).index(dtype)] = (
                stored_as(dtype, plain) if dtype in FLOATS else int(plain)
            )
            self.rows.append((*row, label))
            self.next += 1
        else:
            with pytest.raises(TesseraError):
                self.db.stream("s").ingest(table, durable=durable)

    @precondition(lambda self: self.writable)
    @rule()
    def flush(self) -> None:
        assert self.db is not None
        self.db.stream("s").flush()

    @precondition(lambda self: self.kills < KILLS_PER_EXAMPLE)
    @rule(acks=st.integers(0, 3))
    def killed_writer(self, acks: int) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        first = self.next
        code = f"""
            import json, pyarrow as pa, tesseradb
            db = tesseradb.connect({str(self.path)!r})
            s = db.stream("s")
            names = [f.name for f in s.descriptor.fields]
            for i in range({first}, {first} + 6):
                row = {{n: [0] for n in names}}
                row["n"], row["label"] = [i], ["k"]
                s.ingest(pa.table(row).cast(s.schema()), durable=True)
                print("ACK " + json.dumps(i), flush=True)
        """
        self.kills += 1
        done = run_child_and_kill(code, acks)
        zeros = [0.0 if t in FLOATS else 0 for t in STREAM_TYPES]
        for i in done:
            self.rows.append((i, *zeros, "k"))
        self.next = first + 6
        self.reopen_for_writing()
        present = {row[0] for row in self.stored()}
        for i in range(first + len(done), first + 6):  # in flight: whole or not at all
            if i in present:
                self.rows.append((i, *zeros, "k"))


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- collections ---------------------------------------------------------------------------
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**64), 2**64),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _json_ok(value: Any) -> bool:
    """What a collection holds: JSON, integers within int64, no NaN or infinities,
    Unicode text (keys too)."""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return -(2**63) <= value <= 2**63 - 1
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return _is_text(value)
    if isinstance(value, list):
        return all(_json_ok(v) for v in value)
    return all(_is_text(k) and _json_ok(v) for k, v in value.items())


def _positive_zero(value: Any) -> Any:
    """``value`` with -0.0 as 0.0: the default backend, SQLite, stores it so (a limit
    docs/documents.md names)."""
    if isinstance(value, float) and value == 0.0:
        return 0.0
    if isinstance(value, list):
        return [_positive_zero(v) for v in value]
    if isinstance(value, dict):
        return {k: _positive_zero(v) for k, v in value.items()}
    return value


class CollectionMachine(DatabaseMachine):
    def make(self) -> None:
        assert self.db is not None
        self.db.create_collection("c")
        self.docs: list[dict[str, Any]] = []

    def handle(self) -> Any:
        assert self.db is not None
        return self.db.collection("c")

    def stored(self) -> Any:
        assert self.db is not None
        found = self.db.collection("c").find()
        return [
            json.dumps({k: v for k, v in d.items() if k != "objid"}, sort_keys=True) for d in found
        ]

    def expected(self) -> Any:
        return [json.dumps(_positive_zero(d), sort_keys=True) for d in self.docs]

    def a_write(self, handle: Any) -> None:
        handle.insert({"a": 1})

    @precondition(lambda self: self.writable)
    @rule(doc=st.dictionaries(st.text(min_size=1, max_size=4), json_values, min_size=1, max_size=4))
    def insert(self, doc: dict[str, Any]) -> None:
        assert self.db is not None
        if _json_ok(doc):
            try:
                self.db.collection("c").insert(doc)
            except TesseraError:
                return  # (a documented limit it meets: refused whole, nothing kept)
            self.docs.append(json.loads(json.dumps(doc)))
        else:
            with pytest.raises(TesseraError):
                self.db.collection("c").insert(doc)

    @precondition(lambda self: self.kills < KILLS_PER_EXAMPLE)
    @rule(acks=st.integers(0, 3))
    def killed_writer(self, acks: int) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        code = f"""
            import json, tesseradb
            db = tesseradb.connect({str(self.path)!r})
            c = db.collection("c")
            for i in range(6):
                c.insert({{"child": i}})
                print("ACK " + json.dumps(i), flush=True)
        """
        self.kills += 1
        done = run_child_and_kill(code, acks)
        self.docs.extend({"child": i} for i in done)
        self.reopen_for_writing()
        stored = self.stored()
        while len(stored) > len(self.docs):  # in flight: whole or not at all
            self.docs.append({"child": len(done)})
            done.append(len(done))


# --- associative tables ----------------------------------------------------------------------
class AssocMachine(DatabaseMachine):
    def make(self) -> None:
        assert self.db is not None
        self.db.create_assoc_table("edges")
        self.cells: dict[tuple[str, str], float] = {}

    def handle(self) -> Any:
        assert self.db is not None
        return self.db.assoc_table("edges")

    def stored(self) -> Any:
        assert self.db is not None
        found = self.db.assoc_table("edges")[:, :]
        rows, cols, vals = found.find() if found.nnz else ([], [], [])
        return sorted(zip(list(rows), list(cols), [float(v) for v in vals], strict=True))

    def expected(self) -> Any:
        return sorted((r, c, v) for (r, c), v in self.cells.items() if v != 0)

    def a_write(self, handle: Any) -> None:
        handle.put_triples("r,", "c,", [1.0])

    @precondition(lambda self: self.writable)
    @rule(row=st.sampled_from("abc"), col=st.sampled_from("xyz"), value=scalar_inputs())
    def put(self, row: str, col: str, value: Any) -> None:
        assert self.db is not None
        plain = value.item() if isinstance(value, np.generic) else value
        exact = not (isinstance(plain, float) and math.isnan(plain))
        if isinstance(plain, int) and not isinstance(plain, bool):
            exact = int(float(plain)) == plain
        if exact:
            self.db.assoc_table("edges").put_triples(f"{row},", f"{col},", [value])
            if plain != 0:  # (D4M keeps no zero: putting one leaves the cell as it was)
                self.cells[(row, col)] = float(plain)
        else:
            with pytest.raises(TesseraError):
                self.db.assoc_table("edges").put_triples(f"{row},", f"{col},", [value])

    @precondition(lambda self: self.kills < KILLS_PER_EXAMPLE)
    @rule(acks=st.integers(0, 3))
    def killed_writer(self, acks: int) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        code = f"""
            import json, tesseradb
            db = tesseradb.connect({str(self.path)!r})
            t = db.assoc_table("edges")
            for i in range(6):
                t.put_triples("k%d," % i, "c,", [float(i + 1)])
                print("ACK " + json.dumps(i), flush=True)
        """
        self.kills += 1
        done = run_child_and_kill(code, acks)
        for i in done:
            self.cells[(f"k{i}", "c")] = float(i + 1)
        self.reopen_for_writing()
        present = {(r, c) for r, c, _ in self.stored()}
        for i in range(len(done), 6):  # in flight: whole or not at all
            if (f"k{i}", "c") in present:
                self.cells[(f"k{i}", "c")] = float(i + 1)


# --- plain tables ----------------------------------------------------------------------------
SQL_TYPES = {
    "int8": "TINYINT",
    "uint8": "UTINYINT",
    "int16": "SMALLINT",
    "uint16": "USMALLINT",
    "int32": "INTEGER",
    "uint32": "UINTEGER",
    "int64": "BIGINT",
    "uint64": "UBIGINT",
}


class TableMachine(DatabaseMachine):
    def make(self) -> None:
        assert self.db is not None
        columns = ", ".join(f"c_{t} {kind}" for t, kind in SQL_TYPES.items())
        self.db.sql(f"CREATE TABLE t (n INTEGER, {columns})")
        self.rows: list[tuple[Any, ...]] = []
        self.pending: list[tuple[Any, ...]] | None = None  # a transaction's rows
        self.next = 0

    def handle(self) -> Any:
        return self.db

    def stored(self) -> Any:
        assert self.db is not None
        if self.pending is not None:
            return self.expected()  # (its own uncommitted rows: checked at COMMIT)
        return sorted(self.db.sql("SELECT * FROM t").fetchall())

    def expected(self) -> Any:
        return sorted(self.rows)

    def a_write(self, handle: Any) -> None:
        handle.sql("INSERT INTO t (n) VALUES (0)")

    @precondition(lambda self: self.db is not None and self.pending is not None)
    @rule()
    def close(self) -> None:  # (closing rolls an open transaction back)
        self.pending = None
        super().close()

    @precondition(lambda self: self.writable)
    @rule(dtype=st.sampled_from(list(SQL_TYPES)), value=st.integers(-(2**63), 2**64 - 1))
    def insert(self, dtype: str, value: int) -> None:
        assert self.db is not None
        row = [self.next] + [None] * len(SQL_TYPES)
        row[1 + list(SQL_TYPES).index(dtype)] = value
        statement = f"INSERT INTO t (n, c_{dtype}) VALUES (?, ?)"
        if holds_exactly(dtype, value):
            self.db.sql(statement, [self.next, value])
            (self.pending if self.pending is not None else self.rows).append(tuple(row))
            self.next += 1
        else:
            with pytest.raises(TesseraError):
                self.db.sql(statement, [self.next, value])
            if self.pending is not None:  # DuckDB aborted the transaction
                self.db.sql("ROLLBACK")
                self.pending = None

    @precondition(lambda self: self.writable and self.pending is None)
    @rule()
    def begin(self) -> None:
        assert self.db is not None
        self.db.sql("BEGIN")
        self.pending = []

    @precondition(lambda self: self.writable and self.pending is not None)
    @rule(commit=st.booleans())
    def end(self, commit: bool) -> None:
        assert self.db is not None and self.pending is not None
        self.db.sql("COMMIT" if commit else "ROLLBACK")
        if commit:
            self.rows.extend(self.pending)
        self.pending = None

    @precondition(lambda self: self.kills < KILLS_PER_EXAMPLE)
    @rule(acks=st.integers(0, 3))
    def killed_writer(self, acks: int) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        self.pending = None
        first = self.next
        code = f"""
            import json, tesseradb
            db = tesseradb.connect({str(self.path)!r})
            for i in range({first}, {first} + 6):
                db.sql("INSERT INTO t (n, c_int8) VALUES (?, 7)", [i])
                print("ACK " + json.dumps(i), flush=True)
        """
        self.kills += 1
        done = run_child_and_kill(code, acks)
        blank = [None] * len(SQL_TYPES)
        blank[list(SQL_TYPES).index("int8")] = 7
        for i in done:
            self.rows.append((i, *blank))
        self.next = first + 6
        self.reopen_for_writing()
        present = {row[0] for row in self.stored()}
        for i in range(first + len(done), first + 6):
            if i in present:
                self.rows.append((i, *blank))


MACHINES = {
    "array": ArrayMachine,
    "stream": StreamMachine,
    "collection": CollectionMachine,
    "assoc": AssocMachine,
    "table": TableMachine,
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(MACHINES))
def test_each_data_model_keeps_what_it_acknowledged(kind: str) -> None:
    machine = MACHINES[kind]
    machine.TestCase.settings = MACHINE_SETTINGS
    machine.TestCase().runTest()
