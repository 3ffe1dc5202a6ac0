"""The interactive REPL, driven like a user would in a real pseudo-terminal."""

from __future__ import annotations

import gc
import os
import re
import sys
import time
from pathlib import Path

import pexpect
import pytest

PROMPT = "matchsql>"
RESULT_END = re.compile(r"\d[\d,]* rows?( \(\d+ shown\))?\r\n")
ERROR_LINE = re.compile(r"Error[^\r\n]*: [^\r\n]+")

# Typed into the REPL one after the other; each must give an error message.
MALFORMED = [
    "SELEC 1;",
    "SELECT * FROM;",
    "SELECT * FROM no_such_table;",
    "SELECT no_such_column FROM trade;",
    "SELECT price FROM trade WHERE;",
    "SELECT (1 + 2;",
    "SELECT 1 + 2);",
    "SELECT 'abc' + 1;",
    "SELECT CAST('x' AS INTEGER);",
    "SELECT volume // 0 FROM trade;",
    "SELECT 1::INTEGER // 0;",
    "SELECT 9223372036854775807::BIGINT + 1;",
    "SELECT price FROM trade GROUP BY symbol;",
    "INSERT INTO trade VALUES (1);",
    "CREATE TABLE trade (x INTEGER);",
    "DROP TABLE no_such_table;",
    "SELECT * FROM trade ORDER BY 99;",
    "SELECT sum(symbol) FROM trade;",
    "SELECT * FROM read_parquet('/no/such/file.parquet');",
    "SELECT ts + 1 FROM trade;",
    "SELECT no_such_function(1);",
    "SELECT * FROM trade WHERE price > 'abc';",
    "WITH x AS (SELECT 1) SELECT * FROM y;",
    "SELECT [1, 2, 3][1:;",
    "SELECT {'a': 1}.b;",
    "PRAGMA no_such_pragma;",
    "SET max_threads = 'lots';",
    "SET no_such_setting = 1;",
    "SELECT * FROM trade WHERE ts > TIMESTAMP '2006-13-45';",
    "SELECT ;",
    "CREATE TABLE;",
    "SELECT 1 UNION SELECT 1, 2;",
    "SELECT * FROM trade t, trade t;",
    "SELECT date_trunc('fortnight', ts) FROM trade;",
    "SELECT CLASSIFIER();",
    "SELECT * FROM trade MATCH_RECOGNIZE(PATTERN (A+ DEFINE A AS price > 1);",
    "SELECT * FROM trade MATCH_RECOGNIZE;",
    "SELECT * FROM trade MATCH_RECOGNIZE(ORDER BY ts PATTERN (A+ DEFINE A AS true));",
    # The MATCH_RECOGNIZE inputs below are tiny, in case one of them ever runs.
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts PATTERN () DEFINE A AS true);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts PATTERN (A{3,1}) "
    "DEFINE A AS true);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts PATTERN (A+) "
    "DEFINE A AS no_such_column > 1);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(PARTITION BY nope ORDER BY ts "
    "PATTERN (A) DEFINE A AS true);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts MEASURES Z.price AS x "
    "PATTERN (A) DEFINE A AS true);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts PATTERN (A B) "
    "DEFINE A AS PREV(price, -1) > 0);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts "
    "AFTER MATCH SKIP TO FIRST Z PATTERN (A) DEFINE A AS true);",
    "SELECT * FROM no_such_table MATCH_RECOGNIZE(ORDER BY ts PATTERN (A) DEFINE A AS true);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts PATTERN (A) "
    "DEFINE A AS price > 1, A AS price < 2);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts PATTERN (A) "
    "SUBSET U = (Z) DEFINE A AS true);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts "
    "MEASURES CLASSIFIER( AS c PATTERN (A) DEFINE A AS true);",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts PATTERN (A) "
    "DEFINE A AS price > 'cheap');",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts PATTERN (A));",
    "SELECT * FROM (FROM trade LIMIT 5) MATCH_RECOGNIZE(ORDER BY ts PATTERN A DEFINE A AS true);",
]
# Never complete (the ';' is quoted): Ctrl-D drops them unrun (their errors: -c and scripts).
UNTERMINATED = [
    "SELECT 'unterminated string;",
    'SELECT "unterminated identifier;',
    "SELECT /* unterminated comment;",
    "SELECT * FROM trade WHERE symbol = 'MSFT;",
]


def spawn(env: dict[str, str], *args: str) -> pexpect.spawn:
    """``python -m matchsql ARGS`` in a pty, with no cyclic collection in the forked child.

    pexpect forks this test process and runs Python in the child before exec. A
    collection there may free garbage that holds a DuckDB database (a connection
    an earlier test dropped), whose destructor joins worker threads the child
    does not have: the child dies of SIGSEGV before the REPL ever starts, its
    fault-handler output going to this process's stderr, not to the pty.
    """
    enabled = gc.isenabled()
    gc.disable()  # inherited by the child, which only lives until exec
    try:
        return pexpect.spawn(
            sys.executable,
            ["-m", "matchsql", *args],
            env=env,
            encoding="utf-8",
            timeout=20,
            dimensions=(50, 200),
        )
    finally:
        if enabled:
            gc.enable()


class Repl:
    """A REPL in a pty, with a transcript of everything it printed."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.transcript: list[str] = []
        self.child = spawn(env, *args)
        try:
            self.expect(PROMPT)
        except pexpect.EOF:
            said = self.child.before
            self.child.close()
            raise AssertionError(
                f"the REPL ended before its prompt: exit status {self.child.exitstatus}, "
                f"signal {self.child.signalstatus}, output {said!r}"
            ) from None

    def expect(self, pattern, timeout: float = 20) -> re.Match | None:
        self.child.expect(pattern, timeout=timeout)
        self.transcript.append(
            self.child.before + (self.child.after if isinstance(self.child.after, str) else "")
        )
        return self.child.match

    def enter(self, line: str) -> None:
        self.child.send(line + "\r")

    def run(self, statement: str, expect=RESULT_END) -> str:
        """Type ``statement``, wait for ``expect`` and the next prompt; return what came out."""
        self.enter(statement)
        self.expect(expect)
        out = self.transcript[-1]
        self.expect(PROMPT)
        return out

    def text(self) -> str:
        return "".join(self.transcript)

    def close(self) -> int | None:
        if self.child.isalive():
            self.child.sendcontrol("c")  # clear whatever is typed, so Ctrl-D exits
            time.sleep(0.1)
            self.child.sendcontrol("d")
            try:
                self.child.expect(pexpect.EOF, timeout=10)
            except pexpect.TIMEOUT:
                self.child.terminate(force=True)
        self.child.close()
        return self.child.exitstatus


@pytest.fixture
def repl(env: dict[str, str]):
    session = Repl(env)
    yield session
    session.close()
    assert "Traceback" not in session.text()


def test_banner_and_simple_statement(repl: Repl) -> None:
    assert "trade" in repl.text()
    out = repl.run("SELECT 40 + 2 AS answer;")
    assert "│      42 │" in out


def test_multi_line_statement(repl: Repl) -> None:
    repl.enter("SELECT symbol,")
    repl.expect(r"\.\.\.>")  # continuation prompt: the statement is not finished
    repl.enter("  count(*) AS trades")
    repl.enter("FROM trade WHERE symbol = 'a;b'")  # ';' in a string does not end it
    repl.enter("-- ; nor in a comment")
    out = repl.run("GROUP BY symbol;", expect=r"0 rows\r\n")
    assert "trades" in out


def test_several_statements_on_one_line(repl: Repl) -> None:
    repl.enter("SELECT 'first' AS a; SELECT 'second' AS b;")
    repl.expect("second")
    repl.expect(RESULT_END)
    repl.expect(PROMPT)
    assert "first" in repl.text()


def test_dot_commands(repl: Repl) -> None:
    out = repl.run(".help", expect=r"\.timer on\|off[^\r]*\r\n")
    assert ".tables" in out
    repl.run("CREATE TABLE my_table AS SELECT 1 AS x;", expect=PROMPT)
    repl.enter(".tables")
    repl.expect("my_table")
    repl.expect(PROMPT)
    repl.run(".timer on", expect=PROMPT)
    repl.enter("SELECT 1;")
    repl.expect(r"Run Time: \d+\.\d+ s")
    repl.expect(PROMPT)
    repl.run(".timer off", expect=PROMPT)
    out = repl.run(".nosuch", expect=ERROR_LINE)
    assert "unknown command" in out


def test_quit_exits_with_status_0(env: dict[str, str]) -> None:
    session = Repl(env)
    session.enter(".quit")
    session.child.expect(pexpect.EOF, timeout=10)
    session.child.close()
    assert session.child.exitstatus == 0


def test_ctrl_d_exits(env: dict[str, str]) -> None:
    session = Repl(env)
    session.child.sendcontrol("d")
    session.child.expect(pexpect.EOF, timeout=10)
    session.child.close()
    assert session.child.exitstatus == 0


def test_ctrl_d_on_a_continuation_line_does_not_run_the_statement(repl: Repl) -> None:
    repl.run("CREATE TABLE counted (x INTEGER);", expect=PROMPT)
    repl.enter("INSERT INTO counted VALUES (1)")
    repl.expect(r"\.\.\.>")
    repl.enter("")  # an empty continuation line
    repl.expect(r"\.\.\.>")
    repl.child.sendcontrol("d")
    repl.expect(r"unfinished statement not run")
    repl.expect(PROMPT)
    out = repl.run("SELECT count(*) AS n FROM counted;")
    assert re.search(r"│\s+0 │", out), out  # the INSERT never ran
    repl.child.sendcontrol("d")  # on an empty prompt: exits
    repl.child.expect(pexpect.EOF, timeout=10)


def test_history_is_written(env: dict[str, str], tmp_path: Path) -> None:
    session = Repl(env)
    session.run("SELECT 'remember me' AS h;")
    session.run("SELECT 1\n  AS two_lines;")
    session.close()
    history = (tmp_path / "history").read_text()
    assert "remember me" in history
    assert "+SELECT 1\n+  AS two_lines;" in history
    # A new session finds it: Up recalls the last statement.
    again = Repl(env)
    again.child.send("\x1b[A")
    again.expect("two_lines")
    again.close()


def test_ctrl_c_at_prompt_clears_the_line(repl: Repl) -> None:
    repl.child.send("SELECT 'half typed")
    repl.expect("half typed")
    repl.child.sendcontrol("c")
    time.sleep(0.3)
    out = repl.run("SELECT 'fresh' AS f;")
    assert "fresh" in out


def test_ctrl_c_cancels_a_long_statement(repl: Repl) -> None:
    started = time.monotonic()
    repl.enter("SELECT count(*) FROM range(100000) a, range(1000000) b;")
    time.sleep(1.5)
    repl.child.sendcontrol("c")
    repl.expect(r"interrupted", timeout=15)
    repl.expect(PROMPT)
    assert time.monotonic() - started < 15
    out = repl.run("SELECT 42 AS still_here;")
    assert "still_here" in out and "42" in out


def test_malformed_statements_give_messages_not_tracebacks(repl: Repl) -> None:
    assert len(MALFORMED) + len(UNTERMINATED) >= 50
    for statement in MALFORMED:
        out = repl.run(statement, expect=ERROR_LINE)
        assert "Error" in out, statement
    for statement in UNTERMINATED:
        repl.enter(statement)
        repl.expect(r"\.\.\.>")  # still waiting for the end of the string or comment
        repl.child.sendcontrol("d")  # drops it, does not run it
        repl.expect(r"unfinished statement not run")
        repl.expect(PROMPT)
    assert "Traceback" not in repl.text()
    out = repl.run("SELECT 42;")
    assert "│      42 │" in out


_fork_probe: dict[str, int] = {}


def _note_collector_in_child() -> None:
    """Runs in every forked child: while a probe is set, says whether the collector is on."""
    fd = _fork_probe.get("fd")
    if fd is not None:
        os.write(fd, b"1" if gc.isenabled() else b"0")


os.register_at_fork(after_in_child=_note_collector_in_child)


def test_no_collection_can_run_in_the_forked_child_before_exec(env: dict[str, str]) -> None:
    # The REPL's rare silent SIGSEGV before its banner: a collection in pexpect's child
    # freed a connection an earlier test dropped, and DuckDB's destructor joined threads
    # the child does not have. spawn() keeps the collector off until the child execs.
    read, write = os.pipe()
    _fork_probe["fd"] = write
    try:
        child = spawn(env, "--version")
    finally:
        _fork_probe.clear()
        os.close(write)
    try:
        child.expect(pexpect.EOF)
        assert os.read(read, 1) == b"0"
        assert gc.isenabled()  # and back on in this process
    finally:
        os.close(read)
        child.close()
