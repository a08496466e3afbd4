"""Associative arrays (D4M): string-keyed sparse matrices and their algebra.

``Assoc(rows, cols, vals)`` builds one from triples, with keys interned in
Rust; ``A[rows, cols]`` selects by keys, ranges, prefixes or positions; the
operators follow MATLAB D4M (``docs/assoc.md`` has the table of semantics).
"""

from __future__ import annotations

from tesseradb.assoc._assoc import Assoc, Col, Row, Val
from tesseradb.assoc._keys import StartsWith
from tesseradb.errors import AssocError, AssocIndexError

__all__ = ["Assoc", "AssocError", "AssocIndexError", "Col", "Row", "StartsWith", "Val"]
