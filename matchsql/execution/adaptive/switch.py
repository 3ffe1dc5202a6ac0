"""The Go4Risk adaptive switch (DejaVu thesis, sections 4.4-4.6, Listing 4.1).

The push thread asks the switch after each forwarded tuple whether pushing
still pays off; when the watched unprocessed count ``R`` exceeds ``R_Bound``
it switches to pull and suspends on a condition variable. The matcher
reports ``R`` after each tuple evaluation and resumes the push thread once
``R <= 1`` - not ``R <= R_Bound``, so that the two sides do not toggle on
every tuple. The switch only decides and counts; reading the store and
routing stay with the caller.

That hysteresis alone thrashes at saturation. A holder's tuples leave ``R``
when the matcher takes them, so every matcher call found ``R`` drained and
resumed the push thread, which forwarded a slice or two, found ``R`` over its
bound and suspended again: 250-500 suspensions a second, each holding the
holders to a bound's worth of tuples, so the matcher was fed calls of a few
hundred tuples per partition and fell to 0.6x of pull's throughput (Q4 on a
Zipf stream at 3M tuples/s). So push resumes only once the store's backlog
also fits in what push may forward (:attr:`Pressure.room`): while the store
holds more, the matchers are behind by more than ``R_Bound`` allows, pushing
does not pay, and the matcher reads the store itself as pull mode does, a
whole batch at a time. Below saturation the backlog stays under the room and
the thesis' rule decides alone.

With many partitions one decision serves all InputHolders, so a rule chooses
what ``R`` and ``R_Bound`` mean: the thesis watches the partition that
receives most tuples (section 4.4.2); :class:`TotalPressureRule` is our
alternative for evenly spread partitions, where every holder gets few tuples
and no single one ever looks full while their sum grows with the number of
partitions; :class:`PerPartitionRule` lets each holder decide on its own
statistics (the thesis' "switch per FSM", chapter 6).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class Mode(Enum):
    PUSH = "push"
    PULL = "pull"


@dataclass(frozen=True)
class PartitionView:
    """What a rule may know of one partition's run: tuples routed, ``R`` and ``R_Bound``."""

    key: object
    routed: int
    unprocessed: float  # in the unit of the holders' bounds
    r_bound: int


@dataclass(frozen=True)
class Pressure:
    """The switch's inputs: the watched ``R``, its bound, and the resume level.

    The push thread forwards slices, not single tuples, so the rule also says
    how routing reaches what it watches: ``scale`` routed tuples (over all
    partitions) add one to the watched ``R``, and ``per_holder`` routed tuples
    add one to an average InputHolder. :attr:`room` is then how many tuples
    may be forwarded before ``R`` reaches the bound.
    """

    unprocessed: float
    r_bound: float
    resume_at: float = 1
    scale: float = 1.0
    per_holder: float = 1.0
    #: What is compared with :attr:`resume_at` to resume push (default: the watched ``R``).
    drained: float | None = None
    #: Tuples waiting in the store, not yet routed to any holder, in the unit of
    #: :attr:`room` (tuples over the unit of ``R``).
    backlog: int = 0

    @property
    def resumes(self) -> bool:
        """Whether the matchers drained enough for push to go on, and the store holds no
        more than push may forward (:attr:`room`): the damping in the module docstring."""
        level = self.unprocessed if self.drained is None else self.drained
        return level <= self.resume_at and self.backlog <= self.room

    @property
    def room(self) -> float:
        """Tuples to forward, over all partitions, until the watched ``R`` reaches its bound."""
        return max(0.0, self.r_bound - self.unprocessed) * self.scale


class PartitionRule(Protocol):
    def pressure(self, views: Iterable[PartitionView]) -> Pressure: ...


class MostTuplesRule:
    """Thesis section 4.4.2: watch the partition to which most tuples were routed.

    Ties go to the partition seen first, so the choice is deterministic.
    """

    def pressure(self, views: Iterable[PartitionView]) -> Pressure:
        best: PartitionView | None = None
        total = 0
        for view in views:
            total += view.routed
            if best is None or view.routed > best.routed:
                best = view
        if best is None:
            return Pressure(0, 0)
        scale = total / best.routed if best.routed else 1.0
        return Pressure(best.unprocessed, best.r_bound, scale=scale, per_holder=scale)


class TotalPressureRule:
    """Watch all holders at once: total ``R`` against the total of the bounds.

    Memory is shared by all InputHolders, so the sum is what a limit should
    see. Push resumes when the holders hold at most one unprocessed tuple
    each on average - the per-partition ``R <= 1`` of the thesis, summed.
    """

    def pressure(self, views: Iterable[PartitionView]) -> Pressure:
        unprocessed: float = 0
        bound = count = 0
        for view in views:
            unprocessed += view.unprocessed
            bound += view.r_bound
            count += 1
        return Pressure(unprocessed, bound, resume_at=max(1, count), per_holder=max(1, count))


class PerPartitionRule:
    """Each InputHolder makes the Go4Risk decision on its own statistics.

    A holder over its own ``R_Bound`` asks for pull, and the push thread suspends while
    any holder asks for it; it resumes once the holders are down to ``R <= 1`` on
    average, the thesis' per-holder resume level summed as in
    :class:`TotalPressureRule`. The push thread reads one store in arrival order, so it
    cannot go on for the holders that ask for data while holding back another's tuples;
    waiting for every holder to drain (the strictest reading) left the matchers idle
    behind the last full holder: Q4 at 3M tuples/s lost a third of its throughput. With tuples
    spread evenly, every holder's own bound is watched,
    where :class:`MostTuplesRule` watches one holder that looks no fuller than the rest.
    The room is that of the holder closest to its bound, scaled by its share of the
    routed tuples.
    """

    def pressure(self, views: Iterable[PartitionView]) -> Pressure:
        seen = list(views)
        total = sum(view.routed for view in seen)
        tightest: PartitionView | None = None
        tightest_room = 0.0
        held = 0.0
        for view in seen:
            held += view.unprocessed
            if not view.routed:
                continue
            room = (view.r_bound - view.unprocessed) * total / view.routed
            if tightest is None or room < tightest_room:
                tightest, tightest_room = view, room
        if tightest is None:
            return Pressure(0, 0)
        return Pressure(
            tightest.unprocessed,
            tightest.r_bound,
            drained=held,
            resume_at=len(seen),
            scale=total / tightest.routed,
            per_holder=len(seen),
        )


#: Push stays suspended at least this long once suspended. Where matching a tuple is
#: cheap (Q1 and Q3 below their saturation point) the holders passed their bounds and
#: drained again within milliseconds, and the switch flipped 250-760 times in a run of
#: two seconds; a suspension now lasts long enough for the query thread, reading the
#: store itself meanwhile, to match a few batches.
MIN_SUSPEND_S = 0.025


class Go4RiskSwitch:
    """Suspend/resume of the push thread with a condition variable (Listing 4.1)."""

    def __init__(self, min_suspend_s: float = MIN_SUSPEND_S) -> None:
        self._cond = threading.Condition()
        self._mode = Mode.PUSH
        self._closed = False
        self.min_suspend_s = min_suspend_s
        self._suspended_at = 0.0
        self.switches = 0  # push->pull and pull->push transitions, for the metrics
        # What the switching costs, for the metrics: the push thread's time
        # suspended, and its wake-up delay (from the resume to running again).
        self.suspended_s = 0.0
        self.wake_s = 0.0
        self._resumed_at = 0.0

    @property
    def mode(self) -> Mode:
        with self._cond:
            return self._mode

    def after_push(self, pressure: Pressure, timeout: float | None = None) -> bool:
        """Push thread, after forwarding a tuple: suspend while pushing does not pay off.

        Returns False once the switch is closed (the query ends), True when
        the thread may push the next tuple. ``timeout`` bounds one wait so that
        a caller can poll for cancellation; on timeout the mode stays pull and
        the call returns True only if push was resumed.
        """
        with self._cond:
            if self._closed:
                return False
            if self._mode is Mode.PUSH and pressure.unprocessed > pressure.r_bound:
                self._mode = Mode.PULL
                self.switches += 1
                self._suspended_at = time.monotonic()
            if self._mode is Mode.PULL:
                waited = time.monotonic()
                self._cond.wait_for(lambda: self._closed or self._mode is Mode.PUSH, timeout)
                now = time.monotonic()
                self.suspended_s += now - waited
                if self._mode is Mode.PUSH and self._resumed_at:
                    self.wake_s += max(0.0, now - self._resumed_at)
                    self._resumed_at = 0.0
            return not self._closed and self._mode is Mode.PUSH

    def after_process(self, pressure: Pressure) -> None:
        """Matcher, after evaluating a tuple: resume the push thread once ``R`` is low
        (and it has been suspended for :attr:`min_suspend_s`)."""
        with self._cond:
            if (
                self._mode is Mode.PULL
                and pressure.resumes
                and time.monotonic() - self._suspended_at >= self.min_suspend_s
            ):
                self._mode = Mode.PUSH
                self.switches += 1
                self._resumed_at = time.monotonic()
                self._cond.notify_all()

    def close(self) -> None:
        """End of the query: release a suspended push thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
