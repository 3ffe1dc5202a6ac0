"""The device kernel: one thread per candidate start walks the pattern program.

Each thread runs a depth-first backtracking walk over the program array
(:func:`matchsql.fsm.compiled.lowering.program_array`) from its start row,
reading the per-variable truth table of the row-local DEFINE terms. ``SPLIT``
pushes its second choice on the thread's explicit stack and goes on with the
first, so the first path that reaches ``DONE`` is the standard's preferred
match: the same one the compiled thread VM (:mod:`matchsql.fsm.compiled.kernel`)
finds by running threads in preference order and merging equal states (with
row-local conditions a merged thread could only repeat what the first one did).
Loop flags (the empty-iteration guard) travel in the frame as in the VM.

A thread writes its preferred end (or :data:`NO_MATCH`), the first and last
row its path mapped to a SKIP TO variable, and a status. A second launch over
the starts the sequential SKIP rule kept writes the labels of their matches.
The kernel is generic (the program and truth table are arrays), so it is
compiled once per process and shared by every query shape.
"""

from __future__ import annotations

from numba import cuda

from matchsql.fsm.compiled.kernel import (
    P_BEGIN,
    P_DONE,
    P_END,
    P_ENDANCHOR,
    P_JUMP,
    P_LABEL,
    P_SPLIT,
    P_START,
)

NO_MATCH = -2
# Thread status: decided, an attempt longer than max_buffered_rows, the stack or
# the step budget ran out (the host retries with a larger stack, or runs the
# partition on a CPU path).
S_OK, S_SPAN, S_STACK, S_STEPS = range(4)
FRAME = 5  # pc, loop flags, row, first and last SKIP TO row


@cuda.jit
def walk(prog, rl, skip_mask, starts, n_rows, max_span, max_steps, stack, out_end,
         out_first, out_last, out_status, labels, label_off, write_labels):
    """One thread per entry of ``starts``; see the module docstring."""
    i = cuda.grid(1)
    if i >= starts.shape[0]:
        return
    s = starts[i]
    cap = stack.shape[1]
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
    while sp > 0 and not found and status == S_OK:
        sp -= 1
        pc = stack[i, sp, 0]
        fl = stack[i, sp, 1]
        pos = stack[i, sp, 2]
        fi = stack[i, sp, 3]
        la = stack[i, sp, 4]
        while True:
            steps += 1
            if steps > max_steps:
                status = S_STEPS
                break
            op = prog[pc, 0]
            if op == P_LABEL:
                if pos >= n_rows:
                    break
                if pos - s >= max_span:
                    status = S_SPAN
                    break
                var = prog[pc, 1]
                if rl[pos, var] == 0:
                    break
                if write_labels:
                    labels[label_off[i] + pos - s] = var * 2 + prog[pc, 2]
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
                if pos != 0:
                    break
                pc += 1
            elif op == P_ENDANCHOR:
                if pos != n_rows:
                    break
                pc += 1
            elif op == P_DONE:
                end = pos - 1
                first = fi
                last = la
                found = True
                break
            else:
                break
    out_end[i] = end if status == S_OK else NO_MATCH
    out_first[i] = first
    out_last[i] = last
    out_status[i] = status
