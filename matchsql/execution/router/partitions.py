"""Partition router: cuts sorted Arrow batches into partitions, one matcher run each.

DuckDB delivers the input sorted by the PARTITION BY keys, so a partition is a
contiguous run of rows and at most one run is open at a time: the router
finishes a run as soon as the key changes, which keeps memory bounded by one
partition's live window rather than by the number of partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from matchsql.execution.router.partition_batches import MatchRun, PartitionBatch
from matchsql.execution.router.protocol import RoutesBatches


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


class SortedPartitionRouter(RoutesBatches):
    """Routes batches sorted by ``keys`` to per-partition runs created by ``new_run``.

    ``whole``, when given, matches the partitions that start and end inside
    one batch all at once (see :mod:`.partition_batches`); only the partitions
    cut by a batch boundary then get a run of their own. A batch's last
    partition is known to end with it only once the next batch comes: its rows
    wait until then.
    """

    def __init__(self, keys: list[str], new_run: RunFactory, whole: MatchRun | None = None) -> None:
        self.keys = keys
        self.new_run = new_run
        self._current_key: tuple | None = None
        self._run: PartitionRun | None = None
        # With ``whole``: the batch's complete partitions not matched yet, then its last
        # piece (its batch, rows and key), which waits for the next batch to say whether
        # it goes on: kept as rows of its batch, to join the partitions before it.
        self._complete = PartitionBatch(whole) if whole is not None else None
        self._held: tuple[pa.RecordBatch, int, int, tuple] | None = None
        self.partitions = 0

    @property
    def buffered_rows(self) -> int:
        held = self._held[2] - self._held[1] if self._held is not None else 0
        complete = self._complete.rows if self._complete is not None else 0
        return held + complete + int(getattr(self._run, "buffered_rows", 0))

    def route(self, batch: pa.RecordBatch, more: bool = False) -> Iterator[pa.RecordBatch]:
        """Feed ``batch``; yield every output batch that became final.

        Every piece but the batch's last ends its partition (the next piece has
        another key), so its run is fed and finished at once. With ``whole``, the
        batch's last piece is held until the next batch (or the end) says whether
        its partition goes on: where it does not (batches cut at partition ends,
        as grouped input is), the piece is matched with the complete partitions
        before it, and no partition of the batch needs a run of its own.
        """
        if batch.num_rows == 0:
            return
        key = key_at(batch, self.keys, 0)
        if self._held is not None:
            yield from self._release(key == self._held[3])
        bounds = segments(batch, self.keys)
        first = 0
        if self._run is not None and key == self._current_key:
            if len(bounds) == 1:
                yield from self._run.feed(batch)
                return
            run, self._run = self._run, None
            yield from feed_last(run, _piece(batch, bounds[0]))
            first = 1
        else:
            yield from self._close_run()
        if self._complete is not None:
            inner = bounds[first:-1]
            if inner:
                self._complete.add(batch, inner[0][0], [b - a for a, b in inner])
            start, stop = bounds[-1]
            self._held = (batch, start, stop, key_at(batch, self.keys, start))
            return
        last = len(bounds) - 1  # the batch's last piece may go on in the next batch
        for i in range(first, len(bounds)):
            self._current_key = key_at(batch, self.keys, bounds[i][0])
            self._run = self.new_run(self._current_key)
            self.partitions += 1
            if i < last:
                run, self._run = self._run, None
                yield from feed_last(run, _piece(batch, bounds[i]))
            else:
                yield from self._run.feed(_piece(batch, bounds[i]))

    def finish(self) -> Iterator[pa.RecordBatch]:
        """End of input: match the held rows, finish the open run."""
        if self._held is not None:
            yield from self._release(False)
        yield from self._close_run()

    def _release(self, continues: bool) -> Iterator[pa.RecordBatch]:
        """Match the batch's complete partitions, the held last piece with them where
        its partition ends with it, else that piece in a run of its own, left open."""
        assert self._complete is not None and self._held is not None
        batch, start, stop, key = self._held
        self._held = None
        if not continues:
            self._complete.add(batch, start, [stop - start])
        if self._complete:
            complete = self._complete.take()
            self.partitions += len(complete)
            yield from complete.matched()[0]
        if continues:
            self._current_key = key
            self._run = self.new_run(key)
            self.partitions += 1
            yield from self._run.feed(_piece(batch, (start, stop)))

    def _close_run(self) -> Iterator[pa.RecordBatch]:
        if self._run is not None:
            run, self._run = self._run, None
            yield from run.finish()

    def _segments(self, batch: pa.RecordBatch) -> list[tuple[int, int]]:
        return segments(batch, self.keys)


#: The one NaN of partition keys (see :func:`partition_key`).
NAN = float("nan")
_NAN = NAN


def partition_key(values: Iterable[Any]) -> tuple:
    """A partition key that equals, and hashes as, every other key of its partition.

    SQL puts every NaN of a PARTITION BY column in one partition (as DuckDB's
    grouping does), but NaN != NaN in Python: every NaN becomes one shared
    object here, which tuple equality and dict lookup match by identity.
    """
    return tuple(_NAN if isinstance(v, float) and v != v else v for v in values)


def key_at(batch: pa.RecordBatch, keys: list[str], row: int) -> tuple:
    return partition_key(batch.column(name)[row].as_py() for name in keys)


def keys_of(batch: pa.RecordBatch, keys: list[str]) -> list[tuple]:
    """:func:`key_at` of every row of ``batch`` (each column converted at once)."""
    columns = [batch.column(name) for name in keys]
    rows = zip(*(column.to_pylist() for column in columns))
    if not any(pa.types.is_floating(column.type) for column in columns):
        return list(rows)  # no NaN to share: :func:`partition_key` would change nothing
    return [partition_key(values) for values in rows]


def _piece(batch: pa.RecordBatch, bound: tuple[int, int]) -> pa.RecordBatch:
    return batch.slice(bound[0], bound[1] - bound[0])


def split(batch: pa.RecordBatch, keys: list[str]) -> Iterator[tuple[tuple, pa.RecordBatch]]:
    """``(key, rows)`` for each run of equal partition key within ``batch``, in order."""
    if batch.num_rows == 0:
        return
    for start, stop in segments(batch, keys):
        yield key_at(batch, keys, start), batch.slice(start, stop - start)


def segments(batch: pa.RecordBatch, keys: list[str]) -> list[tuple[int, int]]:
    """Half-open row ranges of equal partition key within ``batch``.

    ``batch`` is sorted by ``keys``: when its first and last rows have the same
    key, every row between has it too, and the batch is one range (a partition
    longer than a batch is cut into many such batches).
    """
    n = batch.num_rows
    if not keys or n == 1 or key_at(batch, keys, 0) == key_at(batch, keys, n - 1):
        return [(0, n)]
    change = np.zeros(n - 1, dtype=bool)
    for name in keys:
        column = batch.column(name)
        left, right = column.slice(0, n - 1), column.slice(1)
        same = pc.equal(left, right)
        if pa.types.is_floating(column.type):  # NaN is one partition (partition_key)
            same = pc.or_kleene(same, pc.and_(pc.is_nan(left), pc.is_nan(right)))
        if column.null_count:
            same = pc.or_(pc.fill_null(same, False), pc.and_(pc.is_null(left), pc.is_null(right)))
        change |= ~np.asarray(same, dtype=bool)
    cuts = np.flatnonzero(change) + 1
    bounds = [0, *cuts.tolist(), n]
    return list(zip(bounds[:-1], bounds[1:]))


def group_order(codes: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(perm, starts, grouped)``: the stable permutation that sorts ``codes`` (values in
    ``[0, count)``), each code's first position in it (``count + 1`` entries) and whether
    the rows were grouped already (then ``perm`` is empty: the identity), by numpy's
    stable sort (the counting sort's on small inputs: execution/router/grouping.py)."""
    starts = np.zeros(count + 1, np.int64)
    np.cumsum(np.bincount(codes, minlength=count), out=starts[1:])
    if len(codes) < 2 or bool(np.all(codes[1:] >= codes[:-1])):
        return np.empty(0, np.int64), starts, True
    return np.argsort(narrow_codes(codes, count), kind="stable").astype(np.int64), starts, False


def range_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Every position of the ranges ``[starts[i], starts[i] + lengths[i])``, range after
    range: each range's start, repeated, plus the position's place in the concatenation
    less where its range begins there (no loop over the ranges)."""
    lengths = np.asarray(lengths, np.int64)
    shift = np.repeat(np.asarray(starts, np.int64) - (np.cumsum(lengths) - lengths), lengths)
    return shift + np.arange(int(lengths.sum()), dtype=np.int64)


def narrow_codes(codes: np.ndarray, count: int) -> np.ndarray:
    """``codes`` (values below ``count``) in 8 or 16 bits where they fit: numpy's stable
    argsort sorts those by radix, several times faster than 64-bit keys."""
    if count > 1 << 16:
        return codes
    return codes.astype(np.uint8 if count <= 1 << 8 else np.uint16)
