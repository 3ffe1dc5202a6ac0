"""Many whole partitions of one sorted batch matched in one pass.

With many short partitions the per-partition matcher (:mod:`.compiled_matcher`) spends
most of its time in the Python and Arrow calls around the kernel: building a
buffer, evaluating the DEFINE terms, computing the measures, one output batch
each, for a partition of a few thousand rows. Every partition that starts and
ends inside a batch the router received is complete, so nothing about it has
to be resumable: :class:`WholePartitions` evaluates the terms once over all of
them (``PREV``/``NEXT`` stopped at partition edges, :class:`.rowlocal.PartitionEdges`),
runs the kernel over each partition's slice of those arrays, and computes the
measures once over all their matches. Only the partition a batch starts in the
middle of and the one it ends in still go through a :class:`.CompiledMatcher`.
Which partitions come here together, and how their output goes back, is the
routers' and workers' one rule: :mod:`matchsql.execution.router.partition_batches`.

The rows are the per-partition matcher's: the kernel runs with the same
parameters over the same rows (a complete partition, base 0), and the
measures this applies to read only rows inside their match (no ``PREV``/
``NEXT`` in MEASURES, which could cross into the next partition here).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
from numba.core.dispatcher import Dispatcher

from matchsql.config import Config
from matchsql.engine.buffer_limit import RowWidth, row_width
from matchsql.engine.compiled import dfa as D
from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled import prefilter as P
from matchsql.engine.compiled.chunks import COPY_LABELS
from matchsql.engine.compiled.compiled_matcher import (
    LABEL_BLOCK,
    NO_WITHIN,
    CompiledPlan,
    kernel_params,
    label_input,
    raise_status,
    register_columns,
)
from matchsql.engine.compiled.match_arrays import Matches, Rows
from matchsql.engine.compiled.measures import expansion, output_batch
from matchsql.engine.compiled.partition_loop import NEED_SPACE, driver, next_partition
from matchsql.engine.compiled.rowlocal import EDGES, PartitionEdges
from matchsql.plan.row_functions import Navigation
from matchsql.plan.spec import RowsPerMatch
from matchsql.runtime.cancel import Cancellation


def unsupported(plan: CompiledPlan) -> str | None:
    """Why ``plan``'s partitions cannot be matched as a batch, or None when they can."""
    if plan.within is not None:
        return "WITHIN is measured per partition"
    if plan.measures is None:
        return "output is built per row or per match"
    if plan.spec.rows_per_match is RowsPerMatch.ALL_WITH_UNMATCHED:
        return "unmatched rows are output"
    for measure in plan.spec.measures:
        if any(n.physical for n in measure.expr.find_all(Navigation)):
            return "a measure reads PREV/NEXT rows, which may lie in another partition"
    return None


class WholePartitions:
    """Matches complete partitions of a batch together; see the module docstring."""

    def __init__(self, plan: CompiledPlan, config: Config) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.config = config
        self.dfa = D.for_matcher(plan, config)[0]
        assert plan.measures is not None  # see unsupported()
        self.measures: list[Callable[..., pa.Array]] = plan.measures
        nv = len(plan.variables)
        self.skip_mask = np.zeros(max(nv, 1), np.uint8)
        for v in plan.query.skip_vars or ():
            self.skip_mask[plan.variables.index(v)] = 1
        (self.code, self.consts, self.spans, self.set_mask, self.obs_last, self.obs_first) = (
            plan.registers.arrays()
        )
        # Workspace capacities: each call allocates its own workspace (calls may run on
        # several threads at once), starting at the largest size a call needed so far.
        self.caps = np.array([64, 512, 256, 4096, 4096, 16384], np.int64)
        self.no_stats = (np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros((4, 1), np.int64))
        self._kernel: Dispatcher | None = None  # the thread VM variant (attempts_kernel)

    def match(
        self, batch: pa.RecordBatch, bounds: np.ndarray, cancel: Cancellation | None = None
    ) -> list[pa.RecordBatch]:
        """The output of the complete partitions ``batch[bounds[i]:bounds[i + 1]]``.

        ``bounds`` starts at 0 and ends at ``batch.num_rows``. Calls for several
        statements may share this object: the statement's ``cancel`` comes per call.
        """
        return self.match_counted(batch, bounds, cancel)[0]

    def match_counted(
        self, batch: pa.RecordBatch, bounds: np.ndarray, cancel: Cancellation | None = None
    ) -> tuple[list[pa.RecordBatch], np.ndarray]:
        """:meth:`match`, and how many of its output rows each partition has (one row per
        match, partition after partition): a worker hands its partitions' matches back
        by these counts rather than finding each one's rows by its key again (the
        routers and workers call this, :mod:`matchsql.execution.router.partition_batches`)."""
        cancel = cancel or Cancellation()
        flag = cancel.flag
        n = batch.num_rows
        parts = max(len(bounds) - 1, 0)
        found = np.zeros(parts, np.int64)  # matches per partition
        if n == 0:
            return [], found
        plan = self.plan
        columns: dict = {name: batch.column(name) for name in batch.schema.names}
        columns[EDGES] = PartitionEdges(bounds)
        labels = label_input(plan, self.dfa, columns, n)
        cols, valid = register_columns(plan, columns, n)
        viable = (
            P.viable_starts(plan, labels, 0, cols, valid, bounds) if self.dfa is None else P.NONE
        )
        if len(viable):
            # Each partition's row 0 runs (``^``). Its last row's verdict, made with the
            # next partition's first row, is never read: the kernel reads ``viable`` only
            # where the next row is in the rows it was given.
            viable[bounds[:-1]] = 1
        caps = self.caps.copy()
        work = _threads(caps, len(plan.program), len(plan.variables))
        width = row_width(batch)  # the batch's partitions' mean row, for the buffer limit
        params = kernel_params(self.spec, self.config, width)
        params[K.K_BASE] = 0
        params[K.K_COMPLETE] = 1
        conj = plan.registers.conjunct_table()
        if self._kernel is None and self.dfa is None:  # the same for every batch: chosen once
            self._kernel = K.attempts_kernel(
                plan.program,
                conj[0],
                self.code,
                params,
                self.no_stats[0],
                NO_WITHIN,
                self.obs_last | self.obs_first,
            )
        out = _Output(caps, cancel.check)
        args = (
            plan,
            labels,
            viable,
            cols,
            valid,
            bounds,
            params,
            caps,
            work,
            out,
            found,
            flag,
            width,
        )
        if self.dfa is not None:
            self._run_dfa(*args)
        else:
            self._run_kernel(*args)
        if not out.records_used:
            return [], found
        cancel.check()
        rows = Rows(pa.Table.from_batches([batch]), 0, batch.num_rows, True)
        matches = out.matches()
        if not self.spec.rows_per_match.all_rows:  # a row per match
            return [output_batch(self.spec, self.measures, matches, rows)], found
        # ALL ROWS PER MATCH: a row per matched row, output in blocks of about LABEL_BLOCK
        # rows with the cancellation checked between (SKIP TO NEXT ROW makes hundreds of
        # millions of them out of one batch).
        part_of = np.repeat(np.arange(parts), found)
        counts = np.zeros(parts, np.int64)
        outputs = []
        ends = matches.offsets + matches.lengths
        first = 0
        while first < len(part_of):
            cancel.check()
            stop = max(
                first + 1, int(np.searchsorted(ends, matches.offsets[first] + LABEL_BLOCK, "right"))
            )
            block = matches if first == 0 and stop >= len(part_of) else _block(matches, first, stop)
            expanded = expansion(self.spec, block)
            counts += np.bincount(part_of[first:stop][expanded.match], minlength=parts)
            outputs.append(output_batch(self.spec, self.measures, block, rows, expanded))
            first = stop
        return outputs, counts

    def _run_dfa(
        self,
        plan: CompiledPlan,
        labels: np.ndarray,
        viable: np.ndarray,
        cols: np.ndarray,
        valid: np.ndarray,
        bounds: np.ndarray,
        params: np.ndarray,
        caps: np.ndarray,
        work: tuple[np.ndarray, ...],
        out: _Output,
        found: np.ndarray,
        flag: np.ndarray,
        width: RowWidth,
    ) -> None:
        """Every partition through the DFA in one compiled loop (:func:`.dfa.dfa_partitions`),
        which comes back here only to grow the output or to raise an error."""
        assert self.dfa is not None
        next_partition(params)
        part = 0
        parts = len(bounds) - 1
        while part < parts:
            out.free(caps)
            status, nxt, mn, covered, err_row, part, out.records_used, out.labels_used = (
                D.run_partitions(
                    self.dfa,
                    labels,
                    self.skip_mask,
                    params,
                    out.records,
                    out.labels,
                    flag,
                    bounds,
                    part,
                    out.records_used,
                    out.labels_used,
                    found,
                )
            )
            if status == K.ST_FULL:
                self._grow(params, caps, nxt, mn, covered, int(err_row))
            elif status >= K.ST_THREADS:
                raise_status(self.spec, self.config, width, int(status), int(err_row))

    def _run_kernel(
        self,
        plan: CompiledPlan,
        labels: np.ndarray,
        viable: np.ndarray,
        cols: np.ndarray,
        valid: np.ndarray,
        bounds: np.ndarray,
        params: np.ndarray,
        caps: np.ndarray,
        work: tuple[np.ndarray, ...],
        out: _Output,
        found: np.ndarray,
        flag: np.ndarray,
        width: RowWidth,
    ) -> None:
        """Every partition through the kernel, in the compiled loop
        (:mod:`.partition_loop`), which comes back here only to grow an array or to
        raise an error."""
        assert self._kernel is not None
        drive = driver(self._kernel)
        conj = plan.registers.conjunct_table()
        next_partition(params)
        part = 0
        parts = len(bounds) - 1
        while part < parts:
            out.free(caps)
            status, nxt, mn, covered, err_row, part, out.records_used, out.labels_used = drive(
                plan.program,
                labels,
                viable,
                NO_WITHIN,
                self.code,
                self.consts,
                self.spans,
                *conj,
                cols,
                valid,
                self.set_mask,
                self.obs_last,
                self.obs_first,
                self.skip_mask,
                params,
                *self.no_stats,
                *work,
                out.records,
                out.labels,
                flag,
                bounds,
                part,
                out.records_used,
                out.labels_used,
                caps[K.W_RECORDS],
                caps[K.W_LABELS],
                found,
            )
            if status == NEED_SPACE:
                continue
            if status == K.ST_FULL:
                self._grow(params, caps, nxt, mn, covered, err_row)
                if err_row < K.W_RECORDS:
                    work = _threads(caps, len(plan.program), len(plan.variables))
            elif status >= K.ST_THREADS:
                raise_status(self.spec, self.config, width, status, err_row)

    def _grow(
        self, params: np.ndarray, caps: np.ndarray, nxt: int, mn: int, covered: int, full: int
    ) -> None:
        """After ``K.ST_FULL``: resume the partition where the call stopped, with twice
        the room in the array ``full`` ran out of (kept for the next batches too)."""
        params[K.K_NEXT] = nxt
        params[K.K_MN] = mn
        params[K.K_COVERED] = covered
        caps[full] *= 2
        self.caps = np.maximum(self.caps, caps)


def _block(m: Matches, first: int, stop: int) -> Matches:
    """Matches ``first:stop`` of ``m`` (label offsets from the block's first label)."""
    lo = int(m.offsets[first])
    hi = int(m.offsets[stop - 1] + m.lengths[stop - 1])
    return Matches(
        m.starts[first:stop],
        m.lengths[first:stop],
        m.numbers[first:stop],
        m.labels[lo:hi],
        m.offsets[first:stop] - lo,
        None if m.excluded is None else m.excluded[lo:hi],
    )


def _threads(caps: np.ndarray, n_prog: int, n_vars: int) -> tuple[np.ndarray, ...]:
    """The kernel's working arrays but its outputs (:class:`_Output` holds those)."""
    sized = caps.copy()
    sized[K.W_RECORDS :] = 1
    return K.workspace(sized, n_prog, n_vars)[:-2]


class _Output:
    """The matches of a batch's partitions, written by the kernel straight into one growing
    pair of arrays (each call gets a view of their free end): no copy per partition.

    The kernel's rows and label offsets are relative to its call: each call's are
    shifted once at the end, for all calls together (:meth:`wrote` lists them), or by the
    compiled loop as it writes them (:mod:`.partition_loop`, which lists none).
    """

    def __init__(self, caps: np.ndarray, check: Callable[[], None] | None = None) -> None:
        self.check = check  # the statement's cancellation check, between copies when growing
        self.records = np.zeros((int(caps[K.W_RECORDS]), 5), np.int64)
        self.labels = np.zeros(int(caps[K.W_LABELS]), np.int16)
        self.records_used = 0
        self.labels_used = 0
        # per call that wrote records: how many, its partition's first row, its labels' start
        self.calls: list[tuple[int, int, int]] = []

    def free(self, caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Views of at least ``caps`` free records and labels, growing the arrays first."""
        need = self.records_used + int(caps[K.W_RECORDS])
        if need > len(self.records):
            grown = np.zeros((max(need, 2 * len(self.records)), 5), np.int64)
            grown[: self.records_used] = self.records[: self.records_used]
            self.records = grown
        need = self.labels_used + int(caps[K.W_LABELS])
        if need > len(self.labels):
            # Under SKIP TO NEXT ROW a batch's labels reach hundreds of millions: copied in
            # slices (one copy held an interrupt for 180 ms), the zeros mapped lazily.
            labels = np.zeros(max(need, 2 * len(self.labels)), np.int16)
            for lo in range(0, self.labels_used, COPY_LABELS):
                if self.check is not None:
                    self.check()
                hi = min(lo + COPY_LABELS, self.labels_used)
                labels[lo:hi] = self.labels[lo:hi]
            self.labels = labels
        return self.records[self.records_used :], self.labels[self.labels_used :]

    def wrote(self, n_rec: int, n_lab: int, first_row: int) -> None:
        if n_rec:
            self.calls.append((n_rec, first_row, self.labels_used))
        self.records_used += n_rec
        self.labels_used += n_lab

    def matches(self) -> Matches:
        records = self.records[: self.records_used]
        if not self.calls:  # the compiled loop's (partition_loop), shifted as written
            return _CodedMatches(
                records[:, 1].copy(),
                records[:, 2].copy(),
                records[:, 3].copy(),
                self.labels[: self.labels_used],
                records[:, 4].copy(),
            )
        counts, firsts, label_starts = (np.array(c, np.int64) for c in zip(*self.calls))
        return _CodedMatches(
            records[:, 1] + np.repeat(firsts, counts),
            records[:, 2].copy(),
            records[:, 3].copy(),
            self.labels[: self.labels_used],
            records[:, 4] + np.repeat(label_starts, counts),
        )


class _CodedMatches(Matches):
    """Matches whose labels stay the kernel's codes (variable * 2 + excluded) until a
    measure reads them: most ONE ROW PER MATCH measures (MATCH_NUMBER, a column of the
    last row, COUNT(*)) never do, and decoding is a pass over every matched row."""

    def __init__(
        self,
        starts: np.ndarray,
        lengths: np.ndarray,
        numbers: np.ndarray,
        codes: np.ndarray,
        offsets: np.ndarray,
    ) -> None:
        self.starts, self.lengths, self.numbers, self.offsets = starts, lengths, numbers, offsets
        self._codes = codes
        self._labels: np.ndarray | None = None
        self._excluded: np.ndarray | None = None

    # Matches' fields, decoded from the codes when first read
    @property
    def labels(self) -> np.ndarray:  # type: ignore[override]
        if self._labels is None:
            self._labels = (self._codes >> 1).astype(np.int64)
        return self._labels

    @property
    def excluded(self) -> np.ndarray:  # type: ignore[override]
        if self._excluded is None:
            self._excluded = (self._codes & 1).astype(bool)
        return self._excluded
