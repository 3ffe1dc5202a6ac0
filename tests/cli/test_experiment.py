"""``matchsql experiment``: tiny grids and ``--recommend`` end to end, failing runs, options."""

from __future__ import annotations

import csv
import re

import numpy as np
import pyarrow.compute as pc
import pytest

from matchsql.cli import SUBCOMMANDS, experiment, experiment_runs, experiment_saturation
from matchsql.cli.experiment import COLUMNS, parse_args, run_experiment
from matchsql.cli.experiment_saturation import GRID_FACTORS
from matchsql.cli.experiment_stats import format_rate
from matchsql.execution.adaptive.modes import RULES
from matchsql.storage.demo import SCHEMA

ROWS = 3000


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path, monkeypatch):
    """Own stream registry; the producer processes inherit it through the environment."""
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(tmp_path / "runtime"))


def read_csv(path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def test_quick_grid_writes_sane_csv_and_plots(tmp_path) -> None:
    out = tmp_path / "out"
    args = parse_args(
        [
            "--quick",
            "--modes",
            "pull,push",
            "--rates",
            "20000,60000",
            "--rows",
            str(ROWS),
            "--out",
            str(out),
            "--progress",
            "off",
        ]
    )
    rows, pictures = run_experiment(args)
    header, table = read_csv(out / "results.csv")
    assert header == list(COLUMNS)
    assert len(table) == len(rows) == 4  # Q1 x {pull, push} x 2 rates
    assert {r["status"] for r in table} == {"ok"}, [r["error"] for r in table]
    for r in table:
        assert int(r["records"]) == int(r["produced"]) == ROWS
        assert float(r["time"]) > 0 and float(r["throughput"]) > 0
        assert float(r["max_mem"]) >= float(r["avg_mem"]) >= 0
        assert float(r["max_queue"]) >= float(r["avg_queue"]) >= 0
        assert float(r["latency"]) >= 0 and int(r["switches"]) >= 0
    assert len({r["result"] for r in table}) == 1  # same data, same matches, in every mode
    assert int(table[0]["result"]) > 0
    assert {p.name for p in pictures} == {"Q1_memory.png", "Q1_throughput.png", "Q1_latency.png"}
    for picture in pictures:
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 1000


def test_failed_runs_are_marked_and_the_experiment_goes_on(tmp_path, monkeypatch) -> None:
    dies_midway = (
        "import os, sys\n"
        "from matchsql.cli.experiment import experiment_data\n"
        "from matchsql.storage.producer import Producer\n"
        "producer = Producer.open(sys.stdin.readline().split()[1])\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
        "producer.write_batch(experiment_data(100, 5))\n"
        "os._exit(3)\n"
    )
    out = tmp_path / "out"
    args = parse_args(
        [
            "--quick",
            "--modes",
            "pull",
            "--rates",
            "20000,40000",
            "--out",
            str(out),
            "--no-warmup",
            "--no-plots",
            "--progress",
            "off",
            "--timeout",
            "20",
        ]
    )
    monkeypatch.setattr(experiment_runs, "PRODUCER", dies_midway)
    rows, _ = run_experiment(args)
    assert [r["status"] for r in rows] == ["failed", "failed"]
    assert all("producer" in r["error"] for r in rows), [r["error"] for r in rows]
    monkeypatch.setattr(experiment_runs, "PRODUCER", "import sys; sys.exit('no data here')")
    rows, _ = run_experiment(args)
    assert [r["status"] for r in rows] == ["failed", "failed"]
    assert "did not start" in rows[0]["error"] and "no data here" in rows[0]["error"]
    _, table = read_csv(out / "results.csv")
    assert [r["status"] for r in table] == ["failed", "failed"]


def test_grid_and_options() -> None:
    assert "experiment" in SUBCOMMANDS
    args = parse_args(
        [
            "--queries",
            "q1,Q3",
            "--modes",
            "pull,adaptive",
            "--u",
            "0,2",
            "--rules",
            "most_tuples,total_pressure",
            "--rates",
            "100k,1M",
            "--seconds",
            "0.5",
        ]
    )
    runs = experiment.build_grid(
        args.queries,
        args.modes,
        args.u,
        args.rules,
        args.rates,
        seconds=args.seconds,
        rows=args.rows,
    )
    assert len(runs) == 2 * 2 * (1 + 2 * 2)
    assert {r.rows for r in runs} == {50_000, 500_000}
    assert {r.label for r in runs} >= {"pull", "adaptive U=2 (total_pressure)"}
    assert SUBCOMMANDS["experiment"](["--modes", "sideways"]) == 2


def test_data_is_deterministic_and_uniform() -> None:
    a, b = experiment.experiment_data(1000, 10, 4), experiment.experiment_data(1000, 10, 4)
    assert a.equals(b)
    counts = a.group_by("symbol").aggregate([("symbol", "count")]).column("symbol_count")
    assert set(counts.to_pylist()) == {100}


def test_new_options_and_their_defaults() -> None:
    args = parse_args([])
    assert args.u == [0, 1, 2, 5, 10, 50] and args.repeat == 3 and args.rates is None
    assert args.rules == ["most_tuples"] and args.seconds == 2 and args.skew == "uniform"
    args = parse_args(["--u", "0,auto,2", "--skew", "ZIPF:1.20", "--saturation", "2.9M"])
    assert args.u == [0, "auto", 2] and args.skew == "zipf:1.2" and args.saturation == 2.9e6
    args = parse_args(["--recommend", "--queries", "q3", "--memory-budget", "5000"])
    assert args.queries == ["Q3"] and args.seconds == 1 and args.rates is None
    assert args.rules == list(RULES) and args.memory_budget == 5000
    runs = experiment.build_grid(
        ["Q1"],
        ["pull", "adaptive"],
        ["auto"],
        ["most_tuples"],
        [1000, 2000],
        seconds=1,
        rows=None,
        repeat=2,
    )
    assert [(r.repeat, r.rate, r.mode) for r in runs[:4]] == [
        (0, 1000, "pull"),
        (0, 1000, "adaptive"),
        (0, 2000, "pull"),
        (0, 2000, "adaptive"),
    ]
    assert {r.repeat for r in runs[4:]} == {1} and runs[1].u == "auto"
    assert runs[1].label == "adaptive U=auto (most_tuples)"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--recommend", "--queries", "Q1,Q2"], "--recommend needs exactly one query"),
        (["--recommend"], "--recommend needs exactly one query"),
        (["--recommend", "--queries", "Q1", "--rates", "1k,2k"], "give --rates one value"),
        (["--recommend", "--queries", "Q1", "--repeat", "2"], "--repeat does not go with"),
        (["--memory-budget", "100"], "--memory-budget goes with --recommend or U=auto runs"),
        (["--u", "0,fast"], "whole numbers or auto"),
        (["--u", "-1"], "must be >= 0"),
        (["--skew", "pareto"], "unknown skew 'pareto'"),
        (["--skew", "zipf:0"], "zipf exponent must be above 0"),
        (["--skew", "zipf:x"], "zipf exponent must be a number"),
        (["--repeat", "0"], "--repeat must be >= 1"),
        (["--saturation", "fast"], "not a rate"),
    ],
)
def test_argument_errors_are_clear(argv, message, capsys) -> None:
    assert SUBCOMMANDS["experiment"](argv) == 2
    assert message in capsys.readouterr().err


def test_zipf_data_is_deterministic_skewed_and_keeps_the_schema() -> None:
    rows, symbols = 20_000, 50
    a = experiment.experiment_data(rows, symbols, 7, "zipf:1.2")
    assert a.equals(experiment.experiment_data(rows, symbols, 7, "zipf:1.2"))
    assert not a.equals(experiment.experiment_data(rows, symbols, 8, "zipf:1.2"))
    assert a.schema == SCHEMA and a.num_rows == rows
    assert a.column("ts").to_pylist() == sorted(a.column("ts").to_pylist())

    def shares(table) -> list[float]:
        counts = table.group_by("symbol").aggregate([("symbol", "count")])
        return sorted((c / rows for c in counts.column("symbol_count").to_pylist()), reverse=True)

    skewed = shares(a)
    assert skewed[0] > 8 / symbols  # uniform would give every symbol 1/50
    assert skewed[0] > 3 * skewed[4] and sum(skewed[:5]) > 0.5
    assert shares(experiment.experiment_data(rows, symbols, 7, "zipf:2"))[0] > skewed[0]
    # Each symbol's price is still a walk of cent-sized ticks over its own rows.
    hot = a.filter(pc.equal(a.column("symbol"), a.column("symbol")[0])).column("price")
    steps = np.abs(np.diff(np.log(hot.to_numpy())))
    assert len(steps) > 100 and steps.max() < 0.01


def test_the_grid_is_placed_around_the_given_saturation(tmp_path) -> None:
    out = tmp_path / "out"
    args = parse_args(
        [
            "--queries",
            "Q1",
            "--modes",
            "pull",
            "--saturation",
            "20k",
            "--repeat",
            "2",
            "--rows",
            str(ROWS),
            "--out",
            str(out),
            "--no-plots",
            "--progress",
            "off",
        ]
    )
    rows, _ = run_experiment(args)
    assert {r["status"] for r in rows} == {"ok"}, [r["error"] for r in rows]
    _, table = read_csv(out / "results.csv")
    rates = sorted({float(r["rate"]) for r in table})
    assert rates == [20_000 * f for f in sorted(GRID_FACTORS)]
    assert sorted(int(r["repeat"]) for r in table) == [0] * 5 + [1] * 5
    assert {float(r["saturation"]) for r in table} == {20_000}
    assert len({r["result"] for r in table}) == 1  # every repetition gets the same data
    assert not (out / "saturation.csv").exists()  # nothing was searched


LINE = re.compile(
    r"^Q1 at (?P<rate>\S+) tuples/s, 50 symbols (?P<skew>\S+): "
    r"input_mode=(?P<mode>pull|push|adaptive)"
    r"( adaptive_u=\S+ adaptive_rule=\S+)? "
    r"\(Avg Mem [\d.,]+ tuples, throughput [\d.]+[kM]? tuples/s, "
    r"latency [\d.,]+ ms\) because \S.*$"
)


def test_recommend_prints_one_line(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    code = experiment.main(
        [
            "--recommend",
            "--queries",
            "Q1",
            "--rates",
            "20k",
            "--rows",
            str(ROWS),
            "--u",
            "2",
            "--skew",
            "zipf:1.2",
            "--out",
            str(out),
            "--progress",
            "off",
        ]
    )
    printed = capsys.readouterr().out.splitlines()
    assert code == 0 and len(printed) == 1, printed
    match = LINE.match(printed[0])
    assert match, printed[0]
    assert match["rate"] == "20k" and match["skew"] == "zipf:1.2"
    _, table = read_csv(out / "results.csv")
    first = [r for r in table if r["repeat"] == "0"]
    assert len(first) == 2 + len(RULES)  # pull, push, adaptive U=2 under each rule
    assert 1 <= len(table) - len(first) <= 3  # the top candidates, once more
    assert match["mode"] in {r["mode"] for r in table if r["status"] == "ok"}


def test_recommend_searches_the_rate_when_none_is_given(tmp_path, capsys, monkeypatch) -> None:
    for name, value in (
        ("SEARCH_START", 5000.0),
        ("SEARCH_CAP", 20_000.0),
        ("SEARCH_MIN_ROWS", 1000),
        ("SEARCH_SECONDS", 0.2),
    ):
        monkeypatch.setattr(experiment_saturation, name, value)
    out = tmp_path / "out"
    code = experiment.main(
        [
            "--recommend",
            "--queries",
            "Q1",
            "--modes",
            "pull,push",
            "--rows",
            str(ROWS),
            "--out",
            str(out),
            "--progress",
            "off",
        ]
    )
    printed = capsys.readouterr().out.splitlines()
    _, found = read_csv(out / "saturation.csv")
    assert code == 0 and len(found) == 1 and found[0]["query"] == "Q1"
    saturation = float(found[0]["saturation"])
    assert 1000 <= saturation <= 20_000 and int(found[0]["search_runs"]) >= 1
    match = LINE.match(printed[0])
    assert match and match["rate"] == format_rate(saturation), printed
