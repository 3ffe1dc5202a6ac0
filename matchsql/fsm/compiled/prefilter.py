"""Match attempts that the row-local conditions rule out, found before the thread VM runs.

On the registers path most rows start an attempt that dies on its second
row (DejaVu Q1: ``A B+ ...`` where ``B`` needs ``price <= PREV(price)``), and
setting up and deciding each costs the thread VM far more than the rows it
reads. A DEFINE is the AND of its conjuncts, so its row-local conjuncts are a
necessary condition: the DFA of the program over those alone (register
conjuncts taken as true, :func:`.dfa.dfa_for`) admits every thread the real
conditions admit, and where its ``dead2`` table says an attempt dies on its
first two rows without a match, the real attempt dies too. The kernel skips
such starts (``viable`` = 0), exactly as if it had run and failed them.

The register conjuncts join in on the second row when every attempt maps its
first row to the same variable (``A`` of ``A B+ C* D+``): a thread reading
its second row then holds exactly one register, that variable at the start
row, so ``B.price < A.price`` is known there (``price < PREV(price)``) and
is evaluated as the kernel evaluates it (comparisons; other register conjuncts are
taken as true here).
On data with many equal prices this rules out most of the starts that the
row-local ``price <= PREV(price)`` lets through.

Not used where a failed attempt is observable: ALL ROWS PER MATCH WITH
UNMATCHED ROWS (it outputs the row) and Go4Risk statistics (it counts the
window).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from matchsql.fsm.compiled import dfa as D
from matchsql.fsm.compiled import kernel as K
from matchsql.plan.spec import RowsPerMatch

NONE = np.zeros(0, np.uint8)  # the kernel's "no prefilter"
# The register conjuncts on the second row (False: row-local conjuncts only, as before;
# benchmarks compare the two).
SECOND_ROW = True
# The second row's check costs about a fifth of the attempt it saves (measured on DejaVu
# Q1): after SAMPLE candidate starts, it stops when it ruled out fewer than 1 in PAYS.
SAMPLE = 2048
PAYS = 5
_UNSET = object()


@dataclass
class SecondRow:
    """What evaluating the register conjuncts on an attempt's second row needs."""

    first: int  # the variable every attempt maps its first row to
    # int64[symbols]: by the first row's symbol, the symbol bits of the second row
    # whose variables' register conjuncts are evaluated (those a thread there reads)
    need: np.ndarray


def relaxed_dfa(plan) -> D.Dfa | None:
    """The DFA of ``plan``'s program over its row-local conditions, or None when it
    cannot be built, rules nothing out, or a skipped attempt would be observable
    (WITH UNMATCHED ROWS) (cached on the plan)."""
    return _relaxed(plan)[0]


def second_row(plan) -> SecondRow | None:
    """How the register conjuncts refine ``relaxed_dfa(plan)``'s second row; None when
    they do not (no register code, or attempts may map their first row to several
    variables) (cached on the plan)."""
    return _relaxed(plan)[1]


def _relaxed(plan) -> tuple[D.Dfa | None, SecondRow | None]:
    got = plan.__dict__.get("_relaxed_dfa", _UNSET)
    if got is _UNSET:
        got = (None, None)
        if plan.spec.rows_per_match is not RowsPerMatch.ALL_WITH_UNMATCHED:
            got = _build(plan)
        plan.__dict__["_relaxed_dfa"] = got
    return got


def _build(plan) -> tuple[D.Dfa | None, SecondRow | None]:
    local = [bool(t) for t in plan.row_terms]
    conj, _, spans = plan.registers.conjunct_table(fused=True)
    refine = np.zeros(max(len(local), 1), np.uint8)
    for v in range(len(local)):
        # the comparisons are evaluated (MATCH_NUMBER, say, is never one of them)
        refine[v] = (conj[spans[v, 0]:spans[v, 1], 0] == K.CJ_COMPARE).any()
    if refine.any():
        dfa = D.dfa_for(plan.program, [c or bool(r) for c, r in zip(local, refine)])
        if dfa is not None and dfa.dead2.any():
            seed = int(dfa.seeds[1])
            firsts = {int(c) // 2 for c in dfa.lab[seed].tolist() if c >= 0}
            if len(firsts) == 1:
                need = np.zeros(dfa.trans.shape[1], np.int64)
                for x, state in enumerate(dfa.trans[seed].tolist()):
                    for c in dfa.lab[state].tolist():
                        if c >= 0 and refine[c // 2] and dfa.bits[c // 2] >= 0:
                            need[x] |= 1 << int(dfa.bits[c // 2])
                return dfa, SecondRow(firsts.pop(), need)
    dfa = D.dfa_for(plan.program, local)
    if dfa is not None and not dfa.dead2.any():
        dfa = None
    return dfa, None


def viable_starts(plan, rl: np.ndarray, base: int, cols: np.ndarray | None = None,
                  valid: np.ndarray | None = None,
                  bounds: np.ndarray | None = None) -> np.ndarray:
    """``uint8[rows]``: 0 where an attempt over the rows ``rl`` (the row-local truth
    table, its first row partition row ``base``) cannot match; :data:`NONE` when
    nothing can be ruled out. The last row is always viable (its next row is not
    here), and so is partition row 0 (``^`` may match there).

    With the register columns ``cols``/``valid`` (:func:`.matcher.register_columns`)
    the second row's register conjuncts are evaluated too; ``bounds`` (the partitions
    of a batch, each starting at partition row 0; default: one partition) keeps their
    ``PREV``/``NEXT`` inside a partition.
    """
    dfa, second = _relaxed(plan)
    n = rl.shape[0]
    if dfa is None or n < 2:
        return NONE
    sym = D.symbols(dfa, rl)
    viable = np.ones(n, np.uint8)
    viable[:-1] = dfa.dead2[sym[:-1], sym[1:]] == 0
    if second is not None and SECOND_ROW and cols is not None and valid is not None:
        if bounds is None:
            bounds = np.array([0, n], np.int64)
        conj, cconst, conj_spans = plan.registers.conjunct_table(fused=True)
        _refine(viable, dfa.dead2, dfa.bits, sym, second.need, conj, cconst, conj_spans, cols,
                valid, second.first, bounds, base)
    if base == 0:
        viable[0] = 1
    return viable


@njit(cache=True, nogil=True, error_model="numpy", pipeline_class=K.KernelCompiler)
def _refine(viable, dead2, bits, sym, need, conj, cconst, conj_spans, cols, valid, first,
            bounds, base):
    """Clear ``viable[s]`` where the second row's symbol, with the register conjuncts of
    the variables ``need`` names evaluated for a thread that mapped row ``s`` to
    variable ``first``, leaves the relaxed DFA dead (``dead2``). Gives up (leaving the
    rest to the kernel) where it does not pay: see :data:`SAMPLE`."""
    n_vars = bits.shape[0]
    wide = cols.shape[1] > 1
    tried = 0
    cut = 0
    for p in range(bounds.shape[0] - 1):
        a = bounds[p]
        b = bounds[p + 1]
        off = a if wide else 0  # the partition's first column of cols/valid
        for s in range(b - a - 1):
            if viable[a + s] == 0:
                continue
            r = s + 1
            sym2 = np.int64(sym[a + r])
            todo = need[sym[a + s]] & sym2
            if todo == 0:
                continue
            tried += 1
            if tried == SAMPLE and cut * PAYS < tried:
                return
            for v in range(n_vars):
                bit = bits[v]
                if bit < 0 or (todo >> bit) & 1 == 0:
                    continue
                # The kernel's conjunct loop (kernel.run_attempts), for this one register.
                ok = True
                k = conj_spans[v, 0]
                while ok and k < conj_spans[v, 1]:
                    if conj[k, 0] == K.CJ_COMPARE:
                        x0 = 0.0
                        for side in range(2):
                            j = 2 + 5 * side
                            if conj[k, j] == 0:
                                x = cconst[k, side]
                            else:
                                arg = conj[k, j + 3]
                                reg = s if arg == first else -1
                                rr = K.load_row(conj[k, j + 2], arg, conj[k, j + 4], v, reg, reg,
                                                r, s, b - a, base)
                                c = conj[k, j + 1]
                                if rr < 0 or valid[c, off + rr] == 0:
                                    ok = False
                                    break
                                x = cols[c, off + rr]
                            if side == 0:
                                x0 = x
                            else:
                                ok = K.compare(conj[k, 1], x0, x)
                    # Other conjuncts are taken as TRUE (the check stays a necessary
                    # condition): evaluating them here would compile the stack
                    # interpreter a second time, for column slices, on a cold start.
                    k += 1
                if not ok:
                    sym2 &= ~(np.int64(1) << bit)
            if dead2[sym[a + s], sym2]:
                viable[a + s] = 0
                cut += 1
