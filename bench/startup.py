"""Start-up time: how long ``matchsql`` takes to answer, next to Python's ``duckdb`` alone.

    python -m bench.startup [--repeat 7]

Each case is a fresh process, run ``--repeat`` times; the table shows the
median and the fastest wall time (the fastest is the least disturbed by
other load on the machine) and the median CPU time (user + system) of the
child, which load on a shared machine inflates far less than wall time:

* ``python -c "import duckdb"``: the floor, Python plus DuckDB's module;
* ``matchsql -c "SELECT 1"``: the whole command, plain SQL (the demo table
  is not built: nothing reads it);
* ``matchsql`` to its first prompt: the REPL in a pseudo-terminal, until
  ``matchsql>`` is drawn (needs pexpect);
* ``matchsql -c "<MATCH_RECOGNIZE>"``: the first MATCH_RECOGNIZE of a
  session over the demo table, which builds it (500,000 rows) and loads the
  compiled matchers from the numba cache (warmed by one run beforehand);
* the README's first query in a fresh process with an *empty* compile cache
  (a new temporary directory each run: what a user meets who skipped ``make``);
* ``matchsql warm-up`` into an empty cache (once: the install step), then, with
  that cache alone, the README's first query and a query shape that neither
  the warm-up nor anything before ran; the files in the cache are counted
  before and after, to show that the new shape compiled nothing.

Plus, once, the modules a ``SELECT 1`` imports that a matchsql user might
think heavy (numba, pandas, matplotlib, pyspark, prompt_toolkit, sqlglot, pyarrow,
numpy): none should be.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATCH = (
    "SELECT count(*) AS matches FROM trade MATCH_RECOGNIZE (PARTITION BY symbol "
    "ORDER BY ts MEASURES A.price AS p ONE ROW PER MATCH PATTERN (A B+ C) "
    "DEFINE B AS price < PREV(price), C AS price > PREV(price))"
)
README = (
    "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES A.price AS start_price, LAST(B.price) AS bottom, LAST(C.price) AS top "
    "ONE ROW PER MATCH PATTERN (A B+ C+) "
    "DEFINE B AS price < PREV(price), C AS price > PREV(price)) LIMIT 5"
)
#: A shape of its own: a bounded quantifier, an alternation, a running aggregate in
#: DEFINE, FIRST/LAST with offsets, SKIP TO FIRST, ALL ROWS PER MATCH.
NEW_SHAPE = (
    "SELECT count(*) FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES FIRST(U.volume, 1) AS v, LAST(D.price, 2) AS p, CLASSIFIER() AS c "
    "ALL ROWS PER MATCH AFTER MATCH SKIP TO FIRST D PATTERN (S (U | F){2,5} D{1,3}) "
    "DEFINE U AS price > PREV(price) AND AVG(U.volume) > 150, "
    "F AS price = PREV(price), D AS D.price < S.price)"
)
HEAVY = (
    "numba",
    "pandas",
    "matplotlib",
    "pyspark",
    "prompt_toolkit",
    "pygments",
    "tqdm",
    "sqlglot",
    "pyarrow",
    "numpy",
)


def _env(cache: str | None = None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PROMPT_TOOLKIT_NO_CPR="1", TERM="xterm")
    env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".numba_cache"))
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = cache
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's Python keeps its bytecode
    env["MATCHSQL_HISTORY"] = os.devnull
    return env


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], cache: str | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv`` (with ``cache`` as NUMBA_CACHE_DIR)."""
    started, cpu = time.perf_counter(), _cpu()
    subprocess.run(
        argv,
        env=_env(cache),
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    return time.perf_counter() - started, _cpu() - cpu


def _empty_cache(sql: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as cache:
        return _run([sys.executable, "-m", "matchsql", "-c", sql], cache)


def _files(directory: str) -> int:
    return sum(len(files) for _, _, files in os.walk(directory))


def _to_prompt() -> tuple[float, float]:
    import pexpect  # a dev dependency: only this case needs it

    started, cpu = time.perf_counter(), _cpu()
    child = pexpect.spawn(
        sys.executable,
        ["-m", "matchsql"],
        env=_env(),
        cwd=str(ROOT),
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 120),
    )
    child.expect("matchsql>")
    elapsed = time.perf_counter() - started
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    return elapsed, _cpu() - cpu  # CPU: the whole session, its exit included


def _imported_heavy() -> list[str]:
    code = (
        "import sys; from matchsql.cli import main; main(['-c', 'SELECT 1']); "
        f"print('HEAVY:', *(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(),
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.strip().splitlines()[-1].split()[1:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per case (default 7)")
    args = parser.parse_args(argv)
    python = sys.executable
    matchsql = [python, "-m", "matchsql"]
    warmed = tempfile.TemporaryDirectory()
    warm_up = _run([*matchsql, "warm-up", "--quiet"], warmed.name)
    before = _files(warmed.name)
    cold = max(2, args.repeat // 3)  # a few runs: each compiles for seconds
    cases = [
        ('python -c "import duckdb"', args.repeat, lambda: _run([python, "-c", "import duckdb"])),
        ('matchsql -c "SELECT 1"', args.repeat, lambda: _run([*matchsql, "-c", "SELECT 1"])),
        ("matchsql, to the first prompt", args.repeat, _to_prompt),
        (
            'matchsql -c "<first MATCH_RECOGNIZE>"',
            args.repeat,
            lambda: _run([*matchsql, "-c", MATCH]),
        ),
        ("README query, empty compile cache", cold, lambda: _empty_cache(README)),
        (
            "README query, cache of the warm-up",
            args.repeat,
            lambda: _run([*matchsql, "-c", README], warmed.name),
        ),
        (
            "new query shape, cache of the warm-up",
            args.repeat,
            lambda: _run([*matchsql, "-c", NEW_SHAPE], warmed.name),
        ),
    ]
    _run([*matchsql, "-c", MATCH])  # fills the numba cache
    print(f"Start-up time, wall seconds (load average {os.getloadavg()[0]:.1f} at start)\n")
    print(f"| {'case':<40} | {'runs':>4} | {'median s':>8} | {'fastest s':>9} | {'CPU s':>6} |")
    print(f"|{'-' * 42}|{'-' * 6}|{'-' * 10}|{'-' * 11}|{'-' * 8}|")
    for label, repeat, measure in cases:
        runs = [measure() for _ in range(repeat)]
        wall = sorted(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(
            f"| {label:<40} | {repeat:>4} | {statistics.median(wall):8.3f} | {wall[0]:9.3f} "
            f"| {cpu:6.3f} |",
            flush=True,
        )
    after = _files(warmed.name)
    warmed.cleanup()
    print(
        f"\nmatchsql warm-up into an empty cache: {warm_up[0]:.1f} s wall, {warm_up[1]:.1f} s "
        f"CPU; files in that cache before the two cases that use it: {before}, after: "
        f"{after} ({'nothing compiled' if after == before else 'something compiled'})"
    )
    heavy = _imported_heavy()
    print(f'heavy modules imported by -c "SELECT 1": {", ".join(heavy) or "none"}')


if __name__ == "__main__":
    main()
