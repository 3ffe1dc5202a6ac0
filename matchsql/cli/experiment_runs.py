"""One run of ``matchsql experiment``: a query over a live stream fed by a producer process.

A run replays synthetic trades (:mod:`matchsql.cli.experiment_data`) into a
fresh live stream from a producer **process** that paces its writes to the
target input rate, while the connection runs one of the thesis' queries
Q1-Q4 (:mod:`matchsql.testing.dejavu_queries`, reading the stream instead of ``trade``) to
the end of the stream in one input mode. The run's input metrics
(``Result.stats``) become one results row (:data:`COLUMNS`).

One producer process serves every run of an experiment (see
:func:`matchsql.cli.experiment_data.serve`); after a run that failed while
it was writing it is replaced by a fresh one, so no run inherits a producer
in an unknown state.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from matchsql.cli.experiment_plots import series_label
from matchsql.testing.dejavu_queries import DEJAVU, over

METRICS = (
    "avg_mem",
    "max_mem",
    "avg_queue",
    "max_queue",
    "result",
    "time",
    "throughput",
    "records",
    "latency",
    "switches",
    "suspended_s",
    "pulled",
)
#: The CSV header: the run's coordinates, the thesis' columns, then bookkeeping.
COLUMNS = (
    "query",
    "mode",
    "u",
    "rule",
    "rate",
    "repeat",
    *METRICS,
    "produced",
    "producer_rate",
    "saturation",
    "status",
    "error",
)
STREAM_COLUMNS = "symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP"
MIN_CAPACITY = 1 << 20
MAX_CAPACITY = 1 << 24  # tuples the stream's ring may queue (a slower reader blocks the writer)
AUTO = "auto"  # the U value that lets the switch choose U (SET adaptive_u = 'auto')
PRODUCER = (
    "import sys; from matchsql.cli.experiment_data import serve; "
    "sys.exit(serve(sys.stdin, sys.stdout))"
)


@dataclass(frozen=True)
class Run:
    """One point of the grid, and which repetition of it."""

    query: str
    mode: str
    u: int | str | None  # adaptive only; a whole number or "auto"
    rule: str | None  # adaptive only
    rate: float
    rows: int
    repeat: int = 0

    @property
    def label(self) -> str:
        """The line this run belongs to in the plots."""
        return series_label(self.mode, self.u, self.rule)


class RunFailed(Exception):
    """A run could not be measured; the message says why."""


# -- the producer process ---------------------------------------------------------------


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


class ProducerProcess:
    """The parent's end of :func:`~matchsql.cli.experiment_data.serve`."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PRODUCER],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.busy = False  # a run was started and has not finished
        self.stderr: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._threads = [
            threading.Thread(target=target, daemon=True)
            for target in (self._read_stdout, self._drain_stderr)
        ]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.strip())
        self._lines.put(None)

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def prepare(
        self, stream: str, run: Run, *, symbols: int, seed: int, skew: str, timeout: float
    ) -> None:
        """Have the producer make the run's data and attach to ``stream``; wait for it."""
        self.busy = True
        self._send(f"run {stream} {run.rows} {symbols} {seed} {float(run.rate)!r} {skew}")
        if self._expect(timeout) != "ready":
            raise RunFailed("producer did not start: " + self.describe())

    def go(self) -> None:
        """Start writing (the query is reading by then)."""
        self._send("go")

    def finish(self, timeout: float) -> tuple[int, float]:
        """Rows written and the achieved rate, from the producer's ``done`` line."""
        line = self._expect(timeout)
        words = (line or "").split()
        if len(words) != 3 or words[0] != "done":
            if line is None and self.proc.poll() not in (None, 0):
                raise RunFailed(
                    f"producer exited with status {self.proc.returncode}: " + self.describe()
                )
            raise RunFailed("producer gave no summary: " + self.describe())
        self.busy = False
        rows, seconds = int(words[1]), float(words[2])
        return rows, rows / seconds if seconds > 0 else 0.0

    def _send(self, text: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(text + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise RunFailed("producer is gone: " + self.describe()) from None

    def _expect(self, timeout: float) -> str | None:
        """The producer's next line; None at its end or after ``timeout`` seconds."""
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def describe(self) -> str:
        """The last line the producer wrote on stderr, or its exit status."""
        try:
            self.proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        self._threads[1].join(0.5 if self.proc.poll() is not None else 0)
        text = "".join(self.stderr).strip().splitlines()
        return text[-1] if text else f"exit status {self.proc.poll()}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


# -- one run ----------------------------------------------------------------------------


class Bench:
    """What every run of an experiment shares: the connection, the producer process and
    the stream's shape (symbols, skew, seed). :meth:`measure` makes one run."""

    def __init__(
        self,
        con,
        *,
        symbols: int,
        skew: str,
        seed: int,
        timeout: float,
        memory_budget: int | None = None,
        stream: str | None = None,
    ) -> None:
        self.con = con
        self.symbols, self.skew, self.seed = symbols, skew, seed
        self.timeout = timeout
        self.memory_budget = memory_budget
        self.stream = stream or f"mx_experiment_{os.getpid()}"
        self._producer: ProducerProcess | None = None

    def measure(self, run: Run, *, seed: int | None = None, timeout: float | None = None) -> dict:
        """One run; a dict with :data:`COLUMNS` (status ok or failed, never raises).

        ``timeout`` (default: the bench's) abandons a run whose query goes on longer;
        the producer's start (a fresh process imports pyarrow) and its data are
        waited for up to the bench's timeout.
        """
        row = _row_head(run)
        producer: ProducerProcess | None = None
        timeout = self.timeout if timeout is None else timeout
        try:
            self._configure(run)
            self._create_stream(run.rows)
            producer = self._producer = self._producer or ProducerProcess()
            producer.prepare(
                self.stream,
                run,
                symbols=self.symbols,
                seed=self.seed if seed is None else seed,
                skew=self.skew,
                timeout=self.timeout,
            )
            result = self.con.sql(over(DEJAVU[run.query], self.stream))
            matches = _drain(self.con, result, producer, timeout)
            produced, producer_rate = producer.finish(timeout)
            _fill_metrics(row, result, matches, produced, producer_rate)
        except Exception as exc:  # noqa: BLE001 - any failure marks the run, the experiment goes on
            _mark_failed(row, exc, producer)
        finally:
            if producer is not None and producer.busy:
                producer.kill()  # stopped mid-run: the next run gets a fresh one
                self._producer = None
            self._drop_stream()
        return row

    def _configure(self, run: Run) -> None:
        self.con.sql(f"SET input_mode = '{run.mode}'")
        if run.u == AUTO:
            self.con.sql("SET adaptive_u = 'auto'")
            if self.memory_budget is not None:
                self.con.sql(f"SET adaptive_memory_budget = {int(self.memory_budget)}")
        else:
            self.con.sql(f"SET adaptive_u = {int(run.u or 0)}")
        if run.rule:
            self.con.sql(f"SET adaptive_rule = '{run.rule}'")

    def _create_stream(self, rows: int) -> None:
        capacity = max(MIN_CAPACITY, min(MAX_CAPACITY, rows + 1))
        self.con.sql(f"DROP STREAM IF EXISTS {self.stream}")
        self.con.sql(f"CREATE STREAM {self.stream} ({STREAM_COLUMNS}) WITH (capacity = {capacity})")

    def _drop_stream(self) -> None:
        try:
            self.con.sql(f"DROP STREAM IF EXISTS {self.stream}")
        except Exception:  # noqa: BLE001 - a failed drop must not end the experiment
            pass

    def close(self) -> None:
        """End the producer process (its input ends; killed if it does not exit)."""
        if self._producer is not None:
            try:
                assert self._producer.proc.stdin is not None
                self._producer.proc.stdin.close()
                self._producer.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self._producer.kill()
            self._producer = None


def _row_head(run: Run) -> dict:
    return {
        "query": run.query,
        "mode": run.mode,
        "u": "" if run.u is None else run.u,
        "rule": run.rule or "",
        "repeat": run.repeat,
        "status": "ok",
        "error": "",
        "saturation": "",
        "rate": int(run.rate) if float(run.rate).is_integer() else run.rate,
    }


def _fill_metrics(row: dict, result, matches: int, produced: int, producer_rate: float) -> None:
    stats = dict(result.stats or {})
    if not stats:
        raise RunFailed("the query reported no input metrics")
    for name in METRICS:
        row[name] = stats.get(name, "")
    row["result"] = matches
    row["produced"], row["producer_rate"] = produced, round(producer_rate, 1)


def _mark_failed(row: dict, exc: Exception, producer: ProducerProcess | None) -> None:
    row["status"] = "failed"
    reason = str(exc).strip().splitlines()
    row["error"] = (reason[0] if reason else type(exc).__name__)[:300]
    if producer is not None and not isinstance(exc, RunFailed):
        if producer.proc.poll() not in (None, 0):
            row["error"] += f" (producer: {producer.describe()})"


def _drain(con, result, producer: ProducerProcess, timeout: float) -> int:
    """Count the query's result rows; a watchdog starts the producer and stops a stuck run."""
    fetching = threading.Event()
    finished = threading.Event()
    why: list[str] = []

    def watch() -> None:
        fetching.wait()
        time.sleep(0.01)  # the query opens its reader first; then the producer writes
        try:
            producer.go()
        except RunFailed as exc:
            why.append(str(exc))
            con.interrupt()
            return
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
