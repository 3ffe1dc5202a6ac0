"""Per-query input-handling metrics, the columns of the thesis' appendix tables.

Mem is the number of tuples held in InputHolders and Queue the number of
tuples waiting in the live store; both are sampled whenever a tuple is
routed, so their averages are per routed tuple, as in the thesis. Latency is
the mean time from a tuple's enqueue to its first selection by a matcher.
Time is measured by the caller's clock (monotonic seconds) so tests can feed
exact values.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class InputMetrics:
    """Accumulates samples during a query; :meth:`row` gives the thesis' columns."""

    mem_samples: int = 0
    mem_total: int = 0
    max_mem: int = 0
    queue_total: int = 0
    max_queue: int = 0
    results: int = 0  # matches reported
    records: int = 0  # tuples read from the stream
    latency_total: float = 0.0
    latency_count: int = 0
    switches: int = 0
    #: What switching cost (push and adaptive input): the matchers' time waiting
    #: for input while the stream was open, the push thread's time suspended, and
    #: its wake-up delays summed (from a resume to the thread running again).
    idle_s: float = 0.0
    suspended_s: float = 0.0
    wake_s: float = 0.0
    #: Adaptive input: tuples the query thread read and matched itself, as pull does,
    #: while the switch held push suspended (the rest went through the InputHolders).
    pulled: int = 0
    #: The Go4Risk U in force at the end, how often ``adaptive_u = 'auto'`` moved it (or
    #: the unit of ``R``), and the unit's halvings in force at the end.
    u: int = 0
    u_changes: int = 0
    unit_shrink: int = 0
    started: float | None = None
    finished: float | None = None
    _selected: set[int] = field(default_factory=set, repr=False)

    def start(self, now: float) -> None:
        self.started = now

    def finish(self, now: float) -> None:
        self.finished = now

    def routed(self, held: int, queued: int, tuples: int = 1) -> None:
        """``tuples`` tuples were routed, all seeing the same held and queued counts.

        Sampling per tuple; a batch is recorded in one call because the counts
        only change between batches anyway.
        """
        if tuples <= 0:
            return
        self.records += tuples
        self.mem_samples += tuples
        self.mem_total += held * tuples
        self.max_mem = max(self.max_mem, held)
        self.queue_total += queued * tuples
        self.max_queue = max(self.max_queue, queued)

    def selected(self, seq: int, enqueued: float, now: float) -> None:
        """A matcher evaluated tuple ``seq`` for the first time (later evaluations don't count)."""
        if seq in self._selected:
            return
        self._selected.add(seq)
        self.latency_total += now - enqueued
        self.latency_count += 1

    def selected_batch(self, rows: int, enqueue_sum_ns: int, now_ns: int) -> None:
        """``rows`` tuples were selected by a matcher for the first time at ``now_ns``.

        ``enqueue_sum_ns`` is the sum of their enqueue instants (monotonic ns,
        see :attr:`LiveReader.last_enqueue_sum_ns`), so the batch adds
        ``rows * now_ns - enqueue_sum_ns`` nanoseconds of latency in one step.
        """
        if rows <= 0:
            return
        self.latency_total += (rows * now_ns - enqueue_sum_ns) / 1e9
        self.latency_count += rows

    def matched(self, count: int = 1) -> None:
        self.results += count

    @property
    def elapsed(self) -> float:
        if self.started is None or self.finished is None:
            return 0.0
        return self.finished - self.started

    def row(self) -> dict[str, float | int]:
        """The appendix columns plus the number of mode switches."""
        samples = self.mem_samples or 1
        elapsed = self.elapsed
        return {
            "avg_mem": self.mem_total / samples,
            "max_mem": self.max_mem,
            "avg_queue": self.queue_total / samples,
            "max_queue": self.max_queue,
            "result": self.results,
            "time": elapsed,
            "throughput": self.records / elapsed if elapsed > 0 else 0.0,
            "records": self.records,
            "latency": self.latency_total / self.latency_count if self.latency_count else 0.0,
            "switches": self.switches,
            "idle_s": self.idle_s,
            "suspended_s": self.suspended_s,
            "wake_ms": 1000 * self.wake_s / max(1, self.switches // 2),
            "pulled": self.pulled,
            "u": self.u,
            "u_changes": self.u_changes,
            "unit_shrink": self.unit_shrink,
        }
