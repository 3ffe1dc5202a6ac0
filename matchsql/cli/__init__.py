"""The ``matchsql`` command line: the statement shell, the REPL and their dot-commands.

    command.py       the `matchsql` command: arguments, ``-c``, scripts, piped input, subcommands
    shell.py         Shell: runs statements and dot-commands, prints results
    repl.py          the interactive prompt (prompt_toolkit) on top of Shell
    dot_commands.py  the dot-command table (.mode, .output, .show, .plot, ...)
    modes.py         output modes (box, csv, markdown, line, json)
    completion.py    Tab completion from the connection's catalog
    highlight.py     syntax highlighting (Pygments)
    progress.py      the progress line of slow statements

Layers: command -> repl -> shell -> dot_commands -> modes; none imports back.
"""

from matchsql.cli.command import SUBCOMMANDS, main

__all__ = ["SUBCOMMANDS", "main"]
