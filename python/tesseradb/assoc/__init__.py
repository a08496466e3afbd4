"""Associative arrays (D4M): string-keyed sparse matrices, their algebra and
their persistent tables.

``Assoc(rows, cols, vals)`` builds one from triples, with keys interned in
Rust; ``A[rows, cols]`` selects by keys, ranges, prefixes or positions; the
operators follow MATLAB D4M (``docs/assoc.md`` has the table of semantics).
``db.create_assoc_table`` keeps triples on disk in D4M 2.0's schema
(:class:`AssocTable`). ``parallel_ingest`` puts triples into an array with
several writer processes, as one version.
"""

from __future__ import annotations

from tesseradb.assoc._assoc import Assoc, Col, Row, Val
from tesseradb.assoc._ingest import ImageSlice, Ingested, parallel_ingest
from tesseradb.assoc._keys import StartsWith
from tesseradb.assoc._kind import AssocTableKind
from tesseradb.assoc._table import AssocTable, table_options
from tesseradb.errors import AssocError, AssocIndexError

__all__ = [
    "Assoc",
    "AssocError",
    "AssocIndexError",
    "AssocTable",
    "AssocTableKind",
    "Col",
    "ImageSlice",
    "Ingested",
    "Row",
    "StartsWith",
    "Val",
    "parallel_ingest",
    "table_options",
]
