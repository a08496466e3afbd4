"""``Assoc``: D4M's associative array, a sparse matrix with sorted string (or
number) keys on both axes and numeric or string values.

The semantics are MATLAB D4M's (``matlab_src/@Assoc``); ``docs/assoc.md``
lists where this class, MATLAB D4M and D4M.py differ. An Assoc is immutable
and always canonical: no stored zeros, no empty rows or columns, and every
string value in ``val`` used by some entry.

Inside, string values are stored as 1-based ids into the sorted ``val``
array (as MATLAB does), so the matrix of a string Assoc holds ids and
operations on strings are operations on their ranks.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from tesseradb.assoc import _keys
from tesseradb.assoc._keys import KeyArray
from tesseradb.assoc._sparse import (
    EMPTY_KEYS,
    aggregate_name,
    at_ids,
    canonical,
    csr_parts,
    expand_rows,
    interned_triples,
    key_list,
    triples_matrix,
)
from tesseradb.errors import AssocError

__all__ = ["Assoc", "Col", "Row", "Val"]


class Assoc:
    """A D4M associative array: ``Assoc(rows, cols, vals, aggregate=min)``.

    ``rows`` and ``cols`` are D4M strings (``"a,b,c,"``, the last character
    the delimiter) or sequences/numpy arrays of strings or of numbers;
    ``vals`` are numbers or strings in the same forms, and one value (or one
    key) broadcasts. Triples at the same (row, column) are combined by
    ``aggregate``: ``min`` (MATLAB's default), ``max``, ``sum``, ``"first"``,
    ``"last"`` or a callable given the list of colliding values in input
    order. Entries equal to zero or to the empty string are not stored.
    """

    __slots__ = ("_adj", "_col", "_row", "_val")
    __hash__ = None  # type: ignore[assignment]  # mutable-looking algebra: == builds an Assoc

    _row: KeyArray
    _col: KeyArray
    _val: np.ndarray | None
    _adj: sp.csr_array

    def __init__(self, rows: Any, cols: Any, vals: Any = 1.0, aggregate: Any = min) -> None:
        name = aggregate_name(aggregate)
        triples = interned_triples(rows, cols, vals, name)
        if triples is None:
            self._set(EMPTY_KEYS, EMPTY_KEYS, None, sp.csr_array((0, 0)))
            return
        row_keys, col_keys, val_keys, row_ids, col_ids, values = triples
        if name is None:
            self._set_from_callable(
                row_keys, col_keys, val_keys, row_ids, col_ids, values, aggregate
            )
            return
        adj = triples_matrix(row_ids, col_ids, values, (len(row_keys), len(col_keys)), name)
        self._set(*canonical(row_keys, col_keys, val_keys, adj))

    def _set(self, row: KeyArray, col: KeyArray, val: np.ndarray | None, adj: sp.csr_array) -> None:
        for array in (row, col, val):
            if array is not None:
                array.flags.writeable = False
        self._row, self._col, self._val, self._adj = row, col, val, adj

    def _set_from_callable(
        self,
        row_keys: KeyArray,
        col_keys: KeyArray,
        val_keys: np.ndarray | None,
        row_ids: np.ndarray,
        col_ids: np.ndarray,
        values: np.ndarray,
        aggregate: Callable[[list[Any]], Any],
    ) -> None:
        # a user's aggregate is Python: each (row, column) group is handed
        # its values in input order, as strings when the values are strings
        order = np.lexsort((np.arange(len(row_ids)), col_ids, row_ids))
        r, c, v = row_ids[order], col_ids[order], values[order]
        starts = np.flatnonzero(np.r_[True, (r[1:] != r[:-1]) | (c[1:] != c[:-1])])
        ends = np.r_[starts[1:], len(r)]
        items = at_ids(val_keys, v).tolist() if val_keys is not None else v.tolist()
        out = [aggregate(items[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        built = Assoc(row_keys[r[starts]], col_keys[c[starts]], out if out else 1.0, "first")
        self._set(built._row, built._col, built._val, built._adj)

    @classmethod
    def _make(
        cls, row: KeyArray, col: KeyArray, val: np.ndarray | None, adj: sp.csr_array
    ) -> Assoc:
        """An Assoc of these parts, made canonical."""
        made = cls.__new__(cls)
        made._set(*canonical(row, col, val, adj))
        return made

    @classmethod
    def _from_coords(
        cls,
        row: KeyArray,
        col: KeyArray,
        val: np.ndarray | None,
        r: np.ndarray,
        c: np.ndarray,
        v: np.ndarray,
    ) -> Assoc:
        """An Assoc of unique coordinates (positions into row and col)."""
        adj = sp.csr_array(
            (v.astype(np.float64), (r.astype(np.int64), c.astype(np.int64))),
            shape=(len(row), len(col)),
        )
        return cls._make(row, col, val, adj)

    # --- what it holds ------------------------------------------------------

    @property
    def row(self) -> KeyArray:
        """Sorted unique row keys (read-only numpy array: str objects or float64)."""
        return self._row

    @property
    def col(self) -> KeyArray:
        """Sorted unique column keys (read-only numpy array: str objects or float64)."""
        return self._col

    @property
    def val(self) -> np.ndarray | None:
        """Sorted unique string values, or None when the values are numbers."""
        return self._val

    @property
    def adj(self) -> sp.csr_array:
        """A copy of the sparse matrix: values, or 1-based ids into ``val`` for strings."""
        return self._adj.copy()

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self._row), len(self._col))

    @property
    def nnz(self) -> int:
        """Number of entries."""
        return int(self._adj.nnz)

    def is_text(self) -> bool:
        """Whether the values are strings."""
        return self._val is not None

    def find(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, cols, vals) of every entry, in row-major order."""
        coo = self._adj.tocoo()  # canonical CSR: row-major, columns ascending
        r, c, v = coo.row, coo.col, coo.data
        values = v if self._val is None else at_ids(self._val, v)
        return self._row[r], self._col[c], values

    def triples(self) -> list[tuple[Any, Any, Any]]:
        """Every entry as a (row, col, val) tuple, in row-major order."""
        rows, cols, vals = self.find()
        return list(zip(rows.tolist(), cols.tolist(), vals.tolist(), strict=True))

    def equals(self, other: Assoc) -> bool:
        """Whether both hold the same keys and the same entries."""
        if not isinstance(other, Assoc):
            return False
        if self.shape != other.shape or self.nnz != other.nnz:
            return False
        if (self._val is None) != (other._val is None):
            return False
        same_keys = bool(
            np.array_equal(self._row, other._row) and np.array_equal(self._col, other._col)
        )
        if not same_keys:
            return False
        if self._val is not None and not np.array_equal(self._val, other._val):
            return False
        a, b = self._adj, other._adj
        return bool(
            np.array_equal(a.indptr, b.indptr)
            and np.array_equal(a.indices, b.indices)
            and np.array_equal(a.data, b.data)
        )

    # --- conversions within the algebra -------------------------------------

    def logical(self) -> Assoc:
        """Every entry replaced by 1 (numeric)."""
        adj = self._adj.copy()
        adj.data = np.ones_like(adj.data)
        return Assoc._make(self._row, self._col, None, adj)

    @property
    def T(self) -> Assoc:
        """The transpose."""
        return Assoc._make(self._col, self._row, self._val, self._adj.T.tocsr())

    def transpose(self) -> Assoc:
        return self.T

    def _numeric(self) -> Assoc:
        return self.logical() if self._val is not None else self

    def sum(self, axis: int | None = None) -> Assoc | float:
        """Sum of the entries (string values count 1): over all (``None``), down
        the columns (``axis=0``: one row, keyed 1 as MATLAB's ``sum(A, 1)``) or
        along the rows (``axis=1``: one column, keyed 1)."""
        a = self._numeric()
        if axis is None:
            return float(a._adj.sum())
        if axis not in (0, 1):
            raise AssocError(f"axis must be 0, 1 or None, not {axis!r}")
        one = np.array([1.0])
        if axis == 0:
            sums = np.asarray(a._adj.sum(axis=0)).ravel()
            return Assoc._from_coords(
                one, a._col, None, np.zeros(len(sums), np.int64), np.arange(len(sums)), sums
            )
        sums = np.asarray(a._adj.sum(axis=1)).ravel()
        return Assoc._from_coords(
            a._row, one, None, np.arange(len(sums)), np.zeros(len(sums), np.int64), sums
        )

    # --- indexing -------------------------------------------------------------

    def __getitem__(self, selection: Any) -> Assoc:
        if isinstance(selection, Assoc):
            return self._restrict_to(selection)
        if not isinstance(selection, tuple) or len(selection) != 2:
            raise AssocError(
                f"index an Assoc as A[rows, cols] (or A[B] with an Assoc B), not A[{selection!r}]"
            )
        rows = _keys.positions(self._row, selection[0], "row")
        cols = _keys.positions(self._col, selection[1], "column")
        adj, row, col = self._adj, self._row, self._col
        if rows is not None:
            adj, row = adj[rows], row[rows]
        if cols is not None:
            adj, col = adj[:, cols], col[cols]
        return Assoc._make(row, col, self._val, sp.csr_array(adj))

    def _restrict_to(self, pattern: Assoc) -> Assoc:
        """The entries of self where ``pattern`` has an entry (MATLAB's ``A(B)``)."""
        aligned = _Aligned(self, pattern)
        keep = np.isin(aligned.a_keys, aligned.b_keys, assume_unique=True)
        coo = self._adj.tocoo()  # in the order _Aligned read it
        r, c, v = coo.row[keep], coo.col[keep], coo.data[keep]
        return Assoc._from_coords(self._row, self._col, self._val, r, c, v)

    # --- value filters ----------------------------------------------------------

    def _compare(self, op: Callable[[Any, Any], Any], other: Any, symbol: str) -> Assoc:
        if isinstance(other, Assoc):
            raise AssocError(
                f"A {symbol} B compares an Assoc with a number or a string; "
                "to test two Assocs for equality use A.equals(B)"
            )
        adj = self._adj
        if self.nnz == 0:  # no values, so no kind of value to refuse
            return self
        if self._val is not None:
            if not isinstance(other, str):
                raise AssocError(
                    f"A {symbol} {other!r}: the values are strings; compare them with a string"
                )
            strings = at_ids(self._val, adj.data)
            keep = np.fromiter(
                (bool(op(s, other)) for s in strings.tolist()), dtype=bool, count=len(strings)
            )
        else:
            if isinstance(other, str) or not isinstance(
                other, (int, float, np.integer, np.floating)
            ):
                raise AssocError(
                    f"A {symbol} {other!r}: the values are numbers; compare them with a number"
                )
            keep = op(adj.data, float(other))
        coo = adj.tocoo()  # the entries in the order of adj.data
        return Assoc._from_coords(
            self._row, self._col, self._val, coo.row[keep], coo.col[keep], coo.data[keep]
        )

    def __eq__(self, other: Any) -> Assoc:  # type: ignore[override]
        return self._compare(operator.eq, other, "==")

    def __ne__(self, other: Any) -> Assoc:  # type: ignore[override]
        return self._compare(operator.ne, other, "!=")

    def __lt__(self, other: Any) -> Assoc:
        return self._compare(operator.lt, other, "<")

    def __le__(self, other: Any) -> Assoc:
        return self._compare(operator.le, other, "<=")

    def __gt__(self, other: Any) -> Assoc:
        return self._compare(operator.gt, other, ">")

    def __ge__(self, other: Any) -> Assoc:
        return self._compare(operator.ge, other, ">=")

    # --- element-wise algebra ---------------------------------------------------

    def __add__(self, other: Any) -> Assoc:
        """Union: numbers add; two string arrays keep the larger string."""
        a, b = _operands(self, other, "+", strings_stay=True)
        return _Aligned(a, b).combine("plus")

    def __sub__(self, other: Any) -> Assoc:
        """Numbers subtract; two string arrays give the entries in exactly one."""
        a, b = _operands(self, other, "-", strings_stay=True)
        return _Aligned(a, b).combine("minus")

    def __and__(self, other: Any) -> Assoc:
        """Intersection, keeping the smaller value (string: the smaller string)."""
        a, b = _operands(self, other, "&", strings_stay=True)
        return _Aligned(a, b).combine("and")

    def __or__(self, other: Any) -> Assoc:
        """Union, keeping the smaller non-zero value (string: the smaller string)."""
        a, b = _operands(self, other, "|", strings_stay=True)
        return _Aligned(a, b).combine("or")

    def __mul__(self, other: Any) -> Assoc:
        """Element-wise product on the intersection (strings count 1); or scaled by a number."""
        if isinstance(other, (int, float, np.integer, np.floating)) and not isinstance(other, bool):
            if np.isnan(other):
                raise AssocError("A * NaN: NaN is no value of an associative array")
            a = self._numeric()
            adj = a._adj.copy()
            adj.data = adj.data * float(other)
            return Assoc._make(a._row, a._col, None, adj)
        a, b = _operands(self, other, "*", strings_stay=False)
        return _Aligned(a, b).combine("times")

    def __rmul__(self, other: Any) -> Assoc:
        return self.__mul__(other)

    def multiply(self, other: Any) -> Assoc:
        """``A * B``: the element-wise product."""
        return self * other

    # --- matrix algebra ---------------------------------------------------------

    def __matmul__(self, other: Any) -> Assoc:
        """Matrix product over Col(A) ∩ Row(B); string values count 1; numeric result."""
        if not isinstance(other, Assoc):
            raise AssocError(f"A @ B needs two Assocs, not Assoc @ {type(other).__name__}")
        a, b = self._numeric(), other._numeric()
        ja, ib = _inner(a, b)
        if len(b._col) > _DENSE_ROW_LIMIT:
            # a row of B's width per thread would not fit: scipy's product
            adj = sp.csr_array(a._adj[:, ja] @ b._adj[ib, :])
            return Assoc._make(a._row, b._col, None, adj)
        from tesseradb import _core

        inner = np.full(len(a._col), -1, dtype=np.int64)
        inner[ja] = ib
        rows, cols, indptr, indices, data = _core.sparse_product(
            *csr_parts(a._adj), inner, *csr_parts(b._adj), len(b._col)
        )
        if len(data) == 0:
            return Assoc([], [], [])
        # the kernel drops empty rows, empty columns and zeros and sorts
        # each row's columns: the parts are canonical as they come
        adj = sp.csr_array((data, indices, indptr), shape=(len(rows), len(cols)))
        adj.has_canonical_format = True
        made = Assoc.__new__(Assoc)
        made._set(a._row[rows], b._col[cols], None, adj)
        return made

    def sqin(self) -> Assoc:
        """AᵀA."""
        return self.T @ self

    def sqout(self) -> Assoc:
        """AAᵀ."""
        return self @ self.T

    def catkeymul(self, other: Assoc) -> Assoc:
        """``A @ B`` whose values list the keys k joining row i to column j:
        ``"k1;k2;"`` (MATLAB's CatKeyMul)."""
        pairs = _Pairs(self, other)
        keys = _as_strings(pairs.common)
        return pairs.joined([keys[k] + ";" for k in pairs.k.tolist()])

    def catvalmul(self, other: Assoc) -> Assoc:
        """``A @ B`` whose values list the value pairs met on the way:
        ``"a1;b1;a2;b2;"`` (MATLAB's CatValMul)."""
        pairs = _Pairs(self, other)
        left = _as_strings(self._values_of(pairs.a_entries, pairs.a_adj))
        right = _as_strings(other._values_of(pairs.b_entries, pairs.b_adj))
        return pairs.joined([f"{x};{y};" for x, y in zip(left, right, strict=True)])

    def _values_of(self, entries: np.ndarray, adj: sp.csr_array) -> np.ndarray:
        data = adj.data[entries]
        return data if self._val is None else at_ids(self._val, data)

    # --- exchange with other libraries --------------------------------------------

    def to_scipy(self) -> sp.csr_array:
        """The numeric matrix (rows and columns in key order); string values refused."""
        if self._val is not None:
            raise AssocError("to_scipy needs numeric values; call .logical() first")
        return self._adj.copy()

    @classmethod
    def from_scipy(cls, matrix: Any, rows: Any = None, cols: Any = None) -> Assoc:
        """An Assoc of a scipy sparse matrix; keys default to the positions 0..n-1."""
        coo = sp.coo_array(matrix)
        nrows, ncols = coo.shape
        row_keys = (
            np.arange(nrows, dtype=np.float64) if rows is None else key_list(rows, nrows, "rows")
        )
        col_keys = (
            np.arange(ncols, dtype=np.float64) if cols is None else key_list(cols, ncols, "cols")
        )
        return cls(row_keys[coo.row], col_keys[coo.col], coo.data.astype(np.float64), "sum")

    def to_pandas(self) -> Any:
        """A pandas DataFrame of the triples: columns ``row``, ``col``, ``val``."""
        import pandas as pd

        rows, cols, vals = self.find()
        return pd.DataFrame({"row": rows, "col": cols, "val": vals})

    @classmethod
    def from_pandas(
        cls, frame: Any, row: str = "row", col: str = "col", val: str = "val", aggregate: Any = min
    ) -> Assoc:
        """An Assoc of a DataFrame's three columns."""
        missing = [name for name in (row, col, val) if name not in frame.columns]
        if missing:
            raise AssocError(f"the DataFrame has no column {missing[0]!r}")
        return cls(frame[row].to_numpy(), frame[col].to_numpy(), frame[val].to_numpy(), aggregate)

    def to_arrow(self) -> Any:
        """A pyarrow Table of the triples: columns ``row``, ``col``, ``val``."""
        import pyarrow as pa

        rows, cols, vals = self.find()
        return pa.table({"row": rows, "col": cols, "val": vals})

    @classmethod
    def from_arrow(
        cls, table: Any, row: str = "row", col: str = "col", val: str = "val", aggregate: Any = min
    ) -> Assoc:
        """An Assoc of an Arrow table's three columns."""
        missing = [name for name in (row, col, val) if name not in table.column_names]
        if missing:
            raise AssocError(f"the Arrow table has no column {missing[0]!r}")
        columns = [table.column(name).to_numpy(zero_copy_only=False) for name in (row, col, val)]
        return cls(*columns, aggregate)

    def to_graphblas(self) -> Any:
        """A python-graphblas Matrix of the numeric values (keys are ``row`` and ``col``)."""
        gb = _graphblas()
        coo = self.to_scipy().tocoo()
        return gb.Matrix.from_coo(
            coo.row, coo.col, coo.data, nrows=self.shape[0], ncols=self.shape[1]
        )

    @classmethod
    def from_graphblas(cls, matrix: Any, rows: Any = None, cols: Any = None) -> Assoc:
        """An Assoc of a python-graphblas Matrix; keys default to positions."""
        _graphblas()
        r, c, v = matrix.to_coo()
        coo = sp.coo_array((v, (r, c)), shape=(matrix.nrows, matrix.ncols))
        return cls.from_scipy(coo, rows, cols)

    # --- display ------------------------------------------------------------------

    def __repr__(self) -> str:
        kind = "string" if self._val is not None else "numeric"
        entries = "entry" if self.nnz == 1 else "entries"
        head = f"Assoc {self.shape[0]}x{self.shape[1]}, {self.nnz} {entries} ({kind} values)"
        if self.nnz == 0:
            return head
        rows_shown, cols_shown = min(self.shape[0], 12), min(self.shape[1], 8)
        sub = self._adj[:rows_shown, :cols_shown].toarray()
        cells = [[""] + [_cell(k) for k in self._col[:cols_shown].tolist()]]
        for i in range(rows_shown):
            line = [_cell(self._row[i])]
            for j in range(cols_shown):
                x = sub[i, j]
                if x == 0:
                    line.append(".")
                elif self._val is not None:
                    line.append(_cell(self._val[int(x) - 1]))
                else:
                    line.append(_cell(float(x)))
            cells.append(line)
        widths = [max(len(row[j]) for row in cells) for j in range(len(cells[0]))]
        lines = [head]
        for row in cells:
            text = "  ".join(
                c.ljust(w) if j == 0 else c.rjust(w)
                for j, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            lines.append(text.rstrip() + ("  …" if self.shape[1] > cols_shown else ""))
        if self.shape[0] > rows_shown:
            lines.append("…")
        return "\n".join(lines)


def Row(a: Assoc) -> KeyArray:
    """The row keys of ``a`` (D4M's ``Row(A)``), usable as a selector."""
    return a.row


def Col(a: Assoc) -> KeyArray:
    """The column keys of ``a`` (D4M's ``Col(A)``)."""
    return a.col


def Val(a: Assoc) -> np.ndarray:
    """The sorted unique values of ``a`` (D4M's ``Val(A)``)."""
    if a.val is not None:
        return a.val
    return np.unique(a._adj.data)


# --- helpers ------------------------------------------------------------------------


def _cell(x: Any) -> str:
    if isinstance(x, float):
        text = str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.6g}"
    else:
        text = str(x)
    return text if len(text) <= 14 else text[:13] + "…"


def _as_strings(values: np.ndarray) -> list[str]:
    if values.dtype == object:
        return values.tolist()
    return [str(int(x)) if float(x).is_integer() else repr(float(x)) for x in values.tolist()]


def _graphblas() -> Any:
    try:
        import graphblas
    except ImportError:
        raise AssocError(
            "python-graphblas is not installed: pip install python-graphblas"
        ) from None
    return graphblas


# Columns of B past which ``A @ B`` leaves the Rust kernel (a dense row of
# B's width, 12 bytes a column, per thread) for scipy's product.
_DENSE_ROW_LIMIT = 1 << 26


def _operands(a: Assoc, b: Any, symbol: str, strings_stay: bool) -> tuple[Assoc, Assoc]:
    """Both operands in MATLAB's terms: a string side meeting a numeric one
    becomes logical; two string sides stay strings where ``strings_stay``."""
    if not isinstance(b, Assoc):
        raise AssocError(f"A {symbol} B needs two Assocs, not Assoc {symbol} {type(b).__name__}")
    a_text, b_text = a._val is not None, b._val is not None
    if a_text and b_text and strings_stay:
        return a, b
    return a._numeric(), b._numeric()


class _Aligned:
    """Two Assocs on the union of their keys: each entry as one linear key
    (row place x columns + column place), ascending."""

    def __init__(self, a: Assoc, b: Assoc) -> None:
        self.row, a_rows, b_rows = _keys.merge(a._row, b._row, "row")
        self.col, a_cols, b_cols = _keys.merge(a._col, b._col, "column")
        self.val: np.ndarray | None = None
        ncols = max(len(self.col), 1)
        a_coo, b_coo = a._adj.tocoo(), b._adj.tocoo()
        self.a_keys = a_rows[a_coo.row] * ncols + a_cols[a_coo.col]
        self.b_keys = b_rows[b_coo.row] * ncols + b_cols[b_coo.col]
        a_values, b_values = a_coo.data, b_coo.data
        if a._val is not None and b._val is not None:
            # string ids renumbered into the union of both value lists
            self.val, a_at, b_at = _keys.merge(a._val, b._val, "value")
            a_values = (at_ids(a_at, a_values) + 1).astype(np.float64)
            b_values = (at_ids(b_at, b_values) + 1).astype(np.float64)
        self.a_values, self.b_values = a_values, b_values
        self.ncols = ncols

    def combine(self, how: str) -> Assoc:
        keys = np.union1d(self.a_keys, self.b_keys)
        a = np.zeros(len(keys))
        b = np.zeros(len(keys))
        in_a = np.zeros(len(keys), dtype=bool)
        in_b = np.zeros(len(keys), dtype=bool)
        at_a = np.searchsorted(keys, self.a_keys)
        at_b = np.searchsorted(keys, self.b_keys)
        a[at_a], in_a[at_a] = self.a_values, True
        b[at_b], in_b[at_b] = self.b_values, True
        text = self.val is not None
        if how == "plus":
            values, keep = (np.maximum(a, b) if text else a + b), in_a | in_b
        elif how == "minus":
            if text:
                values, keep = np.where(in_a, a, b), in_a ^ in_b
            else:
                values, keep = a - b, in_a | in_b
        elif how == "and":
            values, keep = np.minimum(a, b), in_a & in_b
        elif how == "or":
            values = np.where(in_a & in_b, np.minimum(a, b), np.where(in_a, a, b))
            keep = in_a | in_b
        elif how == "times":
            values, keep = a * b, in_a & in_b
        else:  # pragma: no cover - the operators above name every case
            raise AssertionError(how)
        keys, values = keys[keep], values[keep]
        return Assoc._from_coords(
            self.row, self.col, self.val, keys // self.ncols, keys % self.ncols, values
        )


def _inner(a: Assoc, b: Assoc) -> tuple[np.ndarray, np.ndarray]:
    """For A @ B: the column places of A and row places of B of their common keys."""
    _, a_at, b_at = _keys.merge(a._col, b._row, "inner (A's column / B's row)")
    common = np.intersect1d(a_at, b_at, assume_unique=True)
    return np.searchsorted(a_at, common), np.searchsorted(b_at, common)


class _Pairs:
    """Every (i, k, j) with A[i, k] and B[k, j] both entries, ordered by (i, j, k)."""

    def __init__(self, a: Assoc, b: Assoc) -> None:
        if not isinstance(b, Assoc):
            raise AssocError("catkeymul and catvalmul need two Assocs")
        ja, ib = _inner(a, b)
        self.a_row, self.b_col = a._row, b._col
        self.common = a._col[ja]
        self.a_adj = sp.csr_array(a._adj[:, ja])
        self.b_adj = sp.csr_array(b._adj[ib, :])
        self.a_adj.sort_indices()
        self.b_adj.sort_indices()
        a_rows = np.repeat(np.arange(self.a_adj.shape[0]), np.diff(self.a_adj.indptr))
        # each entry (i, k) of A meets the entries of row k of B
        b_entries, a_entries = expand_rows(self.b_adj.indptr, self.a_adj.indices)
        i, k, j = a_rows[a_entries], self.a_adj.indices[a_entries], self.b_adj.indices[b_entries]
        order = np.lexsort((k, j, i))
        self.i, self.j, self.k = i[order], j[order], k[order]
        self.a_entries, self.b_entries = a_entries[order], b_entries[order]

    def joined(self, pieces: list[str]) -> Assoc:
        if not pieces:
            return Assoc([], [], [])
        new = np.flatnonzero(np.r_[True, (self.i[1:] != self.i[:-1]) | (self.j[1:] != self.j[:-1])])
        ends = np.r_[new[1:], len(self.i)].tolist()
        values = ["".join(pieces[s:e]) for s, e in zip(new.tolist(), ends, strict=True)]
        return Assoc(self.a_row[self.i[new]], self.b_col[self.j[new]], values, "first")
