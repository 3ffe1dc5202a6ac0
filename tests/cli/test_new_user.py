"""A new user's first hour, in a real terminal: the tutorial's steps typed into the REPL in
a pty of 200 columns, line by line as a person types them, and the screen checked.

Every REPL session the tutorial marks as run (``<!-- transcript: the test runs it -->``)
must show what the manual shows; then the steps around them: a plot of the matches,
EXPLAIN, a live stream fed by ``matchsql produce`` with a continuous query and its
SHOW STATS, and what ``.tables`` lists; and tutorial 5's ``matchsql experiment`` grid.
(Tutorial 4, archive and live, runs step by step in tests/docs/test_manual.py.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import ROOT, cli_env
from tests.cli.test_repl_pty import Repl
from tests.docs.test_manual import entries, repl_transcripts

#: A new prompt, not a redraw of the one being typed at: the REPL turns bracketed paste
#: on again (ESC[?2004h) each time it starts reading a statement.
NEW_PROMPT = re.compile(r"\x1b\[\?2004h(?:\x1b\[[0-9;?]*[A-Za-z])*matchsql>")
#: Escape sequences a terminal acts on without showing them.
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[=>]")


def screen(raw: str) -> str:
    """What ``raw`` leaves readable on a terminal, a line per line (enough for the REPL's
    output: its prompts redraw themselves, the results are plain lines)."""
    lines = []
    for line in ESCAPES.sub("", raw).replace("\r\n", "\n").split("\n"):
        lines.append(line.split("\r")[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r"))
    return "\n".join(lines)


def shows_in_order(shown: str, expected: str) -> None:
    """Each non-blank line of ``expected`` is a line of ``shown``, in this order."""
    lines = shown.splitlines()
    at = 0
    for wanted in (line.rstrip() for line in expected.splitlines() if line.strip()):
        for index in range(at, len(lines)):
            if lines[index].rstrip().endswith(wanted):
                at = index + 1
                break
        else:
            raise AssertionError(f"not on the screen after line {at}: {wanted!r}\n{shown}")


def type_entry(repl: Repl, entry: str, timeout: float = 120) -> str:
    """Type one entry (a dot-command, or a statement over several lines) at the prompt and
    wait for the next prompt; what the screen shows meanwhile."""
    start = len(repl.transcript)
    lines = entry.split("\n")
    for line in lines[:-1]:
        repl.enter(line)
        repl.expect(r"\.\.\.>")
    repl.enter(lines[-1])
    repl.expect(NEW_PROMPT, timeout=timeout)
    return screen("".join(repl.transcript[start:]))


@pytest.fixture
def user(tmp_path: Path):
    env = cli_env(tmp_path)
    env.update(
        MATCHSQL_RUNTIME_DIR=str(tmp_path / "runtime"), MATCHSQL_PLOT_DIR=str(tmp_path / "plots")
    )
    session = Repl(env)
    yield session, env, tmp_path
    session.close()
    assert "Traceback" not in session.text()


@pytest.mark.parametrize(
    ("page", "typed", "output"),
    repl_transcripts(),
    ids=lambda value: value if value.endswith(".md") else "",
)
def test_each_tutorial_session_shows_on_the_screen(user, page, typed, output) -> None:
    repl, _, _ = user
    shown = "\n".join(type_entry(repl, entry) for entry in entries(typed))
    shows_in_order(shown, output)


V_SHAPES = """SELECT * FROM (FROM trade WHERE symbol = 'GOOG') MATCH_RECOGNIZE (
  ORDER BY ts MEASURES MATCH_NUMBER() AS m
  ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B{2,} C{2,}) DEFINE B AS price < PREV(price), C AS price > PREV(price)
) ORDER BY ts LIMIT 150;"""


def test_plot_and_explain_on_a_wide_terminal(user) -> None:
    repl, _, tmp_path = user
    assert "150 rows" in type_entry(repl, V_SHAPES)
    shown = type_entry(repl, ".plot ts price")
    written = [Path(line.strip()) for line in shown.splitlines() if line.strip().endswith(".png")]
    assert written and written[0].parent == tmp_path / "plots" and written[0].is_file(), shown
    assert not list(tmp_path.glob("*.png"))  # nothing in the current directory
    explained = type_entry(repl, "EXPLAIN " + V_SHAPES)
    assert "MATCH_RECOGNIZE" in explained
    assert max(len(line) for line in explained.splitlines()) > 60, explained  # not cut at 40


def test_a_live_stream_and_its_continuous_query(user) -> None:
    """Tutorial 3: the stream, a producer in another process, the continuous query,
    SHOW STATS; .tables lists the user's tables only."""
    repl, env, tmp_path = user
    type_entry(
        repl,
        "CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, "
        "ts TIMESTAMP)\n  WITH (capacity = 100000);",
    )
    producer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "matchsql",
            "produce",
            "trades",
            "--synthetic",
            "--rate",
            "20k/s",
            "--count",
            "20000",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        shown = type_entry(
            repl,
            """SELECT * FROM trades MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES A.price AS start_price, LAST(B.price) AS bottom, LAST(C.price) AS top
  PATTERN (A B{3,} C{3,})
  DEFINE B AS price < PREV(price), C AS price > PREV(price));""",
            timeout=180,
        )
        out, err = producer.communicate(timeout=120)
    finally:
        producer.kill()
    assert producer.returncode == 0, err
    assert "20,000 rows in" in out + err
    # A changelog as the Flink SQL client's (every match is an insert, +I), then the
    # count; the status line (rows, rate, lag) was on the terminal while it ran.
    assert "op | symbol | start_price | bottom | top" in shown
    matches = re.findall(r"^\+I \| \w+ \| \d+\.\d+ \| \d+\.\d+ \| \d+\.\d+$", shown, re.M)
    assert matches and f"({len(matches)} rows)" in shown, shown
    drawn = ESCAPES.sub("", repl.text())  # the status line, before it was erased
    assert re.search(r"live: [\d,]+ rows? \| [\d,.]+ rows/s \| lag [-\d,]+ \| \d+ s", drawn)
    stats = type_entry(repl, "SHOW STATS;")
    assert re.search(r"│ records +│ +20000\.0 │", stats), stats
    assert re.search(rf"│ result +│ +{len(matches)}\.0 │", stats), stats
    type_entry(repl, "CREATE TABLE mine AS SELECT 1 AS x;")
    tables = type_entry(repl, ".tables")
    assert "mine" in tables and "trade" in tables and "__matchsql" not in tables


def test_the_tutorial_is_what_this_test_walks() -> None:
    """The steps above are the tutorial's: its plot query and its producer command."""
    first = (ROOT / "docs" / "tutorial" / "first-pattern.md").read_text(encoding="utf-8")
    typed = "\n".join(
        re.sub(r"^(matchsql| *\.\.\.)> ", "", line)
        for line in first.splitlines()
        if re.match(r"(matchsql| *\.\.\.)> ", line)
    )
    assert V_SHAPES in typed
    live = (ROOT / "docs" / "tutorial" / "live-streams.md").read_text(encoding="utf-8")
    assert "matchsql produce trades --synthetic --rate 20k/s --count 20000" in live
    assert "PATTERN (A B{3,} C{3,})" in live


def test_the_experiment_of_tutorial_5(tmp_path: Path) -> None:
    """docs/tutorial/tuning-u.md: its small grid, with fewer tuples per run, prints what the
    tutorial shows and draws its three plots."""
    page = (ROOT / "docs" / "tutorial" / "tuning-u.md").read_text(encoding="utf-8")
    command = re.search(r"\.venv/bin/matchsql (experiment .*?)\n```", page, re.S).group(1)
    argv = command.replace("\\\n", " ").split()
    assert argv[argv.index("--rows") + 1] == "20000"
    argv[argv.index("--rows") + 1] = "2000"  # the same grid, quicker
    shown = re.search(r"```text\n(\d+ runs \(0 failed\).*?)\n```", page).group(1)
    env = cli_env(tmp_path)
    env["MATCHSQL_RUNTIME_DIR"] = str(tmp_path / "runtime")
    done = subprocess.run(
        [sys.executable, "-m", "matchsql", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == shown  # after the progress bar
    assert sorted(p.name for p in (tmp_path / "exp").glob("*.png")) == [
        "Q1_latency.png",
        "Q1_memory.png",
        "Q1_throughput.png",
    ]
