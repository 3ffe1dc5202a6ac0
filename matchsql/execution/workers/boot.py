"""The first code of a worker process: from its start, it ends with the router's process.

A worker imports the engine before it can serve (numba, the kernels: seconds
on a loaded machine), and a router killed meanwhile must not leave it to
finish starting and wait alone. So the spawned target is this small module.
It asks the kernel to SIGKILL the worker when the thread that started it
ends (Linux's ``PR_SET_PDEATHSIG``): that thread waits in the pool's
start-up until every worker greets it, and the death signal is cleared as
the worker greets (:func:`started`, just before its greeting), because a pool
outlives the thread that made it (a continuous query's, a spare pool's). From then on a thread of
the worker watches the router's pid (:func:`watch_parent`), even while the main thread
is inside a long match. A worker whose router died removes the pool's
shared-memory segments as it goes (the router cannot any more; see
:mod:`.segments`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from typing import Any

from matchsql.execution.workers import segments

PR_SET_PDEATHSIG = 1
#: How often a worker checks that the process that started it is still there.
ORPHAN_CHECK_S = 0.25


def start(parent: int, prefix: str, *args: Any) -> None:
    """The target of a spawned worker: guard, then import and run the worker's loop
    (``prefix``: the pool's segment names; ``args`` go to the loop)."""
    _death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the router died before the signal was asked for
        segments.sweep(prefix)
        os._exit(1)
    watch_parent(parent, prefix)
    # Imported here, after the guards: this import is what takes the start-up seconds.
    from matchsql.execution.workers import process

    process.main(prefix, *args, greeted=started)


def started() -> None:
    """The worker is about to greet its router: the death signal goes (see the module)."""
    _death_signal(0)


def watch_parent(parent: int, prefix: str | None = None) -> None:
    """Exit as soon as the router's process ``parent`` is gone, even in a kernel.

    A router killed outright (SIGKILL, a test's timeout) closes its pipes, but
    a worker only sees that at its next read or write: one inside a long match
    would otherwise run on, alone, for as long as the match takes. ``parent``
    is the pid the router passed, not this process's parent now: a router
    killed while the worker was starting has been replaced as parent already.
    On its way out the worker removes the segments named under ``prefix``.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_CHECK_S)
        if prefix is not None:
            with contextlib.suppress(Exception):  # exit whatever happens
                segments.sweep(prefix)
        os._exit(1)

    threading.Thread(target=watch, name="matchsql-worker-orphan", daemon=True).start()


def _death_signal(signum: int) -> None:
    """``prctl(PR_SET_PDEATHSIG, signum)`` where there is one (Linux); else nothing."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
