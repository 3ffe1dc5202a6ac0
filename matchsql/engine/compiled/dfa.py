"""A leftmost-first DFA for row-local queries: :func:`.kernel.run_attempts` without threads.

When no DEFINE reads registers, the thread VM's live list after each step is
an ordered, deduplicated list of ``(pc, loop flags)``, and the next list is a
function of that list and of which conditions the row satisfies (its label
bits): each thread at a ``LABEL`` whose condition holds starts an epsilon
closure at the next instruction with no loop flags, closures run in thread
order with one ``seen`` set per step, and a ``DONE`` ends the step (the match
found is preferred to everything behind it). The subset construction over
those lists (as RE2's DFA does for leftmost-first matching) gives a DFA whose
run is the kernel's run: same attempts, same ends, same preferred path.

* the alphabet is the label bits of a row over the variables that have a
  condition (a variable without one is always true), packed into one byte per
  row: at most :data:`MAX_COND_VARS` conditioned variables;
* ``^`` passes only in the seed closure of an attempt starting at partition
  row 0, so there are two seed states; ``$``, ALL MATCHES and registers are
  not handled (the matcher keeps the thread VM for them);
* labels: each transition records, for each thread of the next state, the
  index of the source thread that created it, and each state the label
  (``var * 2 + excluded``) its threads consume; the kernel keeps the state of
  every step of the open attempt and walks the path back at decide time.

The tables are built eagerly, once per program (cached by :func:`dfa_for`),
and the construction gives up (returns None: thread VM) beyond
:data:`MAX_STATES` states or :data:`MAX_TABLE` source entries.

Attempts that merge. The kernel decides attempts one after another, and an
attempt that no row ends (``A B* C`` where no ``C`` comes, a stream that ends
with an attempt open) reads to the partition's end: from every later start
row too, quadratic in the rows. But whether a run finds a match after row
``x`` depends only on its state at ``x`` and the rows from ``x`` on. So once
an attempt is decided, its state at every row ``x`` after its last match end
(every row, when it found none) is recorded as a dead end; a later attempt
in the same state at the same row would find nothing more either, and is
decided there with what it found so far: the same rows as running on, in
linear time. States are recorded and compared at every :data:`MEMO_EVERY`-th
row only, on the slow path that the run's bound already takes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from numba import njit

from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled.kernel import MEMO_EVERY
from matchsql.engine.compiled.partition_loop import close_call, next_partition

MAX_COND_VARS = 8  # conditioned variables: at most 256 symbols
MAX_STATES = 4096
MAX_STATE_THREADS = 4096  # threads in one DFA state (beyond max_threads: thread VM)
DONE_BITS = 13  # packed transitions: DONE source + 1 < 2**DONE_BITS
MAX_TABLE = 4_000_000  # transitions x threads recorded for the path walk-back
MAX_WORK = 500_000  # closure steps of the construction (bounds its time, ~0.5 s)
MAX_PROGRAM = 20_000  # instructions (unrolled bounded quantifiers)


@dataclass
class Dfa:
    """The tables of :func:`run_dfa` (see the module docstring)."""

    trans: np.ndarray  # int32[states, symbols]: next state (0 is the dead state)
    done: np.ndarray  # int32[states, symbols]: source thread of the DONE, -1 none
    src_off: np.ndarray  # int32[states, symbols]: offset of the next state's sources in src
    src: np.ndarray  # int32[...]: per thread of the next state, its source thread
    lab: np.ndarray  # int16[states, width]: label code of each thread of a state
    seeds: np.ndarray  # int64[4]: seed state at row 0, elsewhere; their DONE flags
    step: np.ndarray  # int32[states, symbols]: next state << DONE_BITS | DONE source + 1
    dead2: np.ndarray  # uint8[symbols, symbols]: an attempt (not at row 0) on these two
    # rows dies without a match (all zero when the seed matches empty)
    bits: np.ndarray  # int64[vars]: symbol bit of each variable, -1 unconditioned
    max_threads: int  # longest state (the thread VM's live threads)

    @property
    def states(self) -> int:
        return self.trans.shape[0]


def build(
    prog: np.ndarray,
    conditioned: list[bool],
    limit_threads: int = MAX_STATE_THREADS,
    max_states: int = MAX_STATES,
) -> Dfa | None:
    """The DFA of program array ``prog``, or None when it is not applicable or too big.

    ``conditioned[v]``: variable ``v`` has a row-local condition (else it is
    always true and takes no symbol bit).
    """
    ops = prog[:, 0].tolist()
    if K.P_ENDANCHOR in ops or len(ops) > MAX_PROGRAM:
        return None
    cond_vars = [v for v in range(len(conditioned)) if conditioned[v]]
    if len(cond_vars) > MAX_COND_VARS:
        return None
    bits = np.full(max(len(conditioned), 1), -1, np.int64)
    for k, v in enumerate(cond_vars):
        bits[v] = k
    subsets = _Subsets(prog, limit_threads, max_states)
    try:
        seeds = [subsets.seed(at_zero) for at_zero in (True, False)]
        rows = subsets.explore(bits, 1 << len(cond_vars))
    except _TooBig:
        return None
    return _tables(subsets, rows, seeds, bits)


class _TooBig(Exception):
    """The construction passed one of its bounds: the thread VM runs the query."""


#: One DFA state's row of the tables: next state, DONE source (-1: none) and, per
#: symbol, the source thread of each thread of the next state.
_Row = tuple[np.ndarray, np.ndarray, list[list[int]]]


class _Subsets:
    """The subset construction: states are the kernel's ordered live lists of
    ``(pc, loop flags)``, numbered as they are found (0: the empty, dead state)."""

    def __init__(self, prog: np.ndarray, limit_threads: int, max_states: int) -> None:
        self.ops = prog[:, 0].tolist()
        self.var_of = prog[:, 1].tolist()
        self.target = prog[:, 3].tolist()
        self.alt = prog[:, 4].tolist()
        self.slot = prog[:, 5].tolist()
        self.code_of = [
            int(prog[pc, 1]) * 2 + int(prog[pc, 2]) if self.ops[pc] == K.P_LABEL else -1
            for pc in range(len(self.ops))
        ]
        self.limit_threads = limit_threads
        self.max_states = max_states
        self.work = 0  # closure steps so far, bounded by MAX_WORK
        self.ids: dict[tuple, int] = {(): 0}
        self.states: list[tuple] = [()]

    def closure(
        self, sources: list[tuple[int, int]], at_zero: bool
    ) -> tuple[tuple, list[int], int | None]:
        """The kernel's step: epsilon closures from ``sources`` = [(index, pc0)] in
        order, one ``seen`` set. Returns (threads, the source of each, the source
        of the DONE or None: a DONE ends the step, as in the kernel)."""
        ops, target, alt, slot = self.ops, self.target, self.alt, self.slot
        seen = set()
        out: list[tuple[int, int]] = []
        srcs: list[int] = []
        for i, pc0 in sources:
            stack = [(pc0, 0)]
            while stack:
                self.work += 1
                pc, fl = stack.pop()
                if (pc, fl) in seen:
                    continue
                seen.add((pc, fl))
                op = ops[pc]
                if op == K.P_LABEL:
                    out.append((pc, fl))
                    srcs.append(i)
                elif op == K.P_SPLIT:
                    stack.append((alt[pc], fl))
                    stack.append((target[pc], fl))
                elif op == K.P_JUMP:
                    stack.append((target[pc], fl))
                elif op == K.P_BEGIN:
                    stack.append((pc + 1, fl | (1 << slot[pc])))
                elif op == K.P_END:
                    bit = 1 << slot[pc]
                    stack.append((alt[pc], fl & ~bit) if fl & bit else (target[pc], fl))
                elif op == K.P_START:
                    if at_zero:
                        stack.append((pc + 1, fl))
                else:  # DONE
                    return tuple(out), srcs, i
        return tuple(out), srcs, None

    def intern(self, state: tuple) -> int:
        sid = self.ids.get(state)
        if sid is None:
            if len(self.states) >= self.max_states or len(state) > self.limit_threads:
                raise _TooBig
            sid = self.ids[state] = len(self.states)
            self.states.append(state)
        return sid

    def seed(self, at_zero: bool) -> tuple[int, bool]:
        """The seed state of an attempt (at partition row 0 or not), and whether its
        closure reaches DONE (an empty match)."""
        state, _, done = self.closure([(-1, 0)], at_zero)
        return self.intern(state), done is not None

    def explore(self, bits: np.ndarray, n_syms: int) -> list[_Row]:
        """Each state's row of the tables, states found on the way explored in turn."""
        var_of = self.var_of
        rows: list[_Row] = []
        total = 0
        k = 0
        while k < len(self.states):
            state = self.states[k]
            # Only the variables this state's threads read matter: compute one
            # transition per combination of their bits, then broadcast.
            used = sorted({bits[var_of[pc]] for pc, _ in state if bits[var_of[pc]] >= 0})
            mask = sum(1 << int(b) for b in used)
            row_t = np.zeros(n_syms, np.int32)
            row_d = np.full(n_syms, -1, np.int32)
            row_s: list[list[int]] = [[] for _ in range(n_syms)]
            memo: dict[int, tuple[int, int, list[int]]] = {}
            for sym in range(n_syms):
                key = sym & mask
                got = memo.get(key)
                if got is None:
                    sources = [
                        (i, pc + 1)
                        for i, (pc, _) in enumerate(state)
                        if bits[var_of[pc]] < 0 or (key >> int(bits[var_of[pc]])) & 1
                    ]
                    nxt, srcs, done = self.closure(sources, False)
                    got = memo[key] = (self.intern(nxt), -1 if done is None else done, srcs)
                row_t[sym], row_d[sym], row_s[sym] = got
                total += len(got[2])
                if total > MAX_TABLE or self.work > MAX_WORK:
                    raise _TooBig
            rows.append((row_t, row_d, row_s))
            k += 1
        return rows


def _tables(
    subsets: _Subsets, rows: list[_Row], seeds: list[tuple[int, bool]], bits: np.ndarray
) -> Dfa:
    """The explored states as :class:`Dfa` arrays, with the two-row prefilter."""
    states = subsets.states
    n_states = len(states)
    n_syms = rows[0][0].shape[0]
    width = max(1, max(len(s) for s in states))
    lab = np.full((n_states, width), -1, np.int16)
    for sid, state in enumerate(states):
        for j, (pc, _) in enumerate(state):
            lab[sid, j] = subsets.code_of[pc]
    src_off = np.zeros((n_states, n_syms), np.int32)
    flat: list[int] = []
    for sid in range(n_states):
        for sym in range(n_syms):
            src_off[sid, sym] = len(flat)
            flat.extend(rows[sid][2][sym])
    seeds_arr = np.array([seeds[0][0], seeds[1][0], int(seeds[0][1]), int(seeds[1][1])], np.int64)
    trans = np.array([row[0] for row in rows], np.int32).reshape(n_states, n_syms)
    done = np.array([row[1] for row in rows], np.int32).reshape(n_states, n_syms)
    step = (trans << DONE_BITS) | (done + 1)
    # Two-row prefilter of attempts: seed -> s1 -> s2 dead, no DONE on the way.
    seed = int(seeds_arr[1])
    t1, d1 = trans[seed], done[seed]
    dead2 = ((d1 < 0)[:, None] & ((t1 == 0)[:, None] | ((trans[t1] == 0) & (done[t1] < 0)))).astype(
        np.uint8
    )
    if seeds_arr[3]:
        dead2[:] = 0
    return Dfa(
        trans,
        done,
        src_off,
        np.array(flat if flat else [0], np.int32),
        lab,
        seeds_arr,
        step,
        dead2,
        bits,
        max(len(s) for s in states),
    )


_cache: dict[tuple, Dfa | None] = {}
_lock = threading.Lock()


def dfa_for(prog: np.ndarray, conditioned: list[bool]) -> Dfa | None:
    """:func:`build`, cached by program and conditioned variables."""
    if len(prog) > MAX_PROGRAM:
        return None
    key = (prog.shape, prog.tobytes(), tuple(bool(c) for c in conditioned))
    with _lock:
        if key in _cache:
            return _cache[key]
    dfa = build(prog, conditioned)
    with _lock:
        if len(_cache) >= 256:
            _cache.clear()
        _cache[key] = dfa
    return dfa


_UNSET = object()


def for_matcher(plan, config) -> tuple[Dfa | None, str]:
    """The DFA a compiled matcher of ``plan`` runs under ``config``, or None and why not.

    Built once per plan (partitions share it) and per program (:func:`dfa_for`).
    """
    spec = plan.spec
    if plan.path != "row_local":
        return None, "DEFINE reads registers"
    if config.execution_path == "registers":
        return None, "forced by SET execution_path = 'registers'"
    if spec.all_ends:
        return None, "ALL MATCHES"
    if plan.within is not None:
        return None, "WITHIN ends attempts by time"
    dfa = plan.__dict__.get("_dfa", _UNSET)
    if dfa is _UNSET:
        dfa = plan.__dict__["_dfa"] = dfa_for(plan.program, [bool(t) for t in plan.row_terms])
    if dfa is None:
        if (plan.program[:, 0] == K.P_ENDANCHOR).any():
            return None, "the pattern has $"
        if sum(bool(t) for t in plan.row_terms) > MAX_COND_VARS:
            return None, f"more than {MAX_COND_VARS} variables with a condition"
        return None, f"the DFA would exceed {MAX_STATES} states or its construction budget"
    if dfa.max_threads > config.max_threads:
        return None, f"a state has more than max_threads={config.max_threads} threads"
    return dfa, ""


def symbols(dfa: Dfa, rl: np.ndarray) -> np.ndarray:
    """One symbol per row from the label bits ``rl`` (``uint8[rows, vars]``)."""
    out = np.zeros(rl.shape[0], np.uint8)
    for v in range(min(rl.shape[1], len(dfa.bits))):
        b = int(dfa.bits[v])
        if b >= 0:
            out |= (rl[:, v] != 0).astype(np.uint8) << np.uint8(b)
    return out


def run(
    dfa: Dfa,
    sym: np.ndarray,
    skip_mask: np.ndarray,
    params: np.ndarray,
    records: np.ndarray,
    labels: np.ndarray,
    cancel: np.ndarray,
) -> tuple:
    """:func:`run_dfa` over ``dfa``'s tables; same result tuple as ``run_attempts``."""
    return run_dfa(
        dfa.step,
        dfa.dead2,
        dfa.src_off,
        dfa.src,
        dfa.lab,
        dfa.seeds,
        sym,
        skip_mask,
        params,
        records,
        labels,
        cancel,
    )


@njit(cache=True, nogil=True)
def run_dfa(step, dead2, src_off, src, lab, seeds, sym, skip_mask, params, records, labels, cancel):
    """Decide match attempts from ``params[K_NEXT]``, as :func:`.kernel.run_attempts` does.

    ``sym`` is ``uint8[rows]`` (:func:`symbols`); ``params`` and the outputs
    are the kernel's (ALL MATCHES and ``K_MAX_THREADS`` do not apply: the
    matcher only calls this when every state fits ``max_threads``). ``cancel`` is
    polled as there.
    """
    n_rows = params[K.K_ROWS]
    base = params[K.K_BASE]
    limit = params[K.K_LIMIT]
    complete = params[K.K_COMPLETE] != 0
    next_start = params[K.K_NEXT]
    match_number = params[K.K_MN]
    covered = params[K.K_COVERED]
    skip_mode = params[K.K_SKIP]
    with_unmatched = params[K.K_UNMATCHED] != 0
    max_span = params[K.K_MAX_SPAN]
    cap_records = records.shape[0]
    cap_labels = labels.shape[0]
    hist = np.empty(n_rows + 1, np.int32)  # state after each row of the open attempt
    # Dead ends: memo[x // MEMO_EVERY] is the state at row x of a decided attempt that
    # found no match end at rows >= x (0: none recorded); see the module docstring.
    memo = np.empty(n_rows // MEMO_EVERY + 2, np.int32)
    for k in range(memo.shape[0]):
        memo[k] = 0
    steps = 0
    prefilter = not with_unmatched and seeds[3] == 0
    low = (1 << DONE_BITS) - 1
    n_rec = 0
    n_lab = 0
    status = K.ST_DONE
    err_row = -1
    start = 0
    stop = n_rows if n_rows < limit else limit
    while True:
        if cancel[0] != 0:
            status = K.ST_CANCELLED
            break
        if next_start >= n_rows:
            status = K.ST_DONE
            break
        start = next_start
        if prefilter and base + start != 0:
            # Attempts that die on their first two rows without a match: next row.
            while start + 1 < limit and dead2[sym[start], sym[start + 1]]:
                start += 1
            next_start = start
        # -- run the attempt until its threads die or the rows run out ----------------
        if base + start == 0:
            state = seeds[0]
            has_best = seeds[2] != 0
        else:
            state = seeds[1]
            has_best = seeds[3] != 0
        best_end = start - 1
        best_src = -1
        hist[0] = state
        pos = start
        wait = K.ST_DONE  # ST_WAIT, ST_CANCELLED or ST_SPAN: why the attempt stopped open
        # One test per row: ``bound`` is the nearest of the rows' end, the look-ahead
        # limit, the attempt's longest span and the next poll of the cancel flag; which
        # one it was is sorted out there.
        span_end = start + max_span
        reach = stop if stop < span_end else span_end
        check_at = pos + K.CANCEL_EVERY
        memo_at = (pos // MEMO_EVERY + 1) * MEMO_EVERY
        bound = reach if reach < check_at else check_at
        if memo_at < bound:
            bound = memo_at
        while state != 0:
            if pos >= bound:
                if pos >= n_rows:
                    if complete:
                        break  # end of partition: every live thread waits for a row
                    wait = K.ST_WAIT
                    break
                if pos >= limit:
                    wait = K.ST_WAIT
                    break
                if pos >= span_end:
                    wait = K.ST_SPAN
                    break
                if pos >= memo_at:
                    if memo[pos // MEMO_EVERY] == state:
                        break  # a dead end: nothing more to find (decided as it stands)
                    memo_at += MEMO_EVERY
                if pos >= check_at:
                    if cancel[0] != 0:
                        wait = K.ST_CANCELLED
                        break
                    check_at = pos + K.CANCEL_EVERY
                bound = reach if reach < check_at else check_at
                if memo_at < bound:
                    bound = memo_at
            e = step[state, sym[pos]]
            if e & low:
                has_best = True
                best_end = pos
                best_src = (e & low) - 1
            state = e >> DONE_BITS
            pos += 1
            hist[pos - start] = state
        steps += pos - start
        if wait != K.ST_DONE:
            status = wait
            err_row = start
            break
        # Record the dead ends of this decided attempt: its states after its last match end.
        x = best_end + 1 if best_end >= start else start
        x = (x + MEMO_EVERY - 1) // MEMO_EVERY * MEMO_EVERY
        while x <= pos:
            if hist[x - start] != 0:
                memo[x // MEMO_EVERY] = hist[x - start]
            x += MEMO_EVERY
        # -- decide -------------------------------------------------------------------
        if not has_best:
            if with_unmatched and start > covered:
                if n_rec >= cap_records:
                    status = K.ST_FULL
                    err_row = K.W_RECORDS
                    break
                K.put_record(records, n_rec, 1, start, 1, 0, n_lab)
                n_rec += 1
            next_start = start + 1
            continue
        length = best_end - start + 1
        if n_rec + 1 > cap_records or n_lab + length > cap_labels:
            status = K.ST_FULL
            err_row = K.W_RECORDS if n_rec + 1 > cap_records else K.W_LABELS
            break
        match_number += 1
        K.put_record(records, n_rec, 0, start, length, match_number, n_lab)
        n_rec += 1
        j = best_src
        for k in range(length - 1, -1, -1):
            st = hist[k]
            labels[n_lab + k] = lab[st, j]
            if k > 0:
                prev = hist[k - 1]
                j = src[src_off[prev, sym[start + k - 1]] + j]
        if best_end > covered:
            covered = best_end
        if best_end < start:
            next_start = start + 1
        elif skip_mode == K.SKIP_PAST:
            next_start = best_end + 1
        elif skip_mode == K.SKIP_NEXT:
            next_start = start + 1
        else:
            target = -1
            for k in range(length):
                if skip_mask[labels[n_lab + k] // 2]:
                    if skip_mode == K.SKIP_FIRST:
                        if target < 0:
                            target = start + k
                    else:
                        target = start + k
            n_lab += length
            if target < 0:
                status = K.ST_SKIP_ABSENT
                err_row = start
                break
            if target == start:
                status = K.ST_SKIP_FIRST
                err_row = start
                break
            next_start = target
            continue
        n_lab += length
    if status == K.ST_WAIT or status == K.ST_FULL:
        next_start = start
    params[K.K_STEPS] += steps
    return status, next_start, match_number, covered, err_row, n_rec, n_lab


def run_partitions(
    dfa: Dfa,
    sym: np.ndarray,
    skip_mask: np.ndarray,
    params: np.ndarray,
    records: np.ndarray,
    labels: np.ndarray,
    cancel: np.ndarray,
    bounds: np.ndarray,
    part: int,
    rec_used: int,
    lab_used: int,
    found: np.ndarray,
) -> tuple:
    """:func:`dfa_partitions` over ``dfa``'s tables."""
    return dfa_partitions(
        dfa.step,
        dfa.dead2,
        dfa.src_off,
        dfa.src,
        dfa.lab,
        dfa.seeds,
        sym,
        skip_mask,
        params,
        records,
        labels,
        cancel,
        bounds,
        part,
        rec_used,
        lab_used,
        found,
    )


@njit(cache=True, nogil=True)
def dfa_partitions(
    step,
    dead2,
    src_off,
    src,
    lab,
    seeds,
    sym,
    skip_mask,
    params,
    records,
    labels,
    cancel,
    bounds,
    part,
    rec_used,
    lab_used,
    found,
):
    """:func:`run_dfa` over partitions ``part``, ``part + 1``, ... (rows ``bounds[i]`` to
    ``bounds[i + 1]`` of ``sym``) of a complete batch, in one call.

    Why: called from Python once per partition, the DFA spent more time entering the
    call (numba's checks of its arguments, the slices) than stepping through 80 rows,
    and real data has thousands of partitions that short. The protocol is
    :func:`~matchsql.engine.compiled.partition_loop.driver`'s: ``K_NEXT``, ``K_MN`` and
    ``K_COVERED`` say where partition ``part`` resumes; records and labels are written
    from ``rec_used`` and ``lab_used`` on, their rows and label offsets made the
    batch's; ``found[i]`` counts partition ``i``'s records. Returns ``(status,
    next_start, match_number, covered, err_row, part, rec_used, lab_used)``:
    ``K.ST_DONE`` with ``part`` past the last partition, or the status that stopped
    partition ``part`` (``K.ST_FULL``, an error, a cancellation).
    """
    n_parts = bounds.shape[0] - 1
    while part < n_parts:
        a = bounds[part]
        b = bounds[part + 1]
        params[K.K_ROWS] = b - a
        params[K.K_LIMIT] = b - a
        status, nxt, mn, covered, err_row, n_rec, n_lab = run_dfa(
            step,
            dead2,
            src_off,
            src,
            lab,
            seeds,
            sym[a:b],
            skip_mask,
            params,
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
