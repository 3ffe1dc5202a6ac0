"""A connection the caller drops frees its DuckDB database at once, by reference counting.

Were it left to the cyclic collector, the collection could run in a forked child
(pexpect, ``preexec_fn``, ``multiprocessing`` with fork) before it execs or does
its work; DuckDB's destructor then joins worker threads that the child does not
have, and the child dies of SIGSEGV with nothing printed where it ran.
"""

from __future__ import annotations

import gc
import os

import duckdb
import pytest

import matchsql
from matchsql.gpu.device import detect

MATCH = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY i MEASURES MATCH_NUMBER() AS m "
         "ALL ROWS PER MATCH PATTERN (A B+) DEFINE B AS v > PREV(v))")


def use_and_drop() -> None:
    """Use a connection as a test or a script does, then drop it without close()."""
    con = matchsql.connect(demo=False, batch_size=2)
    con.sql("CREATE TABLE t AS SELECT range AS i, range % 3 AS v FROM range(10)")
    assert len(con.sql(MATCH).fetchall()) == 9  # see the test below
    unread = con.sql("SELECT * FROM t")  # the connection's open Result
    assert unread.columns == ["i", "v"]
    con.sql("SELECT 1")  # closes the Result before, which the caller still holds


@pytest.fixture
def no_collector():
    """The cyclic collector off, with the garbage of earlier tests gone first."""
    # The first MATCH_RECOGNIZE of a process imports numba.cuda, whose import leaves
    # a reference cycle of its own through the frames that asked: done beforehand.
    detect()
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_no_duckdb_connection_is_left_to_the_cyclic_collector(no_collector) -> None:
    # v = 0 1 2 0 1 2 0 1 2 0: a match is A then rising v: (0, 1, 2) x 3; the last
    # row's A has no B after it, so 9 rows.
    use_and_drop()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, duckdb.DuckDBPyConnection)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_may_collect_after_a_connection_was_dropped(no_collector) -> None:
    use_and_drop()
    pid = os.fork()
    if pid == 0:  # the child: what pexpect's child may do before exec
        status = 1
        try:
            gc.collect()
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
        f"child ended with signal {os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}"
