"""The experiment's plots: log-scaled rate axes, latency in milliseconds."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=True)
import matplotlib.pyplot as plt  # noqa: E402

from matchsql.cli.experiment_plots import measure_figure, plot_results  # noqa: E402

ROWS = [
    {"query": "Q1", "mode": mode, "u": "", "rule": "", "rate": rate, "avg_mem": mem,
     "throughput": rate * 0.99, "latency": latency, "result": "7", "status": "ok"}
    for mode, mem, latency in (("pull", 4.0, 0.0004), ("push", 500.0, 0.002))
    for rate in (100_000, 1_000_000, 6_000_000)
] + [{"query": "Q1", "mode": "push", "u": "", "rule": "", "rate": 3_000_000,
      "status": "failed", "error": "producer died"}]


def test_rate_axes_are_logarithmic_and_latency_is_in_ms() -> None:
    ok = [r for r in ROWS if r["status"] == "ok"]
    latency = measure_figure(plt, "Q1", ok, "latency")
    axes = latency.axes[0]
    assert axes.get_xscale() == "log"
    assert "Latency (ms)" in axes.get_ylabel()
    pull = next(line for line in axes.get_lines() if line.get_label() == "pull")
    assert list(pull.get_ydata()) == [0.4, 0.4, 0.4]  # 0.0004 s
    throughput = measure_figure(plt, "Q1", ok, "throughput").axes[0]
    assert throughput.get_xscale() == "log" and throughput.get_yscale() == "log"
    memory = measure_figure(plt, "Q1", ok, "memory").axes[0]
    assert memory.get_yscale() == "log"  # 500 / 4 spans two decades
    assert "result size 7" in memory.get_title()
    plt.close("all")


def test_plot_results_writes_the_pictures_without_failed_runs(tmp_path) -> None:
    paths = plot_results(ROWS, tmp_path)
    assert sorted(p.name for p in paths) == ["Q1_latency.png", "Q1_memory.png",
                                             "Q1_throughput.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)
