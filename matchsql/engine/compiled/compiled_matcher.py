"""The compiled per-partition matcher: same contract and rows as the reference.

:class:`CompiledPlan` holds what does not depend on a partition (program
arrays, DEFINE terms, register bytecode, measures) and is shared by all
partitions of a query. :class:`CompiledMatcher` is one partition's run:

* ``feed`` appends the batch to an Arrow buffer holding the rows still
  reachable (the open attempt, pending output, ``PREV`` look-back),
  evaluates the row-local DEFINE terms column-wise over it, and runs the
  kernel, which decides every attempt it can;
* decided matches come back as arrays (start, length, number, labels) and
  become output either column-wise (:mod:`.measures`, ONE ROW and ALL ROWS
  PER MATCH) or, for unmatched rows and measures outside that set, through
  the reference :class:`~matchsql.engine.output.OutputBuilder` over the
  buffered rows;
* rows before the oldest row still needed are dropped, so memory follows the
  live window, as in the reference's InputHolder;
* with ``threads`` > 1, at least twice ``split_rows`` rows to decide are cut into
  chunks matched on several threads at once and fixed up to the sequential
  result (:mod:`.chunks`): a single long partition uses every core. With
  ``gather`` (a one-time query, whose caller waits for the end anyway) the
  matcher gathers several batches before such a run (:func:`.chunks.gather_rows`);
  a live stream's matches, or a window frame's first match, would wait.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from matchsql.config import Config
from matchsql.engine.buffer_limit import RowWidth, check_held, max_rows, too_many_rows
from matchsql.engine.compiled import chunks as C
from matchsql.engine.compiled import dfa as D
from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled import ordinals as O
from matchsql.engine.compiled import prefilter as P
from matchsql.engine.compiled.lowering import (
    RegisterCode,
    RegisterCompiler,
    Unsupported,
    conjuncts,
    program_array,
)
from matchsql.engine.compiled.measures import (
    Matches,
    MeasureCompiler,
    Rows,
    RunningMeasureCompiler,
    output_batch,
)
from matchsql.engine.compiled.rowlocal import RowLocalCompiler, Term, evaluate
from matchsql.engine.compiled.within import within_bound, within_ends
from matchsql.engine.matcher import CountingGate, StateCounts
from matchsql.engine.output import MatchRecord, OutputBuilder, UnmatchedRow
from matchsql.engine.reference import CompiledQuery
from matchsql.engine.states import StateKind, StateSpec
from matchsql.errors import ExecutionError, LimitExceededError
from matchsql.plan.binder import bind
from matchsql.plan.spec import MatchSpec, RowsPerMatch, SkipMode
from matchsql.runtime.cancel import INTERRUPTED, Cancellation
from matchsql.saved_state.state_format import state_class

_SKIP = {
    SkipMode.PAST_LAST_ROW: K.SKIP_PAST,
    SkipMode.TO_NEXT_ROW: K.SKIP_NEXT,
    SkipMode.TO_FIRST: K.SKIP_FIRST,
    SkipMode.TO_LAST: K.SKIP_LAST,
}
MAX_LOOPS = 62  # loop flags live in one int64 per thread
#: Labels of matches pended (and later output) as one block; see CompiledMatcher._records.
LABEL_BLOCK = 1 << 20
NO_WITHIN = np.zeros(0, np.int64)  # the kernel's ``wend`` of a query without WITHIN


@dataclass
class CompiledPlan:
    """Everything about a query that the compiled matchers share."""

    spec: MatchSpec
    query: CompiledQuery  # the reference's analysis: reach, skip variables, measure closures
    path: str  # 'row_local' or 'registers'
    variables: list[str]
    program: np.ndarray
    row_terms: list[list[Term]]  # per variable id
    registers: RegisterCode
    measures: list | None  # column-wise ONE ROW measures, or None: reference output builder
    notes: list[str] = field(default_factory=list)  # why measures/output take which route
    within: float | None = None  # the WITHIN bound in the ORDER BY column's units

    @classmethod
    def build(cls, spec: MatchSpec, query: CompiledQuery | None = None) -> CompiledPlan:
        """Lower ``spec``; raises :class:`Unsupported` when no compiled path applies."""
        query = query or CompiledQuery(spec)
        within = within_bound(spec)
        if query.program.loops > MAX_LOOPS:
            raise Unsupported(f"more than {MAX_LOOPS} unbounded loops in the pattern")
        variables = list(query.program.variables)
        regs = RegisterCompiler(spec, variables)
        row_terms: list[list[Term]] = []
        for var in variables:
            expr = spec.defines.get(var)
            local: list[Term] = []
            other = []
            for term in conjuncts(bind(expr, spec)) if expr is not None else []:
                try:
                    local.append(RowLocalCompiler(spec, var).compile(term))
                except Unsupported:
                    other.append(term)
            row_terms.append(local)
            regs.define(var, other)
        path = "row_local" if regs.out.empty else "registers"
        notes = []
        measures = None
        if spec.rows_per_match is RowsPerMatch.ONE:
            try:
                measures = MeasureCompiler(spec, variables).compile_all()
                notes.append("measures: column-wise (Arrow gathers and segment reductions)")
            except Unsupported as exc:
                notes.append(f"measures: reference evaluator per match ({exc})")
        else:
            try:
                measures = RunningMeasureCompiler(spec, variables).compile_all()
                notes.append(
                    "output: column-wise rows (running measures as cumulative "
                    "operations over the labels)"
                    + (
                        "; unmatched rows with NULL measures"
                        if spec.rows_per_match is RowsPerMatch.ALL_WITH_UNMATCHED
                        else ""
                    )
                )
            except Unsupported as exc:
                notes.append(f"output: reference evaluator per row ({exc})")
        return cls(
            spec,
            query,
            path,
            variables,
            program_array(query.program),
            row_terms,
            regs.out,
            measures,
            notes,
            within,
        )


#: Windows (match attempts) whose Go4Risk statistics are counted in full before the
#: counting becomes a sample: enough for the selectivities to settle.
COUNT_WARM_WINDOWS = 4096
#: After the warm-up, one kernel call in this many seconds counts statistics. Counting
#: needs the thread VM (the DFA and the prefilter skip the evaluations it counts), and
#: counting every call made the adaptive mode the slowest at saturation (Q3 at 3M
#: tuples/s: 1.1-1.6M against push's 2.2M), while selectivities and the match ratio,
#: being ratios, are as well estimated from a sample of the calls.
COUNT_EVERY_S = 0.1
#: The statistics argument of a call that counts none.
NO_STATISTICS = np.zeros(0, np.int64)


@state_class
class CompiledMatcher:
    """One partition's run on a compiled path; see the module docstring."""

    # Class-level defaults: a snapshot taken before statistics were sampled restores
    # without them.
    _vm_plain: Any = None
    _counted_at = 0.0
    _gate: CountingGate | None = None

    def __init__(
        self,
        plan: CompiledPlan,
        partition_key: tuple = (),
        config: Config | None = None,
        cancel: Cancellation | None = None,
        gather: bool = False,
    ) -> None:
        self.plan = plan
        self.cancel = cancel or Cancellation()
        self.spec = plan.spec
        self.partition_key = tuple(partition_key)
        self.config = config or Config()
        self.schema = self.spec.columns
        self.table = self.schema.empty_table()
        self.width = RowWidth(self.schema)  # of the rows received, for the buffer limit
        self.base = 0  # partition row of the buffer's first row
        self.count = 0  # rows received
        self.low = 0  # oldest row still needed (the DejaVu memory metric's start)
        self.complete = False
        self.next_start = 0
        self.match_number = 0
        self.covered = -1
        self.steps = 0  # rows read by the attempts of sequential kernel runs (K_STEPS)
        # decided, waiting for NEXT rows of measures
        self.pending: list[Matches | MatchRecord | UnmatchedRow] = []
        self.output: list[pa.RecordBatch] = []
        q = plan.query
        self.ahead = q.define_ahead
        self.measure_ahead = q.measure_ahead
        self.lookback = q.lookback
        self.builder: OutputBuilder | None = None
        if plan.measures is None:
            self.builder = OutputBuilder(self.spec, [m.fn for m in q.measures], self.cancel.check)
        nv = len(plan.variables)
        self.skip_mask = np.zeros(max(nv, 1), np.uint8)
        for v in q.skip_vars or ():
            self.skip_mask[plan.variables.index(v)] = 1
        (self.code, self.consts, self.spans, self.set_mask, self.obs_last, self.obs_first) = (
            plan.registers.arrays()
        )
        self.conj = plan.registers.conjunct_table()
        self.caps = np.array([64, 512, 256, 4096, 4096, 16384], np.int64)
        self.work: tuple | None = K.workspace(self.caps, len(plan.program), nv)
        # Row-local, standard mode: the DFA of the program runs instead of the thread VM
        # (forcing 'registers' keeps the VM, so that both stay differential-tested).
        self.dfa = D.for_matcher(plan, self.config)[0]
        # Long stretches of rows split into chunks matched on several threads (chunks.py).
        self.splittable = C.unsplittable(self.spec, self.code, plan.within) is None
        # Rows the split runs gather first (C.gather_rows); 0: every batch is matched.
        self.gather = (
            C.gather_rows(self.config.split_rows, self.config.threads)
            if self.splittable and gather
            else 0
        )
        # Go4Risk statistics, off (empty) until observe() is called.
        self.stat_state = np.zeros(0, np.int64)
        self.stat_kind = np.zeros(0, np.uint8)
        self.stat = np.zeros((4, 1), np.int64)
        self._vm: Any = None  # the thread VM's kernel variant (K.attempts_kernel), once known
        self._vm_plain: Any = None  # the same, counting no statistics (between samples)
        self._counted_at = 0.0  # when a call last counted statistics (time.monotonic)

    def __getstate__(self) -> dict:
        """A checkpoint or a migrated bucket leaves the kernel variant behind: a variant
        is a function built at run time, found again on first use after restore.

        The kernel's workspace stays behind too: it is scratch that each kernel call
        overwrites (records, labels, threads), about 300 KB at its starting capacities,
        which made a Spark key's state in the state store a thousand times its real size.
        ``caps`` (grown capacities) is kept, so the restored matcher allocates the same
        workspace on its first run."""
        return {**self.__dict__, "_vm": None, "_vm_plain": None, "work": None, "_gate": None}

    # -- public API ---------------------------------------------------------------------

    @property
    def buffered_rows(self) -> int:
        return self.count - self.low

    def observe(
        self,
        states: Sequence[StateSpec],
        label_state: Sequence[int],
        gate: CountingGate | None = None,
    ) -> bool:
        """Count Go4Risk statistics per tuple from now on (the adaptive input mode), in
        the calls made while ``gate`` is on.

        ``label_state[k]`` is the linear state of the k-th LABEL instruction
        (:func:`matchsql.engine.states.label_states`). Returns False when
        the mapping does not fit this program, so the caller falls back to
        coarser statistics.
        """
        program = self.plan.program
        label_pcs = np.flatnonzero(program[:, 0] == K.P_LABEL)
        if len(label_pcs) != len(label_state) or not states:
            return False
        self.stat_state = np.full(len(program), -1, np.int64)
        self.stat_state[label_pcs] = np.asarray(label_state, np.int64)
        self.stat_kind = np.array([s.kind is StateKind.STAR for s in states], np.uint8)
        self.stat = np.zeros((4, len(states) + 1), np.int64)
        self._vm = None  # a variant that counts
        self._gate = gate
        return True

    def state_counts(self) -> StateCounts:
        """Totals of decided attempts: ``(in, out, windows, matched windows, current state)``."""
        n = self.stat.shape[1] - 1
        stat = self.stat
        return (
            stat[0, :n].copy(),
            stat[1, :n].copy(),
            int(stat[0, n]),
            int(stat[1, n]),
            int(stat[2, n]),
        )

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if batch.num_rows:
            self._append(batch)
            if self.count - self.next_start >= self.gather or len(self.stat_state):
                self._run()
        return self._take()

    def finish(self) -> list[pa.RecordBatch]:
        self.complete = True
        self._run()
        return self._take()

    def feed_final(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """``feed(batch)`` then ``finish()`` in one matching pass.

        The sorted router knows a partition ends inside a batch; with many
        short partitions the second pass was a third of the per-partition cost.
        """
        if batch.num_rows:
            self._append(batch)
        return self.finish()

    def _append(self, batch: pa.RecordBatch) -> None:
        if self.complete:
            raise ExecutionError("internal error: rows fed after the partition finished")
        new = pa.Table.from_batches([batch], schema=self.schema)
        self.table = pa.concat_tables([self.table, new]) if self.table.num_rows else new
        self.width.add(batch)
        self.count += batch.num_rows

    # -- matching -----------------------------------------------------------------------

    def _run(self) -> None:
        plan = self.plan
        table = self.table.combine_chunks()
        self.table = table
        n = table.num_rows
        if self.next_start < self.count and n:
            columns = {
                name: table.column(name).chunk(0)
                if table.column(name).num_chunks
                else pa.array([], table.schema.field(name).type)
                for name in table.column_names
            }
            counting = self._statistics_now()
            dfa = self.dfa if not len(counting) else None  # statistics: the VM counts
            params = kernel_params(self.spec, self.config, self.width)
            params[K.K_ROWS] = n
            params[K.K_BASE] = self.base
            params[K.K_LIMIT] = n if self.complete else max(0, n - self.ahead)
            params[K.K_COMPLETE] = int(self.complete)
            starts = (
                C.cuts(
                    self.next_start - self.base,
                    int(params[K.K_LIMIT]),
                    self.config.split_rows,
                    self.config.threads,
                )
                if self.splittable and not len(counting)
                else [0]
            )
            if len(starts) > 1:
                status, err_row = self._split(starts, dfa, columns, params)
            else:
                labels = label_input(plan, dfa, columns, n)
                cols, valid = register_columns(plan, columns, n)
                # Statistics count every attempt, so none may be skipped.
                viable = (
                    P.NONE
                    if dfa is not None or len(counting)
                    else P.viable_starts(plan, labels, self.base, cols, valid)
                )
                wend = (
                    within_ends(self.spec, plan.within, columns[self.spec.order_by[0]])
                    if plan.within is not None
                    else NO_WITHIN
                )
                status, err_row = self._sequential(
                    dfa, labels, viable, wend, cols, valid, params, counting
                )
                self.steps += int(params[K.K_STEPS])
            if status >= K.ST_THREADS:
                self._raise(int(status), int(err_row) + self.base)
        self._emit_ready()
        self._collect_garbage()

    def _statistics_now(self) -> np.ndarray:
        """The statistics argument of this call: the state map while counting (every call
        for the first :data:`COUNT_WARM_WINDOWS` windows, then one every
        :data:`COUNT_EVERY_S`, and none while the gate is off), else
        :data:`NO_STATISTICS`, so that the call may take the DFA, the prefilter and the
        split runs."""
        if not len(self.stat_state) or (self._gate is not None and not self._gate.on):
            return NO_STATISTICS
        if self.stat[0, -1] < COUNT_WARM_WINDOWS:
            return self.stat_state
        now = time.monotonic()
        if now - self._counted_at < COUNT_EVERY_S:
            return NO_STATISTICS
        self._counted_at = now
        return self.stat_state

    def _sequential(
        self,
        dfa: D.Dfa | None,
        labels: np.ndarray,
        viable: np.ndarray,
        wend: np.ndarray,
        cols: np.ndarray,
        valid: np.ndarray,
        params: np.ndarray,
        counting: np.ndarray = NO_STATISTICS,
    ) -> tuple[int, int]:
        """Decide the attempts from ``next_start`` on this thread; the kernel's
        ``(status, err_row)``."""
        plan = self.plan
        nv = len(plan.variables)
        if self.work is None:  # restored from a snapshot, which leaves it behind
            self.work = K.workspace(self.caps, len(plan.program), nv)
        while True:
            params[K.K_NEXT] = self.next_start - self.base
            params[K.K_MN] = self.match_number
            params[K.K_COVERED] = self.covered - self.base
            status, nxt, mn, covered, err_row, n_rec, n_lab = self._kernel(
                dfa, labels, viable, wend, cols, valid, params, self.work, counting
            )
            self._records(self.work[-2][:n_rec], self.work[-1][:n_lab])
            self.next_start = int(nxt) + self.base
            self.match_number = int(mn)
            self.covered = int(covered) + self.base
            if status != K.ST_FULL:
                return int(status), int(err_row)
            self.caps[int(err_row)] *= 2
            self.work = K.workspace(self.caps, len(plan.program), nv)

    def _kernel(
        self,
        dfa: D.Dfa | None,
        labels: np.ndarray,
        viable: np.ndarray,
        wend: np.ndarray,
        cols: np.ndarray,
        valid: np.ndarray,
        params: np.ndarray,
        work: tuple,
        counting: np.ndarray = NO_STATISTICS,
    ) -> tuple:
        """One call of the DFA (row-local) or else the thread VM over ``work``, the
        sequential run's and each chunk's alike: ``(status, next, match number, covered,
        err_row, records, labels)``."""
        if dfa is not None:
            return D.run(dfa, labels, self.skip_mask, params, work[-2], work[-1], self.cancel.flag)
        vm = self._vm if len(counting) else self._vm_plain
        if vm is None:
            vm = K.attempts_kernel(
                self.plan.program,
                self.conj[0],
                self.code,
                params,
                counting,
                wend,
                self.obs_last | self.obs_first,
            )
            if len(counting):
                self._vm = vm
            else:
                self._vm_plain = vm
        return vm(
            self.plan.program,
            labels,
            viable,
            wend,
            self.code,
            self.consts,
            self.spans,
            *self.conj,
            cols,
            valid,
            self.set_mask,
            self.obs_last,
            self.obs_first,
            self.skip_mask,
            params,
            counting,
            self.stat_kind,
            self.stat,
            *work,
            self.cancel.flag,
        )

    def _split(
        self, starts: list[int], dfa: D.Dfa | None, columns: dict, params: np.ndarray
    ) -> tuple[int, int]:
        """Decide the attempts from ``starts[0]`` in chunks on the chunk pool
        (:func:`chunks.match_chunks`); the kernel's ``(status, err_row)``."""

        def window(start: int, limit: int, final: bool = True) -> C.Run:
            return self._window(start, limit, dfa, columns, params, final)

        # Tiny chunks (tests) re-run in tiny steps, so that the fix-up re-synchronises.
        run = C.match_chunks(
            window,
            starts,
            int(params[K.K_LIMIT]),
            C.pool(self.config.threads).submit,
            min(C.FIRST_STEP, self.config.split_rows),
            check=self.cancel.check,
        )
        records = run.records
        if len(records):
            records[:, 3] = self.match_number + np.arange(1, len(records) + 1)
            self.match_number += len(records)
            self.covered = max(
                self.covered, int((records[:, 1] + records[:, 2]).max()) - 1 + self.base
            )
        self._records(records, run.labels)
        self.next_start = run.next_start + self.base
        return run.status, run.err_row

    def _window(
        self,
        start: int,
        limit: int,
        dfa: D.Dfa | None,
        columns: dict,
        params: np.ndarray,
        final: bool = True,
    ) -> C.Run:
        """The kernel from buffer row ``start`` with look-ahead limit ``limit``, over the
        rows it can read, as the sequential run reads its buffer: from ``lookback`` rows
        before ``start`` to ``ahead`` rows past ``limit``. The DEFINE terms are evaluated
        over those rows and the kernel gets its own workspace, so that chunks run on
        several threads at once. Buffer rows in the result."""
        n = int(params[K.K_ROWS])
        w0 = max(0, start - self.lookback)
        w1 = min(n, limit + self.ahead)
        p = params.copy()
        p[K.K_ROWS] = w1 - w0
        p[K.K_BASE] = self.base + w0
        p[K.K_LIMIT] = limit - w0
        p[K.K_COMPLETE] = int(final and self.complete and w1 == n)
        p[K.K_NEXT] = start - w0
        p[K.K_MN] = 0
        p[K.K_COVERED] = start - w0 - 1
        rows = {name: column.slice(w0, w1 - w0) for name, column in columns.items()}
        lab = label_input(self.plan, dfa, rows, w1 - w0)
        cols, valid = register_columns(self.plan, rows, w1 - w0)
        via = (
            P.NONE
            if dfa is not None
            else P.viable_starts(self.plan, lab, self.base + w0, cols, valid)
        )
        caps = self.caps.copy()
        nv = len(self.plan.variables)
        work = K.workspace(caps, len(self.plan.program), nv)
        pieces: list[tuple[np.ndarray, np.ndarray]] = []
        while True:
            status, nxt, mn, covered, err_row, n_rec, n_lab = self._kernel(
                dfa, lab, via, NO_WITHIN, cols, valid, p, work
            )
            if n_rec:
                records = work[-2][:n_rec].copy()
                records[:, 1] += w0
                C.keep(pieces, C.Run(0, 0, 0, records, work[-1][:n_lab].copy()), 0, n_rec)
            p[K.K_NEXT] = nxt
            p[K.K_MN] = mn
            p[K.K_COVERED] = covered
            if status != K.ST_FULL:
                break
            caps[int(err_row)] *= 2
            work = K.workspace(caps, len(self.plan.program), nv)
        err = int(err_row) + w0 if status >= K.ST_THREADS and err_row >= 0 else int(err_row)
        if status == K.ST_DONE and w1 < n:
            status = K.ST_WAIT  # the window's rows ran out, not the buffer's
        return C.joined(
            C.Run(int(status), int(nxt) + w0, err, C.NO_RECORDS, C.NO_LABELS),
            pieces,
            self.cancel.check,
        )

    # -- one bounded range of a partition (matchsql.integrations.spark.ranges) -----------

    def hold(self, table: pa.Table, complete: bool) -> None:
        """Hold ``table``'s rows as this matcher's buffer without matching them
        (``complete``: the partition ends with them), for :meth:`run_from` and
        :meth:`output_records`: a Spark task decides its range of one long partition from the
        attempt starts it chooses, as the chunks of a split run are decided."""
        for batch in table.to_batches():
            if batch.num_rows:
                self._append(batch)
        self.table = self.table.combine_chunks()
        self.complete = complete

    def run_from(self, start: int, first_row: int = 0) -> C.Run:
        """The kernel's decisions from buffer row ``start`` on, over the buffer's rows
        from ``first_row`` (rows before it are not read, as if the partition began
        there): every attempt that reads no row past the look-ahead limit, as
        :meth:`_window` decides a chunk's. Buffer rows in the result."""
        n = self.table.num_rows
        columns = {
            name: self.table.column(name).chunk(0).slice(first_row)
            for name in self.table.column_names
        }
        params = kernel_params(self.spec, self.config, self.width)
        params[K.K_ROWS] = n - first_row
        params[K.K_BASE] = self.base
        limit = (n if self.complete else max(first_row, n - self.ahead)) - first_row
        run = self._window(start - first_row, limit, self.dfa, columns, params)
        records = run.records.copy()
        records[:, 1] += first_row
        err = run.err_row + first_row if run.err_row >= 0 else run.err_row
        return C.Run(run.status, run.next_start + first_row, err, records, run.labels)

    def output_records(
        self, records: np.ndarray, labels: np.ndarray
    ) -> tuple[list[pa.RecordBatch], bool]:
        """The output of ``records`` (a run's, numbered here from 1 in order) and whether
        all of it came out (False: a measure reads rows past the buffer)."""
        records = records.copy()
        records[:, 3] = np.arange(1, len(records) + 1)
        self._records(records, labels)
        self._emit_ready()
        return self._take(), not self.pending

    def raise_status(self, status: int, start: int) -> None:
        """Raise the kernel's error ``status`` for the attempt at buffer row ``start``."""
        self._raise(status, start + self.base)

    def _raise(self, status: int, start: int) -> None:
        raise_status(self.spec, self.config, self.width, status, start)

    def _records(self, records: np.ndarray, labels: np.ndarray) -> None:
        if not len(records):
            return
        kinds = records[:, 0]
        if self.plan.measures is not None:
            # Blocks of about LABEL_BLOCK labels, the cancellation checked between them:
            # the matches of a split run under SKIP TO NEXT ROW hold hundreds of millions
            # of labels, and one conversion of them all held an interrupt for a second.
            # Each block's output is built on its own later, as bounded. An unmatched
            # row's record (kind 1) has length 1 and no labels.
            ends = records[:, 4] + np.where(kinds == 1, 0, records[:, 2])
            lo = 0
            while lo < len(records):
                self.cancel.check()
                hi = max(lo + 1, int(np.searchsorted(ends, records[lo, 4] + LABEL_BLOCK, "right")))
                self._matches(records[lo:hi], labels)
                lo = hi
            return
        records = records.copy()
        names = self.plan.variables
        for i, (kind, start, length, number, offset) in enumerate(records.tolist()):
            if i & 255 == 255:
                self.cancel.check()
            if kind == 1:
                self.pending.append(UnmatchedRow(start + self.base))
                continue
            codes = labels[offset : offset + length].tolist()
            self.pending.append(
                MatchRecord(
                    start + self.base,
                    [names[c // 2] for c in codes],
                    [bool(c & 1) for c in codes],
                    number,
                )
            )

    def _matches(self, records: np.ndarray, labels: np.ndarray) -> None:
        """Pend ``records`` (matches, and unmatched rows as empty matches marked
        ``unmatched``) as column-wise :class:`Matches`."""
        # New arrays only (``records`` and ``labels`` may be the kernel's workspace); the
        # label codes (variable * 2 + excluded, never negative) are split while int16,
        # half the work on the main thread of a split run's millions of rows.
        unmatched = records[:, 0] == 1
        lengths = np.where(unmatched, 0, records[:, 2])
        first = int(records[0, 4])
        codes = labels[first : first + int(lengths.sum())]
        self.pending.append(
            Matches(
                starts=records[:, 1] + self.base,
                lengths=lengths,
                numbers=records[:, 3].copy(),
                labels=(codes >> 1).astype(np.int64),
                offsets=records[:, 4] - first,
                excluded=(codes & 1).astype(bool),
                unmatched=unmatched if unmatched.any() else None,
            )
        )

    # -- output and memory ---------------------------------------------------------------

    def _ready_end(self) -> int:
        """Matches ending before this row can be output now."""
        if self.complete:
            return self.count + 1
        return self.count - self.measure_ahead

    def _emit_ready(self) -> None:
        limit = self._ready_end()
        rows: _BufferRows | None = None
        while self.pending:
            self.cancel.check()  # one block of matches' output at a time (see _records)
            item = self.pending[0]
            if isinstance(item, Matches):
                ends = item.starts + item.lengths - 1
                ready = int(np.searchsorted(np.maximum.accumulate(ends) >= limit, True))
                if ready == 0:
                    break
                if ready < len(ends):
                    head, tail = item.cut(ready)
                    self._emit_columns(head)
                    self.pending[0] = tail
                    break
                self.pending.pop(0)
                self._emit_columns(item)
                continue
            if not self.complete and item.end + self.measure_ahead >= self.count:
                break
            self.pending.pop(0)
            assert self.builder is not None
            rows = rows or _BufferRows(self)
            self.builder.add(rows, item)
        if self.builder is not None:
            self.output += self.builder.take()

    def _emit_columns(self, m: Matches) -> None:
        rows = Rows(self.table, self.base, self.count, self.complete)
        assert self.plan.measures is not None  # column-wise output only
        self.output.append(output_batch(self.spec, self.plan.measures, m, rows))

    def _take(self) -> list[pa.RecordBatch]:
        out, self.output = self.output, []
        return out

    def _collect_garbage(self) -> None:
        keep = self.next_start
        if self.pending:
            first = self.pending[0]
            keep = min(keep, int(first.starts[0]) if isinstance(first, Matches) else first.start)
        back = self.plan.query.lookback_for(self.count, self.complete)
        self.low = max(self.low, min(keep - back, self.count))
        drop = self.low - self.base
        if drop > 0 and drop * 2 >= self.count - self.base:
            self.table = self.table.slice(drop)
            self.base = self.low
        check_held(self.config, self.width, self.count - self.low, keep, back)


def label_input(plan: CompiledPlan, dfa: D.Dfa | None, columns: dict, n: int) -> np.ndarray:
    """The row-local DEFINE terms over ``n`` rows: one DFA symbol per row
    (``uint8[n]``, the label bits of the conditioned variables) when ``dfa``
    runs, else the thread VM's ``uint8[n, vars]`` truth table."""
    if dfa is not None:
        sym = np.zeros(n, np.uint8)
        for v, terms in enumerate(plan.row_terms):
            if terms:
                sym |= evaluate(terms, columns, n) << np.uint8(dfa.bits[v])
        return sym
    rl = np.ones((n, max(len(plan.variables), 1)), np.uint8)
    for v, terms in enumerate(plan.row_terms):
        if terms:
            rl[:, v] = evaluate(terms, columns, n)
    return rl


class WithRegisters(Protocol):
    """What :func:`register_columns` reads of a plan: its register bytecode (a
    :class:`CompiledPlan`'s, or the GPU path's, which keeps only the terms the device
    does not evaluate elementwise)."""

    registers: RegisterCode


def register_columns(plan: WithRegisters, columns: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(values, valid)``: the columns register terms read, as ``float64[cols, n]``
    and ``uint8[cols, n]`` (one dummy column of width 1 when there are none); booleans
    as 0 and 1, strings, dates, timestamps and decimals as codes made over these ``n``
    rows (:mod:`.ordinals`: the kernel compares them within this call only)."""
    regs = plan.registers
    ncol = len(regs.columns)
    width = n if ncol else 1  # the kernel reads columns only for register terms
    cols = np.zeros((max(ncol, 1), width), np.float64)
    valid = np.ones((max(ncol, 1), width), np.uint8)
    coded: dict[pa.DataType, list[int]] = {}  # group -> its columns (ordinals.py)
    for c, name in enumerate(regs.columns):
        arr = columns[name]
        encoding = regs.encodings.get(name)
        if encoding is not None:
            if encoding == "bool":
                cols[c] = arr.fill_null(False).to_numpy(zero_copy_only=False)
            else:
                coded.setdefault(encoding, []).append(c)
            if arr.null_count:
                valid[c] = arr.is_valid().to_numpy(zero_copy_only=False)
            continue
        cols[c] = (
            arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            if arr.null_count == 0
            else arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64)
        )
        if arr.null_count:
            valid[c] = arr.is_valid().to_numpy(zero_copy_only=False)
    for group, members in coded.items():
        codes = O.encode(
            [columns[regs.columns[c]] for c in members],
            group,
            regs.literals.get(group, ()),
            group in regs.ordered,
        )
        for c, values in zip(members, codes):
            cols[c] = values
    return cols, valid


def kernel_params(spec: MatchSpec, config: Config, width: RowWidth) -> np.ndarray:
    """The kernel's parameter slots that depend on the query (and, for the rows an
    attempt may read, on the partition's row ``width``); the caller sets rows, base,
    limit, completeness and where to resume."""
    params = np.zeros(K.K_PARAMS, np.int64)
    params[K.K_ALL_ENDS] = int(spec.all_ends)
    params[K.K_SKIP] = _SKIP[spec.skip]
    params[K.K_MAX_THREADS] = config.max_threads
    params[K.K_UNMATCHED] = int(spec.with_unmatched)
    # An attempt may read at most the rows the buffer limit allows: a runaway one stops
    # there (ST_SPAN) instead of running to the partition's end from every start row.
    params[K.K_MAX_SPAN] = max_rows(config, width)
    return params


def raise_status(spec: MatchSpec, config: Config, width: RowWidth, status: int, start: int) -> None:
    """Raise the error of kernel status ``status`` (>= ST_THREADS) for the attempt at
    partition row ``start`` (0-based), of a partition of rows ``width`` wide."""
    if status == K.ST_CANCELLED:
        raise ExecutionError(INTERRUPTED)
    if status == K.ST_SPAN:
        raise too_many_rows(config, width, start)
    if status == K.ST_THREADS:
        raise LimitExceededError(
            f"row pattern matching needs more than max_threads={config.max_threads} "
            f"live threads for the match attempt at partition row {start + 1}; simplify "
            "the pattern or raise the limit with SET max_threads = ..."
        )
    where = "FIRST" if spec.skip is SkipMode.TO_FIRST else "LAST"
    if status == K.ST_SKIP_ABSENT:
        raise ExecutionError(
            f"AFTER MATCH SKIP TO {where} {spec.skip_variable} failed: the pattern "
            f"variable is not present in the match starting at partition row {start + 1}"
        )
    raise ExecutionError(
        f"AFTER MATCH SKIP TO {where} {spec.skip_variable} failed: it would skip "
        f"to the first row of the match (partition row {start + 1}), which would "
        "find the same match again"
    )


@state_class
class _BufferRows:
    """A :class:`~matchsql.expr.rows.RowSource` over a compiled matcher's buffer."""

    def __init__(self, matcher: CompiledMatcher) -> None:
        self.m = matcher
        self._cache: dict[str, list[Any]] = {}

    @property
    def count(self) -> int:
        return self.m.count

    @property
    def complete(self) -> bool:
        return self.m.complete

    def value(self, index: int, column: str) -> Any:
        values = self._cache.get(column)
        if values is None:
            values = self._cache[column] = self.m.table.column(column).to_pylist()
        i = index - self.m.base
        if i < 0 or i >= len(values):
            raise ExecutionError(f"internal error: partition row {index} is not held")
        return values[i]
