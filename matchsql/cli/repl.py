"""The interactive REPL: prompt_toolkit line editing on top of :class:`matchsql.cli.shell.Shell`.

The whole statement is one multi-line buffer: Enter runs it once it ends
with a ``;`` outside strings and comments (or is a dot-command), and
otherwise starts a new line, so history recalls and edits whole statements.
Ctrl-C at the prompt clears the buffer; Ctrl-D on an empty prompt exits, and
at the end of an unfinished statement drops it without running it (with a
note; a second Ctrl-D exits), as the end of input does in DuckDB's CLI.
Tab completes from the connection's catalog (:mod:`matchsql.cli.completion`)
and the input is highlighted as SQL (:mod:`matchsql.cli.highlight`).
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
from prompt_toolkit import PromptSession
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from matchsql import __version__
from matchsql.cli.completion import Catalog, SqlCompleter, read_catalog, read_words
from matchsql.cli.highlight import lexer, style
from matchsql.cli.shell import Shell
from matchsql.grammar.sqltext import is_complete, open_construct

HISTORY_ENV = "MATCHSQL_HISTORY"
PROMPT = "matchsql> "


def history_path() -> Path:
    """``$MATCHSQL_HISTORY`` if set, else ``~/.matchsql_history``."""
    configured = os.environ.get(HISTORY_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".matchsql_history"


def _history(shell: Shell) -> History:
    path = history_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # the statements typed are the user's only, like a shell's
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return FileHistory(str(path))
    except OSError as exc:
        shell.error(f"warning: history not saved ({path}: {exc.strerror})")
        return InMemoryHistory()


def ready(text: str) -> bool:
    """Whether Enter should run ``text`` rather than start a new line."""
    stripped = text.strip()
    if not stripped:
        return True
    if stripped.startswith(".") and "\n" not in stripped:
        return True
    return is_complete(text)


class Unfinished(Exception):
    """Ctrl-D ended the input in the middle of a statement."""


class _Editor:
    """Key bindings and continuation prompt; they look at the session's buffer."""

    def __init__(self) -> None:
        self.session: PromptSession[str] | None = None

    def pending_at_end(self) -> bool:
        """Ctrl-D drops the buffer when it holds text and the cursor is at its end
        (elsewhere it deletes the character under the cursor, as usual)."""
        if self.session is None:
            return False
        buffer = self.session.default_buffer
        return bool(buffer.text.strip()) and buffer.cursor_position == len(buffer.text)

    def key_bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if ready(buffer.text):
                buffer.validate_and_handle()
            else:
                buffer.insert_text("\n")

        @bindings.add("escape", "enter")
        def _force(event: KeyPressEvent) -> None:
            event.current_buffer.validate_and_handle()

        @bindings.add("c-d", filter=Condition(self.pending_at_end))
        def _drop_pending(event: KeyPressEvent) -> None:
            event.app.exit(exception=Unfinished())

        return bindings

    def continuation(self, width: int, line_number: int, wrap_count: int) -> str:
        """The prompt of continuation lines; shows what is still open (``'``, ``"``, ``/*``)."""
        marker = "..."
        if self.session is not None and not wrap_count:
            above = "\n".join(self.session.default_buffer.document.lines[:line_number])
            opened = open_construct(above)
            if opened:
                marker = f"{opened}..."
        return f"{marker}> ".rjust(width)


def banner(shell: Shell) -> str:
    lines = [f"matchsql {__version__} (DuckDB {duckdb.__version__}): SQL with MATCH_RECOGNIZE."]
    if shell.con.demo:  # not built yet: the first statement that may read it builds it
        lines.append("The demo table 'trade' (symbol, price, volume, ts) is available.")
    lines.append("End statements with ';'. Type .help for help, .quit or Ctrl-D to exit.")
    return "\n".join(lines)


class _CatalogCache:
    """The completion catalog, read again after each statement the shell ran."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self._words: tuple[list[str], list[str]] | None = None
        self._catalog: Catalog | None = None
        self._generation = -1

    def __call__(self) -> Catalog:
        if self._catalog is None or self._generation != self.shell.generation:
            if self._words is None:
                self._words = read_words(self.shell.con)
            self._catalog = read_catalog(self.shell.con, self._words)
            self._generation = self.shell.generation
        return self._catalog


def run_repl(shell: Shell) -> int:
    """Read and run statements until .quit or Ctrl-D; returns the exit status."""
    editor = _Editor()
    session: PromptSession[str] = PromptSession(
        history=_history(shell),
        multiline=True,
        key_bindings=editor.key_bindings(),
        prompt_continuation=editor.continuation,
        enable_open_in_editor=False,
        completer=SqlCompleter(_CatalogCache(shell)),
        complete_while_typing=False,
        lexer=lexer(),
        style=style(),
        include_default_pygments_style=False,
    )
    editor.session = session
    shell.print(banner(shell))
    while not shell.done:
        try:
            text = session.prompt(PROMPT)
        except KeyboardInterrupt:
            continue
        except Unfinished:
            shell.error("(unfinished statement not run; Ctrl-D again exits)")
            continue
        except EOFError:
            break
        if not text.strip():
            continue
        try:
            if text.lstrip().startswith(".") and "\n" not in text.strip():
                shell.run_dot(text.strip())
            else:
                shell.run_text(text)
        except KeyboardInterrupt:  # Ctrl-C outside a running statement (while printing)
            shell.error("interrupted")
    return 0
