"""Partition router: cuts sorted Arrow batches into partitions, one matcher run each.

DuckDB delivers the input sorted by the PARTITION BY keys, so a partition is a
contiguous run of rows and at most one run is open at a time: the router
finishes a run as soon as the key changes, which keeps memory bounded by one
partition's live window rather than by the number of partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class PartitionRun(Protocol):
    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]: ...

    def finish(self) -> list[pa.RecordBatch]: ...


RunFactory = Callable[[tuple], PartitionRun]


def feed_last(run: PartitionRun, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
    """Feed a partition's last rows and finish it, in one pass where the run can."""
    final = getattr(run, "feed_final", None)
    if final is not None:
        return final(batch)
    return run.feed(batch) + run.finish()


class SortedPartitionRouter:
    """Routes batches sorted by ``keys`` to per-partition runs created by ``new_run``."""

    def __init__(self, keys: list[str], new_run: RunFactory) -> None:
        self.keys = keys
        self.new_run = new_run
        self._current_key: tuple | None = None
        self._run: PartitionRun | None = None
        self.partitions = 0

    def route(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """Feed ``batch``; yield every output batch that became final.

        Every piece but the batch's last ends its partition (the next piece has
        another key), so its run is fed and finished at once.
        """
        pieces = list(split(batch, self.keys))
        for i, (key, piece) in enumerate(pieces):
            if self._run is None or key != self._current_key:
                yield from self._close_run()
                self._current_key = key
                self._run = self.new_run(key)
                self.partitions += 1
            if i + 1 < len(pieces):
                run, self._run = self._run, None
                yield from feed_last(run, piece)
            else:
                yield from self._run.feed(piece)

    def finish(self) -> Iterator[pa.RecordBatch]:
        """End of input: finish the open run."""
        yield from self._close_run()

    def _close_run(self) -> Iterator[pa.RecordBatch]:
        if self._run is not None:
            run, self._run = self._run, None
            yield from run.finish()

    def _segments(self, batch: pa.RecordBatch) -> list[tuple[int, int]]:
        return segments(batch, self.keys)


def split(batch: pa.RecordBatch, keys: list[str]) -> Iterator[tuple[tuple, pa.RecordBatch]]:
    """``(key, rows)`` for each run of equal partition key within ``batch``, in order."""
    if batch.num_rows == 0:
        return
    for start, stop in segments(batch, keys):
        key = tuple(batch.column(name)[start].as_py() for name in keys)
        yield key, batch.slice(start, stop - start)


def segments(batch: pa.RecordBatch, keys: list[str]) -> list[tuple[int, int]]:
    """Half-open row ranges of equal partition key within ``batch``."""
    n = batch.num_rows
    if not keys or n == 1:
        return [(0, n)]
    change = np.zeros(n - 1, dtype=bool)
    for name in keys:
        column = batch.column(name)
        left, right = column.slice(0, n - 1), column.slice(1)
        same = pc.fill_null(pc.equal(left, right), False)
        both_null = pc.and_(pc.is_null(left), pc.is_null(right))
        change |= ~np.asarray(pc.or_(same, both_null), dtype=bool)
    cuts = np.flatnonzero(change) + 1
    bounds = [0, *cuts.tolist(), n]
    return list(zip(bounds[:-1], bounds[1:]))
