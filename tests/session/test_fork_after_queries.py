"""A process that has run pattern queries can still fork: DuckDB connections that
matchsql keeps for itself must not be closed by a forked child (their worker threads
are not in the child, and closing one there crashed the child)."""

from __future__ import annotations

import subprocess
import sys

#: Runs in a fresh interpreter: a DEFINE that DuckDB answers while matching (its
#: connection pool is used on the compile thread and the matcher's), then children
#: made the ways libraries make them: fork_exec with a preexec_fn (it runs Python in
#: the child, as Spark's gateway launcher does) and a fork-context process.
_CHILDREN = """
import multiprocessing, subprocess, sys
import matchsql

con = matchsql.connect(demo=False)
con.sql("CREATE TABLE t AS SELECT range AS i, 'ab' || (range % 7)::VARCHAR AS s FROM range(200)")
rows = con.sql("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY i MEASURES count(*) AS n "
               "PATTERN (A B) DEFINE B AS levenshtein(B.s, PREV(s)) < 2)").fetchall()
assert rows, rows
codes = [subprocess.run([sys.executable, "-c", "pass"], preexec_fn=lambda: None).returncode
         for _ in range(3)]
child = multiprocessing.get_context("fork").Process(target=sum, args=([1, 2],))
child.start()
child.join(60)
print(codes, child.exitcode)
"""


def test_children_forked_after_duckdb_answered_a_define_start_cleanly() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILDREN], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[0,", "0,", "0]", "0"], done.stdout + done.stderr[-2000:]
