"""Documents: JSON collections on relational backends (Argo/1, Argo/3) queried with Argo/SQL.

A collection lives on SQLite or DuckDB (files in the database directory) or
on a PostgreSQL or MySQL/MariaDB server. Objects are flattened into typed
rows (:mod:`._keys`) under one of the paper's two mappings
(:mod:`._mappings`); Argo/SQL (:mod:`._argosql`) is translated to SQL on the
backend (:mod:`._plan`, :mod:`._collection`) and answers come back as
rebuilt objects. A collection is also a relation (``objid``, ``doc``) for
``db.sql``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tesseradb._lazy import exports

if TYPE_CHECKING:
    from tesseradb.documents._argosql import Insert, Select, parse_statement
    from tesseradb.documents._collection import Collection
    from tesseradb.documents._keys import DocumentLimits, flatten_document, rebuild_documents
    from tesseradb.documents._kind import CollectionKind
    from tesseradb.documents._mappings import MAPPINGS
    from tesseradb.documents._methods import CollectionMethods
    from tesseradb.documents._store import DEFAULT_BACKEND, DEFAULT_MAPPING, DocumentStore


__all__ = [
    "DEFAULT_BACKEND",
    "DEFAULT_MAPPING",
    "MAPPINGS",
    "Collection",
    "CollectionKind",
    "CollectionMethods",
    "DocumentLimits",
    "DocumentStore",
    "Insert",
    "Select",
    "flatten_document",
    "parse_statement",
    "rebuild_documents",
]

# each name imported from its module when first used (tesseradb._lazy)
__getattr__, __dir__ = exports(
    __name__,
    {
        "CollectionMethods": "tesseradb.documents._methods",
        "Insert": "tesseradb.documents._argosql",
        "Select": "tesseradb.documents._argosql",
        "parse_statement": "tesseradb.documents._argosql",
        "Collection": "tesseradb.documents._collection",
        "DocumentLimits": "tesseradb.documents._keys",
        "flatten_document": "tesseradb.documents._keys",
        "rebuild_documents": "tesseradb.documents._keys",
        "CollectionKind": "tesseradb.documents._kind",
        "MAPPINGS": "tesseradb.documents._mappings",
        "DEFAULT_BACKEND": "tesseradb.documents._store",
        "DEFAULT_MAPPING": "tesseradb.documents._store",
        "DocumentStore": "tesseradb.documents._store",
    },
)
