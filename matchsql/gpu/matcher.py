"""One partition's run on the GPU column path (the :class:`~matchsql.fsm.matcher.Matcher`
contract).

CDP's "delay until the terminator": rows are held until the partition ends
(``finish``), then processed in one pass: the row-local DEFINE terms become a
per-variable truth table, copied to the device; :func:`matchsql.gpu.kernels.walk`
decides every candidate start at once; the sequential SKIP rule picks the
starts the CPU paths attempt (:mod:`matchsql.gpu.skip`); a second launch over
those writes the matches' labels; the measures are the CPU paths' column-wise
code (:func:`matchsql.fsm.compiled.measures.output_batch`).

Where the device cannot decide a kept start (its stack or step budget ran
out even after growing the stack), or the partition is too small for the
device to pay under ``gpu = 'auto'``, the partition runs on the compiled CPU
matcher instead; both give the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from numba import cuda

from matchsql.cancel import Cancellation
from matchsql.config import Config
from matchsql.errors import ExecutionError
from matchsql.fsm.compiled.kernel import K_SKIP, ST_DONE, ST_SPAN
from matchsql.fsm.compiled.match_arrays import Matches, Rows
from matchsql.fsm.compiled.matcher import (
    CompiledMatcher,
    CompiledPlan,
    kernel_params,
    label_input,
    raise_status,
)
from matchsql.fsm.compiled.measures import output_batch
from matchsql.fsm.matcher import StateCounts
from matchsql.fsm.states import StateSpec
from matchsql.gpu import kernels as G
from matchsql.gpu import skip as S
from matchsql.gpu.plan import work

THREADS_PER_BLOCK = 128
STACK_FRAMES = 64  # first stack size per thread; doubled for the starts that need more
MAX_STACK_FRAMES = 1 << 16
STACK_BYTES = 1 << 28  # device memory for stacks at once: starts run in chunks under it


class GpuMatcher:
    """One partition on the GPU path; see the module docstring."""

    def __init__(self, plan: CompiledPlan, partition_key: tuple = (),
                 config: Config | None = None, cancel: Cancellation | None = None,
                 min_work: int = 0) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.key = tuple(partition_key)
        self.config = config or Config()
        self.cancel = cancel or Cancellation()
        self.min_work = min_work
        self.batches: list[pa.RecordBatch] = []
        self.count = 0
        self.complete = False
        self.skip_mask = np.zeros(max(len(plan.variables), 1), np.uint8)
        for v in plan.query.skip_vars or ():
            self.skip_mask[plan.variables.index(v)] = 1
        #: Which device ran the partition (for tests and the benchmark): 'gpu' or 'cpu'.
        self.ran_on = ""

    @property
    def buffered_rows(self) -> int:
        return self.count if not self.complete else 0

    def observe(self, states: Sequence[StateSpec], label_state: Sequence[int]) -> bool:
        return False  # the device keeps no per-state statistics

    def state_counts(self) -> StateCounts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0, 0, 0

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if self.complete:
            raise ExecutionError("internal error: rows fed after the partition finished")
        if batch.num_rows:
            self.batches.append(batch)
            self.count += batch.num_rows
        return []

    def feed_final(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        self.feed(batch)
        return self.finish()

    def finish(self) -> list[pa.RecordBatch]:
        self.complete = True
        table = pa.Table.from_batches(self.batches, schema=self.spec.columns).combine_chunks()
        self.batches = []
        n = table.num_rows
        if n == 0:
            return []
        if work(n, self.config) < self.min_work:
            return self._on_cpu(table)
        out = self._on_device(table)
        return self._on_cpu(table) if out is None else out

    # -- the two routes ------------------------------------------------------------------

    def _on_cpu(self, table: pa.Table) -> list[pa.RecordBatch]:
        self.ran_on = "cpu"
        cpu = CompiledMatcher(self.plan, self.key, self.config, self.cancel)
        out: list[pa.RecordBatch] = []
        for batch in table.to_batches():
            out += cpu.feed(batch)
        return out + cpu.finish()

    def _on_device(self, table: pa.Table) -> list[pa.RecordBatch] | None:
        """The partition's output, or None where the device could not decide it."""
        plan = self.plan
        n = table.num_rows
        columns = {name: table.column(name).chunk(0) for name in table.column_names}
        truth = label_input(plan, None, columns, n)
        prog = cuda.to_device(plan.program)
        rl = cuda.to_device(np.ascontiguousarray(truth))
        mask = cuda.to_device(self.skip_mask)
        ends, firsts, lasts, status = decide(prog, rl, mask, np.arange(n, dtype=np.int64), n,
                                             self.config)
        self.cancel.check()
        skip_mode = int(kernel_params(self.spec, self.config)[K_SKIP])
        st, row, kept = S.resolve(ends, firsts, lasts, status, skip_mode)
        if st == S.ST_RETRY:
            return None
        if st != ST_DONE:
            raise_status(self.spec, self.config, ST_SPAN if st == ST_SPAN else int(st), int(row))
        self.ran_on = "gpu"
        if not len(kept):
            return []
        lengths = np.maximum(ends[kept] - kept + 1, 0)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        codes = labels_of(prog, rl, mask, kept, n, lengths, offsets, self.config)
        matches = Matches(starts=kept.copy(), lengths=lengths.astype(np.int64),
                          numbers=np.arange(1, len(kept) + 1, dtype=np.int64),
                          labels=codes // 2, offsets=offsets,
                          excluded=(codes & 1).astype(bool))
        return [output_batch(self.spec, plan.measures, matches, Rows(table, 0, n, True))]


def _launch(prog, rl, mask, starts: np.ndarray, n: int, config: Config, frames: int,
            labels, label_off, write: bool) -> tuple[np.ndarray, ...]:
    m = len(starts)
    stack = cuda.device_array((m, frames, G.FRAME), np.int64)
    out = [cuda.device_array(m, np.int64) for _ in range(4)]
    # A block no wider than the starts: the simulator runs every thread of a block.
    width = max(1, min(THREADS_PER_BLOCK, m))
    blocks = (m + width - 1) // width
    max_steps = max(1 << 20, 64 * min(n, config.max_buffered_rows + 1))
    G.walk[blocks, width](prog, rl, mask, cuda.to_device(starts), n,
                                      config.max_buffered_rows, max_steps, stack, *out,
                                      labels, label_off, write)
    return tuple(a.copy_to_host() for a in out)


def decide(prog, rl, mask, starts: np.ndarray, n: int, config: Config,
           labels=None, label_off=None) -> tuple[np.ndarray, ...]:
    """``(ends, firsts, lasts, status)`` of every start, in chunks that keep the stacks
    under :data:`STACK_BYTES`, growing the stack of the starts that ran out of it."""
    ends = np.full(len(starts), G.NO_MATCH, np.int64)
    firsts = np.full(len(starts), -1, np.int64)
    lasts = np.full(len(starts), -1, np.int64)
    status = np.zeros(len(starts), np.int64)
    todo = np.arange(len(starts))
    frames = STACK_FRAMES
    write = labels is not None
    dummy = cuda.device_array(1, np.int64)
    while len(todo):
        chunk = max(1, STACK_BYTES // (frames * G.FRAME * 8))
        for a in range(0, len(todo), chunk):
            idx = todo[a:a + chunk]
            off = cuda.to_device(label_off[idx]) if write else dummy
            e, f, la, st = _launch(prog, rl, mask, starts[idx], n, config, frames,
                                   labels if write else dummy, off, write)
            ends[idx], firsts[idx], lasts[idx], status[idx] = e, f, la, st
        todo = todo[status[todo] == G.S_STACK]
        if frames >= MAX_STACK_FRAMES:
            status[todo] = G.S_STEPS
            break
        frames *= 2
    return ends, firsts, lasts, status


def labels_of(prog, rl, mask, kept: np.ndarray, n: int, lengths: np.ndarray,
              offsets: np.ndarray, config: Config) -> np.ndarray:
    """The label codes (variable * 2 + excluded) of the kept starts' matches."""
    total = int(lengths.sum())
    labels = cuda.device_array(max(total, 1), np.int64)
    decide(prog, rl, mask, kept, n, config, labels, offsets)
    return labels.copy_to_host()[:total].astype(np.int64)
