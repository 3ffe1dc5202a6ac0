"""HashPartitionRouter: each key's rows, in arrival order, reach one long-lived run."""

from __future__ import annotations

import random

import pyarrow as pa

from matchsql.execution.router.hashed import HashPartitionRouter


class Recorder:
    def __init__(self, key: tuple, log: dict) -> None:
        self.key = key
        self.rows: list = log.setdefault(key, [])
        self.finished = False

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        self.rows.extend(batch.column("i").to_pylist())
        return [batch]

    def finish(self) -> list[pa.RecordBatch]:
        self.rows.append("end")
        return []


def test_rows_reach_their_partition_in_order():
    rng = random.Random(1)
    n = 5000
    a = [rng.choice(["x", "y", None]) for _ in range(n)]
    b = [rng.choice([1, 2, None]) for _ in range(n)]
    table = pa.table({"a": a, "b": b, "i": list(range(n))})
    log: dict = {}
    created: list[tuple] = []

    def new_run(key: tuple) -> Recorder:
        created.append(key)
        return Recorder(key, log)

    router = HashPartitionRouter(["a", "b"], new_run)
    out = 0
    for batch in table.to_batches(max_chunksize=317):
        out += sum(o.num_rows for o in router.route(batch))
    list(router.finish())
    assert out == n
    expected: dict = {}
    for i, key in enumerate(zip(a, b)):
        expected.setdefault(key, []).append(i)
    assert {k: v[:-1] for k, v in log.items()} == expected
    assert all(v[-1] == "end" for v in log.values())
    assert created == list(expected)  # one run per key, created in arrival order


def test_without_keys_one_run():
    log: dict = {}
    router = HashPartitionRouter([], lambda key: Recorder(key, log))
    list(router.route(pa.record_batch({"i": [1, 2]})))
    list(router.route(pa.record_batch({"i": [3]})))
    list(router.finish())
    assert log == {(): [1, 2, 3, "end"]}
