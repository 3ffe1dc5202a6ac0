"""tqdm progress bars of the long-running commands (``matchsql produce``, ``experiment``).

One rule for when they show: ``--progress auto`` (the default) draws on
stderr only when it is a terminal, ``on`` always, ``off`` never. tqdm is
imported when a bar is made, not when the command line is parsed: the lazy
import is the point (``matchsql -c`` never needs it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

MODES = ("auto", "on", "off")


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    mode: str = "auto",
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    unit_scale: bool = False,
) -> Any:
    """A tqdm bar on stderr (disabled per ``mode``); iterate it or call ``update(n)``."""
    from tqdm import tqdm

    disable = mode == "off" or (mode == "auto" and not sys.stderr.isatty())
    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit_scale,
        file=sys.stderr,
        disable=disable,
        dynamic_ncols=True,
    )


def note(text: str) -> None:
    """Print ``text`` on stderr above a bar that may be showing."""
    from tqdm import tqdm

    tqdm.write(text, file=sys.stderr)
