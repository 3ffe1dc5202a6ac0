"""A worker that dies, a failing matcher, an interrupt: a clear error, never a hang.

The kill is real: a policy object (called by the router between input
batches, where rebalancing decisions are made) sends SIGKILL to a worker
process in the middle of the query.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import matchsql
from matchsql.errors import ExecutionError, LimitExceededError
from matchsql.execution.router.presorted import GroupedRows
from matchsql.execution.workers.balance import Load
from matchsql.execution.workers.session import PRIMING_ROWS, Priming

QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
    "COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS v >= PREV(v))"
)


@pytest.fixture()
def con():
    con = matchsql.connect(demo=False, workers=2, batch_size=1_000)
    con.sql(
        "CREATE TABLE t AS SELECT i % 300 AS p, i AS ts, hash(i) % 1000 AS v "
        "FROM range(300000) r(i)"
    )
    yield con
    con.close()


class KillAfter:
    """Kills worker ``victim`` once ``batches`` input batches were routed."""

    def __init__(self, session, victim: int, batches: int) -> None:
        self.session = session
        self.victim = victim
        self.batches = batches
        self.killed_pid = 0

    def decide(self, load: Load) -> list[tuple[int, int]]:
        self.batches -= 1
        if self.batches == 0:
            self.killed_pid = self.session.pool.workers[self.victim].pid
            os.kill(self.killed_pid, signal.SIGKILL)
        return []


@pytest.mark.parametrize("victim", [0, 1])
def test_killed_worker_fails_the_query_clearly(con, victim: int) -> None:
    expected = con.sql(QUERY).fetchall()  # warms the pool and gives the right rows
    session = con._executor.workers
    killer = KillAfter(session, victim, batches=20)
    session.policy_factory = lambda: killer
    started = time.monotonic()
    with pytest.raises(ExecutionError) as info:
        con.sql(QUERY).fetchall()
    assert time.monotonic() - started < 30
    assert killer.killed_pid
    message = info.value.message
    assert f"worker process {victim}" in message and "SIGKILL" in message, message
    assert "Traceback" not in message
    # The next query gets a fresh pool and the right rows again.
    session.policy_factory = lambda: KillAfter(session, victim, batches=10**9)
    assert con.sql(QUERY).fetchall() == expected
    assert all(w.pid != killer.killed_pid for w in session.pool.workers)


def test_matcher_error_in_a_worker_keeps_its_class(con) -> None:
    con.sql("SET max_buffered_rows = 50")
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B* C) DEFINE C AS v < -5000)"
    )
    with pytest.raises(LimitExceededError):
        con.sql(query).fetchall()
    con.sql("SET max_buffered_rows = 50000")
    assert con.sql(QUERY).fetchall()


def test_interrupt_stops_the_workers(con) -> None:
    slow = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B* C) DEFINE C AS v < -5000)"
    )
    con.sql("SET execution_path = reference")  # slow enough to be caught running
    con.sql(QUERY).fetchall()  # the pool is up
    pids = [w.pid for w in con._executor.workers.pool.workers]
    timer = threading.Timer(1.0, con.interrupt)
    timer.start()
    started = time.monotonic()
    with pytest.raises(ExecutionError, match="interrupted"):
        con.sql(slow).fetchall()
    assert time.monotonic() - started < 10
    timer.join()
    for pid in pids:  # killed at once, not left matching an abandoned query
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.05)
        assert not _alive(pid)


def test_an_interrupted_pool_is_replaced_before_the_next_query(con) -> None:
    """The killed pool's successor starts right after the interrupt, on a helper thread:
    the next query takes it (started already) instead of starting processes itself."""
    slow = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B* C) DEFINE C AS v < -5000)"
    )
    expected = con.sql(QUERY).fetchall()
    session = con._executor.workers
    old = [w.pid for w in session.pool.workers]
    con.sql("SET execution_path = reference")
    timer = threading.Timer(1.0, con.interrupt)
    timer.start()
    with pytest.raises(ExecutionError, match="interrupted"):
        con.sql(slow).fetchall()
    timer.join()
    assert session.pool is None and session._spare is not None
    spare = session._spare
    assert spare.ready.wait(60)
    assert spare.pool is not None and spare.pool.alive()
    started = [w.pid for w in spare.pool.workers]
    assert not set(started) & set(old)
    # Primed: the new workers matched the interrupted query's first rows (and so loaded
    # its kernels) before the next query came.
    assert sum(w.rows_done for w in spare.pool.workers) == PRIMING_ROWS
    con.sql("SET execution_path = auto")
    assert con.sql(QUERY).fetchall() == expected
    assert [w.pid for w in session.pool.workers] == started  # the spare, not a new pool
    assert session._spare is None


def test_the_priming_sample_costs_no_permutation(con, monkeypatch) -> None:
    """Every column of ``t`` is placed into shared memory in grouped order, so the
    query never needs the grouping's permutation; keeping the priming sample must not
    compute it either (taken before the rows are placed, it did)."""
    taken = []
    perm = GroupedRows.perm
    monkeypatch.setattr(
        GroupedRows, "perm", property(lambda rows: taken.append(1) or perm.fget(rows))
    )
    con.sql(QUERY).fetchall()
    session = con._executor.workers
    assert session.last.shared
    assert session.priming is not None and session.priming.sample.num_rows == PRIMING_ROWS
    assert taken == []


def test_a_failed_priming_leaves_no_pool_and_the_next_query_starts_one(con) -> None:
    """Rows the replacement pool cannot match (here: of another schema) fail its priming
    run; that pool is killed, not handed over in an unknown state."""
    expected = con.sql(QUERY).fetchall()
    session = con._executor.workers
    assert session.priming is not None and session.priming.sample.num_rows == PRIMING_ROWS
    session.priming = Priming(
        session.priming.spec, session.priming.config, pa.table({"other": ["x"] * 10})
    )
    old = session.pool
    session._replace(old)
    spare = session._spare
    assert spare is not None and spare.ready.wait(60)
    assert spare.pool is None
    assert con.sql(QUERY).fetchall() == expected
    assert session.pool is not None and session.pool is not old and session.pool.alive()


def test_closing_discards_a_starting_spare_pool() -> None:
    """A connection closed while its spare pool starts leaves no worker behind."""
    con = matchsql.connect(demo=False, workers=2)
    session = con._executor.workers
    from matchsql.execution.workers.session import _Spare

    session._spare = _Spare(2)
    spare = session._spare
    con.close()
    assert session._spare is None and not spare.thread.is_alive()
    assert spare.pool is None


def test_early_stop_then_next_query(con) -> None:
    expected = con.sql(QUERY).fetchall()
    # LIMIT 3 straight over the MATCH_RECOGNIZE matches in this process (a few rows are
    # wanted); through a subquery the workers run and the reader stops them early.
    assert len(con.sql(QUERY + " LIMIT 3").fetchall()) == 3
    assert len(con.sql(f"SELECT * FROM ({QUERY}) LIMIT 3").fetchall()) == 3
    assert con.sql(QUERY).fetchall() == expected


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie not yet reaped counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_ignore_ctrl_c_of_the_terminal(con) -> None:
    """SIGINT reaches the whole process group; the statement's interrupt handles it."""
    expected = con.sql(QUERY).fetchall()
    for worker in con._executor.workers.pool.workers:
        os.kill(worker.pid, signal.SIGINT)
    time.sleep(0.2)
    assert con._executor.workers.pool.alive()
    assert con.sql(QUERY).fetchall() == expected


ORPHAN = """
import matchsql
con = matchsql.connect(demo=False, workers=2, max_buffered_rows=10**8)
con.sql("CREATE TABLE t AS SELECT i % 2 AS p, i AS ts, 1 AS v FROM range(400000) r(i)")
query = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
         "COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B* C) DEFINE C AS v < 0)")
con.sql(query.replace("FROM t", "FROM (SELECT * FROM t LIMIT 10)")).fetchall()  # the pool
print(" ".join(str(w.pid) for w in con._executor.workers.pool.workers), flush=True)
# No C row: every start row reads its partition to the end (minutes of kernel time).
con.sql(query).fetchall()
"""


def test_workers_exit_when_their_router_is_killed(tmp_path) -> None:
    """SIGKILL of the router's process in the middle of a long match: its workers (which
    it cannot ask to stop, and which read no pipe until the match ends) exit within
    seconds, rather than living on as orphans."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    router = subprocess.Popen(
        [sys.executable, "-c", ORPHAN], env=env, cwd=root, stdout=subprocess.PIPE, text=True
    )
    try:
        assert router.stdout is not None
        pids = [int(pid) for pid in router.stdout.readline().split()]
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, 0)  # alive while the router lives
        time.sleep(3)  # the workers are inside the long match now
        router.kill()
        router.wait(30)
        deadline = time.monotonic() + 20
        alive = set(pids)
        while alive and time.monotonic() < deadline:
            for pid in list(alive):
                try:
                    os.kill(pid, 0)
                    # A zombie (exited, not yet reaped by init) counts as gone.
                    with open(f"/proc/{pid}/stat") as stat:
                        if stat.read().split(") ", 1)[1].startswith("Z"):
                            alive.discard(pid)
                except (ProcessLookupError, FileNotFoundError):
                    alive.discard(pid)
            time.sleep(0.2)
        assert not alive, f"workers {sorted(alive)} outlived their router"
    finally:
        if router.poll() is None:
            router.kill()
        if router.stdout is not None:
            router.stdout.close()
