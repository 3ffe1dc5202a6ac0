"""The ``matchsql`` command.

    matchsql                       REPL on an in-memory DuckDB with the demo ``trade`` table
    matchsql -c "SQL"              run SQL, print the rows
    matchsql FILE.sql              run a script (stops at the first failing statement)
    ... | matchsql                 run SQL piped on stdin as a script
    matchsql -d my.duckdb          the same on a DuckDB file (add --demo for the trade table)
    matchsql my.duckdb             the same: a FILE that is a DuckDB database opens as one

The first word may name a subcommand (``matchsql produce ...``,
``matchsql experiment ...``): those are looked up in :data:`SUBCOMMANDS`
before the options are parsed, so each subcommand owns its own arguments.
Exit status: 0 on success, 1 when a statement fails, 2 on bad usage, 130
when interrupted.

Start-up time matters here (``matchsql -c "SELECT 1"`` should answer about
as fast as Python's ``duckdb`` does), so the REPL (prompt_toolkit, Pygments)
and the subcommands (pyarrow's readers, matplotlib) are imported only when
they run; that lazy import is the point, not a way around an import cycle.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from matchsql import __version__
from matchsql.api.connection import connect
from matchsql.cli.shell import Shell
from matchsql.errors import Error


def _produce(argv: list[str]) -> int:
    # The producer (numpy, the stream writer): loaded for this subcommand only (start-up).
    from matchsql.cli.produce import main as produce

    return produce(argv)


def _experiment(argv: list[str]) -> int:
    # The experiment (the matchers, matplotlib): loaded for this subcommand only (start-up).
    from matchsql.cli.experiment import main as experiment

    return experiment(argv)


def _warm_up(argv: list[str]) -> int:
    # Runs statements only, like -c; kept apart from the start-up of a plain session.
    from matchsql.cli.warm_up import main as warm_up

    return warm_up(argv)


# name -> main(argv) of a subcommand; argv excludes the subcommand's name.
SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {
    "produce": _produce,
    "experiment": _experiment,
    "warm-up": _warm_up,
}

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="matchsql",
        description="SQL with MATCH_RECOGNIZE over DuckDB tables, files and live streams.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="With no FILE and no -c: an interactive shell, or the statements piped on stdin.\n"
        "\nsubcommands (each has its own --help):\n"
        "  matchsql produce ...     write events into a live stream (a producer)\n"
        "  matchsql experiment ...  run the input-mode experiments and plot them, or "
        "recommend a setting\n"
        "  matchsql warm-up         compile the matching kernels into the compile cache",
    )
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help="SQL script to run ('-' reads stdin)"
    )
    parser.add_argument(
        "-c",
        "--command",
        action="append",
        metavar="SQL",
        help="run SQL or a dot-command and exit (may be repeated)",
    )
    parser.add_argument(
        "-d",
        "--database",
        default=":memory:",
        metavar="PATH",
        help="DuckDB database file (default: in memory, with the demo table)",
    )
    demo = parser.add_mutually_exclusive_group()
    demo.add_argument(
        "--demo",
        action="store_true",
        default=None,
        help="add the demo 'trade' table to the database if it lacks one",
    )
    demo.add_argument(
        "--no-demo", dest="demo", action="store_false", help="leave the demo 'trade' table out"
    )
    parser.add_argument("--read-only", action="store_true", help="open the database read-only")
    parser.add_argument(
        "--max-rows",
        type=int,
        default=40,
        metavar="N",
        help="rows shown per result (0 shows all; default 40)",
    )
    parser.add_argument("--timer", action="store_true", help="print each statement's run time")
    parser.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a matchsql option (e.g. max_threads=1000)",
    )
    parser.add_argument("-V", "--version", action="version", version=f"matchsql {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``matchsql`` script; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]](args[1:])
    try:
        return _run(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (``matchsql ... | head``): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    finally:
        # From here on the interpreter only shuts down (joining what threads are
        # left): a Ctrl-C then ends the process at once, never with a traceback.
        signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run(argv: list[str]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.file and args.file != "-" and is_database_file(Path(args.file)):
        if args.database != ":memory:":
            parser.print_usage(sys.stderr)
            print(
                f"matchsql: error: {args.file} is a DuckDB database and -d names another",
                file=sys.stderr,
            )
            return EXIT_USAGE
        args.database, args.file = args.file, None  # as DuckDB's CLI opens it
    if args.command and args.file:
        parser.print_usage(sys.stderr)
        print("matchsql: error: give either -c or FILE, not both", file=sys.stderr)
        return EXIT_USAGE
    options = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            print(f"matchsql: error: --set needs NAME=VALUE, got {item!r}", file=sys.stderr)
            return EXIT_USAGE
        options[name.strip()] = value.strip()

    try:
        con = connect(args.database, demo=args.demo, read_only=args.read_only, **options)
    except Error as err:
        print(f"Error: {err}", file=sys.stderr)
        return EXIT_FAILED
    with con:
        # Only a later .plot reads the rows of a -c statement again (as Arrow).
        keep_last = not args.command or any(c.lstrip().startswith(".plot") for c in args.command)
        shell = Shell(con, max_rows=args.max_rows, timer=args.timer, keep_last=keep_last)
        if args.command:
            return _status(shell, all(_run_command(shell, text) for text in args.command))
        if args.file and args.file != "-":
            return _run_file(shell, Path(args.file))
        if args.file == "-" or not sys.stdin.isatty():
            return _status(shell, shell.run_lines(sys.stdin, source="<stdin>"))
        # prompt_toolkit and Pygments: loaded for an interactive session only (start-up).
        from matchsql.cli.repl import run_repl

        return run_repl(shell)


#: Where a DuckDB database file says what it is: its magic bytes after an 8-byte checksum.
DUCKDB_MAGIC = b"DUCK"
DUCKDB_MAGIC_AT = 8
#: Names of database files DuckDB's CLI creates when they do not exist yet.
DATABASE_SUFFIXES = (".duckdb", ".ddb")


def is_database_file(path: Path) -> bool:
    """True when ``path`` is a DuckDB database (by its header), or names one to create
    (no such file, a DuckDB suffix): ``matchsql FILE`` then opens it as a database."""
    try:
        with path.open("rb") as file:
            header = file.read(DUCKDB_MAGIC_AT + len(DUCKDB_MAGIC))
    except FileNotFoundError:
        return path.suffix.lower() in DATABASE_SUFFIXES
    except OSError:
        return False  # unreadable: reading it as a script reports why
    return header[DUCKDB_MAGIC_AT:] == DUCKDB_MAGIC


def _run_command(shell, text: str) -> bool:
    """One -c argument: a dot-command (as DuckDB's CLI takes them there) or SQL."""
    if text.lstrip().startswith("."):
        return shell.run_lines(text.splitlines(keepends=True), source="-c")
    return shell.run_text(text)


def _run_file(shell, path: Path) -> int:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM is no part of the first line
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"Error: cannot read {path}: {reason}", file=sys.stderr)
        return EXIT_FAILED
    return _status(shell, shell.run_lines(text.splitlines(keepends=True), source=str(path)))


def _status(shell, ok: bool) -> int:
    if ok:
        return 0
    return EXIT_INTERRUPTED if shell.interrupted else EXIT_FAILED
