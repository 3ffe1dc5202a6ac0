"""Pull, push and adaptive input give the same matches over a live stream.

The mode is chosen with ``SET input_mode`` / ``SET adaptive_u``; the input
metrics of the query arrive in ``Result.stats`` when it ends.
"""

from __future__ import annotations

import pytest

from matchsql.execution.adaptive.modes import InputOptions
from matchsql.storage.demo import synthetic_trades
from matchsql.storage.shm_ring import W_HEAD_SEQ
from matchsql.testing.dejavu_queries import DEJAVU, over
from tests.streams.conftest import bounded, stream_word, wait_reopened
from tests.streams.test_live import PRODUCE_SYNTHETIC, QUERY, TRADES, one_shot

ROWS = 4000
WAIT_S = 30  # each query; the whole module stays well under this on a laptop


def run_live(con, spawn, mode: str, u: int) -> tuple[list[tuple], dict]:
    """Feed the stream from a real producer process and run the query in ``mode``."""
    con.sql(f"SET input_mode = '{mode}'")
    con.sql(f"SET adaptive_u = {u}")
    producer = spawn(PRODUCE_SYNTHETIC, str(ROWS), "300")
    result = con.sql(QUERY.format(source="trades"))
    rows = sorted(bounded(result.fetchall, WAIT_S))
    assert producer.wait(WAIT_S) == 0, producer.output()
    return rows, result.stats


@pytest.mark.parametrize("mode,u", [("pull", 0), ("push", 0), ("adaptive", 0), ("adaptive", 2)])
def test_same_matches_in_every_mode(con, spawn, mode, u):
    con.sql(TRADES)
    live, stats = run_live(con, spawn, mode, u)
    con.sql("SET input_mode = 'pull'")
    assert live == one_shot(con, ROWS)
    assert live
    assert stats["input_mode"] == mode
    assert stats["records"] == ROWS  # every tuple was routed once and sampled
    assert stats["result"] == len(live)
    assert stats["max_mem"] >= 0 and stats["max_queue"] >= 0
    if mode == "pull":
        assert stats["switches"] == 0


def test_default_is_pull_and_unknown_mode_is_refused():
    assert InputOptions().mode == "pull"
    with pytest.raises(ValueError):
        InputOptions("sideways")


DEJAVU_ROWS = 1500
DEJAVU_MODES = [
    ("pull", 0, "most_tuples"),
    ("push", 0, "most_tuples"),
    ("adaptive", 1, "most_tuples"),
    ("adaptive", 10, "total_pressure"),
    ("adaptive", "'auto'", "per_partition"),
]


@pytest.mark.parametrize("name", sorted(DEJAVU))
def test_dejavu_queries_equal_in_every_mode(con, spawn, name):
    # Thesis listings 5.1-5.4 over a live stream, each mode against the same
    # query over the archived rows. Q1/Q3 have no ORDER BY: arrival order.
    con.sql(TRADES)
    con.duckdb.register("trades_src", synthetic_trades(DEJAVU_ROWS, 5, 7))
    con.sql("CREATE OR REPLACE TABLE trades_table AS SELECT * FROM trades_src")
    expected = sorted(con.sql(over(DEJAVU[name], "trades_table")).fetchall())
    assert expected
    for mode, u, rule in DEJAVU_MODES:
        con.sql(f"SET input_mode = '{mode}'")
        con.sql(f"SET adaptive_u = {u}")
        con.sql(f"SET adaptive_rule = '{rule}'")
        written = stream_word("trades", W_HEAD_SEQ)
        producer = spawn(PRODUCE_SYNTHETIC, str(DEJAVU_ROWS), "100")
        wait_reopened("trades", written)  # the last round ended the stream
        result = con.sql(over(DEJAVU[name], "trades"))
        rows = sorted(bounded(result.fetchall, WAIT_S))
        assert producer.wait(WAIT_S) == 0, producer.output()
        assert rows == expected, (name, mode, u, rule)
        assert result.stats["records"] == DEJAVU_ROWS
