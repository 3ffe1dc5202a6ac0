"""Plots of ``matchsql experiment``: the thesis' figures 5.1-5.17 from results.csv rows.

For every query, one PNG per measure - memory (Avg Mem, tuples held in
InputHolders), throughput (tuples/s) and latency (ms) - against the input
rate, one line per mode (and U and rule for adaptive runs), so pull vs. push
(figs. 5.1-5.10), adaptive vs. both (5.11-5.16) and adaptive with varying U
(5.17) are all read from the same pictures. Failed runs are left out.

A point run several times (``--repeat``) is drawn as its median, with the
min-max of its runs as a shaded band: single runs are noisy, and two lines
whose bands overlap are not told apart by the experiment. Each title says
where pull saturates (the searched rate of the ``saturation`` column, else
what the pull runs show), and a dotted vertical line marks the searched rate.

Rates span decades (100k to 6M tuples/s), so the rate axis is logarithmic,
and so is the throughput axis (a rate too); memory goes logarithmic when it
spans two decades or more (push holds 1000x what pull holds). Latency is
recorded in seconds and drawn in milliseconds.

matplotlib runs with the Agg backend (no display needed); it is imported by
:func:`plot_results`, not with this module: the lazy import is the point
(``matchsql experiment --no-plots`` never loads it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from matchsql.cli.experiment_saturation import saturation_note
from matchsql.cli.experiment_stats import format_rate, number, series
from matchsql.storage.permissions import owner_only_file

#: file suffix -> (CSV column, y-axis label, title, factor from the CSV's unit to the axis')
MEASURES = {
    "memory": ("avg_mem", "Avg Mem (tuples in InputHolders)", "Memory usage", 1.0),
    "throughput": ("throughput", "Throughput (tuples/s)", "Performance", 1.0),
    "latency": ("latency", "Latency (ms)", "Latency", 1000.0),
}
#: Measures that are rates: always on a log axis, like the input rate.
RATE_MEASURES = frozenset({"throughput"})
_STYLE = {"pull": ("tab:blue", "o"), "push": ("tab:red", "s")}
_ADAPTIVE_COLOURS = (
    "tab:green",
    "tab:purple",
    "tab:orange",
    "tab:brown",
    "tab:olive",
    "tab:cyan",
    "tab:pink",
    "tab:gray",
)


def series_label(mode: str, u: object, rule: object) -> str:
    """The legend label of a run: its mode, with U and rule for adaptive runs."""
    if mode != "adaptive":
        return mode
    label = f"adaptive U={u}"
    return f"{label} ({rule})" if rule else label


def _log_note(scale: str) -> str:
    return ", log scale" if scale == "log" else ""


def _label(row: dict) -> str:
    return series_label(str(row["mode"]), row.get("u", ""), row.get("rule", ""))


def _saturation(rows: list[dict]) -> float | None:
    """The searched saturation rate the rows carry (an older results.csv has none)."""
    return next((v for v in (number(r.get("saturation")) for r in rows) if v), None)


def _rate_ticks(axes: Any, rates: list[float]) -> None:
    """Ticks at the rates run, labelled 1.45M: a grid around the saturation point spans
    a factor of three, where a log axis would label one power of ten or none."""
    if len(rates) > 12:
        return
    axes.set_xticks(rates, [format_rate(rate) for rate in rates])
    axes.set_xticks([], minor=True)


def plot_results(rows: Iterable[dict], out: Path | str) -> list[Path]:
    """Write ``QUERY_{memory,throughput,latency}.png`` into ``out``; the paths written."""
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg", force=True)
    pyplot = importlib.import_module("matplotlib.pyplot")

    out = Path(out)
    ok = [r for r in rows if r.get("status", "ok") == "ok" and number(r.get("rate"))]
    written: list[Path] = []
    for query in sorted({str(r["query"]) for r in ok}):
        mine = [r for r in ok if str(r["query"]) == query]
        for suffix in MEASURES:
            figure = measure_figure(pyplot, query, mine, suffix)
            path = out / f"{query}_{suffix}.png"
            figure.savefig(path, dpi=110)
            owner_only_file(str(path))
            pyplot.close(figure)
            written.append(path)
    return written


def measure_figure(pyplot: Any, query: str, rows: list[dict], suffix: str) -> Any:
    """The figure of one measure (a key of :data:`MEASURES`) of ``query``'s runs."""
    column, ylabel, title, factor = MEASURES[suffix]
    lines = series(rows, column, _label, factor)
    labels = list(dict.fromkeys(_label(r) for r in rows))
    adaptive = [lb for lb in labels if lb not in _STYLE]
    figure, axes = pyplot.subplots(figsize=(9.5, 4.5))
    for label in labels:
        points = lines.get(label)
        if not points:
            continue
        colour, marker = _STYLE.get(label) or (
            _ADAPTIVE_COLOURS[adaptive.index(label) % len(_ADAPTIVE_COLOURS)],
            "^",
        )
        rates = [rate for rate, _ in points]
        axes.plot(
            rates,
            [p.median for _, p in points],
            marker=marker,
            color=colour,
            label=label,
            linestyle="--" if label.startswith("adaptive") else "-",
        )
        if any(p.count > 1 for _, p in points):
            axes.fill_between(
                rates,
                [p.low for _, p in points],
                [p.high for _, p in points],
                color=colour,
                alpha=0.15,
                linewidth=0,
            )
    values = [y for line in axes.get_lines() for y in line.get_ydata()]
    positive = bool(values) and min(values) > 0
    if positive and (suffix in RATE_MEASURES or max(values) / min(values) >= 100):
        axes.set_yscale("log")
    rates = sorted({float(r["rate"]) for r in rows})
    if len(rates) > 1:
        axes.set_xscale("log")
    _rate_ticks(axes, rates)
    saturation = _saturation(rows)
    if saturation:  # after the scales: the line's y data (0, 1) would count as values
        axes.axvline(saturation, color="gray", linestyle=":", linewidth=1)
    axes.set_xlabel("Input rate (tuples/s)" + _log_note(axes.get_xscale()))
    axes.set_ylabel(ylabel + _log_note(axes.get_yscale()))
    result = sorted({str(r.get("result")) for r in rows})
    size = f", result size {result[0]}" if len(result) == 1 else ""
    where = saturation_note(rows, saturation)
    axes.set_title(
        f"{title} of {query}{size}" + (f" \N{EM DASH} {where}" if where else ""), fontsize="medium"
    )
    axes.grid(True, which="both", alpha=0.3)
    # Beside the axes, not on them: with up to ten lines it would hide some.
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    return figure
