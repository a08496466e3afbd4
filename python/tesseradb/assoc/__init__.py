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

from typing import TYPE_CHECKING

from tesseradb._lazy import exports

if TYPE_CHECKING:
    from tesseradb.assoc._assoc import Assoc, Col, Row, Val
    from tesseradb.assoc._ingest import ImageSlice, Ingested, parallel_ingest
    from tesseradb.assoc._keys import StartsWith
    from tesseradb.assoc._kind import AssocTableKind
    from tesseradb.assoc._methods import AssocMethods
    from tesseradb.assoc._table import AssocTable, table_options

from tesseradb.errors import AssocError, AssocIndexError

__all__ = [
    "Assoc",
    "AssocError",
    "AssocIndexError",
    "AssocMethods",
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

# each name imported from its module when first used (tesseradb._lazy)
__getattr__, __dir__ = exports(
    __name__,
    {
        "AssocMethods": "tesseradb.assoc._methods",
        "Assoc": "tesseradb.assoc._assoc",
        "Col": "tesseradb.assoc._assoc",
        "Row": "tesseradb.assoc._assoc",
        "Val": "tesseradb.assoc._assoc",
        "ImageSlice": "tesseradb.assoc._ingest",
        "Ingested": "tesseradb.assoc._ingest",
        "parallel_ingest": "tesseradb.assoc._ingest",
        "StartsWith": "tesseradb.assoc._keys",
        "AssocTableKind": "tesseradb.assoc._kind",
        "AssocTable": "tesseradb.assoc._table",
        "table_options": "tesseradb.assoc._table",
    },
)
