"""WITHIN bounds the rows a partition holds on the CPU paths too (no simulator needed).

No C ever comes, so without WITHIN the attempt from row 0 stays open and the
partition holds every row until ``max_buffered_rows`` stops it; with WITHIN 3
each attempt ends at the fourth row after its start and the rows before the
next start are released.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher
from matchsql.errors import LimitExceededError
from tests.property.strategies import SCHEMA, spec_of

SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS c "
    "ONE ROW PER MATCH PATTERN (A B* C) WITHIN 3 DEFINE A AS x > 0, C AS y > {c})"
)
ROWS = [{"id": i, "x": 1, "y": 0} for i in range(100)]


def _feed(sql: str, path: str) -> list[int]:
    config = Config()
    config.gpu = "off"
    config.execution_path = path
    config.max_buffered_rows = 20
    matcher = new_partition_matcher(spec_of(sql), (), config, live=True)
    held = []
    for a in range(0, 100, 10):
        assert matcher.feed(pa.RecordBatch.from_pylist(ROWS[a : a + 10], schema=SCHEMA)) == []
        held.append(matcher.buffered_rows)
    return held


@pytest.mark.parametrize("path", ["reference", "registers"])
def test_within_releases_rows(path: str) -> None:
    assert max(_feed(SQL.format(c=0), path)) <= 10
    with pytest.raises(LimitExceededError, match="max_buffered_rows"):
        _feed(SQL.format(c=0).replace(" WITHIN 3", ""), path)


@pytest.mark.parametrize("path", ["reference", "registers"])
def test_within_matches_in_batches(path: str) -> None:
    """y > -1 holds everywhere: B* is greedy, so each match is 4 rows (the bound: ids
    s .. s + 3, C the last), one per 4 rows, output batch by batch."""
    config = Config()
    config.gpu = "off"
    config.execution_path = path
    matcher = new_partition_matcher(spec_of(SQL.format(c=-1)), (), config, live=True)
    out = []
    for a in range(0, 100, 10):
        out += matcher.feed(pa.RecordBatch.from_pylist(ROWS[a : a + 10], schema=SCHEMA))
    out += matcher.finish()
    assert [r["c"] for b in out for r in b.to_pylist()] == [4] * 25
