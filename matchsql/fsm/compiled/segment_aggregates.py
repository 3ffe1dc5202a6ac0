"""COUNT/SUM/AVG/MIN/MAX measures over a column, computed column-wise per match.

Each match is a segment of the chunk's label array. An aggregate over
``x`` or ``A.x`` reads the column at every labelled row once (one Arrow
``take``), masks the rows of the variable (and the NULLs), and then

* COUNT, and SUM and AVG of integers, are prefix sums: the value at a label
  is the prefix at that label minus the prefix just before its match (exact);
  SUM and AVG of floats restart at each match and add in row order, as the
  reference does, so that rounding agrees too;
* MIN and MAX are running maxima of ``segment * (n + 1) + rank``, where
  ``rank`` orders the values: the segment term keeps one match's maximum
  from leaking into the next, the rank names the row that holds it.

A running value at output row ``i`` is the segment value at ``i``'s label; a
final one (ONE ROW PER MATCH, or FINAL) is the value at the match's last
label. So running aggregates in ALL ROWS PER MATCH cost linear time in the
match length instead of the reference evaluator's quadratic recomputation.
Only aggregates whose result is bit-for-bit the reference's are taken:
SUM/AVG over integer and floating columns, MIN/MAX over integer, decimal,
string and date/time columns (no NaN ordering).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit
from sqlglot import exp

from matchsql.fsm.compiled.lowering import Unsupported
from matchsql.fsm.compiled.match_arrays import Expansion, Matches, Rows
from matchsql.plan.bound import AggregateCall, Pointer, describe
from matchsql.plan.spec import MatchSpec

__all__ = ["SegmentAggregate", "segment_aggregate"]

_KINDS = frozenset({"count", "sum", "avg", "min", "max"})
# Below this bound an int64 prefix sum cannot overflow and a float64 of it is exact.
_EXACT = 2 ** 53


def _ordered(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_date(t) or pa.types.is_timestamp(t))


@dataclass
class SegmentAggregate:
    """One aggregate measure: its kind, the column it reads and the variables it covers."""

    kind: str
    column: str
    ids: np.ndarray | None  # variable ids the aggregate covers; None: every row
    type: pa.DataType  # the measure's declared (DuckDB) type

    # -- shared per-chunk state --------------------------------------------------------------

    def _masked(self, m: Matches, rows: Rows) -> tuple[pa.Array, np.ndarray]:
        """The column at every labelled row of the chunk, and the rows that count."""
        n = len(m.labels)
        at = np.repeat(m.starts - m.offsets, m.lengths) + np.arange(n, dtype=np.int64)
        values = rows.table.column(self.column).take(pa.array(at - rows.base, pa.int64()))
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        mask = ~np.asarray(values.is_null(), dtype=bool)
        if self.ids is not None:
            mask &= np.isin(m.labels, self.ids)
        return values, mask

    def _segment_values(self, m: Matches, rows: Rows) -> Callable[[np.ndarray], pa.Array]:
        """A function from label indexes (-1: before any row) to the aggregate over the
        labels of that label's match up to and including it."""
        n = len(m.labels)
        if n == 0:
            if self.kind == "count":
                return lambda idx: pa.array(np.zeros(len(idx), np.int64), pa.int64())
            return lambda idx: pa.nulls(len(idx), self.type)
        values, mask = self._masked(m, rows)
        match_of = np.repeat(np.arange(len(m.starts), dtype=np.int64), m.lengths)
        if self.kind in ("min", "max"):
            return self._extreme(values, mask, match_of)
        first = m.offsets[match_of]

        def upto(prefix: np.ndarray, idx: np.ndarray) -> np.ndarray:
            """Prefix at ``idx`` minus the prefix before its match (0 for idx -1)."""
            safe = np.maximum(idx, 0)
            start = first[safe]
            before = np.where(start > 0, prefix[np.maximum(start - 1, 0)], 0)
            return np.where(idx >= 0, prefix[safe] - before, 0)

        counts = np.cumsum(mask, dtype=np.int64)
        if self.kind == "count":
            return lambda idx: pa.array(upto(counts, idx), pa.int64())
        if pa.types.is_floating(values.type):
            return self._float_sums(values, mask, first, counts, upto)
        raw = np.where(mask, np.asarray(values.fill_null(0), dtype=np.int64), 0)
        exact = int(np.abs(raw).max()) * n < _EXACT
        sums = np.cumsum(raw if exact else raw.astype(object))

        def evaluate(idx: np.ndarray) -> pa.Array:
            count = upto(counts, idx)
            total = upto(sums, idx)
            empty = count == 0
            if not exact:  # Python integers: exact at any size
                pairs = zip(total.tolist(), count.tolist(), strict=True)
                if self.kind == "avg":
                    # DuckDB (and the reference) divide the sum as a double
                    return pa.array([float(t) / c if c else None for t, c in pairs],
                                    pa.float64())
                return pa.array([decimal.Decimal(int(t)) if c else None for t, c in pairs],
                                self.type)
            if self.kind == "avg":
                return pa.array(total / np.maximum(count, 1), pa.float64(), mask=empty)
            return pa.array(total, pa.int64(), mask=empty).cast(self.type)
        return evaluate

    def _float_sums(self, values: pa.Array, mask: np.ndarray, first: np.ndarray,
                    counts: np.ndarray, upto: Callable) -> Callable[[np.ndarray], pa.Array]:
        """SUM/AVG of a floating column: each match summed from its first row on, in
        row order, as the reference adds (a difference of prefix sums would round
        differently)."""
        sums = _running_float_sums(np.asarray(values.fill_null(0.0), dtype=np.float64),
                                   mask, first)

        def evaluate(idx: np.ndarray) -> pa.Array:
            count = upto(counts, idx)
            empty = count == 0
            total = np.where(idx >= 0, sums[np.maximum(idx, 0)], 0.0)
            if self.kind == "avg":
                total = total / np.maximum(count, 1)
            return pa.array(total, pa.float64(), mask=empty)
        return evaluate

    def _extreme(self, values: pa.Array, mask: np.ndarray,
                 match_of: np.ndarray) -> Callable[[np.ndarray], pa.Array]:
        n = len(values)
        order = np.asarray(pc.sort_indices(values), dtype=np.int64)  # label index by rank
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        score = rank + 1 if self.kind == "max" else n - rank  # 1..n, higher wins
        base = match_of * (n + 1)
        best = np.maximum.accumulate(base + np.where(mask, score, 0)) - base  # 0: none yet

        def evaluate(idx: np.ndarray) -> pa.Array:
            got = np.where(idx >= 0, best[np.maximum(idx, 0)], 0)
            none = got == 0
            ranked = got - 1 if self.kind == "max" else n - got
            at = order[np.where(none, 0, ranked)]
            picked = values.take(pa.array(at, pa.int64(), mask=none))
            return picked if picked.type == self.type else picked.cast(self.type)
        return evaluate

    # -- the two shapes of output ----------------------------------------------------------------

    def final(self, m: Matches, rows: Rows) -> pa.Array:
        """The aggregate over each whole match (ONE ROW PER MATCH, FINAL)."""
        evaluate = self._segment_values(m, rows)
        return evaluate(np.where(m.lengths > 0, m.offsets + m.lengths - 1, -1))

    def running(self, m: Matches, e: Expansion, rows: Rows) -> pa.Array:
        """The aggregate over the match up to each output row (ALL ROWS PER MATCH)."""
        evaluate = self._segment_values(m, rows)
        return evaluate(np.where(e.pos >= 0, m.offsets[e.match] + e.pos, -1))


@njit(cache=True, nogil=True)
def _running_float_sums(values: np.ndarray, mask: np.ndarray,
                        first: np.ndarray) -> np.ndarray:  # pragma: no cover (compiled)
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


def segment_aggregate(spec: MatchSpec, variables: list[str],
                      node: exp.Expression) -> SegmentAggregate | None:
    """The column-wise form of bound aggregate ``node``; None when ``node`` is no aggregate
    this module computes (the caller decides what else to try). Raises Unsupported for an
    aggregate over a column whose result would not match the reference exactly."""
    if not isinstance(node, AggregateCall) or node.function not in _KINDS \
            or node.distinct or node.condition is not None or len(node.expressions) != 1:
        return None
    kind = node.function
    arg = node.expressions[0]
    if not isinstance(arg, Pointer) or arg.classifier:
        return None
    name = arg.column
    t = spec.columns.field(name).type
    members = node.vars
    ids = None if members is None else np.array([variables.index(v) for v in members], np.int64)
    if kind in ("sum", "avg") and not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        raise Unsupported(f"{describe(node)}: column-wise SUM/AVG over {t}")
    if kind in ("min", "max") and not _ordered(t):
        raise Unsupported(f"{describe(node)}: column-wise MIN/MAX over {t}")
    # DuckDB's result types; the measure compiler checks them against the declared ones.
    natural = {"count": pa.int64(), "avg": pa.float64(),
               "sum": pa.float64() if pa.types.is_floating(t) else pa.decimal128(38, 0)
               }.get(kind, t)
    return SegmentAggregate(kind, name, ids, natural)
