"""Plots of ``matchsql experiment``: the thesis' figures 5.1-5.17 from results.csv rows.

For every query, one PNG per measure - memory (Avg Mem, tuples held in
InputHolders), throughput (tuples/s) and latency (ms) - against the input
rate, one line per mode (and U and rule for adaptive runs), so pull vs. push
(figs. 5.1-5.10), adaptive vs. both (5.11-5.16) and adaptive with varying U
(5.17) are all read from the same pictures. Failed runs are left out.

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
_ADAPTIVE_COLOURS = ("tab:green", "tab:purple", "tab:orange", "tab:brown", "tab:olive",
                     "tab:cyan", "tab:pink", "tab:gray")


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


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def plot_results(rows: Iterable[dict], out: Path | str) -> list[Path]:
    """Write ``QUERY_{memory,throughput,latency}.png`` into ``out``; the paths written."""
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg", force=True)
    pyplot = importlib.import_module("matplotlib.pyplot")

    out = Path(out)
    ok = [r for r in rows if r.get("status", "ok") == "ok" and _number(r.get("rate"))]
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
    labels = list(dict.fromkeys(_label(r) for r in rows))
    adaptive = [lb for lb in labels if lb not in _STYLE]
    figure, axes = pyplot.subplots(figsize=(9.5, 4.5))
    for label in labels:
        points = sorted((float(r["rate"]), _number(r.get(column)))
                        for r in rows if _label(r) == label)
        points = [(x, y * factor) for x, y in points if y is not None]
        if not points:
            continue
        colour, marker = _STYLE.get(label) or (
            _ADAPTIVE_COLOURS[adaptive.index(label) % len(_ADAPTIVE_COLOURS)], "^")
        axes.plot([p[0] for p in points], [p[1] for p in points], marker=marker,
                  color=colour, label=label,
                  linestyle="--" if label.startswith("adaptive") else "-")
    values = [y for line in axes.get_lines() for y in line.get_ydata()]
    positive = bool(values) and min(values) > 0
    if positive and (suffix in RATE_MEASURES or max(values) / min(values) >= 100):
        axes.set_yscale("log")
    if len({float(r["rate"]) for r in rows}) > 1:
        axes.set_xscale("log")
    axes.set_xlabel("Input rate (tuples/s)" + _log_note(axes.get_xscale()))
    axes.set_ylabel(ylabel + _log_note(axes.get_yscale()))
    result = sorted({str(r.get("result")) for r in rows})
    size = f", result size {result[0]}" if len(result) == 1 else ""
    axes.set_title(f"{title} of {query}{size}")
    axes.grid(True, which="both", alpha=0.3)
    # Beside the axes, not on them: with up to ten lines it would hide some.
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    return figure
