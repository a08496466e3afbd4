"""An associative array's sparse form: triples read and interned, then gathered into a
canonical CSR matrix (no stored zeros, no empty rows or columns, no unused string
values) by the Rust kernel; the helpers ``Assoc`` and ``AssocTable`` share."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import scipy.sparse as sp

from tesseradb.assoc import _keys
from tesseradb.assoc._keys import KeyArray
from tesseradb.errors import AssocError

__all__ = [
    "EMPTY_KEYS",
    "aggregate_name",
    "at_ids",
    "canonical",
    "csr_parts",
    "expand_rows",
    "interned_triples",
    "key_list",
    "triples_matrix",
]


_AGGREGATES: dict[Any, str] = {
    "min": "min",
    "max": "max",
    "sum": "sum",
    "first": "first",
    "last": "last",
    builtins.min: "min",
    builtins.max: "max",
    builtins.sum: "sum",
    np.min: "min",
    np.max: "max",
    np.sum: "sum",
}


EMPTY_KEYS = np.empty(0, dtype=object)


def _values_source(vals: Any) -> tuple[_keys.Source | None, np.ndarray | None, int]:
    """(source of string values or None, numeric values or None, length)."""
    source = _keys.key_source(vals, "values", values=True)
    if source.text:
        return source, None, source.length
    return None, source.kernel_input, source.length


def aggregate_name(aggregate: Any) -> str | None:
    """The kernel's name of an aggregate, None for a user's callable."""
    try:
        name = _AGGREGATES.get(aggregate)
    except TypeError:  # unhashable
        name = None
    if name is not None:
        return name
    if isinstance(aggregate, str) or not callable(aggregate):
        raise AssocError(
            f"aggregate {aggregate!r} is not min, max, sum, 'first', 'last' or a callable"
        )
    return None


def at_ids(items: Any, ids: np.ndarray) -> np.ndarray:
    """The items at 1-based ids: a string Assoc's matrix holds its values so
    (1-based, as MATLAB, so that no value is a stored zero)."""
    return items[(ids - 1).astype(np.int64)]


def expand_rows(indptr: np.ndarray, picked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entries of the picked rows of a CSR: (entry numbers, each entry's place in ``picked``)."""
    starts = np.asarray(indptr[picked], dtype=np.int64)
    counts = np.asarray(indptr[picked + 1], dtype=np.int64) - starts
    total = int(counts.sum())
    owner = np.repeat(np.arange(len(picked)), counts)
    step = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + step, owner


def _broadcast(ids: np.ndarray, n: int) -> np.ndarray:
    return np.full(n, ids[0], dtype=ids.dtype) if len(ids) == 1 and n != 1 else ids


def interned_triples(
    rows: Any, cols: Any, vals: Any, aggregate: str | None, arrow: bool = False
) -> tuple[Any, Any, Any, np.ndarray, np.ndarray, np.ndarray] | None:
    """Triples read and interned: (row keys, column keys, string values or None,
    row ids, column ids, values), or None when there are none.

    Values are float64; string values are 1-based ids into the sorted string
    values, and triples whose value is the empty string are dropped. With
    ``arrow``, string keys and values are pyarrow large string arrays.
    """
    row_source = _keys.key_source(rows, "row keys")
    col_source = _keys.key_source(cols, "column keys")
    val_source, numbers, nvals = _values_source(vals)
    lengths = (row_source.length, col_source.length, nvals)
    n = max(lengths)
    if any(length not in (1, n) for length in lengths):
        raise AssocError(
            f"{lengths[0]} row keys, {lengths[1]} column keys and {lengths[2]} values: "
            "triples need as many of each (or one, which is repeated)"
        )
    if n == 0 or 0 in lengths:
        return None
    if val_source is not None and aggregate == "sum":
        raise AssocError("aggregate sum needs numeric values; these values are strings")
    sources = [row_source, col_source] + ([val_source] if val_source is not None else [])
    interned = _keys.intern(sources, ["row keys", "column keys", "values"], arrow)
    (row_keys, row_ids), (col_keys, col_ids) = interned[0], interned[1]
    row_ids, col_ids = _broadcast(row_ids, n), _broadcast(col_ids, n)
    val_keys: Any = None
    if val_source is not None:
        val_keys, val_ids = interned[2]
        val_ids = _broadcast(val_ids, n)
        first = (val_keys[0].as_py() if arrow else val_keys[0]) if len(val_keys) else None
        if first == "":
            # the empty string is no value: its triples are not entries
            keep = val_ids != 0
            row_ids, col_ids, val_ids = row_ids[keep], col_ids[keep], val_ids[keep]
            val_keys = val_keys[1:]
            values = val_ids.astype(np.float64)
        else:
            values = (val_ids + 1).astype(np.float64)
    else:
        assert numbers is not None
        values = _broadcast(numbers, n)
    return row_keys, col_keys, val_keys, row_ids, col_ids, values


def triples_matrix(
    rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int], aggregate: str
) -> sp.csr_array:
    from tesseradb import _core

    indptr, indices, data = _core.triples_csr(
        np.ascontiguousarray(rows, dtype=np.int64),
        np.ascontiguousarray(cols, dtype=np.int64),
        np.ascontiguousarray(vals, dtype=np.float64),
        shape[0],
        shape[1],
        aggregate,
    )
    adj = sp.csr_array((data, indices, indptr), shape=shape)
    adj.has_canonical_format = True
    return adj


def csr_parts(adj: sp.csr_array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, indices, data) of a CSR matrix as int64, int64, float64."""
    return (
        np.ascontiguousarray(adj.indptr, dtype=np.int64),
        np.ascontiguousarray(adj.indices, dtype=np.int64),
        np.ascontiguousarray(adj.data, dtype=np.float64),
    )


def canonical(
    row: KeyArray, col: KeyArray, val: np.ndarray | None, adj: sp.csr_array
) -> tuple[KeyArray, KeyArray, np.ndarray | None, sp.csr_array]:
    """The parts with stored zeros, empty rows and columns, and unused string values removed."""
    adj = sp.csr_array(adj)
    if not adj.has_canonical_format:
        adj.sum_duplicates()
    adj.eliminate_zeros()
    keep_rows = np.diff(adj.indptr) > 0
    if not keep_rows.all():
        adj, row = adj[keep_rows], row[keep_rows]
    keep_cols = np.bincount(adj.indices, minlength=adj.shape[1]) > 0
    if not keep_cols.all():
        adj, col = adj[:, keep_cols], col[keep_cols]
    adj = sp.csr_array(adj)
    adj.sort_indices()
    if adj.nnz == 0:
        return EMPTY_KEYS, EMPTY_KEYS, None, sp.csr_array((0, 0))
    if val is not None:
        used = np.unique(adj.data.astype(np.int64))
        if len(used) != len(val):
            adj.data = (np.searchsorted(used, adj.data.astype(np.int64)) + 1).astype(np.float64)
            val = val[used - 1]
    return row, col, val, adj


def key_list(keys: Any, n: int, what: str) -> np.ndarray:
    source = _keys.key_source(keys, what)
    if source.length != n:
        raise AssocError(f"{n} {what} in the matrix but {source.length} keys given")
    if source.text:
        items = _keys.d4m_items(keys, what) if isinstance(keys, str) else list(keys)
        array = np.empty(n, dtype=object)
        array[:] = [str(x) for x in items]
        return array
    return np.asarray(source.kernel_input, dtype=np.float64)
