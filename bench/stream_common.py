"""Helpers of the live-stream benchmarks: a scratch stream and a producer process."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import matchsql

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def scratch_stream(
    con: matchsql.Connection, name: str, columns: str, options: str = ""
) -> Iterator[str]:
    """Create stream ``name`` for the duration of the block."""
    con.sql(f"DROP STREAM IF EXISTS {name}")
    con.sql(f"CREATE STREAM {name} ({columns}){' WITH (' + options + ')' if options else ''}")
    try:
        yield name
    finally:
        con.sql(f"DROP STREAM IF EXISTS {name}")


def spawn_producer(code: str, *args: str) -> subprocess.Popen:
    """Run a producer script in a separate Python process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]
