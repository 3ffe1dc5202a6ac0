"""Partitions on a thread pool, output in exactly the sequential order.

The compiled kernels release the GIL, so partition runs of one query can
proceed on several threads at once. :class:`ParallelPartitionRouter` cuts the
sorted input into partitions like
:class:`~matchsql.execution.router.partitions.SortedPartitionRouter`
and turns it into *tasks*:

* a **group** task runs several complete small partitions one after the other
  (grouping cuts the per-task overhead; a group closes once it holds
  ``chunk_rows`` input rows, so it holds fewer than twice that), or all at
  once through ``whole`` where the query allows it (a
  :class:`~matchsql.execution.router.partition_batches.PartitionBatch`): then the
  partitions between a batch's first and last go as one span of it;
* a **chunk** task feeds one piece (about ``chunk_rows`` rows) of a partition
  too large to group; the chunk tasks of one partition share its run and run
  one after the other (each waits for its predecessor), so a huge partition
  still streams batch by batch and is never held whole;
* a **finish** task ends such a partition's run.

Tasks are submitted in input order and their outputs are yielded in that
same order, so the result is identical to the sequential router's. At most
``max_pending`` tasks are in flight: memory stays bounded by about
``max_pending * chunk_rows`` input rows plus their outputs. The pool is FIFO,
so a chunk task's predecessor is always running or done when it starts
waiting for it: no deadlock. An exception of a partition run reaches the
caller unchanged, at the position of its task in the output order (the
outputs of partitions grouped with the failing one are dropped with it);
the remaining tasks are cancelled, and running ones stop at their next piece.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import pyarrow as pa

from matchsql.errors import ExecutionError
from matchsql.execution.router.partition_batches import MatchRun, PartitionBatch, Span
from matchsql.execution.router.partitions import (
    PartitionRun,
    RunFactory,
    feed_last,
    key_at,
    segments,
)
from matchsql.runtime.cancel import INTERRUPTED, Cancellation

#: How long the caller waits for a task before it looks at the interrupt again.
_POLL_S = 0.01


class ParallelPartitionRouter:
    """Runs the partitions of sorted batches on ``threads`` worker threads."""

    def __init__(
        self,
        keys: list[str],
        new_run: RunFactory,
        threads: int,
        chunk_rows: int = 65_536,
        max_pending: int | None = None,
        cancel: Cancellation | None = None,
        whole: MatchRun | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError("threads must be >= 1")
        self.keys = keys
        self.new_run = new_run
        self.threads = threads
        self.chunk_rows = max(1, chunk_rows)
        self.max_pending = max_pending or 2 * threads + 2
        # Matches a group's complete partitions together (SortedPartitionRouter's ``whole``).
        self.whole = whole
        self.partitions = 0
        # Set by an interrupt, or here when the caller stops reading or a task fails:
        # workers stop between pieces and inside kernels, the caller stops waiting. It
        # must be this router's own token (the runs of ``new_run`` watch the same one).
        self.cancel = cancel or Cancellation()

    def close(self) -> None:
        """Nothing to give back: :meth:`run` shuts its thread pool down as it ends."""

    def run(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Yield the output batches of all partitions of ``batches``, in sequential order."""
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="matchsql-partition")
        pending: deque[Future] = deque()
        # Complete small partitions waiting to be sent as one group task: matched
        # together where ``whole`` is given, else each in a run of its own.
        complete = PartitionBatch(self.whole) if self.whole is not None else None
        group: list[_Part] = []
        group_rows = 0
        # The open partition: its key, pieces not yet sent, and, once it is too
        # large to group, its run and the future of its last chunk task.
        key: tuple | None = None
        pieces: list[Span] = []
        piece_rows = 0
        big_run: PartitionRun | None = None
        last: Future | None = None
        opened = False

        def submit(
            fn: Callable[..., list[pa.RecordBatch]], *args: Any
        ) -> Generator[pa.RecordBatch, None, Future]:
            future = pool.submit(fn, *args)
            pending.append(future)
            # Hand back what is ready; wait only while too much is in flight.
            while pending and (len(pending) >= self.max_pending or pending[0].done()):
                yield from self._result(pending.popleft())
            return future

        def flush_group() -> Iterator[pa.RecordBatch]:
            nonlocal group, group_rows
            if complete:
                group_rows = 0
                yield from submit(self._match, complete.take())
            elif group:
                work, group, group_rows = group, [], 0
                yield from submit(self._run_group, work)

        def grouped(rows: int) -> Iterator[pa.RecordBatch]:
            nonlocal group_rows
            group_rows += rows
            if group_rows >= self.chunk_rows:
                yield from flush_group()

        def close_partition() -> Iterator[pa.RecordBatch]:
            nonlocal pieces, piece_rows, big_run, last, opened
            if big_run is None:
                if complete is not None:
                    complete.add_pieces(pieces, piece_rows)
                else:
                    assert key is not None
                    group.append((key, pieces))
                yield from grouped(piece_rows)
            else:
                if pieces:
                    last = yield from submit(self._feed, big_run, pieces, last)
                yield from submit(self._finish, big_run, last)
            pieces, piece_rows, big_run, last, opened = [], 0, None, None, False

        def add(piece_key: tuple, piece: Span) -> Iterator[pa.RecordBatch]:
            nonlocal key, opened, pieces, piece_rows, big_run, last
            if not opened or piece_key != key:
                if opened:
                    yield from close_partition()
                key, opened = piece_key, True
                self.partitions += 1
            pieces.append(piece)
            piece_rows += piece[2] - piece[1]
            if piece_rows >= self.chunk_rows:
                # Too large to group: the groups before it go first,
                # then it streams in chunks through its own run.
                yield from flush_group()
                if big_run is None:
                    big_run = self.new_run(key)
                last = yield from submit(self._feed, big_run, pieces, last)
                pieces, piece_rows = [], 0

        try:
            for batch in batches:
                self._check()
                if batch.num_rows == 0:
                    continue
                bounds = segments(batch, self.keys)
                yield from add(key_at(batch, self.keys, 0), (batch, *bounds[0]))
                if len(bounds) == 1:
                    continue
                inner = bounds[1:-1]
                if complete is not None and inner:
                    # The partitions between the batch's first and last: complete,
                    # matched as one span of the batch (no key, no slice of each).
                    yield from close_partition()
                    start, stop = inner[0][0], inner[-1][1]
                    self.partitions += len(inner)
                    complete.add(batch, start, [b - a for a, b in inner])
                    yield from grouped(stop - start)
                    inner = []
                for a, b in [*inner, bounds[-1]]:
                    yield from add(key_at(batch, self.keys, a), (batch, a, b))
            if opened:
                yield from close_partition()
            yield from flush_group()
            while pending:
                yield from self._result(pending.popleft())
        finally:
            if pending:  # stopped early: tasks still running stop at their next check
                self.cancel.cancel()
            for future in pending:
                future.cancel()
            pool.shutdown(wait=False, cancel_futures=True)

    def _result(self, future: Future) -> list[pa.RecordBatch]:
        """The outputs of ``future``'s task, waiting in short steps that watch ``cancel``."""
        while not wait([future], timeout=_POLL_S).done:
            self._check()
        return future.result()

    def _check(self) -> None:
        if self.cancel.cancelled:
            raise ExecutionError(INTERRUPTED)

    # -- tasks (on the pool's threads) ----------------------------------------------

    def _match(self, complete: PartitionBatch) -> list[pa.RecordBatch]:
        """A group's complete partitions in one call of the batch matcher."""
        self._check()
        return coalesce(complete.matched()[0])

    def _run_group(self, work: list[_Part]) -> list[pa.RecordBatch]:
        self._check()
        out: list[pa.RecordBatch] = []
        for key, spans in work:
            run = self.new_run(key)
            pieces = [_slice(span) for span in spans]
            for piece in pieces[:-1]:
                self._check()
                out += run.feed(piece)
            self._check()
            out += feed_last(run, pieces[-1]) if pieces else run.finish()
        return coalesce(out)

    def _feed(
        self, run: PartitionRun, pieces: list[Span], previous: Future | None
    ) -> list[pa.RecordBatch]:
        if previous is not None:
            previous.result()  # the run's earlier chunk: same run, strictly in order
        out: list[pa.RecordBatch] = []
        for piece in pieces:
            self._check()
            out += run.feed(_slice(piece))
        return coalesce(out)

    def _finish(self, run: PartitionRun, previous: Future | None) -> list[pa.RecordBatch]:
        if previous is not None:
            previous.result()
        self._check()
        return coalesce(run.finish())


#: A complete partition of a group run on its own: its key and its rows (pieces are
#: kept as :data:`~.partition_batches.Span` and cut from their batch only when a task
#: reads them).
_Part = tuple[tuple, list[Span]]


def _slice(span: Span) -> pa.RecordBatch:
    batch, start, stop = span
    return batch.slice(start, stop - start)


def coalesce(batches: list[pa.RecordBatch], small: int = 8_192) -> list[pa.RecordBatch]:
    """``batches`` with runs of small batches concatenated (fewer, larger batches
    are much cheaper for DuckDB to scan); rows and their order are unchanged."""
    if len(batches) < 2:
        return batches
    out: list[pa.RecordBatch] = []
    run: list[pa.RecordBatch] = []
    for batch in batches:
        if batch.num_rows >= small:
            out += _concat(run)
            run = []
            out.append(batch)
        elif batch.num_rows:
            run.append(batch)
    out += _concat(run)
    return out


def _concat(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    if len(batches) < 2:
        return batches
    try:
        return [pa.concat_batches(batches)]
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # differing schemas: leave them apart
        return batches
