"""The device kernel: one thread per candidate start walks the pattern program.

Each thread runs a depth-first backtracking walk over the program array
(:func:`matchsql.engine.compiled.lowering.program_array`) from its start row,
reading the per-variable truth columns of the row-local DEFINE terms (built on
the device, :mod:`matchsql.engine.gpu.columns`). ``SPLIT`` pushes its second choice on
the thread's explicit stack and goes on with the first, so the first path that
reaches ``DONE`` is the standard's preferred match: the same one the compiled
thread VM (:mod:`matchsql.engine.compiled.kernel`) finds by running threads in
preference order (it merges threads whose state and registers are equal; such
a thread could only repeat what the first one did).

DEFINE terms that read other rows of the match (``A.x``, FIRST/LAST,
running aggregates) run in the thread: their register bytecode is the CPU kernel's
(:class:`matchsql.engine.compiled.lowering.RegisterCompiler`), and its
interpreter is the CPU kernel's own function compiled a second time, for the
device (:data:`condition`), so the two paths share one definition of every
operation. The registers (the last and first row each variable was mapped to)
and the running aggregates' accumulators travel with the stack frames: a frame
saves them, a backtrack restores them. A row's fold code (its variable's share
of the running aggregates, :meth:`~matchsql.engine.compiled.lowering.RegisterCode.
assembled`) runs on the live accumulators before its conditions, as on the CPU.

A thread writes its preferred end (or :data:`NO_MATCH`), the first and last
row its path mapped to a SKIP TO variable, and a status. With ``each`` (ALL
MATCHES / INCREMENTAL: every end of an attempt, as the CPU paths' ``all_ends``)
the walk goes on past the first ``DONE`` through every path: the first path to
reach an end row is the preferred match ending there (the walk takes paths in
preference order); a per-thread bitmap (``seen``) marks the ends found, and
the thread writes how many (``out_count``), their rows in all (``out_total``)
and the last (``out_hi``). A second launch over
the kept starts, each given its slots by an exclusive scan of those counts,
copies each new end's labels from the thread's current path (``path``: the
rows before a backtracked frame still hold its prefix's labels) and records
``(end, label offset)`` per match (``rec``), in the order the ends were found.
Without ``each``, a second launch over
the starts the sequential SKIP rule kept writes the labels of their matches
(``label_off[i]``: the slots of thread ``i``'s match); a depth-first walk
rewrites a row's label on every path through it, and the last path through it
is the preferred match's.
The kernel is generic (program, truth columns and bytecode are arrays), so it
is compiled once per process and shared by every query shape; the per-shape
parts are the arrays, cached with the query's plan (:mod:`matchsql.engine.gpu.gpu_plan`).
"""

from __future__ import annotations

from numba import cuda

from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled.kernel import (
    P_BEGIN,
    P_DONE,
    P_END,
    P_ENDANCHOR,
    P_JUMP,
    P_LABEL,
    P_SPLIT,
    P_START,
)
from matchsql.engine.compiled.within import NO_BOUND

NO_MATCH = -2
# Thread status: decided, an attempt longer than the buffer limit allows (max_span),
# the stack or the step budget ran out (the host retries with a larger stack, or runs the
# partition on a CPU path), the walk needs rows that have not arrived (a live
# stream: the start is decided on a later batch).
S_OK, S_SPAN, S_STACK, S_STEPS, S_WAIT = range(5)
FRAME = 5  # pc, loop flags, row, first and last SKIP TO row
#: Per-thread bytes besides the stack under ``each``: the ends bitmap and the path's labels.
EACH_BYTES_PER_FRAME = 1 + 8

#: The register bytecode interpreter of the CPU kernel, compiled for the device.
condition = cuda.jit(device=True)(K._condition.py_func)


@cuda.jit
def walk(
    prog,
    rl,
    skip_mask,
    starts,
    n_rows,
    max_span,
    max_steps,
    stack,
    out_end,
    out_first,
    out_last,
    out_status,
    labels,
    label_off,
    write_labels,
    code,
    fconst,
    spans,
    cols,
    valid,
    set_mask,
    lp,
    fp,
    sv,
    sn,
    wend,
    limit,
    complete,
    base,
    fspans,
    acc,
    each,
    seen,
    path,
    out_count,
    out_total,
    out_hi,
    rec,
):
    """One thread per entry of ``starts``; see the module docstring.

    ``lp``/``fp`` (``int64[starts, frames + 1, vars]``) hold each thread's
    registers: slot ``frames`` the live ones, slot ``k`` those saved with stack
    frame ``k``; ``sv``/``sn`` are its bytecode stack. ``wend[start]`` is the
    first row past the start's WITHIN bound (empty: no WITHIN). Rows from
    ``limit`` on are not decided yet unless ``complete``: a walk that needs one
    reports ``S_WAIT``. Row ``k`` of the arrays is partition row ``base + k``.
    ``fspans[v]`` is variable ``v``'s fold code; ``acc`` (``float64[starts, (frames + 1)
    * w]``) the accumulators, ``w`` floats per register slot (the slots of ``lp``).
    Under ``each`` (every end of an attempt) ``seen`` (``uint8[starts, frames + 1]``)
    marks the match lengths found, ``path`` (``int64[starts, frames]``) holds the
    current path's labels, and a writing launch puts thread ``i``'s labels from
    ``label_off[i, 0]`` and its ``(end, label offset)`` records from row
    ``label_off[i, 1]`` of ``rec``; a match longer than the stack reports ``S_STACK``.
    """
    i = cuda.grid(1)
    if i >= starts.shape[0]:
        return
    s = starts[i]
    cap = stack.shape[1]
    n_vars = rl.shape[1]
    regs = lp.shape[1] > 1  # registers are carried only when some DEFINE reads them
    live = cap
    acc_w = acc.shape[1] // lp.shape[1] if regs else 0
    if regs:
        for u in range(n_vars):
            lp[i, 0, u] = -1
            fp[i, 0, u] = -1
        for q in range(acc_w):
            acc[i, q] = 0.0
    bound = wend[s] if wend.shape[0] > 0 else NO_BOUND
    stack[i, 0, 0] = 0
    stack[i, 0, 1] = 0
    stack[i, 0, 2] = s
    stack[i, 0, 3] = -1
    stack[i, 0, 4] = -1
    sp = 1
    steps = 0
    status = S_OK
    end = NO_MATCH
    first = -1
    last = -1
    found = False
    count = 0
    total = 0
    hi = NO_MATCH
    lcur = 0
    mcur = 0
    if each:
        for k in range(cap + 1):
            seen[i, k] = 0
        if write_labels:
            lcur = label_off[i, 0]
            mcur = label_off[i, 1]
    while sp > 0 and not (found and not each) and status == S_OK:
        sp -= 1
        pc = stack[i, sp, 0]
        fl = stack[i, sp, 1]
        pos = stack[i, sp, 2]
        fi = stack[i, sp, 3]
        la = stack[i, sp, 4]
        if regs:
            for u in range(n_vars):
                lp[i, live, u] = lp[i, sp, u]
                fp[i, live, u] = fp[i, sp, u]
            for q in range(acc_w):
                acc[i, live * acc_w + q] = acc[i, sp * acc_w + q]
        while True:
            steps += 1
            if steps > max_steps:
                status = S_STEPS
                break
            op = prog[pc, 0]
            if op == P_LABEL:
                if pos >= bound:
                    break
                if pos >= limit and not complete:
                    status = S_WAIT
                    break
                if pos >= n_rows:
                    break
                if pos - s >= max_span:
                    status = S_SPAN
                    break
                var = prog[pc, 1]
                if rl[pos, var] == 0:
                    break
                if fspans[var, 1] > fspans[var, 0]:  # fold the row into the accumulators
                    condition(
                        code,
                        fconst,
                        fspans[var, 0],
                        fspans[var, 1],
                        cols,
                        valid,
                        set_mask,
                        lp[i],
                        fp[i],
                        live,
                        var,
                        pos,
                        s,
                        n_rows,
                        base,
                        complete,
                        0,
                        sv[i],
                        sn[i],
                        acc[i],
                        live * acc_w,
                    )
                if spans[var, 1] > spans[var, 0]:
                    if not condition(
                        code,
                        fconst,
                        spans[var, 0],
                        spans[var, 1],
                        cols,
                        valid,
                        set_mask,
                        lp[i],
                        fp[i],
                        live,
                        var,
                        pos,
                        s,
                        n_rows,
                        base,
                        complete,
                        0,
                        sv[i],
                        sn[i],
                        acc[i],
                        live * acc_w,
                    ):
                        break
                if regs:
                    lp[i, live, var] = pos
                    if fp[i, live, var] < 0:
                        fp[i, live, var] = pos
                if each:
                    if pos - s >= cap:
                        status = S_STACK  # the ends bitmap and the path grow with the stack
                        break
                    if write_labels:
                        path[i, pos - s] = var * 2 + prog[pc, 2]
                elif write_labels:
                    # A path the walk abandons later may run past the match's end: its
                    # labels there are not written (the next match's slots follow).
                    k = label_off[i, 0] + pos - s
                    if k < label_off[i, 1]:
                        labels[k] = var * 2 + prog[pc, 2]
                if skip_mask[var]:
                    la = pos
                    if fi < 0:
                        fi = pos
                pos += 1
                fl = 0
                pc += 1
            elif op == P_SPLIT:
                if sp >= cap:
                    status = S_STACK
                    break
                stack[i, sp, 0] = prog[pc, 4]
                stack[i, sp, 1] = fl
                stack[i, sp, 2] = pos
                stack[i, sp, 3] = fi
                stack[i, sp, 4] = la
                if regs:
                    for u in range(n_vars):
                        lp[i, sp, u] = lp[i, live, u]
                        fp[i, sp, u] = fp[i, live, u]
                    for q in range(acc_w):
                        acc[i, sp * acc_w + q] = acc[i, live * acc_w + q]
                sp += 1
                pc = prog[pc, 3]
            elif op == P_JUMP:
                pc = prog[pc, 3]
            elif op == P_BEGIN:
                fl = fl | (1 << prog[pc, 5])
                pc += 1
            elif op == P_END:
                bit = 1 << prog[pc, 5]
                if fl & bit:
                    fl = fl & ~bit
                    pc = prog[pc, 4]
                else:
                    pc = prog[pc, 3]
            elif op == P_START:
                if base + pos != 0:
                    break
                pc += 1
            elif op == P_ENDANCHOR:
                if pos >= limit and not complete:
                    status = S_WAIT
                    break
                if pos != n_rows:
                    break
                pc += 1
            elif op == P_DONE:
                if not found:
                    end = pos - 1
                    first = fi
                    last = la
                    found = True
                if each:
                    k = pos - s  # the match's length (0: empty), at most cap
                    if seen[i, k] == 0:
                        seen[i, k] = 1
                        count += 1
                        total += k
                        if pos - 1 > hi:
                            hi = pos - 1
                        if write_labels:
                            for q in range(k):
                                labels[lcur + q] = path[i, q]
                            rec[mcur, 0] = pos - 1
                            rec[mcur, 1] = lcur
                            mcur += 1
                            lcur += k
                break
            else:
                break
    out_end[i] = end if status == S_OK else NO_MATCH
    out_first[i] = first
    out_last[i] = last
    out_status[i] = status
    if not each and found:
        count = 1
        total = end - s + 1 if end >= s else 0
        hi = end
    out_count[i] = count if status == S_OK else 0
    out_total[i] = total if status == S_OK else 0
    out_hi[i] = hi if status == S_OK else NO_MATCH
