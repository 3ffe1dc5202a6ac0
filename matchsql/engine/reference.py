"""The reference matcher: one resumable run per partition, complete semantics.

It is the oracle for every faster path, so it favours obvious correctness:
match attempts run one after another, each from one start row, in a thread
VM (:mod:`matchsql.engine.vm`) over the compiled program; DEFINE and MEASURES
are evaluated by :mod:`matchsql.expr.rowwise`.

It must also be usable on real data (hundreds of thousands of rows per
second), which it gets without a second semantics: DEFINEs in the common
subset (comparisons over columns of the current row, ``A.x`` and ``PREV``)
run as closures over column lists (:mod:`matchsql.engine.defines`, checked
against the general evaluator by tests), the VM walks precomputed epsilon
closures, the InputHolder converts only the columns something reads, and
matches are output as soon as they are final (a backlog of match records
would be promoted by Python's garbage collector and make every full
collection expensive).

Streaming works because every decision waits exactly as long as it must:

* a thread waits for the next row (``feed``) or the partition's end
  (``finish``), plus as many rows as DEFINE's ``NEXT`` looks ahead;
* a match is final when its attempt has no live threads left (a greedy
  ``B+`` is final only once ``B`` fails or the partition ends);
* a match is output once the rows its measures may read (``NEXT``) exist;
* rows before the current attempt, the oldest pending output and the
  farthest ``PREV`` are dropped from the InputHolder.

DejaVu's ``ALL MATCHES`` / ``INCREMENTAL MATCH``: from each start row the
attempt reports one match per distinct end row, in increasing end order, each
with the preferred labelling among the paths ending there; AFTER MATCH SKIP is
then applied to the standard's preferred match of that start row.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from functools import partial

import pyarrow as pa
from sqlglot import exp

from matchsql.config import Config
from matchsql.engine.buffer_limit import RowWidth, check_held, max_rows, too_many_rows
from matchsql.engine.compiled.within import outside
from matchsql.engine.defines import FastDefine, compile_define
from matchsql.engine.holder import InputHolder
from matchsql.engine.matcher import CountingGate, StateCounts
from matchsql.engine.output import MatchRecord, OutputBuilder, UnmatchedRow
from matchsql.engine.program import Program, compile_pattern
from matchsql.engine.states import StateSpec
from matchsql.engine.vm import (
    Attempt,
    Closures,
    Completion,
    History,
    HistoryKey,
    HistoryLabels,
    HistorySequence,
    Machine,
    Test,
    history_lists,
)
from matchsql.errors import ExecutionError
from matchsql.expr.history import HistoryUse, Reach
from matchsql.expr.rows import MatchView
from matchsql.expr.rowwise import CompiledExpression, analyze_expression
from matchsql.expr.values import truth
from matchsql.plan.spec import MatchSpec, SkipMode
from matchsql.runtime.cancel import Cancellation
from matchsql.saved_state.state_format import state_class


class CompiledQuery:
    """Everything about a spec that does not depend on the partition's rows.

    Shared by all partitions of one query (compiling once per partition
    would dominate small partitions).
    """

    def __init__(self, spec: MatchSpec) -> None:
        self.spec = spec
        self.program: Program = compile_pattern(spec.pattern)
        self.defines: dict[str, CompiledExpression] = {}
        for var, expr in spec.defines.items():
            if var in spec.variables:
                compiled = analyze_expression(expr, spec)
                compiled.history = compiled.history.in_define_of(var)
                self.defines[var] = compiled
        self.measures = [analyze_expression(m.expr, spec) for m in spec.measures]
        history = HistoryUse()
        define_reach = Reach()
        for compiled in self.defines.values():
            history.merge(compiled.history)
            define_reach.merge(compiled.reach)
        measure_reach = Reach()
        for compiled in self.measures:
            measure_reach.merge(compiled.reach)
        self.history = history
        self.history_key = HistoryKey(history)
        self.closures = Closures(self.program, self.history_key)
        # DEFINEs in the subset that runs without a MatchView (see defines.py).
        self.fast_defines: dict[str, FastDefine] = {}
        for var, compiled in self.defines.items():
            fast = compile_define(
                spec.defines[var], spec, var, self.history_key, row_local=compiled.history.empty
            )
            if fast is not None:
                self.fast_defines[var] = fast
        self.define_ahead = define_reach.ahead
        self.measure_ahead = measure_reach.ahead
        self.reach = Reach()
        self.reach.merge(define_reach)
        self.reach.merge(measure_reach)
        self.lookback = self.reach.back
        self.columns = held_columns(spec)
        self.skip_vars: frozenset[str] | None = None
        if spec.skip in (SkipMode.TO_FIRST, SkipMode.TO_LAST):
            name = spec.skip_variable
            if name is None:
                raise ExecutionError(f"AFTER MATCH SKIP {spec.skip.value} needs a variable")
            if name in spec.subsets:
                self.skip_vars = frozenset(spec.subsets[name])
            elif name in spec.variables:
                self.skip_vars = frozenset((name,))
            else:
                raise ExecutionError(f"AFTER MATCH SKIP to unknown pattern variable {name}")

    def lookback_for(self, rows: int, complete: bool) -> int:
        """Rows before the oldest open match that a matcher must hold: as far as any
        navigation reaches back, or, once the partition is known to have ``rows`` rows,
        as far as those that can land inside it (a PREV of more rows than the partition
        has is NULL from every row; holding the partition for it would only trip
        the buffer limit)."""
        return self.reach.back_within(rows) if complete else self.lookback


def held_columns(spec: MatchSpec) -> list[str] | None:
    """The input columns a partition's InputHolder must keep (None: all of them).

    ALL ROWS PER MATCH outputs every column; ONE ROW PER MATCH outputs the
    partition columns and measures, so only columns that DEFINE or MEASURES
    reference (and the WITHIN column) are needed. A reference that does not
    resolve to exactly one column keeps everything, so pruning never decides
    what an expression means.
    """
    if spec.rows_per_match.all_rows:
        return None
    names = [f.name for f in spec.columns]
    keep = set(spec.partition_by)
    if spec.within is not None:
        keep.update(spec.order_by[:1])
    exprs = list(spec.defines.values()) + [m.expr for m in spec.measures]
    for expr in exprs:
        for node in expr.find_all(exp.Column):
            if isinstance(node.this, exp.Star):
                continue
            name = node.name
            found = [name] if name in names else [c for c in names if c.lower() == name.lower()]
            if len(found) != 1:
                return None
            keep.add(found[0])
    return [n for n in names if n in keep]


# Rows one call of the thread VM consumes at most before the cancel flag is read again:
# with many live threads a row costs ~90 us under load, and 1,024 rows held an interrupt
# for up to 95 ms (no slower in throughput at 128: 2.71 s -> 2.55 s, the demo's A B+ C+).
_CHUNK_ROWS = 128


def compiled_query(spec: MatchSpec) -> CompiledQuery:
    """The compiled form of ``spec``, shared by all partitions of one query (kept in the
    spec's plan memo, so a spec made by ``dataclasses.replace`` compiles its own)."""
    query = spec.memo.get("reference")
    if query is None:
        query = spec.memo["reference"] = CompiledQuery(spec)
    return query


@state_class
class ReferenceMatcher:
    """Matches one partition; feed it batches in order, then call :meth:`finish`."""

    def __init__(
        self,
        spec: MatchSpec | CompiledQuery,
        partition_key: tuple = (),
        config: Config | None = None,
        cancel: Cancellation | None = None,
    ) -> None:
        self.cancel = cancel or Cancellation()
        self.query = spec if isinstance(spec, CompiledQuery) else compiled_query(spec)
        self.spec = self.query.spec
        self.partition_key = tuple(partition_key)
        self.config = config or Config()
        self.rows = InputHolder(self.spec.columns, self.query.columns)
        self.width = RowWidth(self.spec.columns)  # of the rows received, for the buffer limit
        self.output = OutputBuilder(
            self.spec, [m.fn for m in self.query.measures], self.cancel.check
        )
        self.all_ends = self.spec.all_ends
        self.with_unmatched = self.spec.with_unmatched
        self.match_number = 0  # number of the last reported match
        self.next_start = 0  # where the next match attempt starts
        self.attempt: Attempt | None = None
        self.position = 0  # the next row the current attempt consumes
        self.covered = -1  # last row that belongs to a reported match
        self.pending: deque[MatchRecord | UnmatchedRow] = deque()
        self._define_cache: dict[str, bool] = {}
        self._define_cache_row = -1
        # Running aggregates of DEFINE per history node of the current attempt.
        self._folds: dict = {}
        self.machine = Machine(
            self.query.closures, self._tests(), self.config.max_threads, all_ends=self.all_ends
        )
        self._within_column = (
            self.spec.order_by[0] if (self.spec.within is not None and self.spec.order_by) else None
        )

    # -- checkpoints ----------------------------------------------------------------------

    def __getstate__(self) -> dict:
        """The partition's data only: the DEFINE tests bound to its rows are closures
        (they do not pickle) and are bound again from the compiled query on restore, so a
        named continuous query on this path can be checkpointed."""
        state = dict(self.__dict__)
        state["_define_cache"] = {}
        state["_define_cache_row"] = -1
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.machine.bind(self._tests())

    # -- public API ---------------------------------------------------------------------

    @property
    def buffered_rows(self) -> int:
        """Tuples this partition's InputHolder needs right now."""
        return self.rows.held

    @property
    def live_threads(self) -> int:
        return len(self.attempt.threads) if self.attempt is not None else 0

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """Take the partition's next rows; return the output that became final."""
        if batch.num_rows:
            self.rows.append(batch)
            self.width.add(batch)
            self._run()
        return self._collect()

    def finish(self) -> list[pa.RecordBatch]:
        """The partition has ended: decide everything still open and return the rest."""
        self.rows.finish()
        self._run()
        return self._collect()

    def feed_final(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        return self.feed(batch) + self.finish()

    def observe(
        self,
        states: Sequence[StateSpec],
        label_state: Sequence[int],
        gate: CountingGate | None = None,
    ) -> bool:
        """The thread VM keeps no per-state counts: the adaptive switch falls back to
        window counts for reference partitions."""
        return False

    def state_counts(self) -> StateCounts:
        raise ExecutionError("internal error: state counts of a matcher that does not observe")

    # -- matching --------------------------------------------------------------------------

    def _tests(self) -> dict[str, Test | None]:
        """DEFINE of each pattern variable as the VM calls it (None: always true)."""
        tests: dict[str, Test | None] = {}
        for var in self.query.program.variables:
            fast = self.query.fast_defines.get(var)
            if fast is not None:
                tests[var] = fast.bind(self.rows)
            elif var in self.query.defines:
                tests[var] = partial(self._define, var)
            else:
                tests[var] = None
        return tests

    def _run(self) -> None:
        rows = self.rows
        count = rows.count  # neither changes while this runs
        complete = rows.complete
        # DEFINE's NEXT needs ``define_ahead`` rows that may not have arrived yet.
        limit = count if complete else count - self.query.define_ahead
        windowed = self._within_column is not None
        # An attempt may read at most the rows the buffer limit allows: a runaway one
        # stops there, not at the partition's end from every row. (The row width it
        # depends on changes only when a batch arrives, not while this runs.)
        cap = max_rows(self.config, self.width)
        machine = self.machine
        attempt = self.attempt
        check = self.cancel.check
        while True:
            check()  # once per attempt or per chunk of rows: an interrupt stops at once
            if attempt is None:
                start = self.next_start
                if start >= count:
                    break  # wait for the row to start at, or the partition is done
                self.position = start
                attempt = self.attempt = Attempt(machine, start)
            if attempt.threads:
                pos = self.position
                if pos < count:
                    if pos >= limit:
                        break
                    if pos - attempt.start >= cap:
                        self._too_many_rows(attempt.start)
                    if not windowed:
                        self.position = attempt.run(
                            pos, min(limit, pos + _CHUNK_ROWS, attempt.start + cap)
                        )
                    elif self._outside_window(attempt.start, pos):
                        attempt.kill()
                    else:
                        attempt.step(pos)
                        self.position = pos + 1
                    continue
                if not complete:
                    break
                attempt.end_of_partition(pos)
            self._decide(attempt)
            attempt = self.attempt = None
            if self.pending:
                # Output at once rather than at the end of the batch: a queue of
                # thousands of match records would be promoted to the garbage
                # collector's oldest generation and trigger full collections.
                self._emit_ready()
        self._emit_ready()
        self._collect_garbage()

    def _outside_window(self, start: int, row: int) -> bool:
        """True when consuming ``row`` would make the match span more than WITHIN."""
        if self._within_column is None:
            return False
        return outside(
            self.rows.value(start, self._within_column),
            self.rows.value(row, self._within_column),
            self.spec.within,
        )

    def _define(self, var: str, history: History, key: tuple, row: int) -> bool:
        """DEFINE of ``var`` at ``row`` for a thread with ``history`` (running semantics).

        The general evaluator, for DEFINEs outside :mod:`~matchsql.engine.defines`'
        subset. ``key`` is the thread's :class:`HistoryKey` summary, which lets
        ``A.x`` find the last A row without walking the history.
        """
        compiled = self.query.defines.get(var)
        if compiled is None:
            return True  # a variable without DEFINE is true
        attempt = self.attempt
        assert attempt is not None
        cacheable = compiled.history.empty
        if cacheable:
            if self._define_cache_row != row:
                self._define_cache.clear()
                self._define_cache_row = row
            hit = self._define_cache.get(var)
            if hit is not None:
                return hit
        labels = HistoryLabels(
            history,
            var,
            row,
            key,
            self.query.history_key,
            length=row - attempt.start + 1,
            folds=self._folds,
        )
        view = MatchView(self.rows, attempt.start, labels, row, self.match_number + 1)
        result = truth(compiled.fn(view)) is True  # a NULL condition is false
        if cacheable:
            self._define_cache[var] = result
        return result

    def _decide(self, attempt: Attempt) -> None:
        """The attempt has no live threads: report its match(es) and pick the next start."""
        self._define_cache_row = -1
        self._folds.clear()
        start = attempt.start
        best = attempt.best
        if best is None:
            if self.with_unmatched and start > self.covered:
                self.pending.append(UnmatchedRow(start))
            self.next_start = start + 1
            return
        found = [attempt.by_end[end] for end in sorted(attempt.by_end)] if self.all_ends else [best]
        for completion in found:
            history, end = completion.history, completion.end
            length = end - start + 1
            self.match_number += 1
            self.pending.append(
                MatchRecord(
                    start,
                    HistorySequence(history, length, 1),
                    HistorySequence(history, length, 2),
                    self.match_number,
                )
            )
            if end > self.covered:
                self.covered = end
        self.next_start = self._skip(start, best)

    def _skip(self, start: int, best: Completion) -> int:
        """AFTER MATCH SKIP relative to the preferred match of this start row."""
        mode = self.spec.skip
        if best.end < start:
            return start + 1  # an empty match always moves on by one row
        if mode is SkipMode.PAST_LAST_ROW:
            return best.end + 1
        if mode is SkipMode.TO_NEXT_ROW:
            return start + 1
        labels, _ = history_lists(best.history)
        wanted = self.query.skip_vars
        assert wanted is not None
        hits = [start + k for k, label in enumerate(labels) if label in wanted]
        where = "FIRST" if mode is SkipMode.TO_FIRST else "LAST"
        if not hits:
            raise ExecutionError(
                f"AFTER MATCH SKIP TO {where} {self.spec.skip_variable} failed: the pattern "
                f"variable is not present in the match starting at partition row {start + 1}"
            )
        target = hits[0] if mode is SkipMode.TO_FIRST else hits[-1]
        if target == start:
            raise ExecutionError(
                f"AFTER MATCH SKIP TO {where} {self.spec.skip_variable} failed: it would skip "
                f"to the first row of the match (partition row {start + 1}), which would "
                "find the same match again"
            )
        return target

    # -- output and memory ---------------------------------------------------------------

    def _emit_ready(self) -> None:
        """Build output for pending matches whose measures can be evaluated now."""
        rows = self.rows
        pending = self.pending
        # Measures' NEXT may need rows after the match's end that have not arrived.
        ready = rows.count - self.query.measure_ahead if not rows.complete else None
        add = self.output.add
        while pending:
            item = pending[0]
            if ready is not None and item.end >= ready:
                break
            pending.popleft()
            add(rows, item)

    def _collect(self) -> list[pa.RecordBatch]:
        return self.output.take()

    def _collect_garbage(self) -> None:
        keep = self.attempt.start if self.attempt is not None else self.next_start
        if self.pending:
            keep = min(keep, self.pending[0].start)
        back = self.query.lookback_for(self.rows.count, self.rows.complete)
        self.rows.drop_before(keep - back)
        check_held(self.config, self.width, self.rows.held, keep, back)

    def _too_many_rows(self, start: int) -> None:
        raise too_many_rows(self.config, self.width, start)
