"""What one connection keeps of its workers: the pool and the last query's figures."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from matchsql.config import Config
from matchsql.engine.compiled_query import CompiledMatch
from matchsql.execution.router.partitions import RunFactory
from matchsql.execution.router.presorted import GroupedRows
from matchsql.execution.workers.balance import Policy, Rebalancer
from matchsql.execution.workers.pool import WorkerPool
from matchsql.execution.workers.scatter import ScatterPlan, ScatterRouter
from matchsql.execution.workers.stream_router import StreamRouter
from matchsql.execution.workers.worker_router import WorkerChannels, WorkerRouter
from matchsql.plan.spec import MatchSpec
from matchsql.runtime.cancel import Cancellation

#: Rows of a query's input kept for priming (:class:`Priming`): a few batches' worth.
PRIMING_ROWS = 2048
#: The batch size of a priming run: the sample reaches the workers as several pieces, as
#: a query's rows do (a long partition's pieces, short partitions whole).
_PRIMING_BATCH = 512


@dataclass(frozen=True)
class Priming:
    """The last query a pool ran, with the first rows of its sorted input.

    A replacement pool (after an interrupt or a failure) matches these rows before it is
    handed over: its workers then load the query's compiled kernels from the cache
    while the user types, rather than in front of the next query (a quarter to a third
    of a second of a 1.4 s query on the demo table, measured by bench.after_interrupt).
    """

    spec: MatchSpec
    config: Config
    sample: pa.Table

    def run(self, pool: WorkerPool, cancel: Cancellation) -> None:
        """Match the sample on ``pool``'s workers, discarding the matches."""
        router = WorkerRouter(pool, self.spec, self.config, cancel, policy=Rebalancer())
        for _ in router.run(self.sample.to_batches(max_chunksize=_PRIMING_BATCH)):
            pass


class WorkerSession:
    """Starts the pool on first use, reuses it, and kills it whenever a query does not
    end cleanly (so no worker is left busy with an abandoned query).

    A killed pool is replaced at once on a helper thread (:meth:`_replace`): after an
    interrupt the user's next query would otherwise wait for new processes and their
    imports (it took 8-11 s where the query takes 4)."""

    def __init__(self) -> None:
        self.pool: WorkerPool | None = None
        self._spare: _Spare | None = None  # a pool starting on a helper thread
        # What a replacement pool matches before it is handed over (see Priming).
        self.priming: Priming | None = None
        self.last: WorkerChannels | None = None
        # The policy of the next queries' routers; tests put a fault injector here.
        self.policy_factory = Rebalancer
        # "sorted" (the input read in order in this process, as for workers = 1: its own
        # order or DuckDB's sort; pieces of partitions go out: :mod:`.worker_router`) or "scatter"
        # (the router scans unsorted, each worker groups or sorts its rows: :mod:`.scatter`).
        # On two cores "sorted" spends the less CPU (bench/results/workers.txt); "scatter"
        # has the smaller serial part, so it goes further with more.
        self.mode = "sorted"
        self._busy = threading.Lock()

    def _pool(self, size: int, cancel: Cancellation | None = None) -> WorkerPool:
        """The pool of ``size`` workers, started now if need be (``cancel`` stops that)."""
        if self.pool is not None and (self.pool.size != size or not self.pool.alive()):
            self.pool.kill()
            self.pool = None
        if self.pool is None:
            spare, self._spare = self._spare, None
            pool = spare.take(size, cancel) if spare is not None else None
            self.pool = pool if pool is not None else WorkerPool(size, cancel=cancel)
        return self.pool

    def _replace(self, pool: WorkerPool) -> None:
        """Kill ``pool`` (a query left it in an unknown state) and start its like."""
        pool.kill()
        if self.pool is pool:
            self.pool = None
        if self._spare is None:
            self._spare = _Spare(pool.size, self.priming)

    def claim(self) -> bool:
        """Take the pool for one MATCH_RECOGNIZE; False while another one holds it.

        A statement with nested MATCH_RECOGNIZEs runs them at the same time (the
        outer one reads the inner one's matches), and a worker serves one query
        at a time: the MATCH_RECOGNIZE that finds the pool taken runs in this
        process. :meth:`run`, started right after a successful claim, releases it.
        """
        return self._busy.acquire(blocking=False)

    def run(
        self,
        query: CompiledMatch,
        config: Config,
        cancel: Cancellation,
        *,
        open_input: Callable[[str], Iterable[pa.RecordBatch]],
        sorted_input: Callable[[], GroupedRows | pa.Table | Iterable[pa.RecordBatch]],
        scatter: ScatterPlan | None,
        policy: Policy | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The matches of one MATCH_RECOGNIZE (``query``; the workers get its spec).
        :attr:`mode` "sorted" routes the rows of ``sorted_input()``: the input in
        partition and ORDER BY order, got as the caller gets it for ``workers = 1`` (its
        own order where it is in order, else DuckDB's sort: one rule for both), grouped
        here (then shared with the workers) or batches; "scatter" runs ``scatter``'s
        scans by ``open_input(sql)``."""
        spec = query.spec
        clean = False
        pool: WorkerPool | None = None
        sorted_router: WorkerRouter | None = None  # its first rows prime a replacement pool
        try:
            pool = self._pool(config.workers, cancel)
            policy = policy if policy is not None else self.policy_factory()
            router: WorkerRouter
            if self.mode == "sorted" or scatter is None:
                router = sorted_router = WorkerRouter(
                    pool, spec, config, cancel, policy=policy, sample_rows=PRIMING_ROWS
                )
                self.last = router
                yield from router.run(sorted_input())
            else:
                router = ScatterRouter(
                    pool, spec, config, cancel, scatter, open_input, policy=policy
                )
                self.last = router
                yield from router.run()
            clean = True
        finally:
            if sorted_router is not None and sorted_router.sample is not None:
                self.priming = Priming(spec, config, sorted_router.sample)
            if not clean and pool is not None:
                self._replace(pool)
            self._busy.release()

    def stream_router(
        self,
        query: CompiledMatch,
        config: Config,
        cancel: Cancellation,
        new_run: RunFactory,
        *,
        live: bool,
    ) -> StreamRouter | None:
        """A continuous query's router on the workers, or None where it runs in this
        process (``workers = 1``, no PARTITION BY, or the pool taken by another query).
        It holds the pool until :meth:`StreamRouter.close`."""
        spec = query.spec
        if config.workers <= 1 or not spec.partition_by or not self.claim():
            return None
        try:
            pool = self._pool(config.workers, cancel)
        except BaseException:
            self._busy.release()
            raise
        router = StreamRouter(
            pool,
            spec,
            config,
            cancel,
            new_run,
            live=live,
            policy=self.policy_factory(),
            on_close=self._closed,
        )
        self.last = router
        return router

    def _closed(self, router: WorkerChannels, clean: bool) -> None:
        if not clean:
            self._replace(router.pool)
        self._busy.release()

    def close(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.discard()
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def table(self) -> pa.Table:
        """SHOW WORKERS: one row per worker of the pool."""
        pool, router = self.pool, self.last
        rows: dict[str, list] = {
            name: []
            for name in (
                "worker",
                "pid",
                "alive",
                "buckets",
                "queued_rows",
                "queued_messages",
                "rows_matched",
                "cpu_s",
                "migrations_in",
                "migrations_out",
            )
        }
        for worker in pool.workers if pool is not None else []:
            index = worker.index
            mine = (
                []
                if router is None or router.pool is not pool
                else sorted(b for b, w in router.owner.items() if w == index)
            )
            rows["worker"].append(index)
            rows["pid"].append(worker.pid)
            rows["alive"].append(worker.proc.exitcode is None)
            rows["buckets"].append(",".join(map(str, mine)))
            queued = (
                0
                if router is None or router.pool is not pool
                else router.routed[index] - router.done_rows[index]
            )
            rows["queued_rows"].append(queued)
            rows["queued_messages"].append(worker.inbox.unread())
            rows["rows_matched"].append(worker.rows_done)
            rows["cpu_s"].append(round(worker.busy_s, 3))
            moves = router.migrations if router is not None and router.pool is pool else []
            rows["migrations_in"].append(sum(m.target == index for m in moves))
            rows["migrations_out"].append(sum(m.source == index for m in moves))
        types = {
            "worker": pa.int64(),
            "pid": pa.int64(),
            "alive": pa.bool_(),
            "buckets": pa.string(),
            "queued_rows": pa.int64(),
            "queued_messages": pa.int64(),
            "rows_matched": pa.int64(),
            "cpu_s": pa.float64(),
            "migrations_in": pa.int64(),
            "migrations_out": pa.int64(),
        }
        return pa.table({name: pa.array(values, types[name]) for name, values in rows.items()})


class _Spare:
    """A pool of ``size`` workers starting on a helper thread, primed by ``priming``.

    The thread lives until the pool is taken or discarded: a starting worker dies with
    the thread that started it until it clears that death signal as it greets
    (:mod:`.boot`), and nothing is gained by ending the thread sooner. A priming run
    that fails (or is stopped by :meth:`discard`) leaves the pool in an unknown state:
    it is killed, and the next query starts a pool itself."""

    def __init__(self, size: int, priming: Priming | None = None) -> None:
        self.size = size
        self.priming = priming
        self.pool: WorkerPool | None = None
        self.cancel = Cancellation()  # :meth:`discard` stops the start
        self.ready = threading.Event()  # the start ended (with a pool or without)
        self.handed = threading.Event()  # taken or discarded: the thread may end
        self.thread = threading.Thread(target=self._start, name="matchsql-spare-pool", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        try:
            self.pool = WorkerPool(self.size, cancel=self.cancel)
            if self.priming is not None:
                self.priming.run(self.pool, self.cancel)
        except Exception:  # noqa: BLE001 - the next query starts a pool itself and says why
            if self.pool is not None:
                self.pool.kill()
            self.pool = None
        self.ready.set()
        self.handed.wait()

    def take(self, size: int, cancel: Cancellation | None) -> WorkerPool | None:
        """The started pool when it has ``size`` live workers (waiting for its start,
        which ``cancel`` interrupts), else None (after killing what did start)."""
        while not self.ready.wait(0.02):
            if cancel is not None and cancel.cancelled:
                self.discard()
                cancel.check()
        self.handed.set()
        pool = self.pool
        if pool is not None and (pool.size != size or not pool.alive()):
            pool.kill()
            pool = None
        return pool

    def discard(self) -> None:
        """Stop the start (or kill the started pool)."""
        self.cancel.cancel()
        self.handed.set()
        self.thread.join()
        if self.pool is not None:
            self.pool.kill()
            self.pool = None
