"""What the sorted mode's router sends: whole partitions per message, and its timeline.

A partition cut by a message's edge is matched on its worker as a run of its
own (a matcher set up, a kernel call per piece); the router keeps the partition
still open at a message's end until its end is known, so a partition shorter
than a message reaches its worker in one entry, matched with the others.
"""

from __future__ import annotations

import pickle
from collections import Counter

import pytest

import matchsql
from matchsql.workers import router as router_module
from matchsql.workers.router import WorkerRouter

QUERY = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
         "MATCH_NUMBER() AS mn, COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+) "
         "DEFINE B AS v > PREV(v))")
# 30 partitions of 50 rows, stored by partition: batches of 64 rows cut most of them.
SETUP = ("CREATE TABLE t AS SELECT 'k' || lpad((i // 50)::VARCHAR, 2, '0') AS p, i AS ts, "
         "(i * 7919) % 23 AS v FROM range(1500) r(i)")


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
            sent.extend(pickle.loads(payload.meta))
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
    monkeypatch.setattr(WorkerRouter.__init__, "__kwdefaults__",
                        {**WorkerRouter.__init__.__kwdefaults__, "chunk_rows": 40})
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
