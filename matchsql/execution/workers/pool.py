"""A connection's worker processes: started once, reused by its queries, killed on trouble.

Workers are started with the ``spawn`` method: the engine's process has
threads (DuckDB's, the thread-pool router's), and ``fork`` would copy them
half-way through whatever they hold. Starting one costs an interpreter and
the engine's imports, so a pool lives as long as its connection (or until
the number of workers changes). Anything that leaves a worker in an unknown
state - an interrupt, a failure, a worker's death - kills the whole pool at
once (SIGKILL: an interrupt must not wait for a kernel to reach its next
check); the next query starts a fresh one.

A pool that cannot start says why (:class:`WorkerStartError`: the worker was
killed by a signal, exited with a code - an interpreter that cannot start
exits at once -, could not be run at all, or did not greet in time) and
leaves nothing behind: every segment of a pool is named under its prefix
(:mod:`.segments`), so :meth:`WorkerPool.kill` removes even those whose
creator died before saying their name.
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
from multiprocessing import popen_spawn_posix, spawn
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnProcess

from matchsql.errors import ExecutionError
from matchsql.execution.workers import boot, segments
from matchsql.execution.workers.channel import RingReader, RingWriter
from matchsql.execution.workers.shared_rows import RowsArena
from matchsql.runtime.cancel import Cancellation

#: Bytes of each direction's ring (per worker).
RING_BYTES = 32 << 20
#: How long a pool's workers have, together, to greet (imports take seconds when loaded).
START_TIMEOUT_S = 120.0
#: How often a starting pool looks at the statement's cancellation.
_GREET_POLL_S = 0.02
#: How long a worker that ended gets to be reaped, for its exit code to be known.
_REAP_S = 5.0


class WorkerLost(ExecutionError):
    """A worker process died: its buckets' state is gone (a checkpoint can restore it)."""


class WorkerStartError(WorkerLost):
    """A worker process did not start; the message says why (the pool was killed)."""


def exit_cause(code: int | None) -> str | None:
    """How a process ended, from its exit code ("killed by signal 9 (SIGKILL)",
    "exited with code 1"); None while it runs."""
    if code is None:
        return None
    if code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


@dataclass
class Worker:
    index: int
    proc: mp.process.BaseProcess
    inbox: RingWriter
    pipe: Connection  # the outbox's notices
    outbox_name: str = ""  # the worker makes its outbox under the name the pool gave
    outbox: RingReader | None = None
    started: bool = False  # whether its process was started (else it has no exit code)
    # Figures for SHOW WORKERS and the balancer, kept by the router.
    rows_in: int = 0
    rows_done: int = 0
    busy_s: float = 0.0  # time spent matching (CPU of the worker, to first order)
    buckets: set[int] = field(default_factory=set)

    @property
    def pid(self) -> int:
        return self.proc.pid or 0

    def death(self) -> str | None:
        """Why the worker is gone ("killed by signal 9 (SIGKILL)", "exited with code 1"),
        or None while it runs."""
        return exit_cause(self.proc.exitcode) if self.started else None

    def reaped_death(self, timeout: float = _REAP_S) -> str:
        """Why the worker ended, once it has (its pipe or sentinel said so): the kernel
        closes a process's pipes before its exit code can be read, so wait for that."""
        if self.started:
            self.proc.join(timeout)
        return self.death() or f"did not end within {timeout:g} s of closing its channel"


class WorkerPool:
    """``size`` worker processes, each with a channel in and a channel out."""

    def __init__(
        self, size: int, ring_bytes: int = RING_BYTES, cancel: Cancellation | None = None
    ) -> None:
        """Start ``size`` workers and wait for each to greet; ``cancel`` (the statement's
        that starts the pool) stops the wait: a start takes seconds on a busy machine,
        and an interrupt waited for all of it (3 to 4 s, measured)."""
        self.size = size
        self.ring_bytes = ring_bytes
        self.workers: list[Worker] = []
        self.migrations = 0  # over the pool's life, for SHOW WORKERS
        segments.sweep_dead_owners()  # what pools of killed processes left
        self.prefix = segments.pool_prefix()
        self.arena = RowsArena(self.prefix)  # the queries' grouped input, shared with workers
        context = mp.get_context("spawn")
        atexit.register(self.kill)  # a connection never closed: no worker or segment outlives us
        try:
            for index in range(size):
                self._start(context, index)
            deadline = time.monotonic() + START_TIMEOUT_S
            for worker in self.workers:
                self._greet(worker, deadline, cancel)
        except BaseException:
            self.kill()
            raise

    def _start(self, context: mp.context.SpawnContext, index: int) -> None:
        to_worker_r, to_worker_w = context.Pipe(duplex=False)
        from_worker_r, from_worker_w = context.Pipe(duplex=False)
        try:
            try:
                inbox = RingWriter(
                    to_worker_w, self.ring_bytes, prefix=self.prefix, name=f"{self.prefix}i{index}"
                )
            except OSError as exc:  # a full /dev/shm, most likely
                to_worker_w.close()
                from_worker_r.close()
                raise WorkerStartError(
                    f"worker process {index} did not start: no shared "
                    f"memory for its channel ({_reason(exc)})"
                ) from None
            outbox_name = f"{self.prefix}o{index}"
            proc = _WorkerProcess(
                target=boot.start,
                name=f"matchsql-worker-{index}",
                daemon=True,
                args=(
                    os.getpid(),
                    self.prefix,
                    index,
                    to_worker_r,
                    inbox.name,
                    from_worker_w,
                    outbox_name,
                    self.ring_bytes,
                ),
            )
            worker = Worker(index, proc, inbox, from_worker_r, outbox_name)
            self.workers.append(worker)  # from here on, kill() frees its segments
            try:
                with _bare_main():
                    proc.start()
            except OSError as exc:  # the interpreter could not be run at all
                raise WorkerStartError(
                    f"worker process {index} did not start: cannot run "
                    f"{spawn.get_executable()} ({_reason(exc)})"
                ) from None
            worker.started = True
        finally:
            to_worker_r.close()
            from_worker_w.close()

    def _greet(self, worker: Worker, deadline: float, cancel: Cancellation | None) -> None:
        """Wait for the worker's hello (its outbox is made), or say why it did not come."""
        pipe = worker.pipe
        ready: list = []
        while not ready and time.monotonic() < deadline:
            if cancel is not None:
                cancel.check()
            ready = wait(
                [pipe, worker.proc.sentinel],
                min(_GREET_POLL_S, max(0.0, deadline - time.monotonic())),
            )
        if not ready:
            raise WorkerStartError(
                f"worker process {worker.index} did not start: timed out "
                f"after {START_TIMEOUT_S:g} s"
            )
        try:
            if pipe not in ready:  # only its sentinel: it ended without a word
                raise EOFError
            kind, name, _ = pipe.recv()
            if kind != "hello" or name != worker.outbox_name:
                raise WorkerStartError(
                    f"worker process {worker.index} did not start: it sent {kind!r} first"
                )
            worker.outbox = RingReader(pipe, name, self.ring_bytes)
        except (EOFError, OSError):
            raise WorkerStartError(
                f"worker process {worker.index} did not start: "
                f"{worker.reaped_death()}{_interpreter_problem()}"
            ) from None

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
            if worker.started:
                worker.proc.join(2.0)
        self.kill()

    def kill(self) -> None:
        """SIGKILL every worker now and free the shared memory (idempotent)."""
        atexit.unregister(self.kill)
        for worker in self.workers:
            if worker.started and worker.proc.exitcode is None:
                pid = worker.proc.pid  # None: its launch failed
                try:
                    if pid is not None:
                        os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for worker in self.workers:
            if worker.started:
                try:
                    worker.proc.join(_REAP_S)
                except ValueError:  # closed by a kill on another thread (exit, a spare's start)
                    pass
            worker.inbox.close()
            if worker.outbox is not None:
                worker.outbox.close(unlink=True)
            try:
                worker.proc.close()
            except ValueError:
                pass
        self.workers = []
        self.arena.close()
        # What no object here holds: an outbox whose worker died before greeting, payloads
        # too large for a ring that a dead reader never took.
        segments.sweep(self.prefix)


class _SpawnPopen(popen_spawn_posix.Popen):
    """multiprocessing's spawn launcher, for whom a child that died at once is no error.

    The launcher writes the child's instructions into a pipe the child reads
    first; a child that ends before that (an interpreter that cannot start,
    a SIGKILL) breaks the pipe, and multiprocessing raises BrokenPipeError
    having lost the child's pid, so its exit code - the one thing that says
    what went wrong - could not be read. Here the launch completes; the pool
    sees the child end at its greeting, and says how it ended.
    """

    def _launch(self, process_obj: mp.process.BaseProcess) -> None:
        try:
            # multiprocessing's own launch step, which typeshed does not declare
            super()._launch(process_obj)  # type: ignore[misc]
        except BrokenPipeError:
            if getattr(self, "pid", None) is None or getattr(self, "sentinel", None) is None:
                raise


class _WorkerProcess(SpawnProcess):
    """A spawned process started through :class:`_SpawnPopen`."""

    @staticmethod
    def _Popen(process_obj: mp.process.BaseProcess) -> _SpawnPopen:  # noqa: N802 - its name
        return _SpawnPopen(process_obj)


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _interpreter_problem() -> str:
    """Why the workers' interpreter cannot run, as a suffix of the error ("" when it can
    as far as this process can tell). multiprocessing does not report a failed exec: the
    child just exits with code 255."""
    executable = spawn.get_executable()
    if isinstance(executable, bytes):
        executable = os.fsdecode(executable)
    try:
        os.stat(executable)
    except OSError as exc:
        return f" (cannot run {executable}: {_reason(exc)})"
    if not os.access(executable, os.X_OK):
        return f" (cannot run {executable}: not executable by this user)"
    return ""


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
