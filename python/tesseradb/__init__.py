"""TesseraDB: an embedded scientific data management system.

One database directory, five data models (arrays, record streams, JSON
documents, associative arrays, attached HDF5 files) and one SQL over all of
them. Start with :func:`connect`::

    import tesseradb
    with tesseradb.connect("my.tdb") as db:
        db.sql("CREATE TABLE t AS SELECT range AS x FROM range(10)")
        print(db.sql("SELECT sum(x) FROM t").fetchall())

Importing this package is cheap: DuckDB, pyarrow, sqlglot and the storage
libraries load only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb import errors
from tesseradb._core import __version__
from tesseradb.errors import TesseraError

if TYPE_CHECKING:
    from tesseradb.assoc import Assoc
    from tesseradb.database import Database, connect
    from tesseradb.sql import ArrowRelation, Predicate, Relation, Result

__all__ = [
    "ArrowRelation",
    "Assoc",
    "Database",
    "Predicate",
    "Relation",
    "Result",
    "TesseraError",
    "__version__",
    "connect",
    "errors",
]

_LAZY = {
    "Assoc": "tesseradb.assoc",
    "connect": "tesseradb.database",
    "Database": "tesseradb.database",
    "ArrowRelation": "tesseradb.sql",
    "Predicate": "tesseradb.sql",
    "Relation": "tesseradb.sql",
    "Result": "tesseradb.sql",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tesseradb' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
