"""Hash partition router: for live input, which arrives in time order, not by partition.

Each distinct PARTITION BY key gets one matcher run that stays alive until
the end of the stream (a live partition's end is only known then). A batch is
split by key with Arrow's dictionary encoding and a stable argsort, so rows
of one partition keep their arrival order and the per-row cost stays in
Arrow/numpy rather than Python.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from matchsql.router.partitions import PartitionRun, RunFactory, key_at, keys_of


class HashPartitionRouter:
    """Routes unsorted batches to one long-lived run per partition key."""

    def __init__(self, keys: list[str], new_run: RunFactory) -> None:
        self.keys = keys
        self.new_run = new_run
        self.runs: dict[tuple, PartitionRun] = {}

    @property
    def partitions(self) -> int:
        return len(self.runs)

    def _run(self, key: tuple) -> PartitionRun:
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
        if not self.keys:
            yield (), batch
            return
        codes, groups = self._codes(batch)
        if groups == 1:
            yield self._key(batch, 0), batch
            return
        # One stable sort and one take; each partition is then a zero-copy slice.
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes, minlength=groups)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        ordered = batch.take(pa.array(order))
        firsts = order[starts]  # each group's first row in the batch
        # The keys at once (one conversion per column, not one per partition and column).
        keys = keys_of(batch.take(pa.array(firsts)), self.keys)
        for group in np.argsort(firsts, kind="stable").tolist():
            start, count = int(starts[group]), int(counts[group])
            yield keys[group], ordered.slice(start, count)

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
