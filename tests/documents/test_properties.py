"""Property tests: JSON survives flatten -> store -> rebuild exactly, and every predicate
selects what a plain Python evaluation of its semantics selects (on every configuration)."""

from __future__ import annotations

import collections
import gc
import json
import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tesseradb._core import (
    flatten_documents,
    load_documents,
    pack_documents,
    rebuild_packed_documents,
    unpack_texts,
)
from tesseradb._core import rebuild_documents as kernel_rebuild
from tesseradb.documents import flatten_document, parse_statement, rebuild_documents
from tesseradb.documents._argosql import (
    And,
    AnyCompare,
    Between,
    Compare,
    Condition,
    Exists,
    In,
    IsNull,
    Like,
    Or,
    literal_type,
    push_not,
)
from tesseradb.documents._keys import DEFAULT_LIMITS, INT64_MAX, INT64_MIN, parse_document
from tesseradb.documents._mappings import make_mapping
from tesseradb.errors import DocumentError

# --- documents ------------------------------------------------------------------

keys = st.text(max_size=6)  # any Unicode, including . [ ] \ and the empty key
scalars = (
    st.none()
    | st.booleans()
    | st.integers(INT64_MIN, INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
documents = st.dictionaries(keys, json_values, max_size=6)


def same_json(a: Any, b: Any) -> bool:
    """Equal with types and key order (json.dumps keeps order; -0.0 and 0.0 differ)."""
    return json.dumps(a, sort_keys=False) == json.dumps(b, sort_keys=False)


@given(documents)
def test_flatten_rebuild_in_memory(doc: dict[str, Any]) -> None:
    leaves = flatten_document(doc)
    rows = [
        (1, f.keystr, f.ord, f.valstr, f.valnum, f.valint, f.valbool, f.valkind) for f in leaves
    ]
    [(objid, rebuilt)] = list(rebuild_documents(rows))
    assert objid == 1 and same_json(rebuilt, doc)


def _backend_limits(value: Any, backend: str) -> Any:
    """What a backend cannot hold, taken out of the expectation (documented in docs/documents.md).

    PostgreSQL text cannot hold U+0000 (it is refused with an error); SQLite
    and MariaDB store -0.0 as 0.0.
    """
    if isinstance(value, str):
        return value.replace("\x00", "") if backend == "postgresql" else value
    if isinstance(value, float) and value == 0.0 and backend in ("sqlite", "mariadb"):
        return 0.0
    if isinstance(value, list):
        return [_backend_limits(v, backend) for v in value]
    if isinstance(value, dict):
        return {_backend_limits(k, backend): _backend_limits(v, backend) for k, v in value.items()}
    return value


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(documents, min_size=1, max_size=4))
def test_round_trip_through_backend(make_collection: Any, batch: list[dict[str, Any]]) -> None:
    if not hasattr(make_collection, "made"):
        make_collection.made = make_collection()
    coll = make_collection.made
    batch = [_backend_limits(d, make_collection.backend) for d in batch]
    make_collection.db.argo(f"DELETE FROM {coll.name}")
    coll.insert_many(batch)
    got = coll.find()
    assert len(got) == len(batch)
    for a, b in zip(got, batch, strict=True):
        assert same_json(a, b)


# --- predicates -------------------------------------------------------------------

LIMITS = DEFAULT_LIMITS.as_tuple()
FIELDS = ("a", "b", "o.x", "arr")
small_scalars = st.sampled_from([0, 1, 2, 2.5, -1, "", "a", "ab", "b%", "B", True, False])
field_values = st.one_of(small_scalars, st.none(), st.lists(small_scalars, max_size=3), st.just({}))
docs_for_predicates = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "a": field_values,
            "b": field_values,
            "o": st.fixed_dictionaries({}, optional={"x": field_values}),
            "arr": st.lists(small_scalars, max_size=3),
        },
    ),
    min_size=1,
    max_size=8,
)


def literal_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def leaf_texts() -> st.SearchStrategy[str]:
    field = st.sampled_from(FIELDS)
    op = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])
    return st.one_of(
        st.builds(lambda f, o, v: f"{f} {o} {literal_text(v)}", field, op, small_scalars),
        st.builds(lambda v, o: f"{literal_text(v)} {o} ANY arr", small_scalars, op),
        st.builds(
            lambda f, n, lo, hi: f"{f} {'NOT ' if n else ''}BETWEEN {lo} AND {hi}",
            field,
            st.booleans(),
            st.integers(-1, 2),
            st.integers(0, 3),
        ),
        st.builds(
            lambda f, n, p: f"{f} {'NOT ' if n else ''}LIKE {literal_text(p)}",
            field,
            st.booleans(),
            st.sampled_from(["a%", "%b", "_", "%", "b\\%", "A%"]),
        ),
        st.builds(
            lambda f, n, vs: (
                f"{f} {'NOT ' if n else ''}IN ({', '.join(literal_text(v) for v in vs)})"
            ),
            field,
            st.booleans(),
            st.lists(small_scalars, min_size=1, max_size=3),
        ),
        st.builds(lambda f, n: f"{f} IS {'NOT ' if n else ''}NULL", field, st.booleans()),
        st.builds(lambda f: f"EXISTS {f}", st.sampled_from([*FIELDS, "o"])),
    )


predicate_texts = st.recursive(
    leaf_texts(),
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a} AND {b})", inner, inner),
        st.builds(lambda a, b: f"({a} OR {b})", inner, inner),
        st.builds(lambda a: f"NOT ({a})", inner),
    ),
    max_leaves=4,
)

_MISSING = object()


def resolve(doc: Any, steps: tuple[str | int, ...]) -> Any:
    node = doc
    for step in steps:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return _MISSING
            node = node[step]
        else:
            if not isinstance(node, dict) or step not in node:
                return _MISSING
            node = node[step]
    return node


def json_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "num"
    if isinstance(value, str):
        return "str"
    return None


def compare(a: Any, op: str, b: Any) -> bool:
    if json_type(a) != json_type(b):
        return False
    if json_type(a) == "num":
        a, b = float(a), float(b)
    return {
        "=": a == b,
        "!=": a != b,
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
    }[op]


def like(value: str, pattern: str) -> bool:
    regex, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            regex.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        regex.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.fullmatch("".join(regex), value, re.DOTALL) is not None


def evaluate(pred: Condition, doc: dict[str, Any]) -> bool:
    """Argo's semantics over a Python dict, with negations already pushed to the leaves."""
    if isinstance(pred, And):
        return all(evaluate(p, doc) for p in pred.items)
    if isinstance(pred, Or):
        return any(evaluate(p, doc) for p in pred.items)
    value = resolve(doc, pred.path.steps)
    found = value is not _MISSING
    if isinstance(pred, Compare):
        return found and compare(value, pred.op, pred.value)
    if isinstance(pred, AnyCompare):
        some = isinstance(value, list) and any(compare(e, pred.op, pred.value) for e in value)
        return (found and not some) if pred.negated else some
    if isinstance(pred, Between):
        if pred.negated:
            return found and (compare(value, "<", pred.low) or compare(value, ">", pred.high))
        return found and compare(value, ">=", pred.low) and compare(value, "<=", pred.high)
    if isinstance(pred, Like):
        return found and isinstance(value, str) and like(value, pred.pattern) != pred.negated
    if isinstance(pred, In):
        if not pred.negated:
            return found and any(compare(value, "=", v) for v in pred.values)
        groups = {literal_type(v) for v in pred.values}
        return found and all(
            json_type(value) == t
            and all(not compare(value, "=", v) for v in pred.values if literal_type(v) == t)
            for t in groups
        )
    if isinstance(pred, IsNull):
        return (found and value is not None) if pred.negated else (found and value is None)
    if isinstance(pred, Exists):
        # {} and [] are present; EXISTS o is true when o is any value
        return not found if pred.negated else found
    raise AssertionError(pred)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(docs=docs_for_predicates, where=predicate_texts, merged=st.integers(0, 8))
def test_predicates_match_python(
    make_collection: Any, docs: list[dict[str, Any]], where: str, merged: int
) -> None:
    if not hasattr(make_collection, "made"):
        make_collection.made = make_collection()
    coll = make_collection.made
    db = make_collection.db
    db.argo(f"DELETE FROM {coll.name}")
    # the first `merged` objects in the main tables, the others in the delta
    objids = coll.insert_many(docs[:merged])
    coll.compact()
    objids += coll.insert_many(docs[merged:])
    statement = parse_statement(f"SELECT * FROM {coll.name} WHERE {where}")
    pred = push_not(statement.where)  # type: ignore[union-attr,arg-type]
    expected = [d for d in docs if evaluate(pred, d)]
    got = db.argo(f"SELECT * FROM {coll.name} WHERE {where}")
    assert [json.dumps(d) for d in got] == [json.dumps(d) for d in expected], where
    assert len(objids) == len(docs)


@pytest.mark.parametrize("count", [700, 4500])  # split halves as IN lists; a temporary table
def test_many_matches_go_through_a_temporary_table(make_collection: Any, count: int) -> None:
    coll = make_collection()
    coll.insert_many({"n": i, "half": i % 2} for i in range(count))
    got = coll.find("half = 0")
    assert [d["n"] for d in got] == list(range(0, count, 2))
    ordered = make_collection.db.argo(f"SELECT n FROM {coll.name} WHERE n >= 100 ORDER BY n DESC")
    assert [d["n"] for d in ordered] == list(range(count - 1, 99, -1))
    assert make_collection.db.argo(f"UPDATE {coll.name} SET half = 'x' WHERE half = 1") == [
        {"updated": count // 2}
    ]
    assert make_collection.db.argo(f"DELETE FROM {coll.name} WHERE half = 'x'") == [
        {"deleted": count // 2}
    ]
    assert coll.count() == count - count // 2


def test_float_edge_values_in_memory() -> None:
    for value in (0.1, 1e-320, -0.0, 2.0**53 + 1, 123456789.123456789):
        if isinstance(value, float) and math.isfinite(value):
            [leaf] = flatten_document({"v": value})
            assert leaf.valnum == value


# --- the Rust flattening kernel against the Python reference --------------------------


def _python_rows(text: str | bytes, wide: bool) -> list[list[tuple[Any, ...]]] | None:
    """The rows the Python path makes of ``text`` (objid 7), or None where it raises."""
    mapping = make_mapping("argo1" if wide else "argo3", "c", None)  # type: ignore[arg-type]
    rows = mapping.row_lists()
    try:
        mapping.add_rows(rows, 7, flatten_document(parse_document(text)))
    except DocumentError:
        return None
    return rows


def _kernel_agrees(text: str | bytes, wide: bool) -> None:
    rows, refused = flatten_documents([text], 7, wide, LIMITS)
    expected = _python_rows(text, wide)
    if expected is None:
        assert refused == [0]  # the Python path names the error
    elif refused:
        assert refused == [0]  # allowed: the Python path then flattens it
    else:
        assert repr(rows) == repr(expected)  # repr: -0.0 vs 0.0 and True vs 1 differ


@given(documents, st.booleans(), st.booleans())
def test_kernel_flattens_like_python(doc: dict[str, Any], wide: bool, ascii_only: bool) -> None:
    text = json.dumps(doc, ensure_ascii=ascii_only)
    _kernel_agrees(text, wide)
    _kernel_agrees(text.encode(), wide)
    assert flatten_documents([text], 7, wide, LIMITS)[1] == []  # every JSON text we make is taken


number_texts = st.from_regex(
    r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
)


@given(number_texts, st.booleans())
def test_kernel_reads_numbers_like_python(number: str, wide: bool) -> None:
    # integers past 64 bits and doubles past their range are refused by both
    _kernel_agrees(f'{{"x": {number}, "y": [{number}]}}', wide)


@pytest.mark.parametrize(
    "text",
    [
        "[1]",
        '"a"',
        "{",
        '{"a": NaN}',
        '{"a": 1e999}',
        '{"a": 99999999999999999999}',
        '{"s": "\\ud800"}',
        '{"a": 1, "a": 2}',
        "{}",
        '{"k": {}, "l": [], "n": null}',
        b"\xff{}",
    ],
)
def test_kernel_on_awkward_texts(text: str | bytes) -> None:
    for wide in (False, True):
        _kernel_agrees(text, wide)


def test_kernel_refuses_what_is_not_a_document() -> None:
    rows, refused = flatten_documents([{"a": 1}, '{"a": 1}', 5, [1]], 1, True, LIMITS)
    assert refused == [2, 3]
    assert rows == [[(1, "a", 0, None, 1.0, 1, None, None), (2, "a", 0, None, 1.0, 1, None, None)]]


def _kernel_agrees_on_dict(doc: Any, wide: bool) -> None:
    rows, refused = flatten_documents([doc], 7, wide, LIMITS)
    mapping = make_mapping("argo1" if wide else "argo3", "c", None)  # type: ignore[arg-type]
    expected = mapping.row_lists()
    try:
        mapping.add_rows(expected, 7, flatten_document(doc))
    except DocumentError:
        assert refused == [0]  # the Python path names the error
        return
    if refused:
        assert refused == [0]  # allowed: the Python path then flattens it
    else:
        assert repr(rows) == repr(expected)


@given(documents, st.booleans())
def test_kernel_flattens_dicts_like_python(doc: dict[str, Any], wide: bool) -> None:
    _kernel_agrees_on_dict(doc, wide)
    assert flatten_documents([doc], 7, wide, LIMITS)[1] == []  # plain JSON-typed dicts are taken


class _Text(str):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize(
    "doc",
    [
        {1: 2},
        {"a": {None: 1}},
        {"a": float("nan")},
        {"a": [float("inf")]},
        {"a": 2**63},
        {"a": -(2**63) - 1},
        {"a": -(2**63)},
        {"a": "\ud800"},
        {"\udfff": 1},
        {"a": (1, "x", ())},
        {"a": {1, 2}},
        {"a": b"x"},
        {"a": _Text("x")},
        {_Text("k"): 1},
        {"a": _Dict(b=1)},
        _Dict(a=1),
        collections.OrderedDict([("b", 1), ("a", 2)]),
        {"a": True, "b": False, "c": None, "d": {}, "e": [], "f": [{}], "g": -0.0},
    ],
)
def test_kernel_on_awkward_dicts(doc: Any) -> None:
    for wide in (False, True):
        _kernel_agrees_on_dict(doc, wide)


def _rows_of(docs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (objid, f.keystr, f.ord, f.valstr, f.valnum, f.valint, f.valbool, f.valkind)
        for objid, doc in enumerate(docs, start=1)
        for f in flatten_document(doc)
    ]


@given(st.lists(documents, max_size=4), st.data())
def test_kernel_rebuilds_like_python(docs: list[dict[str, Any]], data: st.DataObject) -> None:
    rows = _rows_of(docs)
    # a projection fetches some of the rows only (subscripts then come back compacted)
    kept = data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    for subset in (rows, [r for r, keep in zip(rows, kept, strict=True) if keep]):
        expected = list(rebuild_documents(subset))
        got = kernel_rebuild(subset)
        assert [i for i, _ in got] == [i for i, _ in expected]
        assert all(same_json(a, b) for (_, a), (_, b) in zip(got, expected, strict=True))


def _packed(row: tuple[Any, ...]) -> list[Any]:
    """A row as a backend packs it: the double as its exact text, the boolean as 0 or 1."""
    objid, keystr, ord_, valstr, valnum, valint, valbool, valkind = row
    number = None if valnum is None or valint is not None else repr(valnum)
    flag = None if valbool is None else int(valbool)
    return [objid, keystr, ord_, valstr, number, valint, flag, valkind]


@given(st.lists(documents, max_size=4), st.data())
def test_packed_kernel_rebuilds_like_python(
    docs: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows = _rows_of(docs)
    kept = data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    subset = [r for r, keep in zip(rows, kept, strict=True) if keep]
    # the backend packs each table's rows in its own order, in several texts, and
    # overlapping projections select some rows twice
    parts = data.draw(st.integers(1, 4))
    texts: list[list[list[Any]]] = [[] for _ in range(parts)]
    for row in data.draw(st.permutations(subset)):
        for _ in range(data.draw(st.integers(1, 2))):
            texts[data.draw(st.integers(0, parts - 1))].append(_packed(row))
    indent = data.draw(st.sampled_from([None, 1]))  # PostgreSQL's json_agg puts in spaces
    got = rebuild_packed_documents([json.dumps(t, indent=indent) for t in texts])
    expected = list(rebuild_documents(subset))
    assert [i for i, _ in got] == [i for i, _ in expected]
    assert all(same_json(a, b) for (_, a), (_, b) in zip(got, expected, strict=True))


def test_packed_kernel_refuses_what_it_cannot_read() -> None:
    row = [1, "a", 0, None, "1.5", None, None, None]
    assert rebuild_packed_documents([json.dumps([row]), "[]"]) == [(1, {"a": 1.5})]
    for bad in ("[[1]]", "[", '[[1, "a", 0, null, "x", null, null, null]]', "[[]] ]"):
        with pytest.raises(ValueError):
            rebuild_packed_documents([bad])
    with pytest.raises(ValueError, match="not a flattened key"):
        rebuild_packed_documents(['[[1, "a[x]", 0, "v", null, null, null, null]]'])


def test_kernel_rebuild_takes_backend_value_types() -> None:
    # SQLite hands booleans back as 0/1 and may hand integers in valnum's place
    rows = [(3, "b", 0, None, None, None, 1, None), (3, "n", 1, None, 2.0, 2, None, None)]
    assert kernel_rebuild(rows) == [(3, {"b": True, "n": 2})]
    with pytest.raises(ValueError, match="not a flattened key"):
        kernel_rebuild([(1, "a[x]", 0, "v", None, None, None, None)])


@pytest.mark.parametrize("enabled", [True, False])
def test_kernels_leave_the_garbage_collector_as_they_found_it(enabled: bool) -> None:
    # the kernels pause the collector while they build objects, errors included
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        flatten_documents(['{"a": [1, {"b": "x"}]}', {"c": None}], 1, False, LIMITS)
        kernel_rebuild([(1, "a", 0, "x", None, None, None, None)])
        rebuild_packed_documents(['[[1, "a", 0, "x", null, null, null, null]]'])
        with pytest.raises(ValueError):
            rebuild_packed_documents(["[[1, "])
        with pytest.raises(ValueError):
            kernel_rebuild([(1, "a[", 0, "x", None, None, None, None)])
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()


@given(st.lists(documents, max_size=5), st.booleans(), st.integers(1, 7))
def test_kernel_groups_rows_for_multi_row_inserts(
    docs: list[dict[str, Any]], wide: bool, group: int
) -> None:
    # tuples of `group` rows' values, in order: the single rows run together
    single, refused = flatten_documents(list(docs), 1, wide, LIMITS)
    grouped, grouped_refused = flatten_documents(list(docs), 1, wide, LIMITS, group)
    assert grouped_refused == refused
    for rows, tuples in zip(single, grouped, strict=True):
        width = len(rows[0]) if rows else 1
        assert all(len(t) % width == 0 and len(t) <= width * group for t in tuples)
        assert all(len(t) == width * group for t in tuples[:-1])
        assert repr([v for t in tuples for v in t]) == repr([v for r in rows for v in r])


def test_kernel_refuses_an_empty_group() -> None:
    with pytest.raises(ValueError, match="group"):
        flatten_documents(['{"a": 1}'], 1, False, LIMITS, 0)


# --- the hybrid mapping's object texts ----------------------------------------------


def _hybrid_python_row(doc: Any) -> tuple[int, str]:
    """The (objid, text) the hybrid mapping's Python path writes for ``doc`` (objid 7)."""
    mapping = make_mapping("hybrid", "c", None)  # type: ignore[arg-type]
    rows = mapping.row_lists()
    mapping.add_rows(rows, 7, flatten_document(doc))
    [(objid, packed)] = rows[-1]
    return objid, unpack_texts([packed])[0]


def _texts(rows: list[list[tuple[Any, ...]]]) -> list[Any]:
    """The objids and unpacked texts of the object list that ``whole`` adds."""
    values = [v for t in rows[-1] for v in t]
    return [unpack_texts([v])[0] if isinstance(v, bytes) else v for v in values]


@given(documents, st.integers(1, 3))
def test_kernel_writes_the_text_json_dumps_writes(doc: dict[str, Any], group: int) -> None:
    # The text must be the very text json.dumps gives for the rebuilt object: SQL
    # scans hand it on as it is, where argo3 dumps what it rebuilt.
    rows, refused = flatten_documents([doc, json.dumps(doc)], 7, False, LIMITS, group, True)
    assert refused == []
    shredded, _ = flatten_documents([doc, json.dumps(doc)], 7, False, LIMITS, group)
    assert repr(rows[:-1]) == repr(shredded)  # the rows are argo3's
    [(_, rebuilt)] = list(rebuild_documents(flatten_documents([doc], 7, True, LIMITS)[0][0]))
    expected = json.dumps(rebuilt, ensure_ascii=False)
    assert _texts(rows) == [7, expected, 8, expected]
    assert _hybrid_python_row(doc) == (7, expected)
    # and reading the packed form back gives what json.loads gives
    [packed] = pack_documents([expected])
    [again] = [json.loads(t) for t in unpack_texts([packed])]
    assert same_json(again, json.loads(expected)) and same_json(again, rebuilt)


number_lists = st.lists(
    st.floats(allow_nan=False, allow_infinity=False) | st.integers(INT64_MIN, INT64_MAX),
    min_size=1,
    max_size=20,
)


@given(number_lists)
def test_kernel_writes_numbers_as_python_repr(numbers: list[float | int]) -> None:
    rows, _ = flatten_documents([{"n": numbers}], 1, False, LIMITS, 1, True)
    assert _texts(rows) == [1, json.dumps({"n": numbers})]
    [text] = unpack_texts(pack_documents([json.dumps(numbers)]))
    assert repr(json.loads(text)) == repr(numbers)


@pytest.mark.parametrize(
    "text",
    [
        '{"e": 1e5, "E": 1E-7, "big": 1e308, "tiny": 5e-324, "z": -0.0, "i": -0}',
        '{"a": [[[]], [{}], [[1], [2, [3]]]], "b": {"c": {"d": {}}}}',
        '{"a.b": {"[0]": {"\\\\": "\\u0000\\u001f\\"\\u007f\\u2028"}}, "": ""}',
        '{"dup": 1, "x": 2, "dup": [3]}',
        "{}",
    ],
)
def test_kernel_writes_awkward_texts_as_json_dumps(text: str) -> None:
    rows, refused = flatten_documents([text], 1, False, LIMITS, 1, True)
    assert refused == []
    assert _texts(rows) == [1, json.dumps(json.loads(text), ensure_ascii=False)]
    [value] = [json.loads(t) for t in unpack_texts([rows[-1][0][1]])]
    assert same_json(value, json.loads(text))


def test_damaged_packed_documents_are_named() -> None:
    [good] = pack_documents(['{"a": 1}'])
    for bad, why in [
        (b"{}", "packed document 1 is damaged"),
        (good[:-3], "packed document 1 is damaged"),
        (pack_documents(['{"a": '])[0], "packed document 1 is damaged.*not JSON"),
    ]:
        with pytest.raises(ValueError, match=why):
            unpack_texts([good, bad])
    with pytest.raises(ValueError, match="packed document 0 is damaged"):
        unpack_texts([b"\x28\xb5\x2f\xfd\xff"])


any_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: json.loads reads any length
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)


@given(st.lists(any_json, min_size=1, max_size=4), st.booleans(), st.sampled_from([None, 1]))
def test_load_documents_reads_as_json_loads(
    values: list[Any], ascii_only: bool, indent: int | None
) -> None:
    texts = [json.dumps(v, ensure_ascii=ascii_only, indent=indent) for v in values]
    got = load_documents(pack_documents(texts))
    assert repr(got) == repr([json.loads(t) for t in texts])  # types, -0.0 and key order


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1',
        "[1,]",
        '{"a" 1}',
        "01",
        "1.",
        "1e",
        "-",
        '"\\x"',
        '"\\ud800"',
        "nul",
        '{"a": 1} 2',
        '"\x01"',
        '"\\u+041"',  # a sign where a hex digit belongs
    ],
)
def test_load_documents_refuses_what_json_loads_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text, strict=True) if text != '"\\ud800"' else _lone_surrogate()
    with pytest.raises(ValueError, match="packed document 1 is damaged: not JSON"):
        load_documents(pack_documents(["{}", text]))


def _lone_surrogate() -> None:
    # json.loads reads "\ud800" as a lone surrogate; no stored text holds one (the door
    # refuses them), so load_documents calls it damage
    raise ValueError("a lone surrogate")
