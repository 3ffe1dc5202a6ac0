"""``adaptive_u = 'auto'``: the controller that moves U to keep Avg Mem under a budget."""

from __future__ import annotations

import pytest

from matchsql.execution.adaptive.auto_u import MAX_AUTO_U, MAX_SHRINK, PERIOD_S, AutoU


class Metrics:
    """The running totals InputMetrics keeps, fed one period at a time."""

    def __init__(self, controller: AutoU) -> None:
        self.controller = controller
        self.total = self.samples = 0
        self.now = 0.0

    def periods(self, means: list[float], rows: int = 1000) -> list[int]:
        """One period per mean (``rows`` routed tuples each); U after each."""
        out = []
        for mean in means:
            self.total += round(mean * rows)
            self.samples += rows
            self.now += PERIOD_S
            out.append(self.controller.update(self.total, self.samples, self.now))
        return out


def test_u_rises_under_half_the_budget_and_halves_over_it() -> None:
    auto = AutoU(10_000, 0.0)
    metrics = Metrics(auto)
    assert metrics.periods([100, 100, 100, 4_000]) == [1, 3, 7, 15]
    # Between half the budget and the budget U holds still: no oscillation there.
    assert metrics.periods([6_000, 9_000], 1) == [15, 15]
    assert metrics.periods([12_000, 12_000, 12_000, 12_000]) == [7, 3, 1, 0]
    assert auto.changes == 8 and auto.shrink == 0


def test_below_u_0_the_unit_halves_and_comes_back_first() -> None:
    auto = AutoU(1_000, 0.0)
    metrics = Metrics(auto)
    assert metrics.periods([5_000] * 3) == [0, 0, 0]
    assert auto.shrink == 3  # U = 0 held more than the budget: the unit of R halves
    assert metrics.periods([5_000] * (MAX_SHRINK + 2)) == [0] * (MAX_SHRINK + 2)
    assert auto.shrink == MAX_SHRINK
    # Under half the budget: the halvings are undone before U rises again.
    assert metrics.periods([100] * (MAX_SHRINK + 2)) == [0] * MAX_SHRINK + [1, 3]
    assert auto.shrink == 0
    assert auto.changes == MAX_SHRINK + MAX_SHRINK + 2


def test_the_average_is_over_the_last_period_only() -> None:
    auto = AutoU(1_000, 0.0)
    # A first period far over the budget (the unit halves), then periods under half
    # of it: their own means decide, not the run's, so the halving is undone and U rises.
    metrics = Metrics(auto)
    assert metrics.periods([50_000]) == [0] and auto.shrink == 1
    assert metrics.periods([100, 100]) == [0, 1] and auto.shrink == 0


def test_no_decision_before_a_period_has_passed_or_without_new_samples() -> None:
    auto = AutoU(1_000, 0.0)
    assert auto.update(10, 100, PERIOD_S / 2) == 0
    assert auto.update(10, 0, PERIOD_S * 2) == 0  # nothing routed: nothing to learn
    assert auto.update(10, 100, PERIOD_S * 3) == 1


def test_without_a_budget_u_climbs_to_the_top_of_the_grid() -> None:
    auto = AutoU(0, 0.0)
    assert Metrics(auto).periods([1e9] * 8)[-1] == MAX_AUTO_U


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError):
        AutoU(-1, 0.0)
