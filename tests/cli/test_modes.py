"""Output modes (``.mode``) and the shell's output settings, without a terminal."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import matchsql
from matchsql.cli.output_modes import MODES, render
from matchsql.cli.shell import Shell
from tests.cli.conftest import cli_env

# Two rows with what each format must escape: a comma and a quote, a pipe, a NULL,
# a newline, a timestamp and a NaN (JSON has no NaN: it becomes DuckDB's text).
SQL = (
    "SELECT * FROM (VALUES (1, 'x,y', NULL::INTEGER, 2.5::DOUBLE, TIMESTAMP '2020-01-01', true),"
    " (2, 'q|\"', 3, 'nan'::DOUBLE, NULL, false), (3, E'two\\nlines', 4, -1.0, NULL, NULL))"
    " AS t(a, b, c, d, t, ok)"
)


def _text(mode: str, sql: str = SQL, batch_rows: int = 1, **options) -> str:
    """``sql`` in ``mode``, fed one row per batch so that the modes join batches."""
    reader = duckdb.connect().sql(sql).to_arrow_reader(batch_rows)
    return "".join(render(mode, reader.schema, reader, **options))


def test_every_mode_is_listed() -> None:
    assert {"box", "csv", "markdown", "line", "json"} <= set(MODES)


def test_csv_is_rfc4180_with_a_header_and_empty_nulls() -> None:
    text = _text("csv")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["a", "b", "c", "d", "t", "ok"]
    assert rows[1] == ["1", "x,y", "", "2.5", "2020-01-01 00:00:00", "true"]
    assert rows[2] == ["2", 'q|"', "3", "nan", "", "false"]
    assert rows[3][1] == "two\nlines"
    assert text.splitlines()[1] == '1,"x,y",,2.5,2020-01-01 00:00:00,true'


def test_markdown_escapes_pipes_and_aligns_numbers_right() -> None:
    lines = _text("markdown").splitlines()
    assert lines[0] == "| a | b | c | d | t | ok |"
    assert lines[1] == "|---:|---|---:|---:|---|---|"
    assert lines[2] == "| 1 | x,y | NULL | 2.5 | 2020-01-01 00:00:00 | true |"
    assert lines[3] == '| 2 | q\\|" | 3 | nan | NULL | false |'
    assert lines[4] == "| 3 | two<br>lines | 4 | -1.0 | NULL | NULL |"
    assert len(lines) == 5


def test_line_mode_puts_each_value_on_its_own_line() -> None:
    blocks = _text(
        "line", "SELECT 1 AS a, 'x' AS longer UNION ALL SELECT 2, NULL ORDER BY a"
    ).split("\n\n")
    assert blocks[0].splitlines() == ["     a = 1", "longer = x"]
    assert blocks[1].splitlines() == ["     a = 2", "longer = NULL"]


def test_json_is_one_array_with_typed_values() -> None:
    records = json.loads(_text("json"))
    assert records[0] == {
        "a": 1,
        "b": "x,y",
        "c": None,
        "d": 2.5,
        "t": "2020-01-01 00:00:00",
        "ok": True,
    }
    assert records[1]["d"] == "nan" and records[1]["ok"] is False and records[1]["t"] is None
    assert records[2]["b"] == "two\nlines"
    assert len(records) == 3


def test_json_of_no_rows_is_an_empty_array() -> None:
    assert json.loads(_text("json", "SELECT 1 AS a WHERE false")) == []
    assert _text("csv", "SELECT 1 AS a WHERE false") == "a\n"


def test_box_keeps_max_rows_and_max_width() -> None:
    text = _text(
        "box", "SELECT range AS i, range * 2 AS j FROM range(100)", batch_rows=7, max_rows=4
    )
    assert text.splitlines()[-1].strip() == "100 rows (4 shown)"
    wide = "SELECT " + ", ".join(f"{i} AS column_number_{i}" for i in range(12))
    narrow = _text("box", wide, max_width=60)
    assert max(len(line) for line in narrow.splitlines()) <= 60
    assert "12 columns" in narrow.splitlines()[-1]


@pytest.fixture
def shell():
    con = matchsql.connect(demo=False)
    out, err = io.StringIO(), io.StringIO()
    yield Shell(con, out=out, err=err), out, err
    con.close()


def test_mode_command_switches_and_shows_the_mode(shell) -> None:
    sh, out, err = shell
    assert sh.run_dot(".mode csv")
    assert sh.run_text("SELECT 1 AS a, 'b' AS b;")
    assert out.getvalue() == "a,b\n1,b\n"
    assert sh.run_dot(".mode")
    assert "current output mode: csv" in out.getvalue()
    assert not sh.run_dot(".mode nosuch")
    assert "Usage: .mode" in err.getvalue()
    assert sh.mode == "csv"


def test_output_sends_results_to_a_file_and_back(shell, tmp_path: Path) -> None:
    sh, out, err = shell
    target = tmp_path / "out.json"
    assert sh.run_dot(".mode json")
    assert sh.run_dot(f".output {target}")
    assert sh.run_text("SELECT 7 AS seven;")
    assert out.getvalue() == ""
    assert sh.run_dot(".output")
    assert json.loads(target.read_text()) == [{"seven": 7}]
    assert sh.run_text("SELECT 8 AS eight;")
    assert json.loads(out.getvalue()) == [{"eight": 8}]
    assert not sh.run_dot(f".output {tmp_path / 'no' / 'such' / 'dir.txt'}")
    assert "cannot write" in err.getvalue()


def test_maxwidth_limits_box_tables(shell) -> None:
    sh, out, _ = shell
    assert sh.run_dot(".maxwidth 50")
    assert sh.run_text("SELECT " + ", ".join(f"{i} AS column_number_{i}" for i in range(12)) + ";")
    assert max(len(line) for line in out.getvalue().splitlines()) <= 50
    assert sh.run_dot(".maxwidth")
    assert "maxwidth: 50" in out.getvalue()
    assert not sh.run_dot(".maxwidth wide")


def test_show_lists_shell_and_connection_settings(shell) -> None:
    sh, out, _ = shell
    sh.run_dot(".mode markdown")
    sh.run_dot(".maxrows 7")
    sh.run_dot(".progress off")
    sh.run_text("SET input_mode = 'push';")
    assert sh.run_dot(".show")
    settings = dict(line.strip().split(": ", 1) for line in out.getvalue().splitlines())
    assert settings["mode"] == "markdown"
    assert settings["maxrows"] == "7"
    assert settings["progress"] == "off"
    assert settings["output"] == "stdout"
    assert settings["input_mode"] == "push"


def test_pager_and_progress_settings(shell) -> None:
    sh, out, err = shell
    assert sh.run_dot(".pager cat -n")
    assert sh.pager == "cat -n"
    sh.run_text("SELECT range FROM range(3);")  # not a terminal: printed, not paged
    assert "│      0 │" in out.getvalue() and "\t" not in out.getvalue()
    assert sh.run_dot(".pager off") and sh.pager is None
    assert sh.run_dot(".progress 0.5") and sh.progress_delay == 0.5
    assert not sh.run_dot(".progress soon")
    assert "Usage: .progress" in err.getvalue()


def test_a_reader_that_goes_away_ends_a_streamed_mode_quietly(tmp_path: Path) -> None:
    """``matchsql -c ... | head``: no "internal error" when head stops reading."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "matchsql", "-c", ".mode csv", "-c", "SELECT * FROM range(3000000)"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(tmp_path),
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "range\n"
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Error" not in err
