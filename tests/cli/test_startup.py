"""Start-up stays light: the demo table is built on first use, heavy modules on first need."""

from __future__ import annotations

import subprocess
import sys
import threading

import duckdb
import pytest

import matchsql
from matchsql.storage import demo
from matchsql.storage.demo import DEMO_ROWS
from matchsql.storage.demo_needed import needs_demo
from tests.cli.conftest import ROOT

HEAVY = (
    "numba",
    "pandas",
    "matplotlib",
    "pyspark",
    "prompt_toolkit",
    "pygments",
    "tqdm",
    "matchsql.storage.producer",
    "pyarrow",
    "numpy",
    "sqlglot",
)


@pytest.mark.parametrize(
    "text, needed",
    [
        ("SELECT 1", False),
        ("SELECT 1 AS a; SELECT 'x' || 'y'", False),
        ("VALUES (1), (2)", False),
        ("SET threads = 1", False),
        ("SELECT * FROM trade", True),
        ("FROM trade", True),
        ("SELECT 1; SELECT count(*) FROM trade", True),
        ("SHOW TABLES", True),
        ("DESCRIBE trade", True),
        ("SELECT * FROM duckdb_tables()", True),  # a catalog function, no table name
        ("SELECT (SELECT max(price) FROM trade)", True),
        ("CREATE TABLE trade (x INTEGER)", True),  # must fail: the demo table exists
        ("SELECT * FROM trade MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS true)", True),
        ("SELEC 1", True),  # not a statement that surely reads no table: build, then fail
        ("-- a comment\nSELECT 1", False),  # the comment in front is no statement
        ("SELECT 'no FROM here' AS s", True),  # conservative: FROM in a string counts too
        ("select 1;", False),
        ("SELECT 1 AS a JOIN", True),
    ],
)
def test_which_statements_need_the_demo_table(text: str, needed: bool) -> None:
    assert needs_demo(text) is needed


def test_demo_table_is_there_whenever_something_looks() -> None:
    con = matchsql.connect()
    assert con.sql("SELECT 41 + 1").fetchall() == [(42,)]
    assert "trade" in con.tables()
    assert con.sql("SELECT count(*) FROM trade").fetchall() == [(DEMO_ROWS,)]
    other = matchsql.connect()
    assert other.duckdb.sql("SELECT count(*) FROM trade").fetchall() == [(DEMO_ROWS,)]
    with pytest.raises(matchsql.Error, match="already exists"):
        matchsql.connect().sql("CREATE TABLE trade (x INTEGER)")
    assert "trade" not in matchsql.connect(demo=False).tables()


def test_select_1_imports_nothing_heavy() -> None:
    code = (
        "import sys; from matchsql.cli import main; main(['-c', 'SELECT 1']); "
        f"print('LOADED:', *(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    ).stdout
    assert "│       1 │" in out
    assert out.strip().splitlines()[-1] == "LOADED:"


def test_a_demo_build_cut_short_is_done_again(monkeypatch) -> None:
    """Ctrl-C while the first statement builds the demo table: a clear error, and the
    next statement builds it (never a half-built or missing table)."""
    real = demo.install_demo_trade
    calls: list[int] = []

    def interrupted_once(con) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
        real(con)

    monkeypatch.setattr(demo, "install_demo_trade", interrupted_once)  # imported on use
    con = matchsql.connect()
    with pytest.raises(matchsql.Error, match="^statement interrupted$"):
        con.sql("SELECT count(*) FROM trade")
    assert con.sql("SELECT count(*) FROM trade").fetchall() == [(DEMO_ROWS,)]
    assert len(calls) == 2


def test_a_first_match_recognize_builds_the_demo_beside_the_engine(monkeypatch) -> None:
    """A MATCH_RECOGNIZE as the first statement builds the demo table on another thread
    while the engine loads: the whole table, the query's rows; a build cut short there is
    a clear error and done again by the next statement."""
    real = demo.install_demo_trade
    threads: list[str] = []

    def watched(con) -> None:
        threads.append(threading.current_thread().name)
        if len(threads) == 1:
            raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")
        real(con)

    monkeypatch.setattr(demo, "install_demo_trade", watched)  # imported on use
    query = (
        "SELECT count(*) FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        "ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS price < PREV(price))"
    )
    con = matchsql.connect()
    with pytest.raises(matchsql.Error, match="^statement interrupted$"):
        con.sql(query)
    ((matches,),) = con.sql(query).fetchall()
    assert matches > 0 and all(name.startswith("matchsql-demo") for name in threads)
    assert len(threads) == 2
    assert con.sql("SELECT count(*) FROM trade").fetchall() == [(DEMO_ROWS,)]


def test_a_users_own_trade_table_stays_when_a_match_recognize_comes_first(tmp_path) -> None:
    path = str(tmp_path / "own.duckdb")
    with matchsql.connect(path) as con:
        con.sql("CREATE TABLE trade AS SELECT 'X' AS symbol, 1.0 AS price, 1 AS ts")
    with matchsql.connect(path, demo=True) as con:
        rows = con.sql(
            "SELECT * FROM trade MATCH_RECOGNIZE (ORDER BY ts MEASURES A.price AS p "
            "ONE ROW PER MATCH PATTERN (A))"
        ).fetchall()
        assert rows == [(1.0,)]
        assert con.sql("SELECT count(*) FROM trade").fetchall() == [(1,)]
