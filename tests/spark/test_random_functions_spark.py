"""Random queries with DuckDB functions over strings and dates: Spark gives the embedded
engine's rows.

The queries of :mod:`tests.paths.test_random_functions`, partitioned, over a few
uneven partitions of the same kinds of rows (strings with accents, dates, NULLs):
the derived input columns, the pattern and DuckDB's projection run inside the
Spark tasks.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import matchsql
from matchsql.integrations.spark import match_recognize
from tests.paths.test_random_functions import (
    SETTINGS,
    partitioned,
    partitions,
    queries,
    table_of,
)

from .helpers import canonical, embedded, frame, rows

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::matchsql.integrations.spark.SinglePartitionWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

#: Spark examples cost a job each: fewer than the in-process paths run.
FEW = SETTINGS.__class__(SETTINGS, max_examples=8)


@FEW
@given(sql=queries(), groups=st.lists(partitions, min_size=1, max_size=4))
def test_spark_agrees_with_functions(spark, sql: str, groups: list[list[dict]]) -> None:
    table = table_of(groups)
    query = partitioned(sql)
    try:
        expected = embedded("t", table, query)
    except matchsql.Error as exc:
        with pytest.raises(type(exc)):
            rows(match_recognize(frame(spark, table), query))
        return
    got = rows(match_recognize(frame(spark, table), query))
    assert canonical(got) == canonical(expected), query
