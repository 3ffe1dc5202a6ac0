"""The numba-compiled thread VM: :mod:`matchsql.engine.vm` over numpy arrays.

One generic kernel serves every query: the program, the per-row label
conditions and the register bytecode all arrive as arrays, so the kernel is
compiled once per installation (``cache=True``) instead of once per query
shape, and it releases the GIL (``nogil=True``) so that partitions can run on
several threads. Its cold compile (an empty numba cache) grows with its size,
so a query runs a variant compiled without the features it does not use
(:func:`attempts_kernel`: four variants besides the full kernel), through a
numba pipeline less the passes the kernels do not need (:class:`KernelCompiler`).

The algorithm is the reference VM's, step for step, because the paths must
give identical rows: match attempts run one after another; an attempt's
threads are kept in preference order; a thread reaching ``DONE`` ends the
step in the standard mode, or (ALL MATCHES) records the preferred match per
end row and demotes everything behind it; threads at the same program state
whose registers are equal are merged, keeping the first (where no loop flag decides
anything, a thread's epsilon closure is read from the program's closure table,
:func:`matchsql.engine.compiled.lowering.closure_table`, and its flags are not part of its
state). Registers are what
the reference calls the observable history: for each primary variable the
row it was last and first mapped to, which is all that ``A.x``, ``FIRST`` and
``LAST`` in DEFINE can see on this path, plus the running aggregates'
accumulators (``C_FOLD``/``C_AGG``): a thread's are copied from its source's
when it takes a row, folded there, and compared too before two threads merge.

The kernel decides whole attempts only. When the rows run out while an
attempt still has live threads it stops and reports the attempt's start; the
matcher calls it again from there once more rows arrived (archived input
comes in large batches, so re-running the open attempt is cheap). An attempt
whose threads are among those of a decided attempt at the same row, after that
one's last match end, is decided there (dead ends: the comment at
:data:`MEMO_EVERY`): attempts that never complete cost linear, not quadratic, time.
"""

from __future__ import annotations

import threading
import types

import numpy as np
from numba import njit
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import PassManager
from numba.core.dispatcher import Dispatcher
from numba.core.typed_passes import NopythonRewrites
from numba.core.untyped_passes import (
    GenericRewrites,
    InlineClosureLikes,
    InlineInlinables,
    LiteralUnroll,
    MakeFunctionToJitFunction,
    RewriteSemanticConstants,
    WithLifting,
)

from matchsql.errors import LimitExceededError

# Passes of numba's nopython pipeline that the kernels need not pay for on a cold start
# (fresh numba cache): they use no closures, ``with`` blocks, literal_unroll, inlined
# functions or array expressions. Dead branch pruning stays: it removes the code of the
# features a kernel variant leaves out (:func:`attempts_kernel`) before typing.
_SKIPPED = (
    WithLifting,
    InlineClosureLikes,
    MakeFunctionToJitFunction,
    InlineInlinables,
    LiteralUnroll,
    GenericRewrites,
    RewriteSemanticConstants,
    NopythonRewrites,
)


class KernelCompiler(CompilerBase):
    """numba's nopython pipeline less :data:`_SKIPPED` (``pipeline_class`` of the kernels)."""

    def define_pipelines(self) -> list[PassManager]:
        full = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm = PassManager("kernel")
        for pass_cls, description in full.passes:
            if pass_cls not in _SKIPPED:
                pm.add_pass(pass_cls, description)
        pm.finalize()
        return [pm]


# Program opcodes (the order of :class:`matchsql.engine.program.Op`).
P_LABEL, P_SPLIT, P_JUMP, P_BEGIN, P_END, P_START, P_ENDANCHOR, P_DONE = range(8)

# Column of the program table where the closure table starts (lowering.closure_table):
# per origin pc, the count of the LABEL/DONE pcs its epsilon closure reaches (-1: walk
# the program), then those pcs in order.
P_CLOSURE = 6

# Register bytecode opcodes.
C_CONST, C_NULL, C_LOAD, C_ADD, C_SUB, C_MUL, C_DIV, C_NEG = range(8)
C_LT, C_LE, C_GT, C_GE, C_EQ, C_NE, C_AND, C_OR, C_NOT = range(8, 17)
C_ISNULL, C_NOTNULL, C_COUNT_ALL, C_MATCHNO, C_ABS = range(17, 22)
# Running aggregates (:class:`matchsql.engine.compiled.lowering.RegisterCode`): C_AGG pushes
# accumulator slot ``code[k, 1]`` finished as aggregate ``code[k, 2]``; C_FOLD pops a value
# (and below it a FILTER result when ``code[k, 3]``) into slot ``code[k, 1]``.
C_AGG, C_FOLD = range(22, 24)
# Aggregates of C_AGG/C_FOLD. A slot is (value, rows taken) in ``acc[abase + 2 * slot]``.
A_COUNT, A_SUM, A_AVG, A_MIN, A_MAX = range(5)

# Row references of C_LOAD.
R_CUR, R_LAST, R_FIRST, R_START, R_BACK, R_FORTH = range(6)

# Conjunct kinds (:meth:`matchsql.engine.compiled.lowering.RegisterCode.conjunct_table`):
# a comparison of two operands, evaluated inline, or stack code run by _condition.
CJ_COMPARE, CJ_STACK = range(2)
# Operand fields of a CJ_COMPARE row: operand ``i`` (0, 1) starts at column 2 + 5 * i with
# (is a load, column, row kind, argument, physical offset); constants are in ``cconst``.
CJ_WIDTH = 12

# Kernel status. ST_FULL: a workspace or output array is full; the matcher
# grows them and calls again (the kernel stops at an attempt boundary).
# ST_CANCELLED: the statement's cancel flag was seen set (matchsql.runtime.cancel). ST_SPAN: an
# attempt (open since ``err_row``) would read more than ``params[K_MAX_SPAN]`` rows.
(ST_DONE, ST_WAIT, ST_FULL, ST_THREADS, ST_SKIP_ABSENT, ST_SKIP_FIRST, ST_CANCELLED, ST_SPAN) = (
    range(8)
)

# Kernels read the cancel flag once per this many steps (a power of two).
CANCEL_EVERY = 4096

# Workspace capacities (slots of ``caps``) and what overflowed (``err_row`` of ST_FULL).
W_THREADS, W_SEEN, W_STACK, W_ARENA, W_RECORDS, W_LABELS = range(6)

# Parameter slots. K_STEPS is written: the kernels add the rows their attempts read (a
# measure of work that tests can bound, unlike seconds).
(
    K_ROWS,
    K_BASE,
    K_LIMIT,
    K_COMPLETE,
    K_NEXT,
    K_MN,
    K_COVERED,
    K_ALL_ENDS,
    K_SKIP,
    K_MAX_THREADS,
    K_UNMATCHED,
    K_MAX_SPAN,
    K_STEPS,
    K_PARAMS,
) = range(14)

SKIP_PAST, SKIP_NEXT, SKIP_FIRST, SKIP_LAST = range(4)

# Features of :func:`run_attempts` that a kernel variant may leave out (attempts_kernel):
# register conditions run by the stack interpreter (_condition), running aggregates,
# Go4Risk statistics, ALL MATCHES, SKIP TO a variable, WITH UNMATCHED ROWS, WITHIN, ``$``.
# Compile-time constants: True here, in the kernel that has them all.
FEATURES = (
    "F_STACK",
    "F_AGG",
    "F_STATS",
    "F_ENDS",
    "F_SKIPTO",
    "F_UNMATCHED",
    "F_WITHIN",
    "F_ANCHOR",
    "F_MEMO",
)
F_STACK = F_AGG = F_STATS = F_ENDS = F_SKIPTO = F_UNMATCHED = F_WITHIN = F_ANCHOR = True
F_MEMO = True  # the dead ends (MEMO_EVERY)
# The conditions as one function compiled for the query's shape (``shape_condition``)
# instead of the conjunct table: off in every variant the engine runs; bench.specialised
# turns it on to measure a specialised kernel against these (slower, and 7-10 s to
# compile per shape: bench/results/specialised.txt).
F_SHAPE = False


@njit(cache=True, nogil=True, error_model="numpy", pipeline_class=KernelCompiler)
def _condition(
    code,
    fconst,
    lo,
    hi,
    cols,
    valid,
    set_mask,
    lp,
    fp,
    reg,
    var,
    row,
    start,
    n_rows,
    base,
    complete,
    match_number,
    sv,
    sn,
    acc,
    abase,
):
    """Evaluate register bytecode ``code[lo:hi]``; True only when the result is TRUE.

    ``acc[abase:]`` are the thread's running-aggregate slots, which C_FOLD updates in
    place (the caller passes a copy it may discard) and C_AGG reads."""
    sp = 0
    n_vars = set_mask.shape[1]
    for k in range(lo, hi):
        op = code[k, 0]
        if op == C_LOAD:
            kind = code[k, 2]
            s = code[k, 3]
            rr = -1
            if kind == R_CUR:
                rr = row
            elif kind == R_LAST:
                if set_mask[s, var]:
                    rr = row
                else:
                    for u in range(n_vars):
                        if set_mask[s, u] and lp[reg, u] > rr:
                            rr = lp[reg, u]
            elif kind == R_FIRST:
                for u in range(n_vars):
                    if set_mask[s, u]:
                        f = fp[reg, u]
                        if f >= 0 and (rr < 0 or f < rr):
                            rr = f
                if rr < 0 and set_mask[s, var]:
                    rr = row
            elif kind == R_START:
                rr = start
            elif kind == R_BACK:  # LAST(x, k): k rows back, within the match so far
                rr = row - s
                if rr < start:
                    rr = -1
            else:  # R_FORTH: FIRST(x, k)
                rr = start + s
                if rr > row:
                    rr = -1
            null = rr < 0
            if not null:
                rr += code[k, 4]
                if base + rr < 0 or rr < 0 or rr >= n_rows:
                    null = True
            if null:
                sv[sp] = 0.0
                sn[sp] = 1
            else:
                c = code[k, 1]
                sv[sp] = cols[c, rr]
                sn[sp] = 1 - valid[c, rr]
            sp += 1
        elif op == C_CONST:
            sv[sp] = fconst[k]
            sn[sp] = 0
            sp += 1
        elif op == C_NULL:
            sv[sp] = 0.0
            sn[sp] = 1
            sp += 1
        elif op == C_COUNT_ALL:
            sv[sp] = row - start + 1
            sn[sp] = 0
            sp += 1
        elif op == C_MATCHNO:
            sv[sp] = match_number + 1
            sn[sp] = 0
            sp += 1
        elif op == C_AGG:
            at = abase + 2 * code[k, 1]
            fn = code[k, 2]
            taken = acc[at + 1]
            if fn == A_COUNT:
                sv[sp] = taken
                sn[sp] = 0
            elif taken == 0.0:  # SUM/AVG/MIN/MAX over no rows (or only NULLs): NULL
                sv[sp] = 0.0
                sn[sp] = 1
            else:
                sv[sp] = acc[at] / taken if fn == A_AVG else acc[at]
                sn[sp] = 0
            sp += 1
        elif op == C_FOLD:
            sp -= 1
            x = sv[sp]
            take = sn[sp] == 0
            if code[k, 3] != 0:  # FILTER (WHERE ...): the row counts only where it is TRUE
                sp -= 1
                take = take and sn[sp] == 0 and sv[sp] != 0.0
            if take:
                at = abase + 2 * code[k, 1]
                fn = code[k, 2]
                best = acc[at]
                if acc[at + 1] == 0.0:
                    acc[at] = x
                elif fn == A_SUM or fn == A_AVG:
                    acc[at] = best + x
                elif fn == A_MIN:  # DuckDB's order: NaN greatest, equal to itself
                    if x < best or (best != best and x == x):
                        acc[at] = x
                elif fn == A_MAX:
                    if x > best or (x != x and best == best):
                        acc[at] = x
                acc[at + 1] += 1.0
        elif op == C_NEG:
            sv[sp - 1] = -sv[sp - 1]
        elif op == C_ABS:
            sv[sp - 1] = abs(sv[sp - 1])
        elif op == C_NOT:
            sv[sp - 1] = 1.0 - sv[sp - 1]
        elif op == C_ISNULL:
            sv[sp - 1] = 1.0 if sn[sp - 1] else 0.0
            sn[sp - 1] = 0
        elif op == C_NOTNULL:
            sv[sp - 1] = 0.0 if sn[sp - 1] else 1.0
            sn[sp - 1] = 0
        else:  # binary
            sp -= 1
            a = sv[sp - 1]
            b = sv[sp]
            an = sn[sp - 1]
            bn = sn[sp]
            if op == C_AND:
                if (an == 0 and a == 0.0) or (bn == 0 and b == 0.0):
                    sv[sp - 1] = 0.0
                    sn[sp - 1] = 0
                else:
                    sv[sp - 1] = 1.0
                    sn[sp - 1] = an | bn
                continue
            if op == C_OR:
                if (an == 0 and a != 0.0) or (bn == 0 and b != 0.0):
                    sv[sp - 1] = 1.0
                    sn[sp - 1] = 0
                else:
                    sv[sp - 1] = 0.0
                    sn[sp - 1] = an | bn
                continue
            sn[sp - 1] = an | bn
            if op == C_ADD:
                r = a + b
            elif op == C_SUB:
                r = a - b
            elif op == C_MUL:
                r = a * b
            elif op == C_DIV:
                r = a / b
            else:  # comparisons, in DuckDB's order: NaN greatest, equal to itself
                lt = a < b or (b != b and a == a)
                gt = a > b or (a != a and b == b)
                if op == C_LT:
                    r = 1.0 if lt else 0.0
                elif op == C_LE:
                    r = 0.0 if gt else 1.0
                elif op == C_GT:
                    r = 1.0 if gt else 0.0
                elif op == C_GE:
                    r = 0.0 if lt else 1.0
                elif op == C_EQ:
                    r = 0.0 if lt or gt else 1.0
                else:
                    r = 1.0 if lt or gt else 0.0
            sv[sp - 1] = r
    return sn[0] == 0 and sv[0] != 0.0


@njit(cache=True, nogil=True, pipeline_class=KernelCompiler)
def load_row(kind, arg, offset, var, last, first, row, start, n_rows, base):
    """The row a fused C_LOAD reads, or -1 for NULL, as :func:`_condition` resolves it.

    ``arg`` is the variable of R_LAST/R_FIRST (a one-variable set; ``last`` and
    ``first`` are that variable's registers) or the offset of R_BACK/R_FORTH.
    Scalars only: a helper taking arrays costs reference counting on every call.
    """
    rr = -1
    if kind == R_CUR:
        rr = row
    elif kind == R_LAST:
        rr = row if arg == var else last
    elif kind == R_FIRST:
        rr = first if first >= 0 else (row if arg == var else -1)
    elif kind == R_START:
        rr = start
    elif kind == R_BACK:
        rr = row - arg
        if rr < start:
            rr = -1
    else:
        rr = start + arg
        if rr > row:
            rr = -1
    if rr < 0:
        return -1
    rr += offset
    if base + rr < 0 or rr < 0 or rr >= n_rows:
        return -1
    return rr


@njit(cache=True, nogil=True, pipeline_class=KernelCompiler)
def compare(op, a, b):
    """``a op b`` for a comparison opcode, in DuckDB's order of numbers: NaN above
    every other number and equal to itself (the value library's order; :func:`_condition`
    spells it the same way, self-contained because the GPU path compiles it for the
    device)."""
    lt = a < b or (b != b and a == a)
    gt = a > b or (a != a and b == b)
    if op == C_LT:
        return lt
    if op == C_LE:
        return not gt
    if op == C_GT:
        return gt
    if op == C_GE:
        return not lt
    if op == C_EQ:
        return not (lt or gt)
    return lt or gt


@njit(cache=True, nogil=True, pipeline_class=KernelCompiler)
def put_record(records, k, kind, start, length, number, label_offset):
    """Write output record ``k``: (kind, start, length, match number, label offset).

    :func:`run_attempts` writes its records inline: called from there with constant
    arguments, this was compiled once per literal combination (five times) on a cold start.
    """
    records[k, 0] = kind
    records[k, 1] = start
    records[k, 2] = length
    records[k, 3] = number
    records[k, 4] = label_offset


# Dead ends. The kernel (:func:`run_attempts`) decides attempts one after another,
# and an attempt that no row ends (``A B+ C`` where no ``C`` comes, a partition
# or stream that ends with an attempt open) reads to the end: so does the
# attempt from every later start row, quadratic in the rows. The DFA has the
# same problem and the same cure (:mod:`.dfa`); here a state is a list of threads.
#
# The rule. Whether a thread reaches ``DONE`` from row ``x`` on depends only on
# what the kernel reads of it there: its program counter, loop flags, the
# registers of the variables a condition observes (``obs``) and the running
# aggregates' accumulators. Threads equal in those are the threads the kernel
# already merges within a step. As long as no thread reaches ``DONE`` nothing
# ends a step early, so the threads evolve independently: the threads of a
# later attempt that are each among a decided attempt's threads at row ``x``,
# after that attempt's last match end, never reach ``DONE`` either (nor exceed
# the threads the decided one had), and the later attempt is decided at ``x``
# with what it found so far: the same rows as running on.
#
# What else a condition reads about an attempt makes equal threads of two
# attempts differ, and the rule is off (:func:`memo_horizon`: -1) or starts later:
# ``FIRST(x)`` / ``FIRST(x, k)`` without a variable and ``COUNT(*)`` read the
# start row, ``MATCH_NUMBER()`` the number of matches found before, and WITHIN
# ends each attempt at a row of its own; Go4Risk statistics count every row an
# attempt reads, so they keep it off too. ``LAST(x, k)`` reads NULL within ``k`` rows
# of the start: two attempts agree on it from ``k`` rows after the later start on,
# so states are compared from there (:func:`memo_horizon` says from where).
#
# States are recorded and compared at every :data:`MEMO_EVERY`-th row only and
# only while at most :data:`MEMO_THREADS` threads are alive; an arena of
# snapshots that fills up is emptied (a dead end forgotten is only work lost).
#
# A state is recorded as a snapshot in an arena: ``(row, threads)`` and per thread
# ``pc, flags``, the observed variables' last and first rows (0 where no condition
# reads it) and the accumulators' bits (NaN equals NaN, -0.0 differs from 0.0, as
# where threads merge). Snapshots wait until their attempt is decided; those after
# its last match end become dead ends.
MEMO_EVERY = 32  # rows between dead-end states recorded and compared (a power of two)
MEMO_THREADS = 64  # live threads beyond which a state is neither recorded nor compared


@njit(cache=True, nogil=True, pipeline_class=KernelCompiler)
def memo_horizon(code, conj):
    """Rows after an attempt's start from which its threads' futures compare with
    another attempt's (dead ends: the comment at :data:`MEMO_EVERY`), or -1: never,
    where a condition reads the start row (``FIRST(x)``, ``FIRST(x, k)``,
    ``COUNT(*)``) or MATCH_NUMBER();
    ``LAST(x, k)`` is NULL within ``k`` rows of the start."""
    h = 1
    for k in range(code.shape[0]):
        op = code[k, 0]
        if op == C_COUNT_ALL or op == C_MATCHNO:
            return -1
        if op == C_LOAD:
            if code[k, 2] == R_START or code[k, 2] == R_FORTH:
                return -1
            if code[k, 2] == R_BACK and code[k, 3] + 1 > h:
                h = code[k, 3] + 1
    for k in range(conj.shape[0]):
        for side in range(2):
            j = 2 + 5 * side
            if conj[k, 0] != CJ_COMPARE or conj[k, j] == 0:
                continue  # stack code: its loads are in ``code``
            if conj[k, j + 2] == R_START or conj[k, j + 2] == R_FORTH:
                return -1
            if conj[k, j + 2] == R_BACK and conj[k, j + 3] + 1 > h:
                h = conj[k, j + 3] + 1
    return h


@njit(cache=True, nogil=True, pipeline_class=KernelCompiler)
def shape_condition(var, row, start, n_rows, base, cols, valid, lp, fp, side, reg):
    """What a variant with F_SHAPE calls for the conditions of variable ``var`` at
    ``row`` for the thread with registers ``lp[side, reg]``/``fp[side, reg]``: True
    only when every conjunct is TRUE (a variant replaces this)."""
    return True


#: The most bytes the working arrays of one matcher may take. Each live thread holds two
#: registers per variable, so a pattern of 20,000 alternatives (20,000 variables) at
#: 16,384 threads would take 10 GiB: such a statement gets an error saying so instead
#: (a 100-variable pattern takes 52 MiB at 16,384 threads).
MAX_WORKSPACE_BYTES = 1 << 28


def workspace(caps: np.ndarray, n_prog: int, n_vars: int) -> tuple[np.ndarray, ...]:
    """Working arrays of :func:`run_attempts` for the capacities ``caps``.

    They are allocated by the caller and never reassigned inside the kernel:
    arrays that a numba loop reassigns are reference-counted on every
    iteration, which made an earlier version several times slower.
    """
    t = int(caps[W_THREADS])
    nv = max(n_vars, 1)
    registers = 2 * 2 * (t + 1) * nv * 8
    if registers > MAX_WORKSPACE_BYTES:
        raise LimitExceededError(
            f"the compiled matcher would need {registers / (1 << 30):,.1f} GiB of registers "
            f"for {t:,} live threads of a pattern with {nv:,} variables; use fewer pattern "
            "variables or lower max_threads"
        )
    return (
        np.zeros((2, 5, t), np.int64),
        np.full((2, t + 1, nv), -1, np.int64),
        np.full((2, t + 1, nv), -1, np.int64),
        np.zeros((3, int(caps[W_SEEN])), np.int64),
        np.zeros((2, max(n_prog, 1)), np.int64),
        np.zeros((3, int(caps[W_STACK])), np.int64),
        np.zeros((2, int(caps[W_ARENA])), np.int64),
        np.zeros((int(caps[W_RECORDS]), 5), np.int64),
        np.zeros(int(caps[W_LABELS]), np.int16),
    )


def _run_attempts(
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
):
    """Decide match attempts from ``params[K_NEXT]`` until the rows run out.

    ``prog`` is ``int64[n, 6]`` (op, var, excluded, target, alt, slot); ``rl``
    is ``uint8[rows, vars]``, the row-local part of each DEFINE; ``viable``
    (``uint8[rows]``, or empty: no prefilter) is 0 at a row where no match can
    start, as the row-local parts of its row and the next one prove
    (:func:`matchsql.engine.compiled.prefilter.viable_starts`): an attempt there
    is skipped, which is what it would end as; ``wend`` (``int64[rows]``, or empty:
    no WITHIN) is the first row an attempt from each row may not consume
    (:mod:`matchsql.engine.compiled.within`): its threads end there; ``code`` /
    ``fconst`` / ``spans`` the register bytecode (``spans[v]`` = its range
    for variable ``v``, empty when none); ``conj`` / ``cconst`` / ``conj_spans`` the
    same conditions as conjuncts (:data:`CJ_WIDTH`), which is what the kernel
    evaluates: stopping at the first conjunct that is not TRUE, comparisons
    inline, other conjuncts through :func:`_condition`. Row indexes are relative to the
    buffer, whose first row is partition row ``params[K_BASE]``. The
    remaining arguments are the :func:`workspace` and the output arrays.

    Go4Risk statistics (thesis 4.3.1) are collected when ``stat_state`` is
    not empty: it maps each LABEL pc to a linear state (-1: none) whose kind
    ``stat_kind`` is 1 for a star. Each evaluation of a row at a state counts
    one tuple in, and one out when it leaves: a singleton whose condition
    holds, a star whose condition fails. Like the thesis' FSM, which follows
    one path, a row is counted at the most preferred thread's state only,
    and at the next thread's state too when it left a star there. ``stat`` is
    ``int64[2, states + 1]`` of running totals (row 0 in, row 1 out; column ``states`` of
    row 0 counts windows, of row 1 windows that matched) plus a scratch pair of rows
    (``stat[2:4]``) for the open attempt, committed when it is decided, so an
    attempt re-run after more rows arrive is counted once. The return's
    ``err_row`` slot carries no information for ST_DONE/ST_WAIT; the open
    attempt's current state is left in ``stat[2, states]``.

    Returns ``(status, next_start, match_number, covered, err_row, n_records,
    n_labels)``; record ``k`` is ``records[k] = (kind, start, length,
    match_number, label_offset)`` with kind 0 for a match and 1 for an
    unmatched row, and ``labels`` holds ``var * 2 + excluded`` per matched row.
    ``cancel`` (``uint8[1]``) is polled every :data:`CANCEL_EVERY` steps: set, the
    kernel returns ST_CANCELLED at once.
    """
    n_rows = params[K_ROWS]
    base = params[K_BASE]
    limit = params[K_LIMIT]
    complete = params[K_COMPLETE] != 0
    next_start = params[K_NEXT]
    match_number = params[K_MN]
    covered = params[K_COVERED]
    all_ends = params[K_ALL_ENDS] != 0
    skip_mode = params[K_SKIP]
    max_threads = params[K_MAX_THREADS]
    with_unmatched = params[K_UNMATCHED] != 0
    max_span = params[K_MAX_SPAN]
    n_vars = rl.shape[1]
    # The closure table applies (no loop flag decides anything): the closure of a thread
    # is read from it instead of walked over the program.
    listed = prog.shape[1] > P_CLOSURE and prog[0, P_CLOSURE] >= 0
    collect = stat_state.shape[0] > 0
    prefilter = viable.shape[0] > 0
    windowed = wend.shape[0] > 0
    n_states = stat.shape[1] - 1
    use_regs = False
    # The variables whose registers a condition reads: only theirs are copied and
    # compared (the others' slots are never read and may hold anything).
    obs = np.empty(n_vars, np.int64)
    n_obs = 0
    for v in range(n_vars):
        if obs_last[v] or obs_first[v] or spans[v, 1] > spans[v, 0]:
            use_regs = True
        if obs_last[v] or obs_first[v]:
            obs[n_obs] = v
            n_obs += 1
    # Those of a last row and those of a first row apart: a thread taking a row copies
    # only those (copying both for every observed variable cost 5-9 % of the kernel's
    # time on the DejaVu queries, which read no FIRST).
    obs_l = np.empty(n_vars, np.int64)
    obs_f = np.empty(n_vars, np.int64)
    n_obs_l = 0
    n_obs_f = 0
    for v in range(n_vars):
        if obs_last[v]:
            obs_l[n_obs_l] = v
            n_obs_l += 1
        if obs_first[v]:
            obs_f[n_obs_f] = v
            n_obs_f += 1
    cap_threads = th.shape[2]
    cap_seen = seen.shape[1]
    cap_stack = stack.shape[1]
    cap_arena = arena.shape[1]
    cap_records = records.shape[0]
    cap_labels = labels.shape[0]
    # Scratch arrays: np.empty with two dtypes and zeroing loops, since every numpy
    # constructor and every dtype of one is a separate compilation that a cold start
    # (empty numba cache) pays for; ``end_node``, ``sv`` and ``sn`` are written before read.
    end_stamp = np.empty(n_rows + 2, np.int64)
    for k in range(n_rows + 2):
        end_stamp[k] = 0
    end_node = np.empty(n_rows + 2, np.int64)
    # Running-aggregate accumulators, ``acc_w`` floats per register slot of ``lp``/``fp``
    # (side, slot): written where a thread is made, from its source's (C_FOLD slots).
    acc_w = 0
    if F_AGG:
        for k in range(code.shape[0]):
            if code[k, 0] == C_FOLD and 2 * code[k, 1] + 2 > acc_w:
                acc_w = 2 * code[k, 1] + 2
    acc_side = (cap_threads + 1) * acc_w
    abase = 0  # the accumulators of the thread being made (none: slot 0 is never read)
    if F_STACK or F_AGG:  # the interpreter's stack and the accumulators (float64 arrays
        # are one more numpy compilation on a cold start: only the variants using them)
        sv = np.empty(code.shape[0] + 1, np.float64)
        sn = np.empty(code.shape[0] + 1, np.int64)
        acc = np.empty(2 * acc_side + 1, np.float64)
    seen_stamp = seen_pc[0]
    seen_head = seen_pc[1]
    for k in range(seen_stamp.shape[0]):
        seen_stamp[k] = 0
    # Dead ends (the comment at :data:`MEMO_EVERY`): compared from ``memo_from`` rows
    # after a start on; off (-1) under WITHIN, statistics and conditions that read the
    # start row.
    memo_from = -1
    if F_MEMO and not windowed and not collect:
        memo_from = memo_horizon(code, conj)
    # Recorded dead ends: ``memo_heads[row // MEMO_EVERY]`` the offset of the snapshot
    # in ``memo_arena`` (-1: none); ``memo_pend`` the open attempt's snapshots not yet
    # recorded: their count, then their offsets.
    memo_slots = n_rows // MEMO_EVERY + 2 if memo_from >= 0 else 1
    memo_heads = np.empty(memo_slots, np.int64)
    for k in range(memo_slots):
        memo_heads[k] = -1
    memo_pend = np.empty(memo_slots + 1, np.int64)
    memo_pend[0] = 0
    memo_arena = np.empty(
        memo_slots * (5 + 8 * n_obs + 4 * acc_w) + 1024 if memo_from >= 0 else 1, np.int64
    )
    memo_arena[0] = 1
    accb = end_stamp  # the accumulators' bits (none without F_AGG: never read)
    if F_AGG:
        accb = acc.view(np.int64)

    n_rec = 0
    n_lab = 0
    stamp = 0
    attempt_id = 0
    status = ST_DONE
    err_row = -1
    cur = 0  # which side of ``th``/``lp``/``fp`` holds the live threads
    n_cur = 0
    start = 0
    pos = 0
    is_open = False
    best_node = -1
    best_end = -2
    has_best = False
    end_lo = 0
    end_hi = -1
    cut_end = -2  # the end the last row's step reached first, and how many threads
    cut_at = 0  # it had listed then (``$`` threads among them are preferred to it)
    n_arena = 0
    ticks = 0
    steps = 0

    while True:
        ticks += 1
        if ticks & (CANCEL_EVERY - 1) == 0 and cancel[0] != 0:
            status = ST_CANCELLED
            break
        mode = 0  # 0: seed a new attempt, 1: consume row ``pos``, 2: end of partition, 3: decide
        if not is_open:
            if prefilter:
                while next_start + 1 < limit and viable[next_start] == 0:
                    next_start += 1
            if next_start >= n_rows:
                status = ST_DONE
                break
            start = next_start
            pos = start
            attempt_id += 1
            has_best = False
            best_node = -1
            best_end = -2
            if F_STATS and collect:
                for k in range(n_states + 1):
                    stat[2, k] = 0
                    stat[3, k] = 0
            end_lo = n_rows + 2
            end_hi = -2
            n_arena = 0
            memo_pend[0] = 0
            is_open = True
        elif n_cur > 0:
            if F_WITHIN and pos < n_rows and windowed and pos >= wend[start]:
                n_cur = 0  # WITHIN: no thread may consume this row; decide the attempt
                continue
            if pos < n_rows:
                if pos >= limit:
                    status = ST_WAIT
                    break
                if pos - start >= max_span:
                    status = ST_SPAN
                    err_row = start
                    break
                if (
                    F_MEMO
                    and memo_from >= 0
                    and pos & (MEMO_EVERY - 1) == 0
                    and pos - start >= memo_from
                    and n_cur <= MEMO_THREADS
                ):
                    # Dead ends (the rule: see :data:`MEMO_EVERY`). The live threads as a
                    # snapshot at the arena's end (a register no condition reads: 0).
                    m_width = 2 + 2 * n_obs + acc_w
                    m_need = 2 + n_cur * m_width
                    if memo_arena[0] + m_need > memo_arena.shape[0]:  # full: start over
                        for k in range(memo_heads.shape[0]):
                            memo_heads[k] = -1
                        memo_pend[0] = 0
                        memo_arena[0] = 1
                    m_at = memo_arena[0]
                    if m_at + m_need <= memo_arena.shape[0]:
                        memo_arena[m_at] = pos
                        memo_arena[m_at + 1] = n_cur
                        for i in range(n_cur):
                            m_reg = th[cur, 4, i]
                            m_o = m_at + 2 + i * m_width
                            memo_arena[m_o] = th[cur, 0, i]
                            memo_arena[m_o + 1] = th[cur, 1, i]
                            for q in range(n_obs):
                                u = obs[q]
                                memo_arena[m_o + 2 + q] = lp[cur, m_reg, u] if obs_last[u] else 0
                                memo_arena[m_o + 2 + n_obs + q] = (
                                    fp[cur, m_reg, u] if obs_first[u] else 0
                                )
                            for q in range(acc_w):
                                memo_arena[m_o + 2 + 2 * n_obs + q] = accb[
                                    cur * acc_side + m_reg * acc_w + q
                                ]
                        # Each thread among those of the dead end recorded at ``pos``?
                        m_old = memo_heads[pos // MEMO_EVERY]
                        m_dead = m_old >= 0
                        for i in range(n_cur if m_dead else 0):
                            m_found = False
                            for j in range(memo_arena[m_old + 1]):
                                m_found = True
                                for q in range(m_width):
                                    if (
                                        memo_arena[m_at + 2 + i * m_width + q]
                                        != memo_arena[m_old + 2 + j * m_width + q]
                                    ):
                                        m_found = False
                                        break
                                if m_found:
                                    break
                            if not m_found:
                                m_dead = False
                                break
                        if m_dead:
                            n_cur = 0  # a dead end: decided as it stands
                            continue
                        memo_arena[0] = m_at + m_need  # pending until the attempt is decided
                        memo_pend[0] += 1
                        memo_pend[memo_pend[0]] = m_at
                mode = 1
            elif not complete:
                status = ST_WAIT
                break
            else:
                mode = 2
        else:
            mode = 3
        if mode <= 2:
            # One pass over the source threads in preference order (a new
            # attempt's seed is a single pseudo-thread), with a fresh ``seen``.
            nxt = 1 - cur
            stamp += 1
            n_seen = 0
            n_next = 0
            n_pool = 0
            demote = False
            position = start if mode == 0 else (pos + 1 if mode == 1 else pos)
            if mode == 0:
                cut_end = -2
            n_src = 1 if mode == 0 else n_cur
            stop = False
            full = -1
            counting = collect and mode == 1
            for i in range(n_src):
                if mode == 0:
                    pc0 = 0
                    fl0 = 0
                    node0 = -1
                    pref0 = 1
                    for u in range(n_vars):
                        lp[nxt, n_pool, u] = -1
                        fp[nxt, n_pool, u] = -1
                    if F_AGG:
                        for q in range(acc_w):
                            acc[nxt * acc_side + n_pool * acc_w + q] = 0.0
                elif mode == 1:
                    pc = th[cur, 0, i]
                    if prog[pc, 0] != P_LABEL:
                        continue  # a thread waiting at ``$`` dies: a row follows
                    var = prog[pc, 1]
                    r0 = th[cur, 4, i]
                    ok = rl[pos, var] != 0
                    if F_AGG and acc_w > 0 and ok:  # the new thread's accumulators
                        abase = nxt * acc_side + n_pool * acc_w
                        src = cur * acc_side + r0 * acc_w
                        for q in range(acc_w):
                            acc[abase + q] = acc[src + q]
                    # The conjuncts, written out here: a helper taking arrays would pay
                    # reference counting per call (prefilter._refine has the same loop).
                    k = conj_spans[var, 1] if F_SHAPE else conj_spans[var, 0]
                    if F_SHAPE:
                        if ok:
                            ok = shape_condition(
                                var, pos, start, n_rows, base, cols, valid, lp, fp, cur, r0
                            )
                    while ok and k < conj_spans[var, 1]:
                        if conj[k, 0] == CJ_COMPARE:
                            a = 0.0
                            for side in range(2):
                                j = 2 + 5 * side
                                if conj[k, j] == 0:
                                    x = cconst[k, side]
                                else:
                                    kind = conj[k, j + 2]
                                    arg = conj[k, j + 3]
                                    off = conj[k, j + 4]
                                    # The current row and another variable's last row, the
                                    # usual operands, without load_row's general case.
                                    if off == 0 and kind == R_CUR:
                                        rr = pos
                                    elif off == 0 and kind == R_LAST and arg != var:
                                        rr = lp[cur, r0, arg]
                                    else:
                                        last = -1
                                        first = -1
                                        if kind == R_LAST or kind == R_FIRST:
                                            last = lp[cur, r0, arg]
                                            first = fp[cur, r0, arg]
                                        rr = load_row(
                                            kind,
                                            arg,
                                            off,
                                            var,
                                            last,
                                            first,
                                            pos,
                                            start,
                                            n_rows,
                                            base,
                                        )
                                    c = conj[k, j + 1]
                                    if rr < 0 or valid[c, rr] == 0:
                                        ok = False
                                        break
                                    x = cols[c, rr]
                                if side == 0:
                                    a = x
                                else:
                                    ok = compare(conj[k, 1], a, x)
                        elif F_STACK:
                            ok = _condition(
                                code,
                                fconst,
                                conj[k, 1],
                                conj[k, 2],
                                cols,
                                valid,
                                set_mask,
                                lp[cur],
                                fp[cur],
                                r0,
                                var,
                                pos,
                                start,
                                n_rows,
                                base,
                                complete,
                                match_number,
                                sv,
                                sn,
                                acc,
                                abase,
                            )
                        k += 1
                    if F_STATS and counting:
                        st = stat_state[pc]
                        if st >= 0:
                            stat[2, st] += 1
                            leaves = ok != (stat_kind[st] == 1)
                            if leaves:
                                stat[3, st] += 1
                            # The thesis' FSM follows one path: only a star's exit hands
                            # the same tuple to the next thread's state.
                            counting = leaves and stat_kind[st] == 1
                    if not ok:
                        continue
                    if n_arena >= cap_arena:
                        full = W_ARENA
                        break
                    arena[0, n_arena] = th[cur, 2, i]
                    arena[1, n_arena] = var * 2 + prog[pc, 2]
                    node0 = n_arena
                    n_arena += 1
                    pc0 = pc + 1
                    fl0 = 0
                    pref0 = th[cur, 3, i]
                    if use_regs:
                        for q in range(n_obs_l):
                            u = obs_l[q]
                            lp[nxt, n_pool, u] = lp[cur, r0, u]
                        for q in range(n_obs_f):
                            u = obs_f[q]
                            fp[nxt, n_pool, u] = fp[cur, r0, u]
                        lp[nxt, n_pool, var] = pos
                        if obs_first[var] and fp[nxt, n_pool, var] < 0:
                            fp[nxt, n_pool, var] = pos
                elif F_ANCHOR:
                    pc = th[cur, 0, i]
                    if prog[pc, 0] != P_ENDANCHOR:
                        continue
                    pc0 = pc + 1
                    fl0 = th[cur, 1, i]
                    node0 = th[cur, 2, i]
                    pref0 = th[cur, 3, i]
                    if use_regs:
                        r0 = th[cur, 4, i]
                        for q in range(n_obs):
                            u = obs[q]
                            lp[nxt, n_pool, u] = lp[cur, r0, u]
                            fp[nxt, n_pool, u] = fp[cur, r0, u]
                        if F_AGG:
                            for q in range(acc_w):
                                acc[nxt * acc_side + n_pool * acc_w + q] = acc[
                                    cur * acc_side + r0 * acc_w + q
                                ]
                else:
                    continue  # no ``$`` in the program: nothing waits for the end
                reg0 = n_pool
                n_pool += 1
                # -- epsilon closure from (pc0, fl0) ---------------------------------
                stack[0, 0] = pc0
                stack[1, 0] = fl0
                stack[2, 0] = pref0
                sp = 1
                n_listed = prog[pc0, P_CLOSURE] if listed else -1
                j = 0
                while True:
                    if n_listed >= 0:  # the next LABEL/DONE of the closure table
                        if j >= n_listed:
                            break
                        j += 1
                        pc = prog[pc0, P_CLOSURE + j]
                        fl = 0
                        pref = 0 if demote else pref0
                    else:
                        if sp == 0:
                            break
                        sp -= 1
                        pc = stack[0, sp]
                        fl = stack[1, sp]
                        pref = 0 if demote else stack[2, sp]
                    dup = False
                    if seen_stamp[pc] == stamp:
                        e = seen_head[pc]
                        while e >= 0:
                            if seen[1, e] == fl:
                                same = True
                                ra = seen[2, e]
                                if use_regs and ra != reg0:  # one source: same registers
                                    for q in range(n_obs):
                                        u = obs[q]
                                        if obs_last[u] and lp[nxt, ra, u] != lp[nxt, reg0, u]:
                                            same = False
                                            break
                                        if obs_first[u] and fp[nxt, ra, u] != fp[nxt, reg0, u]:
                                            same = False
                                            break
                                    # running aggregates: equal values (NaN equal to NaN,
                                    # -0.0 apart from 0.0, which 1 / x tells apart)
                                    if F_AGG and acc_w > 0 and same:
                                        qa = nxt * acc_side + ra * acc_w
                                        qb = nxt * acc_side + reg0 * acc_w
                                        for q in range(acc_w):
                                            x = acc[qa + q]
                                            y = acc[qb + q]
                                            if x != y and (x == x or y == y):
                                                same = False
                                                break
                                            if x == 0.0 and np.signbit(x) != np.signbit(y):
                                                same = False
                                                break
                                if same:
                                    dup = True
                                    break
                            e = seen[0, e]
                    if dup:
                        continue
                    if n_seen >= cap_seen:
                        full = W_SEEN
                        break
                    seen[0, n_seen] = seen_head[pc] if seen_stamp[pc] == stamp else -1
                    seen[1, n_seen] = fl
                    seen[2, n_seen] = reg0
                    seen_head[pc] = n_seen
                    seen_stamp[pc] = stamp
                    n_seen += 1
                    op = prog[pc, 0]
                    if F_ANCHOR and op == P_ENDANCHOR and mode == 2:
                        # The partition has ended here: ``$`` holds, and so does a
                        # second one right after it (``C $ $``, ``${2}``).
                        if sp + 1 > cap_stack:
                            full = W_STACK
                            break
                        stack[0, sp] = pc + 1
                        stack[1, sp] = fl
                        stack[2, sp] = pref
                        sp += 1
                        continue
                    if op == P_LABEL or op == P_ENDANCHOR:
                        if n_next >= max_threads:
                            n_next += 1
                            break
                        if n_next >= cap_threads:
                            full = W_THREADS
                            break
                        th[nxt, 0, n_next] = pc
                        th[nxt, 1, n_next] = fl
                        th[nxt, 2, n_next] = node0
                        th[nxt, 3, n_next] = pref
                        th[nxt, 4, n_next] = reg0
                        n_next += 1
                        continue
                    if sp + 2 > cap_stack:
                        full = W_STACK
                        break
                    # Successors: ``t1`` (flags ``f1``) is pushed last, so taken first;
                    # ``t0`` (a SPLIT's alternative) under it; -1: none. One push site
                    # each keeps the kernel small (its cold compile grows with its size).
                    t0 = -1
                    t1 = -1
                    f1 = fl
                    if op == P_SPLIT:
                        t0 = prog[pc, 4]
                        t1 = prog[pc, 3]
                    elif op == P_JUMP:
                        t1 = prog[pc, 3]
                    elif op == P_BEGIN:
                        t1 = pc + 1
                        f1 = fl | (1 << prog[pc, 5])
                    elif op == P_END:
                        bit = 1 << prog[pc, 5]
                        if fl & bit:
                            t1 = prog[pc, 4]
                            f1 = fl & ~bit
                        else:
                            t1 = prog[pc, 3]
                    elif op == P_START:
                        if base + position == 0:
                            t1 = pc + 1
                    else:  # P_DONE
                        end = position - 1
                        if not F_ENDS or not all_ends:
                            has_best = True
                            best_node = node0
                            best_end = end
                            stop = True
                            break
                        if end_stamp[end + 1] != attempt_id:
                            end_stamp[end + 1] = attempt_id
                            end_node[end + 1] = node0
                            if end < end_lo:
                                end_lo = end
                            if end > end_hi:
                                end_hi = end
                            if mode == 1:
                                cut_end = end
                                cut_at = n_next
                        elif F_ANCHOR and mode == 2 and end == cut_end and i < cut_at:
                            # A thread that waited at ``$`` ends where a row's step
                            # already ended one, and was listed before that end was
                            # reached: it is the preferred path to this end.
                            end_node[end + 1] = node0
                            cut_end = -2
                        if pref:
                            has_best = True
                            best_node = node0
                            best_end = end
                            demote = True
                    if t0 >= 0:
                        stack[0, sp] = t0
                        stack[1, sp] = fl
                        stack[2, sp] = pref
                        sp += 1
                    if t1 >= 0:
                        stack[0, sp] = t1
                        stack[1, sp] = f1
                        stack[2, sp] = pref
                        sp += 1
                if full >= 0 or stop or n_next > max_threads:
                    break
            if full >= 0:
                status = ST_FULL
                err_row = full
                break
            if n_next > max_threads:
                status = ST_THREADS
                err_row = start
                break
            cur = nxt
            n_cur = n_next
            if mode == 1:
                pos += 1
                steps += 1
            elif mode == 2:
                n_cur = 0  # anything still alive waits for a row that never comes
            continue
        # -- decide the attempt (mode 3) ----------------------------------------------
        if F_MEMO and memo_from >= 0:
            last_end = best_end if has_best else start - 1
            if F_ENDS and all_ends and end_hi > last_end:
                last_end = end_hi
            # The pending snapshots after the last match end become dead ends.
            for k in range(1, memo_pend[0] + 1):
                if memo_arena[memo_pend[k]] > last_end:
                    memo_heads[memo_arena[memo_pend[k]] // MEMO_EVERY] = memo_pend[k]
            memo_pend[0] = 0
        if F_STATS and collect:
            for k in range(n_states):
                stat[0, k] += stat[2, k]
                stat[1, k] += stat[3, k]
            stat[0, n_states] += 1
            if has_best:
                stat[1, n_states] += 1
        if not has_best:
            if F_UNMATCHED and with_unmatched and start > covered:
                if n_rec >= cap_records:
                    status = ST_FULL
                    err_row = W_RECORDS
                    break
                records[n_rec, 0] = 1  # as put_record(records, n_rec, 1, start, 1, 0, n_lab)
                records[n_rec, 1] = start
                records[n_rec, 2] = 1
                records[n_rec, 3] = 0
                records[n_rec, 4] = n_lab
                n_rec += 1
            is_open = False
            next_start = start + 1
            continue
        lo = best_end
        hi = best_end
        if F_ENDS and all_ends:
            lo = end_lo
            hi = end_hi
        need_records = 0
        need_labels = 0
        for e in range(lo, hi + 1):
            if not F_ENDS or not all_ends or end_stamp[e + 1] == attempt_id:
                need_records += 1
                need_labels += e - start + 1
        if n_rec + need_records > cap_records or n_lab + need_labels > cap_labels:
            status = ST_FULL
            err_row = W_RECORDS if n_rec + need_records > cap_records else W_LABELS
            break
        is_open = False
        for e in range(lo, hi + 1):
            node = best_node
            if F_ENDS and all_ends:
                if end_stamp[e + 1] != attempt_id:
                    continue
                node = end_node[e + 1]
            length = e - start + 1
            match_number += 1
            records[n_rec, 0] = 0  # as put_record(..., 0, start, length, match_number, n_lab)
            records[n_rec, 1] = start
            records[n_rec, 2] = length
            records[n_rec, 3] = match_number
            records[n_rec, 4] = n_lab
            n_rec += 1
            k = n_lab + length - 1
            while node >= 0:
                labels[k] = arena[1, node]
                k -= 1
                node = arena[0, node]
            n_lab += length
            if e > covered:
                covered = e
        if best_end < start:
            next_start = start + 1
        elif skip_mode == SKIP_PAST:
            next_start = best_end + 1
        elif skip_mode == SKIP_NEXT:
            next_start = start + 1
        elif F_SKIPTO:
            target = -1
            node = best_node
            row = best_end
            while node >= 0:
                if skip_mask[arena[1, node] // 2]:
                    if skip_mode == SKIP_LAST:
                        if target < 0:
                            target = row
                    else:
                        target = row
                node = arena[0, node]
                row -= 1
            if target < 0:
                status = ST_SKIP_ABSENT
                err_row = start
                break
            if target == start:
                status = ST_SKIP_FIRST
                err_row = start
                break
            next_start = target
    if status == ST_WAIT or status == ST_FULL:
        next_start = start
    params[K_STEPS] += steps
    if F_STATS and collect:
        stat[2, n_states] = 0
        if is_open and n_cur > 0:
            st = stat_state[th[cur, 0, 0]]
            stat[2, n_states] = st if st >= 0 else n_states - 1
    return status, next_start, match_number, covered, err_row, n_rec, n_lab


_JIT = {
    "cache": True,
    "nogil": True,
    "error_model": "numpy",
    "pipeline_class": KernelCompiler,
    "no_cfunc_wrapper": True,
}
# The kernel with every feature: the reference for the variants, and what tests call.
run_attempts = njit(**_JIT)(_run_attempts)
_variants: dict[tuple[bool, ...], Dispatcher] = {}
_variants_lock = threading.Lock()


def dead_ends_may_help(
    prog: np.ndarray, code: np.ndarray, conj: np.ndarray, observed: np.ndarray
) -> bool:
    """Whether two attempts' threads can ever be equal (the dead ends, :data:`MEMO_EVERY`).

    Not where a condition reads the start row (:func:`memo_horizon`), nor where every
    thread binds, on its attempt's first row, a variable that a condition reads and
    no later row can take (``A`` in ``A B+ C* D+`` with ``A.price`` read, as in the
    DejaVu queries): each thread then carries its own start row in a register the
    states compare, so no state ever recurs, and recording them would only cost time
    (and compile time: the kernel variant leaves them out). ``observed``: per variable,
    whether a condition reads its rows."""
    if memo_horizon.py_func(code, conj) < 0:
        return False
    closure = prog[:, P_CLOSURE:]
    if prog.shape[1] <= P_CLOSURE or closure[0, 0] < 0:
        return True  # no closure table: the seed's reach is not listed
    firsts = closure[0, 1 : 1 + closure[0, 0]]
    if (prog[firsts, 0] != P_LABEL).any():
        return True  # the seed reaches DONE: empty matches
    later = {
        int(prog[pc, 1])
        for origin in range(1, len(prog))
        if closure[origin, 0] >= 0
        for pc in closure[origin, 1 : 1 + closure[origin, 0]]
        if prog[pc, 0] == P_LABEL
    }
    return not all(observed[v] and v not in later for v in prog[firsts, 1].tolist())


def attempts_kernel(
    prog: np.ndarray,
    conj: np.ndarray,
    code: np.ndarray,
    params: np.ndarray,
    stat_state: np.ndarray,
    wend: np.ndarray,
    observed: np.ndarray,
) -> Dispatcher:
    """The variant of :func:`run_attempts` for these arguments: compiled without the
    features (:data:`FEATURES`) they do not use, so that a query's first run compiles
    only what it needs (a cold start compiles, and caches, that variant alone).

    Every variant computes what the full kernel computes for arguments that use no
    feature it lacks; the arguments decide: ``conj`` (CJ_STACK rows), ``code``
    (C_FOLD), ``stat_state``, ``params`` (ALL MATCHES, skip mode, unmatched rows),
    ``wend`` (WITHIN), ``prog`` (P_ENDANCHOR). Few variants, so that a cold run of
    the test suite compiles few: with or without ALL MATCHES, with or without the
    stack interpreter (and running aggregates), with or without the dead ends
    (:func:`dead_ends_may_help`); the rarer features (statistics, SKIP
    TO, unmatched rows, WITHIN, ``$``) take the full kernel.
    """
    stack = bool((conj[:, 0] == CJ_STACK).any() or (code[:, 0] == C_FOLD).any())
    if (
        len(stat_state)
        or int(params[K_SKIP]) in (SKIP_FIRST, SKIP_LAST)
        or params[K_UNMATCHED]
        or len(wend)
        or (prog[:, 0] == P_ENDANCHOR).any()
    ):
        return run_attempts
    key = (
        stack,
        stack,
        False,
        bool(params[K_ALL_ENDS]),
        False,
        False,
        False,
        False,
        dead_ends_may_help(prog, code, conj, observed),
    )
    with _variants_lock:
        kernel = _variants.get(key)
        if kernel is None:
            namespace = dict(globals())
            namespace.update(zip(FEATURES, key))
            name = (
                "run_attempts_" + "_".join(f.lower()[2:] for f, on in zip(FEATURES, key) if on)
                if any(key)
                else "run_attempts_lean"
            )
            fn = types.FunctionType(
                _run_attempts.__code__, namespace, name, _run_attempts.__defaults__
            )
            fn.__qualname__ = name  # the numba cache names its files by it
            fn.__doc__ = _run_attempts.__doc__
            kernel = _variants[key] = njit(**_JIT)(fn)
    return kernel
