"""Hash partition router: for live input, which arrives in time order, not by partition.

Each distinct PARTITION BY key gets one matcher run that stays alive until
the end of the stream (a live partition's end is only known then). A batch is
split by key with Arrow's dictionary encoding and a stable argsort, so rows
of one partition keep their arrival order and the per-row cost stays in
Arrow/numpy rather than Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from matchsql.execution.router.partitions import (
    PartitionRun,
    group_order,
    key_at,
    keys_of,
    range_positions,
)
from matchsql.execution.router.protocol import RoutesBatches


@dataclass
class KeyGroups:
    """A batch's partitions, numbered in order of first appearance."""

    keys: list[tuple]  # partition key of each group
    codes: np.ndarray  # each row's group
    order: np.ndarray  # the rows by group, each group's rows in arrival order
    counts: np.ndarray  # rows of each group


#: The runs a router makes: a :class:`PartitionRun`, or (for push input) a whole
#: :class:`~matchsql.engine.matcher.Matcher`.
R = TypeVar("R", bound=PartitionRun)


class HashPartitionRouter(RoutesBatches, Generic[R]):
    """Routes unsorted batches to one long-lived run per partition key."""

    def __init__(self, keys: list[str], new_run: Callable[[tuple], R]) -> None:
        self.keys = keys
        self.new_run = new_run
        self.runs: dict[tuple, R] = {}

    @property
    def partitions(self) -> int:
        return len(self.runs)

    @property
    def buffered_rows(self) -> int:
        return sum(int(getattr(run, "buffered_rows", 0)) for run in self.runs.values())

    def _run(self, key: tuple) -> R:
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = self.new_run(key)
        return run

    def route(self, batch: pa.RecordBatch, more: bool = False) -> Iterator[pa.RecordBatch]:
        """Feed ``batch``; yield every output batch that became final. ``more`` (the
        caller has the next batch at hand) lets a router of worker processes keep the
        batch in flight; here every batch is matched at once."""
        for key, rows in self.pieces(batch):
            yield from self._run(key).feed(rows)

    def pieces(self, batch: pa.RecordBatch) -> Iterator[tuple[tuple, pa.RecordBatch]]:
        """``(key, rows)`` per partition of ``batch``, keys in order of first appearance
        (runs start in arrival order), each partition's rows in arrival order."""
        if batch.num_rows == 0:
            return
        groups = self.groups(batch)
        if len(groups.keys) == 1:
            yield groups.keys[0], batch
            return
        # One take; each partition is then a zero-copy slice.
        ordered = batch.take(pa.array(groups.order))
        start = 0
        for key, count in zip(groups.keys, groups.counts.tolist()):
            yield key, ordered.slice(start, count)
            start += count

    def groups(self, batch: pa.RecordBatch) -> KeyGroups:
        """The partitions of ``batch`` (at least one row), numbered in order of first
        appearance."""
        n = batch.num_rows
        if not self.keys:
            return KeyGroups([()], np.zeros(n, np.int64), np.arange(n), np.array([n]))
        codes, count = self._codes(batch)
        if count == 1:
            return KeyGroups(
                [self._key(batch, 0)], np.zeros(n, np.int64), np.arange(n), np.array([n])
            )
        # One stable sort: rows by group, each group's rows in arrival order.
        order, bounds, grouped = group_order(codes, count)
        if grouped:
            order = np.arange(n)
        counts = np.diff(bounds)
        starts = bounds[:-1]
        firsts = order[starts]  # each group's first row in the batch
        appearance = np.argsort(firsts, kind="stable")  # groups in order of first appearance
        rank = np.empty(count, np.int64)
        rank[appearance] = np.arange(count)
        # The sorted rows with their groups' blocks in order of appearance.
        counts = counts[appearance]
        order = order[range_positions(starts[appearance], counts)]
        # The keys at once (one conversion per column, not one per partition and column).
        keys = keys_of(batch.take(pa.array(firsts[appearance])), self.keys)
        return KeyGroups(keys, rank[codes], order, counts)

    def finish(self) -> Iterator[pa.RecordBatch]:
        """End of stream: finish every run."""
        runs, self.runs = self.runs, {}
        for run in runs.values():
            yield from run.finish()

    def _codes(self, batch: pa.RecordBatch) -> tuple[np.ndarray, int]:
        """A dense group code per row (nulls are a group of their own) and the group count."""
        combined = None
        groups = 0
        for name in self.keys:
            encoded = pc.dictionary_encode(batch.column(name), null_encoding="encode")
            codes = np.asarray(encoded.indices, dtype=np.int64)
            width = len(encoded.dictionary)
            if combined is None:
                combined, groups = codes, width
            else:  # re-densify so many keys cannot overflow int64
                uniques, combined = np.unique(combined * width + codes, return_inverse=True)
                groups = len(uniques)
        assert combined is not None
        return combined, groups

    def _key(self, batch: pa.RecordBatch, row: int) -> tuple:
        return key_at(batch, self.keys, row)
