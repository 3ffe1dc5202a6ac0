"""The arrays a compiled matcher hands to the column-wise measures.

Kept apart from the measure compilers so that the measure modules (gathers,
segment aggregates, constants) share these shapes without importing each
other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass
class Matches:
    """A chunk of complete matches of one partition (absolute row numbers)."""

    starts: np.ndarray  # int64: first row (the attempted row for an empty match)
    lengths: np.ndarray  # int64: rows in the match (0 = empty match)
    numbers: np.ndarray  # int64: MATCH_NUMBER
    labels: np.ndarray  # int64: variable id of every matched row, matches concatenated
    offsets: np.ndarray  # int64: where each match's labels start in ``labels``
    excluded: np.ndarray | None = None  # bool per label: an excluded row ({- -}), not output
    # bool per match: an unmatched row (WITH UNMATCHED ROWS), kept as an empty match at its
    # row whose measures are all NULL
    unmatched: np.ndarray | None = None

    def cut(self, k: int) -> tuple[Matches, Matches]:
        """The first ``k`` matches and the rest."""
        at = int(self.offsets[k]) if k < len(self.offsets) else len(self.labels)
        ex = self.excluded
        un = self.unmatched

        def part(sl: slice, labels: slice, shift: int) -> Matches:
            return Matches(
                self.starts[sl],
                self.lengths[sl],
                self.numbers[sl],
                self.labels[labels],
                self.offsets[sl] - shift,
                None if ex is None else ex[labels],
                None if un is None else un[sl],
            )

        return part(slice(None, k), slice(None, at), 0), part(slice(k, None), slice(at, None), at)


@dataclass
class Expansion:
    """The output rows of ALL ROWS PER MATCH for a chunk of matches, in output order."""

    match: np.ndarray  # int64: index of the row's match in the chunk
    pos: np.ndarray  # int64: its position in the match (0-based), -1 for an empty match
    row: np.ndarray  # int64: absolute row whose input columns it shows

    @classmethod
    def of(cls, m: Matches, show_empty: bool) -> Expansion:
        """Every non-excluded row of every match; an empty match gives one row at its
        start (when shown), as the reference's output builder does."""
        total = len(m.labels)
        match = np.repeat(np.arange(len(m.starts), dtype=np.int64), m.lengths)
        pos = np.arange(total, dtype=np.int64) - np.repeat(m.offsets, m.lengths)
        keep = np.ones(total, bool) if m.excluded is None else ~m.excluded
        match, pos = match[keep], pos[keep]
        if show_empty and (m.lengths == 0).any():
            empty = np.flatnonzero(m.lengths == 0).astype(np.int64)
            match = np.concatenate([match, empty])
            pos = np.concatenate([pos, np.full(len(empty), -1, np.int64)])
            order = np.argsort(match, kind="stable")
            match, pos = match[order], pos[order]
        return cls(match, pos, m.starts[match] + np.maximum(pos, 0))


@dataclass
class Rows:
    """The buffered rows the measures read: partition rows ``base`` .. ``base + len``."""

    table: pa.Table
    base: int
    count: int  # rows of the partition known so far
    complete: bool
