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
import shlex
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, TextIO

import duckdb

from matchsql.api.connection import Connection
from matchsql.cli.dot_commands import run_dot_command
from matchsql.cli.output_modes import render
from matchsql.cli.progress import DEFAULT_DELAY, Progress
from matchsql.errors import Error
from matchsql.grammar.sqltext import Statement, is_blank, is_complete, open_construct, split_script
from matchsql.results.duckdb_values import shared
from matchsql.results.render import render_relation

if TYPE_CHECKING:
    import pyarrow as pa

DEFAULT_MAX_ROWS = 40
#: Bytes of the last result the shell keeps for ``.plot``.
KEEP_BYTES = 64 * 1024 * 1024
PAGER_ENV = "MATCHSQL_PAGER"
DEFAULT_PAGER = "less -SRFX"
# Set to see the traceback behind an "internal error" (for matchsql developers).
TRACEBACK_ENV = "MATCHSQL_TRACEBACK"


#: Back to the start of the line and erase all of it (a terminal's ECMA-48 control).
ERASE_LINE = "\r\x1b[2K"


class Shell:
    """Runs statements and dot-commands on one connection and prints what they give."""

    def __init__(
        self,
        con: Connection,
        *,
        out: TextIO | None = None,
        err: TextIO | None = None,
        max_rows: int = DEFAULT_MAX_ROWS,
        timer: bool = False,
        keep_last: bool = True,
    ) -> None:
        self.con = con
        #: Whether the rows of the last result are kept for .plot: False when no .plot
        #: can follow (``-c`` without one), so plain SQL is drawn without Arrow.
        self.keep_last = keep_last
        shared.lend(con.raw_cursor())  # no second DuckDB instance just to convert values
        self.stdout = out or sys.stdout
        self.out = self.stdout  # where results go: stdout, or the file of .output
        self.output_path: str | None = None
        self.err = err or sys.stderr
        self.max_rows = max_rows
        self.max_width = 0  # 0: the terminal's width (no limit for files and pipes)
        self.mode = "box"
        self.timer = timer
        self.pager: str | None = None  # the pager command while .pager is on
        # Seconds before a running statement shows its progress line (None: never);
        # shown on a terminal only.
        self.progress_delay: float | None = DEFAULT_DELAY
        self.done = False  # set by .quit: the caller's loop stops
        self.interrupted = False  # the last failed statement was cancelled by Ctrl-C
        #: Bumped after every statement, so the REPL's completer knows its catalog is stale.
        self.generation = 0
        #: The rows of the last statement that returned rows (for .plot); None when it
        #: had none or was larger than KEEP_BYTES.
        self.last_result: pa.Table | None = None
        #: Its PARTITION BY columns: ``.plot`` draws a line per partition along them.
        self.last_partition_by: list[str] = []

    # -- output -------------------------------------------------------------------

    def print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def error(self, text: str) -> None:
        print(text, file=self.err, flush=True)

    def width(self) -> int | None:
        """``.maxwidth`` if set, else the terminal's width; no limit for files and pipes."""
        if self.max_width:
            return self.max_width
        return shutil.get_terminal_size((120, 24)).columns if _isatty(self.out) else None

    def set_output(self, path: str | None) -> None:
        """Send results to ``path`` (truncated), or back to stdout with None."""
        target = (
            self.stdout
            if path is None
            else open(  # noqa: SIM115 - kept open until .output
                os.path.expanduser(path), "w", encoding="utf-8"
            )
        )
        if self.out is not self.stdout:
            self.out.close()
        self.out = target
        self.output_path = path

    def default_pager(self) -> str:
        return os.environ.get(PAGER_ENV) or os.environ.get("PAGER") or DEFAULT_PAGER

    def _emit(self, text: str) -> None:
        """Print a finished result, through the pager when it is on and the result is
        taller than the terminal."""
        if (
            self.pager
            and _isatty(self.out)
            and text.count("\n") >= shutil.get_terminal_size((120, 24)).lines - 1
        ):
            try:
                subprocess.run(shlex.split(self.pager), input=text, text=True, check=False)
                return
            except OSError as exc:
                self.error(f"warning: pager {self.pager!r} failed ({exc.strerror}); printing")
        self.out.write(text)
        self.out.flush()

    # -- running ------------------------------------------------------------------

    def run_statement(self, sql: str) -> Exception | None:
        """Run one statement and print its rows; return the error it raised, if any."""
        started = time.perf_counter()
        outcome: dict[str, object] = {}
        finished = threading.Event()
        max_rows, width, mode = self.max_rows, self.width(), self.mode
        progress = Progress(
            self.err, self.progress_delay if _isatty(self.err) else None, self.con.query_progress
        )
        # Box tables are drawn once every row was read; the other modes stream their
        # pieces to the output, unless the pager needs the whole text.
        whole = mode in ("box", "duckbox") or bool(self.pager)

        def work() -> None:
            result = None
            try:
                boxed = mode in ("box", "duckbox") and not self.keep_last
                result = self.con.sql(sql, as_relation=True) if boxed else self.con.sql(sql)
                relation = result.take_relation() if result is not None and boxed else None
                # plain SQL: DuckDB draws the text, no Arrow
                if result is not None and relation is not None:
                    self.last_result = None
                    try:
                        outcome["text"] = (
                            render_relation(relation, max_rows=max_rows, max_width=width) + "\n"
                        )
                    except duckdb.Error as exc:
                        raise result.error(exc) from None
                elif result is not None and result.continuous:
                    progress.stop()
                    self._print_live(result, mode, width)
                elif result is not None:
                    self.last_result = None
                    self.last_partition_by = list(result.partition_by)
                    batches = self._keep(result.schema, progress.count(result.fetch_batches()))
                    pieces = render(
                        mode,
                        result.schema,
                        batches,
                        max_rows=max_rows,
                        max_width=width,
                        types=result.type_names,
                    )
                    if whole:
                        outcome["text"] = "".join(pieces)
                    else:
                        # The progress line shares the terminal with rows printed there, not
                        # with rows written to a file (.output), which it keeps counting.
                        on_terminal = _isatty(self.out)
                        for piece in pieces:
                            if on_terminal:
                                progress.stop()
                            self.out.write(piece)
                        self.out.flush()
            except BaseException as exc:  # reported by the waiting thread
                outcome["error"] = exc
            finally:
                # The result's Arrow reader is freed here, not while the thread's frame
                # is torn down: a daemon thread still freeing native objects when the
                # interpreter exits aborts the process ("terminate called ...").
                result = None
                finished.set()

        progress.start()
        worker = threading.Thread(target=work, name="matchsql-statement", daemon=True)
        worker.start()
        try:
            self._wait(finished)
        finally:
            progress.stop()
            if self.interrupted and _isatty(self.err):
                # The terminal echoed ^C where the cursor was (after a progress bar, which
                # clears only its own width): erase the whole line for the message.
                self.err.write(ERASE_LINE)
                self.err.flush()
        worker.join(timeout=5.0)  # only its return is left: the exit must not overtake it
        self.generation += 1
        error = outcome.get("error")
        if isinstance(error, BrokenPipeError):  # the reader of our output went away
            raise error
        if isinstance(error, Exception):
            return error
        if isinstance(error, BaseException):  # SystemExit and kin from inside the engine
            return RuntimeError(f"{type(error).__name__} {error}".strip())
        if "text" in outcome:
            self._emit(str(outcome["text"]))
        if self.timer:
            self.print(f"Run Time: {time.perf_counter() - started:.3f} s")
        return None

    def _keep(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        """``batches``, kept as :attr:`last_result` once they all went by (if small enough)."""
        kept: list[pa.RecordBatch] | None = []
        size = 0
        for batch in batches:
            if kept is not None:
                size += batch.nbytes
                if size <= KEEP_BYTES:
                    kept.append(batch)
                else:
                    kept = None
            yield batch
        if kept is not None:
            # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)
            import pyarrow as pa

            self.last_result = pa.Table.from_batches(kept, schema=schema)

    def _print_live(self, result, mode: str, width: int | None) -> None:
        """Print a continuous query's rows as they arrive, as a changelog in ``mode`` with a
        status line on the terminal (see cli/live.py); Ctrl-C stops it."""
        from matchsql.cli.live import LiveView  # a continuous query's (start-up)

        status = self.err if _isatty(self.err) else None
        LiveView(self.out, status, mode, max_width=width, lag=result.lag).show(result)

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

    def run_text(
        self, text: str, *, source: str | None = None, line: int = 1, first_number: int = 1
    ) -> bool:
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
        try:
            return run_dot_command(self, line)
        except BrokenPipeError:  # the reader of our output went away: the caller stops
            raise
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
            if raw.lstrip().startswith(".") and _nothing_to_run(buffer):
                buffer = []  # blank lines and comments before a dot-command
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


def _nothing_to_run(buffer: list[str]) -> bool:
    """True when the lines read so far hold no statement: only blanks and whole comments
    (a comment still open may hold a dot at the start of a line, which is text then)."""
    if not buffer:
        return True
    text = "".join(buffer)
    return is_blank(text) and open_construct(text) is None


def _relocated(error: Exception, statement: Statement, text: str, line: int) -> Exception:
    """``error`` with its line/column moved from the statement onto the script."""
    if not isinstance(error, Error) or error.line is None or error.sql != statement.text:
        return error
    column = error.column or 1
    if error.line == 1:
        column += statement.offset - (text.rfind("\n", 0, statement.offset) + 1)
    # Blank lines in front make the script's line numbers and excerpt come out right.
    script = "\n" * (line - 1) + text
    return type(error)(
        error.message, sql=script, line=line + statement.line - 1 + error.line - 1, column=column
    )


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
