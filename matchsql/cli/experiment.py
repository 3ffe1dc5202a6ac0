"""``matchsql experiment``: pull vs. push vs. adaptive input around the saturation point.

    matchsql experiment [--queries Q1,Q2,Q3,Q4] [--modes pull,push,adaptive]
                        [--u 0,1,2,5,10,50] [--rules most_tuples,...]
                        [--rates 1M,2M | --saturation 2.9M] [--repeat 3]
                        [--seconds 2 | --rows N] [--symbols 50] [--skew uniform|zipf:S]
                        [--seed 0] [--out experiment-out] [--quick]
    matchsql experiment --recommend --queries Q3 [--rates 2M] [--memory-budget N] ...

The experiment of the DejaVu thesis, chapter 5: each run
(:mod:`matchsql.cli.experiment_runs`) replays synthetic trades into a live
stream at a controlled rate while the connection runs one of the thesis'
queries Q1-Q4 in one input mode; its input metrics become one row of
``OUT/results.csv`` and :mod:`matchsql.cli.experiment_plots` draws memory,
throughput and latency against the input rate (cf. thesis figures 5.1-5.17).

Below the saturation point every mode keeps up, so without ``--rates`` the
experiment first measures, per query, where pull stops keeping up
(:mod:`matchsql.cli.experiment_saturation`) and runs the rates 0.5x, 0.8x,
1x, 1.25x and 1.6x that rate. Every point is run ``--repeat`` times
(default 3), repetition by repetition over the whole grid (so a slow moment
of the machine does not land on one point's runs only); every repetition
gets the same data, so the spread of a point is the machine's run-to-run
noise and every run of a query and rate must report the same Result.

``--recommend`` measures one query at one rate (default: its saturation
rate) in every setting, short runs, and prints one line: the setting to use
and why (:mod:`matchsql.cli.experiment_recommend`).

A run that fails (producer died, query error, time-out) is reported on
stderr, written to the CSV with ``status`` = ``failed`` and its ``error``,
and the experiment goes on; the exit status is 1 if any run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from matchsql.api.connection import connect
from matchsql.cli import experiment_saturation as saturation_search
from matchsql.cli.experiment_data import experiment_data, parse_skew
from matchsql.cli.experiment_plots import plot_results
from matchsql.cli.experiment_recommend import (
    candidate_settings,
    recommend,
    recommendation_line,
    second_round,
    summarise,
    unfinished,
)
from matchsql.cli.experiment_runs import AUTO, COLUMNS, Bench, Run
from matchsql.cli.experiment_saturation import Saturation, SearchFailed, grid_around
from matchsql.cli.produce import parse_rate
from matchsql.execution.adaptive.modes import RULES
from matchsql.runtime.progress_bar import note, progress_bar
from matchsql.storage.permissions import make_private_dirs, owner_only_file

__all__ = [
    "COLUMNS",
    "Run",
    "build_grid",
    "experiment_data",
    "main",
    "parse_args",
    "run_experiment",
    "run_recommendation",
]

QUERIES = ("Q1", "Q2", "Q3", "Q4")
MODES = ("pull", "push", "adaptive")
DEFAULT_U = (0, 1, 2, 5, 10, 50)
DEFAULT_REPEAT = 3
DEFAULT_SECONDS = 2.0
RECOMMEND_SECONDS = 1.0
#: A --recommend run is abandoned after this many times its duration (at least
#: RECOMMEND_MIN_TIMEOUT s): a setting that stalls must not hold up the answer.
RECOMMEND_TIMEOUT_FACTOR = 3.0
RECOMMEND_MIN_TIMEOUT = 3.0
SATURATION_COLUMNS = (
    "query",
    "saturation",
    "kept_up",
    "fell_behind",
    "why",
    "search_runs",
    "error",
)
QUICK = dict(
    queries="Q1", modes="pull,push", u="0", rules="most_tuples", rates="20000", rows=3000, repeat=1
)


# -- the grid ---------------------------------------------------------------------------


def build_grid(
    queries: Sequence[str],
    modes: Sequence[str],
    us: Sequence[int | str],
    rules: Sequence[str | None],
    rates: Sequence[float],
    *,
    seconds: float,
    rows: int | None,
    repeat: int = 1,
) -> list[Run]:
    """Every run, repetition by repetition (each repetition covers the whole grid)."""
    runs = []
    for query in queries:
        for rep in range(repeat):
            for rate in rates:
                count = rows if rows is not None else max(1, round(rate * seconds))
                for mode in modes:
                    if mode != "adaptive":
                        runs.append(Run(query, mode, None, None, rate, count, rep))
                        continue
                    for u in us:
                        for rule in rules:
                            runs.append(Run(query, mode, u, rule or None, rate, count, rep))
    return runs


# -- the command line -------------------------------------------------------------------


def _list(text: str, allowed: Sequence[str] | None = None, upper: bool = False) -> list[str]:
    items = [w.strip() for w in text.split(",") if w.strip()]
    items = [w.upper() if upper else w.lower() for w in items]
    if not items:
        raise argparse.ArgumentTypeError("give at least one value")
    if allowed is not None:
        unknown = [w for w in items if w not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown)} (choose from {', '.join(allowed)})"
            )
    return list(dict.fromkeys(items))


def _rates(text: str) -> list[float]:
    return [parse_rate(w) for w in _list(text)]


def _us(text: str) -> list[int | str]:
    """U values: whole numbers >= 0, or ``auto`` (the switch picks U)."""
    values: list[int | str] = []
    for word in _list(text):
        if word == AUTO:
            values.append(AUTO)
            continue
        try:
            value = int(word)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"U values are whole numbers or auto, got {word!r}"
            ) from None
        if value < 0:
            raise argparse.ArgumentTypeError("U values must be >= 0")
        values.append(value)
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="matchsql experiment",
        description="Pull vs. push vs. adaptive input (DejaVu thesis ch. 5): DejaVu Q1-Q4 over "
        "a live stream fed at controlled input rates around the rate where pull "
        "saturates; writes results.csv and plots, or recommends a setting.",
    )
    parser.add_argument(
        "--queries", default=",".join(QUERIES), help="comma list of Q1..Q4 (default all)"
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma list of pull,push,adaptive")
    parser.add_argument(
        "--u",
        default=",".join(map(str, DEFAULT_U)),
        help="Go4Risk U values of adaptive runs, whole numbers or auto "
        f"(default {','.join(map(str, DEFAULT_U))})",
    )
    parser.add_argument(
        "--rules",
        help=f"partition rules of adaptive runs: {','.join(RULES)} (default "
        f"{RULES[0]}; with --recommend all of them)",
    )
    parser.add_argument(
        "--rates",
        help="input rates in tuples/s, e.g. 100k,1M (default: 0.5, 0.8, 1, "
        "1.25 and 1.6 times the measured saturation rate of each query)",
    )
    parser.add_argument(
        "--saturation",
        type=parse_rate,
        metavar="RATE",
        help="skip the saturation search: pull saturates at RATE",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help=f"runs per point (default {DEFAULT_REPEAT}); the plots draw the "
        "median and the min-max band",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--seconds",
        type=float,
        help=f"tuples per run = rate * seconds (default {DEFAULT_SECONDS:g}; "
        f"{RECOMMEND_SECONDS:g} with --recommend)",
    )
    size.add_argument("--rows", type=int, help="a fixed number of tuples per run (thesis: 5000)")
    parser.add_argument("--symbols", type=int, default=50, help="partitions (symbols) (default 50)")
    parser.add_argument(
        "--skew",
        default="uniform",
        help="how rows spread over the symbols: uniform (round-robin, the "
        "default) or zipf:S (symbol k drawn with weight 1/k^S, e.g. zipf:1.2)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="data seed (default 0); every repetition gets the same data",
    )
    parser.add_argument("--out", default="experiment-out", help="output folder")
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds after which one run is abandoned (default 300)",
    )
    parser.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="skip the unmeasured warm-up run per query (JIT compilation)",
    )
    parser.add_argument("--no-plots", dest="plots", action="store_false", help="CSV only")
    parser.add_argument(
        "--recommend",
        action="store_true",
        help="one query (--queries), one rate (--rates, default: the "
        "saturation rate): short runs of every setting, then print the "
        "setting to use and why",
    )
    parser.add_argument(
        "--memory-budget",
        type=int,
        metavar="N",
        help="adaptive_memory_budget of the U=auto runs; with --recommend "
        "also: the fastest setting whose Avg Mem stays under N tuples",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tiny grid for smoke tests: Q1, pull and push, one low rate, "
        "3000 tuples, one repetition (explicit options still apply)",
    )
    parser.add_argument(
        "--progress",
        choices=("auto", "on", "off"),
        default="auto",
        help="tqdm progress bar on stderr (auto: when stderr is a terminal)",
    )
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    given = {a.split("=")[0][2:].replace("-", "_") for a in argv if a.startswith("--")}
    if args.quick:
        for name, value in QUICK.items():
            if name not in given and not (name == "rows" and "seconds" in given):
                setattr(args, name, value)
    try:
        args.queries = _list(args.queries, QUERIES, upper=True)
        args.modes = _list(args.modes, MODES)
        args.u = _us(args.u)
        args.rules = (
            _list(args.rules, RULES)
            if args.rules
            else (list(RULES) if args.recommend else [RULES[0]])
        )
        args.rates = _rates(args.rates) if args.rates else None
        args.skew = parse_skew(args.skew)
    except (argparse.ArgumentTypeError, ValueError) as exc:
        parser.error(str(exc))
    _check_sizes(parser, args)
    if args.recommend:
        _check_recommend(parser, args, given)
    elif args.memory_budget is not None and AUTO not in args.u:
        parser.error("--memory-budget goes with --recommend or U=auto runs (--u ...,auto)")
    args.repeat = args.repeat or DEFAULT_REPEAT
    if args.seconds is None:
        args.seconds = RECOMMEND_SECONDS if args.recommend else DEFAULT_SECONDS
    return args


def _check_sizes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.symbols < 1:
        parser.error("--symbols must be >= 1")
    if args.rows is not None and args.rows < 1:
        parser.error("--rows must be >= 1")
    if args.seconds is not None and args.seconds <= 0:
        parser.error("--seconds must be positive")
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be >= 1")
    if args.memory_budget is not None and args.memory_budget < 0:
        parser.error("--memory-budget must be >= 0 (tuples)")


def _check_recommend(
    parser: argparse.ArgumentParser, args: argparse.Namespace, given: set[str]
) -> None:
    if len(args.queries) != 1 or ("queries" not in given and not args.quick):
        parser.error(
            "--recommend needs exactly one query: give --queries with one of "
            + ", ".join(QUERIES)
            + (f" (got {','.join(args.queries)})" if "queries" in given else "")
        )
    if args.rates is not None and len(args.rates) != 1:
        parser.error(
            "--recommend measures at one rate: give --rates one value (default: "
            "the measured saturation rate)"
        )
    if "repeat" in given:
        parser.error(
            "--repeat does not go with --recommend (it runs each setting once, "
            "the top candidates twice)"
        )


# -- the experiment ---------------------------------------------------------------------


@contextlib.contextmanager
def _bench(args: argparse.Namespace, con=None) -> Iterator[Bench]:
    """A :class:`Bench` on ``con`` (or a connection of its own, closed at the end)."""
    own = con is None
    con = con or connect(demo=False)
    bench = Bench(
        con,
        symbols=args.symbols,
        skew=args.skew,
        seed=args.seed,
        timeout=args.timeout,
        memory_budget=getattr(args, "memory_budget", None),
    )
    try:
        yield bench
    finally:
        bench.close()
        if own:
            con.close()


@contextlib.contextmanager
def _csv_writer(path: Path, columns: Sequence[str]) -> Iterator[csv.DictWriter]:
    """A CSV file readable by its owner only, with its header written."""
    with os.fdopen(
        os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", newline=""
    ) as handle:
        owner_only_file(str(path))  # an older file keeps its mode through O_TRUNC
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        yield writer


def _warm_up(bench: Bench, args: argparse.Namespace) -> None:
    """numba compiles each query's matcher once per process: not in a measured run."""
    if args.warmup:
        for query in args.queries:
            bench.measure(Run(query, "pull", None, None, 1e9, 2000), seed=args.seed + 1)


def _search(bench: Bench, query: str) -> Saturation:
    """The saturation search of ``query`` (the module's settings, read when it runs)."""

    def measure(rate: float) -> dict:
        rows = saturation_search.search_rows(rate)
        return bench.measure(Run(query, "pull", None, None, rate, rows))

    return saturation_search.find_saturation(
        measure,
        start=saturation_search.SEARCH_START,
        floor=saturation_search.SEARCH_FLOOR,
        cap=saturation_search.SEARCH_CAP,
        steps=saturation_search.SEARCH_STEPS,
    )


def _saturations(bench: Bench, args: argparse.Namespace) -> dict[str, Saturation | str]:
    """The searched saturation of each query (or why the search failed); none with --rates."""
    found: dict[str, Saturation | str] = {}
    if args.rates is not None or args.saturation is not None:
        return found
    for query in args.queries:
        try:
            found[query] = result = _search(bench, query)
            note(f"{query}: {result.describe()} ({len(result.trace)} search runs)")
        except SearchFailed as exc:
            found[query] = str(exc)
            note(f"{query}: the saturation search failed: {exc}")
    return found


def _write_saturations(out: Path, found: dict[str, Saturation | str]) -> None:
    """saturation.csv, one row per searched query; without a search, none (an older
    one in ``out`` would describe another experiment)."""
    if not found:
        (out / "saturation.csv").unlink(missing_ok=True)
        return
    with _csv_writer(out / "saturation.csv", SATURATION_COLUMNS) as writer:
        for query, result in found.items():
            if isinstance(result, str):
                writer.writerow({"query": query, "error": result})
                continue
            writer.writerow(
                {
                    "query": query,
                    "saturation": result.rate,
                    "kept_up": result.kept or "",
                    "fell_behind": result.fell or "",
                    "why": result.why,
                    "search_runs": len(result.trace),
                }
            )


def _failed_search_row(query: str, error: str) -> dict:
    return {
        "query": query,
        "mode": "pull",
        "status": "failed",
        "error": f"saturation search: {error}"[:300],
    }


def _prepare(bench: Bench, args: argparse.Namespace, out: Path) -> dict[str, Saturation | str]:
    """What every experiment does first: warm the kernels, find each query's saturation
    rate (or take ``--saturation``), and write what was found."""
    _warm_up(bench, args)
    found = _saturations(bench, args)
    _write_saturations(out, found)
    return found


def run_experiment(args: argparse.Namespace, *, con=None) -> tuple[list[dict], list[Path]]:
    """Run the grid of ``args`` (see :func:`parse_args`); write the CSVs and the plots."""

    out = Path(args.out)
    make_private_dirs(out)
    rows: list[dict] = []
    with _bench(args, con) as bench:
        found = _prepare(bench, args, out)
        runs, where = [], {}
        for query in args.queries:
            result = found.get(query)
            if isinstance(result, str):
                rows.append(_failed_search_row(query, result))
                continue
            where[query] = result.rate if result else args.saturation
            rates = args.rates or grid_around(where[query])
            runs += build_grid(
                [query],
                args.modes,
                args.u,
                args.rules,
                rates,
                seconds=args.seconds,
                rows=args.rows,
                repeat=args.repeat,
            )
        with _csv_writer(out / "results.csv", COLUMNS) as writer:
            for row in rows:
                writer.writerow(row)
            for run in progress_bar(runs, mode=args.progress, desc="experiment", unit="run"):
                row = bench.measure(run)
                row["saturation"] = where.get(run.query) or ""
                if row["status"] != "ok":
                    note(f"run {run.query} {run.label} at {run.rate:,.0f}/s failed: {row['error']}")
                rows.append(row)
                writer.writerow(row)
    pictures: list[Path] = []
    if args.plots:
        pictures = plot_results(rows, out)
    return rows, pictures


# -- --recommend ------------------------------------------------------------------------


def run_recommendation(args: argparse.Namespace, *, con=None) -> tuple[list[dict], str | None]:
    """The runs of ``--recommend`` and its line (None when no setting could be measured)."""

    query = args.queries[0]
    out = Path(args.out)
    make_private_dirs(out)
    rows: list[dict] = []
    with _bench(args, con) as bench:
        found = _prepare(bench, args, out)
        searched = found.get(query)
        if isinstance(searched, str):
            rows.append(_failed_search_row(query, searched))
            _write_rows(out, rows)
            return rows, None
        saturation = searched.rate if searched else args.saturation
        rate = args.rates[0] if args.rates else saturation
        rows = _measure_settings(bench, args, query, rate, saturation)
    _write_rows(out, rows)
    summaries = summarise(rows)
    if not summaries:
        return rows, None
    chosen = recommend(summaries, memory_budget=args.memory_budget, failed=len(unfinished(rows)))
    return rows, recommendation_line(query, rate, f"{args.symbols} symbols {args.skew}", chosen)


def _measure_settings(
    bench: Bench, args: argparse.Namespace, query: str, rate: float, saturation: float | None
) -> list[dict]:
    """Each setting once, then the first round's top candidates once more."""
    count = args.rows if args.rows is not None else max(1, round(rate * args.seconds))
    timeout = min(args.timeout, max(RECOMMEND_MIN_TIMEOUT, RECOMMEND_TIMEOUT_FACTOR * count / rate))
    settings = candidate_settings(args.modes, args.u, args.rules)
    bar = progress_bar(mode=args.progress, total=len(settings), desc="recommend", unit="run")
    rows: list[dict] = []

    def measure(setting, repeat: int) -> None:
        run = Run(query, setting.mode, setting.u, setting.rule, rate, count, repeat)
        row = bench.measure(run, timeout=timeout)
        row["saturation"] = saturation or ""
        if row["status"] != "ok":
            note(f"{setting.label} failed: {row['error']}")
        rows.append(row)
        bar.update(1)

    with bar:
        for setting in settings:
            measure(setting, 0)
        summaries = summarise(rows)
        if summaries:
            again = second_round(
                recommend(summaries, memory_budget=args.memory_budget, failed=len(unfinished(rows)))
            )
            bar.total = len(settings) + len(again)
            for setting in again:
                measure(setting, 1)
    return rows


def _write_rows(out: Path, rows: list[dict]) -> None:
    with _csv_writer(out / "results.csv", COLUMNS) as writer:
        for row in rows:
            writer.writerow(row)


def main(argv: list[str]) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.recommend:
            return _recommend_main(args)
        rows, pictures = run_experiment(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    failed = sum(row["status"] != "ok" for row in rows)
    print(
        f"{len(rows)} runs ({failed} failed): {Path(args.out) / 'results.csv'}, "
        f"{len(pictures)} plots in {args.out}",
        file=sys.stderr,
    )
    return 1 if failed else 0


def _recommend_main(args: argparse.Namespace) -> int:
    rows, line = run_recommendation(args)
    failed = sum(row["status"] != "ok" for row in rows)
    print(f"{len(rows)} runs ({failed} failed): {Path(args.out) / 'results.csv'}", file=sys.stderr)
    if line is None:
        print("no setting finished a run: nothing to recommend", file=sys.stderr)
        return 1
    print(line, flush=True)
    return 0
