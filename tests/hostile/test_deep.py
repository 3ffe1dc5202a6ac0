"""run_deep: recursion room for statement compilation, and no RecursionError out of it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

import matchsql
from matchsql.grammar import statements
from matchsql.runtime import deep as deep_module
from matchsql.runtime.deep import (
    FRAMES_PER_LEVEL,
    SHALLOW_LEVELS,
    SPARE_FRAMES,
    NestingError,
    run_deep,
)


def depth(n: int) -> int:
    return 0 if n == 0 else 1 + depth(n - 1)


def test_deep_recursion_runs_and_the_limit_comes_back() -> None:
    before = sys.getrecursionlimit()
    with pytest.raises(RecursionError):
        depth(before + 100)
    assert run_deep(lambda: depth(5_000)) == 5_000
    assert sys.getrecursionlimit() == before


def test_runaway_recursion_is_a_matchsql_error() -> None:
    def forever(n: int) -> int:
        return forever(n + 1)

    with pytest.raises(NestingError, match=r"nested too deeply \(limit 100\)"):
        run_deep(lambda: forever(0))


def test_errors_and_nested_calls_pass_through() -> None:
    with pytest.raises(KeyError):
        run_deep(lambda: {}["missing"])
    assert run_deep(lambda: run_deep(lambda: depth(3_000))) == 3_000


def test_a_thread_is_kept_for_the_next_call_and_calls_at_once_each_get_one() -> None:
    first = run_deep(threading.current_thread)
    assert run_deep(threading.current_thread) is first  # kept, not started anew
    barrier = threading.Barrier(3)

    def waits() -> int:
        barrier.wait(timeout=10)  # all three at once: each on a thread of its own
        return threading.current_thread()

    out: list[threading.Thread] = []
    callers = [threading.Thread(target=lambda: out.append(run_deep(waits))) for _ in range(3)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(10)
    assert len({id(thread) for thread in out}) == 3
    assert run_deep(lambda: depth(5_000)) == 5_000  # a kept thread still has the room


# Forked in a fresh interpreter: a test process that has run DuckDB queries holds DuckDB's
# threads, and a fork of it can crash in the child before any of matchsql's code runs.
_FORK_CHILD = """
import os, sys
from matchsql.runtime.deep import run_deep

def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)

run_deep(lambda: None)  # a kept thread, which the child does not inherit
pid = os.fork()
if pid == 0:
    os._exit(0 if run_deep(lambda: depth(5_000)) == 5_000 else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_threads_of_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FORK_CHILD], timeout=120, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_a_shallow_statement_runs_on_the_callers_thread_where_its_stack_has_room() -> None:
    here = threading.current_thread()
    assert run_deep(threading.current_thread, levels=3) is here
    assert run_deep(threading.current_thread) is not here  # depth unknown: the big stack
    assert run_deep(threading.current_thread, levels=SHALLOW_LEVELS + 1) is not here

    def nested(n: int) -> threading.Thread:  # the caller's own stack nearly full
        return nested(n - 1) if n else run_deep(threading.current_thread, levels=3)

    assert nested(sys.getrecursionlimit() - 200) is not here


def test_a_statement_run_again_from_a_deep_stack_still_compiles(monkeypatch) -> None:
    con = matchsql.connect(demo=False)
    try:
        con.sql("CREATE TABLE t AS SELECT range AS id, range % 3 AS v FROM range(10)")
        deep = "(" * 13 + "v + 1" + ")" * 13
        text = (
            f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n "
            f"PATTERN (A B+) DEFINE B AS {deep} > PREV(v) + 1)"
        )
        first = con.sql(text).fetchall()
        assert statements.known_depth(text) == SHALLOW_LEVELS  # the deepest that runs inline

        def nested(n: int) -> list:
            return nested(n - 1) if n else con.sql(text).fetchall()

        assert nested(sys.getrecursionlimit() - 150) == first  # back on the big stack
        # The deepest caller's stack from which it still runs here, its text parsed anew.
        taken = []
        monkeypatch.setattr(
            deep_module._DeepThread,
            "take",
            classmethod(
                lambda cls, take=deep_module._DeepThread.take.__func__: taken.append(1) or take(cls)
            ),
        )
        room = sys.getrecursionlimit() - FRAMES_PER_LEVEL * SHALLOW_LEVELS - SPARE_FRAMES
        n = room - deep_module._frames_in_use()
        while True:
            taken.clear()
            statements._kept_parse.cache_clear()
            rows = nested(n)
            if not taken:
                break
            n -= 1
        assert rows == first and n > room // 2
    finally:
        con.close()
