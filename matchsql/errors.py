"""Errors a user can cause, each able to point at the offending text.

Every error that reaches a user is a :class:`Error`. Positions are 1-based
line and column into the statement text; ``excerpt`` renders the line with a
caret under the column so a REPL can show where things went wrong without a
traceback.
"""

from __future__ import annotations

import re
import unicodedata


class Error(Exception):
    """Base class of every user-facing matchsql error."""

    def __init__(
        self,
        message: str,
        *,
        sql: str | None = None,
        line: int | None = None,
        column: int | None = None,
        offset: int | None = None,
    ) -> None:
        if offset is not None and sql is not None and line is None:
            line, column = line_column(sql, offset)
        self.message = message
        self.sql = sql
        self.line = line
        self.column = column
        super().__init__(self.render())

    @property
    def excerpt(self) -> str:
        """The offending line followed by a caret under the error column."""
        if self.sql is None or self.line is None:
            return ""
        lines = self.sql.splitlines() or [""]
        if not 1 <= self.line <= len(lines):
            return ""
        text = lines[self.line - 1]
        col = max(1, min(self.column or 1, len(text) + 1))
        return f"{text}\n{' ' * display_width(text[: col - 1])}^"

    def render(self) -> str:
        where = f" (line {self.line}, column {self.column})" if self.line is not None else ""
        excerpt = self.excerpt
        return f"{self.message}{where}" + (f"\n{excerpt}" if excerpt else "")

    def located(self, sql: str, offset: int | None) -> Error:
        """Attach a position in ``sql`` when the error has none yet."""
        if self.line is None and offset is not None:
            self.sql = sql
            self.line, self.column = line_column(sql, offset)
            self.args = (self.render(),)
        return self


class ParseError(Error):
    """The statement text is not valid SQL or not a valid row pattern."""


class SemanticError(Error):
    """The statement parses but breaks a rule (undefined variable, bad offset, ...)."""


class CatalogError(Error):
    """An unknown table, column, or stream."""


class TypeMismatchError(SemanticError):
    """An expression combines values of incompatible types."""


class ExecutionError(Error):
    """The query failed while running (limits exceeded, skip to first row, ...)."""


class LimitExceededError(ExecutionError):
    """A configured limit (live threads, buffered rows) was exceeded."""


class StreamError(Error):
    """A live stream failed: its producer died, its queue is gone, ..."""


class StreamWriteError(StreamError):
    """A batch was written only in part: ``rows_written`` of its first rows went out.

    Those rows are in the stream, in order; the rest are not. Writing
    ``batch.slice(rows_written)`` (or the same batch again with its
    ``batch_id``) completes it without a duplicate.
    """

    def __init__(self, message: str, rows_written: int) -> None:
        self.rows_written = rows_written
        super().__init__(message)


#: The error classes a worker process may name in its answer (matchsql/execution/workers/wire.py),
#: by name: their constructor takes the message and the position only. A worker's
#: error of another class travels as its nearest class here.
WORKER_ERRORS: dict[str, type[Error]] = {
    cls.__name__: cls
    for cls in (
        Error,
        ParseError,
        SemanticError,
        CatalogError,
        TypeMismatchError,
        ExecutionError,
        LimitExceededError,
        StreamError,
    )
}


def line_column(sql: str, offset: int) -> tuple[int, int]:
    """1-based line and column of character ``offset`` in ``sql``."""
    offset = max(0, min(offset, len(sql)))
    before = sql[:offset]
    line = before.count("\n") + 1
    column = offset - (before.rfind("\n") + 1) + 1
    return line, column


_PYTHON_DETAIL = "Detail: Python exception:"


def one_line(message: str) -> str:
    """The first line of ``message`` without the Python traceback DuckDB appends.

    DuckDB reports an exception raised while it reads a Python stream as its
    own message followed by ``Detail: Python exception: Traceback ...``; a
    user needs the cause, never the traceback.
    """
    head = message.split(_PYTHON_DETAIL)[0].strip()
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    return lines[0] if lines else head


def without_kind(message: str) -> str:
    """``message`` without DuckDB's ``Binder Error: `` style prefix."""
    return re.sub(r"^[A-Za-z ]+Error: ", "", message)


def internal_error(exc: BaseException) -> ExecutionError:
    """The user-facing error for an unexpected Python exception inside the engine."""
    cause = one_line(str(exc)) or "no detail"
    return ExecutionError(f"internal error ({type(exc).__name__}): {cause}")


def out_of_memory() -> LimitExceededError:
    """The error for a statement that ran out of memory despite the size checks."""
    return LimitExceededError(
        "the statement ran out of memory; lower its size (pattern, partitions) or raise "
        "the memory available to the process (max_buffered_bytes and max_pattern_size "
        "bound the matchers)"
    )


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: East Asian wide characters and emoji two, combining
    marks none, so that a caret drawn under a line lands under its character."""
    if text.isascii():
        return len(text)
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width
