"""Reductions over the segments of a chunk's label array, at any label.

Each match of a chunk is a segment of ``Matches.labels``. A reduction here
takes per-label inputs (the aggregate's argument values, and the mask of the
labels that count: the aggregate's variables, its FILTER, NULLs where the
aggregate skips them) and returns a function from label indexes to results:
at label ``i`` the aggregate over the labels of ``i``'s match up to and
including ``i`` (``-1``: over no label). A running measure in ALL ROWS PER
MATCH asks at its output row's label, a final one at the match's last label;
either way the work is a few prefix or accumulate operations over the chunk,
linear in its size, never a walk over the match per output row.

The rules (which row wins a tie, what an empty input gives) are those of
:mod:`matchsql.expr.aggregates`, the reference: COUNT of nothing is 0, other
aggregates NULL; MIN/MAX and max_by/min_by keep the first row among equal
keys; ``any_value`` is the first non-NULL value, ``arbitrary`` the first
value; ``array_agg`` keeps NULLs.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from matchsql.engine.compiled.match_arrays import Matches
from matchsql.errors import ExecutionError

__all__ = [
    "Evaluate",
    "Segments",
    "cast_exact",
    "running_nth",
    "segment_nth",
    "segment_nth_of",
    "segment_pick",
    "true_mask",
]

Evaluate = Callable[[np.ndarray], pa.Array]  # label indexes (-1: none) -> results
# Below this bound an int64 prefix sum cannot overflow and a float64 of it is exact.
_EXACT = 2**53


def segment_pick(m: Matches, mask: np.ndarray, last: bool) -> np.ndarray:
    """Index (into ``labels``) of the last/first masked label of each match, -1 for none."""
    out = np.full(len(m.starts), -1, np.int64)
    nonempty = m.lengths > 0
    if not nonempty.any() or len(m.labels) == 0:
        return out
    pos = np.arange(len(m.labels), dtype=np.int64)
    if last:
        keyed = np.where(mask, pos, -1)
        picked = np.maximum.reduceat(keyed, m.offsets[nonempty])
    else:
        big = np.int64(len(m.labels) + 1)
        keyed = np.where(mask, pos, big)
        picked = np.minimum.reduceat(keyed, m.offsets[nonempty])
        picked = np.where(picked == big, -1, picked)
    out[nonempty] = picked
    return out


def segment_nth(m: Matches, mask: np.ndarray, last: bool, k: int) -> np.ndarray:
    """Index (into ``labels``) of the k-th last/first masked label of each match (0: the
    last/first), -1 where the match has at most k of them: ``LAST(A.x, k)`` and
    ``FIRST(A.x, k)`` under FINAL. One prefix count and one binary search over it, so
    an offset past every match (``FIRST(A.x, 100000000)``) costs what ``k = 0`` does."""
    if len(m.labels) == 0:
        return np.full(len(m.starts), -1, np.int64)
    counted = np.cumsum(mask, dtype=np.int64)
    before = np.where(m.offsets > 0, counted[np.maximum(m.offsets - 1, 0)], 0)
    ends = m.offsets + m.lengths
    total = np.where(ends > 0, counted[np.maximum(ends - 1, 0)], 0) - before
    rank = total - k if last else np.full(len(m.starts), k + 1, np.int64)  # 1-based
    found = (rank >= 1) & (rank <= total)
    at = np.searchsorted(counted, before + np.where(found, rank, 1), side="left")
    return np.where(found, at, -1).astype(np.int64)


def segment_nth_of(m: Matches, ids: np.ndarray, last: bool, k: int) -> np.ndarray:
    """:func:`segment_nth` over the labels of the variables ``ids``: ``LAST(B.x, k)`` and
    ``FIRST(A.x, k)`` under FINAL. Each match is walked from the end it reads from, so
    a measure of a pattern's first or last variable reads a label or two per match,
    where the mask, prefix count and search of :func:`segment_nth` read every label
    (a fifth of a batch's measure time, with many short matches)."""
    if len(m.labels) == 0 or len(ids) == 0:
        return np.full(len(m.starts), -1, np.int64)
    wanted = np.zeros(int(ids.max()) + 1, np.bool_)
    wanted[ids] = True
    return _nth_of(m.labels, m.offsets, m.lengths, wanted, last, k)


@njit(cache=True, nogil=True)
def _nth_of(
    labels: np.ndarray,
    offsets: np.ndarray,
    lengths: np.ndarray,
    wanted: np.ndarray,
    last: bool,
    k: int,
) -> np.ndarray:
    """Per match, the index of its k-th last/first label whose variable is ``wanted``
    (a table by variable id), -1 where it has at most k."""
    out = np.full(offsets.shape[0], -1, np.int64)
    top = wanted.shape[0]
    for i in range(offsets.shape[0]):
        lo = offsets[i]
        n = lengths[i]
        left = k
        for j in range(n):
            at = lo + n - 1 - j if last else lo + j
            v = labels[at]
            if 0 <= v < top and wanted[v]:
                if left == 0:
                    out[i] = at
                    break
                left -= 1
    return out


def running_nth(m: Matches, mask: np.ndarray, k: int) -> np.ndarray:
    """Per label index: the k-th last masked label at or before it in its match (0: the
    last), -1 where there are at most k: ``LAST(A.x, k)`` under RUNNING."""
    n = len(m.labels)
    if n == 0:
        return np.zeros(0, np.int64)
    counted = np.cumsum(mask, dtype=np.int64)
    segment_start = np.repeat(m.offsets, m.lengths)
    before = np.where(segment_start > 0, counted[np.maximum(segment_start - 1, 0)], 0)
    rank = counted - k  # the wanted label's inclusive count over the chunk
    found = rank > before
    at = np.searchsorted(counted, np.where(found, rank, 1), side="left")
    return np.where(found, at, -1).astype(np.int64)


class Segments:
    """The segment structure of one chunk's labels (``len(m.labels) > 0``)."""

    def __init__(self, m: Matches) -> None:
        self.m = m
        self.n = len(m.labels)
        self.match_of = np.repeat(np.arange(len(m.starts), dtype=np.int64), m.lengths)
        self.first = m.offsets[self.match_of]  # first label of each label's match

    def upto(self, prefix: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Inclusive prefix sums ``prefix`` at ``idx`` minus their value just before the
        match of ``idx``: the sum over the match up to ``idx`` (0 for idx -1)."""
        safe = np.maximum(idx, 0)
        start = self.first[safe]
        before = np.where(start > 0, prefix[np.maximum(start - 1, 0)], 0)
        return np.where(idx >= 0, prefix[safe] - before, 0)

    def before(self, prefix: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Inclusive prefix sums just before the match of ``idx`` (0 for idx -1)."""
        start = self.first[np.maximum(idx, 0)]
        return np.where((idx >= 0) & (start > 0), prefix[np.maximum(start - 1, 0)], 0)

    # -- counts -----------------------------------------------------------------------------

    def count(self, mask: np.ndarray) -> Evaluate:
        counts = np.cumsum(mask, dtype=np.int64)
        return lambda idx: pa.array(self.upto(counts, idx), pa.int64())

    def booleans(self, values: pa.Array, mask: np.ndarray, every: bool) -> Evaluate:
        """bool_and (``every``) / bool_or over the non-NULL masked values."""
        valid = mask & _valid(values)
        true = valid & true_mask(values)
        counts = np.cumsum(valid, dtype=np.int64)
        trues = np.cumsum(true, dtype=np.int64)

        def evaluate(idx: np.ndarray) -> pa.Array:
            c, t = self.upto(counts, idx), self.upto(trues, idx)
            return pa.array(t == c if every else t > 0, pa.bool_(), mask=c == 0)

        return evaluate

    # -- sums --------------------------------------------------------------------------------

    def sum(
        self, values: pa.Array, mask: np.ndarray, average: bool, total_type: pa.DataType
    ) -> Evaluate:
        """SUM (as ``total_type``) or AVG (a double) of the non-NULL masked values: integers
        as exact prefix sums (Python integers past 2**53), floats added in row order from
        each match's first row, as the reference adds (a difference of prefix sums would
        round differently)."""
        mask = mask & _valid(values)
        counts = np.cumsum(mask, dtype=np.int64)
        if pa.types.is_floating(values.type):
            sums = _running_float_sums(
                np.asarray(values.fill_null(0.0), dtype=np.float64), mask, self.first
            )

            def floats(idx: np.ndarray) -> pa.Array:
                count = self.upto(counts, idx)
                total = np.where(idx >= 0, sums[np.maximum(idx, 0)], 0.0)
                if average:
                    total = total / np.maximum(count, 1)
                return pa.array(total, pa.float64(), mask=count == 0)

            return floats
        raw = np.where(mask, np.asarray(values.fill_null(0), dtype=np.int64), 0)
        exact = int(np.abs(raw).max()) * self.n < _EXACT
        sums = np.cumsum(raw if exact else raw.astype(object))

        def integers(idx: np.ndarray) -> pa.Array:
            count = self.upto(counts, idx)
            total = self.upto(sums, idx)
            empty = count == 0
            if not exact:  # Python integers: exact at any size
                pairs = zip(total.tolist(), count.tolist(), strict=True)
                if average:  # DuckDB (and the reference) divide the sum as a double
                    return pa.array([float(t) / c if c else None for t, c in pairs], pa.float64())
                return pa.array(
                    [decimal.Decimal(int(t)) if c else None for t, c in pairs], total_type
                )
            if average:
                return pa.array(total / np.maximum(count, 1), pa.float64(), mask=empty)
            return pa.array(total, pa.int64(), mask=empty).cast(total_type)

        return integers

    # -- picks -------------------------------------------------------------------------------

    def extreme(
        self, keys: pa.Array, values: pa.Array, mask: np.ndarray, largest: bool
    ) -> Evaluate:
        """The value at the row of the greatest (``largest``) or least non-NULL masked
        key; among equal keys the first row, as the reference keeps it (MIN/MAX pass the
        key itself as ``values``, max_by/min_by the other argument).

        Rows are ranked by (key, row) so that a higher rank wins; a running maximum of
        ``match * (n + 1) + rank`` then names the winner so far without one match's
        winner leaking into the next."""
        n = self.n
        mask = mask & _valid(keys)
        direction = "ascending" if largest else "descending"
        columns = {"k": keys, "i": pa.array(np.arange(n, dtype=np.int64))}
        sort_keys = [("k", direction), ("i", "descending")]
        if pa.types.is_floating(keys.type):
            # DuckDB's order of numbers, as the value library's: NaN above every other
            # number and equal to itself. Arrow places NaN by its own rule, so NaN is
            # ranked by a key of its own and taken out of ``k``.
            nan = pc.fill_null(pc.is_nan(keys), False)
            columns = {"nan": nan, "k": pc.if_else(nan, 0.0, keys), "i": columns["i"]}
            sort_keys = [("nan", direction), *sort_keys]
        order = np.asarray(
            pc.sort_indices(pa.table(columns), sort_keys=sort_keys), dtype=np.int64
        )  # label index by rank
        score = np.empty(n, np.int64)
        score[order] = np.arange(1, n + 1, dtype=np.int64)
        base = self.match_of * (n + 1)
        best = np.maximum.accumulate(base + np.where(mask, score, 0)) - base  # 0: none yet

        def evaluate(idx: np.ndarray) -> pa.Array:
            got = np.where(idx >= 0, best[np.maximum(idx, 0)], 0)
            none = got == 0
            at = order[np.where(none, 0, got - 1)]
            return values.take(pa.array(at, pa.int64(), mask=none))

        return evaluate

    def first_value(self, values: pa.Array, mask: np.ndarray) -> Evaluate:
        """The value at the first masked label of the match, once ``idx`` has reached it."""
        first = segment_pick(self.m, mask, last=False)

        def evaluate(idx: np.ndarray) -> pa.Array:
            f = np.where(idx >= 0, first[self.match_of[np.maximum(idx, 0)]], -1)
            none = (f < 0) | (f > idx)
            return values.take(pa.array(np.where(none, 0, f), pa.int64(), mask=none))

        return evaluate

    def lists(self, values: pa.Array, mask: np.ndarray, list_type: pa.DataType) -> Evaluate:
        """array_agg: the masked values of the match up to ``idx``, in row order (NULL
        for none). The output of a running list is quadratic in the match length; it
        is built with one ``take`` over index arrays computed by numpy."""
        kept = np.flatnonzero(mask).astype(np.int64)
        compact = values.take(pa.array(kept, pa.int64()))
        counts = np.cumsum(mask, dtype=np.int64)
        item = list_type.value_type

        def evaluate(idx: np.ndarray) -> pa.Array:
            c = self.upto(counts, idx)
            offsets = np.zeros(len(idx) + 1, np.int64)
            np.cumsum(c, out=offsets[1:])
            total = int(offsets[-1])
            if total >= 2**31:
                raise ExecutionError(f"array_agg result of {total} values is too large")
            shift = np.repeat(offsets[:-1] - self.before(counts, idx), c)
            taken = compact.take(pa.array(np.arange(total, dtype=np.int64) - shift))
            taken = cast_exact(taken, item)
            return pa.ListArray.from_arrays(
                pa.array(offsets.astype(np.int32)), taken, type=list_type, mask=pa.array(c == 0)
            )

        return evaluate


def cast_exact(values: pa.Array, to: pa.DataType, what: str = "value") -> pa.Array:
    """``values`` as ``to``; a value that does not fit is the reference's conversion
    error (the reference builds its output column with the declared type too)."""
    if values.type == to:
        return values
    try:
        return values.cast(to, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ExecutionError(f"{what}: cannot convert value to {to}: {exc}") from None


def _valid(values: pa.Array) -> np.ndarray:
    return ~np.asarray(values.is_null(), dtype=bool)


def true_mask(values: pa.Array) -> np.ndarray:
    """Where a condition is TRUE (NULL is not)."""
    if pa.types.is_null(values.type):
        return np.zeros(len(values), bool)
    return np.asarray(pc.fill_null(values, False), dtype=bool)


@njit(cache=True, nogil=True)
def _running_float_sums(
    values: np.ndarray, mask: np.ndarray, first: np.ndarray
) -> np.ndarray:  # pragma: no cover (compiled)
    """Per label: the sum of the masked values of its match up to it, added in order."""
    out = np.empty(len(values), np.float64)
    total = 0.0
    started = False
    for i in range(len(values)):
        if first[i] == i:
            total = 0.0
            started = False
        if mask[i]:
            total = total + values[i] if started else values[i]
            started = True
        out[i] = total
    return out
