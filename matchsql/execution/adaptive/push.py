"""Push and adaptive input for continuous queries (thesis chapters 3-4; see docs/architecture.md).

In pull mode the query thread reads the live store whenever it has nothing
left to match. Push mode moves reading into a *push thread*: it reads the
store as tuples arrive and routes each batch, split by partition key, into
one :class:`InputHolder` per partition (a queue of unprocessed batches). The
query thread then only runs matchers over what was pushed, so store latency
and matching overlap, at the cost of holding unprocessed tuples in memory.

Adaptive mode gates the push thread with :class:`Go4RiskSwitch`: it suspends
while the watched ``R`` (unprocessed tuples, chosen by a partition rule)
exceeds ``R_Bound``, and the query thread resumes it once ``R <= 1``.

Granularity. The thesis decides after every tuple. Here a matcher call has a
fixed cost of about 150 us (Arrow buffers, column-wise DEFINE terms, the
kernel call), so a compiled matcher fed 64 rows at a time runs at a tenth of
its speed on large batches, and a switch that suspends after every few
tuples ping-pongs two threads through the GIL (a woken thread may wait up
to the interpreter's 5 ms switch interval). So ``R`` and ``R_Bound`` are
compared in units (:data:`UNIT_ROWS` tuples shared by all InputHolders): the
thesis' bound, computed per tuple from the statistics, says how many *units*
an InputHolder should hold. The push thread forwards slices - as many tuples as the rule predicts
fit below the bound (``Pressure.room``), at least one unit per InputHolder -
and asks the switch after each slice. A batch's tuples count as processed
(``R`` drops) when the query thread takes them from the holder, so the push
thread reads the next slice while the matcher works on this one.

The matchers count the Go4Risk statistics per tuple inside the compiled
kernel (selectivity per state, windows, matches, the open window's current
state; see :meth:`CompiledMatcher.observe`), in full for their first windows and
then in a sample of their calls, so ``R_Bound`` - and with it ``U`` - follow the
data. Only tuples fed from the holders are counted: what the query thread reads
for itself while push is suspended is matched as pull does (:class:`CountingGate`).
A matcher that cannot count (the reference path) is described coarsely: every
tuple opens a window, every output row is a match, and the current state is the
start state. A run processes everything its
holder holds at once, as a thesis FSM drains its InputHolder; the query
thread serves the fullest holder first (the biggest matcher call, and the
fastest drop of ``R``), unless one has waited :data:`MAX_WAIT_S`.

Where the runs live is the :class:`PushRuns` behind the holders: in this
thread (:class:`LocalRuns`, one holder per call, as above) or in worker
processes (``SET workers = N``: the workers' stream router), which take every
ready holder at once so that the workers match them in parallel while the
push thread keeps reading. Either way the push thread is the only reader of
the stream, the holders and the switch are the same, and each partition's
run sees its tuples in arrival order.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias

import pyarrow as pa

from matchsql.engine.matcher import CountingGate, Matcher, StateCounts
from matchsql.engine.states import StateKind, StateSpec
from matchsql.execution.adaptive.auto_u import AutoU
from matchsql.execution.adaptive.metrics import InputMetrics
from matchsql.execution.adaptive.statistics import Sliding, StateStatistics
from matchsql.execution.adaptive.switch import (
    Go4RiskSwitch,
    Mode,
    MostTuplesRule,
    PartitionRule,
    PartitionView,
    PerPartitionRule,
    Pressure,
    TotalPressureRule,
)
from matchsql.execution.router.hashed import HashPartitionRouter
from matchsql.execution.router.protocol import LiveRouter

WAIT_S = 0.05  # longest sleep of either thread between checks for cancellation and races
JOIN_S = 5.0
#: Tuples per unit of ``R`` and ``R_Bound`` in adaptive mode, shared by all
#: InputHolders (see the module docstring): each of ``P`` holders counts in
#: units of ``UNIT_ROWS / P`` tuples, but at least :data:`MIN_UNIT_ROWS`.
#: Measured with ``matchsql experiment`` at 3M tuples/s: on Q3 (one
#: partition) units of 1024 tuples cost 2,100 suspend/resume switches per 3M
#: tuples and 55-60% of push's throughput, 4096 cut that to 540 switches and
#: kept up with push while holding 20k tuples (push: 1.5M). With 50
#: partitions, units of 82 tuples per holder (4096 / 50) made the matcher
#: calls so small that Q2 fell from 2.3M to 1.0M tuples/s; a compiled matcher
#: fed 1024 rows at a time runs at about 75% of its speed on 64k-row batches
#: (256 rows: 40%, 64 rows: 10%), hence the floor.
UNIT_ROWS = 4096
MIN_UNIT_ROWS = 1024
#: The smallest unit per holder that ``adaptive_u = 'auto'`` halves down to under a
#: tight memory budget: matcher calls of 256 rows run at about 40 % of their speed on
#: large batches; with 50 partitions, units of 16 tuples cut Q2 to 90k tuples/s.
MIN_SHRUNK_ROWS = 256
#: The query thread drains the fullest InputHolder first (bigger matcher
#: calls, R falls fastest) unless a holder has waited this long.
MAX_WAIT_S = 0.05

RULES: dict[str, Callable[[], PartitionRule]] = {
    "most_tuples": MostTuplesRule,
    "total_pressure": TotalPressureRule,
    "per_partition": PerPartitionRule,
}

#: What ``next_batch`` yields: a batch with the sum over its rows of their
#: enqueue times (``time.monotonic_ns``), or a bare batch (enqueue unknown).
Pushed: TypeAlias = tuple[pa.RecordBatch, int] | pa.RecordBatch


@dataclass
class Fed:
    """What one partition's run made of the tuples it was fed."""

    key: tuple
    out: list[pa.RecordBatch]
    counts: StateCounts | None  # its Go4Risk counts, when it counts per tuple
    buffered: int  # rows the run keeps (its InputHolder's matched part)


class PushRuns(Protocol):
    """Where pushed tuples are matched: the long-lived runs of a query's partitions."""

    #: Take every ready InputHolder in one call (runs matched elsewhere, in parallel).
    take_all: bool

    def observe(self, states: Sequence[StateSpec], label_state: Sequence[int]) -> None:
        """Ask runs to count Go4Risk statistics per tuple (adaptive mode)."""

    def feed(self, pieces: list[tuple[tuple, pa.RecordBatch]]) -> list[Fed]:
        """Feed each ``(key, rows)`` to its key's run (made on first sight)."""

    def route(self, batch: pa.RecordBatch, more: bool = False) -> Iterator[pa.RecordBatch]:
        """Split a batch by key and feed it to the runs, as pull mode does (no holders)."""

    def finish(self) -> Iterator[pa.RecordBatch]:
        """End of stream: every run finishes."""


class WorkerRuns(LiveRouter, PushRuns, Protocol):
    """A live router whose runs live elsewhere (worker processes), which is its own
    :class:`PushRuns`: pushed tuples reach the same runs as routed ones."""


class LocalRuns:
    """The runs of a :class:`HashPartitionRouter`, matched in the query thread.

    Runs the router already holds (a hybrid query's history) go on with the
    live tuples; runs that never see one are finished with the rest.
    """

    take_all = False

    def __init__(self, router: HashPartitionRouter[Matcher]) -> None:
        self.router = router
        self._observing: tuple[Sequence[StateSpec], Sequence[int]] | None = None
        self._counting: dict[tuple, bool] = {}
        # On for tuples fed from the holders, off for batches routed as pull does.
        self._gate = CountingGate()

    def observe(self, states: Sequence[StateSpec], label_state: Sequence[int]) -> None:
        self._observing = (states, label_state)

    def feed(self, pieces: list[tuple[tuple, pa.RecordBatch]]) -> list[Fed]:
        fed = []
        runs = self.router.runs
        self._gate.on = True
        for key, batch in pieces:
            run = runs.get(key)
            if run is None:
                run = runs[key] = self.router.new_run(key)
            counting = self._counting.get(key)
            if counting is None:
                counting = self._counting[key] = bool(
                    self._observing is not None and run.observe(*self._observing, self._gate)
                )
            out = run.feed(batch)
            fed.append(Fed(key, out, run.state_counts() if counting else None, run.buffered_rows))
        return fed

    def route(self, batch: pa.RecordBatch, more: bool = False) -> Iterator[pa.RecordBatch]:
        self._gate.on = False
        return self.router.route(batch, more)

    def finish(self) -> Iterator[pa.RecordBatch]:
        yield from self.router.finish()


class InputHolder:
    """One partition's unprocessed batches; fed by the push thread under the shared lock.

    It has the ``feed``/``finish`` shape of a matcher run so that the ordinary
    :class:`HashPartitionRouter` can split batches into holders. Each entry
    keeps its rows' enqueue-time sum for the latency metric.
    """

    def __init__(self, key: tuple, owner: PushInput) -> None:
        self.key = key
        self.owner = owner
        self.since = 0.0  # when the holder last became non-empty
        self.batches: deque[tuple[pa.RecordBatch, int]] = deque()
        self.unprocessed = 0  # R of this partition
        self.routed = 0  # tuples ever routed here, for the partition rule

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if not self.batches:
            self.since = time.monotonic()
            self.owner.ready[self.key] = None
        rows = batch.num_rows
        self.batches.append((batch, round(self.owner.enqueue_mean * rows)))
        self.unprocessed += rows
        self.routed += rows
        return []

    def finish(self) -> list[pa.RecordBatch]:
        return []

    def take(self) -> tuple[pa.RecordBatch, int]:
        """Everything the holder holds, as one batch and its enqueue-time sum."""
        entries = list(self.batches)
        self.batches.clear()
        enqueued = sum(e for _, e in entries)
        if len(entries) == 1:
            return entries[0][0], enqueued
        return pa.concat_batches([b for b, _ in entries]), enqueued


class PushInput:
    """A push thread filling InputHolders and the query-side loop that drains them."""

    def __init__(
        self,
        keys: list[str],
        new_run: Callable[[tuple], Matcher],
        next_batch: Callable[[], Pushed | None],
        *,
        metrics: InputMetrics,
        queued: Callable[[], int] = lambda: 0,
        adaptive: bool = False,
        states: Sequence[StateSpec] = (),
        label_state: Sequence[int] = (),
        u: int | str = 0,
        sliding: Sliding = Sliding.NEXT_ROW,
        rule: PartitionRule | str | None = None,
        runs: PushRuns | None = None,
        memory_budget: int = 0,
    ) -> None:
        """``runs``: where the tuples are matched (default: ``new_run``'s runs, here);
        ``u = "auto"``: U chosen online under ``memory_budget`` tuples (:class:`AutoU`)."""
        self.runs: PushRuns = (
            runs if runs is not None else LocalRuns(HashPartitionRouter(keys, new_run))
        )
        self.next_batch = next_batch
        self.metrics = metrics
        self.queued = queued
        self.switch = Go4RiskSwitch() if adaptive else None
        self.states = tuple(states) or (StateSpec("*", StateKind.STAR),)
        self.label_state = tuple(label_state) if states else ()
        self.auto = AutoU(memory_budget, time.monotonic()) if u == "auto" else None
        self.u = 0 if isinstance(u, str) else u
        self.sliding = sliding
        if isinstance(rule, str):
            rule = RULES[rule]()
        self.rule: PartitionRule = rule or MostTuplesRule()
        self.holders: dict[tuple, InputHolder] = {}
        self.ready: dict[tuple, None] = {}  # keys whose holder has batches, oldest first
        self.enqueue_mean = 0.0  # of the batch being routed (read by the holders)
        self.router = HashPartitionRouter(keys, self._holder)
        self.statistics: dict[tuple, StateStatistics] = {}
        # R_Bound per partition, recomputed only when its statistics change:
        # the model works in exact fractions, too slow to redo per decision.
        self.bounds: dict[tuple, int] = {}
        self.buffered: dict[tuple, int] = {}
        self.taken = 0  # tuples taken from the holders and still being matched
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.done = False
        self.error: BaseException | None = None
        # The stream's reader: held by whichever thread forwards the next slice.
        self._reader = threading.Lock()
        self._rest: tuple[pa.RecordBatch, int, float] | None = None  # a batch's unrouted part
        self._pulled = False  # the last take was made while the push thread was suspended
        # A whole batch the query thread read for itself while push was suspended, with its
        # enqueue-time sum: matched straight through the runs' router, as pull matches.
        self._direct: tuple[pa.RecordBatch, int] | None = None
        self.pulled_rows = 0  # tuples matched that way
        self.thread = threading.Thread(target=self._push_loop, name="matchsql-push", daemon=True)

    def _holder(self, key: tuple) -> InputHolder:
        holder = self.holders[key] = InputHolder(key, self)
        stats = self.statistics[key] = StateStatistics(self.states)
        self.bounds[key] = self._bound(stats)
        return holder

    # -- push thread --------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def _push_loop(self) -> None:
        try:
            while not self.stop.is_set():
                with self._reader:
                    pressure = self._forward()
                if pressure is None:
                    break
                if self.switch is not None:
                    while not self.switch.after_push(pressure, timeout=WAIT_S):
                        if self.stop.is_set():
                            return
                        with self.cond:
                            pressure = self._pressure()
        except BaseException as exc:  # handed to the query thread, which raises it
            self.error = exc
        finally:
            with self.cond:
                self.done = True
                self.cond.notify_all()

    def _forward(self, pulled: bool = False) -> Pressure | None:
        """Under ``self._reader``: route the stream's next slice (a whole batch, or when
        adaptive as much as the rule predicts fits below the bound); the pressure after
        it, or None at the end of the stream. ``pulled``: the query thread reads for
        itself while push is suspended: a whole batch, left in :attr:`_direct` for it to
        match rather than routed to the holders.

        The rest of a batch waits in ``self._rest``, not in a thread's locals, so that
        whichever thread forwards next (the push thread, or the query thread pulling
        while it would wait) goes on from there and each partition keeps its order.
        """
        if self._rest is None:
            item = self.next_batch()
            if item is None:
                return None
            batch, enqueued = (
                item if isinstance(item, tuple) else (item, time.monotonic_ns() * item.num_rows)
            )
            if batch.num_rows == 0:
                with self.cond:
                    return self._pressure()
            self._rest = (batch, 0, enqueued / batch.num_rows)
        batch, offset, mean = self._rest
        rows = batch.num_rows
        size = rows - offset
        if self.switch is not None and not pulled:
            with self.cond:
                pressure = self._pressure()
                unit = self._unit()
            least = unit * pressure.per_holder
            size = min(size, int(max(least, pressure.room * unit)))
        part = batch.slice(offset, size) if size < rows else batch
        offset += size
        self._rest = (batch, offset, mean) if offset < rows else None
        # Tuples of this batch not yet forwarded still wait: they count as queued.
        queued = self.queued() + rows - offset
        with self.cond:
            if pulled:
                self._direct = (part, round(mean * size))
            else:
                self.enqueue_mean = mean
                for _ in self.router.route(part):
                    pass  # holders produce no output
            self.metrics.routed(self._held(), queued, size)
            pressure = self._pressure()
            self.cond.notify_all()
        return pressure

    def _pull_while_idle(self) -> bool:
        """Query thread, under ``self.cond``, with nothing to match while push runs: forward
        a slice into the holders itself when tuples wait and the push thread is not
        reading (adaptive mode). True if it did.

        This is the thesis' pull mode: a drained matcher reads the store itself rather
        than wait for the push thread it has just resumed. Without it the matchers
        waited out every wake-up of the push thread (0.3 ms idle, 2.5 ms under load,
        about 500 times a second at saturation), most of the time with small slices.
        """
        if self._rest is None and self.queued() <= 0:
            return False
        if not self._reader.acquire(blocking=False):
            return False
        try:
            return self._forward() is not None
        finally:
            self._reader.release()

    def _await_store(self) -> tuple[pa.RecordBatch, int] | None:
        """Query thread, not under ``self.cond``, push suspended and nothing to match: read
        the store's next batch as pull mode does (blocking until one comes); the batch to
        match, or None (the push thread is reading, or the stream ended: then the loop
        ends).

        While the switch holds push suspended the matcher reads a whole batch and
        matches it straight through the runs' router, not through the holders. Slices
        sized by the bound exist to keep a pushing thread below it; read by the matcher
        itself they only cut its calls small (with Zipf-skewed keys, where the watched
        holder's share scales the slice, to tens of tuples per partition: Q4 at 3M
        tuples/s ran at two thirds of pull's throughput), and whole batches passed
        through the holders and their statistics still ran 5-15 % below pull. Waiting
        on the lock instead, for a push thread suspended for at least
        :data:`~matchsql.execution.adaptive.switch.MIN_SUSPEND_S`, would leave a matcher
        that caught up with the stream asleep for up to :data:`WAIT_S`.
        """
        if not self._reader.acquire(blocking=False):
            return None
        try:
            waiting = self._rest is None and self.queued() <= 0  # idle until a batch comes
            waited = time.monotonic()
            ended = self._forward(pulled=True) is None
            if waiting:
                self.metrics.idle_s += time.monotonic() - waited
        finally:
            self._reader.release()
        with self.cond:
            if ended:
                # The end of the stream, read here while push is suspended: the push
                # thread would only find it once resumed (close() releases it).
                self.done = True
            direct, self._direct = self._direct, None
        return direct

    # -- shared, under self.cond ------------------------------------------

    def _bound(self, stats: StateStatistics) -> int:
        """A holder's ``R_Bound`` now: its statistics' current state, ``self.u``."""
        return stats.r_bound(stats.current, self.u, self.sliding)

    def _unit(self) -> float:
        """Tuples per unit of one InputHolder's ``R`` (see :data:`UNIT_ROWS`), halved as
        often as ``adaptive_u = 'auto'`` asks below U = 0 (:attr:`AutoU.shrink`)."""
        unit = max(MIN_UNIT_ROWS, UNIT_ROWS / max(1, len(self.holders)))
        if self.auto is None or not self.auto.shrink:
            return unit
        return max(MIN_SHRUNK_ROWS, unit / (1 << self.auto.shrink))

    def _held(self) -> int:
        """Tuples in InputHolders, being matched, or kept by the matchers."""
        return (
            sum(h.unprocessed for h in self.holders.values())
            + self.taken
            + sum(self.buffered.values())
        )

    def _pressure(self) -> Pressure:
        bounds = self.bounds
        unit = self._unit()
        pressure = self.rule.pressure(
            PartitionView(key, holder.routed, holder.unprocessed / unit, bounds[key])
            for key, holder in self.holders.items()
        )
        rest = self._rest
        backlog = self.queued() + (rest[0].num_rows - rest[1] if rest is not None else 0)
        # ``room`` is in units of ``R``; the backlog in tuples.
        return dataclasses.replace(pressure, backlog=math.ceil(backlog / unit))

    def _take(self) -> list[tuple[tuple, pa.RecordBatch, int]]:
        """What the query thread matches next: every ready holder's content when the runs
        take all at once or the push thread is suspended (:attr:`_pulled`), else one
        holder's (round robin over partitions, the fullest first unless the oldest has
        waited :data:`MAX_WAIT_S`).

        The tuples leave ``R`` now: the matcher is about to process them, and a pushing
        thread may refill the holder meanwhile. A suspended one stays so until they are
        matched: the matcher reads as pull mode does, taking every holder in one call
        and one decision of the switch, with no push thread refilling behind it.
        """
        if not self.ready:
            return []
        self._pulled = self.switch is not None and self.switch.mode is Mode.PULL
        if self.runs.take_all or self._pulled:
            keys = list(self.ready)
        else:
            oldest = next(iter(self.ready))
            key = oldest
            if time.monotonic() - self.holders[oldest].since < MAX_WAIT_S:
                key = max(self.ready, key=lambda k: self.holders[k].unprocessed)
            keys = [key]
        items = []
        for key in keys:
            del self.ready[key]
            holder = self.holders[key]
            batch, enqueued = holder.take()
            holder.unprocessed -= batch.num_rows
            self.taken += batch.num_rows
            items.append((key, batch, enqueued))
        return items

    # -- query thread -------------------------------------------------------

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Match what was pushed until the push thread ends; then finish every run."""
        if self.switch is not None and self.label_state:
            self.runs.observe(self.states, self.label_state)
        while True:
            await_store = False
            with self.cond:
                items = self._take()
                while not items and not self.done:
                    if self.switch is not None:
                        # Catches a push thread that suspended on a stale pressure.
                        self.switch.after_process(self._pressure())
                        if self.switch.mode is Mode.PULL:
                            await_store = True
                            break
                        if self._pull_while_idle():
                            items = self._take()
                            continue
                    waited = time.monotonic()
                    self.cond.wait(WAIT_S)
                    self.metrics.idle_s += time.monotonic() - waited
                    items = self._take()
                if not await_store:
                    if not items:
                        break
                    pressure = self._pressure()
            if await_store:
                direct = self._await_store()
                if direct is not None:
                    batch, enqueued = direct
                    self.pulled_rows += batch.num_rows
                    self.metrics.selected_batch(batch.num_rows, enqueued, time.monotonic_ns())
                    yield from self.runs.route(batch, more=self.queued() > 0)
                continue
            if self.switch is not None and not self._pulled:
                self.switch.after_process(pressure)
            now = time.monotonic_ns()
            for _, batch, enqueued in items:
                self.metrics.selected_batch(batch.num_rows, enqueued, now)
            fed = self.runs.feed([(key, batch) for key, batch, _ in items])
            with self.cond:
                self.taken -= sum(batch.num_rows for _, batch, _ in items)
                rows = {key: batch.num_rows for key, batch, _ in items}
                for result in fed:
                    key = result.key
                    self.buffered[key] = result.buffered
                    stats = self.statistics[key]
                    if result.counts is not None:
                        stats.load(*result.counts)
                    else:
                        stats.windows += rows[key]
                        stats.matches += sum(b.num_rows for b in result.out)
                    self.bounds[key] = self._bound(stats)
                if self.auto is not None:
                    self._steer_u()
                pressure = self._pressure()
            if self.switch is not None:
                self.switch.after_process(pressure)
            for result in fed:
                yield from result.out
        if self.error is not None:
            raise self.error
        yield from self.runs.finish()

    def _steer_u(self) -> None:
        """Under ``self.cond``: the U the controller wants now; every bound follows it."""
        assert self.auto is not None
        u = self.auto.update(self.metrics.mem_total, self.metrics.mem_samples, time.monotonic())
        if u != self.u:
            self.u = u
            for key, stats in self.statistics.items():
                self.bounds[key] = self._bound(stats)

    def close(self) -> None:
        """Stop and join the push thread (it ends within about ``WAIT_S`` plus one read)."""
        self.stop.set()
        self.metrics.u = self.u
        self.metrics.pulled = self.pulled_rows
        if self.auto is not None:
            self.metrics.u_changes = self.auto.changes
            self.metrics.unit_shrink = self.auto.shrink
        if self.switch is not None:
            self.switch.close()
            self.metrics.switches = self.switch.switches
            self.metrics.suspended_s = self.switch.suspended_s
            self.metrics.wake_s = self.switch.wake_s
        with self.cond:
            self.cond.notify_all()
        if self.thread.is_alive():
            self.thread.join(JOIN_S)
