"""What a dot-command sees of the shell that runs it.

The shell imports the dot-command table; the commands know the shell only
through :class:`ShellHost`, so no import, not even one for type checking,
points from the commands back to the shell.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from matchsql.api.connection import Connection

if TYPE_CHECKING:
    import pyarrow as pa


class ShellHost(Protocol):
    """The shell's connection, display settings and statement runners."""

    con: Connection
    mode: str
    max_rows: int
    max_width: int
    pager: str | None
    output_path: str | None
    progress_delay: float | None
    timer: bool
    done: bool
    #: The last result's rows, kept for ``.plot``.
    last_result: pa.Table | None
    last_partition_by: list[str]

    def print(self, text: str = "") -> None: ...

    def error(self, text: str) -> None: ...

    def width(self) -> int | None: ...

    def set_output(self, path: str | None) -> None: ...

    def default_pager(self) -> str: ...

    def describe(self, exc: BaseException) -> str: ...

    def run_statement(self, sql: str) -> Exception | None: ...

    def run_lines(self, lines: Iterable[str], *, source: str, bail: bool = True) -> bool: ...
