"""The GPU path's "each" selections as the column-wise :class:`Matches` the measures read.

Under ALL MATCHES / INCREMENTAL a kept start has one match per end row its
walk reached (:mod:`matchsql.engine.gpu.kernels`, ``each``); the writing launch
records them in the order the walk found them, while the CPU paths number and
output them by end row within a start (the reference's ``sorted(by_end)``, the
kernel's ``end_lo .. end_hi``). WITH UNMATCHED ROWS adds each unmatched row as
an empty match marked ``unmatched`` (all measures NULL), in row order among the
matches, as the compiled CPU matcher's records have it. Kept apart from the
launches so that both are plain array code, testable without a device.
"""

from __future__ import annotations

import numpy as np

from matchsql.engine.compiled.match_arrays import Matches


def every_end(
    kept: np.ndarray,
    counts: np.ndarray,
    rec: np.ndarray,
    codes: np.ndarray,
    first_number: int,
) -> Matches:
    """The matches of the ``kept`` starts, ``counts[i]`` of them for ``kept[i]``, from
    the records ``rec`` (``(end, label offset)`` rows, start by start in ``kept``'s
    order, each start's in the order found) and the label codes ``codes``
    (variable * 2 + excluded): ordered by start, then end, numbered from
    ``first_number + 1``, their labels made contiguous in that order."""
    starts = np.repeat(kept.astype(np.int64), counts)
    ends = rec[:, 0].astype(np.int64)
    order = np.lexsort((ends, starts))
    starts, ends, src = starts[order], ends[order], rec[order, 1].astype(np.int64)
    lengths = ends - starts + 1
    offsets = exclusive_scan(lengths)
    picked = codes[np.repeat(src - offsets, lengths) + np.arange(int(lengths.sum()))]
    return Matches(
        starts=starts,
        lengths=lengths,
        numbers=np.arange(first_number + 1, first_number + len(starts) + 1, dtype=np.int64),
        labels=picked // 2,
        offsets=offsets,
        excluded=(picked & 1).astype(bool),
    )


def add_unmatched(m: Matches, rows: np.ndarray) -> Matches:
    """``m`` with the unmatched ``rows`` as empty matches (MATCH_NUMBER 0, measures
    NULL) in row order; a start's matches and an unmatched row never share a row."""
    if not len(rows):
        return m
    starts = np.concatenate([m.starts, rows.astype(np.int64)])
    order = np.argsort(starts, kind="stable")
    lengths = np.concatenate([m.lengths, np.zeros(len(rows), np.int64)])[order]
    # The labels stay as they are: the matches keep their order, the empty ones add none.
    return Matches(
        starts=starts[order],
        lengths=lengths,
        numbers=np.concatenate([m.numbers, np.zeros(len(rows), np.int64)])[order],
        labels=m.labels,
        offsets=exclusive_scan(lengths),
        excluded=m.excluded,
        unmatched=np.concatenate([np.zeros(len(m.starts), bool), np.ones(len(rows), bool)])[order],
    )


def exclusive_scan(counts: np.ndarray) -> np.ndarray:
    """The exclusive prefix sum of ``counts``: where each entry's slots begin when
    they are laid out in order (a match's labels, a start's records)."""
    out = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out
