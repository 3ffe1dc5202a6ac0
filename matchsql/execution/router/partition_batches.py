"""Complete partitions matched in one call: the one rule of every driver that batches them.

With thousands of short partitions the Python and Arrow calls around the kernel
cost more than the matching, so where the planner allows it
(:mod:`matchsql.engine.compiled.batch`) the partitions whose rows are all at hand
go through one call of the batch matcher together. Four drivers do so - the
sorted router (a batch's partitions), the parallel router (a task's), a worker
process (a message's) and a Spark task (its keys') - and all follow this module:

* **when**: every partition whose first and last rows the driver holds, and that
  has no run of its own yet, is batched, alone or with others: a batched
  partition's rows are those of its own run (tests/paths/test_batched.py), and
  one call costs no more than one run. A partition the driver had to start
  before its end came (it went on in the next batch or message, or grew past a
  task) keeps its run to the end.
* **how cut**: a :class:`PartitionBatch` gathers adjacent complete partitions in
  input order and is matched in one call when the driver reaches what it cannot
  batch (a partition that is not complete), the end of what it holds (a batch, a
  message), or its own size limit (the parallel router's task).
* **what comes back**: the call's output batches, partition after partition, and
  how many output rows each partition has (a worker hands its partitions' output
  back by these rather than finding each one's rows by key again); empty batches
  are dropped, and the counts must add up to the rows.

The rows of a call go as one batch: a slice where they lie in one batch (grouped
input's batches end where a partition does), a copy only where batches meet.
Everything here is per call or per run of partitions, never a Python step per
partition beyond recording its size. Routers see the batch matcher only as a
callable (:data:`MatchRun`): they need the matchers' shape, not the engine.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from matchsql.errors import Error

#: ``match(rows, bounds) -> (output, counts)``: the complete partitions
#: ``rows[bounds[i]:bounds[i + 1]]`` matched together (``bounds`` starts at 0 and ends at
#: ``rows.num_rows``), their output and each one's output rows; the batch matcher's
#: ``match_counted`` with the statement's cancellation.
MatchRun = Callable[[pa.RecordBatch, np.ndarray], tuple[list[pa.RecordBatch], np.ndarray]]

#: Rows ``start:stop`` of a batch: cut from it only when the call reads them, so that
#: adjacent spans of one batch join into one slice.
Span = tuple[pa.RecordBatch, int, int]


class PartitionBatch:
    """Complete partitions gathered, in input order, for one call of ``match``."""

    __slots__ = ("match", "rows", "sizes", "spans")

    def __init__(self, match: MatchRun) -> None:
        self.match = match
        self.spans: list[Span] = []
        self.sizes: list[int] = []  # the rows of each partition
        self.rows = 0

    def __len__(self) -> int:
        return len(self.sizes)

    def add(self, batch: pa.RecordBatch, start: int, sizes: list[int]) -> None:
        """Partitions of ``sizes`` rows, one after another from row ``start`` of ``batch``."""
        rows = sum(sizes)
        self._span(batch, start, start + rows)
        self.sizes += sizes
        self.rows += rows

    def add_pieces(self, spans: list[Span], rows: int) -> None:
        """One partition of ``rows`` rows, in ``spans`` of one batch or several."""
        for span in spans:
            self._span(*span)
        self.sizes.append(rows)
        self.rows += rows

    def take(self) -> PartitionBatch:
        """The partitions gathered so far, to match (perhaps on another thread); this
        one starts empty again."""
        taken = PartitionBatch(self.match)
        taken.spans, taken.sizes, taken.rows = self.spans, self.sizes, self.rows
        self.spans, self.sizes, self.rows = [], [], 0
        return taken

    def matched(self) -> tuple[list[pa.RecordBatch], np.ndarray]:
        """The output of the partitions, partition after partition, without empty
        batches, and how many of its rows each partition has."""
        bounds = np.zeros(len(self.sizes) + 1, np.int64)
        np.cumsum(self.sizes, out=bounds[1:])
        produced, counts = self.match(_joined(self.spans), bounds)
        produced = [batch for batch in produced if batch.num_rows]
        if sum(batch.num_rows for batch in produced) != int(counts.sum()):
            raise Error("batched partitions' matches did not add up to their counts")
        return produced, counts

    def _span(self, batch: pa.RecordBatch, start: int, stop: int) -> None:
        spans = self.spans
        if spans and spans[-1][0] is batch and spans[-1][2] == start:
            spans[-1] = (batch, spans[-1][1], stop)
        elif stop > start:
            spans.append((batch, start, stop))


def _joined(spans: list[Span]) -> pa.RecordBatch:
    """The rows of ``spans`` (adjacent ones of one batch joined already) as one batch:
    a slice of one batch, a copy only where rows of several batches meet."""
    pieces = [batch.slice(start, stop - start) for batch, start, stop in spans]
    return pieces[0] if len(pieces) == 1 else pa.concat_batches(pieces)
