"""AFTER MATCH SKIP resolved on the host from every candidate start's preferred match.

The kernel decides each start on its own; which starts are attempted depends
on the matches before them. One sequential pass over the starts, as the CPU
paths take them, keeps exactly the starts the sequential rule attempts, so the
matches (and MATCH_NUMBER) equal the CPU paths'. It is compiled on the CPU:
it reads one int per start and is O(rows).

WITH UNMATCHED ROWS is decided in the same pass: an attempted start without a
match is an unmatched row unless an earlier match (any of its ends, under ALL
MATCHES) covers it, as the CPU paths' ``covered`` rule has it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from matchsql.engine.compiled.kernel import (
    SKIP_LAST,
    SKIP_NEXT,
    SKIP_PAST,
    ST_DONE,
    ST_SKIP_ABSENT,
    ST_SKIP_FIRST,
    ST_SPAN,
)

NO_MATCH = -2
S_OK, S_SPAN, S_WAIT = 0, 1, 4  # as in matchsql.engine.gpu.kernels
#: Scan statuses besides the CPU kernel's: a kept start ran out of stack or steps; a
#: kept start waits for rows that have not arrived (``error row``: where to resume).
ST_RETRY, ST_WAIT = 100, 101


@njit(cache=True, nogil=True)
def resolve(ends, firsts, lasts, status, his, skip_mode, unmatched, begin, covered):
    """``(status, error row, kept starts, unmatched rows)`` of the sequential SKIP rule
    from row ``begin``; ``his[s]``: the last end of start ``s``'s matches (its preferred
    match's unless every end is kept); ``unmatched``: collect the unmatched rows, those
    after ``covered`` (the last row of the matches before ``begin``) that no match
    covers."""
    n = ends.shape[0]
    kept = np.empty(n, np.int64)
    lone = np.empty(n if unmatched else 0, np.int64)
    k = 0
    u = 0
    s = begin
    while s < n:
        if status[s] == S_SPAN:
            return ST_SPAN, s, kept[:k], lone[:u]
        if status[s] == S_WAIT:
            return ST_WAIT, s, kept[:k], lone[:u]
        if status[s] != S_OK:
            return ST_RETRY, s, kept[:k], lone[:u]
        e = ends[s]
        if e == NO_MATCH:
            if unmatched and s > covered:
                lone[u] = s
                u += 1
            s += 1
            continue
        kept[k] = s
        k += 1
        if his[s] > covered:
            covered = his[s]
        if e < s or skip_mode == SKIP_NEXT:
            s += 1
        elif skip_mode == SKIP_PAST:
            s = e + 1
        else:
            target = lasts[s] if skip_mode == SKIP_LAST else firsts[s]
            if target < 0:
                return ST_SKIP_ABSENT, s, kept[:k], lone[:u]
            if target == s:
                return ST_SKIP_FIRST, s, kept[:k], lone[:u]
            s = target
    return ST_DONE, s, kept[:k], lone[:u]
