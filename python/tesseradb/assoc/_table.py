"""Persistent associative tables: D4M 2.0's schema (Tedge, TedgeT, TedgeDeg,
TedgeTxt) on the runs of :mod:`._store`.

``T[rows, cols]`` answers from the row orientation, or from the column
orientation when only columns are selected, so a single row or a single
column costs one binary search per run. Each table is also a relation of
the SQL front end (``row, col, val``), with key equality, IN and ranges
pushed down to the orientation they select.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tesseradb._lifetime import Lifetime, refuses_when_closed
from tesseradb.assoc import _keys
from tesseradb.assoc._assoc import Assoc
from tesseradb.assoc._sparse import at_ids, expand_rows, interned_triples, triples_matrix
from tesseradb.assoc._store import Manifest, Run, write_run
from tesseradb.errors import AssocError, DamagedStorageError, ReadOnlyError, require_text
from tesseradb.sql.predicate import ColumnDomain, Predicate
from tesseradb.sql.relation import Estimate

__all__ = ["AssocTable", "table_options"]

# how many runs a table keeps before a put merges the newest ones
MAX_RUNS = 24

Picker = Callable[[Any], "np.ndarray | None"]


def table_options(transpose: Any, degrees: Any, text: Any) -> dict[str, bool]:
    for name, value in (("transpose", transpose), ("degrees", degrees), ("text", text)):
        if not isinstance(value, bool):
            raise AssocError(f"create_assoc_table: {name} must be True or False, not {value!r}")
    return {"transpose": transpose, "degrees": degrees, "text": text}


def _kind_of(keys: Any) -> str:
    return "number" if isinstance(keys, np.ndarray) and keys.dtype != object else "text"


@refuses_when_closed
class AssocTable:
    """A persistent associative table (``db.create_assoc_table``).

    ``put(A)`` / ``put_triples(rows, cols, vals)`` add triples in one
    transaction per call (a later triple at the same row and column wins);
    ``T[rows, cols]`` returns an :class:`Assoc` with the selectors of
    ``Assoc``; ``T.T[cols, rows]`` reads by column (D4M's ``TedgeT``);
    ``T.deg[cols, :]`` the column degrees summed on insert (``TedgeDeg``) and
    ``T.txt[rows, :]`` the raw texts (``TedgeTxt``).
    """

    _lifetime: Lifetime | None = None  # (set by the database that opened it)

    def _check_open(self) -> None:
        if self._lifetime is not None:
            self._lifetime.check(f"associative table {self.name!r}")

    def __init__(
        self,
        name: str,
        folder: Path,
        options: dict[str, bool],
        read_only: bool,
        on_write: Callable[[str], None] = lambda _name: None,
        location: Any = None,
    ) -> None:
        self.name = name
        self.folder = folder  # the manifest (and the runs, unless they are in ``location``)
        self.location = location
        self.options = options
        self.read_only = read_only
        self._on_write = on_write
        if not read_only:
            folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._manifest = Manifest(folder, read_only, location)
        self._runs: dict[str, Run] = {}

    # --- what it holds ------------------------------------------------------------

    def _current(self) -> list[Run]:
        with self._lock:
            self._manifest.refresh()  # another process may have put since
            names = list(self._manifest.runs)
            for name in names:
                if name not in self._runs:
                    self._runs[name] = self._manifest.open_run(name)
            for old in [n for n in self._runs if n not in names]:
                del self._runs[old]
            return [self._runs[n] for n in names]

    def _read(self, read: Callable[[list[Run]], Assoc]) -> Assoc:
        """``read`` over the current runs; if another process merged runs away
        meanwhile (their files gone), again over the runs that replaced them."""
        for _attempt in range(3):
            try:
                return read(self._current())
            except FileNotFoundError:
                with self._lock:
                    self._runs.clear()
        try:
            return read(self._current())
        except FileNotFoundError as err:  # not a merge: a file of a listed run is gone
            missing = err.filename or str(err)
            raise DamagedStorageError(
                f"associative table {self.name!r}: {missing} is missing"
            ) from None

    @property
    def runs(self) -> int:
        """How many runs (puts not yet merged) the table holds."""
        return len(self._manifest.runs)

    @property
    def triples_written(self) -> int:
        """Triples held by the runs: a triple put again counts once per run holding
        it, until a merge keeps only the latest (so this bounds the table's size)."""
        return sum(run.triples for run in self._current())

    @property
    def kinds(self) -> dict[str, str | None]:
        """Key and value kinds (``text`` or ``number``), fixed by the first put."""
        return dict(self._manifest.kinds)

    def bytes_on_disk(self) -> int:
        if self.location is not None:
            return int(self.location.total_size())
        return sum(p.stat().st_size for p in self.folder.rglob("*") if p.is_file())

    # --- writing --------------------------------------------------------------------

    def _writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot {what} {self.name!r}: the database is open read-only")

    def put(self, a: Assoc) -> None:
        """Adds the entries of ``a``, all or nothing."""
        if not isinstance(a, Assoc):
            raise AssocError(
                f"{self.name}.put takes an Assoc, not {type(a).__name__}; "
                "use put_triples for rows, columns and values"
            )
        self._writable("put into")
        if a.nnz:
            self._put_matrix(a.row, a.col, a.val, a._adj)

    def put_triples(self, rows: Any, cols: Any, vals: Any = 1.0) -> None:
        """Adds triples (the forms of ``Assoc``), all or nothing; within one call the
        last triple at a row and column wins.

        The same as ``put(Assoc(rows, cols, vals, "last"))``, but the keys go
        from the interning kernel to the run's files without becoming Python
        strings.
        """
        self._writable("put into")
        triples = interned_triples(rows, cols, vals, "last", arrow=True)
        if triples is None:
            return
        row_keys, col_keys, val_keys, row_ids, col_ids, values = triples
        adj = triples_matrix(row_ids, col_ids, values, (len(row_keys), len(col_keys)), "last")
        if adj.nnz:
            self._put_matrix(row_keys, col_keys, val_keys, adj)

    def _put_matrix(self, row_keys: Any, col_keys: Any, val_keys: Any, adj: Any) -> None:
        """One put: the matrix (keys as arrays of either kind) as a new run."""
        kinds = {
            "row": _kind_of(row_keys),
            "col": _kind_of(col_keys),
            "values": "text" if val_keys is not None else "number",
        }
        options = self.options
        with self._lock:
            merged = self._checked_kinds(kinds)
            self._publish(
                lambda: write_run(
                    self.folder,
                    row_keys,
                    col_keys,
                    val_keys,
                    adj,
                    options["transpose"],
                    options["degrees"],
                    None,
                ),
                merged,
            )
            self._merge_if_many()

    def put_text(self, rows: Any, texts: Any) -> None:
        """Keeps the raw text of each row key (D4M's ``TedgeTxt``), all or nothing."""
        if not self.options["text"]:
            raise AssocError(f"{self.name!r} keeps no texts; create it with text=True")
        self._writable("put texts into")
        source = _keys.key_source(rows, "row keys")
        items = list(texts) if not isinstance(texts, str) else _keys.d4m_items(texts, "texts")
        if any(not isinstance(t, str) for t in items):
            bad = next(i for i, t in enumerate(items) if not isinstance(t, str))
            raise AssocError(f"texts: item {bad} is {type(items[bad]).__name__}, not str")
        for i, text in enumerate(items):
            require_text(text, f"text {i}", f"{self.name}.put_text")
        if source.length != len(items):
            raise AssocError(
                f"{source.length} row keys and {len(items)} texts: they must be as many"
            )
        if not items:
            return
        ((keys, ids),) = _keys.intern([source], ["row keys"])
        last = np.zeros(len(keys), dtype=np.int64)
        last[ids] = np.arange(len(ids))  # the last text of a repeated key wins
        chosen = [items[i] for i in last.tolist()]
        with self._lock:
            merged = self._checked_kinds({"txt": _kind_of(keys)})
            self._publish(
                lambda: write_run(
                    self.folder, keys, keys, None, None, False, False, (keys, chosen)
                ),
                merged,
            )

    def _checked_kinds(self, kinds: dict[str, str]) -> dict[str, str | None]:
        self._manifest.refresh()
        current = dict(self._manifest.kinds)
        names = {"row": "row keys", "col": "column keys", "values": "values", "txt": "text keys"}
        for axis, kind in kinds.items():
            if current.get(axis) not in (None, kind):
                raise AssocError(
                    f"{self.name!r} holds {names[axis]} that are "
                    f"{'strings' if current[axis] == 'text' else 'numbers'}; "
                    f"these are {'strings' if kind == 'text' else 'numbers'}"
                )
            current[axis] = kind
        return current

    def _publish(
        self,
        write: Callable[[], Path],
        kinds: dict[str, str | None],
        replacing: tuple[int, int] | None = None,
    ) -> None:
        tmp: Path | None = None
        try:
            tmp = write()
            self._manifest.publish(tmp, kinds, replacing)
            tmp = None
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        self._on_write(self.name)

    def _merge_if_many(self) -> None:
        """Merges the newest runs once there are more than MAX_RUNS: the newest
        runs whose triples add up to no more than the run before them, so a
        triple is rewritten about log(puts) times in all."""
        names = self._manifest.runs
        if len(names) <= MAX_RUNS:
            return
        runs = self._current()
        start = len(runs) - 2
        total = runs[-1].triples + runs[-2].triples
        while start > 0 and runs[start - 1].triples <= total:
            start -= 1
            total += runs[start].triples
        self._merge(start, len(runs))

    def compact(self) -> None:
        """Merges every run into one (lookups then search one run)."""
        self._writable("compact")
        with self._lock:
            if self.runs > 1:
                self._merge(0, self.runs)

    def _merge(self, start: int, stop: int) -> None:
        """Replaces runs start..stop by one run holding what they hold (latest winning)."""
        runs = self._current()[start:stop]
        merged = _collect("row", runs, _every)
        texts = _texts(runs)
        degrees: bool | np.ndarray = False
        if self.options["degrees"] and merged.nnz:
            summed = _degrees(runs)
            degrees = np.zeros(len(merged.col))
            keys, _, counts = summed.find()
            degrees[np.searchsorted(merged.col, keys)] = counts
        text_part = None
        if texts.nnz:
            keys, _, text = texts.find()
            text_part = (keys, text.tolist())
        self._publish(
            lambda: write_run(
                self.folder,
                merged.row,
                merged.col,
                merged.val,
                merged._adj if merged.nnz else None,
                self.options["transpose"],
                degrees,
                text_part,
            ),
            self.kinds,
            replacing=(start, stop),
        )
        self._manifest.remove_leftovers()
        for old in list(self._runs):
            if old not in self._manifest.runs:
                del self._runs[old]

    # --- reading ----------------------------------------------------------------------

    def __getitem__(self, selection: Any) -> Assoc:
        rows, cols = _pair(selection, self.name)
        if _is_all(rows) and not _is_all(cols) and self.options["transpose"]:
            pick = _picker(cols, "column")
            return self._read(lambda runs: _collect("col", runs, pick))
        pick = _picker(rows, "row")
        found = self._read(lambda runs: _collect("row", runs, pick))
        return found if _is_all(cols) else found[:, cols]

    @property
    def T(self) -> _Transposed:
        """The table read by column (D4M's ``TedgeT``): ``T.T[cols, rows]`` is ``T[rows, cols].T``."""
        if not self.options["transpose"]:
            raise AssocError(f"{self.name!r} keeps no column order; create it with transpose=True")
        return _Transposed(self)

    @property
    def deg(self) -> _Degrees:
        """Column degrees summed on insert (D4M's ``TedgeDeg``): ``T.deg["f|x,", :]``."""
        if not self.options["degrees"]:
            raise AssocError(f"{self.name!r} keeps no degrees; create it with degrees=True")
        return _Degrees(self)

    @property
    def txt(self) -> _Texts:
        """Raw texts by row key (D4M's ``TedgeTxt``): ``T.txt["e1,", :]``."""
        if not self.options["text"]:
            raise AssocError(f"{self.name!r} keeps no texts; create it with text=True")
        return _Texts(self)

    def verify(self) -> list[tuple[str, str]]:
        """(run, problem) for each run whose files do not hold a whole run."""
        problems = []
        for name in list(self._manifest.runs):
            try:
                run = self._manifest.open_run(name)
                _verify_run(run)
            except Exception as err:  # any unreadable part is a finding, not a crash
                problems.append((name, str(err)))
        return problems

    def set_aside(self, run: str, quarantine: Path) -> str:
        """Take a damaged run out of the table (``tessera check --repair``): its folder is
        moved to ``quarantine``, and the manifest no longer names it. Returns what is
        lost with it: the triples of that put (or merge of puts), as its files say."""
        self._writable("repair")
        with self._lock:
            self._manifest.refresh()
            if run not in self._manifest.runs:
                return "nothing (the run is no longer part of the table)"
            try:
                lost = f"the {self._manifest.open_run(run).triples:,} triples of {run}"
            except Exception:  # its meta.json is what is damaged
                lost = f"every triple of {run} (its count is unreadable)"
            quarantine.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(self.folder / run, quarantine)
            runs = [r for r in self._manifest.runs if r != run]
            self._manifest.commit(runs, dict(self._manifest.kinds), self._manifest.next)
            self._runs.clear()
        self._on_write(self.name)
        return lost

    def __repr__(self) -> str:
        return (
            f"AssocTable({self.name!r}, {self.runs} runs, {self.triples_written} triples written)"
        )

    # --- SQL --------------------------------------------------------------------------

    def relations(self) -> dict[str, Any]:
        out: dict[str, Any] = {"": TriplesRelation(self)}
        if self.options["degrees"]:
            out["deg"] = DegreesRelation(self)
        if self.options["text"]:
            out["txt"] = TextsRelation(self)
        return out

    def close(self) -> None:
        with self._lock:
            self._runs.clear()


def _verify_run(run: Run) -> None:
    """Reads every file of a run, checks each against its checksum and that the parts
    agree; raises on the first fault."""
    run.verify_all()
    if run.triples:
        rows, cols = len(run.keys("row")), len(run.keys("col"))
        for axis, count, other in (("row", rows, cols), ("col", cols, rows)):
            if not run.has(f"{axis}_indptr"):
                continue
            indptr = np.asarray(run.array(f"{axis}_indptr"))
            index = np.asarray(run.array(f"{axis}_index"))
            vals = np.asarray(run.array(f"{axis}_vals"))
            if len(indptr) != count + 1 or indptr[-1] != run.triples:
                raise ValueError(
                    f"{axis}_indptr.npy does not fit {count} keys and {run.triples} triples"
                )
            if len(index) != run.triples or len(vals) != run.triples:
                raise ValueError(
                    f"{axis}_index.npy or {axis}_vals.npy does not hold {run.triples} entries"
                )
            if len(index) and (index.min() < 0 or index.max() >= other):
                raise ValueError(
                    f"{axis}_index.npy names keys outside the {other} of the other axis"
                )
        if run.has("deg") and len(run.array("deg")) != cols:
            raise ValueError("deg.npy does not hold one count per column key")
        if run.meta.get("values") == "text":
            run.values()
    if run.has("txt") and len(run.texts()) != len(run.keys("txt")):
        raise ValueError("txt.arrow does not hold one text per key")


@refuses_when_closed
class _Transposed:
    def __init__(self, table: AssocTable) -> None:
        self.table = table

    def _check_open(self) -> None:
        self.table._check_open()

    def __getitem__(self, selection: Any) -> Assoc:
        cols, rows = _pair(selection, f"{self.table.name}.T")
        pick = _picker(cols, "column")
        found = self.table._read(lambda runs: _collect("col", runs, pick))
        return (found if _is_all(rows) else found[rows, :]).T


@refuses_when_closed
class _Degrees:
    def __init__(self, table: AssocTable) -> None:
        self.table = table

    def _check_open(self) -> None:
        self.table._check_open()

    def __getitem__(self, selection: Any) -> Assoc:
        keys, cols = _pair(selection, f"{self.table.name}.deg")
        pick = _picker(keys, "row")
        found = self.table._read(lambda runs: _degrees(runs, pick))
        return found if _is_all(cols) else found[:, cols]


@refuses_when_closed
class _Texts:
    def __init__(self, table: AssocTable) -> None:
        self.table = table

    def _check_open(self) -> None:
        self.table._check_open()

    def __getitem__(self, selection: Any) -> Assoc:
        keys, cols = _pair(selection, f"{self.table.name}.txt")
        pick = _picker(keys, "row")
        found = self.table._read(lambda runs: _texts(runs, pick))
        return found if _is_all(cols) else found[:, cols]


def _pair(selection: Any, name: str) -> tuple[Any, Any]:
    if not isinstance(selection, tuple) or len(selection) != 2:
        raise AssocError(f"index a table as {name}[rows, cols], not {name}[{selection!r}]")
    return selection


def _is_all(selector: Any) -> bool:
    if isinstance(selector, str):
        return selector == ":"
    return isinstance(selector, slice) and selector == slice(None)


def _picker(selector: Any, what: str) -> Picker:
    if _is_all(selector):
        return _every
    if isinstance(selector, (int, np.integer, slice)) or (
        isinstance(selector, (list, tuple, np.ndarray))
        and len(selector)
        and np.asarray(selector).dtype.kind in "iu"
    ):
        raise AssocError(
            f"a stored table is selected by keys, not positions: {selector!r}; "
            "read it into an Assoc first (T[:, :]) to select by position"
        )
    return lambda keys: _keys.positions(keys, selector, what)


def _collect(axis: str, runs: Sequence[Run], pick: Picker) -> Assoc:
    """The entries of ``runs`` whose ``axis`` key ``pick`` selects, the latest winning."""
    other = "col" if axis == "row" else "row"
    majors: list[np.ndarray] = []
    minors: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for run in runs:
        if not run.triples or not run.has(f"{axis}_indptr"):
            continue
        keys = run.keys(axis)
        picked = _picked(keys, pick)
        if len(picked) == 0:
            continue
        entries, owner = expand_rows(run.array(f"{axis}_indptr"), picked)
        if len(entries) == 0:
            continue
        major = keys[picked]
        majors.append(np.asarray(major)[owner])
        minor_ids = np.asarray(run.array(f"{axis}_index")[entries], dtype=np.int64)
        minors.append(np.asarray(run.keys(other)[minor_ids]))
        v = np.asarray(run.array(f"{axis}_vals")[entries])
        if run.meta.get("values") == "text":
            v = np.asarray(at_ids(run.values(), v))
        values.append(v)
    if not majors:
        return Assoc([], [], [])
    major_all = np.concatenate(majors)
    minor_all = np.concatenate(minors)
    value_all = np.concatenate(values)
    if axis == "row":
        return Assoc(major_all, minor_all, value_all, "last")
    return Assoc(minor_all, major_all, value_all, "last")


def _every(_keys_: Any) -> None:
    """The picker of every key."""
    return None


def _picked(keys: Any, pick: Picker) -> np.ndarray:
    """The positions ``pick`` selects among ``keys`` (all of them for None)."""
    picked = pick(keys)
    return np.arange(len(keys), dtype=np.int64) if picked is None else picked


def _degrees(runs: Sequence[Run], pick: Picker = _every) -> Assoc:
    keys_all, counts_all = [], []
    for run in runs:
        if not run.has("deg"):
            continue
        keys = run.keys("col")
        picked = _picked(keys, pick)
        keys_all.append(np.asarray(keys[picked]))
        counts_all.append(np.asarray(run.array("deg")[picked]))
    keys = np.concatenate(keys_all) if keys_all else np.empty(0, dtype=object)
    if not len(keys):  # (no key picked: an empty answer, as D4M gives)
        return Assoc([], [], [])
    return Assoc(keys, "degree,", np.concatenate(counts_all), sum)


def _texts(runs: Sequence[Run], pick: Picker = _every) -> Assoc:
    keys_all, texts_all = [], []
    for run in runs:
        if not run.has("txt"):
            continue
        keys = run.keys("txt")
        picked = _picked(keys, pick)
        keys_all.append(np.asarray(keys[picked]))
        taken = run.texts().take(picked).to_pylist()
        texts_all.extend(taken)
    if not texts_all:  # (no key picked: an empty answer)
        return Assoc([], [], [])
    return Assoc(np.concatenate(keys_all), "text,", texts_all, "last")


# --- relations -----------------------------------------------------------------------------


def _domain_positions(keys: Any, domain: ColumnDomain) -> np.ndarray | None:
    """Positions of the keys a column domain may keep (a superset); None for all."""
    if domain.is_unrestricted:
        return None
    text = keys.dtype == object
    want = str if text else (int, float)
    parts: list[np.ndarray] = []
    if domain.keys is not None:
        wanted = np.asarray(domain.keys)
        if text != (wanted.dtype.kind in "UO"):
            return None
        if text:
            objects = np.empty(len(wanted), dtype=object)
            objects[:] = wanted.tolist()
            wanted = objects
        return _keys.exact_positions(keys, wanted if text else wanted.astype(np.float64))
    for interval in domain.ranges:
        bounds = [b for b in (interval.lo, interval.hi) if b is not None]
        if not all(isinstance(b, want) and not isinstance(b, bool) for b in bounds):
            return None  # a bound of another type: let DuckDB decide on everything
        if interval.lo is None:
            start = 0
        else:
            start = int(
                keys.searchsorted(interval.lo, side="left" if interval.lo_inclusive else "right")
            )
        if interval.hi is None:
            stop = len(keys)
        else:
            stop = int(
                keys.searchsorted(interval.hi, side="right" if interval.hi_inclusive else "left")
            )
        if stop > start:
            parts.append(np.arange(start, stop, dtype=np.int64))
    return _keys.union_positions(parts)


def _arrow_type(kind: str | None) -> Any:
    import pyarrow as pa

    return pa.float64() if kind == "number" else pa.large_string()


class TriplesRelation:
    """A table's triples as the relation ``row, col, val``."""

    def __init__(self, table: AssocTable) -> None:
        self.table = table
        self.name = table.name

    def schema(self) -> Any:
        import pyarrow as pa

        kinds = self.table.kinds
        return pa.schema(
            [
                ("row", _arrow_type(kinds.get("row") or "text")),
                ("col", _arrow_type(kinds.get("col") or "text")),
                ("val", _arrow_type(kinds.get("values") or "number")),
            ]
        )

    def _plan(self, predicate: Predicate | None) -> tuple[str, Picker]:
        """Which orientation a scan reads, and which keys of it."""
        for column, axis in (("row", "row"), ("col", "col")):
            domain = None if predicate is None else predicate.domain(column)
            if domain is None or domain.is_unrestricted:
                continue
            if axis == "col" and not self.table.options["transpose"]:
                continue
            return axis, lambda keys, d=domain: _domain_positions(keys, d)
        return "row", _every

    def scan(self, columns: Sequence[str] | None, predicate: Predicate | None) -> Any:
        import pyarrow as pa

        if predicate is not None and predicate.is_false:
            found = Assoc([], [], [])
        else:
            axis, pick = self._plan(predicate)
            found = self.table._read(lambda runs: _collect(axis, runs, pick))
        schema = self.schema()
        rows, cols, vals = found.find()
        table = pa.table(
            {
                "row": pa.array(rows, type=schema.field("row").type),
                "col": pa.array(cols, type=schema.field("col").type),
                "val": pa.array(vals, type=schema.field("val").type),
            }
        )
        if predicate is not None and not predicate.is_true and table.num_rows:
            table = predicate.filter(table)
        if columns is not None:
            table = table.select(list(columns))
        return table.to_reader()

    def estimate(self, predicate: Predicate | None = None) -> Estimate:
        return Estimate(rows=self.table.triples_written)

    def describe_scan(
        self, columns: Sequence[str] | None, predicate: Predicate | None
    ) -> list[str]:
        axis, _ = self._plan(predicate)
        order = "row order (Tedge)" if axis == "row" else "column order (TedgeT)"
        return [f"{self.table.runs} runs searched in {order}"]


class _KeyedRelation:
    """A relation of one key column and one value column, read by key: a
    table's degrees (``col, degree``) or texts (``row, text``)."""

    suffix: str
    key: str  # the key column, and the manifest's kind of its keys
    kind: str
    value: str

    def __init__(self, table: AssocTable) -> None:
        self.table = table
        self.name = f"{table.name}.{self.suffix}"

    def _value_type(self) -> Any:
        raise NotImplementedError

    def _read(self, runs: list[Run], pick: Picker) -> Assoc:
        raise NotImplementedError

    def schema(self) -> Any:
        import pyarrow as pa

        key_type = _arrow_type(self.table.kinds.get(self.kind) or "text")
        return pa.schema([(self.key, key_type), (self.value, self._value_type())])

    def scan(self, columns: Sequence[str] | None, predicate: Predicate | None) -> Any:
        import pyarrow as pa

        domain = None if predicate is None else predicate.domain(self.key)
        pick = _every if domain is None else (lambda keys, d=domain: _domain_positions(keys, d))
        keys, _, values = self.table._read(lambda runs: self._read(runs, pick)).find()
        schema = self.schema()
        table = pa.table(
            {
                self.key: pa.array(keys, type=schema.field(self.key).type),
                self.value: pa.array(values, type=schema.field(self.value).type),
            }
        )
        if columns is not None:
            table = table.select(list(columns))
        return table.to_reader()

    def estimate(self, predicate: Predicate | None = None) -> Estimate:
        return Estimate()


class DegreesRelation(_KeyedRelation):
    """A table's column degrees as the relation ``col, degree``."""

    suffix, key, kind, value = "deg", "col", "col", "degree"

    def _value_type(self) -> Any:
        import pyarrow as pa

        return pa.float64()

    def _read(self, runs: list[Run], pick: Picker) -> Assoc:
        return _degrees(runs, pick)


class TextsRelation(_KeyedRelation):
    """A table's raw texts as the relation ``row, text``."""

    suffix, key, kind, value = "txt", "row", "txt", "text"

    def _value_type(self) -> Any:
        import pyarrow as pa

        return pa.large_string()

    def _read(self, runs: list[Run], pick: Picker) -> Assoc:
        return _texts(runs, pick)
