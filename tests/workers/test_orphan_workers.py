"""Worker processes end with the process that started them, whenever it is SIGKILLed:
with the pool running a query, or while the pool is still starting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
    import os, sys, time
    import matchsql
    con = matchsql.connect(demo=False, workers=2, batch_size=1_000)
    con.sql("CREATE TABLE t AS SELECT i % 300 AS p, i AS ts, hash(i) % 1000 AS v "
            "FROM range(300000) r(i)")
    query = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
             "COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS v >= PREV(v))")
    if sys.argv[1] == "running":
        con.sql(query).fetchall()  # the pool is up
    print("ready", flush=True)
    while True:
        con.sql(query).fetchall()
"""
WAIT_S = 30
DIE_S = 5  # a worker checks for its parent every 0.25 s; a starting one first imports


def children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid``."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == pid and stat[0] != "Z":
                found.add(int(entry))
    return found


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
@pytest.mark.parametrize(
    ("moment", "delay"), [("running", 0.5), ("starting", 0.0), ("starting", 0.4)]
)
def test_workers_die_with_a_killed_query_process(moment, delay):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), moment],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        deadline = time.monotonic() + WAIT_S
        if moment == "running":  # both workers (and the resource tracker) are there
            while len(children(proc.pid)) < 3:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        else:  # the pool is being started: kill while its processes come up
            while not children(proc.pid):
                assert time.monotonic() < deadline
                time.sleep(0.005)
        time.sleep(delay)
        spawned = children(proc.pid)
        assert spawned
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT_S)
        deadline = time.monotonic() + DIE_S
        while True:  # every process it had started ends on its own, soon
            left = {pid for pid in spawned if alive(pid)}
            if not left:
                break
            assert time.monotonic() < deadline, f"still running: {left}"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
