"""Room for deep but bounded recursion: statement compilation on a big stack.

sqlglot's recursive-descent parser spends about 25 Python frames per level
of parentheses, and the tree walkers after it (analysis, typing, expression
compilers) recurse once or more per level too, so Python's default limit of
1,000 frames gives out at some 30 levels: far below what people write.
Rather than rewrite every walker, the statement's depth is bounded first
(:data:`MAX_NESTING`, checked on the token stream and in the row pattern
parser, so deeper text gets a located "nested too deeply" error before any
recursion), and the work that may recurse runs under :func:`run_deep`: on a
thread of its own with a large stack and, while any such call runs, a raised
recursion limit. The C stack of the calling thread never sees the deep
recursion, so raising the limit cannot overflow it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from matchsql.errors import Error

T = TypeVar("T")

#: Levels of parentheses, CASE, or prefix operators an expression or row
#: pattern may nest. Statements people write stay below 20.
MAX_NESTING = 100

#: Chained binary operators (``a + b + ...``, ``p AND q AND ...``) plus
#: nesting levels an expression may have: each makes the expression tree one
#: level deeper, and the evaluators walk it recursively while matching rows.
MAX_CHAIN = 400

#: Python frames a statement at :data:`MAX_NESTING` may use, with margin.
RECURSION_LIMIT = 20_000

#: Stack of the thread that compiles a statement: the frames above at a few
#: KiB of C stack each (most Python-to-Python calls take none). Reserved, not
#: touched: only the pages the recursion reaches become memory.
STACK_BYTES = 64 * 1024 * 1024

_lock = threading.Lock()
_active = 0
_saved_limit = 0


class NestingError(Error):
    """Raised in place of RecursionError when a statement nests too deeply after all."""


def nested_too_deeply(what: str = "statement") -> str:
    """The one wording of the nesting error, shared by every check."""
    return f"{what} nested too deeply (limit {MAX_NESTING})"


def run_deep(fn: Callable[[], T]) -> T:
    """``fn()`` on a thread with :data:`STACK_BYTES` of stack and a raised recursion limit.

    Exceptions (KeyboardInterrupt included) are re-raised in the caller; a
    RecursionError that still happens becomes a :class:`NestingError`, never
    a traceback. Re-entrant calls run inline: they already have the room.
    """
    if getattr(_local, "deep", False):
        return fn()
    outcome: list = []

    def work() -> None:
        _local.deep = True
        try:
            outcome.append((True, fn()))
        except RecursionError:
            outcome.append((False, NestingError(nested_too_deeply())))
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append((False, exc))

    _enter()
    try:
        with _lock:
            old = threading.stack_size()
            threading.stack_size(STACK_BYTES)
            try:
                thread = threading.Thread(target=work, name="matchsql-compile", daemon=True)
                thread.start()
            except RuntimeError:  # no memory for the stack: no room, but no failure either
                thread = None
            finally:
                threading.stack_size(old)
        if thread is None:
            _leave()
            try:
                work()
            finally:
                _local.deep = False
                _enter()
        else:
            thread.join()
    finally:
        _leave()
    ok, value = outcome[0]
    if ok:
        return value
    raise value.with_traceback(None) if isinstance(value, Error) else value


_local = threading.local()


def _enter() -> None:
    global _active, _saved_limit
    with _lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _active += 1


def _leave() -> None:
    global _active
    with _lock:
        _active -= 1
        if _active == 0:
            sys.setrecursionlimit(_saved_limit)
