"""Scripts and files given to ``matchsql``: dot-commands anywhere a statement may start
(after blank lines, comments or a byte-order mark), and a DuckDB database given as FILE
opened as a database, as DuckDB's CLI does."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

MR = (
    "SELECT symbol, n FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES count(*) AS n ONE ROW PER MATCH PATTERN (A B+) "
    "DEFINE B AS price > PREV(price)) ORDER BY symbol, n LIMIT 2;\n"
)
LEADS = {
    "first line": "",
    "blank lines": "\n\n",
    "a line comment": "-- the output as CSV\n",
    "a block comment": "/* the output\n   as CSV */\n",
    "a byte-order mark": "\ufeff",
}


@pytest.mark.parametrize("lead", LEADS.values(), ids=LEADS.keys())
def test_a_script_file_with_dot_commands(run_cli, tmp_path: Path, lead: str) -> None:
    script = tmp_path / "q.sql"
    script.write_text(f"{lead}.mode csv\n{MR}", encoding="utf-8")
    done = run_cli(str(script))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "symbol,n"
    assert "│" not in done.stdout


@pytest.mark.parametrize("lead", [v for v in LEADS.values() if v != "\ufeff"])
def test_stdin_and_read_with_dot_commands(run_cli, tmp_path: Path, lead: str) -> None:
    done = run_cli(stdin=f"{lead}.mode csv\n{MR}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "symbol,n"
    (tmp_path / "q.sql").write_text(f"{lead}.mode csv\n{MR}", encoding="utf-8")
    done = run_cli(stdin=f".read {tmp_path / 'q.sql'}\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "symbol,n"


def test_a_dot_inside_an_open_comment_is_comment_text(run_cli) -> None:
    done = run_cli(stdin="/* not a command:\n.mode csv\n*/\nSELECT 42 AS answer;\n")
    assert done.returncode == 0, done.stderr
    assert "answer,42" not in done.stdout.replace("\n", ",") and "42" in done.stdout


def test_a_duckdb_database_given_as_file_opens_as_a_database(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "mine.db"  # found by its header, whatever its name
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT 7 AS x")
    done = run_cli(str(path), stdin="SELECT x FROM t;\n")
    assert done.returncode == 0, done.stderr
    assert "7" in done.stdout and "codec" not in done.stderr


def test_a_new_duckdb_file_is_created(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "new.duckdb"
    done = run_cli(str(path), stdin="CREATE TABLE t AS SELECT 1 AS x;\n")
    assert done.returncode == 0, done.stderr
    with duckdb.connect(str(path)) as con:
        assert con.sql("SELECT x FROM t").fetchall() == [(1,)]


def test_a_database_file_and_another_database_is_a_usage_error(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "a.duckdb"
    duckdb.connect(str(path)).close()
    done = run_cli(str(path), "-d", str(tmp_path / "b.duckdb"))
    assert done.returncode == 2 and "is a DuckDB database" in done.stderr


def test_a_script_named_like_a_database_still_runs_when_it_is_text(run_cli, tmp_path) -> None:
    script = tmp_path / "q.ddb"
    script.write_text("SELECT 5 AS five;\n", encoding="utf-8")
    done = run_cli(str(script))
    assert done.returncode == 0 and "5" in done.stdout, done.stderr
