"""Assoc's input forms, conversions, display and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import scipy.sparse as sp

from tesseradb.assoc import Assoc, AssocError, AssocIndexError, Col, Row, Val
from tesseradb.errors import TesseraError


def test_key_forms_agree() -> None:
    forms = [
        ("a,b,a,", "x,y,z,"),
        (["a", "b", "a"], ["x", "y", "z"]),
        (np.array(["a", "b", "a"]), np.array(["x", "y", "z"])),
        (np.array(["a", "b", "a"], dtype=object), ("x", "y", "z")),
        ("a|b|a|", "x\ty\tz\t"),
    ]
    built = [Assoc(r, c, [3, 2, 1]) for r, c in forms]
    for other in built[1:]:
        assert other.equals(built[0])
    assert built[0].triples() == [("a", "x", 3.0), ("a", "z", 1.0), ("b", "y", 2.0)]


def test_numeric_keys_and_broadcast() -> None:
    a = Assoc([3, 1, 2.5], 7, 1)
    assert a.row.tolist() == [1.0, 2.5, 3.0]
    assert a.col.tolist() == [7.0]
    assert a["1,:,2.5,", :].row.tolist() == [1.0, 2.5]
    assert a[np.array([3.0]), :].row.tolist() == [3.0]
    b = Assoc("a,b,", "c,", "v,")  # one column key and string values broadcast
    assert b.triples() == [("a", "c", "v"), ("b", "c", "v")]


def test_boolean_values_are_numbers_but_boolean_keys_are_refused() -> None:
    assert Assoc("a,b,", "c,", [True, False]).triples() == [("a", "c", 1.0)]
    with pytest.raises(AssocError, match="item 0 is bool"):
        Assoc([True], "c,", 1)


def test_zeros_and_empty_strings_are_not_entries() -> None:
    assert Assoc("a,b,", "c,d,", [0, 5]).triples() == [("b", "d", 5.0)]
    assert Assoc("a,b,", "c,d,", ",w,").triples() == [("b", "d", "w")]
    # colliding to zero under sum drops the entry and its keys
    assert Assoc("a,a,", "c,c,", [2, -2], sum).nnz == 0


def test_unicode_keys_sort_by_code_point() -> None:
    a = Assoc(["é", "z", "e", "ü"], "c,", 1)
    assert a.row.tolist() == sorted(["é", "z", "e", "ü"])


def test_row_col_val_functions_and_query_pattern() -> None:
    a = Assoc("e1,e1,e2,e3,", "f|x,g|1,f|x,f|y,", 1)
    hits = a[:, "f|x,"]
    assert Row(hits).tolist() == ["e1", "e2"]
    assert a[Row(hits), :].triples() == [
        ("e1", "f|x", 1.0),
        ("e1", "g|1", 1.0),
        ("e2", "f|x", 1.0),
    ]
    assert Col(a).tolist() == ["f|x", "f|y", "g|1"]
    assert Val(Assoc("a,b,", "c,", "p,q,")).tolist() == ["p", "q"]
    assert Val(Assoc("a,b,", "c,", [2, 1])).tolist() == [1.0, 2.0]


def test_conversions_round_trip() -> None:
    a = Assoc("r1,r2,r2,", "c1,c1,c2,", [1.5, 2, 3])
    frame = a.to_pandas()
    assert list(frame.columns) == ["row", "col", "val"]
    assert Assoc.from_pandas(frame).equals(a)
    assert Assoc.from_arrow(a.to_arrow()).equals(a)
    m = a.to_scipy()
    assert isinstance(m, sp.csr_array) and m.toarray().tolist() == [[1.5, 0], [2, 3]]
    assert Assoc.from_scipy(m, a.row, a.col).equals(a)
    assert Assoc.from_scipy(sp.eye(2)).triples() == [(0.0, 0.0, 1.0), (1.0, 1.0, 1.0)]
    s = Assoc("r1,", "c1,", "v,")
    assert Assoc.from_arrow(s.to_arrow()).equals(s)
    with pytest.raises(AssocError, match="logical"):
        s.to_scipy()


def test_graphblas_round_trip() -> None:
    pytest.importorskip("graphblas")
    a = Assoc("r1,r2,", "c1,c2,", [1, 2])
    assert Assoc.from_graphblas(a.to_graphblas(), a.row, a.col).equals(a)


def test_repr_is_a_table() -> None:
    text = repr(Assoc("alice,bob,", "age,city,", ["31", "Paris"]))
    assert text.splitlines() == [
        "Assoc 2x2, 2 entries (string values)",
        "       age   city",
        "alice   31      .",
        "bob      .  Paris",
    ]
    big = repr(Assoc(list(map(str, range(30))), list(map(str, range(30))), 1))
    assert big.splitlines()[-1] == "…" and big.splitlines()[1].endswith("…")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Assoc("a,b", "c,d,", 1), "must end with its delimiter"),
        (lambda: Assoc("a,b,c,", "c,d,", 1), "3 row keys, 2 column keys and 1 values"),
        (lambda: Assoc(["a", 1], "c,", 1), "item 1 is int, not str"),
        (lambda: Assoc([1, "a"], "c,", 1), "item 1 is str"),
        (lambda: Assoc("a,", "c,", [object()]), "item 0 is object"),
        (lambda: Assoc("a,b,", "c,", ["x", 2]), "item 1 is int"),
        (lambda: Assoc("a,", "c,", {1: 2}), "not a dict"),
        (lambda: Assoc({"a"}, "c,", 1), "row keys must be in order"),
        (lambda: Assoc([float("nan")], "c,", 1), "NaN"),
        (lambda: Assoc("a,", "c,", float("nan")), "NaN"),
        (lambda: Assoc("a,", "c,", "v,", sum), "sum needs numeric values"),
        (lambda: Assoc("a,", "c,", 1, "median"), "aggregate 'median'"),
        (lambda: Assoc(np.zeros((2, 2)), "c,", 1), "one-dimensional"),
        (lambda: Assoc("a,", "c,", 1)[5, :], "row position 5 is out of range for 1 rows"),
        (lambda: Assoc("a,", "c,", 1)["a,"], "A\\[rows, cols\\]"),
        (lambda: Assoc("a,", "c,", 1)[:, 1.5], "not one of"),
        (lambda: Assoc("a,", "c,", 1)["a":"b", :], "integer positions"),
        (lambda: Assoc("a,", "c,", 1) + 1, "needs two Assocs"),
        (lambda: Assoc("a,", "c,", 1) @ 2, "needs two Assocs"),
        (lambda: Assoc("a,", "c,", 1) == "x", "compare them with a number"),
        (lambda: Assoc("a,", "c,", "v,") > 1, "compare them with a string"),
        (lambda: Assoc("a,", "c,", 1) == Assoc("a,", "c,", 1), "A.equals"),
        (lambda: Assoc("a,", "c,", 1) + Assoc([1], "c,", 1), "row keys are strings on the left"),
        (lambda: Assoc([1.0], "c,", 1)["x,", :], "not a number"),
        (lambda: Assoc([1.0], "c,", 1)["x*,", :], "numeric keys"),
        (lambda: Assoc("a,", "c,", 1).sum(2), "axis"),
        (lambda: Assoc("a,", "c,", 1) * float("nan"), "NaN is no value"),
    ],
)
def test_bad_input_is_a_clear_error(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TesseraError, match=message):
        call()


def test_positions_out_of_range_are_index_errors() -> None:
    with pytest.raises(AssocIndexError):
        Assoc("a,", "c,", 1)[:, -2]
    with pytest.raises(IndexError):
        Assoc("a,", "c,", 1)[[0, 3], :]


def test_an_assoc_is_immutable() -> None:
    a = Assoc("a,", "c,", 1)
    with pytest.raises(ValueError):
        a.row[0] = "z"
    a.adj.data[0] = 9  # a copy
    assert a.triples() == [("a", "c", 1.0)]
    with pytest.raises(TypeError):
        hash(a)


def test_ten_thousand_random_triples_match_a_pandas_group_by() -> None:
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 300, 10_000).astype(str)
    cols = np.char.add("c", rng.integers(0, 50, 10_000).astype(str))
    vals = rng.integers(1, 9, 10_000).astype(float)
    a = Assoc(rows, cols, vals, sum)
    frame = pd.DataFrame({"row": rows, "col": cols, "val": vals})
    expect = frame.groupby(["row", "col"], as_index=False)["val"].sum()
    got = a.to_pandas()
    assert got["row"].tolist() == expect["row"].tolist()
    assert got["col"].tolist() == expect["col"].tolist()
    assert got["val"].tolist() == expect["val"].tolist()
    assert pa.Table.from_pandas(got).num_rows == len(expect)
