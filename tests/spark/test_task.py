"""One Spark task's matching (``run_task``), called directly: the embedded engine's rows.

A task gets every row of its keys in no particular order, as a shuffle hands them
over. These tests give it event-shaped rows (hundreds of short partitions of uneven
sizes, one longer than a batch, NULL and NaN keys, ties broken by an id), shuffled
and cut into arbitrary batches, and compare with the embedded engine over the same
table. No Spark session is needed: this is the code each executor runs.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from matchsql.config import Config
from matchsql.integrations.spark.spark_plan import build_plan
from matchsql.integrations.spark.worker import groupable, partition_ends, run_task

from .helpers import canonical, embedded


def events(seed: int = 5, partitions: int = 300) -> pa.Table:
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, rng.lognormal(2.5, 1.0, partitions).astype(np.int64))
    sizes[0] = 3000  # longer than the batch size the tests set
    n = int(sizes.sum())
    key = np.repeat(np.arange(partitions), sizes)
    name = np.array([f"k{k:03d}" if k % 37 else None for k in range(partitions)], dtype=object)
    weight = np.where(np.arange(partitions) % 41 == 0, np.nan, np.arange(partitions) * 0.5)
    ts = rng.integers(0, 500, n)  # ties within a key, broken by id
    return pa.table(
        {
            "name": pa.array(name[key].tolist(), pa.string()),
            "w": pa.array(weight[key]),
            "ts": pa.array(ts),
            "id": pa.array(np.arange(n)),
            "v": pa.array(rng.normal(0, 10, n).round(1), mask=rng.random(n) < 0.05),
        }
    )


QUERIES = {
    "row-local": ("A B+ C+", "B AS v < PREV(v), C AS v > PREV(v)", "ONE ROW PER MATCH"),
    "registers": ("A B+", "B AS B.v > A.v", "ALL ROWS PER MATCH"),
}


def shuffled_batches(table: pa.Table, seed: int) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(seed)
    mixed = table.take(pa.array(rng.permutation(table.num_rows)))
    cuts = np.sort(rng.choice(np.arange(1, mixed.num_rows), 7, replace=False))
    edges = [0, *cuts.tolist(), mixed.num_rows]
    return [
        mixed.slice(a, b - a).combine_chunks().to_batches()[0]
        for a, b in zip(edges[:-1], edges[1:])
    ]


@pytest.mark.parametrize("keys", ["name", "w", "name, w"])
@pytest.mark.parametrize("query", list(QUERIES))
def test_a_task_gives_the_embedded_engines_rows(keys: str, query: str) -> None:
    pattern, define, rows_per_match = QUERIES[query]
    sql = (
        f"SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY {keys} ORDER BY ts, id "
        "MEASURES MATCH_NUMBER() AS m, COUNT(*) AS n, LAST(v) AS lv "
        f"{rows_per_match} PATTERN ({pattern}) DEFINE {define})"
    )
    table = events()
    plan = build_plan(sql, "ev", table.schema)
    got = [
        tuple(r.values())
        for b in run_task(plan, Config(batch_size=1024), shuffled_batches(table, 1))
        for r in b.to_pylist()
    ]
    expected = embedded("ev", table, sql)
    assert len(expected) > 500
    assert canonical(_nan_free(got)) == canonical(_nan_free(expected))


def _nan_free(rows: list[tuple]) -> list[tuple]:
    """NaN keys as a marker: NaN is unequal to itself, so rows holding one never compare
    equal."""
    return [tuple("NaN" if isinstance(v, float) and v != v else v for v in row) for row in rows]


def test_an_empty_task_gives_no_rows() -> None:
    table = events()
    sql = (
        "SELECT * FROM ev MATCH_RECOGNIZE (PARTITION BY name ORDER BY ts, id "
        "MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS v > PREV(v))"
    )
    plan = build_plan(sql, "ev", table.schema)
    empty = pa.RecordBatch.from_pylist([], schema=table.schema)
    assert list(run_task(plan, None, [empty])) == []
    assert list(run_task(plan, None, [])) == []


def test_partition_ends_take_nulls_and_nans_as_one_key() -> None:
    table = pa.table(
        {
            "k": pa.array([None, None, 1.0, 1.0, float("nan"), float("nan"), 2.0]),
            "s": pa.array(["a", "a", "a", "b", "b", "b", None]),
        }
    )
    assert partition_ends(table, ["k"]).tolist() == [2, 4, 6, 7]
    assert partition_ends(table, ["k", "s"]).tolist() == [2, 3, 4, 6, 7]
    assert partition_ends(table.slice(0, 0), ["k"]).tolist() == []


def test_nested_keys_are_left_to_sparks_grouping() -> None:
    schema = pa.schema([("k", pa.list_(pa.int64())), ("s", pa.string())])
    assert not groupable(schema, ["k"]) and groupable(schema, ["s"])
