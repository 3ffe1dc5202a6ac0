"""Random queries with DuckDB functions over strings and dates: the GPU path (simulated)
gives the reference matcher's rows wherever it takes the query.

The queries and rows of :mod:`tests.paths.test_random_functions`: derived input
columns computed by DuckDB, the result projection by DuckDB, and the pattern on
the device. A query the GPU path does not take (``gpu = 'on'`` names the reason)
is left to the CPU paths' test.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import matchsql
from tests.paths.test_random_functions import (
    SCHEMA,
    SETTINGS,
    partitions,
    queries,
    run_path,
)
from tests.property.strategies import spec_of

#: Conditions whose DuckDB parts are numeric columns, which the device reads: a function
#: of one row next to a read of another (``x + length(s) > PREV(x)``), or functions of
#: two rows compared in registers (``length(B.s) > length(A.s)``).
NUMERIC = [
    "length(B.s) > length(A.s)",
    "x + length(s) > PREV(x)",
    "year(B.d) >= year(A.d)",
    "hash(s) % 3 = PREV(x)",
    "x > PREV(x)",
    "COUNT(*) <= 2",
    "strlen(s) * 2 <= FIRST(x) + 1",
    "month(d) - 1 < x",
]


def test_gpu_agrees_with_functions() -> None:
    ran: list[str] = []

    @SETTINGS
    @given(sql=queries(NUMERIC), rows=partitions, data=st.data())
    def check(sql: str, rows: list[dict], data: st.DataObject) -> None:
        try:
            spec = spec_of(sql, SCHEMA)
        except matchsql.Error:
            return
        splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
        got = run_path(spec, rows, splits, "auto", gpu="on")
        if got[0] == "n/a":
            return
        ran.append(sql)
        assert got == run_path(spec, rows, [], "reference"), (sql, rows, splits)

    check()
    assert len(ran) >= 5, f"only {len(ran)} random queries with functions ran on the GPU path"
