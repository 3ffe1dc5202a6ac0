"""A worker process SIGKILLed under a named continuous query with checkpoints: the query
goes back to its last checkpoint (state and stream position), replays the stream's log,
and the sink receives every match exactly once.

Real processes: the producer writes from this test's process through the stream's
shared memory, the query's partitions run in spawned worker processes, and the kill
is ``kill -9`` of one of them while tuples keep coming.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

import matchsql
from matchsql.execution.workers.stream_router import StreamRouter
from matchsql.storage import Producer
from tests.streams.conftest import WAIT_S, runtime_dir  # noqa: F401 - fixture
from tests.streams.test_continuous_queries import (  # noqa: F401 - db is a fixture
    PATTERN,
    SINK,
    data,
    db,
    expected,
    sink_rows,
    wait_state,
)


def _wait_position(con, name: str, at_least: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while wait_state(con, name, "running")["position"] < at_least:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _write(producer: Producer, start: int, stop: int, step: int = 500) -> None:
    """Rows ``start``..``stop`` through a producer the caller keeps open: the stream does
    not end (and the query does not finish) before the kill."""
    for low in range(start, stop, step):
        producer.write_batch(data(low, min(low + step, stop)), batch_id=low)


def _lost_and_duplicated(got: list[tuple], want: list[tuple]) -> tuple[int, int]:
    have, need = Counter(got), Counter(want)
    return sum((need - have).values()), sum((have - need).values())


@pytest.mark.parametrize("victim", [0, 1])
def test_killed_worker_resumes_from_the_checkpoint_exactly_once(db, victim: int) -> None:  # noqa: F811
    con = matchsql.connect(db, workers=2)
    try:
        con.sql(SINK)
        con.sql(
            f"CREATE CONTINUOUS QUERY rising WITH (checkpoint_rows = 1500) AS "
            f"INSERT INTO sink SELECT * FROM ticks {PATTERN}"
        )
        with Producer.open("ticks", database=db, name="p") as producer:
            _write(producer, 0, 9000)
            _wait_position(con, "rising", 6000)
            runner = con._executor.continuous.runners["rising"]
            router = runner._router
            assert isinstance(router, StreamRouter)  # the partitions run on the workers
            pid = router.pool.workers[victim].pid
            os.kill(pid, signal.SIGKILL)
            _write(producer, 9000, 20000)
        # end of stream: the producer closed
        wait_state(con, "rising", "finished")
        runner.thread.join(WAIT_S)  # its counters are final once the thread is done
        row = wait_state(con, "rising", "finished")
        assert runner.restarts >= 1  # the loss was seen and the query went back
        assert runner.replayed > 0  # ... and read the log again from the checkpoint
        got, want = sink_rows(con), expected(20000)
        assert _lost_and_duplicated(got, want) == (0, 0)
        assert got == want
        assert row["matches"] == len(want)
        assert (
            pid not in [w.pid for w in con._executor.workers.pool.workers]
            if con._executor.workers.pool is not None
            else True
        )
    finally:
        con.close()


def test_killed_worker_fails_a_query_without_checkpoints_clearly(db) -> None:  # noqa: F811
    """No checkpoint to go back to: the query fails, naming the worker and its signal."""
    con = matchsql.connect(db, workers=2)
    try:
        con.sql(SINK)
        con.sql(
            f"CREATE CONTINUOUS QUERY rising WITH (checkpoint_interval = 0) AS "
            f"INSERT INTO sink SELECT * FROM ticks {PATTERN}"
        )
        with Producer.open("ticks", database=db, name="p") as producer:
            _write(producer, 0, 3000)
            deadline = time.monotonic() + WAIT_S
            runner = con._executor.continuous.runners["rising"]
            while not isinstance(runner._router, StreamRouter) or runner.position < 3000:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            os.kill(runner._router.pool.workers[0].pid, signal.SIGKILL)
            _write(producer, 3000, 4000)
            row = wait_state(con, "rising", "failed")
        assert "killed by signal 9 (SIGKILL)" in row["error"] and "worker process 0" in row["error"]
    finally:
        con.close()
