"""Dead ends of the thread VM: attempts decided where a failed attempt already was.

The kernel (:func:`.kernel.run_attempts`) decides attempts one after another,
and an attempt that no row ends (``A B+ C`` where no ``C`` comes, a partition
or stream that ends with an attempt open) reads to the end: so does the
attempt from every later start row, quadratic in the rows. The DFA has the
same problem and the same cure (:mod:`.dfa`); here a state is a list of threads.

The rule. Whether a thread reaches ``DONE`` from row ``x`` on depends only on
what the kernel reads of it there: its program counter, loop flags, the
registers of the variables a condition observes (``obs``) and the running
aggregates' accumulators. Threads equal in those are the threads the kernel
already merges within a step. As long as no thread reaches ``DONE`` nothing
ends a step early, so the threads evolve independently: the threads of a
later attempt that are each among a decided attempt's threads at row ``x``,
after that attempt's last match end, never reach ``DONE`` either (nor exceed
the threads the decided one had), and the later attempt is decided at ``x``
with what it found so far: the same rows as running on.

What else a condition reads about an attempt makes equal threads of two
attempts differ, and the rule is off (:func:`.kernel.memo_horizon`: -1) or starts later:
``FIRST(x)`` / ``FIRST(x, k)`` without a variable and ``COUNT(*)`` read the
start row, ``MATCH_NUMBER()`` the number of matches found before, and WITHIN
ends each attempt at a row of its own; Go4Risk statistics count every row an
attempt reads, so they keep it off too. ``LAST(x, k)`` reads NULL within ``k`` rows
of the start: two attempts agree on it from ``k`` rows after the later start on,
so states are compared from there (:func:`.kernel.memo_horizon` says from where).

States are recorded and compared at every :data:`MEMO_EVERY`-th row only and
only while at most :data:`MEMO_THREADS` threads are alive; an arena of
snapshots that fills up is emptied (a dead end forgotten is only work lost).
"""

from __future__ import annotations

import numpy as np
from numba import njit

MEMO_EVERY = 32  # rows between dead-end states recorded and compared (a power of two)
MEMO_THREADS = 64  # live threads beyond which a state is neither recorded nor compared


@njit(cache=True, nogil=True)
def arrays(n_rows, on, width):
    """``(heads, pending, arena)`` of :func:`snapshot` for a buffer of ``n_rows`` rows
    and snapshots of ``width`` words per thread (tiny when the rule is off)."""
    slots = n_rows // MEMO_EVERY + 2 if on else 1
    heads = np.empty(slots, np.int64)
    for k in range(slots):
        heads[k] = -1
    pending = np.empty(slots + 1, np.int64)
    pending[0] = 0
    arena = np.empty(slots * (1 + 4 * width) + 1024 if on else 1, np.int64)
    arena[0] = 1
    return heads, pending, arena


@njit(cache=True, nogil=True)
def snapshot(heads, pending, arena, th, lp, fp, accb, side, n_cur, obs, n_obs, obs_last,
             obs_first, acc_w, acc_side, row):
    """Compare the live threads at ``row`` (a multiple of MEMO_EVERY) with the dead end
    recorded there: True when each of them is among its threads. Otherwise append
    them to ``arena`` as the open attempt's pending snapshot at ``row``.

    ``pending[0]`` counts the pending snapshots, ``pending[1:]`` their offsets;
    ``arena[0]`` is the arena's fill. A snapshot is ``(row, threads)`` and per thread
    ``pc, flags``, the observed variables' last and first rows (each compared only
where a condition reads it: ``obs_last``, ``obs_first``) and the accumulators'
    bits (``accb``: the kernel's ``acc`` viewed as int64; NaN equals NaN, -0.0 differs
    from 0.0, as where the kernel merges threads).
    """
    if n_cur > MEMO_THREADS:
        return False
    width = 2 + 2 * n_obs + acc_w
    slot = row // MEMO_EVERY
    at = heads[slot]
    if at >= 0:
        n_old = arena[at + 1]
        dead = True
        for i in range(n_cur):
            r = th[side, 4, i]
            found = False
            for j in range(n_old):
                o = at + 2 + j * width
                if arena[o] != th[side, 0, i] or arena[o + 1] != th[side, 1, i]:
                    continue
                same = True
                for q in range(n_obs):
                    u = obs[q]
                    if (obs_last[u] and arena[o + 2 + q] != lp[side, r, u]) or \
                            (obs_first[u] and arena[o + 2 + n_obs + q] != fp[side, r, u]):
                        same = False
                        break
                if same:
                    a = side * acc_side + r * acc_w
                    for q in range(acc_w):
                        if arena[o + 2 + 2 * n_obs + q] != accb[a + q]:
                            same = False
                            break
                if same:
                    found = True
                    break
            if not found:
                dead = False
                break
        if dead:
            return True
    need = 2 + n_cur * width
    if arena[0] + need > arena.shape[0]:  # full: forget every dead end, start over
        for k in range(heads.shape[0]):
            heads[k] = -1
        pending[0] = 0
        arena[0] = 1
        if arena[0] + need > arena.shape[0]:
            return False
    o = arena[0]
    arena[o] = row
    arena[o + 1] = n_cur
    for i in range(n_cur):
        r = th[side, 4, i]
        b = o + 2 + i * width
        arena[b] = th[side, 0, i]
        arena[b + 1] = th[side, 1, i]
        for q in range(n_obs):
            u = obs[q]
            arena[b + 2 + q] = lp[side, r, u]
            arena[b + 2 + n_obs + q] = fp[side, r, u]
        a = side * acc_side + r * acc_w
        for q in range(acc_w):
            arena[b + 2 + 2 * n_obs + q] = accb[a + q]
    arena[0] = o + need
    pending[0] += 1
    pending[pending[0]] = o
    return False


@njit(cache=True, nogil=True)
def commit(heads, pending, arena, last_end):
    """The decided attempt's pending snapshots after its last match end (``last_end``;
    below its start: none) become dead ends; the pending list is emptied."""
    for k in range(1, pending[0] + 1):
        o = pending[k]
        row = arena[o]
        if row > last_end:
            heads[row // MEMO_EVERY] = o
    pending[0] = 0
