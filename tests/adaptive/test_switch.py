"""Go4Risk switch: suspend above R_Bound, resume at R <= 1, and the partition rules."""

from __future__ import annotations

import threading
from collections import deque

from matchsql.execution.adaptive.switch import (
    Go4RiskSwitch,
    Mode,
    MostTuplesRule,
    PartitionView,
    PerPartitionRule,
    Pressure,
    TotalPressureRule,
)


def test_suspend_and_resume_thresholds() -> None:
    switch = Go4RiskSwitch(min_suspend_s=0)
    assert switch.after_push(Pressure(3, 3))  # R == R_Bound: keep pushing
    assert switch.mode is Mode.PUSH and switch.switches == 0
    # R = 4 > 3: switch to pull; with no resume the wait times out.
    assert not switch.after_push(Pressure(4, 3), timeout=0.01)
    assert switch.mode is Mode.PULL and switch.switches == 1
    switch.after_process(Pressure(2, 3))  # 2 > 1: stay in pull (no toggling at R_Bound)
    assert switch.mode is Mode.PULL
    switch.after_process(Pressure(1, 3))
    assert switch.mode is Mode.PUSH and switch.switches == 2
    switch.after_process(Pressure(0, 3))  # already pushing: no extra switch
    assert switch.switches == 2


def test_close_releases_a_suspended_push_thread() -> None:
    switch = Go4RiskSwitch(min_suspend_s=0)
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(switch.after_push(Pressure(9, 1))))
    thread.start()
    thread.join(0.05)
    assert thread.is_alive()
    switch.close()
    thread.join(2)
    assert result == [False]


def test_fake_fsm_keeps_holder_bounded_and_loses_nothing() -> None:
    """A push thread and a slow matcher share a holder; R never exceeds R_Bound + 1."""
    switch = Go4RiskSwitch(min_suspend_s=0)
    holder: deque[int] = deque()
    lock = threading.Lock()
    r_bound, n = 3, 300
    max_seen = 0
    done = threading.Event()

    def push() -> None:
        nonlocal max_seen
        for i in range(n):
            with lock:
                holder.append(i)
                r = len(holder)
                max_seen = max(max_seen, r)
            if not switch.after_push(Pressure(r, r_bound)):
                break
        done.set()

    thread = threading.Thread(target=push)
    thread.start()
    processed: list[int] = []
    while not (done.is_set() and not holder):
        with lock:
            tup = holder.popleft() if holder else None
            r = len(holder)
        if tup is not None:
            processed.append(tup)
        switch.after_process(Pressure(r, r_bound))
    thread.join(2)
    switch.close()
    assert processed == list(range(n))
    assert max_seen <= r_bound + 1  # the tuple that crossed the bound, then suspended
    assert switch.switches % 2 == 0  # every suspension was resumed


def views(*rows: tuple[str, int, int, int]) -> list[PartitionView]:
    return [PartitionView(*row) for row in rows]


def test_most_tuples_rule_watches_the_busiest_partition() -> None:
    rule = MostTuplesRule()
    watched = rule.pressure(views(("a", 5, 1, 3), ("b", 9, 7, 2), ("c", 9, 0, 1)))
    assert (watched.unprocessed, watched.r_bound) == (7, 2)
    assert watched.scale == 23 / 9 and watched.room == 0  # already over its bound
    assert rule.pressure([]) == Pressure(0, 0)


def test_room_scales_the_watched_bound_by_its_share() -> None:
    # The watched partition gets three quarters of the tuples and has 3 free
    # places: about 4 more tuples over all partitions until it reaches its bound.
    watched = MostTuplesRule().pressure(views(("a", 10, 1, 4), ("b", 30, 2, 5)))
    assert (watched.unprocessed, watched.r_bound) == (2, 5)
    assert watched.scale == watched.per_holder == 40 / 30
    assert watched.room == 4
    quarter = Pressure(1, 4, scale=4)  # a quarter of the tuples reach it
    assert quarter.room == 12
    total = TotalPressureRule().pressure(views(("a", 10, 1, 4), ("b", 30, 2, 5)))
    assert (total.room, total.per_holder) == (6, 2)


def test_uniform_partitions_fool_the_busiest_rule_but_not_the_total() -> None:
    # Nearly even routing: partition 0 got one tuple more and is drained, the
    # other nine each hold 5 unprocessed tuples against a bound of 3. The
    # thesis rule watches partition 0 and keeps pushing; the total (46 > 30)
    # suspends push, and it resumes only at one tuple per holder on average.
    even = views(("p0", 11, 1, 3), *[(f"p{k}", 10, 5, 3) for k in range(1, 10)])
    busiest = MostTuplesRule().pressure(even)
    assert (busiest.unprocessed, busiest.r_bound) == (1, 3)
    assert busiest.unprocessed <= busiest.r_bound
    total = TotalPressureRule().pressure(even)
    assert total == Pressure(46, 30, resume_at=10, per_holder=10)
    switch = Go4RiskSwitch(min_suspend_s=0)
    assert not switch.after_push(total, timeout=0.01)
    switch.after_process(Pressure(10, 30, resume_at=10))
    assert switch.mode is Mode.PUSH


def test_per_partition_rule_suspends_when_any_holder_is_over_its_own_bound() -> None:
    # The same nearly even routing: each of p1..p9 is over its own bound (5 > 3), so
    # push suspends although the busiest partition is drained; it resumes when the
    # holders hold at most one unit each on average.
    even = views(("p0", 11, 1, 3), *[(f"p{k}", 10, 5, 3) for k in range(1, 10)])
    own = PerPartitionRule().pressure(even)
    assert (own.unprocessed, own.r_bound, own.drained, own.resume_at) == (5, 3, 46, 10)
    assert own.room == 0 and own.per_holder == 10
    switch = Go4RiskSwitch(min_suspend_s=0)
    assert not switch.after_push(own, timeout=0.01)
    one_over = views(("p0", 11, 0, 3), *[(f"p{k}", 10, 2 if k < 3 else 1, 3) for k in range(1, 10)])
    switch.after_process(PerPartitionRule().pressure(one_over))  # 11 units in 10 holders
    assert switch.mode is Mode.PULL
    one_over[1] = PartitionView("p1", 10, 1, 3)
    switch.after_process(PerPartitionRule().pressure(one_over))  # 10 in 10: drained
    assert switch.mode is Mode.PUSH


def test_per_partition_room_is_the_tightest_holders_scaled_by_its_share() -> None:
    # a: 2 places left and a quarter of the tuples (8 routed tuples in all until it is
    # full); b: 4 places left and three quarters (about 5.3): b is the tightest.
    own = PerPartitionRule().pressure(views(("a", 10, 2, 4), ("b", 30, 1, 5), ("c", 0, 0, 1)))
    assert (own.unprocessed, own.r_bound) == (1, 5)
    assert own.room == 4 * 40 / 30
    assert PerPartitionRule().pressure([]) == Pressure(0, 0)
    assert PerPartitionRule().pressure(views(("z", 0, 0, 2))) == Pressure(0, 0)


def test_the_switch_counts_its_suspended_time_and_wake_up_delay() -> None:
    """The counters that tell what switching costs: time suspended, resume-to-running delay."""
    switch = Go4RiskSwitch(min_suspend_s=0)
    resumed = threading.Event()

    def push() -> None:
        switch.after_push(Pressure(9, 1))  # suspends until the matcher resumes it
        resumed.set()

    thread = threading.Thread(target=push)
    thread.start()
    thread.join(0.1)
    assert thread.is_alive() and switch.mode is Mode.PULL
    switch.after_process(Pressure(0, 1))
    assert resumed.wait(2)
    thread.join(2)
    assert switch.switches == 2
    assert switch.suspended_s >= 0.1  # it waited at least the 0.1 s before the resume
    assert 0 <= switch.wake_s < switch.suspended_s


def test_push_resumes_only_once_the_store_backlog_fits_in_its_room() -> None:
    """At saturation the matchers drain R at every call while the store stays full:
    resuming then would push one slice and suspend again."""
    switch = Go4RiskSwitch(min_suspend_s=0)
    assert not switch.after_push(Pressure(4, 3), timeout=0.001)
    switch.after_process(Pressure(0, 3, backlog=4))  # room (3 - 0) x 1 = 3 < 4
    assert switch.mode is Mode.PULL and switch.switches == 1
    switch.after_process(Pressure(0, 3, backlog=3))
    assert switch.mode is Mode.PUSH and switch.switches == 2
    # The room is over all partitions: ``scale`` routed tuples add one to the watched R.
    assert Pressure(0, 3, scale=10, backlog=30).resumes
    assert not Pressure(0, 3, scale=10, backlog=31).resumes
    assert not Pressure(2, 3, backlog=0).resumes  # R > 1: the thesis' rule still holds


def test_a_suspension_lasts_at_least_the_minimum_dwell() -> None:
    """Drained at once, push still stays suspended for ``min_suspend_s``: cheap tuples
    filled and drained the holders within milliseconds, and the switch flipped hundreds
    of times a second."""
    switch = Go4RiskSwitch(min_suspend_s=0.2)
    assert not switch.after_push(Pressure(4, 3), timeout=0.001)
    switch.after_process(Pressure(0, 3))  # drained, but suspended only just now
    assert switch.mode is Mode.PULL and switch.switches == 1
    assert not switch.after_push(Pressure(0, 3), timeout=0.25)  # waits out the dwell
    switch.after_process(Pressure(0, 3))
    assert switch.mode is Mode.PUSH and switch.switches == 2
    assert switch.suspended_s >= 0.2
