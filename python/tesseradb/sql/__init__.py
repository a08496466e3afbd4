"""The SQL front end: relations, predicates, pushdown analysis, execution on DuckDB."""

from __future__ import annotations

from tesseradb.sql.engine import SQLEngine
from tesseradb.sql.explain import Explain, ExplainedRelation
from tesseradb.sql.predicate import ColumnDomain, Interval, Predicate, RangeSet
from tesseradb.sql.relation import ArrowRelation, Estimate, Relation, RelationScan, ScanStats
from tesseradb.sql.result import Result

__all__ = [
    "ArrowRelation",
    "ColumnDomain",
    "Estimate",
    "Explain",
    "ExplainedRelation",
    "Interval",
    "Predicate",
    "RangeSet",
    "Relation",
    "RelationScan",
    "Result",
    "SQLEngine",
    "ScanStats",
]
