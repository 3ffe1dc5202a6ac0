"""Input metrics: sampling on every routed tuple, first-selection latency."""

from __future__ import annotations

import pytest

from matchsql.execution.adaptive.metrics import InputMetrics


def test_row_has_the_thesis_columns() -> None:
    m = InputMetrics()
    m.start(10.0)
    for held, queued in [(1, 4), (3, 2), (2, 0)]:
        m.routed(held, queued)
    m.selected(0, enqueued=10.0, now=10.5)
    m.selected(0, enqueued=10.0, now=11.0)  # a second evaluation of tuple 0: ignored
    m.selected(1, enqueued=10.2, now=10.4)
    m.matched(2)
    m.switches = 3
    m.finish(12.0)
    row = m.row()
    assert row["avg_mem"] == 2 and row["max_mem"] == 3
    assert row["avg_queue"] == 2 and row["max_queue"] == 4
    assert row["records"] == 3 and row["result"] == 2 and row["switches"] == 3
    assert row["time"] == 2.0 and row["throughput"] == 1.5
    assert row["latency"] == pytest.approx((0.5 + 0.2) / 2)


def test_empty_query_has_zero_row() -> None:
    row = InputMetrics().row()
    assert row == {
        "avg_mem": 0.0,
        "max_mem": 0,
        "avg_queue": 0.0,
        "max_queue": 0,
        "result": 0,
        "time": 0.0,
        "throughput": 0.0,
        "records": 0,
        "latency": 0.0,
        "switches": 0,
        "idle_s": 0.0,
        "suspended_s": 0.0,
        "wake_ms": 0.0,
        "pulled": 0,
        "u": 0,
        "u_changes": 0,
        "unit_shrink": 0,
    }
