"""Run a hostile corpus in capped child processes and count what came back.

    python -m tests.hostile.run --count 2000          # the documented large run
    python -m tests.hostile.run --count 300 --show 20 # CI-sized, print failures
    python -m tests.hostile.run --live --count 2000   # streams, continuous queries, SET

Each statement runs in a worker process (tests/hostile/worker.py) with an
address-space cap; statements go to workers in batches so that start-up is
paid once per batch. A statement that runs past ``timeout`` seconds is a
timeout (its worker is killed and the batch resumes in a fresh one); a worker
that dies mid-statement is a crash. Only ``rows`` and ``error`` are good
outcomes.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.hostile.corpus import Case, generate
from tests.hostile.live_corpus import generate_live

ROOT = Path(__file__).resolve().parents[2]
GOOD = frozenset({"rows", "error"})
START_SECONDS = 600  # a worker's start-up (imports, demo table, kernels) on a busy machine


@dataclass
class Outcome:
    case: Case
    kind: str  # rows | error | traceback | exception | timeout | crash
    detail: str
    seconds: float


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    peak_rss_mib: int = 0
    wall_seconds: float = 0.0

    @property
    def bad(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind not in GOOD]

    def summary(self) -> str:
        counts = Counter(o.kind for o in self.outcomes)
        kinds = ("rows", "error", "exception", "traceback", "timeout", "crash")
        slowest = max((o.seconds for o in self.outcomes), default=0.0)
        return (
            f"{len(self.outcomes)} statements in {self.wall_seconds:.1f} s: "
            + ", ".join(f"{k} {counts.get(k, 0)}" for k in kinds)
            + f"; slowest {slowest:.2f} s; peak RSS {self.peak_rss_mib} MiB per worker"
        )


def run_batch(
    cases: list[Case], timeout: float, memory: int, live: bool = False
) -> tuple[list[Outcome], int]:
    """Run ``cases`` in worker processes, one after the other; their outcomes and peak RSS
    (``live``: in a worker's file database with streams, tests/hostile/live_corpus.py)."""
    outcomes: list[Outcome] = []
    peak = 0
    todo = list(cases)
    while todo:
        done, rss = _one_worker(todo, timeout, memory, live)
        outcomes += done
        peak = max(peak, rss)
        todo = todo[len(done) :]
    return outcomes, peak


def _one_worker(
    cases: list[Case], timeout: float, memory: int, live: bool
) -> tuple[list[Outcome], int]:
    """Feed ``cases`` to one worker until it finishes them, times out or dies."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(ROOT / ".numba_cache"), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.hostile.worker", str(memory), *(["--live"] if live else [])],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    by_id = {str(i): case for i, case in enumerate(cases)}
    outcomes: list[Outcome] = []
    rss = 0
    current: str | None = None
    started = time.monotonic()
    ready = False
    try:
        while True:
            limit = START_SECONDS if not ready else timeout
            try:
                line = lines.get(timeout=max(0.0, started + limit - time.monotonic()))
            except queue.Empty:
                if current is None and len(outcomes) == len(cases):
                    return outcomes, rss  # all answered; the worker is slow to exit
                if current is None and outcomes:
                    # The last statement returned but left work behind that kept the
                    # worker from taking the next one: its answer did not end its work.
                    last = outcomes[-1]
                    outcomes[-1] = Outcome(
                        last.case,
                        "timeout",
                        f"answered ({last.kind}: "
                        f"{last.detail[:100]}) but work went on past "
                        f"{timeout} s",
                        last.seconds,
                    )
                    return outcomes, rss
                if current is None:
                    raise RuntimeError(
                        "hostile worker stalled before its first statement"
                    ) from None
                outcomes.append(Outcome(by_id[current], "timeout", f"> {timeout} s", timeout))
                return outcomes, rss
            if not line:  # the worker died or finished
                status = proc.wait()
                if current is not None:
                    outcomes.append(
                        Outcome(
                            by_id[current],
                            "crash",
                            f"exit status {status}",
                            time.monotonic() - started,
                        )
                    )
                    return outcomes, rss
                if len(outcomes) < len(cases):
                    raise RuntimeError(f"hostile worker exited with status {status}")
                return outcomes, rss
            record = json.loads(line)
            if record.get("ready"):
                ready, started = True, time.monotonic()
                payload = "".join(
                    json.dumps({"id": key, "sql": case.sql}) + "\n" for key, case in by_id.items()
                )
                threading.Thread(target=_feed, args=(proc, payload), daemon=True).start()
            elif record.get("start"):
                current, started = record["id"], time.monotonic()
            elif "outcome" in record:
                outcomes.append(
                    Outcome(
                        by_id[record["id"]], record["outcome"], record["detail"], record["seconds"]
                    )
                )
                current, started = None, time.monotonic()
            elif "rss_mib" in record:
                rss = record["rss_mib"]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _pump(stream, lines: queue.Queue) -> None:
    """Move the worker's output lines to ``lines``; an empty string marks its end."""
    for line in stream:
        lines.put(line)
    lines.put("")
    stream.close()


def _feed(proc: subprocess.Popen, payload: str) -> None:
    """Write all statements (a pipe holds less than a large batch) and close stdin."""
    try:
        proc.stdin.write(payload)
        proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass  # the worker died or was killed: its outcome says so


def _warm_kernels(live: bool) -> None:
    """Run the worker's seed statements once without the memory cap, so that the
    capped workers load their compiled kernels from numba's cache: building them cold
    (a fresh clone, a changed kernel source) takes LLVM past the cap, and it aborts."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(ROOT / ".numba_cache"), PYTHONPATH=str(ROOT))
    subprocess.run(
        [sys.executable, "-m", "tests.hostile.worker", "0", *(["--live"] if live else [])],
        cwd=ROOT,
        env=env,
        input="",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        timeout=START_SECONDS,
        check=True,
    )


def run_corpus(
    cases: list[Case],
    timeout: float = 10.0,
    memory: int = 2 << 30,
    batch: int = 100,
    jobs: int = 2,
    live: bool = False,
) -> Report:
    report = Report()
    began = time.monotonic()
    _warm_kernels(live)
    batches = [cases[i : i + batch] for i in range(0, len(cases), batch)]
    with ThreadPoolExecutor(jobs) as pool:
        for outcomes, peak in pool.map(lambda b: run_batch(b, timeout, memory, live), batches):
            report.outcomes += outcomes
            report.peak_rss_mib = max(report.peak_rss_mib, peak)
    report.wall_seconds = time.monotonic() - began
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="statements to generate")
    parser.add_argument("--seed", type=int, default=14, help="generator seed")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per statement")
    parser.add_argument(
        "--memory-mib",
        type=int,
        default=2048,
        help="address space a statement may add to the warm worker's",
    )
    parser.add_argument("--batch", type=int, default=100, help="statements per worker")
    parser.add_argument("--jobs", type=int, default=2, help="workers at a time")
    parser.add_argument("--show", type=int, default=50, help="bad outcomes to print")
    parser.add_argument("--slowest", type=int, default=0, help="slowest statements to print")
    parser.add_argument(
        "--live",
        action="store_true",
        help="the statements around live data (tests/hostile/live_corpus.py)",
    )
    args = parser.parse_args(argv)
    cases = (generate_live if args.live else generate)(args.count, args.seed)
    report = run_corpus(
        cases, args.timeout, args.memory_mib << 20, args.batch, args.jobs, args.live
    )
    for o in report.bad[: args.show]:
        print(f"[{o.kind}] {o.case.family}: {o.detail[:300]}\n    {o.case.sql[:300]!r}")
    for o in sorted(report.outcomes, key=lambda o: -o.seconds)[: args.slowest]:
        print(f"{o.seconds:7.2f} s [{o.kind}] {o.case.family}: {o.case.sql[:200]!r}")
    print(report.summary())
    return 1 if report.bad else 0


if __name__ == "__main__":
    sys.exit(main())
