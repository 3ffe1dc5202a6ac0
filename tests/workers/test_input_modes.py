"""Push and adaptive input with ``SET workers = N``: the router's push thread reads the stream.

The matches must be those of ``workers = 1`` in the same input mode (which
equal the one-time query over the same tuples), with and without buckets
migrating while the push thread keeps reading; the input metrics must count
every tuple once and the workers' runs' buffered rows.
"""

from __future__ import annotations

import pytest

import matchsql
from matchsql.execution.workers.balance import RandomMigrations
from matchsql.execution.workers.stream_router import StreamRouter
from tests.streams.conftest import bounded, runtime_dir, spawn  # noqa: F401 - fixtures
from tests.workers.test_streams import PRODUCE, QUERIES, TRADES, one_shot

ROWS, CHUNK, SYMBOLS = 6000, 500, 30


def live(
    spawn,  # noqa: F811
    workers: int,
    mode: str,
    u: int,
    rule: str,
    query: str,
    injector: RandomMigrations | None = None,
) -> tuple[list[tuple], dict, object, list]:
    con = matchsql.connect(demo=False, workers=workers, batch_size=300)
    try:
        if injector is not None:
            con._executor.workers.policy_factory = lambda: injector
        con.sql(TRADES)
        con.sql(f"SET input_mode = '{mode}'")
        con.sql(f"SET adaptive_u = {u}")
        con.sql(f"SET adaptive_rule = '{rule}'")
        producer = spawn(PRODUCE, str(ROWS), str(CHUNK), str(SYMBOLS))
        result = con.sql(query.format(source="trades"))
        rows = sorted(bounded(result.fetchall), key=repr)
        assert producer.wait() == 0
        con.sql("DROP STREAM trades")
        show = con.sql("SHOW WORKERS").arrow().to_pylist()
        return rows, result.stats, con._executor.workers.last, show
    finally:
        con.close()


@pytest.mark.parametrize(
    "mode,u,rule",
    [("push", 0, "most_tuples"), ("adaptive", 2, "most_tuples"), ("adaptive", 0, "total_pressure")],
)
def test_push_and_adaptive_on_workers_equal_one_process(
    spawn,  # noqa: F811
    mode: str,
    u: int,
    rule: str,
) -> None:
    query = QUERIES[0]
    single, single_stats, _, _ = live(spawn, 1, mode, u, rule, query)
    rows, stats, router, show = live(spawn, 2, mode, u, rule, query)
    assert isinstance(router, StreamRouter)  # it did run on the workers
    assert router.partitions == SYMBOLS and len(set(router.owner.values())) == 2
    assert rows == single and rows
    assert rows == one_shot(query, ROWS, SYMBOLS)
    assert stats["input_mode"] == mode and single_stats["input_mode"] == mode
    assert stats["records"] == ROWS and stats["result"] == len(rows)
    # A B+ C* D+ keeps each open attempt's rows: the workers report them.
    assert stats["max_mem"] > 0 and stats["avg_mem"] > 0
    assert stats["latency"] > 0
    # SHOW WORKERS: both workers matched, every tuple once, the buckets split between them.
    assert [w["worker"] for w in show] == [0, 1] and all(w["alive"] for w in show)
    assert sum(w["rows_matched"] for w in show) == ROWS
    assert all(w["rows_matched"] > 0 and w["buckets"] for w in show)
    assert sum(w["queued_rows"] for w in show) == 0  # all answered


@pytest.mark.parametrize("seed", range(3))
def test_random_migrations_under_push_input(spawn, seed: int) -> None:  # noqa: F811
    mode = ("push", "adaptive")[seed % 2]
    query = QUERIES[seed % len(QUERIES)]
    injector = RandomMigrations(seed, rate=1.0)
    rows, stats, router, show = live(
        spawn, 2 + seed % 2, mode, seed, "most_tuples", query, injector
    )
    assert isinstance(router, StreamRouter)
    assert router.migrations and any(m.open_partitions for m in router.migrations)
    assert rows == one_shot(query, ROWS, SYMBOLS) and rows
    assert stats["records"] == ROWS
    moved = sum(w["migrations_out"] for w in show)
    assert moved == len(router.migrations) == sum(w["migrations_in"] for w in show)


def test_pull_metrics_on_workers_do_not_fetch_the_runs(spawn, monkeypatch) -> None:  # noqa: F811
    """Pull input samples the held rows per batch: from the answers, not a dump of every
    run's state (which would cost a round of snapshots per batch)."""
    dumps = []
    original = StreamRouter.runs.fget

    def counted(self):
        dumps.append(1)
        return original(self)

    monkeypatch.setattr(StreamRouter, "runs", property(counted, StreamRouter.runs.fset))
    rows, stats, router, _ = live(spawn, 2, "pull", 0, "most_tuples", QUERIES[0])
    assert isinstance(router, StreamRouter)
    assert not dumps
    assert stats["records"] == ROWS and stats["max_mem"] > 0
    assert rows == one_shot(QUERIES[0], ROWS, SYMBOLS)
