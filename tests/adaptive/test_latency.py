"""Latency: enqueue instants travel from the producer's frames to the input metrics."""

from __future__ import annotations

import time

import pytest

import matchsql
from matchsql.execution.adaptive.metrics import InputMetrics
from matchsql.storage import Producer
from matchsql.storage.catalog import Catalog
from matchsql.storage.demo import synthetic_trades
from matchsql.storage.live_reader import LiveReader
from tests.streams.conftest import bounded
from tests.streams.test_live import QUERY, TRADES


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(tmp_path / "runtime"))


def test_selected_batch_adds_rows_times_wait() -> None:
    m = InputMetrics()
    m.selected_batch(3, enqueue_sum_ns=3 * 1_000_000_000, now_ns=1_500_000_000)  # each waited 0.5 s
    m.selected_batch(1, enqueue_sum_ns=2_000_000_000, now_ns=2_100_000_000)  # 0.1 s
    m.selected_batch(0, enqueue_sum_ns=5, now_ns=10)  # nothing selected: no effect
    assert m.latency_count == 4
    assert m.row()["latency"] == pytest.approx((3 * 0.5 + 0.1) / 4)


def test_reader_reports_the_weighted_enqueue_sum() -> None:
    con = matchsql.connect(demo=False)
    try:
        con.sql(TRADES)
        definition = Catalog(None).get("trades")
        reader = LiveReader(definition).open()
        try:
            before = time.monotonic_ns()
            with Producer.open("trades") as producer:
                for batch in synthetic_trades(300, 3, 1).to_batches(max_chunksize=100):
                    producer.write_batch(batch)
                    producer.flush()
            after = time.monotonic_ns()
            rows, total = 0, 0
            while (item := reader.read()) is not None:
                rows += item[1].num_rows
                total += reader.last_enqueue_sum_ns
            assert rows == 300
            assert 300 * before <= total <= 300 * after  # every tuple stamped inside the writes
        finally:
            reader.close()
    finally:
        con.close()


@pytest.mark.parametrize("mode", ["pull", "push", "adaptive"])
def test_query_reports_latency(mode) -> None:
    con = matchsql.connect(demo=False)
    try:
        con.sql(TRADES)
        con.sql(f"SET input_mode = '{mode}'")
        result = con.sql(QUERY.format(source="trades"))
        with Producer.open("trades") as producer:
            producer.write_batch(synthetic_trades(2000, 5, 7))
        bounded(result.fetchall, 120)  # a hang guard: a cold numba cache compiles here
        stats = result.stats
        assert stats["records"] == 2000
        assert 0 < stats["latency"] < 30
    finally:
        con.close()
