"""Many whole partitions of one sorted batch matched in one pass.

With many short partitions the per-partition matcher (:mod:`.matcher`) spends
most of its time in the Python and Arrow calls around the kernel: building a
buffer, evaluating the DEFINE terms, computing the measures, one output batch
each, for a partition of a few thousand rows. Every partition that starts and
ends inside a batch the router received is complete, so nothing about it has
to be resumable: :class:`WholePartitions` evaluates the terms once over all of
them (``PREV``/``NEXT`` stopped at partition edges, :class:`.rowlocal.PartitionEdges`),
runs the kernel over each partition's slice of those arrays, and computes the
measures once over all their matches. Only the partition a batch starts in the
middle of and the one it ends in still go through a :class:`.CompiledMatcher`.

The rows are the per-partition matcher's: the kernel runs with the same
parameters over the same rows (a complete partition, base 0), and the
measures this applies to read only rows inside their match (no ``PREV``/
``NEXT`` in MEASURES, which could cross into the next partition here).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba.core.dispatcher import Dispatcher

from matchsql.cancel import Cancellation
from matchsql.config import Config
from matchsql.fsm.compiled import dfa as D
from matchsql.fsm.compiled import kernel as K
from matchsql.fsm.compiled import prefilter as P
from matchsql.fsm.compiled.match_arrays import Matches, Rows
from matchsql.fsm.compiled.matcher import (
    NO_WITHIN,
    CompiledPlan,
    kernel_params,
    label_input,
    raise_status,
    register_columns,
)
from matchsql.fsm.compiled.measures import output_batch
from matchsql.fsm.compiled.rowlocal import EDGES, PartitionEdges
from matchsql.plan.row_functions import Navigation
from matchsql.plan.spec import RowsPerMatch


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
        nv = len(plan.variables)
        self.skip_mask = np.zeros(max(nv, 1), np.uint8)
        for v in plan.query.skip_vars or ():
            self.skip_mask[plan.variables.index(v)] = 1
        (self.code, self.consts, self.spans, self.set_mask, self.obs_last,
         self.obs_first) = plan.registers.arrays()
        # Workspace capacities: each call allocates its own workspace (calls may run on
        # several threads at once), starting at the largest size a call needed so far.
        self.caps = np.array([64, 512, 256, 4096, 4096, 16384], np.int64)
        self.no_stats = (np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros((4, 1), np.int64))
        self._kernel: Dispatcher | None = None  # the thread VM variant (attempts_kernel)

    def match(self, batch: pa.RecordBatch, bounds: np.ndarray,
              cancel: Cancellation | None = None) -> list[pa.RecordBatch]:
        """The output of the complete partitions ``batch[bounds[i]:bounds[i + 1]]``.

        ``bounds`` starts at 0 and ends at ``batch.num_rows``. Calls for several
        statements may share this object: the statement's ``cancel`` comes per call.
        """
        cancel = cancel or Cancellation()
        flag = cancel.flag
        n = batch.num_rows
        if n == 0:
            return []
        plan = self.plan
        columns: dict = {name: batch.column(name) for name in batch.schema.names}
        columns[EDGES] = PartitionEdges(bounds)
        labels = label_input(plan, self.dfa, columns, n)
        cols, valid = register_columns(plan, columns, n)
        viable = P.viable_starts(plan, labels, 0, cols, valid, bounds) \
            if self.dfa is None else P.NONE
        if len(viable):
            # Each partition's row 0 runs (``^``). Its last row's verdict, made with the
            # next partition's first row, is never read: the kernel reads ``viable`` only
            # where the next row is in the rows it was given.
            viable[bounds[:-1]] = 1
        caps = self.caps.copy()
        work = K.workspace(caps, len(plan.program), len(plan.variables))
        params = kernel_params(self.spec, self.config)
        params[K.K_BASE] = 0
        params[K.K_COMPLETE] = 1
        conj = plan.registers.conjunct_table()
        if self._kernel is None:  # its arguments are the same for every batch: chosen once
            self._kernel = K.attempts_kernel(plan.program, conj[0], self.code, params,
                                             self.no_stats[0], NO_WITHIN,
                                             self.obs_last | self.obs_first)
        kernel = self._kernel
        pieces: list[tuple[np.ndarray, np.ndarray]] = []
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            rows = b - a
            params[K.K_ROWS] = rows
            params[K.K_LIMIT] = rows
            params[K.K_NEXT] = 0
            params[K.K_MN] = 0
            params[K.K_COVERED] = -1
            part_cols = cols if cols.shape[1] == 1 else np.ascontiguousarray(cols[:, a:b])
            part_valid = valid if valid.shape[1] == 1 else np.ascontiguousarray(valid[:, a:b])
            while True:
                if self.dfa is not None:
                    status, nxt, mn, covered, err_row, n_rec, n_lab = D.run(
                        self.dfa, labels[a:b], self.skip_mask, params, work[-2], work[-1], flag)
                else:
                    status, nxt, mn, covered, err_row, n_rec, n_lab = kernel(
                        plan.program, labels[a:b], viable[a:b] if len(viable) else viable,
                        NO_WITHIN, self.code, self.consts, self.spans, *conj,
                        part_cols, part_valid, self.set_mask, self.obs_last, self.obs_first,
                        self.skip_mask, params, *self.no_stats, *work, flag)
                if n_rec:
                    records = work[-2][:n_rec].copy()
                    records[:, 1] += a
                    pieces.append((records, work[-1][:n_lab].copy()))
                if status != K.ST_FULL:
                    break
                params[K.K_NEXT] = nxt
                params[K.K_MN] = mn
                params[K.K_COVERED] = covered
                caps[int(err_row)] *= 2
                work = K.workspace(caps, len(plan.program), len(plan.variables))
                self.caps = np.maximum(self.caps, caps)
            if status >= K.ST_THREADS:
                raise_status(self.spec, self.config, int(status), int(err_row))
        if not pieces:
            return []
        return [self._output(batch, pieces, cancel)]

    def _output(self, batch: pa.RecordBatch, pieces: list[tuple[np.ndarray, np.ndarray]],
                cancel: Cancellation) -> pa.RecordBatch:
        records = np.concatenate([r for r, _ in pieces])
        shift = np.cumsum([0] + [len(lab) for _, lab in pieces[:-1]])
        offsets = np.concatenate([r[:, 4] + s for (r, _), s in zip(pieces, shift)])
        # Long matches under SKIP TO NEXT ROW hold labels quadratic in the rows: split
        # per partition (label codes are variable * 2 + excluded), the interrupt polled
        # between partitions rather than after one pass over them all.
        labels, excluded = [], []
        for _, lab in pieces:
            cancel.check()
            labels.append((lab >> 1).astype(np.int64))
            excluded.append((lab & 1).astype(bool))
        matches = Matches(starts=records[:, 1].copy(), lengths=records[:, 2].copy(),
                          numbers=records[:, 3].copy(), labels=np.concatenate(labels),
                          offsets=offsets, excluded=np.concatenate(excluded))
        cancel.check()
        rows = Rows(pa.Table.from_batches([batch]), 0, batch.num_rows, True)
        return output_batch(self.spec, self.plan.measures, matches, rows)
