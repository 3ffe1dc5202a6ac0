"""ONE ROW PER MATCH measures computed column-wise from match boundaries and labels.

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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from sqlglot import exp

from matchsql.fsm.compiled.lowering import Unsupported, column_name, describe, strip, var_set
from matchsql.fsm.spec import MatchSpec
from matchsql.grammar.nodes import Classifier, MatchNumber, Navigation


@dataclass
class Matches:
    """A chunk of complete matches of one partition (absolute row numbers)."""

    starts: np.ndarray  # int64: first row (the attempted row for an empty match)
    lengths: np.ndarray  # int64: rows in the match (0 = empty match)
    numbers: np.ndarray  # int64: MATCH_NUMBER
    labels: np.ndarray  # int64: variable id of every matched row, matches concatenated
    offsets: np.ndarray  # int64: where each match's labels start in ``labels``


@dataclass
class Rows:
    """The buffered rows the measures read: partition rows ``base`` .. ``base + len``."""

    table: pa.Table
    base: int
    count: int  # rows of the partition known so far
    complete: bool


Locate = Callable[[Matches, Rows], np.ndarray]  # absolute row per match, -1 for none
Measure = Callable[[Matches, Rows], pa.Array]


def _segment_pick(m: Matches, mask: np.ndarray, last: bool) -> np.ndarray:
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


class MeasureCompiler:
    """Compiles the measures of a ONE ROW PER MATCH query into column-wise functions."""

    def __init__(self, spec: MatchSpec, variables: list[str]) -> None:
        self.spec = spec
        self.variables = variables
        self.types = {f.name: f.type for f in spec.columns}

    def compile_all(self) -> list[Measure]:
        out = []
        for m in self.spec.measures:
            fn, natural = self.measure(m.expr)
            if natural != m.type:
                raise Unsupported(f"measure {m.name}: computed as {natural}, declared {m.type}")
            out.append(fn)
        return out

    def ids(self, members: frozenset[str] | None) -> np.ndarray | None:
        if members is None:
            return None
        return np.array([self.variables.index(v) for v in members], np.int64)

    def measure(self, node: exp.Expression) -> tuple[Measure, pa.DataType]:
        node = strip_final(node)
        if isinstance(node, MatchNumber):
            return (lambda m, rows: pa.array(m.numbers, pa.int64())), pa.int64()
        if isinstance(node, Classifier) and node.variable is None:
            names = np.array(self.variables + [None], dtype=object)

            def classifier(m: Matches, rows: Rows) -> pa.Array:
                at = np.where(m.lengths > 0, m.offsets + m.lengths - 1, -1)
                codes = np.where(at >= 0, m.labels[np.maximum(at, 0)] if len(m.labels)
                                 else -1, -1)
                return pa.array(names[codes], pa.string())
            return classifier, pa.string()
        if isinstance(node, exp.Count) and not node.args.get("distinct"):
            arg = node.this
            if isinstance(arg, exp.Star):
                return (lambda m, rows: pa.array(m.lengths, pa.int64())), pa.int64()
            if isinstance(arg, exp.Column) and isinstance(arg.this, exp.Star):
                ids = self.ids(var_set(self.spec, arg.table or None))

                def count(m: Matches, rows: Rows) -> pa.Array:
                    out = np.zeros(len(m.starts), np.int64)
                    nonempty = m.lengths > 0
                    if nonempty.any() and len(m.labels):
                        hits = np.isin(m.labels, ids).astype(np.int64)
                        out[nonempty] = np.add.reduceat(hits, m.offsets[nonempty])
                    return pa.array(out, pa.int64())
                return count, pa.int64()
            raise Unsupported("COUNT over an expression")
        locate, column = self.locator(node)
        ctype = self.types[column]

        def gather(m: Matches, rows: Rows) -> pa.Array:
            at = locate(m, rows)
            rel = at - rows.base
            missing = at < 0
            idx = pa.array(np.where(missing, 0, rel), pa.int64(), mask=missing)
            return rows.table.column(column).take(idx).combine_chunks() \
                if isinstance(rows.table.column(column), pa.ChunkedArray) \
                else rows.table.column(column).take(idx)
        return gather, ctype

    def locator(self, node: exp.Expression) -> tuple[Locate, str]:
        """The row a value measure reads, and the column it reads there."""
        delta = 0
        if isinstance(node, Navigation) and node.physical:
            delta = -node.offset if node.kind == "PREV" else node.offset
            node = strip_final(node.this)
        if isinstance(node, Navigation) and not node.physical:
            target = strip_final(node.this)
            last = node.kind == "LAST"
            k = node.offset
        else:
            target, last, k = node, True, 0
        if not isinstance(target, exp.Column) or isinstance(target.this, exp.Star):
            raise Unsupported(f"measure {describe(node)}")
        column = column_name(self.spec, target)
        ids = self.ids(var_set(self.spec, target.table or None))

        def locate(m: Matches, rows: Rows) -> np.ndarray:
            if ids is None:
                if last:
                    at = np.where(m.lengths > k, m.starts + m.lengths - 1 - k, -1)
                else:
                    at = np.where(m.lengths > k, m.starts + k, -1)
            else:
                if k:
                    raise Unsupported("offset navigation over a variable")
                mask = np.isin(m.labels, ids)
                pick = _segment_pick(m, mask, last)
                at = np.where(pick >= 0, m.starts + (pick - m.offsets), -1)
            if delta:
                moved = at + delta
                bad = (at < 0) | (moved < 0) | (rows.complete & (moved >= rows.count))
                at = np.where(bad, -1, moved)
            return at
        if ids is not None and k:
            raise Unsupported(f"{describe(node)}: offset navigation over a variable")
        return locate, column


def strip_final(node: exp.Expression) -> exp.Expression:
    """RUNNING/FINAL mean the same in ONE ROW PER MATCH."""
    from matchsql.grammar.nodes import PatternSemantics

    while isinstance(node, exp.Paren | PatternSemantics):
        node = node.this
    return node


__all__ = ["Matches", "MeasureCompiler", "Rows", "strip"]
