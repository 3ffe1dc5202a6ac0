"""Dot-commands of the shell (``.help``, ``.tables``, ``.mode``, ``.show``, ...).

They live in one table, name -> :class:`DotCommand`, so that other parts of
matchsql can add theirs with :func:`dot_command` without touching the REPL.
The shell imports this module; this module knows the shell only as its
:class:`~matchsql.cli.shell_host.ShellHost`.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matchsql.cli.output_modes import MODES
from matchsql.cli.shell_host import ShellHost
from matchsql.config import Config
from matchsql.errors import Error
from matchsql.session.stats import describe

Handler = Callable[[ShellHost, list[str]], bool]


@dataclass(frozen=True)
class DotCommand:
    """One dot-command: its handler returns False when the command failed."""

    name: str
    handler: Handler
    help: str
    usage: str = ""


COMMANDS: dict[str, DotCommand] = {}


def dot_command(
    name: str, help: str, usage: str = "", aliases: tuple[str, ...] = ()
) -> Callable[[Handler], Handler]:
    """Register the decorated function as ``.name`` (and its aliases)."""

    def register(handler: Handler) -> Handler:
        for each in (name, *aliases):
            COMMANDS[each] = DotCommand(each, handler, help, usage)
        return handler

    return register


def run_dot_command(shell: ShellHost, line: str) -> bool:
    """Parse and run one ``.command args`` line; unknown commands are errors."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        shell.error(f"Error: cannot parse {line!r}: {exc}")
        return False
    if not words:
        return True
    name = words[0].lstrip(".").lower()
    command = COMMANDS.get(name)
    if command is None:
        shell.error(f"Error: unknown command .{name}; type .help for the list")
        return False
    return command.handler(shell, words[1:])


def _usage_error(shell: ShellHost, name: str) -> bool:
    command = COMMANDS[name]
    shell.error(f"Usage: .{name} {command.usage}".rstrip())
    return False


@dot_command("help", "Show this help, or the help of one command", "?COMMAND?")
def _help(shell: ShellHost, args: list[str]) -> bool:
    if args:
        command = COMMANDS.get(args[0].lstrip("."))
        if command is None:
            shell.error(f"Error: unknown command .{args[0].lstrip('.')}")
            return False
        shell.print(f".{command.name} {command.usage}".rstrip() + f"\n    {command.help}")
        return True
    shell.print(
        "Enter SQL statements ended by ';' (MATCH_RECOGNIZE included).\n"
        "Ctrl-C cancels a running statement or clears the line; Ctrl-D exits.\n"
    )
    seen: set[int] = set()
    for name in sorted(COMMANDS):
        command = COMMANDS[name]
        if id(command.handler) in seen:
            continue
        seen.add(id(command.handler))
        aliases = [n for n, c in COMMANDS.items() if c.handler is command.handler and n != name]
        label = f".{name} {command.usage}".rstrip()
        if aliases:
            label += "  (also ." + ", .".join(aliases) + ")"
        shell.print(f"{label:<28} {command.help}")
    return True


@dot_command("tables", "List the tables and views")
def _tables(shell: ShellHost, args: list[str]) -> bool:
    names = shell.con.tables()
    if not names:
        shell.print("(no tables)")
        return True
    width = max(len(n) for n in names) + 2
    per_line = max(1, (shell.width() or 80) // width)
    for i in range(0, len(names), per_line):
        shell.print("".join(f"{n:<{width}}" for n in names[i : i + per_line]).rstrip())
    return True


@dot_command("timer", "Print the run time after each statement", "on|off")
def _timer(shell: ShellHost, args: list[str]) -> bool:
    if len(args) != 1 or args[0].lower() not in ("on", "off"):
        return _usage_error(shell, "timer")
    shell.timer = args[0].lower() == "on"
    return True


@dot_command("maxrows", "Rows shown per result (0 shows all); no N shows the value", "?N?")
def _maxrows(shell: ShellHost, args: list[str]) -> bool:
    if not args:
        shell.print(f"maxrows: {shell.max_rows}")
        return True
    if len(args) != 1 or not args[0].isdigit():
        return _usage_error(shell, "maxrows")
    shell.max_rows = int(args[0])
    return True


@dot_command("read", "Run the statements of a SQL file", "FILE")
def _read(shell: ShellHost, args: list[str]) -> bool:
    if len(args) != 1:
        return _usage_error(shell, "read")
    try:
        text = Path(args[0]).expanduser().read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        shell.error(f"Error: cannot read {args[0]}: {exc}")
        return False
    return shell.run_lines(text.splitlines(keepends=True), source=args[0])


@dot_command("streams", "List the live streams (SHOW STREAMS)")
def _streams(shell: ShellHost, args: list[str]) -> bool:
    if args:
        return _usage_error(shell, "streams")
    error = shell.run_statement("SHOW STREAMS")
    if error is not None:
        shell.error(f"Error: {shell.describe(error)}")
        return False
    return True


@dot_command("stats", "Input metrics of the last continuous query (SHOW STATS)")
def _stats(shell: ShellHost, args: list[str]) -> bool:
    if args:
        return _usage_error(shell, "stats")
    shell.print(describe(shell.con.last_stats))
    error = shell.run_statement("SHOW STATS")
    if error is not None:
        shell.error(f"Error: {shell.describe(error)}")
        return False
    return True


@dot_command(
    "mode", "How results are shown; no MODE shows the current one", "box|csv|markdown|line|json"
)
def _mode(shell: ShellHost, args: list[str]) -> bool:
    if not args:
        shell.print(f"current output mode: {shell.mode}")
        return True
    if len(args) != 1 or args[0].lower() not in MODES:
        return _usage_error(shell, "mode")
    shell.mode = args[0].lower()
    return True


@dot_command("maxwidth", "Width of box tables (0: the terminal's); no N shows the value", "?N?")
def _maxwidth(shell: ShellHost, args: list[str]) -> bool:
    if not args:
        shell.print(f"maxwidth: {shell.max_width}")
        return True
    if len(args) != 1 or not args[0].isdigit():
        return _usage_error(shell, "maxwidth")
    shell.max_width = int(args[0])
    return True


@dot_command("output", "Send results to FILE; no FILE sends them back to the terminal", "?FILE?")
def _output(shell: ShellHost, args: list[str]) -> bool:
    if len(args) > 1:
        return _usage_error(shell, "output")
    path = args[0] if args and args[0] not in ("stdout", "-") else None
    try:
        shell.set_output(path)
    except OSError as exc:
        shell.error(f"Error: cannot write {path}: {exc.strerror}")
        return False
    return True


@dot_command(
    "pager",
    "Show results taller than the terminal through a pager "
    "(default $MATCHSQL_PAGER, $PAGER or less)",
    "on|off|COMMAND",
)
def _pager(shell: ShellHost, args: list[str]) -> bool:
    if not args:
        shell.print(f"pager: {shell.pager or 'off'}")
        return True
    word = " ".join(args)
    if word.lower() == "off":
        shell.pager = None
    else:
        shell.pager = shell.default_pager() if word.lower() == "on" else word
    return True


@dot_command(
    "progress",
    "Progress line (rows, rows/s) for statements running longer than SECONDS (default 1)",
    "on|off|SECONDS",
)
def _progress(shell: ShellHost, args: list[str]) -> bool:
    if len(args) != 1:
        return _usage_error(shell, "progress")
    word = args[0].lower()
    if word in ("on", "off"):
        shell.progress_delay = 1.0 if word == "on" else None
        return True
    try:
        delay = float(word)
    except ValueError:
        return _usage_error(shell, "progress")
    if delay < 0:
        return _usage_error(shell, "progress")
    shell.progress_delay = delay
    return True


@dot_command("show", "List the shell's settings and the connection's matchsql settings")
def _show(shell: ShellHost, args: list[str]) -> bool:
    if args:
        return _usage_error(shell, "show")
    delay = shell.progress_delay
    settings = {
        "mode": shell.mode,
        "maxrows": shell.max_rows,
        "maxwidth": shell.max_width,
        "output": shell.output_path or "stdout",
        "pager": shell.pager or "off",
        "progress": "off" if delay is None else f"after {delay:g} s",
        "timer": "on" if shell.timer else "off",
    }
    for name in Config.names():
        settings[name] = getattr(shell.con.config, name)
    width = max(len(name) for name in settings)
    for name, value in settings.items():
        shell.print(f"{name:>{width}}: {value}")
    return True


PLOT_OPTIONS = ("match", "by", "file", "title")


@dot_command(
    "plot",
    "Draw the last result's Y over X, each match banded, into a PNG "
    "(match=: the MATCH_NUMBER() column, by=: one line per partition, by default "
    "along the PARTITION BY columns; the file goes to $MATCHSQL_PLOT_DIR, else a "
    "private temporary folder)",
    "X Y [match=COL] [by=COL[,COL]] [file=PATH.png] [title=TEXT]",
)
def _plot(shell: ShellHost, args: list[str]) -> bool:
    positional = [a for a in args if "=" not in a]
    options: dict[str, Any] = dict(a.split("=", 1) for a in args if "=" in a)
    if len(positional) != 2 or set(options) - set(PLOT_OPTIONS):
        return _usage_error(shell, "plot")
    if shell.last_result is None:
        shell.error("Error: no result to plot: run a statement that returns rows first")
        return False
    by = options.pop("by", None)
    options["by"] = by.split(",") if by else (shell.last_partition_by or None)
    # matplotlib's glue: loaded on the first plot (start-up).
    from matchsql.results.plot import save_plot

    try:
        path = options.pop("file", None) or _free_plot_path(plot_folder())
        written = save_plot(shell.last_result, path, positional[0], positional[1], **options)
    except Error as err:
        shell.error(f"Error: {err}")
        return False
    shell.print(str(written))
    return True


#: The folder of the plots that ``.plot`` names itself (no ``file=``).
PLOT_DIR_ENV = "MATCHSQL_PLOT_DIR"


def plot_folder() -> Path:
    """Where ``.plot`` writes a picture it names: ``$MATCHSQL_PLOT_DIR``, else
    ``matchsql-plots-UID`` in the temporary folder, never the current directory (a plot is
    not the user's file to find there). A folder matchsql makes is owner-only, and one that
    is a symbolic link or another user's is refused: nobody else can put a link where the
    picture goes."""
    configured = os.environ.get(PLOT_DIR_ENV)
    if configured:
        folder = Path(configured).expanduser()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Error(
                f"plot: cannot make the folder {folder} ({PLOT_DIR_ENV}): {exc.strerror}"
            ) from None
        return folder
    folder = Path(tempfile.gettempdir()) / f"matchsql-plots-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    found = folder.lstat()
    if (
        stat.S_ISLNK(found.st_mode)
        or not stat.S_ISDIR(found.st_mode)
        or found.st_uid != os.getuid()
        or stat.S_IMODE(found.st_mode) & 0o077
    ):
        raise Error(
            f"plot: {folder} is not a private folder of this user; name the folder "
            f"with {PLOT_DIR_ENV} or the file with file="
        )
    return folder


def _free_plot_path(folder: Path) -> Path:
    """``matchsql_plot_N.png`` in ``folder``, N the first free number."""
    number = 1
    while (folder / f"matchsql_plot_{number}.png").exists():
        number += 1
    return folder / f"matchsql_plot_{number}.png"


@dot_command("quit", "Exit matchsql", aliases=("exit",))
def _quit(shell: ShellHost, args: list[str]) -> bool:
    shell.done = True
    return True
