"""``matchsql experiment``'s judgement without a stream: keeping up, the saturation search,
the grid around it, medians and bands, and the ``--recommend`` rule on made-up rows."""

from __future__ import annotations

import math

import pytest

from matchsql.cli.experiment_recommend import (
    Setting,
    candidate_settings,
    recommend,
    recommendation_line,
    second_round,
    summarise,
    unfinished,
)
from matchsql.cli.experiment_saturation import (
    GRID_FACTORS,
    SearchFailed,
    find_saturation,
    grid_around,
    saturation_note,
)
from matchsql.cli.experiment_stats import falls_behind, format_rate, nice_rate, series, spread

SECONDS = 0.5


def run_row(
    rate: float,
    *,
    served: float | None = None,
    producer: float | None = None,
    latency: float = 0.001,
    mode: str = "pull",
    u: object = "",
    rule: str = "",
    avg_mem: float = 4.0,
    status: str = "ok",
) -> dict:
    """A results row of a run at ``rate`` whose query drains ``served`` tuples/s at most
    and whose producer reaches ``producer`` tuples/s at most (default: the rate)."""
    achieved = min(rate, producer or rate)
    produced = round(achieved * SECONDS)
    drained = min(achieved, served or achieved)
    elapsed = produced / drained + 0.012  # the query opens the stream a little before
    return {
        "query": "Q1",
        "mode": mode,
        "u": u,
        "rule": rule,
        "rate": rate,
        "avg_mem": avg_mem,
        "time": elapsed,
        "records": produced,
        "throughput": produced / elapsed,
        "latency": latency,
        "produced": produced,
        "producer_rate": achieved,
        "status": status,
        "error": "" if status == "ok" else "x",
    }


def engine(capacity: float, producer: float | None = None):
    """A fake measure: pull keeps up to ``capacity`` tuples/s, then falls behind."""
    calls: list[float] = []

    def measure(rate: float) -> dict:
        calls.append(rate)
        behind = rate > capacity
        return run_row(
            rate, served=capacity, producer=producer, latency=0.002 + (0.3 if behind else 0.0)
        )

    return measure, calls


# -- keeping up ---------------------------------------------------------------------------


def test_a_run_keeps_up_only_when_throughput_latency_and_producer_all_do() -> None:
    assert falls_behind(run_row(100_000)) is None
    assert falls_behind(run_row(100_000, served=80_000)) == "throughput"
    assert falls_behind(run_row(100_000, served=97_000)) is None  # within 5 %
    assert falls_behind(run_row(100_000, latency=0.2)) == "latency"
    assert falls_behind(run_row(100_000, latency=0.06)) == "latency"  # a tenth of 0.5 s
    assert falls_behind(run_row(100_000, producer=70_000)) == "producer"
    assert falls_behind(run_row(100_000, status="failed")) == "failed"
    assert falls_behind({"rate": "100", "status": "ok"}) == "failed"  # no metrics


# -- the saturation search -------------------------------------------------------------


@pytest.mark.parametrize("capacity", [130_000, 1_300_000, 2_900_000, 7_770_000, 21_000])
def test_the_search_finds_where_a_monotone_engine_stops_keeping_up(capacity) -> None:
    measure, calls = engine(capacity)
    found = find_saturation(measure)
    assert found.rate <= capacity < found.fell
    assert found.fell / found.rate <= 2 ** (1 / 16) * 1.01  # four bisections of a doubling
    assert found.why == "latency" and found.kept == found.rate
    doublings = math.ceil(abs(math.log2(capacity / 50_000)))
    assert len(calls) == len(found.trace)
    # A rate falls behind only in two runs; one that keeps up is run once.
    rates = set(calls)
    assert len(rates) <= 1 + doublings + 4
    assert all(calls.count(rate) == (2 if rate > capacity else 1) for rate in rates)
    assert "pull saturates at" in found.describe()


def test_a_rate_falls_behind_only_when_a_second_run_does_too() -> None:
    """Noise only slows a run: one slow run at a rate the engine keeps up with (the
    first run at each rate above 300k here) must not end the doubling there."""
    seen: set[float] = set()

    def measure(rate: float) -> dict:
        slow = rate > 300_000 and rate not in seen
        seen.add(rate)
        return run_row(rate, served=rate * 0.7 if slow or rate > 1_000_000 else None)

    found = find_saturation(measure)
    assert 950_000 <= found.rate <= 1_000_000 < found.fell
    assert found.why == "throughput"


def test_the_search_stops_at_the_cap_and_the_floor() -> None:
    measure, calls = engine(math.inf)
    found = find_saturation(measure, cap=1_000_000)
    assert found.fell is None and found.rate == 800_000 and max(calls) <= 1_000_000
    assert "at least 800k" in found.describe()
    measure, _ = engine(100)
    found = find_saturation(measure, floor=1_000)
    assert found.kept is None and found.rate < 2_000
    assert "falls behind already" in found.describe()


def test_the_search_says_when_the_producer_is_the_limit() -> None:
    measure, _ = engine(math.inf, producer=600_000)
    found = find_saturation(measure)
    # The producer counts as reaching a rate within 5 % of it.
    assert 600_000 <= found.rate <= 600_000 / 0.95 and found.why == "producer"
    assert "producer tops out" in found.describe()


def test_a_failed_search_run_stops_the_search() -> None:
    def broken(rate: float) -> dict:
        return {**run_row(rate, status="failed"), "error": "Binder Error: no such stream"}

    with pytest.raises(SearchFailed, match="no such stream"):
        find_saturation(broken)


def test_the_grid_surrounds_the_saturation_rate() -> None:
    rates = grid_around(2_870_000)
    assert len(rates) == len(GRID_FACTORS) and rates == sorted(rates)
    assert 2_870_000 in rates
    assert rates[0] < 2_870_000 < rates[-1]
    for rate, factor in zip(rates, sorted(GRID_FACTORS)):
        assert rate == pytest.approx(2_870_000 * factor, rel=0.005)
    assert grid_around(1000, (1, 1.001)) == [1000.0]  # rounding merges equal rates


def test_rates_read_well() -> None:
    assert [format_rate(r) for r in (2_873_000, 50_000, 999_600, 12.34)] == [
        "2.87M",
        "50k",
        "1M",
        "12.3",
    ]
    assert nice_rate(1_234_567) == 1_230_000


# -- medians and bands -----------------------------------------------------------------


def test_a_point_is_the_median_of_its_runs_with_the_min_max_band() -> None:
    rows = [
        run_row(r, avg_mem=m)
        for r, m in ((1000, 5.0), (1000, 1.0), (1000, 3.0), (2000, 8.0), (2000, 4.0))
    ]
    rows += [run_row(1000, avg_mem=99.0, status="failed"), {**run_row(2000), "avg_mem": ""}]
    lines = series(rows, "avg_mem", lambda row: row["mode"], factor=10)
    (r1, s1), (r2, s2) = lines["pull"]
    assert (r1, s1.median, s1.low, s1.high, s1.count) == (1000, 30.0, 10.0, 50.0, 3)
    assert (r2, s2.median, s2.count) == (2000, 60.0, 2)  # the empty cell is no run
    assert spread([7.0]).low == spread([7.0]).high == 7.0
    with pytest.raises(ValueError):
        spread([])


def test_the_title_note_says_where_pull_saturates() -> None:
    assert saturation_note([], 2_900_000) == "pull saturates at 2.9M tuples/s"
    rows = [run_row(r, served=150_000) for r in (100_000, 100_000, 200_000, 400_000)]
    assert saturation_note(rows) == "pull saturates between 100k and 200k tuples/s"
    assert "every rate run (up to 100k" in saturation_note(rows[:2])
    assert "falls behind at every rate" in saturation_note(rows[2:])
    assert saturation_note([run_row(1000, mode="push")]) == ""


# -- --recommend -----------------------------------------------------------------------


def setting_row(
    setting: Setting,
    *,
    mem: float,
    throughput: float = 100_000,
    latency: float = 0.001,
    rate: float = 100_000,
) -> dict:
    """A run of ``setting`` at ``rate`` draining ``throughput`` tuples/s."""
    return run_row(
        rate,
        served=throughput,
        latency=latency,
        mode=setting.mode,
        u="" if setting.u is None else setting.u,
        rule=setting.rule or "",
        avg_mem=mem,
    )


PULL, PUSH = Setting("pull"), Setting("push")
U2, U10 = Setting("adaptive", 2, "most_tuples"), Setting("adaptive", 10, "most_tuples")


def test_below_saturation_the_leanest_setting_that_keeps_up_wins() -> None:
    rows = [setting_row(PULL, mem=4), setting_row(PUSH, mem=500), setting_row(U2, mem=40)]
    chosen = recommend(summarise(rows))
    assert chosen.best.setting == PULL and "every setting keeps up" in chosen.reason
    assert [s.setting for s in chosen.ranked] == [PULL, U2, PUSH]
    # A failed setting keeps up with nothing: not "every" any more.
    failed = rows + [{**setting_row(U10, mem=1), "status": "failed"}]
    assert unfinished(failed) == [U10]
    chosen = recommend(summarise(failed), failed=len(unfinished(failed)))
    assert chosen.best.setting == PULL and "3 of 4 settings keep up" in chosen.reason


def test_only_settings_that_keep_up_are_picked_while_some_do() -> None:
    rows = [
        setting_row(PULL, mem=4, throughput=60_000),
        setting_row(PUSH, mem=500),
        setting_row(U2, mem=40),
        setting_row(U10, mem=200),
    ]
    chosen = recommend(summarise(rows))
    assert chosen.best.setting == U2, chosen  # pull holds less but falls behind
    assert "3 of 4 settings keep up" in chosen.reason
    assert chosen.ranked[-1].setting == PULL


def test_above_saturation_the_leanest_near_the_best_throughput_wins() -> None:
    rate = 3_000_000
    rows = [
        setting_row(PULL, mem=4, throughput=1_000_000, rate=rate),
        setting_row(PUSH, mem=9000, throughput=2_000_000, rate=rate),
        setting_row(U2, mem=3000, throughput=1_950_000, rate=rate),  # within 5 %
        setting_row(U10, mem=800, throughput=1_800_000, rate=rate),
    ]  # 10 % short
    chosen = recommend(summarise(rows))
    assert chosen.best.setting == U2
    assert "within 5% of the best throughput" in chosen.reason
    assert second_round(chosen) == [U2, PUSH, U10]
    assert recommend(summarise(rows), tolerance=0.15).best.setting == U10


def test_a_memory_budget_picks_the_fastest_setting_under_it() -> None:
    rate = 3_000_000
    rows = [
        setting_row(PULL, mem=4, throughput=1_000_000, rate=rate),
        setting_row(PUSH, mem=9000, throughput=2_000_000, rate=rate),
        setting_row(U2, mem=900, throughput=1_500_000, rate=rate),
        setting_row(U10, mem=1500, throughput=1_900_000, rate=rate),
    ]
    chosen = recommend(summarise(rows), memory_budget=1000)
    assert chosen.best.setting == U2 and "Avg Mem stays under 1,000 tuples" in chosen.reason
    assert recommend(summarise(rows), memory_budget=2000).best.setting == U10
    chosen = recommend(summarise(rows), memory_budget=1)
    assert chosen.best.setting == PULL and "no setting's Avg Mem stays under" in chosen.reason


def test_a_settings_figures_are_the_medians_of_its_runs() -> None:
    rows = [setting_row(PULL, mem=4, throughput=t) for t in (100_000, 40_000, 100_000)]
    (pull,) = summarise(rows)
    assert pull.runs == 3 and pull.keeps_up  # two of three kept up
    assert pull.throughput == pytest.approx(summarise(rows[:1])[0].throughput)
    assert not summarise(rows[1:2])[0].keeps_up


def test_settings_and_the_printed_line() -> None:
    settings = candidate_settings(
        ["pull", "push", "adaptive"], [0, "auto"], ["most_tuples", "total_pressure"]
    )
    assert settings[:2] == [PULL, PUSH] and len(settings) == 2 + 2 * 2
    assert Setting("adaptive", "auto", "total_pressure") in settings
    assert U2.settings == "input_mode=adaptive adaptive_u=2 adaptive_rule=most_tuples"
    chosen = recommend(summarise([setting_row(U2, mem=1234.5, latency=0.0031)]))
    line = recommendation_line("Q3", 1_200_000, "50 symbols uniform", chosen)
    assert line.startswith(
        "Q3 at 1.2M tuples/s, 50 symbols uniform: input_mode=adaptive "
        "adaptive_u=2 adaptive_rule=most_tuples (Avg Mem 1,234 tuples, "
    )
    assert "latency 3.1 ms) because below saturation" in line and "\n" not in line
