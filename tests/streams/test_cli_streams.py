"""``matchsql produce`` and the shell's live printing."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

from matchsql.cli.shell import Shell
from tests.streams.conftest import ROOT, WAIT_S, bounded

COUNT_QUERY = (
    "SELECT * FROM trades MATCH_RECOGNIZE(MEASURES A.volume AS v ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS TRUE)"
)


def produce(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "matchsql", "produce", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_produce_synthetic(con):
    con.sql("CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    proc = produce("trades", "--synthetic", "--count", "3000", "--rate", "100k/s")
    rows = bounded(con.sql(COUNT_QUERY).fetchall)
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0, err
    assert len(rows) == 3000 and "3,000 rows" in err


def test_produce_from_csv(con, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "symbol,price,volume,ts\nA,1.5,100,2006-01-03 09:30:00\nB,2.5,200,2006-01-03 09:30:01\n"
    )
    con.sql("CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    proc = produce("trades", "--from", str(path))
    rows = bounded(con.sql(COUNT_QUERY).fetchall)
    proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0
    assert rows == [(100,), (200,)]


def test_produce_progress_bar(con):
    con.sql("CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    proc = produce(
        "trades", "--synthetic", "--count", "20000", "--rate", "40k/s", "--progress", "on"
    )
    rows = bounded(con.sql(COUNT_QUERY).fetchall)
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0, err
    assert len(rows) == 20000
    bar = err.replace("\r", "\n").splitlines()
    assert any(re.match(r"trades: 100%\|.*\| 20\.0k/20\.0k \[.*rows/s\]", line) for line in bar), (
        err
    )
    # Not on a terminal and not asked for: no bar.
    con.sql("DROP STREAM trades")
    con.sql("CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    proc = produce("trades", "--synthetic", "--count", "100")
    bounded(con.sql(COUNT_QUERY).fetchall)
    _, err = proc.communicate(timeout=WAIT_S)
    assert "%|" not in err and "100 rows in" in err


def test_produce_errors():
    proc = produce("nosuch", "--synthetic", "--count", "10")
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 1 and "does not exist" in err
    proc = produce("x", "--synthetic", "--rate", "fast")
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 2 and "not a rate" in err


def test_shell_prints_rows_as_they_arrive(con):
    con.sql("CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    proc = produce("trades", "--synthetic", "--count", "5")
    out = io.StringIO()
    shell = Shell(con, out=out, err=out)
    assert bounded(lambda: shell.run_text(COUNT_QUERY + ";"))
    proc.communicate(timeout=WAIT_S)
    lines = out.getvalue().splitlines()
    assert lines[0] == "op | v"  # a changelog, as the Flink SQL client's (cli/live.py)
    assert [line.split()[0] for line in lines[1:6]] == ["+I"] * 5
    assert lines[6] == "(5 rows)"


def test_shell_interrupt_stops_a_continuous_query(con):
    con.sql("CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    out = io.StringIO()
    shell = Shell(con, out=out, err=out)
    import threading

    threading.Timer(0.5, con.interrupt).start()
    assert bounded(lambda: shell.run_text(COUNT_QUERY + ";"), timeout=20) is False
    assert "(0 rows)" in out.getvalue() and "interrupted" in out.getvalue()
    # the stream can be queried again afterwards
    proc = produce("trades", "--synthetic", "--count", "3")
    assert len(bounded(con.sql(COUNT_QUERY).fetchall)) == 3
    proc.communicate(timeout=WAIT_S)


def test_cte_hides_a_stream(con):
    con.sql("CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    rows = con.sql("WITH trades AS (SELECT 7 AS volume) " + COUNT_QUERY).fetchall()
    assert rows == [(7,)]
