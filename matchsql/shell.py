"""The statement loop shared by the REPL, scripts, ``-c`` and piped input.

A :class:`Shell` owns the connection and the display settings and knows how
to run one statement so that a user never sees a traceback: the statement
runs in a worker thread while the main thread waits, so Ctrl-C (which Python
delivers to the main thread) can call ``Connection.interrupt()`` and the
shell carries on; matchsql errors print as their message, anything else as a
one-line "internal error".
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from typing import TextIO

import duckdb

from matchsql.connection import Connection
from matchsql.errors import Error
from matchsql.grammar.sqltext import Statement, is_blank, is_complete, split_script
from matchsql.render import render_batches

DEFAULT_MAX_ROWS = 40
# Set to see the traceback behind an "internal error" (for matchsql developers).
TRACEBACK_ENV = "MATCHSQL_TRACEBACK"


class Shell:
    """Runs statements and dot-commands on one connection and prints what they give."""

    def __init__(self, con: Connection, *, out: TextIO | None = None, err: TextIO | None = None,
                 max_rows: int = DEFAULT_MAX_ROWS, timer: bool = False) -> None:
        self.con = con
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.max_rows = max_rows
        self.timer = timer
        self.done = False  # set by .quit: the caller's loop stops
        self.interrupted = False  # the last failed statement was cancelled by Ctrl-C

    # -- output -------------------------------------------------------------------

    def print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def error(self, text: str) -> None:
        print(text, file=self.err, flush=True)

    def width(self) -> int | None:
        """Terminal width when writing to a terminal; no limit for files and pipes."""
        try:
            if self.out.isatty():
                return shutil.get_terminal_size((120, 24)).columns
        except (AttributeError, ValueError, OSError):
            pass
        return None

    # -- running ------------------------------------------------------------------

    def run_statement(self, sql: str) -> Exception | None:
        """Run one statement and print its rows; return the error it raised, if any."""
        started = time.perf_counter()
        outcome: dict[str, object] = {}
        finished = threading.Event()
        max_rows, width = self.max_rows, self.width()

        def work() -> None:
            result = None
            try:
                result = self.con.sql(sql)
                if result is not None and result.continuous:
                    self._print_live(result)
                elif result is not None:
                    outcome["text"] = render_batches(
                        result.schema, result.fetch_batches(), max_rows=max_rows, max_width=width)
            except BaseException as exc:  # reported by the waiting thread
                outcome["error"] = exc
            finally:
                # The result's Arrow reader is freed here, not while the thread's frame
                # is torn down: a daemon thread still freeing native objects when the
                # interpreter exits aborts the process ("terminate called ...").
                result = None
                finished.set()

        worker = threading.Thread(target=work, name="matchsql-statement", daemon=True)
        worker.start()
        self._wait(finished)
        worker.join(timeout=5.0)  # only its return is left: the exit must not overtake it
        error = outcome.get("error")
        if isinstance(error, Exception):
            return error
        if isinstance(error, BaseException):  # SystemExit and kin from inside the engine
            return RuntimeError(f"{type(error).__name__} {error}".strip())
        if "text" in outcome:
            self.print(str(outcome["text"]))
        if self.timer:
            self.print(f"Run Time: {time.perf_counter() - started:.3f} s")
        return None

    def _print_live(self, result) -> None:
        """Print a continuous query's rows as they arrive, numbered (Ctrl-C stops it)."""
        self.print(" | ".join(result.columns))
        count = 0
        try:
            for batch in result.fetch_batches():
                for row in zip(*(column.to_pylist() for column in batch.columns)):
                    count += 1
                    self.print(f"[{count}] " + " | ".join("NULL" if v is None else str(v)
                                                          for v in row))
        finally:
            self.print(f"({count} row{'s' if count != 1 else ''})")

    def _wait(self, finished: threading.Event) -> None:
        """Wait for the statement; on Ctrl-C interrupt it until it ends.

        The interrupt is repeated until the worker finishes, because a Ctrl-C
        that lands between two DuckDB calls of one statement would otherwise
        be lost. (An Event, not ``Thread.join``: a join interrupted by Ctrl-C
        can leave ``is_alive()`` wrongly False on CPython 3.11.)
        """
        self.interrupted = False
        while not finished.is_set():
            try:
                finished.wait(0.1)
            except KeyboardInterrupt:
                self.interrupted = True
            if self.interrupted and not finished.is_set():
                self.con.interrupt()

    def describe(self, exc: BaseException) -> str:
        """A user-facing message for ``exc``, never a traceback (unless asked for)."""
        if isinstance(exc, Error | duckdb.Error):
            return str(exc)
        if os.environ.get(TRACEBACK_ENV):
            self.error("".join(traceback.format_exception(exc)).rstrip())
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"internal error: {type(exc).__name__}" + (f": {first}" if first else "")

    def run_text(self, text: str, *, source: str | None = None, line: int = 1,
                 first_number: int = 1) -> bool:
        """Run the statements of ``text`` in order, stopping at the first that fails.

        Errors say which statement failed when there are several or ``text``
        is part of a script, and with a ``source`` (the script's name) on
        which line of it; ``line`` and ``first_number`` are where ``text``
        starts in the script.
        """
        statements = split_script(text)
        numbered = len(statements) > 1 or first_number > 1 or source is not None
        for number, statement in enumerate(statements, start=first_number):
            error = self.run_statement(statement.text)
            if error is None:
                continue
            message = self.describe(_relocated(error, statement, text, line))
            which = f" in statement {number}" if numbered else ""
            where = f" at {source}:{line + statement.line - 1}" if source else ""
            self.error(f"Error{which}{where}: {message}")
            return False
        return True

    def run_dot(self, line: str) -> bool:
        """Run one dot-command line; False if it failed."""
        from matchsql.dot_commands import run_dot_command

        try:
            return run_dot_command(self, line)
        except Exception as exc:  # a dot-command must not end the shell either
            self.error(f"Error: {self.describe(exc)}")
            return False

    def run_lines(self, lines: Iterable[str], *, source: str, bail: bool = True) -> bool:
        """Run statements as their lines arrive (a script, or input piped on stdin).

        A statement runs as soon as its ``;`` is read, so piped input streams;
        a line starting with ``.`` outside a statement is a dot-command; text
        left at the end runs as the last statement. With ``bail`` the first
        failure stops the loop, like ``duckdb -bail``.
        """
        buffer: list[str] = []
        start = 1
        ok = True
        done = 0  # statements run so far, to number them in error messages
        for number, raw in enumerate(lines, start=1):
            if not buffer and raw.lstrip().startswith("."):
                success = self.run_dot(raw.strip())
            else:
                if not buffer:
                    start = number
                buffer.append(raw)
                text = "".join(buffer)
                if not is_complete(text):
                    continue
                buffer = []
                success = self.run_text(text, source=source, line=start, first_number=done + 1)
                done += len(split_script(text))
            ok = ok and success
            if self.done or (bail and not success):
                return ok
        text = "".join(buffer)
        if not is_blank(text):
            ok = self.run_text(text, source=source, line=start, first_number=done + 1) and ok
        return ok


def _relocated(error: Exception, statement: Statement, text: str, line: int) -> Exception:
    """``error`` with its line/column moved from the statement onto the script."""
    if not isinstance(error, Error) or error.line is None or error.sql != statement.text:
        return error
    column = error.column or 1
    if error.line == 1:
        column += statement.offset - (text.rfind("\n", 0, statement.offset) + 1)
    # Blank lines in front make the script's line numbers and excerpt come out right.
    script = "\n" * (line - 1) + text
    return type(error)(error.message, sql=script, line=line + statement.line - 1 + error.line - 1,
                       column=column)
