"""The relation conformance suite: what every relation kind must do, as tests to subclass.

A data model's relations meet the :class:`~tesseradb.sql.relation.Relation`
contract and may offer capabilities (counting, native aggregates, sessions,
scan descriptions). ``RelationTests`` checks the contract and every
capability a kind declares against the plain answer (the rows the relation
holds, filtered by Arrow), the way zarr-python ships ``StoreTests``::

    class TestMyRelation(RelationTests):
        capabilities = frozenset({"count"})

        def make(self, db, folder, data):
            ...  # store ``data`` as an object of the kind
            return "name_of_the_relation", data_as_the_relation_shows_it

``data`` has an int64 column ``k`` (0 .. n-1, each once) and a float64
column ``v``. The relation's ``key`` column (``k`` unless the subclass
says otherwise: a collection's is ``objid``) holds consecutive distinct
integers; the tests filter, count and join on it. A kind with the
``paths`` capability holds the rows as JSON documents in its first path
column, and is filtered by ``k`` inside them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tesseradb
from tesseradb.sql.paths import JsonPath
from tesseradb.sql.predicate import ColumnDomain, Interval, Predicate, RangeSet, type_class
from tesseradb.sql.relation import (
    Aggregating,
    Counting,
    Estimate,
    PathFiltering,
    PathReading,
    Ranking,
    Relation,
    ScanDescribing,
    SessionHolding,
)

if TYPE_CHECKING:
    from tesseradb.database import Database

__all__ = ["CAPABILITIES", "RelationTests", "conformance_data"]

# capability name -> the protocol a relation with it satisfies
CAPABILITIES: dict[str, type] = {
    "count": Counting,
    "aggregate": Aggregating,
    "session": SessionHolding,
    "describe_scan": ScanDescribing,
    "paths": PathFiltering,
    "path_values": PathReading,
    "top": Ranking,
}

ROWS = 300
KEY = "k"


def conformance_data(rows: int = ROWS) -> pa.Table:
    """The rows every kind stores: ``k`` 0..rows-1 and ``v`` (with a NaN and repeated values)."""
    k = list(range(rows))
    v = [float(i % 17) / 4 for i in k]
    v[rows // 2] = math.nan
    return pa.table({"k": pa.array(k, pa.int64()), "v": pa.array(v, pa.float64())})


def _rows(table: pa.Table | pa.RecordBatchReader) -> Counter[tuple[Any, ...]]:
    """The rows as a multiset (NaN made comparable)."""
    if isinstance(table, pa.RecordBatchReader):
        table = table.read_all()

    def key(value: Any) -> Any:
        return "NaN" if isinstance(value, float) and math.isnan(value) else value

    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return Counter(tuple(key(c[i]) for c in columns) for i in range(table.num_rows))


_bounds = st.integers(min_value=-5, max_value=ROWS + 5)


@st.composite
def predicates(draw: st.DrawFn, key: str, value: str | None) -> Predicate:
    """A range, an IN-list or FALSE on ``key``, sometimes with a lower bound on ``value``
    (which may let NULLs through)."""
    shape = draw(st.sampled_from(["range", "in", "false"]))
    if shape == "range":
        lo, hi = sorted(draw(st.tuples(_bounds, _bounds)))
        predicate = Predicate.between(key, lo, hi)
    elif shape == "in":
        predicate = Predicate.isin(key, draw(st.lists(_bounds, min_size=1, max_size=6)))
    else:
        predicate = Predicate.false()
    if value is not None and draw(st.booleans()):
        lower = Interval(draw(st.floats(-1, 5)), None)
        domain = ColumnDomain(RangeSet.of([lower]), nulls=draw(st.booleans()))
        predicate = predicate.and_(Predicate.on(value, domain))
    return predicate


# each subclass runs the same test methods (different executors); they keep no state on self
_examples = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.differing_executors],
)


class RelationTests:
    """The conformance tests; a subclass per relation kind says how to make one."""

    capabilities: ClassVar[frozenset[str]] = frozenset()
    key: ClassVar[str] = KEY
    value: ClassVar[str | None] = "v"  # a float column the predicates may also restrict

    def make(self, db: Database, folder: Path, data: pa.Table) -> tuple[str, pa.Table]:
        """Store ``data`` as a relation of the kind; its name and the rows it must show."""
        raise NotImplementedError

    # --- the fixture: one relation per test class ---------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def made(
        cls, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[tuple[Database, Relation, pa.Table]]:
        folder = tmp_path_factory.mktemp(cls.__name__)
        db = tesseradb.connect(folder / "db")
        try:
            name, expected = cls().make(db, folder, conformance_data())
            relation = db.relation(name)
            assert relation is not None, f"{name!r} is not a relation of the database"
            yield db, relation, expected
        finally:
            db.close()

    # --- the contract ------------------------------------------------------------
    def test_is_a_relation_with_the_expected_columns(
        self, made: tuple[Database, Relation, pa.Table]
    ) -> None:
        _, relation, expected = made
        assert isinstance(relation, Relation)
        schema = relation.schema()
        assert isinstance(schema, pa.Schema)
        assert schema.names == expected.schema.names

    def test_declares_exactly_its_capabilities(
        self, made: tuple[Database, Relation, pa.Table]
    ) -> None:
        _, relation, _ = made
        has = {name for name, protocol in CAPABILITIES.items() if isinstance(relation, protocol)}
        assert has == set(self.capabilities)

    def test_a_scan_reads_every_row(self, made: tuple[Database, Relation, pa.Table]) -> None:
        _, relation, expected = made
        assert _rows(relation.scan(None, None)) == _rows(expected)

    def test_a_scan_reads_again(self, made: tuple[Database, Relation, pa.Table]) -> None:
        _, relation, _ = made
        assert _rows(relation.scan([self.key], None)) == _rows(relation.scan([self.key], None))

    def test_a_scan_gives_the_columns_asked_for(
        self, made: tuple[Database, Relation, pa.Table]
    ) -> None:
        _, relation, expected = made
        for column in reversed(expected.schema.names):
            scanned = relation.scan([column], None).read_all()
            assert scanned.schema.names == [column]
            assert scanned.schema.field(column).type == relation.schema().field(column).type
            assert _rows(scanned) == _rows(expected.select([column]))

    @given(data=st.data())
    @_examples
    def test_a_scan_under_a_predicate_is_a_superset_and_never_invents_rows(
        self, made: tuple[Database, Relation, pa.Table], data: st.DataObject
    ) -> None:
        predicate = data.draw(predicates(self.key, self.value))
        _, relation, expected = made
        scanned = relation.scan(None, predicate).read_all()
        held = _rows(expected)
        assert not (_rows(scanned) - held), "the scan made rows the relation does not hold"
        assert _rows(predicate.filter(scanned)) == _rows(predicate.filter(expected))

    @given(data=st.data())
    @_examples
    def test_an_estimate_is_an_estimate(
        self, made: tuple[Database, Relation, pa.Table], data: st.DataObject
    ) -> None:
        predicate = data.draw(predicates(self.key, self.value))
        _, relation, expected = made
        estimate = relation.estimate(predicate)
        assert isinstance(estimate, Estimate)
        # an estimate bounds what a scan may return: never fewer than the matching rows
        assert estimate.rows is None or estimate.rows >= predicate.filter(expected).num_rows
        assert estimate.bytes is None or estimate.bytes >= 0

    @given(bounds=st.tuples(_bounds, _bounds))
    @_examples
    def test_sql_answers_as_duckdb_over_the_rows(
        self, made: tuple[Database, Relation, pa.Table], bounds: tuple[int, int]
    ) -> None:
        db, relation, expected = made
        lo, hi = min(bounds), max(bounds)
        k = _quoted(self.key)
        query = (
            f"SELECT count(*), min({k}), max({k}), count(DISTINCT {k}) FROM {{}} "
            f"WHERE {k} BETWEEN ? AND ?"
        )
        ours = db.sql(query.format(_quoted(relation.name)), [lo, hi]).fetchall()
        peer = _plain_copy(expected)
        assert ours == peer.execute(query.format("plain"), [lo, hi]).fetchall()

    @given(bounds=st.tuples(_bounds, _bounds), descending=st.booleans())
    @_examples
    def test_a_lookup_answers_as_duckdb_without_it(
        self, made: tuple[Database, Relation, pa.Table], bounds: tuple[int, int], descending: bool
    ) -> None:
        """Plain columns under an exact predicate: the engine filters the scan itself."""
        db, relation, expected = made
        lo, hi = min(bounds), max(bounds)
        k = _quoted(self.key)
        order = " DESC" if descending else ""
        query = f"SELECT {k} AS key, * FROM {{}} WHERE {k} BETWEEN ? AND ? ORDER BY {k}{order}"
        ours = db.sql(query.format(_quoted(relation.name)), [lo, hi])
        peer = _plain_copy(expected)
        want = peer.sql(query.format("plain"), params=[lo, hi]).to_arrow_table()
        assert ours.shortcut == "lookup"
        assert ours.arrow().schema == want.schema
        assert _rows(ours.arrow()) == _rows(want)
        assert ours.arrow().column("key").to_pylist() == want.column("key").to_pylist()

    @given(bounds=st.tuples(_bounds, _bounds))
    @_examples
    def test_a_join_answers_as_duckdb_without_it(
        self, made: tuple[Database, Relation, pa.Table], bounds: tuple[int, int]
    ) -> None:
        """A join with another relation on the key: the engine joins the scans itself."""
        db, relation, expected = made
        lo, hi = min(bounds), max(bounds)
        tags = pa.table(
            {"key": pa.array([lo, lo, hi + 1, 7], pa.int64()), "tag": ["a", "b", "c", "d"]}
        )
        k = _quoted(self.key)
        query = (
            f"SELECT r.{k} AS key, x.tag FROM {{}} AS r JOIN join_tags AS x ON x.key = r.{k} "
            f"WHERE r.{k} BETWEEN ? AND ? ORDER BY key, x.tag DESC"
        )
        db.register("join_tags", tags)
        try:
            ours = db.sql(query.format(_quoted(relation.name)), [lo, hi])
            peer = _plain_copy(expected)
            peer.register("join_tags", tags)
            want = peer.sql(query.format("plain"), params=[lo, hi]).to_arrow_table()
            key_type = relation.schema().field(self.key).type
            if type_class(key_type) in ("int", "string"):  # (float keys join in DuckDB)
                assert ours.shortcut == "join"
            assert ours.arrow() == want
        finally:
            db.unregister("join_tags")

    def test_a_self_join_scans_twice(self, made: tuple[Database, Relation, pa.Table]) -> None:
        db, relation, expected = made
        name = _quoted(relation.name)
        k = _quoted(self.key)
        joined = db.sql(
            f"SELECT count(*) FROM {name} a JOIN {name} b ON a.{k} = b.{k} + 1"
        ).fetchall()
        assert joined == [(expected.num_rows - 1,)]

    # --- capabilities -------------------------------------------------------------
    @given(data=st.data())
    @_examples
    def test_a_count_is_exact_or_declined(
        self, made: tuple[Database, Relation, pa.Table], data: st.DataObject
    ) -> None:
        predicate = data.draw(predicates(self.key, self.value))
        _, relation, expected = made
        if not isinstance(relation, Counting):
            pytest.skip("this kind does not count")
        counted = relation.count(predicate)
        assert counted is None or counted == predicate.filter(expected).num_rows

    @given(data=st.data())
    @_examples
    def test_an_aggregate_is_exact_or_declined(
        self, made: tuple[Database, Relation, pa.Table], data: st.DataObject
    ) -> None:
        predicate = data.draw(predicates(self.key, self.value))
        _, relation, expected = made
        if not isinstance(relation, Aggregating):
            pytest.skip("this kind has no native aggregates")
        key = self.key
        items = [("n", "count", None), ("lo", "min", key), ("hi", "max", key), ("s", "sum", key)]
        table = relation.aggregate(items, [], predicate, {})
        if table is None:
            return
        rows = predicate.filter(expected).column(key).to_pylist()
        want = (
            len(rows),
            min(rows, default=None),
            max(rows, default=None),
            sum(rows) if rows else None,
        )
        got = tuple(table.column(i)[0].as_py() for i in range(4))
        assert got == want

    @given(data=st.data())
    @_examples
    def test_the_first_rows_in_an_order_are_exact_or_declined(
        self, made: tuple[Database, Relation, pa.Table], data: st.DataObject
    ) -> None:
        predicate = data.draw(predicates(self.key, self.value))
        descending, distinct = data.draw(st.booleans()), data.draw(st.booleans())
        count = data.draw(st.integers(1, 20))
        _, relation, expected = made
        if not isinstance(relation, Ranking):
            pytest.skip("this kind reads no order")
        table = relation.top(None, predicate, self.key, descending, count, distinct)
        if table is None:
            return
        matching = predicate.filter(expected)
        values = sorted(
            set(matching.column(self.key).to_pylist())
            if distinct
            else matching.column(self.key).to_pylist(),
            reverse=descending,
        )
        if len(values) >= count:
            last = values[count - 1]
            keep = [
                (v >= last) if descending else (v <= last)
                for v in matching.column(self.key).to_pylist()
            ]
            matching = matching.filter(pa.array(keep, pa.bool_()))
        assert _rows(table.select(matching.schema.names)) == _rows(matching)

    def test_a_session_holds_across_scans(self, made: tuple[Database, Relation, pa.Table]) -> None:
        _, relation, expected = made
        if not isinstance(relation, SessionHolding):
            pytest.skip("this kind holds nothing across a statement")
        with relation.session():
            first = _rows(relation.scan(None, None))
            with relation.session():  # statements nest when one runs inside another
                assert _rows(relation.scan(None, None)) == first
        assert first == _rows(expected)

    @given(bounds=st.tuples(_bounds, _bounds))
    @_examples
    def test_a_path_filter_answers_as_duckdb_and_narrows_the_scan(
        self, made: tuple[Database, Relation, pa.Table], bounds: tuple[int, int]
    ) -> None:
        db, relation, expected = made
        if not isinstance(relation, PathFiltering):
            pytest.skip("this kind does not narrow by paths into JSON")
        lo, hi = min(bounds), max(bounds)
        doc = _quoted(relation.path_columns()[0])
        k = _quoted(self.key)
        query = (
            f"SELECT count(*), min({k}), max({k}) FROM {{}} "
            f"WHERE ({doc}->>'$.{KEY}')::BIGINT BETWEEN ? AND ?"
        )
        ours = db.sql(query.format(_quoted(relation.name)), [lo, hi])
        peer = _plain_copy(expected)
        want = peer.execute(query.format("plain"), [lo, hi]).fetchall()
        assert ours.fetchall() == want
        # integers in the range are exactly what may cast into it: the scan read no other
        assert ours.scan_stats[relation.name].rows == want[0][0]

    def test_paths_read_as_duckdb_reads_them(
        self, made: tuple[Database, Relation, pa.Table]
    ) -> None:
        """Values inside a JSON column, selected and filtered: the relation reads each as
        DuckDB does, and the engine answers a lookup by them without DuckDB."""
        db, relation, expected = made
        if not isinstance(relation, PathReading):
            pytest.skip("this kind does not read values at paths into JSON")
        column = relation.path_columns()[0] if isinstance(relation, PathFiltering) else "doc"
        key = JsonPath(column, (KEY,)).key
        peer = _plain_copy(expected)
        read = relation.read_paths(["objid", key], None, expected.num_rows)
        assert read is not None and read.schema.names == ["objid", key]
        want = peer.execute(f"SELECT objid, {key} FROM plain").fetchall()
        assert _rows(read) == Counter(want)
        assert relation.read_paths([key], None, expected.num_rows - 1) is None  # too many
        lo, hi = ROWS // 3, ROWS // 3 + 5
        query = f"SELECT {key} AS key FROM {{}} WHERE CAST({key} AS BIGINT) BETWEEN ? AND ?"
        ours = db.sql(query.format(_quoted(relation.name)), [lo, hi])
        assert ours.shortcut == "lookup"
        wanted = peer.sql(query.format("plain"), params=[lo, hi]).to_arrow_table()
        assert ours.arrow().schema == wanted.schema
        assert _rows(ours.arrow()) == _rows(wanted)

    def test_a_scan_description_is_text(self, made: tuple[Database, Relation, pa.Table]) -> None:
        _, relation, _ = made
        if not isinstance(relation, ScanDescribing):
            pytest.skip("this kind does not describe its scans")
        for predicate in (None, Predicate.between(self.key, 10, 20)):
            lines = relation.describe_scan(None, predicate)
            assert lines and all(isinstance(line, str) and line for line in lines)


def _plain_copy(expected: pa.Table) -> Any:
    """A DuckDB connection holding the rows a relation must show, as ``plain``."""
    import duckdb

    peer = duckdb.connect()
    peer.register("plain", expected)
    return peer


def _quoted(name: str) -> str:
    """A relation's name as SQL names it (a dotted name's parts quoted apart)."""
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))
