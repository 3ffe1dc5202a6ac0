"""The experiment's plots: log-scaled rate axes, latency in milliseconds."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=True)
import matplotlib.pyplot as plt  # noqa: E402

from matchsql.cli.experiment_plots import measure_figure, plot_results  # noqa: E402

ROWS = [
    {
        "query": "Q1",
        "mode": mode,
        "u": "",
        "rule": "",
        "rate": rate,
        "avg_mem": mem,
        "throughput": rate * 0.99,
        "latency": latency,
        "result": "7",
        "status": "ok",
    }
    for mode, mem, latency in (("pull", 4.0, 0.0004), ("push", 500.0, 0.002))
    for rate in (100_000, 1_000_000, 6_000_000)
] + [
    {
        "query": "Q1",
        "mode": "push",
        "u": "",
        "rule": "",
        "rate": 3_000_000,
        "status": "failed",
        "error": "producer died",
    }
]


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
    assert sorted(p.name for p in paths) == ["Q1_latency.png", "Q1_memory.png", "Q1_throughput.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)


def test_repeated_points_are_medians_with_a_band_and_the_title_says_where_pull_saturates() -> None:
    runs = [
        {
            "query": "Q3",
            "mode": "push",
            "u": "",
            "rule": "",
            "rate": rate,
            "avg_mem": mem,
            "throughput": rate,
            "latency": 0.001,
            "result": "9",
            "status": "ok",
            "saturation": "2900000",
        }
        for rate, mems in ((1_450_000, (100.0, 300.0, 200.0)), (2_900_000, (50.0, 70.0, 60.0)))
        for mem in mems
    ]
    axes = measure_figure(plt, "Q3", runs, "memory").axes[0]
    push = next(line for line in axes.get_lines() if line.get_label() == "push")
    assert list(push.get_ydata()) == [200.0, 60.0]  # the medians
    (band,) = axes.collections
    low, high = band.get_paths()[0].vertices[:, 1].min(), band.get_paths()[0].vertices[:, 1].max()
    assert (low, high) == (50.0, 300.0)  # min-max over the points' runs
    assert "pull saturates at 2.9M tuples/s" in axes.get_title()
    assert any(list(line.get_xdata()) == [2_900_000, 2_900_000] for line in axes.get_lines())
    single = measure_figure(plt, "Q3", runs[:1] + runs[3:4], "memory").axes[0]
    assert not single.collections  # one run per point: no band
    plt.close("all")


def test_without_a_searched_rate_the_title_brackets_it_from_the_pull_runs() -> None:
    ok = [r for r in ROWS if r["status"] == "ok"]
    assert " \N{EM DASH} " not in measure_figure(plt, "Q1", ok, "memory").axes[0].get_title()
    # With the columns that tell whether a run kept up: pull drains 2M tuples/s at most.
    judged = [
        {
            **r,
            "producer_rate": r["rate"],
            "produced": r["rate"],
            "records": r["rate"],
            "time": max(1.0, r["rate"] / 2e6),
        }
        for r in ok
    ]
    axes = measure_figure(plt, "Q1", judged, "throughput").axes[0]
    assert "pull saturates between 1M and 6M tuples/s" in axes.get_title()
    keeping = [r for r in judged if r["rate"] < 2e6]
    axes = measure_figure(plt, "Q1", keeping, "throughput").axes[0]
    assert "pull keeps up at every rate run (up to 1M tuples/s)" in axes.get_title()
    plt.close("all")
