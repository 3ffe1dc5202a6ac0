"""The GPU matcher's own decisions: growing the stacks, falling back, refusing live streams."""

from __future__ import annotations

import pyarrow as pa
import pytest

from matchsql.config import Config
from matchsql.errors import ExecutionError
from matchsql.fsm.planner import gpu_path, new_partition_matcher
from matchsql.gpu import matcher as M
from tests.property.strategies import SCHEMA, spec_of

# A+ greedy pushes one frame per row it takes: a 12-row run needs 12 frames.
SQL = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS c, LAST(id) AS e "
       "ONE ROW PER MATCH PATTERN (A+ B) DEFINE A AS x > 0, B AS x = 0)")
ROWS = [{"id": i, "x": 0 if i in (12, 15) else 1, "y": 0} for i in range(16)]


def _rows(gpu: str) -> tuple[list, str]:
    config = Config()
    config.gpu = gpu
    matcher = new_partition_matcher(spec_of(SQL), (), config)
    out = matcher.feed(pa.RecordBatch.from_pylist(ROWS[:5], schema=SCHEMA))
    out += matcher.feed_final(pa.RecordBatch.from_pylist(ROWS[5:], schema=SCHEMA))
    return [tuple(r.values()) for b in out for r in b.to_pylist()], getattr(matcher, "ran_on", "")


def test_rows_by_hand() -> None:
    # Rows 0-11 are A, row 12 is B: one match of 13 rows ending at 12; then rows 13-14
    # are A and 15 is B: 3 rows ending at 15.
    assert _rows("on") == ([(13, 12), (3, 15)], "gpu")


def test_stacks_grow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(M, "STACK_FRAMES", 2)
    assert _rows("on") == ([(13, 12), (3, 15)], "gpu")


def test_falls_back_to_cpu_when_the_stack_cannot_grow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(M, "STACK_FRAMES", 2)
    monkeypatch.setattr(M, "MAX_STACK_FRAMES", 4)
    assert _rows("on") == ([(13, 12), (3, 15)], "cpu")
    assert _rows("off")[0] == [(13, 12), (3, 15)]


def test_live_streams_are_refused_with_the_reason() -> None:
    config = Config()
    config.gpu = "on"
    with pytest.raises(ExecutionError, match="a live stream's matches come out per batch"):
        gpu_path(spec_of(SQL), config, live=True)
    config.gpu = "auto"
    assert gpu_path(spec_of(SQL), config, live=True) is None
