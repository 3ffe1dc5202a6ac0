"""Measures and output rows computed column-wise from match boundaries and labels.

The kernel hands back, per match, its first row, its length and the
variable of each matched row. In ONE ROW PER MATCH every measure has FINAL
semantics, so the common measures are gathers and segment reductions over
those arrays: ``A.x``/``LAST(A.x)`` read the last row labelled ``A`` (one
``maximum.reduceat``), ``FIRST`` the first, ``PREV``/``NEXT`` move the located
row, ``MATCH_NUMBER()`` is the match number column, ``CLASSIFIER()`` the last
row's label, ``COUNT(*)``/``COUNT(A.*)`` segment lengths and counts. Values
come from the buffered Arrow columns with one ``take`` per measure, so no
Python object is created per row or per match. Measures outside this set
raise :class:`Unsupported` at planning time and the matcher builds its
output with the reference evaluator instead.

ALL ROWS PER MATCH (:class:`RunningMeasureCompiler`) outputs every
non-excluded row of a match, and a measure there sees the match up to that
row: ``COUNT`` becomes a cumulative count, ``A.x``/``LAST(A.x)`` a forward
fill of the last ``A`` row within the match, ``FIRST(A.x)`` the match's first
``A`` row (FIRST counts over the whole match even under RUNNING, as Trino
does, so rows before it see it too); FINAL measures, and PREV/NEXT around a
FINAL FIRST/LAST, are the ONE ROW values repeated. Before this, the reference
evaluator recomputed each running measure from the match start for every row:
quadratic in the match length.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from matchsql.engine.compiled.composite_measures import composite, is_composite
from matchsql.engine.compiled.constants import constant_measure
from matchsql.engine.compiled.lowering import Unsupported
from matchsql.engine.compiled.match_arrays import Expansion, Matches, Rows
from matchsql.engine.compiled.segment_aggregates import fits, segment_aggregate
from matchsql.engine.compiled.segment_reductions import (
    cast_exact,
    running_nth,
    segment_nth,
    segment_nth_of,
    segment_pick,
)
from matchsql.plan.binder import bind
from matchsql.plan.bound import AggregateCall, MatchNumberRef, Pointer, describe
from matchsql.plan.spec import MatchSpec, RowsPerMatch

Locate = Callable[[Matches, Rows], np.ndarray]  # absolute row per match, -1 for none
Measure = Callable[[Matches, Rows], pa.Array]


class MeasureCompiler:
    """Compiles the measures of a ONE ROW PER MATCH query into column-wise functions."""

    def __init__(self, spec: MatchSpec, variables: list[str]) -> None:
        self.spec = spec
        self.variables = variables
        self.types = {f.name: f.type for f in spec.columns}

    def compile_all(self) -> list[Callable[..., pa.Array]]:
        out = []
        for m in self.spec.measures:
            fn, natural = self.compile_one(bind(m.expr, self.spec))
            if natural != m.type:
                if not fits(natural, m.type):
                    raise Unsupported(f"measure {m.name}: computed as {natural}, declared {m.type}")
                fn = _cast(fn, m.type, f"measure {m.name}")
            out.append(fn)
        return out

    def compile_one(self, node: exp.Expression) -> tuple[Callable[..., pa.Array], pa.DataType]:
        """The measure's function (:data:`Measure`; :data:`RunningMeasure` in a subclass for
        ALL ROWS PER MATCH) and the type it computes."""
        return self.measure(node)

    def ids(self, members: frozenset[str] | None) -> np.ndarray | None:
        if members is None:
            return None
        return np.array([self.variables.index(v) for v in members], np.int64)

    def measure(self, node: exp.Expression) -> tuple[Measure, pa.DataType]:
        direct = segment_aggregate(self.spec, self.variables, node) or constant_measure(
            self.spec, node
        )
        if direct is not None:
            return direct.final, direct.type
        if is_composite(node):
            return composite(self.spec, node, self.measure)
        if isinstance(node, MatchNumberRef):
            return (lambda m, rows: pa.array(m.numbers, pa.int64())), pa.int64()
        if _plain_classifier(node):
            names = np.array(self.variables + [None], dtype=object)

            def classifier(m: Matches, rows: Rows) -> pa.Array:
                at = np.where(m.lengths > 0, m.offsets + m.lengths - 1, -1)
                codes = np.where(at >= 0, m.labels[np.maximum(at, 0)] if len(m.labels) else -1, -1)
                return pa.array(names[codes], pa.string())

            return classifier, pa.string()
        locate, column = self.locator(node)
        ctype = self.types[column]

        def gather(m: Matches, rows: Rows) -> pa.Array:
            at = locate(m, rows)
            rel = at - rows.base
            missing = at < 0
            idx = pa.array(np.where(missing, 0, rel), pa.int64(), mask=missing)
            return (
                rows.table.column(column).take(idx).combine_chunks()
                if isinstance(rows.table.column(column), pa.ChunkedArray)
                else rows.table.column(column).take(idx)
            )

        return gather, ctype

    def target(self, node: exp.Expression) -> tuple[int, str, np.ndarray | None, bool, int]:
        """What a value measure reads: ``(PREV/NEXT shift, column, variable ids or None
        for all rows, LAST (else FIRST), logical offset)``."""
        column = node.column if isinstance(node, Pointer) else None  # None: CLASSIFIER
        if not isinstance(node, Pointer) or column is None or node.position.aggregated:
            raise Unsupported(f"measure {describe(node)}")
        at = node.position
        ids = self.ids(at.vars)
        return at.physical, column, ids, not at.first, at.offset

    def locator(self, node: exp.Expression) -> tuple[Locate, str]:
        """The row a value measure reads, and the column it reads there."""
        delta, column, ids, last, k = self.target(node)

        def locate(m: Matches, rows: Rows) -> np.ndarray:
            if ids is None:
                if last:
                    at = np.where(m.lengths > k, m.starts + m.lengths - 1 - k, -1)
                else:
                    at = np.where(m.lengths > k, m.starts + k, -1)
            else:
                pick = segment_nth_of(m, ids, last, k)
                at = np.where(pick >= 0, m.starts + (pick - m.offsets), -1)
            return _moved(at, delta, rows)

        return locate, column


def _cast(fn: Callable[..., pa.Array], to: pa.DataType, what: str) -> Callable[..., pa.Array]:
    """``fn``'s values cast exactly to the declared type ``to``."""
    return lambda *args: cast_exact(fn(*args), to, what)


def _moved(at: np.ndarray, delta: int, rows: Rows) -> np.ndarray:
    """Rows ``at`` moved by PREV/NEXT ``delta``: -1 where none, or outside the partition."""
    if not delta:
        return at
    moved = at + delta
    bad = (at < 0) | (moved < 0) | (rows.complete & (moved >= rows.count))
    return np.where(bad, -1, moved)


RunningMeasure = Callable[[Matches, Expansion, Rows], pa.Array]


def expansion(spec: MatchSpec, m: Matches) -> Expansion:
    """The output rows of ALL ROWS PER MATCH for the matches ``m``."""
    return Expansion.of(m, spec.rows_per_match is not RowsPerMatch.ALL_OMIT_EMPTY)


def output_batch(
    spec: MatchSpec, measures: list, m: Matches, rows: Rows, expanded: Expansion | None = None
) -> pa.RecordBatch:
    """The output rows of the complete matches ``m``, in the spec's output shape:
    ONE ROW PER MATCH (``measures`` from :class:`MeasureCompiler`, a row per match) or
    ALL ROWS PER MATCH (from :class:`RunningMeasureCompiler`; the rows of
    ``expanded``, the caller's :func:`expansion` of ``m`` where it has one)."""

    def take(name: str, at: np.ndarray) -> pa.Array:
        values = rows.table.column(name).take(pa.array(at - rows.base, pa.int64()))
        return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values

    if not spec.rows_per_match.all_rows:
        arrays = [take(c, m.starts) for c in spec.partition_by]
        arrays += [fn(m, rows) for fn in measures]
    else:
        e = expanded if expanded is not None else expansion(spec, m)
        arrays = [take(c, e.row) for c in [*spec.partition_by, *spec.order_by]]
        values = [fn(m, e, rows) for fn in measures]
        if m.unmatched is not None and m.unmatched.any():
            # An unmatched row is an empty match here, whose measures are all NULL.
            missing = pa.array(m.unmatched[e.match])
            values = [pc.if_else(missing, pa.scalar(None, v.type), v) for v in values]
        arrays += values
        arrays += [take(name, e.row) for name in spec.passed_columns]
    arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    return pa.RecordBatch.from_arrays(arrays, schema=spec.output_schema())


class RunningMeasureCompiler(MeasureCompiler):
    """ALL ROWS PER MATCH measures: each output row sees its match up to that row
    (RUNNING, the default) or the whole match (FINAL), computed with cumulative
    and forward-fill operations over the chunk's label array."""

    def compile_one(self, node: exp.Expression) -> tuple[RunningMeasure, pa.DataType]:
        return self.running(node)

    def running(self, node: exp.Expression) -> tuple[RunningMeasure, pa.DataType]:
        if is_composite(node):
            return composite(self.spec, node, self.running)  # each part RUNNING or FINAL
        finals = _finals(node)
        if True in finals:  # FINAL: the ONE ROW value on every row
            if len(finals) > 1:
                raise Unsupported(f"measure {describe(node)}: RUNNING and FINAL mixed")
            whole, natural = self.measure(node)
            return (lambda m, e, rows: whole(m, rows).take(pa.array(e.match))), natural
        direct = segment_aggregate(self.spec, self.variables, node) or constant_measure(
            self.spec, node
        )
        if direct is not None:
            return direct.running, direct.type
        if isinstance(node, MatchNumberRef):
            return (lambda m, e, rows: pa.array(m.numbers[e.match], pa.int64())), pa.int64()
        if _plain_classifier(node):
            names = np.array(self.variables + [None], dtype=object)

            def classifier(m: Matches, e: Expansion, rows: Rows) -> pa.Array:
                at = np.where(e.pos >= 0, m.offsets[e.match] + e.pos, -1)
                codes = m.labels[np.maximum(at, 0)] if len(m.labels) else np.zeros(len(at), int)
                return pa.array(names[np.where(at >= 0, codes, -1)], pa.string())

            return classifier, pa.string()
        locate, column = self.running_locator(node)

        def gather(m: Matches, e: Expansion, rows: Rows) -> pa.Array:
            at = locate(m, e, rows)
            missing = at < 0
            idx = pa.array(np.where(missing, 0, at - rows.base), pa.int64(), mask=missing)
            values = rows.table.column(column).take(idx)
            return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values

        return gather, self.types[column]

    def running_locator(self, node: exp.Expression):
        """The row a value measure reads at each output row, and its column."""
        delta, column, ids, last, k = self.target(node)

        def locate(m: Matches, e: Expansion, rows: Rows) -> np.ndarray:
            start = m.starts[e.match]
            if ids is None:
                if last:
                    at = np.where(e.pos - k >= 0, start + e.pos - k, -1)
                else:  # FIRST sees the whole match, past the output row too (as Trino)
                    at = np.where(m.lengths[e.match] > k, start + k, -1)
            else:
                label = np.where(e.pos >= 0, m.offsets[e.match] + e.pos, -1)
                seen = _running_pick(m, np.isin(m.labels, ids), last, k)
                pick = seen[np.maximum(label, 0)] if len(seen) else np.full(len(label), -1)
                pick = np.where(label >= 0, pick, -1)
                at = np.where(pick >= 0, start + (pick - m.offsets[e.match]), -1)
            return _moved(at, delta, rows)

        return locate, column


def _running_pick(m: Matches, mask: np.ndarray, last: bool, k: int = 0) -> np.ndarray:
    """Per label index: the k-th last masked label at or before it in its match
    (``last``) or the k-th masked label of its whole match; -1 where there is none."""
    n = len(m.labels)
    if n == 0:
        return np.zeros(0, np.int64)
    if last and k:
        return running_nth(m, mask, k)
    pos = np.arange(n, dtype=np.int64)
    segment_start = np.repeat(m.offsets, m.lengths)
    if last:
        filled = np.maximum.accumulate(np.where(mask, pos, -1))
        return np.where(filled >= segment_start, filled, -1)
    first = segment_nth(m, mask, last=False, k=k) if k else segment_pick(m, mask, last=False)
    return np.repeat(first, m.lengths)


def _finals(node: exp.Expression) -> set[bool | None]:
    """The RUNNING/FINAL settings of the reads in ``node``."""
    out: set[bool | None] = set()
    for n in node.walk():
        if isinstance(n, Pointer) and not n.position.aggregated:
            out.add(n.position.final)
        elif isinstance(n, AggregateCall):
            out.add(n.final)
    return out


def _plain_classifier(node: exp.Expression) -> bool:
    """``CLASSIFIER()``: the label of the current (ONE ROW: the last) row."""
    return (
        isinstance(node, Pointer)
        and node.classifier
        and node.position.vars is None
        and node.position.current
        and not node.position.physical
    )
