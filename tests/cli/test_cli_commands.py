"""The ``matchsql`` command run as a subprocess: -c, scripts, stdin, exit codes, errors."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from matchsql.cli import SUBCOMMANDS, main


def test_command_prints_a_box_table(run_cli) -> None:
    done = run_cli("-c", "SELECT count(*) AS n, count(DISTINCT symbol) AS s FROM trade")
    assert done.returncode == 0, done.stderr
    assert "500000" in done.stdout and "│" in done.stdout
    assert done.stdout.rstrip().endswith("1 row")
    assert done.stderr == ""


def test_command_runs_every_statement(run_cli) -> None:
    done = run_cli("--no-demo", "-c", "CREATE TABLE t AS SELECT 7 AS x; SELECT x * 6 AS y FROM t;")
    assert done.returncode == 0, done.stderr
    assert "42" in done.stdout


def test_command_error_exits_nonzero_without_traceback(run_cli) -> None:
    done = run_cli("-c", "SELECT * FROM no_such_table")
    assert done.returncode == 1
    assert done.stderr.startswith("Error: ")
    assert "no_such_table" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_command_stops_at_the_failing_statement(run_cli) -> None:
    done = run_cli("-c", "SELECT 'first' AS a; SELECT nope; SELECT 'third' AS c")
    assert done.returncode == 1
    assert "first" in done.stdout and "third" not in done.stdout
    assert "statement 2" in done.stderr


def test_script_file(run_cli, tmp_path: Path) -> None:
    script = tmp_path / "query.sql"
    script.write_text(
        "-- a script\nCREATE TABLE t(x INTEGER);\nINSERT INTO t VALUES (1), (2);\n"
        "SELECT sum(x) AS total\nFROM t;\n"
    )
    done = run_cli("--no-demo", str(script))
    assert done.returncode == 0, done.stderr
    assert "total" in done.stdout and "3" in done.stdout


def test_script_reports_which_statement_failed_and_stops(run_cli, tmp_path: Path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text(
        "SELECT 'one' AS a;\n\nSELECT\n  missing_column\nFROM trade;\nSELECT 'never' AS b;\n"
    )
    done = run_cli(str(script))
    assert done.returncode == 1
    assert "one" in done.stdout and "never" not in done.stdout
    assert f"statement 2 at {script}:3" in done.stderr
    assert "missing_column" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_script_file(run_cli, tmp_path: Path) -> None:
    done = run_cli("--no-demo", str(tmp_path / "absent.sql"))
    assert done.returncode == 1
    assert "cannot read" in done.stderr and "Traceback" not in done.stderr


def test_stdin_runs_as_a_script(run_cli) -> None:
    done = run_cli("--no-demo", stdin="SELECT 1 AS a;\nSELECT\n 2 AS b;\nSELECT 3 AS c")
    assert done.returncode == 0, done.stderr
    for name in ("a", "b", "c"):
        assert f"│ {name} " in done.stdout or f" {name} " in done.stdout
    assert "matchsql>" not in done.stdout  # no prompts without a terminal


def test_stdin_error_stops_with_status_1(run_cli) -> None:
    done = run_cli("--no-demo", stdin="SELECT 1;\nSELEC 2;\nSELECT 'after' AS z;\n")
    assert done.returncode == 1
    assert "statement 2 at <stdin>:2" in done.stderr
    assert "after" not in done.stdout
    assert "Traceback" not in done.stderr


def test_stdin_dot_commands(run_cli) -> None:
    done = run_cli(stdin=".tables\n.timer on\nSELECT 1;\n.quit\nSELECT 'not run';\n")
    assert done.returncode == 0, done.stderr
    assert "trade" in done.stdout and "Run Time:" in done.stdout
    assert "not run" not in done.stdout


def test_stdin_unterminated_string_is_a_message(run_cli) -> None:
    done = run_cli("--no-demo", stdin="SELECT 'abc;\n")
    assert done.returncode == 1
    assert "unterminated" in done.stderr.lower()
    assert "Traceback" not in done.stderr


def test_database_file_has_no_demo_table_unless_asked(run_cli, tmp_path: Path) -> None:
    db = str(tmp_path / "my.duckdb")
    done = run_cli("-d", db, "-c", "CREATE TABLE kept AS SELECT 5 AS v")
    assert done.returncode == 0, done.stderr
    done = run_cli("--database", db, "-c", "SELECT table_name FROM information_schema.tables")
    assert "kept" in done.stdout and "trade" not in done.stdout
    done = run_cli("-d", db, "--demo", "-c", "SELECT count(*) AS n FROM trade")
    assert done.returncode == 0, done.stderr
    assert "500000" in done.stdout


def test_no_demo_in_memory(run_cli) -> None:
    done = run_cli("--no-demo", "-c", "SELECT * FROM trade")
    assert done.returncode == 1
    assert "trade" in done.stderr


def test_usage_errors(run_cli) -> None:
    done = run_cli("--no-such-option")
    assert done.returncode == 2
    assert "usage:" in done.stderr
    done = run_cli("--no-demo", "-c", "SELECT 1", "file.sql")
    assert done.returncode == 2


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "matchsql 0.1.0" in out and "--database" in out
    assert "matchsql produce" in out and "matchsql experiment" in out


def test_command_runs_a_dot_command(run_cli) -> None:
    done = run_cli("--no-demo", "-c", "CREATE TABLE listed_here AS SELECT 1 AS x", "-c", ".tables")
    assert done.returncode == 0, done.stderr
    assert "listed_here" in done.stdout
    done = run_cli("-c", ".maxrows")
    assert done.stdout.strip() == "maxrows: 40"


def test_results_a_little_longer_than_max_rows_render(run_cli) -> None:
    done = run_cli("--no-demo", "-c", "SELECT * FROM range(50)")
    assert done.returncode == 0, done.stderr
    assert "50 rows (40 shown)" in done.stdout
    shown = [line.strip("│ ") for line in done.stdout.splitlines() if line.startswith("│")]
    assert shown[-20:] == [str(i) for i in range(30, 50)]


def test_max_rows_option(run_cli) -> None:
    done = run_cli("--no-demo", "--max-rows", "4", "-c", "SELECT range AS i FROM range(1000)")
    assert "1,000 rows (4 shown)" in done.stdout


def test_set_option(run_cli) -> None:
    done = run_cli("--no-demo", "--set", "no_such_setting=1", "-c", "SELECT 1")
    assert done.returncode == 1
    assert "unknown setting" in done.stderr and "Traceback" not in done.stderr


def test_subcommands_dispatch_on_the_first_word(monkeypatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setitem(SUBCOMMANDS, "produce", lambda argv: seen.append(argv) or 7)
    assert main(["produce", "--rate", "10"]) == 7
    assert seen == [["--rate", "10"]]


def test_bad_database_path_is_a_message(run_cli, tmp_path: Path) -> None:
    done = run_cli("-d", str(tmp_path / "no" / "such" / "dir" / "x.duckdb"), "-c", "SELECT 1")
    assert done.returncode == 1
    assert done.stderr.startswith("Error: ") and "Traceback" not in done.stderr


def test_sigint_cancels_a_script_statement(env: dict[str, str]) -> None:
    # The first statement's output tells that the process is up and running
    # the second one, so the signal never lands during interpreter start-up.
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "matchsql",
            "--no-demo",
            "-c",
            "SELECT 'ready' AS state",
            "-c",
            "SELECT count(*) FROM range(100000) a, range(1000000) b",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if "ready" in line or not line:
            break
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
