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

import os
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TypeVar, cast

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


#: A statement known to go at most this many levels deep (nesting and chained operators,
#: as the grammar counts them) runs on the caller's thread where its stack has room.
SHALLOW_LEVELS = 16
#: Python frames a level may take (sqlglot's parser about 25, the walkers after it fewer),
#: and frames kept free besides: the caller's thread must have this much below its limit.
FRAMES_PER_LEVEL = 30
SPARE_FRAMES = 300


def run_deep(fn: Callable[[], T], levels: int | None = None) -> T:
    """``fn()`` on a thread with :data:`STACK_BYTES` of stack and a raised recursion limit.

    Exceptions (KeyboardInterrupt included) are re-raised in the caller; a
    RecursionError that still happens becomes a :class:`NestingError`, never
    a traceback. Re-entrant calls run inline: they already have the room. So
    does the work of a statement known (``levels``) to be shallow, where the
    caller's recursion limit leaves room for it: handing a statement to the
    other thread and back cost 0.4 ms of its planning, in one process however
    many workers match it.
    """
    if getattr(_local, "deep", False):
        return fn()
    if (
        levels is not None
        and levels <= SHALLOW_LEVELS
        and _frames_in_use() + FRAMES_PER_LEVEL * levels + SPARE_FRAMES <= sys.getrecursionlimit()
    ):
        ok, value = _outcome(fn)
    else:
        ok, value = _on_deep_thread(fn)
    if ok:
        return cast(T, value)
    raise value.with_traceback(None) if isinstance(value, Error) else cast(BaseException, value)


def _on_deep_thread(fn: Callable[[], T]) -> tuple[bool, object]:
    """:func:`_outcome` of ``fn`` on a kept big-stack thread, under the raised limit."""
    outcome: list[tuple[bool, object]] = []
    _enter()
    try:
        thread = _DeepThread.take()
        if thread is None:  # no memory for a stack: no room, but no failure either
            _leave()
            try:
                _local.deep = True
                outcome.append(_outcome(fn))
            finally:
                _local.deep = False
                _enter()
        else:
            done = threading.Event()
            thread.give(fn, outcome, done)
            done.wait()
    finally:
        _leave()
    return outcome[0]


def _frames_in_use() -> int:
    """The frames on the calling thread's stack (a walk up it: a few microseconds)."""
    frames = 0
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        frames += 1
        frame = frame.f_back
    return frames


def _outcome(fn: Callable[[], T]) -> tuple[bool, object]:
    try:
        return True, fn()
    except RecursionError:
        return False, NestingError(nested_too_deeply())
    except BaseException as exc:  # handed to the caller's thread
        return False, exc


class _DeepThread:
    """A thread with the large stack that runs one call at a time and then waits for the
    next: kept rather than started anew for each statement, whose planning a new thread
    cost 0.3-0.5 ms (its stack's pages faulted in again, the state of the libraries it
    calls made again for it)."""

    #: Idle threads kept (more run at once where several connections plan at once).
    KEEP = 2
    _idle: list[_DeepThread] = []

    def __init__(self) -> None:
        self._call: tuple[Callable[[], object], list, threading.Event] | None = None
        self._go = threading.Semaphore(0)
        self.thread = threading.Thread(target=self._serve, name="matchsql-compile", daemon=True)

    @classmethod
    def take(cls) -> _DeepThread | None:
        """An idle thread, or a new one; None where no stack can be had."""
        with _lock:
            if cls._idle:
                return cls._idle.pop()
            old = threading.stack_size()
            threading.stack_size(STACK_BYTES)
            try:
                fresh = cls()
                fresh.thread.start()
            except RuntimeError:
                return None
            finally:
                threading.stack_size(old)
            return fresh

    def give(self, fn: Callable[[], object], outcome: list, done: threading.Event) -> None:
        self._call = (fn, outcome, done)
        self._go.release()

    def _serve(self) -> None:
        _local.deep = True
        while True:
            self._go.acquire()
            assert self._call is not None
            fn, outcome, done = self._call
            self._call = None
            outcome.append(_outcome(fn))
            del fn  # the call's objects go with it, not with this idle thread
            with _lock:
                kept = len(self._idle) < self.KEEP
                if kept:
                    self._idle.append(self)
            done.set()
            if not kept:
                return


def _forget_threads() -> None:
    """In a forked child only the forking thread lives on: the idle threads are gone, and
    the lock may have been held by one of them."""
    global _lock
    _lock = threading.Lock()
    _DeepThread._idle = []


os.register_at_fork(after_in_child=_forget_threads)


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
