"""``matchsql experiment``: a tiny grid end to end, and failing runs."""

from __future__ import annotations

import csv

import pytest

from matchsql.cli import SUBCOMMANDS, experiment
from matchsql.cli.experiment import COLUMNS, parse_args, run_experiment

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
    args = parse_args(["--quick", "--modes", "pull,push", "--rates", "20000,60000",
                       "--rows", str(ROWS), "--out", str(out), "--progress", "off"])
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
    assert {p.name for p in pictures} == {"Q1_memory.png", "Q1_throughput.png",
                                          "Q1_latency.png"}
    for picture in pictures:
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 1000


def test_failed_runs_are_marked_and_the_experiment_goes_on(tmp_path, monkeypatch) -> None:
    dies_midway = (
        "import os, sys\n"
        "from matchsql.cli.experiment import experiment_data\n"
        "from matchsql.storage.producer import Producer\n"
        "producer = Producer.open(sys.argv[1])\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
        "producer.write_batch(experiment_data(100, 5))\n"
        "os._exit(3)\n")
    out = tmp_path / "out"
    args = parse_args(["--quick", "--modes", "pull", "--rates", "20000,40000", "--out",
                       str(out), "--no-warmup", "--no-plots", "--progress", "off",
                       "--timeout", "20"])
    monkeypatch.setattr(experiment, "PRODUCER", dies_midway)
    rows, _ = run_experiment(args)
    assert [r["status"] for r in rows] == ["failed", "failed"]
    assert all("producer" in r["error"] for r in rows), [r["error"] for r in rows]
    monkeypatch.setattr(experiment, "PRODUCER", "import sys; sys.exit('no data here')")
    rows, _ = run_experiment(args)
    assert [r["status"] for r in rows] == ["failed", "failed"]
    assert "did not start" in rows[0]["error"] and "no data here" in rows[0]["error"]
    _, table = read_csv(out / "results.csv")
    assert [r["status"] for r in table] == ["failed", "failed"]


def test_grid_and_options() -> None:
    assert "experiment" in SUBCOMMANDS
    args = parse_args(["--queries", "q1,Q3", "--modes", "pull,adaptive", "--u", "0,2",
                       "--rules", "most_tuples,total_pressure", "--rates", "100k,1M",
                       "--seconds", "0.5"])
    runs = experiment.build_grid(args.queries, args.modes, args.u, args.rules, args.rates,
                                 seconds=args.seconds, rows=args.rows)
    assert len(runs) == 2 * 2 * (1 + 2 * 2)
    assert {r.rows for r in runs} == {50_000, 500_000}
    assert {r.label for r in runs} >= {"pull", "adaptive U=2 (total_pressure)"}
    assert SUBCOMMANDS["experiment"](["--modes", "sideways"]) == 2


def test_data_is_deterministic_and_uniform() -> None:
    a, b = experiment.experiment_data(1000, 10, 4), experiment.experiment_data(1000, 10, 4)
    assert a.equals(b)
    counts = a.group_by("symbol").aggregate([("symbol", "count")]).column("symbol_count")
    assert set(counts.to_pylist()) == {100}
