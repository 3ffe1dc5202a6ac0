"""``Connection.interrupt()`` ends a statement at once and stops all of its work.

Each query below would run for minutes: ``(A | B)+ C`` under AFTER MATCH SKIP
TO NEXT ROW scans from every start row to the end of its partition, with a C
that never holds (on the row-local DFA, C holds on the last rows: an attempt
that would fail is decided at the first dead end an earlier attempt met, so
there every attempt is made to find a match at the end instead). The interrupt must end the
statement on every path (reference VM, registers kernel, row-local DFA), with one and two threads,
and leave no worker thread or kernel running: the process's CPU time stays
flat once the statement has failed. The bound on the latency here is loose
for a loaded CI machine; ``python -m bench.interrupt`` measures it.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import matchsql
from matchsql.config import Config
from matchsql.engine.compiled import batch as batch_module
from matchsql.engine.planner import new_partition_matcher, whole_partitions
from matchsql.errors import ExecutionError
from matchsql.plan.spec import SkipMode
from matchsql.runtime.cancel import Cancellation
from tests.fsm.specs import make_spec

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (
  {partition} ORDER BY ts
  MEASURES MATCH_NUMBER() AS m {rows}
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN ((A | B)+ C)
  DEFINE A AS price > PREV(price), B AS price <= PREV(price), C AS {c}
)"""
C_BY_PATH = {
    "reference": "price > 1000000",
    "row_local": "price > 1000000 OR ts >= 399000",
    "registers": "price > FIRST(A.price) + 1000000",
}


@pytest.fixture(scope="module")
def con():
    # No limit on an attempt's rows: the queries must run until interrupted.
    con = matchsql.connect(demo=False, max_buffered_rows=100_000_000)
    con.sql(
        "CREATE TABLE t AS SELECT i % 7 AS p, i AS ts, (hash(i) % 1000)::DOUBLE AS price "
        "FROM range(400000) r(i)"
    )
    yield con
    con.close()


def _partition_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("matchsql-partition")]


def _interrupted(con: matchsql.Connection, sql: str, after: float) -> float:
    """Seconds from ``interrupt()`` (``after`` s into ``sql``) to the statement's error."""
    fired: list[float] = []

    def fire() -> None:
        fired.append(time.perf_counter())
        con.interrupt()

    timer = threading.Timer(after, fire)
    timer.start()
    try:
        with pytest.raises(ExecutionError, match="^statement interrupted$"):
            con.sql(sql).fetchall()
        ended = time.perf_counter()
    finally:
        timer.cancel()  # a failed test must not interrupt the next one
        timer.join()
    return ended - fired[0]


@pytest.mark.parametrize("path", ["reference", "registers", "row_local"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("all_rows", [False, True], ids=["one_row", "all_rows"])
def test_interrupt_ends_the_statement_and_its_work(con, path, threads, all_rows):
    con.sql(f"SET execution_path = '{path}'")
    con.sql(f"SET threads = {threads}")
    sql = QUERY.format(
        partition="PARTITION BY p", rows="ALL ROWS PER MATCH" if all_rows else "", c=C_BY_PATH[path]
    )
    # Compile first (a kernel's compile cannot be cut short), on a few rows.
    con.sql(sql.replace("FROM t ", "FROM (SELECT * FROM t LIMIT 50) ")).fetchall()
    latency = _interrupted(con, sql, after=0.4)
    assert latency < 2.0
    deadline = time.monotonic() + 2.0
    while _partition_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    busy = [t for t in _partition_threads() if t.is_alive()]
    cpu = time.process_time()
    time.sleep(0.3)
    assert time.process_time() - cpu < 0.1, (busy, "work went on after the interrupt")
    assert con.sql("SELECT 42").fetchall() == [(42,)]  # the connection is usable again


def test_interrupt_stops_one_long_partition_inside_the_kernel(con):
    # No PARTITION BY: one kernel call holds all 400k rows; only the kernel's
    # own poll of the cancel flag can stop it before it returns.
    con.sql("SET execution_path = 'registers'")
    con.sql("SET threads = 1")
    sql = QUERY.format(partition="", rows="", c=C_BY_PATH["registers"])
    con.sql(sql.replace("FROM t ", "FROM (SELECT * FROM t LIMIT 50) ")).fetchall()
    assert _interrupted(con, sql, after=0.5) < 2.0


def test_an_interrupt_before_the_rows_are_read_fails_the_read(con):
    con.sql("SET execution_path = 'auto'")
    result = con.sql(QUERY.format(partition="PARTITION BY p", rows="", c="price > 1000000"))
    con.interrupt()
    with pytest.raises(ExecutionError, match="^statement interrupted$"):
        result.fetchall()
    # The next statement has a token of its own: the old interrupt does not reach it.
    assert con.sql("SELECT 1").fetchall() == [(1,)]


def test_cancellation_reaches_children_and_is_never_cleared():
    parent = Cancellation()
    early = parent.child()
    early.cancel()  # a child alone: the parent runs on
    assert early.cancelled and not parent.cancelled
    late = parent.child()
    parent.cancel()
    assert late.cancelled and late.flag[0] == 1
    assert parent.child().cancelled  # born after the cancel: cancelled at once
    with pytest.raises(ExecutionError, match="interrupted"):
        late.check()


@pytest.mark.parametrize("path", ["registers", "row_local"])
def test_a_cancelled_kernel_stops_with_the_interrupt_error(path):
    # A token already set: the kernel's first poll of its flag ends the call.
    rows = [{"id": i, "x": i % 1000} for i in range(50_000)]
    define = {"B": "x >= PREV(x)" if path == "row_local" else "x >= A.x", "C": "x > 5000"}
    spec = make_spec(
        rows,
        "A (B | D)+ C",
        define=define,
        skip=SkipMode.TO_NEXT_ROW,
        measures=[("m", "MATCH_NUMBER()", pa.int64())],
    )
    cancel = Cancellation()
    cancel.cancel()
    matcher = new_partition_matcher(spec, (), Config(execution_path=path), cancel)
    assert type(matcher).__name__ == "CompiledMatcher"
    batch = pa.RecordBatch.from_pylist(rows, schema=spec.columns)
    with pytest.raises(ExecutionError, match="^statement interrupted$"):
        matcher.feed(batch)
        matcher.finish()


def test_an_interrupt_while_whole_partitions_are_output_ends_the_call(monkeypatch):
    """Partitions matched together (engine/compiled/batch.py) whose kernels all ran before the
    interrupt: turning their labels into output (quadratic in rows for long matches under
    SKIP TO NEXT ROW) polls it, rather than finishing the batch first."""
    rows = [{"p": i % 3, "id": i, "x": i % 10} for i in range(300)]
    spec = make_spec(
        rows,
        "A+ C",
        define={"A": "x >= 0", "C": "id >= 290"},
        skip=SkipMode.TO_NEXT_ROW,
        partition_by=["p"],
        order_by=["p", "id"],
        measures=[("m", "MATCH_NUMBER()", pa.int64())],
    )
    cancel = Cancellation()
    matcher, why = whole_partitions(spec, Config(execution_path="row_local"))
    assert matcher is not None, why
    calls = []
    run = batch_module.D.run_partitions

    def run_then_cancel(*args):
        result = run(*args)  # every partition, in one compiled call
        calls.append(1)
        cancel.cancel()  # after the kernel returned, before the output is made
        return result

    monkeypatch.setattr(batch_module.D, "run_partitions", run_then_cancel)
    ordered = sorted(rows, key=lambda r: (r["p"], r["id"]))
    batch = pa.RecordBatch.from_pylist(ordered, schema=spec.columns)
    bounds = np.array([0, 100, 200, 300])
    with pytest.raises(ExecutionError, match="^statement interrupted$"):
        matcher.match(batch, bounds, cancel)
    assert len(calls) == 1
