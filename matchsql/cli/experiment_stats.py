"""Reading ``matchsql experiment`` runs: does a run keep up, and a point's median and spread.

Shared by the saturation search, the plots and ``--recommend``, and light on
purpose (numpy only): the plots redraw from a results.csv alone, so every
judgement here is made from a results row's columns.

**Keeping up.** A run keeps up with its input rate when all of these hold:

* it finished (``status`` ok);
* the producer reached the rate: its achieved rate is at least 95 % of the
  target (otherwise the machine could not feed the stream that fast and the
  run says nothing about the query at that rate);
* the query's throughput, not counting up to 25 ms of start-up (its clock
  starts when it opens the stream, a little before the first tuple is
  written), is at least 95 % of the producer's achieved rate: a query that
  falls behind finishes after the producer, by the backlog it built up;
* its mean latency stays low: at most 100 ms and at most a tenth of the
  run's duration. This catches a setting that holds tuples back (adaptive
  with a small U at a low rate) although it drains everything by the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

KEEP_UP_SHARE = 0.95
START_SLACK = 0.025  # seconds of the query's clock before the first tuple arrives
LATENCY_CAP = 0.1  # seconds
LATENCY_SHARE = 0.1  # of the run's duration


def number(value: object) -> float | None:
    """A CSV cell or a metric as a float; None when empty or not a number."""
    try:
        return float(value)  # type: ignore[arg-type]  # anything: what float refuses is None
    except (TypeError, ValueError):
        return None


def falls_behind(row: dict) -> str | None:
    """Why the run of ``row`` did not keep up with its rate, or None when it did.

    The reasons: ``failed``, ``producer`` (the producer fell short of the
    rate), ``throughput``, ``latency``; see the module's docstring.
    """

    if row.get("status", "ok") != "ok":
        return "failed"
    rate, achieved = number(row.get("rate")), number(row.get("producer_rate"))
    produced, elapsed = number(row.get("produced")), number(row.get("time"))
    records, latency = number(row.get("records")), number(row.get("latency"))
    if (
        rate is None
        or achieved is None
        or produced is None
        or elapsed is None
        or records is None
        or not achieved
    ):
        return "failed"
    if achieved < KEEP_UP_SHARE * rate:
        return "producer"
    duration = produced / achieved
    if records < KEEP_UP_SHARE * achieved * max(elapsed - START_SLACK, 1e-9):
        return "throughput"
    if latency is not None and latency > min(LATENCY_CAP, LATENCY_SHARE * duration):
        return "latency"
    return None


def keeps_up(row: dict) -> bool:
    return falls_behind(row) is None


@dataclass(frozen=True)
class Spread:
    """A point's runs: the median (the line of a plot) and min..max (its band)."""

    median: float
    low: float
    high: float
    count: int


def spread(values: Iterable[float]) -> Spread:
    """Median and min-max of ``values`` (at least one).

    Min-max, not the interquartile range: with the default three repetitions
    the quartiles are interpolations between the same three values.
    """

    data = np.asarray(list(values), dtype=float)
    if not data.size:
        raise ValueError("no values to summarise")
    return Spread(float(np.median(data)), float(data.min()), float(data.max()), int(data.size))


def series(
    rows: Iterable[dict], column: str, label: Callable[[dict], str], factor: float = 1.0
) -> dict[str, list[tuple[float, Spread]]]:
    """``{label: [(rate, spread of column * factor), ...] by rate}`` over the ok runs.

    Runs with an empty ``column`` are left out; a point with none left is dropped.
    """

    points: dict[str, dict[float, list[float]]] = {}
    for row in rows:
        rate, value = number(row.get("rate")), number(row.get(column))
        if row.get("status", "ok") != "ok" or rate is None or value is None:
            continue
        points.setdefault(label(row), {}).setdefault(rate, []).append(value * factor)
    return {
        name: [(rate, spread(values)) for rate, values in sorted(by_rate.items())]
        for name, by_rate in points.items()
    }


def format_rate(rate: float) -> str:
    """``2870000`` -> ``2.87M``, ``50000`` -> ``50k``: short, and read back by ``--rates``."""
    rate = nice_rate(rate)
    for factor, suffix in ((1e6, "M"), (1e3, "k")):
        if rate >= factor:
            return f"{rate / factor:g}{suffix}"
    return f"{rate:g}"


def nice_rate(rate: float) -> float:
    """``rate`` to three significant digits: grid rates that read well in CSVs and titles."""
    return float(f"{rate:.3g}")
