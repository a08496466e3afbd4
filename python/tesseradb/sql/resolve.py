"""Resolving a statement's names: its analysis, with the relations it reads.

The analysis (``analysis.py``, cached per text) finds what sqlglot can; this
module adds what needs the database's names: conditions on JSON paths stay
only for relations that filter by them, relations read through plain views
are read whole, and a text sqlglot cannot parse reads whole every relation it
may name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tesseradb.sql.analysis import RelationUse
from tesseradb.sql.diagnostics import syntax_error
from tesseradb.sql.paths import JsonPath
from tesseradb.sql.predicate import Predicate
from tesseradb.sql.relation import PathFiltering, can

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from tesseradb.sql.analysis import Analysis
    from tesseradb.sql.analysis_cache import AnalysisCache
    from tesseradb.sql.relation import Namespace

__all__ = ["analyse", "referenced_names", "without_pushdown"]


def analyse(
    namespace: Namespace,
    analyses: AnalysisCache,
    connection: duckdb.DuckDBPyConnection,
    text: str,
    params: Any,
    view_sql: Callable[[str], str | None],
) -> Analysis:
    """``text``'s analysis (cached per text): the relations it reads, with the columns and
    predicate each scan is given. A text sqlglot cannot parse but DuckDB can reads every
    relation it may name whole; one neither can parse is a :class:`SQLSyntaxError`.
    ``view_sql`` gives a plain view's definition (relations read through it are read
    whole)."""

    def schema_of(name: str) -> pa.Schema | None:
        relation = namespace.relation(name)
        return relation.schema() if relation is not None else None

    analysis = analyses.analyse(text, params, schema_of, namespace.columns_of)
    if analysis.parsed:
        _keep_paths_for_path_filtering(namespace, analysis)
        _read_through_views(namespace, analysis, view_sql)
        return analysis
    # sqlglot does not know every DuckDB construct: if DuckDB parses the
    # text, run it without pushdown; otherwise report the syntax error.
    import duckdb

    try:
        connection.extract_statements(text)
    except duckdb.Error as err:
        raise syntax_error(text, analysis.parse_error, err) from None
    names = referenced_names(text)
    relations = {}
    for name in names:
        relation = namespace.relation(name)
        if relation is not None:
            relations[name] = RelationUse(
                name=relation.name,
                columns=None,
                references=1,
                notes=["read whole: statement not understood by the pushdown analysis"],
            )
    analysis.relations = relations
    analysis.table_names = names - set(relations)
    _read_through_views(namespace, analysis, view_sql)
    return analysis


def _read_through_views(
    namespace: Namespace, analysis: Analysis, view_sql: Callable[[str], str | None]
) -> None:
    """A plain view may read relations (``CREATE VIEW v AS SELECT ... FROM rel``): DuckDB
    binds its body at each statement, so the relations it names (through views over
    views too) are read whole for the statement, as any name it does not understand."""
    views = [n for n in analysis.table_names if namespace.kind_of(n) == "view"]
    seen: set[str] = set()
    while views:
        view = views.pop().lower()
        if view in seen:
            continue
        seen.add(view)
        body = view_sql(view)
        if body is None:
            continue
        for name in referenced_names(body):
            if name in analysis.relations or name in seen:
                continue
            relation = namespace.relation(name)
            if relation is not None:
                analysis.relations[name] = RelationUse(
                    name=relation.name,
                    columns=None,
                    references=1,
                    notes=[f"read whole: through the view {view}"],
                )
            elif namespace.kind_of(name) == "view":
                views.append(name)
    if seen:  # (a statement over a view is DuckDB's to answer)
        analysis.drop_shortcuts()


def _keep_paths_for_path_filtering(namespace: Namespace, analysis: Analysis) -> None:
    """Conditions on paths into JSON columns (:class:`JsonPath` keys) stay only in the
    predicates of relations that narrow by them (:class:`PathFiltering`)."""
    for use in analysis.relations.values():
        paths = {c: JsonPath.parse(c) for c in use.predicate}
        if not any(paths.values()):
            continue
        relation = namespace.relation(use.name)
        columns: set[str] = (
            {c.lower() for c in relation.path_columns()} if can(relation, PathFiltering) else set()
        )
        use.predicate = use.predicate.restricted_to(
            lambda c, paths=paths, columns=columns: (
                paths[c] is None or paths[c].column.lower() in columns  # type: ignore[union-attr]
            )
        )


def referenced_names(text: str) -> set[str]:
    """Table names a statement may read, when sqlglot could not parse it (lower case).

    DuckDB's own answer where it can give one; otherwise (it refuses texts
    with parameters) every identifier and dotted pair in the text: reading a
    relation that is not used costs time, never answers.
    """
    import duckdb

    try:
        return {n.lower() for n in duckdb.get_table_names(text)}
    except duckdb.Error:
        pass
    words = re.findall(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_]*)', text)
    names = [quoted.replace('""', '"') or plain for quoted, plain in words]
    dotted = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)", text)
    return {n.lower() for n in names} | {f"{a}.{b}".lower() for a, b in dotted}


def without_pushdown(analysis: Analysis) -> None:
    """A setting changes how DuckDB compares, sorts or converts: no relation answers
    the statement itself, and every scan gives every row (columns are still pruned)."""
    analysis.drop_shortcuts()
    analysis.equijoins = []
    for use in analysis.relations.values():
        use.predicate = Predicate()
        note = "no pushdown: a setting that changes answers is not at its default"
        if note not in use.notes:
            use.notes.append(note)
