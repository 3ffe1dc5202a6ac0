"""A connection's worker processes: started once, reused by its queries, killed on trouble.

Workers are started with the ``spawn`` method: the engine's process has
threads (DuckDB's, the thread-pool router's), and ``fork`` would copy them
half-way through whatever they hold. Starting one costs an interpreter and
the engine's imports, so a pool lives as long as its connection (or until
the number of workers changes). Anything that leaves a worker in an unknown
state - an interrupt, a failure, a worker's death - kills the whole pool at
once (SIGKILL: an interrupt must not wait for a kernel to reach its next
check); the next query starts a fresh one.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import signal
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

from matchsql.cancel import Cancellation
from matchsql.errors import ExecutionError
from matchsql.workers import boot
from matchsql.workers.channel import RingReader, RingWriter
from matchsql.workers.shared_rows import RowsArena

#: Bytes of each direction's ring (per worker).
RING_BYTES = 32 << 20
_START_TIMEOUT_S = 120.0
_GREET_POLL_S = 0.02  # how often a starting pool looks at the statement's cancellation


@dataclass
class Worker:
    index: int
    proc: mp.process.BaseProcess
    inbox: RingWriter
    pipe: Connection  # the outbox's notices
    outbox: RingReader | None = None
    # Figures for SHOW WORKERS and the balancer, kept by the router.
    rows_in: int = 0
    rows_done: int = 0
    busy_s: float = 0.0  # time spent matching (CPU of the worker, to first order)
    buckets: set[int] = field(default_factory=set)

    @property
    def pid(self) -> int:
        return self.proc.pid or 0

    def death(self) -> str | None:
        """Why the worker is gone ("killed by SIGKILL", "exited with code 1"), or None."""
        code = self.proc.exitcode
        if code is None:
            return None
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"


class WorkerPool:
    """``size`` worker processes, each with a channel in and a channel out."""

    def __init__(self, size: int, ring_bytes: int = RING_BYTES,
                 cancel: Cancellation | None = None) -> None:
        """Start ``size`` workers and wait for each to greet; ``cancel`` (the statement's
        that starts the pool) stops the wait: a start takes seconds on a busy machine,
        and an interrupt waited for all of it (3 to 4 s, measured)."""
        self.size = size
        self.ring_bytes = ring_bytes
        self.workers: list[Worker] = []
        self.migrations = 0  # over the pool's life, for SHOW WORKERS
        self.arena = RowsArena()  # the queries' grouped input, shared with the workers
        context = mp.get_context("spawn")
        atexit.register(self.kill)  # a connection never closed: no worker or segment outlives us
        try:
            for index in range(size):
                self.workers.append(self._start(context, index))
            for worker in self.workers:
                self._greet(worker, cancel)
        except BaseException:
            self.kill()
            raise

    def _start(self, context, index: int) -> Worker:
        to_worker_r, to_worker_w = context.Pipe(duplex=False)
        from_worker_r, from_worker_w = context.Pipe(duplex=False)
        inbox = RingWriter(to_worker_w, self.ring_bytes)
        proc = context.Process(
            target=boot.start, name=f"matchsql-worker-{index}", daemon=True,
            args=(os.getpid(), index, to_worker_r, inbox.name, from_worker_w, self.ring_bytes))
        with _bare_main():
            proc.start()
        to_worker_r.close()
        from_worker_w.close()
        # The outbox reader attaches once the worker has made its segment (_greet).
        return Worker(index, proc, inbox, from_worker_r)

    def _greet(self, worker: Worker, cancel: Cancellation | None = None) -> None:
        pipe = worker.pipe
        deadline = time.monotonic() + _START_TIMEOUT_S
        ready: list = []
        while not ready and time.monotonic() < deadline:
            if cancel is not None:
                cancel.check()
            ready = wait([pipe, worker.proc.sentinel], _GREET_POLL_S)
        if pipe not in ready:
            raise ExecutionError(f"worker process {worker.index} did not start "
                                 f"({worker.death() or 'timed out'})")
        _, name, _ = pipe.recv()
        worker.outbox = RingReader(pipe, name, self.ring_bytes)

    def alive(self) -> bool:
        return bool(self.workers) and all(w.proc.exitcode is None for w in self.workers)

    def close(self) -> None:
        """Ask every worker to exit, then make sure it did."""
        for worker in self.workers:
            try:
                if worker.proc.exitcode is None:
                    worker.inbox.send("stop")
            except (OSError, ValueError):
                pass
        for worker in self.workers:
            worker.proc.join(2.0)
        self.kill()

    def kill(self) -> None:
        """SIGKILL every worker now and free the shared memory (idempotent)."""
        atexit.unregister(self.kill)
        for worker in self.workers:
            if worker.proc.exitcode is None:
                try:
                    os.kill(worker.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, TypeError):
                    pass
        for worker in self.workers:
            worker.proc.join(5.0)
            worker.inbox.close()
            if worker.outbox is None:
                _unlink_unread_outbox(worker, self.ring_bytes)
            if worker.outbox is not None:
                worker.outbox.close(unlink=True)
            try:
                worker.proc.close()
            except ValueError:
                pass
        self.workers = []
        self.arena.close()


def _unlink_unread_outbox(worker: Worker, ring_bytes: int) -> None:
    """A worker killed before its greeting was read (an interrupt while the pool
    started) made its outbox all the same: attach to it by the greeting's name, so that
    the caller unlinks it, rather than leave it in /dev/shm until the process ends."""
    try:
        if worker.pipe.poll(0):
            _, name, _ = worker.pipe.recv()
            worker.outbox = RingReader(worker.pipe, name, ring_bytes)
    except (EOFError, OSError, ValueError):
        pass  # no greeting, or its segment is gone already


@contextmanager
def _bare_main() -> Iterator[None]:
    """Hide the caller's ``__main__`` while a worker is spawned.

    ``spawn`` re-imports the parent's main script in the child so that a
    pickled target may live there; ours lives in this package, and a script
    without an ``if __name__ == "__main__"`` guard (or a REPL) would rerun
    its queries in every worker.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main
