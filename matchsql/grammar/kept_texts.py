"""Answers kept per text: a text split or parsed lately is not split or parsed again.

A statement run again (a dashboard's, a REPL's history, a benchmark's) is
neither split nor parsed again: its planning runs in one process however many
workers match it, so the 0.5-1 ms this saves per statement is serial time
saved (1M rows of 500 partitions: planning is a fifth of a two-worker
statement). A long text is split and parsed several times while it runs (a
170,000 character pattern took 0.7 s a parse), but holding many is more than
a kept answer may cost: the last one alone is kept. Errors are not kept (only
returns are): a bad text is worked on each time.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["KEPT_TEXTS", "KEPT_TEXT_CHARS", "kept_per_text"]

#: Texts whose answers are kept ...
KEPT_TEXTS = 64
#: ... of at most this many characters; of longer texts, the last one's.
KEPT_TEXT_CHARS = 1 << 16

T = TypeVar("T")


def kept_per_text(work: Callable[[str], T]) -> Callable[[str], T]:
    """``work`` with its answers kept by text (see the module notes); the answers are
    shared, so ``work`` returns what no caller changes (tuples). The result's
    ``cache_clear()`` forgets them."""
    short = functools.lru_cache(maxsize=KEPT_TEXTS)(work)
    last: list[tuple[str, T]] = []
    lock = threading.Lock()

    def kept(text: str) -> T:
        if len(text) <= KEPT_TEXT_CHARS:
            return short(text)
        with lock:
            previous = last[0] if last else None
        if previous is not None and previous[0] == text:
            return previous[1]
        answer = work(text)
        with lock:
            last[:] = [(text, answer)]
        return answer

    def cache_clear() -> None:
        short.cache_clear()
        with lock:
            last.clear()

    kept.cache_clear = cache_clear  # type: ignore[attr-defined]
    return kept
