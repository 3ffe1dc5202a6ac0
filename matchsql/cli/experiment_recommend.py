"""``matchsql experiment --recommend``: which input mode, U and rule to use, in one line.

The runs (one per setting, a second for the top candidates) are made by
:mod:`matchsql.cli.experiment`; this module judges them, from results rows
alone, so the rule can be tested on rows made up for it:

* ``--memory-budget N``: the highest throughput among the settings whose Avg
  Mem stays under N tuples (ties: less memory); if none does, the one that
  holds the fewest tuples, saying so.
* Otherwise, when some settings keep up with the rate
  (:func:`matchsql.cli.experiment_stats.falls_behind`): the one among them
  that holds the fewest tuples (Avg Mem). Below saturation every setting
  keeps up, and pull, holding next to nothing, is usually the answer.
* When none keeps up: among the settings within 5 % of the best throughput,
  the one that holds the fewest tuples. Above saturation memory is what the
  settings trade for throughput, and a few percent of throughput is within
  the noise of one short run.

Ties on memory go to the lower latency, then to the earlier setting (pull,
push, then adaptive by U). A setting's figures are the medians of its runs;
it keeps up when at least half of its runs did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from matchsql.cli.experiment_plots import series_label
from matchsql.cli.experiment_stats import falls_behind, format_rate, number

THROUGHPUT_TOLERANCE = 0.05
SECOND_RUNS = 3  # top candidates measured twice


@dataclass(frozen=True)
class Setting:
    """An input mode with its U and rule (adaptive only)."""

    mode: str
    u: int | str | None = None
    rule: str | None = None

    @property
    def label(self) -> str:
        return series_label(self.mode, self.u, self.rule)

    @property
    def settings(self) -> str:
        """As ``matchsql -s`` takes them: ``input_mode=adaptive adaptive_u=2 ...``."""
        words = [f"input_mode={self.mode}"]
        if self.mode == "adaptive":
            words += [f"adaptive_u={self.u}", f"adaptive_rule={self.rule}"]
        return " ".join(words)


def candidate_settings(
    modes: Sequence[str], us: Sequence[int | str], rules: Sequence[str]
) -> list[Setting]:
    """Every setting ``--recommend`` measures, in tie-break order."""
    settings: list[Setting] = []
    for mode in modes:
        if mode == "adaptive":
            settings += [Setting(mode, u, rule) for u in us for rule in rules]
        else:
            settings.append(Setting(mode))
    return settings


def setting_of(row: dict) -> Setting:
    """The setting a results row measured."""
    if row["mode"] != "adaptive":
        return Setting(str(row["mode"]))
    u = row.get("u", "")
    u = int(u) if str(u).isdigit() else str(u)
    return Setting("adaptive", u, str(row.get("rule") or "") or None)


@dataclass(frozen=True)
class Summary:
    """A setting's runs: medians, and whether it keeps up."""

    setting: Setting
    avg_mem: float
    throughput: float
    latency: float
    keeps_up: bool
    runs: int


def summarise(rows: Iterable[dict]) -> list[Summary]:
    """One summary per setting with a finished run, in the rows' order of settings."""
    groups: dict[Setting, list[dict]] = {}
    for row in rows:
        if row.get("status", "ok") == "ok":
            groups.setdefault(setting_of(row), []).append(row)
    return [_summary(setting, runs) for setting, runs in groups.items()]


def unfinished(rows: Iterable[dict]) -> list[Setting]:
    """The settings none of whose runs finished (a time-out, an error): they keep up with
    nothing."""
    finished = {setting_of(r) for r in rows if r.get("status", "ok") == "ok"}
    return list(dict.fromkeys(s for s in map(setting_of, rows) if s not in finished))


def _summary(setting: Setting, runs: list[dict]) -> Summary:
    def median(column: str) -> float:
        values = [v for v in (number(r.get(column)) for r in runs) if v is not None]
        return float(np.median(values)) if values else 0.0

    kept = sum(falls_behind(r) is None for r in runs)
    return Summary(
        setting,
        median("avg_mem"),
        median("throughput"),
        median("latency"),
        2 * kept >= len(runs),
        len(runs),
    )


@dataclass(frozen=True)
class Recommendation:
    """The pick, why, and every summary ranked (the pick first)."""

    best: Summary
    reason: str
    ranked: list[Summary]


def recommend(
    summaries: Sequence[Summary],
    *,
    memory_budget: float | None = None,
    tolerance: float = THROUGHPUT_TOLERANCE,
    failed: int = 0,
) -> Recommendation:
    """Apply the module's rule to ``summaries`` (at least one); ``failed`` settings
    had no finished run, and count as settings that do not keep up."""
    if not summaries:
        raise ValueError("no setting finished a run")
    if memory_budget is not None:
        return _within_budget(summaries, memory_budget)
    return _keeping_up(summaries, tolerance, failed)


def _keys(
    summaries: Sequence[Summary],
) -> tuple[Callable[[Summary], tuple], Callable[[Summary], tuple]]:
    """Sort keys: fewest tuples held first, and highest throughput first (with the ties)."""
    order = {s.setting: i for i, s in enumerate(summaries)}

    def lean(s: Summary) -> tuple:
        return s.avg_mem, s.latency, order[s.setting]

    def fast(s: Summary) -> tuple:
        return -s.throughput, s.avg_mem, s.latency, order[s.setting]

    return lean, fast


def _within_budget(summaries: Sequence[Summary], budget: float) -> Recommendation:
    lean, fast = _keys(summaries)
    fits = [s for s in summaries if s.avg_mem <= budget]
    if fits:
        reason = (
            f"the highest throughput among the settings whose Avg Mem stays under "
            f"{budget:,.0f} tuples"
        )
        return _ranked(fits, summaries, fast, fast, reason)
    reason = f"no setting's Avg Mem stays under {budget:,.0f} tuples; this one holds the fewest"
    return _ranked(summaries, summaries, lean, lean, reason)


def _keeping_up(summaries: Sequence[Summary], tolerance: float, failed: int) -> Recommendation:
    lean, fast = _keys(summaries)
    keeping = [s for s in summaries if s.keeps_up]
    if len(keeping) == len(summaries) and not failed:
        reason = "below saturation every setting keeps up and this one holds the fewest tuples"
        return _ranked(keeping, summaries, lean, lean, reason)
    if keeping:
        reason = (
            f"{len(keeping)} of {len(summaries) + failed} settings keep up with the "
            f"input rate and this one holds the fewest tuples of them"
        )
        return _ranked(keeping, summaries, lean, fast, reason)
    best = max(s.throughput for s in summaries)
    near = [s for s in summaries if s.throughput >= (1 - tolerance) * best]
    reason = (
        f"no setting keeps up; this one holds the fewest tuples among those within "
        f"{tolerance:.0%} of the best throughput ({format_rate(best)} tuples/s)"
    )
    return _ranked(near, summaries, lean, fast, reason)


def _ranked(
    chosen: Sequence[Summary], everyone: Sequence[Summary], key, rest_key, reason: str
) -> Recommendation:
    """The chosen group sorted by ``key``, then the others by ``rest_key``."""
    first = sorted(chosen, key=key)
    rest = sorted((s for s in everyone if s not in first), key=rest_key)
    return Recommendation(first[0], reason, first + rest)


def second_round(recommendation: Recommendation, count: int = SECOND_RUNS) -> list[Setting]:
    """The settings measured a second time: the top of the first round's ranking."""
    return [s.setting for s in recommendation.ranked[:count]]


def recommendation_line(query: str, rate: float, shape: str, recommendation: Recommendation) -> str:
    """The one line ``--recommend`` prints."""
    best = recommendation.best
    memory = f"{best.avg_mem:.1f}" if best.avg_mem < 10 else f"{best.avg_mem:,.0f}"
    latency = best.latency * 1000
    latency_text = f"{latency:.3g}" if latency < 100 else f"{latency:,.0f}"
    return (
        f"{query} at {format_rate(rate)} tuples/s, {shape}: {best.setting.settings} "
        f"(Avg Mem {memory} tuples, throughput {format_rate(best.throughput)} tuples/s, "
        f"latency {latency_text} ms) because {recommendation.reason}"
    )
