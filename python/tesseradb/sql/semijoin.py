"""Semi-join reduction: a relation narrowed to the join keys of a selective partner.

SDS/Q's index semi-join: before DuckDB joins ``a`` with a selective ``b``,
the distinct keys of ``b``'s matching rows are read and handed to ``a``'s
scan as ``x IN (...)``, so a relation with a bitmap index on ``x`` reads only
the rows that can join. The engine calls :func:`reduce_semijoins` on every
statement's analysis before it makes the scans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb.sql.predicate import Predicate

if TYPE_CHECKING:
    from tesseradb.sql.analysis import Analysis, RelationUse
    from tesseradb.sql.relation import Namespace, Relation

__all__ = ["SEMIJOIN_MAX_KEYS", "SEMIJOIN_SELECTIVITY", "reduce_semijoins"]

# A partner narrows a relation only if it is at least this many times smaller (by
# estimate), and its keys are handed over up to this many.
SEMIJOIN_SELECTIVITY = 2


SEMIJOIN_MAX_KEYS = 1_000_000


def reduce_semijoins(namespace: Namespace, analysis: Analysis) -> None:
    """Narrow relations to the join keys of selective partners (semi-join reduction).

    For an equi-join ``a.x = b.y`` that lets ``a`` be narrowed (an inner
    join, the right side of a LEFT or ANTI join), when ``b`` is selective
    (its predicate or an earlier reduction leaves it far smaller than
    ``a``), the distinct ``y`` of ``b``'s rows are read first and given to
    ``a``'s scan as ``x IN (...)``: a relation with a bitmap index on ``x``
    then reads only the rows that can join (SDS/Q's index semi-join).
    Rows of ``a`` without a partner in ``b`` cannot be in the answer, and
    ``b``'s keys come from a superset of its matching rows, so the scan
    stays a superset. Each relation is narrowed at most once, the most
    selective partner first, so reductions chain along the joins.
    """
    uses = analysis.relations
    if len(uses) < 2 or not analysis.equijoins:
        return
    relations = {k: namespace.relation(u.name) for k, u in uses.items()}
    estimates: dict[str, int | None] = {}

    def rows(key: str) -> int | None:
        if key not in estimates:
            relation = relations.get(key)
            pred = uses[key].predicate
            estimates[key] = (
                None if relation is None else relation.estimate(None if pred.is_true else pred).rows
            )
        return estimates[key]

    narrowed: set[str] = set()
    for _ in range(len(uses)):
        best: tuple[int, str, str, str, str] | None = None
        for edge in analysis.equijoins:
            for target, tcol, source, scol, allowed in (
                (edge.left, edge.left_column, edge.right, edge.right_column, edge.reduce_left),
                (edge.right, edge.right_column, edge.left, edge.left_column, edge.reduce_right),
            ):
                if not allowed or target in narrowed or target not in uses or source not in uses:
                    continue
                if (
                    uses[target].references != 1
                    or relations.get(target) is None
                    or relations.get(source) is None
                ):
                    continue
                if uses[source].predicate.is_true and source not in narrowed:
                    continue  # an unfiltered partner narrows nothing
                src_rows, tgt_rows = rows(source), rows(target)
                if src_rows is None or tgt_rows is None or src_rows > SEMIJOIN_MAX_KEYS:
                    continue
                if src_rows * SEMIJOIN_SELECTIVITY > tgt_rows:
                    continue
                if best is None or src_rows < best[0]:
                    best = (src_rows, target, tcol, source, scol)
        if best is None:
            return
        _, target, tcol, source, scol = best
        keys, rows_read = _distinct_keys(relations[source], scol, uses[source])  # type: ignore[arg-type]
        if rows_read is not None:
            analysis.prefetched[source] = (uses[source].predicate, rows_read)
        narrowed.add(target)
        if keys is None:
            continue
        uses[target].predicate = uses[target].predicate.and_(
            Predicate.isin(tcol, keys, distinct=True)
        )
        uses[target].notes.append(
            f"semi-join: {tcol} in the {len(keys):,} distinct {scol} of {uses[source].name} "
            f"(its predicate: {uses[source].predicate})"
        )
        estimates.pop(target, None)


def _distinct_keys(relation: Relation, column: str, use: RelationUse) -> tuple[Any, Any]:
    """The distinct non-NULL values of ``column`` over the rows ``use.predicate`` allows.

    Also returns what was read, when it holds every column the statement
    needs from the relation: its scan for DuckDB then reuses it.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    predicate = use.predicate
    needed = None if use.columns is None else {c.lower() for c in use.columns}
    filtered = {c.lower() for c in predicate}  # (domains match names case-insensitively)
    wanted = [
        name
        for name in relation.schema().names
        if needed is None
        or name.lower() in needed
        or name.lower() == column.lower()
        or name.lower() in filtered
    ]
    read = relation.scan(wanted, None if predicate.is_true else predicate).read_all()
    mask = predicate.mask(read)
    table = read.filter(mask) if mask is not None else read
    values = pc.unique(
        table.column(next(w for w in wanted if w.lower() == column.lower()))
    ).drop_null()
    if len(values) > SEMIJOIN_MAX_KEYS:
        return None, read
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        return np.asarray(values.to_pylist(), dtype=str), read
    return values.to_numpy(zero_copy_only=False), read
