"""Ctrl-C in the REPL stops a long MATCH_RECOGNIZE and all of its work; exit never hangs.

A user saw the prompt come back after Ctrl-C while the partition threads
went on at 90 % CPU for minutes, ``.quit`` then hang, and a second Ctrl-C
print a traceback. Here the REPL runs in a real pty; the child's CPU time is
read from ``/proc`` to see that the work stopped, not only the statement.
"""

from __future__ import annotations

import os
import time

import pexpect

from tests.cli.test_repl_pty import PROMPT, Repl

# Two partitions of 250k rows: each runs as a chain of chunk tasks on the thread
# pool, and one kernel call over a chunk takes many seconds.
LONG_ALL_ROWS = (
    "SELECT * FROM (SELECT *, hash(symbol) % 2 AS half FROM trade) MATCH_RECOGNIZE ("
    "PARTITION BY half ORDER BY ts "
    "MEASURES MATCH_NUMBER() AS m, RUNNING LAST(C.price) AS c ALL ROWS PER MATCH "
    "AFTER MATCH SKIP TO NEXT ROW PATTERN ((A | B)+ C) "
    "DEFINE A AS price > PREV(price), B AS price <= PREV(price), "
    "C AS price > FIRST(A.price) + 1000000);"
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` and its threads, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_ctrl_c_stops_the_work_and_quit_exits(env: dict[str, str]) -> None:
    repl = Repl(env)
    try:
        repl.enter("SET threads = 2;")
        repl.expect(PROMPT)
        repl.enter("SET max_buffered_rows = 100000000;")  # runs until interrupted
        repl.expect(PROMPT)
        repl.enter(LONG_ALL_ROWS)
        time.sleep(2.0)
        repl.child.sendcontrol("c")
        repl.expect(r"interrupted", timeout=10)
        repl.expect(PROMPT)
        time.sleep(0.3)
        before = cpu_seconds(repl.child.pid)
        time.sleep(1.0)
        assert cpu_seconds(repl.child.pid) - before < 0.3, "work went on after Ctrl-C"
        started = time.monotonic()
        repl.enter(".quit")
        repl.child.expect(pexpect.EOF, timeout=10)
        assert time.monotonic() - started < 5
    finally:
        repl.close()
    assert "Traceback" not in repl.text() + (repl.child.before or "")
