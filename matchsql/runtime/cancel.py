"""Cancellation of one running statement, seen by every piece of its work.

The executor makes one :class:`Cancellation` per statement and hands it to
everything that can run long: the partition routers and their worker threads,
the reference VM (between chunks of rows) and the compiled kernels, which
read :attr:`Cancellation.flag` every few thousand steps because numba code
cannot look at a Python object. ``Connection.interrupt()`` sets it.

A statement's token has a child per piece of work that may be abandoned
alone (a router whose reader stopped early cancels its own child, not the
statement). A token is never cleared. Work that outlives its statement (a pool thread
still inside a kernel when the caller gave up) sees its own token set and
stops, whatever statement runs next; clearing a shared flag at the start of
the next statement would let it run on.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from matchsql.errors import ExecutionError

if TYPE_CHECKING:
    import numpy as np

INTERRUPTED = "statement interrupted"


class Cancellation:
    """A one-way switch from "running" to "cancelled"."""

    __slots__ = ("_flag", "_event", "_children", "_lock")

    def __init__(self) -> None:
        self._flag: np.ndarray | None = None
        self._event = threading.Event()
        self._children: list[Cancellation] = []
        self._lock = threading.Lock()

    def __reduce__(self):
        # A matcher's state may be pickled (Spark's state store) and restored in another
        # process, where no statement of this one can cancel it: it gets a fresh token.
        return (Cancellation, ())

    @property
    def flag(self) -> np.ndarray:
        """uint8[1]: 1 once cancelled. Kernels poll it; made on first use (a statement of
        plain SQL never needs it), then never reallocated."""
        with self._lock:
            if self._flag is None:
                # numpy: loaded by the first statement whose kernels poll a flag (start-up).
                import numpy as np

                self._flag = np.zeros(1, np.uint8)
                self._flag[0] = self._event.is_set()
            return self._flag

    def child(self) -> Cancellation:
        """A token cancelled with this one, and also cancellable on its own."""
        token = Cancellation()
        with self._lock:
            self._children.append(token)
            if self._event.is_set():
                token.cancel()
        return token

    def cancel(self) -> None:
        with self._lock:
            if self._flag is not None:
                self._flag[0] = 1
            self._event.set()
            children = list(self._children)
        for token in children:
            token.cancel()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise the interrupt error once cancelled; cheap enough for every chunk of rows."""
        if self._event.is_set():
            raise ExecutionError(INTERRUPTED)
