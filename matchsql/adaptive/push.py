"""Push and adaptive input for continuous queries (thesis chapters 3-4, DESIGN "Input handling").

In pull mode the query thread reads the live store whenever it has nothing
left to match. Push mode moves reading into a *push thread*: it reads the
store as tuples arrive and routes each batch, split by partition key, into
one :class:`InputHolder` per partition (a queue of unprocessed batches). The
query thread then only runs matchers over what was pushed, so store latency
and matching overlap, at the cost of holding unprocessed tuples in memory.

Adaptive mode gates the push thread with :class:`Go4RiskSwitch`: after each
pushed batch it suspends while the watched ``R`` (unprocessed tuples, chosen
by a partition rule) exceeds ``R_Bound``; the query thread resumes it once
``R <= 1``.

Granularity (an approximation of the thesis, which works per tuple): the
matchers expose no per-tuple state hooks, so the switch is consulted once per
pushed *batch* and once per matched batch, and each partition's
:class:`StateStatistics` is fed at batch granularity only - every tuple fed
opens a window and every output row counts as a match, with no per-state
in/out counts and the current state taken as the start state. ``R_Bound`` is
therefore the state count until the first match and ``l_seq(0)`` after it;
``U`` only raises it for patterns whose singleton selectivities are unknown
to be low (none, at present), so U=0 and U>0 behave alike until per-tuple
hooks exist.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa

from matchsql.adaptive.metrics import InputMetrics
from matchsql.adaptive.statistics import Sliding, StateKind, StateSpec, StateStatistics
from matchsql.adaptive.switch import (
    Go4RiskSwitch,
    MostTuplesRule,
    PartitionRule,
    PartitionView,
    Pressure,
)
from matchsql.router.hashed import HashPartitionRouter
from matchsql.router.partitions import PartitionRun, RunFactory

WAIT_S = 0.1  # longest sleep of either thread between checks for cancellation and races
JOIN_S = 5.0


def sample_routed(metrics: InputMetrics, tuples: int, held: int, queued: int) -> None:
    """Record ``tuples`` routed tuples that all saw the same held and queued counts.

    Equivalent to ``tuples`` calls of :meth:`InputMetrics.routed`, without a
    Python call per tuple - the values only change between batches anyway.
    """
    if tuples <= 0:
        return
    metrics.records += tuples
    metrics.mem_samples += tuples
    metrics.mem_total += held * tuples
    metrics.max_mem = max(metrics.max_mem, held)
    metrics.queue_total += queued * tuples
    metrics.max_queue = max(metrics.max_queue, queued)


class InputHolder:
    """One partition's unprocessed batches; fed by the push thread under the shared lock.

    It has the ``feed``/``finish`` shape of a matcher run so that the ordinary
    :class:`HashPartitionRouter` can split batches into holders.
    """

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.batches: deque[pa.RecordBatch] = deque()
        self.unprocessed = 0  # R of this partition
        self.routed = 0  # tuples ever routed here, for the partition rule

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        self.batches.append(batch)
        self.unprocessed += batch.num_rows
        self.routed += batch.num_rows
        return []

    def finish(self) -> list[pa.RecordBatch]:
        return []


class PushInput:
    """A push thread filling InputHolders and the query-side loop that drains them."""

    def __init__(self, keys: list[str], new_run: RunFactory,
                 next_batch: Callable[[], pa.RecordBatch | None], *,
                 metrics: InputMetrics, queued: Callable[[], int] = lambda: 0,
                 adaptive: bool = False, states: Sequence[StateSpec] = (),
                 u: int = 0, sliding: Sliding = Sliding.NEXT_ROW,
                 rule: PartitionRule | None = None) -> None:
        self.new_run = new_run
        self.next_batch = next_batch
        self.metrics = metrics
        self.queued = queued
        self.switch = Go4RiskSwitch() if adaptive else None
        self.states = tuple(states) or (StateSpec("*", StateKind.STAR),)
        self.u = u
        self.sliding = sliding
        self.rule: PartitionRule = rule or MostTuplesRule()
        self.holders: dict[tuple, InputHolder] = {}
        self.router = HashPartitionRouter(keys, self._holder)
        self.statistics: dict[tuple, StateStatistics] = {}
        self.buffered: dict[tuple, int] = {}
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.done = False
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._push_loop, name="matchsql-push", daemon=True)

    def _holder(self, key: tuple) -> InputHolder:
        holder = self.holders[key] = InputHolder(key)
        self.statistics[key] = StateStatistics(self.states)
        return holder

    # -- push thread --------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def _push_loop(self) -> None:
        try:
            while not self.stop.is_set():
                batch = self.next_batch()
                if batch is None:
                    break
                queued = self.queued()
                with self.cond:
                    for _ in self.router.route(batch):
                        pass  # holders produce no output
                    sample_routed(self.metrics, batch.num_rows, self._held(), queued)
                    pressure = self._pressure()
                    self.cond.notify_all()
                if self.switch is not None:
                    while not self.switch.after_push(pressure, timeout=WAIT_S):
                        if self.stop.is_set():
                            return
        except BaseException as exc:  # handed to the query thread, which raises it
            self.error = exc
        finally:
            with self.cond:
                self.done = True
                self.cond.notify_all()

    # -- shared, under self.cond ------------------------------------------

    def _held(self) -> int:
        return sum(h.unprocessed for h in self.holders.values()) + sum(self.buffered.values())

    def _pressure(self) -> Pressure:
        views = (PartitionView(key, h.routed, h.unprocessed,
                               self.statistics[key].r_bound(0, self.u, self.sliding))
                 for key, h in self.holders.items())
        return self.rule.pressure(views)

    def _take(self) -> tuple[tuple, pa.RecordBatch] | None:
        for key, holder in self.holders.items():
            if holder.batches:
                batch = holder.batches.popleft()
                return key, batch
        return None

    # -- query thread -------------------------------------------------------

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Match what was pushed until the push thread ends; then finish every run."""
        runs: dict[tuple, PartitionRun] = {}
        while True:
            with self.cond:
                item = self._take()
                while item is None and not self.done:
                    if self.switch is not None:
                        # Catches a push thread that suspended on a stale pressure.
                        self.switch.after_process(self._pressure())
                    self.cond.wait(WAIT_S)
                    item = self._take()
                if item is None:
                    break
            key, batch = item
            run = runs.get(key)
            if run is None:
                run = runs[key] = self.new_run(key)
            out = run.feed(batch)
            with self.cond:
                holder = self.holders[key]
                holder.unprocessed -= batch.num_rows
                self.buffered[key] = int(run.buffered_rows) if hasattr(run, "buffered_rows") \
                    else 0
                stats = self.statistics[key]
                stats.windows += batch.num_rows
                stats.matches += sum(b.num_rows for b in out)
                pressure = self._pressure()
            if self.switch is not None:
                self.switch.after_process(pressure)
            yield from out
        if self.error is not None:
            raise self.error
        for run in runs.values():
            yield from run.finish()

    def close(self) -> None:
        """Stop and join the push thread (it ends within about ``WAIT_S`` plus one read)."""
        self.stop.set()
        if self.switch is not None:
            self.switch.close()
            self.metrics.switches = self.switch.switches
        with self.cond:
            self.cond.notify_all()
        if self.thread.is_alive():
            self.thread.join(JOIN_S)

