"""Bucket placement and rebalancing: the decisions, and a skewed query that triggers them."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import matchsql
from matchsql.execution.workers.balance import Load, Rebalancer, in_ranges, least_loaded, spread
from matchsql.execution.workers.worker_router import bucket_of


def _load(routed, queued, owner, recent, migrating=()) -> Load:
    return Load(tuple(routed), tuple(queued), dict(owner), dict(recent), frozenset(migrating))


def test_new_bucket_goes_to_the_least_loaded_worker() -> None:
    assert least_loaded(_load([500, 200, 300], [0, 0, 0], {}, {})) == 1
    assert least_loaded(_load([7, 7], [0, 0], {}, {})) == 0  # ties: the lowest number


def test_busiest_bucket_leaves_a_saturated_worker() -> None:
    policy = Rebalancer(ratio=2.0, min_rows=1_000)
    owner = {1: 0, 2: 0, 3: 1, 4: 0}
    recent = {1: 50, 2: 900, 3: 10, 4: 300}
    assert policy.decide(_load([9_000, 1_000], [8_000, 1_000], owner, recent)) == [(2, 1)]


def test_no_move_when_balanced_small_busy_or_moving() -> None:
    policy = Rebalancer(ratio=2.0, min_rows=1_000)
    owner = {1: 0, 2: 0, 3: 1}
    recent = {1: 50, 2: 900, 3: 10}
    assert policy.decide(_load([0, 0], [3_000, 2_000], owner, recent)) == []  # ratio < 2
    assert policy.decide(_load([0, 0], [900, 10], owner, recent)) == []  # below min_rows
    assert policy.decide(_load([0, 0], [8_000, 10], owner, recent, migrating=[3])) == []
    assert policy.decide(_load([0, 0], [10, 8_000], owner, recent)) == []  # worker 1: one bucket


def test_bucket_hash_is_stable() -> None:
    assert bucket_of(("k1",), 64) == bucket_of(("k1",), 64)
    assert len({bucket_of((f"k{i}",), 64) for i in range(1_000)}) == 64


def test_rebalancing_keeps_rows_and_shows_in_show_workers() -> None:
    """A few huge partitions and many small ones; an eager rebalancer moves buckets."""
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "FIRST(ts) AS s, COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+ C) "
        "DEFINE B AS v > PREV(v), C AS v < PREV(v))"
    )
    setup = (
        "CREATE TABLE t AS SELECT CASE WHEN i % 10 < 6 THEN i % 4 ELSE i % 400 END AS p, "
        "i AS ts, hash(i) % 997 AS v FROM range(400000) r(i)"
    )
    single = matchsql.connect(demo=False, batch_size=2_048)
    con = matchsql.connect(demo=False, workers=2, batch_size=2_048)
    try:
        single.sql(setup)
        con.sql(setup)
        expected = single.sql(query).fetchall()
        session = con._executor.workers
        session.policy_factory = lambda: Rebalancer(ratio=1.05, min_rows=1)
        moved = 0
        for _ in range(3):
            assert con.sql(query).fetchall() == expected
            moved += len(session.last.migrations)
        assert moved > 0
        show = con.sql("SHOW WORKERS").arrow().to_pylist()
        assert sum(r["migrations_in"] for r in show) == len(session.last.migrations)
        assert sum(r["migrations_out"] for r in show) == len(session.last.migrations)
        assert all(r["queued_rows"] == 0 for r in show)  # the query is over
        owners = [b for r in show for b in r["buckets"].split(",") if b]
        assert sorted(map(int, owners)) == sorted(session.last.owner)
    finally:
        single.close()
        con.close()


def test_known_buckets_spread_largest_first() -> None:
    owner = spread({1: 900, 2: 500, 3: 400, 4: 100, 5: 100}, 2)
    loads = [
        sum(rows for b, rows in {1: 900, 2: 500, 3: 400, 4: 100, 5: 100}.items() if owner[b] == w)
        for w in range(2)
    ]
    assert owner[1] == 0 and owner[2] == 1 and owner[3] == 1  # 900 | 500 + 400
    assert sorted(loads) == [1000, 1000]
    assert spread({}, 3) == {}


def test_new_buckets_spread_on_top_of_the_rows_routed_so_far() -> None:
    # Worker 0 has 600 rows already: the largest new bucket goes to worker 1, and the
    # rest fill up whichever is behind.
    owner = spread({7: 500, 8: 300, 9: 200}, 2, loads=[600, 0])
    assert owner == {7: 1, 8: 1, 9: 0}
    assert spread({7: 10}, 3, loads=[5, 5, 4]) == {7: 2}


@given(st.lists(st.integers(0, 5_000), min_size=1, max_size=300), st.integers(1, 64))
def test_range_buckets_are_runs_of_consecutive_partitions_of_about_equal_rows(
    rows: list[int], buckets: int
) -> None:
    bucket = in_ranges(np.array(rows), buckets)
    assert len(bucket) == len(rows)
    assert ((0 <= bucket) & (bucket < buckets)).all()
    assert (np.diff(bucket) >= 0).all()  # runs: a bucket's partitions are consecutive
    # A bucket holds the partitions whose middle row falls in its share of the rows: at
    # most that share plus the halves of the two partitions on its edges.
    share = sum(rows) / buckets
    sizes = np.bincount(bucket, weights=rows, minlength=buckets)
    assert (sizes <= share + max(rows) + 1).all()


def test_a_partition_longer_than_a_bucket_share_has_its_bucket_to_itself() -> None:
    rows = np.array([10] * 50 + [10_000] + [10] * 50)
    bucket = in_ranges(rows, 8)
    hot = bucket[50]
    assert (bucket == hot).sum() == 1 and bucket[49] < hot < bucket[51]
