"""The shell's statement loop and dot-command table, in process."""

from __future__ import annotations

import io

import pytest

import matchsql
from matchsql.cli.dot_commands import COMMANDS, dot_command
from matchsql.cli.shell import Shell


@pytest.fixture
def shell():
    con = matchsql.connect(demo=False)
    out, err = io.StringIO(), io.StringIO()
    yield Shell(con, out=out, err=err)
    con.close()


def output(shell: Shell) -> tuple[str, str]:
    return shell.out.getvalue(), shell.err.getvalue()


def test_dot_commands_are_a_table() -> None:
    for name in ("help", "tables", "timer", "quit", "exit", "maxrows", "read"):
        assert name in COMMANDS and COMMANDS[name].help


def test_new_dot_command_can_be_added(shell: Shell) -> None:
    @dot_command("hello", "Say hello", "NAME")
    def _hello(sh: Shell, args: list[str]) -> bool:
        sh.print(f"hello {' '.join(args)}")
        return True

    try:
        assert shell.run_dot(".hello world")
        assert "hello world" in output(shell)[0]
        shell.run_dot(".help")
        assert ".hello NAME" in output(shell)[0]
    finally:
        del COMMANDS["hello"]


def test_help_lists_commands(shell: Shell) -> None:
    assert shell.run_dot(".help")
    out = output(shell)[0]
    assert ".tables" in out and ".timer on|off" in out and ".quit" in out
    assert shell.run_dot(".help timer")


def test_tables_timer_maxrows(shell: Shell) -> None:
    shell.run_text("CREATE TABLE alpha(x INT); CREATE VIEW beta AS SELECT 1 AS y;")
    assert shell.run_dot(".tables")
    assert "alpha" in output(shell)[0] and "beta" in output(shell)[0]
    assert shell.run_dot(".timer on") and shell.timer
    shell.run_text("SELECT 1;")
    assert "Run Time:" in output(shell)[0]
    assert shell.run_dot(".timer off") and not shell.timer
    assert shell.run_dot(".maxrows 3") and shell.max_rows == 3
    assert shell.run_dot(".maxrows") and shell.max_rows == 3
    assert output(shell)[0].splitlines()[-1] == "maxrows: 3"


def test_bad_dot_commands_are_messages(shell: Shell) -> None:
    assert not shell.run_dot(".nosuch")
    assert not shell.run_dot(".timer maybe")
    assert not shell.run_dot(".maxrows lots")
    assert not shell.run_dot(".read /no/such/file.sql")
    assert not shell.run_dot(".help 'unclosed")
    err = output(shell)[1]
    assert "unknown command .nosuch" in err and "Usage: .timer on|off" in err
    assert "Traceback" not in err


def test_quit_sets_done(shell: Shell) -> None:
    assert shell.run_dot(".quit") and shell.done


def test_internal_errors_are_one_line(shell: Shell, monkeypatch) -> None:
    def broken(sql: str):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(shell.con, "sql", broken)
    assert not shell.run_text("SELECT 1;")
    assert output(shell)[1].strip() == "Error: internal error: RuntimeError: boom"


def test_run_lines_bails_and_numbers_statements(shell: Shell) -> None:
    lines = ["SELECT 1;\n", "SELECT 2; SELECT\n", "  nope;\n", "SELECT 'never';\n"]
    assert not shell.run_lines(lines, source="s.sql")
    out, err = output(shell)
    assert "never" not in out
    assert err.startswith("Error in statement 3 at s.sql:2: ")


def test_error_positions_refer_to_the_script(shell: Shell, monkeypatch) -> None:
    def located(sql: str):
        raise matchsql.ParseError("bad pattern", sql=sql, line=2, column=3)

    monkeypatch.setattr(shell.con, "sql", located)
    assert not shell.run_lines(["\n", "\n", "SELECT *\n", "FROM x;\n"], source="f.sql")
    err = output(shell)[1]
    assert "statement 1 at f.sql:3" in err
    assert "(line 4, column 3)" in err and "FROM x" in err


def test_history_path(monkeypatch, tmp_path) -> None:
    from matchsql.cli.repl import HISTORY_ENV, history_path

    monkeypatch.delenv(HISTORY_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert history_path() == tmp_path / ".matchsql_history"
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "elsewhere"))
    assert history_path() == tmp_path / "elsewhere"


def test_enter_runs_only_finished_input() -> None:
    from matchsql.cli.repl import ready

    assert ready("") and ready(".tables") and ready("SELECT 1;")
    assert not ready("SELECT 1") and not ready("SELECT ';") and not ready(".x\nSELECT 1")
