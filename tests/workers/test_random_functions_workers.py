"""Random queries with DuckDB functions over strings and dates: worker processes give
the rows of one process.

The queries of :mod:`tests.paths.test_random_functions`, partitioned over uneven
partitions; the partitions' runs (with their derived columns and DuckDB's
projection) move to two worker processes, in both of the pool's modes.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import matchsql
from tests.paths.test_random_functions import (
    SETTINGS,
    partitioned,
    partitions,
    queries,
    table_of,
)

FEW = SETTINGS.__class__(SETTINGS, max_examples=12)


@pytest.fixture(scope="module")
def connections():
    one = matchsql.connect(demo=False)
    two = matchsql.connect(demo=False, workers=2)
    yield one, two
    one.close()
    two.close()


def _rows(con: matchsql.Connection, query: str):
    try:
        return "rows", sorted(con.sql(query).fetchall(), key=repr)
    except matchsql.Error as exc:
        return "error", type(exc).__name__


@pytest.mark.parametrize("mode", ["scatter", "sorted"])
def test_workers_agree_with_functions(connections, mode: str) -> None:
    one, two = connections
    two._executor.workers.mode = mode  # scatter: workers sort; sorted: DuckDB sorts

    @FEW
    @given(sql=queries(), groups=st.lists(partitions, min_size=2, max_size=5))
    def check(sql: str, groups: list[list[dict]]) -> None:
        table = table_of(groups)
        for con in (one, two):
            con.duckdb.register("__rows", table)
            con.sql("CREATE OR REPLACE TABLE t AS SELECT * FROM __rows")
            con.duckdb.unregister("__rows")
        query = partitioned(sql)
        assert _rows(two, query) == _rows(one, query), query

    check()
