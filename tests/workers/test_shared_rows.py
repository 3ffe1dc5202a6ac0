"""The grouped input in shared memory: ranges taken by workers, the segment's life, no room,
and the answers to those takes."""

from __future__ import annotations

import errno
import random

import numpy as np
import pyarrow as pa
import pytest

import matchsql
from matchsql.config import Config
from matchsql.execution.router.presorted import GroupedRows, OrderKey, grouped, grouped_rows
from matchsql.execution.workers import shared_rows
from matchsql.execution.workers.shared_rows import Attached, RowsArena
from matchsql.execution.workers.worker_matching import Query, take_bytes
from tests.fsm.specs import make_spec


def _feed(rng: random.Random, n: int, parts: int, nulls: bool = True) -> pa.Table:
    """Rows in time order, partitions mixed (string and integer keys, some NULL)."""
    keys = [rng.randrange(parts) for _ in range(n)]
    return pa.table(
        {
            "s": pa.array([None if nulls and k % 5 == 0 else f"k{k}" for k in keys]),
            "ts": pa.array(range(n), pa.int64()),
            "i": pa.array([k % 3 for k in keys], pa.int32()),
            "v": pa.array([rng.random() if rng.random() > 0.1 else None for _ in range(n)]),
            "unread": pa.array([rng.randrange(9) for _ in range(n)], pa.int64()),
        }
    )


@pytest.mark.parametrize("place", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_gather_gives_the_grouped_rows_of_each_range(seed: int, place: bool) -> None:
    """Columns taken through the permutation, or moved into grouped order first (those
    of fixed width without NULLs: ts here, and i where it is no key)."""
    rng = random.Random(seed)
    table = _feed(rng, rng.choice([50, 400, 3000]), rng.choice([1, 3, 40]))
    keys = rng.choice([["s"], ["s", "i"], ["i"]])
    rows = grouped_rows(table, keys, [OrderKey("ts")], frozenset({"unread"}))
    expected = grouped(table, keys, [OrderKey("ts")])
    if not isinstance(rows, GroupedRows):
        pytest.skip("grouped as stored: nothing to gather")
    if place:
        movable = [i for i in range(len(rows.columns)) if rows.placeable(i) is not None]
        assert table.schema.get_field_index("ts") in movable
        assert table.schema.get_field_index("v") not in movable  # NULLs: taken
        for i in movable:
            rows.place(i, np.empty(rows.num_rows, rows.placeable(i)))
    starts, stops, parts, pieces = [], [], [], []
    begin = np.concatenate(([0], rows.ends[:-1]))
    for part in sorted(rng.sample(range(len(rows.ends)), k=max(1, len(rows.ends) // 2))):
        a, b = int(begin[part]), int(rows.ends[part])
        cut = rng.randint(a, b)  # a piece of the partition, maybe empty
        for lo, hi in ((a, cut), (cut, b)):
            starts.append(lo)
            stops.append(hi)
            parts.append(part)
            pieces.append(expected.slice(lo, hi - lo))
    got = rows.gather(np.array(starts), np.array(stops), np.array(parts))
    want = pa.concat_tables(pieces)
    assert got.schema == table.schema
    for name in table.column_names:
        if name == "unread":
            assert got.column(name).null_count == got.num_rows  # read by no one
        else:
            assert got.column(name).to_pylist() == want.column(name).to_pylist(), name


@pytest.mark.parametrize("seed", range(4))
def test_runs_of_rows_are_taken_by_where_their_partitions_end(seed: int) -> None:
    """A message names runs of consecutive rows and no partitions: the worker finds the
    partitions (their keys) from their ends in the segment's layout."""
    rng = random.Random(seed)
    table = _feed(rng, 2000, rng.choice([3, 40]))
    keys = rng.choice([["s"], ["s", "i"]])
    rows = grouped_rows(table, keys, [OrderKey("ts")])
    expected = grouped(table, keys, [OrderKey("ts")])
    assert isinstance(rows, GroupedRows)
    arena, attached = RowsArena(), Attached()
    try:
        layout = arena.put(rows)
        assert layout is not None
        taken = attached.rows(layout)
        for _ in range(5):
            cuts = sorted(rng.sample(range(rows.num_rows + 1), 2 * rng.randint(1, 4)))
            starts, stops = np.array(cuts[0::2]), np.array(cuts[1::2])  # (some maybe empty)
            got = taken.gather(starts, stops, None)
            for name in keys + ["ts", "v"]:
                assert got.column(name).to_pylist() == [
                    value
                    for a, b in zip(starts, stops)
                    for value in expected.column(name).slice(a, b - a).to_pylist()
                ], name
        del taken, got
    finally:
        attached.release()
        arena.close()


def _time_ordered(con, rows: int, parts: int, seed: int = 0) -> None:
    """Table ``t``: ``rows`` rows in time order, ``parts`` partitions mixed."""
    con.sql("DROP TABLE IF EXISTS t")
    con.sql(
        f"CREATE TABLE t AS SELECT 'k' || (hash(i + {seed}) % {parts}) AS p, "
        f"i::INTEGER AS ts, (hash(i * 7 + {seed}) % 100)::INTEGER AS v FROM range({rows}) r(i)"
    )


QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
    "MATCH_NUMBER() AS mn, FIRST(ts) AS s, LAST(v) AS lv ALL ROWS PER MATCH "
    "PATTERN (A B+) DEFINE B AS v > PREV(v))"
)


@pytest.fixture(scope="module")
def cons():
    cons = {n: matchsql.connect(demo=False, workers=n, batch_size=500) for n in (1, 2)}
    yield cons
    for con in cons.values():
        con.close()


def test_workers_take_their_rows_from_one_segment_reused_by_the_next_query(cons) -> None:
    for con in cons.values():
        _time_ordered(con, 3000, 30)
    expected = cons[1].sql(QUERY).fetchall()
    session = cons[2]._executor.workers
    assert cons[2].sql(QUERY).fetchall() == expected
    assert session.last.shared
    first = session.pool.arena.shm.name
    assert cons[2].sql(QUERY).fetchall() == expected
    assert session.pool.arena.shm.name == first  # the same pages, mapped already
    for con in cons.values():
        _time_ordered(con, 200_000, 30, seed=1)  # more rows than the segment holds
    expected = cons[1].sql(QUERY).fetchall()
    assert cons[2].sql(QUERY).fetchall() == expected
    assert session.last.shared and session.pool.arena.shm.name != first


def test_no_room_in_shared_memory_sends_the_rows_through_the_rings(cons, monkeypatch) -> None:
    def full(shm) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    for con in cons.values():
        _time_ordered(con, 2000, 20, seed=2)
    expected = cons[1].sql(QUERY).fetchall()
    session = cons[2]._executor.workers
    assert cons[2].sql(QUERY).fetchall() == expected  # the pool is up (whatever ran before)
    session.pool.arena.close()  # the next query needs a new segment
    monkeypatch.setattr(shared_rows, "_reserve", full)
    assert cons[2].sql(QUERY).fetchall() == expected
    assert not session.last.shared and session.pool.arena.shm is None


def test_a_worker_lets_go_of_a_replaced_segment() -> None:
    small = grouped_rows(_feed(random.Random(3), 500, 9, nulls=False), ["s"], [OrderKey("ts")])
    large = grouped_rows(_feed(random.Random(4), 90_000, 9, nulls=False), ["s"], [OrderKey("ts")])
    assert isinstance(small, GroupedRows) and isinstance(large, GroupedRows)
    arena, attached = RowsArena(), Attached()
    try:
        layout = arena.put(small)
        assert layout is not None
        taken = attached.rows(layout)
        assert taken.gather(np.array([0]), np.array([7]), np.array([0])).num_rows == 7
        del taken
        bigger = arena.put(large)
        assert bigger is not None and bigger.name != layout.name
        rows = attached.rows(bigger)
        assert list(attached._segments) == [bigger.name]  # the old mapping is closed
        whole = rows.gather(np.array([0]), np.array([large.num_rows]), np.array([0]))
        assert whole.num_rows == large.num_rows
        del rows  # the columns read in place: the segment closes once they are gone
    finally:
        attached.release()
        arena.close()


class _Recorder:
    """A worker's answer channel that keeps what is sent, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []

    def send(self, kind: str, payload=None, extra=None, idle=None) -> None:
        self.sent.append((kind, extra))


def test_answers_to_takes_wait_for_a_flush_and_keep_their_order() -> None:
    """A worker keeps its answers to "take" messages until it flushes (no message
    waiting, or one of another kind), then sends them in the order of the takes."""
    table = pa.table(
        {
            "p": pa.array([1, 2, 1, 2, 1, 2], pa.int64()),
            "id": pa.array(range(6), pa.int64()),
            "v": pa.array([1.0, 5.0, 2.0, 4.0, 3.0, 6.0]),
        }
    )
    spec = make_spec(table.to_pylist(), "A B+", define={"B": "v > PREV(v)"}, partition_by=["p"])
    rows = grouped_rows(table, ["p"], [OrderKey("id")])
    assert isinstance(rows, GroupedRows)
    query = Query(0, spec, Config())
    query.shared = rows
    writer = _Recorder()
    ends = rows.ends.tolist()  # [3, 6]: partition 1 then partition 2
    for number, (start, stop) in enumerate([(0, ends[0]), (ends[0], ends[1])]):
        entry = (number, 0, (number + 1,), stop - start, True)
        payload = take_bytes([entry], np.array([start]), np.array([stop]))
        query.serve(writer, "take", payload, None)
    assert writer.sent == []  # kept while (as far as it knows) more may come
    query.flush(writer)
    assert writer.sent == [("out", 3), ("out", 6)]  # rows matched so far, in take order
    assert query.deferred == []
