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

from matchsql.engine.compiled import dfa as D
from matchsql.engine.compiled import kernel as K
from matchsql.expr.number_order import array_ops, compare_columns
from matchsql.plan.spec import RowsPerMatch

NONE = np.zeros(0, np.uint8)  # the kernel's "no prefilter"
# The register conjuncts on the second row (False: row-local conjuncts only, as before;
# benchmarks compare the two).
SECOND_ROW = True
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
        refine[v] = (conj[spans[v, 0] : spans[v, 1], 0] == K.CJ_COMPARE).any()
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


def viable_starts(
    plan,
    rl: np.ndarray,
    base: int,
    cols: np.ndarray | None = None,
    valid: np.ndarray | None = None,
    bounds: np.ndarray | None = None,
) -> np.ndarray:
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
    second_sym = sym[1:]
    if second is not None and SECOND_ROW and cols is not None and valid is not None:
        if bounds is None:
            bounds = np.array([0, n], np.int64)
        conj, cconst, conj_spans = plan.registers.conjunct_table(fused=True)
        second_sym = _refine(
            dfa.bits,
            sym,
            second.need,
            conj,
            cconst,
            conj_spans,
            cols,
            valid,
            second.first,
            bounds,
            base,
        )
    # dead2[sym[s], second_sym[s]] through a flat index: a third of the 2-D gather's time
    width = dfa.dead2.shape[1]
    pair = sym[:-1].astype(np.uint16 if width <= 256 else np.int64) * width + second_sym
    viable[:-1] = np.take(dfa.dead2.ravel(), pair) == 0
    if base == 0:
        viable[0] = 1
    return viable


def _refine(
    bits: np.ndarray,
    sym: np.ndarray,
    need: np.ndarray,
    conj: np.ndarray,
    cconst: np.ndarray,
    conj_spans: np.ndarray,
    cols: np.ndarray,
    valid: np.ndarray,
    first: int,
    bounds: np.ndarray,
    base: int,
) -> np.ndarray:
    """The second row's symbol of the attempt from each row ``s`` (all but the last):
    ``sym[s + 1]`` less the bits of the variables ``need`` names whose register
    conjuncts fail for a thread that mapped row ``s`` to variable ``first``.

    Column-wise over every start at once: on the second row every register a
    comparison can read is a fixed distance from the start (:func:`_shift`), so each
    operand is a shifted slice of its column. It evaluates what the kernel's conjunct
    loop would for that thread (``K.load_row`` and ``K.compare``, NULL false), with no
    compile of its own on a cold start.
    """
    n = len(sym)
    m = n - 1  # start rows 0 .. n - 2 (the last row has no second row here)
    todo = np.take(need.astype(np.uint8), sym[:-1]) & sym[1:]  # symbols fit 8 bits
    partitions = len(bounds) > 2
    if partitions:  # a start on a partition's last row has no second row either
        todo[bounds[1:-1] - 1] = 0
    if not todo.any():
        return sym[1:]
    sym2 = sym[1:].copy()
    # Each start's partition (first row, end) and the start rows, for operands that may
    # read outside it: rows s and s + 1 of a start in ``todo`` are always inside.
    edges: tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None] = (None, None, None)
    for v in range(len(bits)):
        bit = int(bits[v])
        if bit < 0:
            continue
        mine = (todo & np.uint8(1 << bit)) != 0
        if not mine.any():
            continue
        ok = np.ones(m, bool)
        for k in range(int(conj_spans[v, 0]), int(conj_spans[v, 1])):
            if conj[k, 0] != K.CJ_COMPARE:
                continue  # taken as TRUE: the check stays a necessary condition
            # (values, usable): a constant's value has no mask
            sides: list[tuple[np.ndarray | np.float64, np.ndarray | None]] = []
            for side in range(2):
                j = 2 + 5 * side
                if conj[k, j] == 0:
                    sides.append((np.float64(cconst[k, side]), None))
                    continue
                shift = _shift(int(conj[k, j + 2]), int(conj[k, j + 3]), v, first)
                if shift is None:
                    ok[:] = False
                    break
                c = int(conj[k, j + 1])
                delta = shift + int(conj[k, j + 4])
                if partitions and delta not in (0, 1) and edges[0] is None:
                    sizes = np.diff(bounds)
                    edges = (
                        np.repeat(bounds[:-1], sizes)[:-1],
                        np.repeat(bounds[1:], sizes)[:-1],
                        np.arange(m, dtype=np.int64),
                    )
                inside = (None, None, None) if delta in (0, 1) else edges
                sides.append(_operand(cols[c], valid[c], delta, m, base, *inside))
            else:
                (a, a_ok), (b, b_ok) = sides
                holds = _compare(int(conj[k, 1]), a, b)
                for mask in (a_ok, b_ok):
                    if mask is not None:
                        holds = holds & mask
                ok &= holds
        sym2 &= ~((mine & ~ok).view(np.uint8) << np.uint8(bit))
    return sym2


def _operand(
    col: np.ndarray,
    valid: np.ndarray,
    delta: int,
    m: int,
    base: int,
    lo: np.ndarray | None,
    hi: np.ndarray | None,
    rows: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(values, usable)`` of row ``s + delta`` for the starts ``s < m``: usable where that
    row exists in the start's partition (``lo``/``hi``: each start's partition's first
    row and end, None: one partition of all rows, whose first is partition row ``base``)
    and holds a value; values elsewhere are arbitrary."""
    n = len(col)
    if lo is None and 0 <= delta and base + delta >= 0 and m + delta <= n:
        return col[delta : m + delta], valid[delta : m + delta] != 0  # every row exists: views
    values = np.zeros(m, np.float64)
    usable = np.zeros(m, bool)
    first = max(0, -delta)  # starts whose row s + delta is within 0 .. n - 1
    last = min(m, n - delta)
    if last > first:
        values[first:last] = col[first + delta : last + delta]
        usable[first:last] = valid[first + delta : last + delta] != 0
    if lo is None:
        if base + delta < 0:  # row s + delta before the partition's first row
            usable[: min(m, -(base + delta))] = False
    else:
        assert rows is not None and hi is not None  # given with lo
        at = rows + delta
        usable &= (at >= lo) & (at < hi) & (at - lo + base >= 0)
    return values, usable


def _shift(kind: int, arg: int, var: int, first: int) -> int | None:
    """The row a load of ``kind`` reads on an attempt's second row, as its distance from
    the attempt's start row ``s`` (the second row is ``s + 1``; the only register set
    is ``first``'s, at ``s``), before the physical offset; None: NULL
    (:func:`.kernel.load_row` with ``last = first = s`` for ``first``, else -1)."""
    if kind == K.R_CUR:
        return 1
    if kind == K.R_LAST:
        return 1 if arg == var else (0 if arg == first else None)
    if kind == K.R_FIRST:
        return 0 if arg == first else (1 if arg == var else None)
    if kind == K.R_START:
        return 0
    if kind == K.R_BACK:  # LAST(x, arg): within the match so far
        return 1 - arg if arg <= 1 else None
    return arg if arg <= 1 else None  # R_FORTH: FIRST(x, arg)


_COMPARISONS = {
    K.C_LT: "less",
    K.C_LE: "less_equal",
    K.C_GT: "greater",
    K.C_GE: "greater_equal",
    K.C_EQ: "equal",
    K.C_NE: "not_equal",
}


def _compare(op: int, a: np.ndarray | np.float64, b: np.ndarray | np.float64) -> np.ndarray:
    """``a op b`` element-wise in DuckDB's order of numbers (:func:`.kernel.compare`)."""
    return compare_columns(array_ops(np), _COMPARISONS[op], a, b)
