"""One statement's first error raised inside the Arrow readers that DuckDB reads.

DuckDB reports an exception raised in a Python Arrow reader (the matches of a
MATCH_RECOGNIZE, the rows of a live stream) as an error of its own that carries
only the text: the matchsql error, its kind and its position, are kept here for
the statement to raise instead.

Each statement gets its own :class:`StatementFailure` when it starts, as it gets
its own cancellation token (see ``Executor.dispatch``). Its readers and its Result
take it then, not when they are read: a reader read after the next statement
began still reports to its own statement, a Result's errors are its own
statement's, and no statement sees an earlier one's error.
"""

from __future__ import annotations

from matchsql.errors import Error


class StatementFailure:
    """The first error that one statement's readers raised (None while there is none)."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: Error | None = None

    def record(self, err: Error) -> Error:
        """Keep ``err`` if it is the statement's first; ``err`` itself, to raise."""
        if self.error is None:
            self.error = err
        return err
