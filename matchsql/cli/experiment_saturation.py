"""Where pull stops keeping up: the saturation search, and the rate grid around it.

Below the saturation point every input mode keeps up and they differ in
nothing that matters; the modes (and U) only differ around and above it. So
``matchsql experiment`` first measures, per query, the highest rate at which
pull keeps up (:func:`matchsql.cli.experiment_stats.falls_behind` says what
keeping up means) and places its default grid there.

The search: short pull runs (a second of tuples, at least 5000),
doubling from 50k tuples/s until a run falls behind (or halving until one
keeps up, when the first does not), then bisecting the bracket [kept up,
fell behind] geometrically four times. Four steps narrow a factor of two to
2^(1/16), about 4.5 %; rates are rounded to three significant digits. The
saturation rate is the highest rate that kept up. Single short runs are
noisy, so the result is an estimate: it places the grid, the grid's
repeated runs are the measurement.

Noise only ever makes a run look slower (a busy machine, the first tenths
of a second of a run), so a rate counts as fallen behind only when a second
run at it falls behind too. With one run of half a second per rate, Q4's
search stopped at 1.18M tuples/s on this project's 2-core machine, where
the grid's two-second pull runs kept up at 1.89M: its runs at 1.6M
delivered 0.70-0.90 of the rate, one-second runs 0.81-0.95.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from matchsql.cli.experiment_stats import falls_behind, format_rate, nice_rate

SEARCH_START = 50_000.0
SEARCH_FLOOR = 1_000.0  # below this, the query is called saturated at the floor
SEARCH_CAP = 20_000_000.0  # above this, no doubling further (the producer tops out first)
SEARCH_STEPS = 4
SEARCH_SECONDS = 1.0
SEARCH_MIN_ROWS = 5_000
#: The default grid, as multiples of the saturation rate.
GRID_FACTORS = (0.5, 0.8, 1.0, 1.25, 1.6)


class SearchFailed(Exception):
    """A search run failed (not: fell behind); the message is the run's error."""


@dataclass(frozen=True)
class Saturation:
    """The outcome of a search.

    ``rate`` is the saturation rate: the highest rate that kept up
    (``kept``), or the floor when none did. ``fell`` is the lowest rate that
    fell behind (None: pull kept up to the cap) and ``why`` the reason it
    did (``throughput``, ``latency`` or ``producer``).
    """

    rate: float
    kept: float | None
    fell: float | None
    why: str
    trace: list[tuple[float, str]] = field(default_factory=list)  # (rate, "" or reason)

    def describe(self) -> str:
        """One phrase for titles and notes: where pull saturates."""
        if self.fell is None:
            return f"pull keeps up to at least {format_rate(self.rate)} tuples/s"
        if self.kept is None:
            return f"pull falls behind already at {format_rate(self.rate)} tuples/s"
        if self.why == "producer":
            return f"the producer tops out near {format_rate(self.rate)} tuples/s"
        return f"pull saturates at {format_rate(self.rate)} tuples/s"


def search_rows(rate: float) -> int:
    """Tuples of one search run at ``rate``."""
    return max(SEARCH_MIN_ROWS, round(rate * SEARCH_SECONDS))


def find_saturation(
    measure: Callable[[float], dict],
    *,
    start: float = SEARCH_START,
    floor: float = SEARCH_FLOOR,
    cap: float = SEARCH_CAP,
    steps: int = SEARCH_STEPS,
) -> Saturation:
    """Search the saturation rate with ``measure(rate) -> results row`` (a pull run).

    Raises :class:`SearchFailed` when a run fails outright: a query error is
    not a rate limit, and halving on it would only repeat it.
    """

    trace: list[tuple[float, str]] = []

    def run(rate: float) -> str:
        row = measure(rate)
        why = falls_behind(row) or ""
        if why == "failed":
            raise SearchFailed(str(row.get("error") or "the run failed"))
        trace.append((rate, why))
        return why

    def behind(rate: float) -> str:
        """Why ``rate`` fell behind in two runs ("": one of them kept up)."""
        return run(rate) and run(rate)

    kept, fell, why = _bracket(behind, nice_rate(start), floor, cap)
    if kept is None or fell is None:
        rate = kept if kept is not None else fell
        assert rate is not None  # _bracket finds a rate kept or one fallen behind
        return Saturation(rate, kept, fell, why, trace)
    for _ in range(steps):
        middle = nice_rate(math.sqrt(kept * fell))
        if not kept < middle < fell:
            break
        reason = behind(middle)
        if reason:
            fell, why = middle, reason
        else:
            kept = middle
    return Saturation(kept, kept, fell, why, trace)


def _bracket(
    behind: Callable[[float], str], start: float, floor: float, cap: float
) -> tuple[float | None, float | None, str]:
    """(highest rate kept, lowest rate fallen behind, why) by doubling or halving."""
    why = behind(start)
    if why:
        fell = start
        while fell / 2 >= floor:
            reason = behind(nice_rate(fell / 2))
            if not reason:
                return nice_rate(fell / 2), fell, why
            fell, why = nice_rate(fell / 2), reason
        return None, fell, why
    kept = start
    while kept * 2 <= cap:
        why = behind(nice_rate(kept * 2))
        if why:
            return kept, nice_rate(kept * 2), why
        kept = nice_rate(kept * 2)
    return kept, None, ""


def grid_around(saturation: float, factors: Sequence[float] = GRID_FACTORS) -> list[float]:
    """The default rates of a query: ``factors`` times its saturation rate, rounded."""
    return sorted({nice_rate(saturation * f) for f in factors})


def saturation_note(rows: Sequence[dict], saturation: float | None = None) -> str:
    """Where pull saturates, for a plot's title: the measured rate, else what pull's runs show.

    Without a search (rates given with ``--rates``) the note brackets the
    point from the grid's pull runs: a rate counts as kept up when at least
    half of its runs kept up. Rows without the columns to judge them by are left out.
    """

    if saturation:
        return f"pull saturates at {format_rate(saturation)} tuples/s"
    verdicts: dict[float, list[bool]] = {}
    for row in rows:
        why = falls_behind(row) if row.get("mode") == "pull" else "failed"
        if why != "failed":  # failed, or without the columns to judge it by
            verdicts.setdefault(float(row["rate"]), []).append(why is None)
    if not verdicts:
        return ""
    kept = [rate for rate, votes in verdicts.items() if 2 * sum(votes) >= len(votes)]
    fell = sorted(set(verdicts) - set(kept))
    if not fell:
        return f"pull keeps up at every rate run (up to {format_rate(max(kept))} tuples/s)"
    if not kept:
        return f"pull falls behind at every rate run (from {format_rate(min(fell))} tuples/s)"
    above = [rate for rate in fell if rate > max(kept)]
    if not above:
        return (
            f"pull keeps up at up to {format_rate(max(kept))} tuples/s, but not at every rate below"
        )
    return f"pull saturates between {format_rate(max(kept))} and {format_rate(min(above))} tuples/s"
