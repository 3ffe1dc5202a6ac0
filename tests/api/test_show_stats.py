"""SHOW STATS: the input metrics of the connection's last continuous query."""

from __future__ import annotations

import pytest

import matchsql
from matchsql.storage import Producer
from matchsql.storage.demo import synthetic_trades
from tests.streams.conftest import bounded
from tests.streams.test_live import QUERY, TRADES


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(tmp_path / "runtime"))


@pytest.fixture
def con():
    connection = matchsql.connect(demo=False)
    yield connection
    connection.close()


def test_empty_before_any_continuous_query(con) -> None:
    result = con.sql("show stats;")
    assert result.columns == ["metric", "value"]
    assert result.fetchall() == []
    assert con.last_stats is None
    con.sql("SELECT 1")  # a one-time query leaves no metrics either
    assert con.sql("SHOW STATS").fetchall() == []


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_metrics_of_the_last_continuous_query(con, mode) -> None:
    con.sql(TRADES)
    con.sql(f"SET input_mode = '{mode}'")
    result = con.sql(QUERY.format(source="trades"))
    with Producer.open("trades") as producer:
        producer.write_batch(synthetic_trades(1500, 5, 7))
    matches = bounded(result.fetchall, 30)
    con.sql("SELECT 42")  # other statements in between don't replace the metrics
    rows = dict(con.sql("SHOW STATS").fetchall())
    assert list(rows)[:10] == [
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
    ]
    assert rows["records"] == 1500.0
    assert rows["result"] == float(len(matches))
    assert all(isinstance(v, float) for v in rows.values())
    assert con.last_stats["input_mode"] == mode
