"""Details of the shell a new user meets in the first hour: EXPLAIN is printed whole, each
completion word is offered once, and the message of an interrupted statement gets a line
of its own on the terminal."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from prompt_toolkit.document import Document

import matchsql
from matchsql.cli.completion import SqlCompleter, read_catalog, read_words
from matchsql.cli.shell import Shell
from tests.cli.conftest import cli_env
from tests.cli.test_repl_pty import PROMPT, Repl

MR = (
    "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES count(*) AS n ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS price > PREV(price))"
)


@pytest.fixture
def shell():
    out, err = io.StringIO(), io.StringIO()
    yield Shell(matchsql.connect(), out=out, err=err), out, err


@pytest.mark.parametrize("keep_last", [True, False])
def test_explain_of_a_match_recognize_is_printed_whole(shell, keep_last: bool) -> None:
    shell, out, err = shell
    shell.keep_last = keep_last
    shell.run_dot(".maxwidth 200")
    assert shell.run_text(f"EXPLAIN {MR};"), err.getvalue()
    text = out.getvalue()
    expected = "\n".join(r[0] for r in matchsql.connect().sql(f"EXPLAIN {MR}").fetchall())
    assert expected in text
    assert max(len(line) for line in expected.splitlines()) > 60  # what a box cut at 40


@pytest.mark.parametrize("keep_last", [True, False])
def test_explain_of_plain_sql_is_duckdbs_plan_text(shell, keep_last: bool) -> None:
    shell, out, err = shell
    shell.keep_last = keep_last
    assert shell.run_text("EXPLAIN SELECT symbol, price FROM trade WHERE price > 100;")
    text = out.getvalue()
    assert "\\n" not in text and "explain_value" not in text
    assert "Filters: price > 100" in text and "Seq Scan" in text, text


def test_each_completion_word_is_offered_once() -> None:
    con = matchsql.connect(demo=False)
    catalog = read_catalog(con, read_words(con))
    completer = SqlCompleter(lambda: catalog)
    for prefix in ("try_", "TRY_", "lef", "coal"):
        words = [
            c.text.lower() for c in completer.get_completions(Document(f"SELECT {prefix}"), None)
        ]
        assert words and len(words) == len(set(words)), (prefix, words)


def screen_line(raw: str) -> str:
    """The last line a terminal shows of ``raw``: ``\\r`` goes back, ``ESC[2K`` erases the
    line, other escapes are dropped (enough for one line of output)."""
    line: list[str] = []
    column = 0
    for part in re.split(r"(\r|\x1b\[[0-9;?]*[A-Za-z])", raw.split("\n")[-1]):
        if part == "\r":
            column = 0
        elif part == "\x1b[2K":
            line = []
        elif part.startswith("\x1b"):
            continue
        else:
            for ch in part:
                if column < len(line):
                    line[column] = ch
                else:
                    line.extend(" " * (column - len(line)) + ch)
                column += 1
    return "".join(line).rstrip()


def test_screen_line_of_the_emulation() -> None:
    assert screen_line("abc\rx") == "xbc"
    assert screen_line("long text^C\r    \rError") == "Errortext^C"
    assert screen_line("long text^C\r\x1b[2KError") == "Error"


def test_interrupted_message_has_its_own_line(tmp_path: Path) -> None:
    repl = Repl(cli_env(tmp_path))
    try:
        repl.enter("SELECT count(*) FROM range(10000000000) a, range(1000) b;")
        time.sleep(2.5)  # the progress bar is up after a second
        repl.child.sendcontrol("c")
        repl.expect("statement interrupted", timeout=30)
        repl.expect(PROMPT)
    finally:
        repl.close()
    raw = repl.text()
    shown = screen_line(raw[: raw.index("statement interrupted") + len("statement interrupted")])
    assert shown == "Error: statement interrupted"
