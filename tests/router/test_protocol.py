"""Every live router is a Router: ``run`` routes each batch then ends, ``buffered_rows``
counts what the runs keep, ``close`` can always be called (no caller asks a router's kind)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from matchsql.execution.router.hashed import HashPartitionRouter
from matchsql.execution.router.partitions import SortedPartitionRouter
from matchsql.execution.router.protocol import LiveRouter


class KeepAll:
    """A partition run that keeps every row until its end, then gives them back."""

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.rows: list[pa.RecordBatch] = []

    @property
    def buffered_rows(self) -> int:
        return sum(batch.num_rows for batch in self.rows)

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        self.rows.append(batch)
        return []

    def finish(self) -> list[pa.RecordBatch]:
        rows, self.rows = self.rows, []
        return rows


def _batches(keys: list[str], size: int) -> list[pa.RecordBatch]:
    table = pa.table({"k": keys, "v": list(range(len(keys)))})
    return table.to_batches(max_chunksize=size)


def _routers() -> dict[str, LiveRouter]:
    return {
        "sorted": SortedPartitionRouter(["k"], KeepAll),
        "hashed": HashPartitionRouter(["k"], KeepAll),
    }


@pytest.mark.parametrize("kind", ["sorted", "hashed"])
def test_run_is_every_batch_routed_then_the_end(kind: str) -> None:
    keys = ["a"] * 5 + ["b"] * 3 + ["c"] * 4
    by_run = [b.to_pydict() for b in _routers()[kind].run(_batches(keys, 5))]
    by_route = []
    router = _routers()[kind]
    for batch in _batches(keys, 5):
        by_route += [b.to_pydict() for b in router.route(batch)]
    by_route += [b.to_pydict() for b in router.finish()]
    assert by_run == by_route
    values = [v for part in by_run for v in part["v"]]
    assert values == list(range(12))  # every row once, partitions in order
    router.close()


@pytest.mark.parametrize("kind", ["sorted", "hashed"])
def test_buffered_rows_counts_what_the_open_runs_keep(kind: str) -> None:
    router = _routers()[kind]
    batches = _batches(["a", "a", "a", "b", "b"], 3)
    list(router.route(batches[0]))
    assert router.buffered_rows == 3  # partition a is open: its rows are kept
    list(router.route(batches[1]))
    # sorted input: a ended at the first b and gave its rows back; hashed: every key
    # stays open until the end of the stream
    assert router.buffered_rows == (2 if kind == "sorted" else 5)
    list(router.finish())
    assert router.buffered_rows == 0
    router.close()
