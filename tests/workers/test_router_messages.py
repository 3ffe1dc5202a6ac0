"""What the sorted mode's router sends: whole partitions per message, and its timeline.

A partition cut by a message's edge is matched on its worker as a run of its
own (a matcher set up, a kernel call per piece); the router keeps the partition
still open at a message's end until its end is known, so a partition shorter
than a message reaches its worker in one entry, matched with the others.
"""

from __future__ import annotations

from collections import Counter, deque

import pyarrow as pa
import pytest

import matchsql
from matchsql.execution.workers import wire
from matchsql.execution.workers import worker_router as router_module
from matchsql.execution.workers.frames import pack
from matchsql.execution.workers.worker_router import WorkerRouter

QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
    "MATCH_NUMBER() AS mn, COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+) "
    "DEFINE B AS v > PREV(v))"
)
# 30 partitions of 50 rows, stored by partition: batches of 64 rows cut most of them.
SETUP = (
    "CREATE TABLE t AS SELECT 'k' || lpad((i // 50)::VARCHAR, 2, '0') AS p, i AS ts, "
    "(i * 7919) % 23 AS v FROM range(1500) r(i)"
)


@pytest.fixture(scope="module")
def cons():
    single = matchsql.connect(demo=False, batch_size=64)
    con = matchsql.connect(demo=False, workers=2, batch_size=64)
    for c in (single, con):
        c.sql(SETUP)
    con._executor.workers.mode = "sorted"
    yield single, con
    single.close()
    con.close()


def _entries(con: matchsql.Connection, monkeypatch) -> tuple[list, list]:
    """The query's rows, and the entries of every "data" message its router sent."""
    sent: list[tuple] = []
    post = WorkerRouter._post

    def recording(self, index, kind, payload=None, extra=None):
        if kind == "data":
            sent.extend(wire.loads(payload.meta))
        return post(self, index, kind, payload, extra)

    monkeypatch.setattr(WorkerRouter, "_post", recording)
    rows = con.sql(QUERY).fetchall()
    monkeypatch.setattr(WorkerRouter, "_post", post)
    return rows, sent


def test_a_partition_goes_whole_in_one_message(cons, monkeypatch) -> None:
    single, con = cons
    rows, sent = _entries(con, monkeypatch)
    assert rows == single.sql(QUERY).fetchall()
    per_partition = Counter(number for number, *_ in sent)
    assert len(per_partition) == 30
    assert set(per_partition.values()) == {1}
    # each entry: (number, bucket, key, rows, last)
    assert all(entry[3] == 50 and entry[4] for entry in sent)


def test_without_the_rule_partitions_are_cut(cons, monkeypatch) -> None:
    single, con = cons
    monkeypatch.setattr(router_module, "HOLD_OPEN", False)
    rows, sent = _entries(con, monkeypatch)
    assert rows == single.sql(QUERY).fetchall()
    assert max(Counter(number for number, *_ in sent).values()) > 1


def test_a_partition_longer_than_a_message_still_goes_in_pieces(cons, monkeypatch) -> None:
    single, con = cons
    monkeypatch.setattr(
        WorkerRouter.__init__,
        "__kwdefaults__",
        {**WorkerRouter.__init__.__kwdefaults__, "chunk_rows": 40},
    )
    rows, sent = _entries(con, monkeypatch)
    assert rows == single.sql(QUERY).fetchall()
    # 50-row partitions, 40-row messages: every partition is cut at least once
    assert min(Counter(number for number, *_ in sent).values()) > 1


def test_the_timeline_of_a_query(cons) -> None:
    _, con = cons
    con.sql(QUERY).fetchall()
    router = con._executor.workers.last
    marks = [router.marks[step][0] for step in ("start", "input", "sent", "routed", "merged")]
    assert marks == sorted(marks)
    served = [span for spans in router.worker_spans for span in spans if span[0] == "data"]
    assert served and all(marks[2] <= start <= min(end, marks[4]) for _, start, end in served)
    for cpu, process in zip(router.worker_cpu_s, router.worker_process_cpu_s):
        assert 0 < cpu <= process


def _answer(entries: list[tuple], values: list[int]) -> memoryview:
    """A worker's "out": ``(partition, rows, done)`` entries, then their rows."""
    return pack(entries, [pa.record_batch([pa.array(values, pa.int64())], names=["x"])])


def _bare_router(partitions: int) -> WorkerRouter:
    """A router's merge alone: what :meth:`WorkerRouter._on_out` and ``_ready`` use."""
    router = WorkerRouter.__new__(WorkerRouter)
    router._out, router._done, router._through, router.done_rows = {}, set(), {}, [0, 0]
    router._order = deque(range(partitions))
    return router


def test_answers_merge_in_partition_order_with_runs_and_moved_partitions() -> None:
    """An answer's run of consecutive partitions is passed on as one piece; the pieces
    of partitions whose bucket moved come from two workers, in order."""
    router = _bare_router(7)
    # Worker 0: 0 and 1 done, 2 still open (its bucket then moves to worker 1).
    router._on_out(0, _answer([(0, 1, True), (1, 2, True), (2, 1, False)], [0, 10, 11, 20]), 4)
    router._on_out(1, _answer([(5, 1, True), (6, 1, True)], [50, 60]), 2)
    # 3 and 4 begun on worker 1 before 2's state reaches it; 4's bucket then moves to 0.
    router._on_out(1, _answer([(3, 1, True), (4, 1, False)], [30, 40]), 4)
    router._on_out(1, _answer([(2, 1, True)], [21]), 5)
    router._on_out(0, _answer([(4, 1, True)], [41]), 5)
    got = [v for batch in router._ready() for v in batch.column(0).to_pylist()]
    assert got == [0, 10, 11, 20, 21, 30, 40, 41, 50, 60]
    assert not router._order and not router._out


def test_runs_of_done_partitions_pass_on_whole_whenever_the_merge_is_asked() -> None:
    """The merge asked after every answer (as the router does) gives the rows in partition
    order: a run of done partitions goes on at once, one still open at a run's end holds
    the partitions after it back until its last rows come."""
    answers = [
        (1, [(3, 1, True), (4, 1, True), (5, 2, False)], [30, 40, 50, 51]),
        (0, [(0, 1, True), (1, 1, True), (2, 1, True)], [0, 10, 20]),
        (1, [(5, 1, True), (6, 1, True), (7, 1, True)], [52, 60, 70]),
    ]
    router = _bare_router(8)
    got, after = [], []
    for index, entries, values in answers:
        router._on_out(index, _answer(entries, values), 0)
        got += [v for batch in router._ready() for v in batch.column(0).to_pylist()]
        after.append(list(router._order))
    assert got == [0, 10, 20, 30, 40, 50, 51, 52, 60, 70]
    assert after == [list(range(8)), [5, 6, 7], []]  # 0-4 on at the second answer
    assert not router._out and not router._done and not router._through


def test_a_partition_with_earlier_rows_does_not_join_the_run_before_it() -> None:
    router = _bare_router(2)
    router._on_out(1, _answer([(1, 1, False)], [10]), 1)  # 1 begun on worker 1, then moved
    router._on_out(0, _answer([(0, 1, True), (1, 1, True)], [0, 11]), 2)
    got = [v for batch in router._ready() for v in batch.column(0).to_pylist()]
    assert got == [0, 10, 11]
