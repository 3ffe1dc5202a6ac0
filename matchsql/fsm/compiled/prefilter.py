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

Not used where a failed attempt is observable: ALL ROWS PER MATCH WITH
UNMATCHED ROWS (it outputs the row) and Go4Risk statistics (it counts the
window).
"""

from __future__ import annotations

import numpy as np

from matchsql.fsm.compiled import dfa as D
from matchsql.plan.spec import RowsPerMatch

NONE = np.zeros(0, np.uint8)  # the kernel's "no prefilter"
_UNSET = object()


def relaxed_dfa(plan) -> D.Dfa | None:
    """The DFA of ``plan``'s program over its row-local conditions, or None when it
    cannot be built, rules nothing out, or a skipped attempt would be observable
    (WITH UNMATCHED ROWS) (cached on the plan)."""
    dfa = plan.__dict__.get("_relaxed_dfa", _UNSET)
    if dfa is _UNSET:
        dfa = None
        if plan.spec.rows_per_match is not RowsPerMatch.ALL_WITH_UNMATCHED:
            dfa = D.dfa_for(plan.program, [bool(t) for t in plan.row_terms])
        if dfa is not None and not dfa.dead2.any():
            dfa = None
        plan.__dict__["_relaxed_dfa"] = dfa
    return dfa


def viable_starts(plan, rl: np.ndarray, base: int) -> np.ndarray:
    """``uint8[rows]``: 0 where an attempt over the rows ``rl`` (the row-local truth
    table, its first row partition row ``base``) cannot match; :data:`NONE` when
    nothing can be ruled out. The last row is always viable (its next row is not
    here), and so is partition row 0 (``^`` may match there)."""
    dfa = relaxed_dfa(plan)
    n = rl.shape[0]
    if dfa is None or n < 2:
        return NONE
    sym = D.symbols(dfa, rl)
    viable = np.ones(n, np.uint8)
    viable[:-1] = dfa.dead2[sym[:-1], sym[1:]] == 0
    if base == 0:
        viable[0] = 1
    return viable
