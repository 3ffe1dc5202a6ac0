"""The GPU matcher's own decisions: growing the stacks, falling back, live streams per batch."""

from __future__ import annotations

import pyarrow as pa
import pytest

from matchsql.config import Config
from matchsql.engine.gpu import gpu_matcher as M
from matchsql.engine.gpu import ring as R
from matchsql.engine.gpu.gpu_live import LiveGpuMatcher
from matchsql.engine.planner import gpu_path, new_partition_matcher
from matchsql.errors import LimitExceededError
from matchsql.saved_state.snapshot import PlanIndex
from tests.property.strategies import SCHEMA, spec_of

# A+ greedy pushes one frame per row it takes: a 12-row run needs 12 frames.
SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS c, LAST(id) AS e "
    "ONE ROW PER MATCH PATTERN (A+ B) DEFINE A AS x > 0, B AS x = 0)"
)
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


def test_live_stream_output_comes_per_batch() -> None:
    config = Config()
    config.gpu = "on"
    matcher = new_partition_matcher(spec_of(SQL), (), config, live=True)
    assert isinstance(matcher, LiveGpuMatcher)
    got = []
    for a, b in ((0, 5), (5, 13), (13, 16)):
        out = matcher.feed(pa.RecordBatch.from_pylist(ROWS[a:b], schema=SCHEMA))
        got.append([tuple(r.values()) for o in out for r in o.to_pylist()])
    # Rows 0-4 are all A: the attempt from row 0 waits. Row 12 (B) arrives with the
    # second batch: the match 0-12 comes out then; the third batch ends the second match.
    assert got == [[], [(13, 12)], [(3, 15)]]
    assert matcher.finish() == []
    assert matcher.launches == 3
    # Released rows: only rows an attempt may still read are held.
    assert matcher.buffered_rows == 0


def test_live_streams_stay_on_cpu_under_auto() -> None:
    config = Config()
    config.gpu = "auto"
    assert gpu_path(spec_of(SQL), config, live=True) is None


WITHIN_SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS c "
    "ONE ROW PER MATCH PATTERN (A B* C) WITHIN 3 DEFINE A AS x > 0, C AS y > 0)"
)


def test_within_bounds_the_rows_a_live_partition_holds() -> None:
    """No C ever comes: without WITHIN the attempt from row 0 holds every row; with WITHIN
    3 each attempt ends after 4 rows, and the held rows stay below 5."""
    config = Config()
    config.gpu = "on"
    config.max_buffered_rows = 20
    rows = [{"id": i, "x": 1, "y": 0} for i in range(100)]
    matcher = new_partition_matcher(spec_of(WITHIN_SQL), (), config, live=True)
    held = []
    for a in range(0, 100, 10):
        assert matcher.feed(pa.RecordBatch.from_pylist(rows[a : a + 10], schema=SCHEMA)) == []
        held.append(matcher.buffered_rows)
    assert max(held) <= 4
    unbounded = new_partition_matcher(
        spec_of(WITHIN_SQL.replace(" WITHIN 3", "")), (), config, live=True
    )
    with pytest.raises(LimitExceededError, match="max_buffered_rows"):
        for a in range(0, 100, 10):
            unbounded.feed(pa.RecordBatch.from_pylist(rows[a : a + 10], schema=SCHEMA))


def test_live_matcher_survives_a_checkpoint() -> None:
    """A continuous query's checkpoint pickles the live matcher (its held rows and device
    columns); the restored one finishes the open attempts with the same rows."""
    config = Config()
    config.gpu = "on"
    spec = spec_of(SQL)
    matcher = new_partition_matcher(spec, (), config, live=True)
    assert matcher.feed(pa.RecordBatch.from_pylist(ROWS[:5], schema=SCHEMA)) == []
    index = PlanIndex(
        {
            "spec": spec,
            "config": config,
            "template": new_partition_matcher(spec, (), config, live=True),
        }
    )
    restored = index.loads(index.dumps({(): matcher}))[()]
    assert isinstance(restored, LiveGpuMatcher) and restored.buffered_rows == 5
    out = restored.feed(pa.RecordBatch.from_pylist(ROWS[5:], schema=SCHEMA))
    assert [tuple(r.values()) for b in out for r in b.to_pylist()] == [(13, 12), (3, 15)]


def test_live_string_codes_hold_across_batches() -> None:
    """A string column travels as codes; a code given in one batch means the same string in
    the next (PREV compares rows of two batches)."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS f, LAST(id) AS l "
        "ONE ROW PER MATCH PATTERN (A B+) DEFINE A AS v = 'a', B AS v = PREV(v) OR v = 'b')"
    )
    config = Config()
    config.gpu = "on"
    matcher = new_partition_matcher(spec_of(sql, schema), (), config, live=True)
    letters = "xaccbxadd"
    rows = [{"id": i, "v": c} for i, c in enumerate("xaaab")]
    out = []
    for a, b in ((0, 2), (2, 5)):
        out += matcher.feed(pa.RecordBatch.from_pylist(rows[a:b], schema=schema))
    out += matcher.finish()
    # x a | a a b: A at 1; row 2 (second batch) has row 1's letter, so has row 3; row 4 'b'
    # is B by its own letter: ids 1-4. Equal codes across the batches make row 2 a B.
    assert [tuple(r.values()) for b in out for r in b.to_pylist()] == [(1, 4)]
    rows = [{"id": i, "v": c} for i, c in enumerate(letters)]
    matcher = new_partition_matcher(
        spec_of(sql.replace("v = 'b'", "v = 'c'"), schema), (), config, live=True
    )
    out = []
    for a, b in ((0, 2), (2, 5), (5, 9)):
        out += matcher.feed(pa.RecordBatch.from_pylist(rows[a:b], schema=schema))
    out += matcher.finish()
    # With B as 'c' or the row before's letter: from 1, rows 2 'c' and 3 'c' are B, row 4 'b'
    # is neither: ids 1-3. From 6: row 7 'd' is not 'c' and not 'a': no match.
    assert [tuple(r.values()) for b in out for r in b.to_pylist()] == [(1, 3)]


RING_SQL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS f, LAST(id) AS l, "
    "SUM(x) AS s ONE ROW PER MATCH PATTERN (A B+ C) DEFINE B AS x > PREV(x) AND "
    "y >= A.y, C AS SUM(x) > 2 * COUNT(*) AND y IS NOT NULL)"
)


@pytest.mark.parametrize("capacity", [1, 8, 16])
def test_live_ring_wraps_many_times(capacity: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long stream in small batches through a small ring: the held rows (an attempt's
    rows and one PREV row) wrap around the buffer's end again and again, the ring doubles
    when a batch does not fit, and every batch's output is the CPU path's."""
    monkeypatch.setattr(R, "FIRST_CAPACITY", capacity)
    rows = [
        {"id": i, "x": (i * 7) % 5 if i % 11 else None, "y": i % 3 if i % 13 else None}
        for i in range(400)
    ]
    config = Config()
    config.gpu = "on"
    matcher = new_partition_matcher(spec_of(RING_SQL), (), config, live=True)
    assert isinstance(matcher, LiveGpuMatcher)
    config_cpu = Config()
    config_cpu.gpu = "off"
    cpu = new_partition_matcher(spec_of(RING_SQL), (), config_cpu, live=True)
    got, want = [], []
    for a in range(0, 400, 5):
        batch = pa.RecordBatch.from_pylist(rows[a : a + 5], schema=SCHEMA)
        got += [tuple(r.values()) for b in matcher.feed(batch) for r in b.to_pylist()]
        want += [tuple(r.values()) for b in cpu.feed(batch) for r in b.to_pylist()]
    got += [tuple(r.values()) for b in matcher.finish() for r in b.to_pylist()]
    want += [tuple(r.values()) for b in cpu.finish() for r in b.to_pylist()]
    assert got == want and len(want) > 10
    ring = matcher.ring
    assert ring.wraps >= 20 and ring.capacity <= 64, (ring.wraps, ring.capacity)
