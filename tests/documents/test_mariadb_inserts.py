"""The MariaDB backend's inserts: rows become INSERT text in the Rust kernel
(``sql_insert_values``), strings and bytes as hex literals. Every value reads back
exactly as it went in, through the statement split at any size."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tesseradb._core import sql_insert_values

pytestmark = pytest.mark.server

_tables = itertools.count()
rows = st.lists(
    st.tuples(
        st.text(max_size=12),  # any Unicode, quotes, backslashes, NUL and 4-byte characters
        st.floats(allow_nan=False, allow_infinity=False) | st.none(),
        st.integers(-(2**63), 2**63 - 1) | st.none(),
        st.booleans() | st.none(),
        st.binary(max_size=12),
    ),
    max_size=30,
)


@pytest.fixture(scope="module")
def backend(mariadb_server: Any) -> Any:
    from tesseradb.documents._server_backends import MariaDBBackend

    made = MariaDBBackend(mariadb_server.url)
    yield made
    made.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows, st.integers(1, 400))
def test_every_value_reads_back_as_it_went_in(backend: Any, values: list[Any], size: int) -> None:
    table = f"t_ins_{next(_tables)}"
    backend.execute(
        f"CREATE TABLE {table} (n BIGINT PRIMARY KEY, s {backend.types.text}, "
        f"x DOUBLE, i BIGINT, b BOOLEAN, y LONGBLOB)"
    )
    try:
        numbered = [(n, *row) for n, row in enumerate(values)]
        backend.STATEMENT_BYTES = size  # (an instance attribute: a statement every few rows)
        with backend.transaction(write=True):
            backend.insert_rows(table, ("n", "s", "x", "i", "b", "y"), numbered)
        got = backend.execute(f"SELECT n, s, x, i, b, y FROM {table} ORDER BY n")
        assert len(got) == len(numbered)
        for want, have in zip(numbered, got, strict=True):
            n, s, x, i, b, y = have
            assert (n, s, i, bytes(y)) == (want[0], want[1], want[3], want[5])
            assert (x is None) == (want[2] is None)
            if x is not None:  # (MariaDB stores -0.0 as 0.0: a documented limit)
                assert x == want[2] and (math.copysign(1, x) == math.copysign(1, want[2]) or x == 0)
            assert (None if b is None else bool(b)) == want[4]
    finally:
        del backend.STATEMENT_BYTES
        backend.execute(f"DROP TABLE {table}")


def test_statements_split_by_size_and_refuse_what_has_no_literal() -> None:
    prefix = "INSERT INTO t (a, b) VALUES "
    assert sql_insert_values(prefix, [(1, "a"), (2, None)], 2, 1 << 20) == [
        b"INSERT INTO t (a, b) VALUES (1,_utf8mb4 X'61'),(2,NULL)"
    ]
    # a tuple of two rows' values, split into statements of one row each
    assert sql_insert_values(prefix, [(1, b"\x00", 2, 0.5)], 2, 1) == [
        b"INSERT INTO t (a, b) VALUES (1,X'00')",
        b"INSERT INTO t (a, b) VALUES (2,5e-1)",
    ]
    assert sql_insert_values(prefix, [], 2, 100) == []
    with pytest.raises(ValueError, match="value 1: an integer past 64 bits"):
        sql_insert_values(prefix, [(1, 2**64)], 2, 100)
    with pytest.raises(ValueError, match="has no SQL literal"):
        sql_insert_values(prefix, [(1, math.inf)], 2, 100)
    with pytest.raises(TypeError, match="value 3: a object has no SQL literal"):
        sql_insert_values(prefix, [(1, 2), (3, object())], 2, 100)
    with pytest.raises(ValueError, match="not rows of 2"):
        sql_insert_values(prefix, [(1, 2, 3)], 2, 100)
