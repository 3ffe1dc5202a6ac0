"""The REPL's DuckDB-CLI features in a real pty: completion, highlighting, modes,
output, pager, progress line, Ctrl-C and Ctrl-D."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.cli.test_repl_pty import PROMPT, RESULT_END, Repl

SGR = r"\x1b\[([0-9;]*)m"
# Runs for a few seconds in DuckDB, with a progress estimate, and returns one row.
SLOW = "SELECT count(*) AS n FROM range({n}) a, range(10) b WHERE a.range + b.range = -1;"


@pytest.fixture
def repl(env: dict[str, str]):
    session = Repl(env)
    yield session
    session.close()
    assert "Traceback" not in session.text()


def settle(repl: Repl) -> None:
    """Wait until everything typed so far has run and the REPL waits at its prompt.

    Keys typed while a statement still runs go to the terminal's line buffer
    (a Tab there is a plain tab), so completion tests must wait; a prompt seen
    in the echo of what was typed does not prove it.
    """
    repl.run("SELECT 'settled' AS s;")


def _plain(text: str) -> str:
    """``text`` without terminal escape sequences."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_tab_completes_tables_columns_and_match_recognize_words(repl: Repl) -> None:
    repl.enter("CREATE TABLE zebra_cells AS SELECT 41 AS stripe_count;")
    settle(repl)
    repl.child.send("SELECT stripe_co")
    repl.child.send("\t")
    repl.expect("unt")  # the column's name was completed
    repl.child.send(" + 1 AS n FROM zebra_ce")
    repl.child.send("\t")
    repl.expect("lls")
    out = repl.run(";")
    assert re.search(r"│\s+42 │", out), out
    settle(repl)
    repl.child.send("SELECT count(*) AS matches FROM (FROM trade LIMIT 20) MATCH_RECO")
    repl.child.send("\t")
    repl.expect("GNIZE")
    repl.child.send(" (ORDER BY ts MEASURES CLASSI")
    repl.child.send("\t")
    repl.expect("FIER")
    out = repl.run("() AS c ONE ROW PER MATCH PATTERN (A) DEFINE A AS true);")
    assert re.search(r"│\s+20 │", out), out


def test_tab_shows_a_menu_of_choices(repl: Repl) -> None:
    repl.child.send("SELECT * FROM trade MATCH_RECOGNIZE (PA")
    repl.child.send("\t")
    # A menu of the choices, in the order of the clause words.
    repl.expect("PARTITION BY")
    repl.expect("PAST LAST ROW")
    repl.expect("PATTERN")
    repl.child.sendcontrol("c")
    repl.expect(PROMPT)


def test_input_is_highlighted(repl: Repl) -> None:
    repl.child.send("SELECT 42 AS x FROM trade MATCH_RECOGNIZE")
    repl.expect("RECOGNIZE")
    typed = repl.transcript[-1]
    keyword = re.findall(SGR + "SELECT", typed)
    number = re.findall(SGR + "42", typed)
    pattern_word = re.findall(SGR + "MATCH_RECOGNIZE", typed)
    assert keyword and number and pattern_word, repr(typed)
    assert "38;5" in keyword[-1]  # a colour
    assert keyword[-1] != number[-1]  # keywords and numbers look different
    assert pattern_word[-1] == keyword[-1]  # MATCH_RECOGNIZE is a keyword like SELECT
    repl.child.sendcontrol("c")
    repl.expect(PROMPT)


def test_modes(repl: Repl) -> None:
    query = "SELECT 1 AS a, 'x,y' AS b;"
    repl.run(".mode csv", expect=PROMPT)
    repl.enter(query)
    repl.expect(r'a,b\r\n1,"x,y"\r\n')
    repl.expect(PROMPT)
    repl.run(".mode json", expect=PROMPT)
    repl.enter(query)
    match = repl.expect(r"\[\{.*\}\]")
    assert json.loads(match.group(0)) == [{"a": 1, "b": "x,y"}]
    repl.expect(PROMPT)
    repl.run(".mode markdown", expect=PROMPT)
    repl.enter(query)
    repl.expect(r"\| a \| b \|\r\n\|---:\|---\|\r\n\| 1 \| x,y \|")
    repl.expect(PROMPT)
    repl.run(".mode line", expect=PROMPT)
    repl.enter(query)
    repl.expect(r"a = 1\r\nb = x,y")
    repl.expect(PROMPT)
    repl.run(".mode box", expect=PROMPT)
    out = repl.run(query)
    assert "│ x,y     │" in out
    repl.enter(".show")
    repl.expect(r"mode: box")
    repl.expect(PROMPT)


def test_output_to_a_file_and_back(repl: Repl, tmp_path: Path) -> None:
    target = tmp_path / "rows.csv"
    repl.run(".mode csv", expect=PROMPT)
    repl.run(f".output {target}", expect=PROMPT)
    repl.run("SELECT 'to the file' AS where_to;", expect=PROMPT)
    repl.run(".output", expect=PROMPT)
    repl.enter("SELECT 'to the terminal' AS where_to;")
    repl.expect("to the terminal")
    repl.expect(PROMPT)
    assert target.read_text() == "where_to\nto the file\n"
    assert "to the file" not in _plain(repl.text()).replace("SELECT 'to the file'", "")


def test_maxwidth(repl: Repl) -> None:
    repl.run(".maxwidth 60", expect=PROMPT)
    out = repl.run(
        "SELECT " + ", ".join(f"{i} AS column_number_{i}" for i in range(12)) + ";",
        expect=r"12 columns \(\d+ shown\)",
    )
    table = [line for line in _plain(out).splitlines() if line.startswith(("┌", "│", "└"))]
    assert table and max(len(line) for line in table) <= 60


def test_pager_takes_results_taller_than_the_terminal(env: dict[str, str]) -> None:
    env = dict(
        env,
        MATCHSQL_PAGER=f'{sys.executable} -c "import sys; '
        f"sys.stdout.write(''.join('PAGED:' + l for l in sys.stdin))\"",
    )
    repl = Repl(env)
    try:
        repl.run(".pager on", expect=PROMPT)
        repl.run(".maxrows 0", expect=PROMPT)
        repl.enter("SELECT range AS i FROM range(100);")
        repl.expect(r"PAGED:\s+100 rows")
        repl.expect(PROMPT)
        out = repl.run("SELECT 'short' AS s;")  # fits on the screen: not paged
        assert "PAGED:" not in out
        repl.run(".pager off", expect=PROMPT)
        out = repl.run("SELECT range AS i FROM range(100);")
        assert "PAGED:" not in out and "100 rows" in out
    finally:
        repl.close()
    assert "Traceback" not in repl.text()


def test_progress_line_on_a_slow_statement(repl: Repl) -> None:
    repl.run(".progress 0.2", expect=PROMPT)
    repl.enter(SLOW.format(n=20_000_000))
    repl.expect(r"\d+%\|[^\r\n]*\| [\d,]+ rows, [\d,]+ rows/s", timeout=30)
    repl.expect(RESULT_END, timeout=60)
    repl.expect(PROMPT)
    repl.enter(".progress 5")
    out = repl.run("SELECT 1 AS quick;")  # a statement quicker than the delay shows none
    assert "rows/s" not in out


def test_progress_counts_the_rows_of_a_match_recognize(repl: Repl) -> None:
    repl.run(".progress 0", expect=PROMPT)
    repl.run(".mode csv", expect=PROMPT)
    repl.run(".output /dev/null", expect=PROMPT)
    repl.enter(
        "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        "MEASURES MATCH_NUMBER() AS m ALL ROWS PER MATCH PATTERN (A B*) "
        "DEFINE B AS price >= PREV(price));"
    )
    repl.expect(r"running: [1-9][\d,]* rows, [\d,]+ rows/s", timeout=60)
    repl.expect(PROMPT, timeout=120)


def test_ctrl_c_while_the_progress_line_shows(repl: Repl) -> None:
    repl.run(".progress 0.2", expect=PROMPT)
    started = time.monotonic()
    repl.enter(SLOW.format(n=2_000_000_000))
    repl.expect(r"rows/s", timeout=30)
    repl.child.sendcontrol("c")
    repl.expect(r"interrupted", timeout=15)
    repl.expect(PROMPT)
    assert time.monotonic() - started < 30
    out = repl.run("SELECT 42 AS still_here;")
    assert "still_here" in out


def test_ctrl_d_exits_after_features_were_used(env: dict[str, str]) -> None:
    repl = Repl(env)
    repl.enter(".mode json")
    repl.run("SELECT 'settled' AS s;", expect=r"\[\{\"s\": \"settled\"\}\]")
    repl.child.send("SELECT * FROM tra")
    repl.child.send("\t")
    repl.expect("de")
    repl.child.sendcontrol("c")  # clears the line
    repl.expect(PROMPT)
    # A key typed before the editor is reading again meets the terminal in line mode,
    # where Ctrl-D is no character and is lost: see a typed key echoed first.
    repl.child.send("x")
    repl.expect("x")
    repl.child.send("\x7f")  # backspace: the line is empty again
    repl.child.sendcontrol("d")
    repl.child.expect(pexpect.EOF, timeout=10)
    repl.child.close()
    assert repl.child.exitstatus == 0


def test_plot_writes_a_png_and_prints_its_path(env: dict[str, str], tmp_path: Path) -> None:
    repl = Repl(env)
    try:
        out = repl.run(
            "SELECT * FROM (SELECT * FROM trade WHERE symbol = 'MSFT' ORDER BY ts LIMIT 400) "
            "MATCH_RECOGNIZE (ORDER BY ts MEASURES MATCH_NUMBER() AS m ALL ROWS PER MATCH "
            "WITH UNMATCHED ROWS AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C+) "
            "DEFINE B AS price < PREV(price), C AS price > PREV(price));"
        )
        assert "400 rows" in out
        target = tmp_path / "msft.png"
        repl.enter(f".plot ts price file={target}")
        repl.expect(re.escape(str(target)) + r"\r\n")  # printed (the echo ends otherwise)
        repl.expect(PROMPT)
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        repl.close()
    assert "Traceback" not in repl.text()
