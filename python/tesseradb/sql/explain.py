"""EXPLAIN for the engine's part of a statement: per relation, the columns it reads,
the predicate pushed into its scan, its estimate, and notes on shortcuts taken."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tesseradb.sql.relation import Aggregating, Ranking, ScanDescribing, can
from tesseradb.sql.semijoin import reduce_semijoins

if TYPE_CHECKING:
    from tesseradb.sql.analysis import Analysis, RelationUse
    from tesseradb.sql.predicate import Predicate
    from tesseradb.sql.relation import Estimate, Namespace, Relation, ScanStats

__all__ = ["Explain", "ExplainedRelation", "explain"]


@dataclass
class ExplainedRelation:
    name: str
    aliases: list[str]
    columns: list[str] | None
    predicate: Predicate
    estimate: Estimate
    notes: list[str] = field(default_factory=list)
    stats: ScanStats | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aliases": self.aliases,
            "columns": self.columns,
            "predicate": str(self.predicate),
            "estimated_rows": self.estimate.rows,
            "estimated_bytes": self.estimate.bytes,
            "notes": self.notes,
        }


@dataclass
class Explain:
    """What a statement reads from each relation: the pushed-down predicate and columns."""

    sql: str
    relations: list[ExplainedRelation]
    pushdown: bool
    note: str = ""

    def relation(self, name: str) -> ExplainedRelation:
        for rel in self.relations:
            if rel.name.lower() == name.lower():
                return rel
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "sql": self.sql,
            "pushdown": self.pushdown,
            "note": self.note,
            "relations": [r.as_dict() for r in self.relations],
        }

    def __str__(self) -> str:
        lines = []
        if self.note:
            lines.append(self.note)
        if not self.relations:
            lines.append("no relations read (plain tables and table functions only)")
        for rel in self.relations:
            alias = (
                f" (as {', '.join(rel.aliases)})"
                if rel.aliases and rel.aliases != [rel.name.lower()]
                else ""
            )
            cols = "all columns" if rel.columns is None else ", ".join(rel.columns) or "(none)"
            lines.append(f"relation {rel.name}{alias}")
            lines.append(f"  columns:   {cols}")
            lines.append(f"  predicate: {rel.predicate}")
            est = rel.estimate
            if est.rows is not None or est.bytes is not None:
                lines.append(
                    f"  estimate:  {est.rows if est.rows is not None else '?'} rows, "
                    f"{est.bytes if est.bytes is not None else '?'} bytes"
                )
            for note in rel.notes:
                lines.append(f"  note:      {note}")
        return "\n".join(lines)


def explain(namespace: Namespace, text: str, analysis: Analysis) -> Explain:
    """What the engine would do with ``text``: per relation, what it reads and why (after
    semi-join reduction, which narrows ``analysis``)."""
    reduce_semijoins(namespace, analysis)
    relations = []
    native = analysis.aggregate_only
    for use in analysis.relations.values():
        relation = namespace.relation(use.name)
        if relation is None:
            continue
        if native is not None and can(relation, Aggregating):
            use.notes.append(
                "aggregates computed from storage, no rows made (when the relation can)"
            )
        if analysis.lookup is not None:
            use.notes.append("answered from the scan, filtered exactly: no DuckDB statement")
        if analysis.join is not None:
            use.notes.append(
                "joined by the engine from the scans, filtered exactly: no DuckDB statement"
            )
        top = analysis.top
        if top is not None and can(relation, Ranking):
            use.notes.append(
                f"ORDER BY {top.order} LIMIT {top.count}: only the first rows in that "
                "order are read, where the relation reads them from an index"
            )
        relations.append(
            ExplainedRelation(
                name=relation.name,
                aliases=use.aliases,
                columns=use.columns,
                predicate=use.predicate,
                estimate=relation.estimate(None if use.predicate.is_true else use.predicate),
                notes=list(use.notes) + list(_describe(relation, use)),
            )
        )
    note = ""
    if not analysis.parsed:
        note = f"sqlglot could not parse this statement, so nothing is pushed down ({analysis.parse_error})"
    return Explain(text, relations, pushdown=analysis.parsed, note=note)


def _describe(relation: Relation, use: RelationUse) -> list[str]:
    if not can(relation, ScanDescribing):
        return []
    return [str(line) for line in relation.describe_scan(use.columns, use.predicate)]
