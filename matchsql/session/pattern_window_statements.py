"""A statement with a row pattern window (``m OVER w``, see
:mod:`matchsql.session.window_measures`) and its EXPLAIN [ANALYZE], run for the
MATCH_RECOGNIZE handler.

The classifier only sees the words of a row pattern window; whether the statement
really has one is known once the window is analysed, so the handler asks here first
and takes the statement itself when the answer is False.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import pyarrow as pa

from matchsql.results.result import table_result
from matchsql.runtime.deep import run_deep
from matchsql.session.host import MatchStatements
from matchsql.session.window_measures import WindowMeasures


def run_pattern_windows(
    runner: MatchStatements, statement: str, analyze: bool, head: int
) -> Any | Literal[False]:
    """A statement with a row pattern window: its Result or EXPLAIN (``head``: where the
    explained statement starts; 0 for no EXPLAIN); False when it has no such window
    after all."""
    windows = WindowMeasures(runner)
    if not head:
        return run_deep(lambda: windows.run(statement))
    explained = " " * head + statement[head:]
    lines = run_deep(lambda: windows.explain_lines(explained))
    if not lines:
        return False
    if analyze:  # run it to its end: the statement's rows and time
        started = time.perf_counter()
        result = run_deep(lambda: windows.run(explained))
        rows = 0
        if result:
            try:
                rows = sum(b.num_rows for b in result.fetch_batches())
            finally:
                result.close()
        elapsed = time.perf_counter() - started
        lines += [
            "-- statement",
            f"analyze: rows {rows:,}",
            f"analyze: total {elapsed * 1000:.3f} ms",
        ]
    return table_result(pa.table({"explain": pa.array(lines, pa.string())}))
