"""Plots of ``matchsql experiment``: the thesis' figures 5.1-5.17 from results.csv rows.

For every query, one PNG per measure - memory (Avg Mem, tuples held in
InputHolders), throughput (tuples/s) and latency (s) - against the input
rate, one line per mode (and U and rule for adaptive runs), so pull vs. push
(figs. 5.1-5.10), adaptive vs. both (5.11-5.16) and adaptive with varying U
(5.17) are all read from the same pictures. Failed runs are left out.
matplotlib runs with the Agg backend (no display needed).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

#: file suffix -> (CSV column, y-axis label, title)
MEASURES = {
    "memory": ("avg_mem", "Avg Mem (tuples in InputHolders)", "Memory usage"),
    "throughput": ("throughput", "Throughput (tuples/s)", "Performance"),
    "latency": ("latency", "Latency (s)", "Latency"),
}
_STYLE = {"pull": ("tab:blue", "o"), "push": ("tab:red", "s")}
_ADAPTIVE_COLOURS = ("tab:green", "tab:purple", "tab:orange", "tab:brown", "tab:olive",
                     "tab:cyan", "tab:pink", "tab:gray")


def _label(row: dict) -> str:
    from matchsql.adaptive.experiment import series_label

    return series_label(str(row["mode"]), row.get("u", ""), row.get("rule", ""))


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def plot_results(rows: Iterable[dict], out: Path | str) -> list[Path]:
    """Write ``QUERY_{memory,throughput,latency}.png`` into ``out``; the paths written."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out = Path(out)
    ok = [r for r in rows if r.get("status", "ok") == "ok" and _number(r.get("rate"))]
    written: list[Path] = []
    for query in sorted({str(r["query"]) for r in ok}):
        mine = [r for r in ok if str(r["query"]) == query]
        labels = list(dict.fromkeys(_label(r) for r in mine))
        adaptive = [lb for lb in labels if lb not in _STYLE]
        for suffix, (column, ylabel, title) in MEASURES.items():
            figure, axes = plt.subplots(figsize=(7, 4.5))
            for label in labels:
                points = sorted((float(r["rate"]), _number(r.get(column)))
                                for r in mine if _label(r) == label)
                points = [(x, y) for x, y in points if y is not None]
                if not points:
                    continue
                colour, marker = _STYLE.get(label) or (
                    _ADAPTIVE_COLOURS[adaptive.index(label) % len(_ADAPTIVE_COLOURS)], "^")
                axes.plot([p[0] for p in points], [p[1] for p in points], marker=marker,
                          color=colour, label=label,
                          linestyle="--" if label.startswith("adaptive") else "-")
            values = [y for line in axes.get_lines() for y in line.get_ydata()]
            if values and min(values) > 0 and max(values) / min(values) >= 100:
                axes.set_yscale("log")  # e.g. push holds 1000x what pull holds
            rates = {float(r["rate"]) for r in mine}
            if len(rates) > 1 and max(rates) / max(min(rates), 1e-9) >= 20:
                axes.set_xscale("log")
            axes.set_xlabel("Input rate (tuples/s)")
            axes.set_ylabel(ylabel)
            result = sorted({str(r.get("result")) for r in mine})
            size = f", result size {result[0]}" if len(result) == 1 else ""
            axes.set_title(f"{title} of {query}{size}")
            axes.grid(True, alpha=0.3)
            axes.legend(fontsize="small")
            figure.tight_layout()
            path = out / f"{query}_{suffix}.png"
            figure.savefig(path, dpi=110)
            plt.close(figure)
            written.append(path)
    return written
