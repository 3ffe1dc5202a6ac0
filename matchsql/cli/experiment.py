"""``matchsql experiment``: pull vs. push vs. adaptive input at controlled input rates.

    matchsql experiment [--queries Q1,Q2,Q3,Q4] [--modes pull,push,adaptive]
                        [--u 0,1,2,10] [--rules most_tuples,total_pressure]
                        [--rates 100000,300000,1000000,3000000] [--seconds 2 | --rows N]
                        [--symbols 50] [--seed 0] [--out experiment-out] [--quick]

The experiment of the DejaVu thesis, chapter 5: each *run* replays synthetic
trades into a fresh live stream from a producer **process** that paces its
writes to the target input rate, while the connection runs one of the
thesis' queries Q1-Q4 (:mod:`matchsql.queries`, reading the stream instead
of ``trade``) to the end of the stream in one input mode. The run's input
metrics (``Result.stats``: Avg/Max Mem, Avg/Max Queue, Result, Time,
Throughput, Records, Latency, mode switches) become one row of
``OUT/results.csv``; :mod:`matchsql.cli.experiment_plots` draws memory, throughput
and latency against the input rate for every query, one line per mode/U/rule
(cf. thesis figures 5.1-5.17).

Data: like :func:`matchsql.storage.demo.synthetic_trades` (same schema,
tickers and start prices), but the partitions are spread uniformly
(round-robin over ``--symbols``) and every symbol's price is a geometric
random walk with a fixed per-tick volatility, so the data look alike at
every size and the only thing that changes between rates is the rate. A run
has ``rate * seconds`` tuples (or ``--rows``, fixed as in the thesis, which
used 5000 records); the same query and rate always get the same data, so
every mode must report the same Result.

A run that fails (producer died, query error, time-out) is reported on
stderr, written to the CSV with ``status`` = ``failed`` and its ``error``,
and the experiment goes on; the exit status is 1 if any run failed.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from matchsql.api.connection import connect
from matchsql.cli.experiment_plots import plot_results, series_label
from matchsql.progress_bar import note, progress_bar
from matchsql.queries import DEJAVU, over
from matchsql.storage.demo import SCHEMA, TICKERS, TRADING_DAYS, symbol_names
from matchsql.storage.permissions import make_private_dirs
from matchsql.storage.produce_cli import _rate
from matchsql.storage.producer import Producer

QUERIES = ("Q1", "Q2", "Q3", "Q4")
MODES = ("pull", "push", "adaptive")
RULES = ("most_tuples", "total_pressure")
DEFAULT_RATES = (100_000, 300_000, 1_000_000, 3_000_000)
DEFAULT_U = (0, 1, 2, 10)
METRICS = ("avg_mem", "max_mem", "avg_queue", "max_queue", "result", "time", "throughput",
           "records", "latency", "switches")
#: The CSV header: the run's coordinates, the thesis' columns, then bookkeeping.
COLUMNS = ("query", "mode", "u", "rule", "rate", *METRICS,
           "produced", "producer_rate", "status", "error")
STREAM_COLUMNS = "symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP"
TICK_VOLATILITY = 0.001  # log return per tick: cent-sized moves, as busy TAQ symbols
MIN_CAPACITY = 1 << 20
MAX_CAPACITY = 1 << 24  # tuples the stream's ring may queue (a slower reader blocks the writer)
QUICK = dict(queries="Q1", modes="pull,push", u="0", rules="most_tuples", rates="20000",
             rows=3000)


@dataclass(frozen=True)
class Run:
    """One point of the grid."""

    query: str
    mode: str
    u: int | None  # adaptive only
    rule: str | None  # adaptive only
    rate: float
    rows: int

    @property
    def label(self) -> str:
        """The line this run belongs to in the plots."""
        return series_label(self.mode, self.u, self.rule)


# -- data and the producer process ----------------------------------------------------


def experiment_data(rows: int, symbols: int, seed: int = 0) -> pa.Table:
    """``rows`` synthetic trades, partitions round-robin over ``symbols`` tickers.

    Same columns, tickers and start prices as
    :func:`~matchsql.storage.demo.synthetic_trades`; deterministic in its arguments.
    """

    if rows < 0 or symbols < 1:
        raise ValueError("rows must be >= 0 and symbols >= 1")
    rng = np.random.default_rng(seed)
    names = symbol_names(symbols)
    known = list(TICKERS.values())[:symbols]
    start = np.concatenate((known, np.exp(rng.uniform(np.log(5.0), np.log(200.0),
                                                      size=symbols - len(known)))))
    sym = np.arange(rows) % symbols
    # Row i is the (i // symbols)-th tick of its symbol: lay the steps out as
    # (ticks, symbols) and take cumulative sums down the columns.
    ticks = -(-rows // symbols) if rows else 0
    steps = rng.standard_normal((ticks, symbols)) * TICK_VOLATILITY
    log_price = np.cumsum(steps, axis=0).reshape(-1)[:rows]
    price = np.maximum(np.round(start[sym] * np.exp(log_price), 2), 0.01)
    volume = rng.geometric(0.35, size=rows).astype(np.int64) * 100
    first = dt.datetime.combine(TRADING_DAYS[0], dt.time(9, 30))
    epoch_us = int((first - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000)
    ts = epoch_us + np.arange(rows, dtype=np.int64) * 1000  # one trade per millisecond
    return pa.table({
        "symbol": pa.array(names, pa.string()).take(pa.array(sym, pa.int32())),
        "price": pa.array(price, pa.float64()),
        "volume": pa.array(volume, pa.int64()),
        "ts": pa.array(ts, pa.int64()).cast(pa.timestamp("us")),
    }, schema=SCHEMA)


PRODUCER = ("import sys; from matchsql.cli.experiment import produce_main; "
            "sys.exit(produce_main(sys.argv[1:]))")


def produce_main(argv: list[str]) -> int:
    """The producer process: ``STREAM ROWS SYMBOLS SEED RATE``.

    Generates the data first, prints ``ready``, waits for a line on stdin
    (the query is running by then), then writes paced to RATE tuples per
    second and closes the stream (end of stream). Last line on stdout:
    ``done ROWS SECONDS``.
    """

    stream, rows, symbols, seed, rate = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), \
        float(argv[4])
    table = experiment_data(rows, symbols, seed)
    chunk = max(1, min(65_536, int(rate / 200)))  # >= 200 writes a second
    batches = table.to_batches(max_chunksize=chunk)
    producer = Producer.open(stream)
    print("ready", flush=True)
    sys.stdin.readline()
    written = 0
    started = time.monotonic()
    try:
        for batch in batches:
            producer.write_batch(batch)
            written += batch.num_rows
            ahead = started + written / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    finally:
        producer.close()
    print(f"done {written} {time.monotonic() - started:.6f}", flush=True)
    return 0


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


class _ProducerProcess:
    def __init__(self, stream: str, run: Run, symbols: int, seed: int) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(),
                                                          env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, stream, str(run.rows), str(symbols), str(seed),
             repr(float(run.rate))],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        self.stderr: list[str] = []
        self._err = threading.Thread(target=self._drain_stderr, daemon=True)
        self._err.start()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_ready(self, timeout: float) -> None:
        """Block until the producer has its data and holds the stream."""
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if not line or line[0].strip() != "ready":
            raise RunFailed("producer did not start: " + self.describe())

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float) -> tuple[int, float]:
        """Rows written and the achieved rate, from the producer's last line."""
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RunFailed("producer did not exit") from None
        self._err.join(1)
        if self.proc.returncode != 0:
            raise RunFailed(f"producer exited with status {self.proc.returncode}: "
                            + self.describe())
        words = (out.strip().splitlines() or [""])[-1].split()
        if len(words) != 3 or words[0] != "done":
            raise RunFailed("producer gave no summary: " + self.describe())
        rows, seconds = int(words[1]), float(words[2])
        return rows, rows / seconds if seconds > 0 else 0.0

    def describe(self) -> str:
        self._err.join(0.5)
        text = "".join(self.stderr).strip().splitlines()
        return text[-1] if text else f"exit status {self.proc.poll()}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


class RunFailed(Exception):
    """A run could not be measured; the message says why."""


# -- one run --------------------------------------------------------------------------


def run_once(con, run: Run, *, symbols: int, seed: int, timeout: float,
             stream: str | None = None) -> dict:
    """Measure one run on ``con``; a dict with :data:`COLUMNS` (status ok or failed)."""

    stream = stream or f"mx_experiment_{os.getpid()}"
    row: dict = {"query": run.query, "mode": run.mode, "u": "" if run.u is None else run.u,
                 "rule": run.rule or "", "status": "ok", "error": "",
                 "rate": int(run.rate) if float(run.rate).is_integer() else run.rate}
    producer: _ProducerProcess | None = None
    try:
        con.sql(f"SET input_mode = '{run.mode}'")
        con.sql(f"SET adaptive_u = {run.u or 0}")
        if run.rule:
            con.sql(f"SET adaptive_rule = '{run.rule}'")
        capacity = max(MIN_CAPACITY, min(MAX_CAPACITY, run.rows + 1))
        con.sql(f"DROP STREAM IF EXISTS {stream}")
        con.sql(f"CREATE STREAM {stream} ({STREAM_COLUMNS}) WITH (capacity = {capacity})")
        producer = _ProducerProcess(stream, run, symbols, seed)
        producer.wait_ready(timeout)
        result = con.sql(over(DEJAVU[run.query], stream))
        matches = _drain(con, result, producer, timeout)
        produced, producer_rate = producer.finish(timeout)
        stats = dict(result.stats or {})
        if not stats:
            raise RunFailed("the query reported no input metrics")
        for name in METRICS:
            row[name] = stats.get(name, "")
        row["result"] = matches
        row["produced"], row["producer_rate"] = produced, round(producer_rate, 1)
    except Exception as exc:  # noqa: BLE001 - any failure marks the run, the experiment goes on
        row["status"] = "failed"
        reason = str(exc).strip().splitlines()
        row["error"] = (reason[0] if reason else type(exc).__name__)[:300]
        if producer is not None and not isinstance(exc, RunFailed):
            if producer.proc.poll() not in (None, 0):
                row["error"] += f" (producer: {producer.describe()})"
    finally:
        if producer is not None:
            producer.kill()
        try:
            con.sql(f"DROP STREAM IF EXISTS {stream}")
        except Exception:  # noqa: BLE001 - a failed drop must not end the experiment
            pass
    return row


def _drain(con, result, producer: _ProducerProcess, timeout: float) -> int:
    """Count the query's result rows; a watchdog starts the producer and stops a stuck run."""
    fetching = threading.Event()
    finished = threading.Event()
    why: list[str] = []

    def watch() -> None:
        fetching.wait()
        time.sleep(0.01)  # the query opens its reader first; then the producer writes
        producer.go()
        deadline = time.monotonic() + timeout
        while not finished.wait(0.05):
            code = producer.proc.poll()
            if code not in (None, 0):
                why.append(f"producer exited with status {code}: {producer.describe()}")
            elif time.monotonic() > deadline:
                why.append(f"timed out after {timeout:g} s")
            else:
                continue
            con.interrupt()
            return

    watchdog = threading.Thread(target=watch, name="matchsql-experiment-watch", daemon=True)
    watchdog.start()
    count = 0
    try:
        batches = result.fetch_batches()
        fetching.set()
        for batch in batches:
            count += batch.num_rows
    except Exception as exc:
        if why:
            raise RunFailed(why[0]) from exc
        raise
    finally:
        fetching.set()
        finished.set()
        watchdog.join(5)
    if why:
        raise RunFailed(why[0])
    return count


# -- the grid -------------------------------------------------------------------------


def build_grid(queries: Sequence[str], modes: Sequence[str], us: Sequence[int],
               rules: Sequence[str], rates: Sequence[float], *, seconds: float,
               rows: int | None) -> list[Run]:
    runs = []
    for query in queries:
        for rate in rates:
            count = rows if rows is not None else max(1, round(rate * seconds))
            for mode in modes:
                if mode != "adaptive":
                    runs.append(Run(query, mode, None, None, rate, count))
                    continue
                for u in us:
                    for rule in rules:
                        runs.append(Run(query, mode, u, rule or None, rate, count))
    return runs


def _list(text: str, allowed: Sequence[str] | None = None, upper: bool = False) -> list[str]:
    items = [w.strip() for w in text.split(",") if w.strip()]
    items = [w.upper() if upper else w.lower() for w in items]
    if not items:
        raise argparse.ArgumentTypeError("give at least one value")
    if allowed is not None:
        unknown = [w for w in items if w not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown)} (choose from {', '.join(allowed)})")
    return list(dict.fromkeys(items))


def _rates(text: str) -> list[float]:

    return [_rate(w) for w in _list(text)]


def _us(text: str) -> list[int]:
    try:
        values = [int(w) for w in _list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"U values are whole numbers, got {text!r}") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError("U values must be >= 0")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="matchsql experiment",
        description="Pull vs. push vs. adaptive input (DejaVu thesis ch. 5): DejaVu Q1-Q4 over "
                    "a live stream fed at controlled input rates; writes results.csv and plots.")
    parser.add_argument("--queries", default=",".join(QUERIES),
                        help="comma list of Q1..Q4 (default all)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma list of pull,push,adaptive")
    parser.add_argument("--u", default=",".join(map(str, DEFAULT_U)),
                        help="Go4Risk U values of adaptive runs (default 0,1,2,10)")
    parser.add_argument("--rules", default=RULES[0],
                        help="partition rules of adaptive runs: most_tuples,total_pressure "
                             "(default most_tuples)")
    parser.add_argument("--rates", default=",".join(map(str, DEFAULT_RATES)),
                        help="input rates in tuples/s, e.g. 100k,1M (default "
                             + ",".join(map(str, DEFAULT_RATES)) + ")")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--seconds", type=float, default=2.0,
                      help="tuples per run = rate * seconds (default 2)")
    size.add_argument("--rows", type=int, help="a fixed number of tuples per run (thesis: 5000)")
    parser.add_argument("--symbols", type=int, default=50,
                        help="partitions (symbols), spread uniformly (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
    parser.add_argument("--out", default="experiment-out", help="output folder")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds after which one run is abandoned (default 300)")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="skip the unmeasured warm-up run per query (JIT compilation)")
    parser.add_argument("--no-plots", dest="plots", action="store_false", help="CSV only")
    parser.add_argument("--quick", action="store_true",
                        help="a tiny grid for smoke tests: Q1, pull and push, one low rate, "
                             "3000 tuples (explicit options still apply)")
    parser.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                        help="tqdm progress bar on stderr (auto: when stderr is a terminal)")
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
        args.rules = _list(args.rules, RULES)
        args.rates = _rates(args.rates)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if args.symbols < 1:
        parser.error("--symbols must be >= 1")
    if args.rows is not None and args.rows < 1:
        parser.error("--rows must be >= 1")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    return args


def run_experiment(args: argparse.Namespace, *, con=None) -> tuple[list[dict], list[Path]]:
    """Run the grid of ``args`` (see :func:`parse_args`); write the CSV and the plots."""

    rules: list[str | None] = list(args.rules)
    runs = build_grid(args.queries, args.modes, args.u, rules, args.rates,
                      seconds=args.seconds, rows=args.rows)
    out = Path(args.out)
    make_private_dirs(out)
    own = con is None
    con = con or connect(demo=False)
    rows: list[dict] = []
    try:
        if args.warmup:
            for query in args.queries:  # numba compiles each query's matcher once per process
                run_once(con, Run(query, "pull", None, None, 1e9, 2000), symbols=args.symbols,
                         seed=args.seed + 1, timeout=args.timeout)
        path = out / "results.csv"
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w",
                       newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            for run in progress_bar(runs, mode=args.progress, desc="experiment", unit="run"):
                row = run_once(con, run, symbols=args.symbols, seed=args.seed,
                               timeout=args.timeout)
                if row["status"] != "ok":
                    note(f"run {run.query} {run.label} at {run.rate:,.0f}/s failed: "
                          f"{row['error']}")
                rows.append(row)
                writer.writerow(row)
                handle.flush()
    finally:
        if own:
            con.close()
    pictures: list[Path] = []
    if args.plots:
        pictures = plot_results(rows, out)
    return rows, pictures


def main(argv: list[str]) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        rows, pictures = run_experiment(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    failed = sum(row["status"] != "ok" for row in rows)
    print(f"{len(rows)} runs ({failed} failed): {Path(args.out) / 'results.csv'}, "
          f"{len(pictures)} plots in {args.out}", file=sys.stderr)
    return 1 if failed else 0
