"""The loop over a batch's whole partitions, compiled around the kernel variant it calls.

:class:`~matchsql.engine.compiled.batch.WholePartitions` runs the kernel once per
partition. Called from Python, each call costs about 10 us before the kernel
does anything (numba checks the types of its 30 arguments, the loop slices the
partition's rows and hands out the output's free end): with 4,000 partitions of
75 rows that was two thirds of a batch's time. :func:`driver` compiles the same
loop with the kernel variant in it, one per variant (its name and cache files
are the variant's, as :func:`~matchsql.engine.compiled.kernel.attempts_kernel`
names its own), which returns to Python only where the Python loop did more than
call the kernel: a workspace or output array to grow, or an error to raise.

The kernel sees what it saw from the Python loop: each partition's rows (its
register columns copied to contiguous arrays), the same parameters, and the
free end of the output arrays, never less free room than ``caps`` asks for
(:data:`NEED_SPACE` hands back to grow them first).
"""

from __future__ import annotations

import threading
import types

import numpy as np
from numba import njit
from numba.core.dispatcher import Dispatcher

from matchsql.engine.compiled import kernel as K

__all__ = ["NEED_SPACE", "close_call", "driver", "next_partition"]

#: The loop's status where the output arrays have less free room than ``caps`` asks of
#: them: the caller grows them and calls again (the next partition not yet begun).
NEED_SPACE = -1

_drivers: dict[Dispatcher, Dispatcher] = {}
_drivers_lock = threading.Lock()


def driver(kernel: Dispatcher) -> Dispatcher:
    """The compiled partition loop around ``kernel`` (a variant of
    :func:`~matchsql.engine.compiled.kernel.run_attempts`), made once per variant."""
    with _drivers_lock:
        found = _drivers.get(kernel)
        if found is None:
            namespace = dict(globals())
            namespace["_kernel"] = kernel
            name = "partitions_" + kernel.py_func.__qualname__.lstrip("_")
            fn = types.FunctionType(_partitions.__code__, namespace, name, _partitions.__defaults__)
            fn.__qualname__ = name  # the numba cache names its files by it
            fn.__doc__ = _partitions.__doc__
            found = _drivers[kernel] = njit(cache=True, nogil=True)(fn)
    return found


@njit(cache=True, nogil=True)
def close_call(records, rec_used, n_rec, first_row, lab_used, found, part):
    """The bookkeeping of one kernel call of a compiled partition loop (this module's, and
    :func:`~matchsql.engine.compiled.dfa.dfa_partitions`): the ``n_rec`` records it wrote
    from ``rec_used`` on get the batch's row numbers (the call's start at
    ``first_row``) and label offsets (its labels start at ``lab_used``), and count for
    partition ``part``."""
    for r in range(rec_used, rec_used + n_rec):
        records[r, 1] += first_row
        records[r, 4] += lab_used
    found[part] += n_rec


@njit(cache=True, nogil=True)
def next_partition(params):
    """The parameters where a partition's matching begins (no attempt yet, match 0)."""
    params[K.K_NEXT] = 0
    params[K.K_MN] = 0
    params[K.K_COVERED] = -1


def _kernel(*args: object) -> tuple[int, ...]:  # the variant, in each driver's namespace
    raise NotImplementedError


def _partitions(
    prog,
    rl,
    viable,
    wend,
    code,
    fconst,
    spans,
    conj,
    cconst,
    conj_spans,
    cols,
    valid,
    set_mask,
    obs_last,
    obs_first,
    skip_mask,
    params,
    stat_state,
    stat_kind,
    stat,
    th,
    lp,
    fp,
    seen,
    seen_pc,
    stack,
    arena,
    records,
    labels,
    cancel,
    bounds,
    part,
    rec_used,
    lab_used,
    need_rec,
    need_lab,
    found,
):
    """Run the kernel over partitions ``part``, ``part + 1``, ... (rows ``bounds[i]`` to
    ``bounds[i + 1]`` of ``rl``, ``viable``, ``cols`` and ``valid``) of a complete batch.

    ``params`` holds the query's slots; ``K_NEXT``, ``K_MN`` and ``K_COVERED`` are where
    partition ``part`` resumes (0, 0, -1 at its start), and are reset for each next one.
    Records and labels are written from ``rec_used`` and ``lab_used`` on, their rows and
    label offsets made the batch's (the kernel's are its call's). ``found[i]`` counts
    partition ``i``'s records.

    Returns ``(status, next_start, match_number, covered, err_row, part, rec_used,
    lab_used)``: ``K.ST_DONE`` with ``part`` past the last partition, or the status that
    stopped partition ``part`` (``K.ST_FULL``, an error) or :data:`NEED_SPACE` before it.
    """
    n_parts = bounds.shape[0] - 1
    wide = cols.shape[1] != 1
    prefilter = viable.shape[0] > 0
    while part < n_parts:
        if records.shape[0] - rec_used < need_rec or labels.shape[0] - lab_used < need_lab:
            return NEED_SPACE, 0, 0, 0, 0, part, rec_used, lab_used
        a = bounds[part]
        b = bounds[part + 1]
        params[K.K_ROWS] = b - a
        params[K.K_LIMIT] = b - a
        part_cols = np.ascontiguousarray(cols[:, a:b]) if wide else cols
        part_valid = np.ascontiguousarray(valid[:, a:b]) if wide else valid
        part_viable = viable[a:b] if prefilter else viable
        status, nxt, mn, covered, err_row, n_rec, n_lab = _kernel(
            prog,
            rl[a:b],
            part_viable,
            wend,
            code,
            fconst,
            spans,
            conj,
            cconst,
            conj_spans,
            part_cols,
            part_valid,
            set_mask,
            obs_last,
            obs_first,
            skip_mask,
            params,
            stat_state,
            stat_kind,
            stat,
            th,
            lp,
            fp,
            seen,
            seen_pc,
            stack,
            arena,
            records[rec_used:],
            labels[lab_used:],
            cancel,
        )
        close_call(records, rec_used, n_rec, a, lab_used, found, part)
        rec_used += n_rec
        lab_used += n_lab
        if status == K.ST_FULL or status >= K.ST_THREADS:
            return status, nxt, mn, covered, err_row, part, rec_used, lab_used
        next_partition(params)
        part += 1
    return K.ST_DONE, 0, 0, 0, 0, part, rec_used, lab_used
