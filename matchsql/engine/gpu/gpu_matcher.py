"""One partition's run on the GPU column path (the :class:`~matchsql.engine.matcher.Matcher`
contract).

CDP's "delay until the terminator": rows are held until the partition ends
(``finish``), then processed in one pass: the columns the DEFINE terms read are
copied to the device, where the row-local terms become one truth column per
variable (:mod:`matchsql.engine.gpu.columns`); :func:`matchsql.engine.gpu.kernels.walk`
decides every candidate start at once, evaluating the terms that read other
rows of the match in-thread; the sequential SKIP rule picks the
starts the CPU paths attempt (:mod:`matchsql.engine.gpu.skip`); a second launch over
those writes the matches' labels; the measures are the CPU paths' column-wise
code (:func:`matchsql.engine.compiled.measures.output_batch`). Under ALL MATCHES /
INCREMENTAL the walks keep every end of an attempt: the first launch counts
each start's matches and label rows, an exclusive scan over the kept starts'
counts gives each its slots, and the second launch writes them
(:mod:`matchsql.engine.gpu.selection` orders them as the CPU paths do); WITH
UNMATCHED ROWS comes from the SKIP scan.

Where the device cannot decide a kept start (its stack or step budget ran
out even after growing the stack), or the partition is too small for the
device to pay under ``gpu = 'auto'``, the partition runs on the compiled CPU
matcher instead; both give the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from numba import cuda

from matchsql.config import Config
from matchsql.engine.buffer_limit import RowWidth, max_rows, row_width
from matchsql.engine.compiled.compiled_matcher import (
    CompiledMatcher,
    CompiledPlan,
    kernel_params,
    raise_status,
    register_columns,
)
from matchsql.engine.compiled.kernel import K_SKIP, ST_DONE, ST_SPAN
from matchsql.engine.compiled.match_arrays import Matches, Rows
from matchsql.engine.compiled.measures import output_batch
from matchsql.engine.compiled.within import within_ends
from matchsql.engine.gpu import kernels as G
from matchsql.engine.gpu import selection
from matchsql.engine.gpu import skip as S
from matchsql.engine.gpu.columns import Columns, device_columns, truth
from matchsql.engine.gpu.device import array_module, to_kernel
from matchsql.engine.gpu.gpu_plan import gpu_plan, work
from matchsql.engine.gpu.timing import D2H, H2D, KERNEL, timed
from matchsql.engine.matcher import CountingGate, StateCounts
from matchsql.engine.states import StateSpec
from matchsql.errors import ExecutionError
from matchsql.runtime.cancel import Cancellation
from matchsql.saved_state.state_format import state_class

THREADS_PER_BLOCK = 128
STACK_FRAMES = 64  # first stack size per thread; doubled for the starts that need more
MAX_STACK_FRAMES = 1 << 16
STACK_BYTES = 1 << 28  # device memory for stacks at once: starts run in chunks under it
#: A device array (numba's, or the simulator's stand-in): numba's names are untyped.
DeviceArray = Any


class DeviceStatistics:
    """The :class:`~matchsql.engine.matcher.Matcher` statistics of the GPU matchers: none
    (the device keeps no per-state counts, so Go4Risk statistics stay on the CPU paths)."""

    def observe(
        self,
        states: Sequence[StateSpec],
        label_state: Sequence[int],
        gate: CountingGate | None = None,
    ) -> bool:
        return False

    def state_counts(self) -> StateCounts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0, 0, 0


@state_class
class GpuMatcher(DeviceStatistics):
    """One partition on the GPU path; see the module docstring."""

    def __init__(
        self,
        plan: CompiledPlan,
        partition_key: tuple = (),
        config: Config | None = None,
        cancel: Cancellation | None = None,
        min_work: int = 0,
    ) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.key = tuple(partition_key)
        self.config = config or Config()
        self.cancel = cancel or Cancellation()
        self.min_work = min_work
        self.batches: list[pa.RecordBatch] = []
        self.count = 0
        self.complete = False
        #: Which device ran the partition (for tests and the benchmark): 'gpu' or 'cpu'.
        self.ran_on = ""

    @property
    def buffered_rows(self) -> int:
        return self.count if not self.complete else 0

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
        width = row_width(table)
        if work(n, self.config, width) < self.min_work:
            return self._on_cpu(table)
        out = self._on_device(table, width)
        return self._on_cpu(table) if out is None else out

    # -- the two routes ------------------------------------------------------------------

    def _on_cpu(self, table: pa.Table) -> list[pa.RecordBatch]:
        self.ran_on = "cpu"
        cpu = CompiledMatcher(self.plan, self.key, self.config, self.cancel)
        out: list[pa.RecordBatch] = []
        for batch in table.to_batches():
            out += cpu.feed(batch)
        return out + cpu.finish()

    def _on_device(self, table: pa.Table, width: RowWidth) -> list[pa.RecordBatch] | None:
        """The partition's output, or None where the device could not decide it."""
        n = table.num_rows
        inp = device_input(
            self.plan,
            table,
            0,
            n,
            n,
            True,
            within_ends(self.spec, self.plan.within, table.column(self.spec.order_by[0]).chunk(0))
            if self.plan.within is not None
            else None,
            span=max_rows(self.config, width),
        )
        ends, firsts, lasts, status, counts, totals, his = decide(
            inp, np.arange(n, dtype=np.int64), self.config
        )
        self.cancel.check()
        skip_mode = int(kernel_params(self.spec, self.config, width)[K_SKIP])
        st, row, kept, lone = S.resolve(
            ends, firsts, lasts, status, his, skip_mode, self.spec.with_unmatched, 0, -1
        )
        if st == S.ST_RETRY:
            return None
        if st != ST_DONE:
            raise_status(
                self.spec, self.config, width, ST_SPAN if st == ST_SPAN else int(st), int(row)
            )
        if inp.each and len(kept):
            matches = every_match(inp, kept, counts, totals, self.config, 0)
            if matches is None:
                return None
        else:
            matches = matches_of(inp, kept, ends, self.config, 0)
        matches = selection.add_unmatched(matches, lone)
        self.ran_on = "gpu"
        if not len(matches.starts):
            return []
        measures = self.plan.measures
        assert measures is not None  # gpu_plan.unsupported: column-wise measures only
        return [output_batch(self.spec, measures, matches, Rows(table, 0, n, True))]


@dataclass
class DeviceInput:
    """One launch's device arrays: the program, the truth columns of the row-local
    terms, the register bytecode and columns, the WITHIN bound per start."""

    prog: DeviceArray
    rl: DeviceArray
    mask: DeviceArray
    registers: tuple[DeviceArray, ...]  # code, consts, spans, cols, valid, set mask
    wend: DeviceArray
    n: int
    limit: int
    complete: bool
    base: int
    n_vars: int
    code_len: int
    regs: bool
    fspans: DeviceArray = None  # each variable's fold code (running aggregates)
    acc_w: int = 0  # accumulator floats per register slot
    span: int = 1  # rows one attempt may read (buffer_limit.max_rows)
    each: bool = False  # every end of an attempt (ALL MATCHES / INCREMENTAL)


def device_input(
    plan: CompiledPlan,
    table: pa.Table,
    base: int,
    n: int,
    limit: int,
    complete: bool,
    wend: np.ndarray | None = None,
    cols: Columns | None = None,
    regs: tuple[Any, Any] | None = None,
    *,
    span: int,
) -> DeviceInput:
    """Copy ``table``'s columns to the device (unless ``cols`` holds them there already,
    and ``regs`` the register columns: a live stream's ring) and evaluate the row-local
    DEFINE terms there into one truth column per variable. An attempt may read at most
    ``span`` rows."""
    gp = gpu_plan(plan)
    xp = array_module()
    nv = max(len(plan.variables), 1)
    if cols is None:
        with timed(H2D, table.select(gp.columns).nbytes):
            cols = device_columns(xp, table, gp.columns)
    with timed(KERNEL):  # elementwise on the device
        rl = xp.ones((n, nv), xp.uint8)
        for v, terms in enumerate(gp.terms):
            if terms:
                rl[:, v] = truth(xp, terms, cols, n)
    code, consts, spans, set_mask, obs_last, obs_first = gp.arrays
    if regs is None:
        columns = {name: table.column(name).combine_chunks() for name in gp.registers.columns}
        values, valid = register_columns(gp, columns, n)  # the columns of gp.registers
        with timed(H2D, values.nbytes + valid.nbytes):
            on_device = (to_kernel(np, values), to_kernel(np, valid))
    else:
        on_device = (to_kernel(xp, regs[0]), to_kernel(xp, regs[1]))
    mask = np.zeros(nv, np.uint8)
    for name in plan.query.skip_vars or ():
        mask[plan.variables.index(name)] = 1
    registers = (put(code), put(consts), put(spans), *on_device, put(set_mask))
    with timed(H2D, rl.nbytes if xp is np else 0):
        truths = to_kernel(xp, rl)
    return DeviceInput(
        put(plan.program),
        truths,
        put(mask),
        registers,
        put(np.zeros(0, np.int64) if wend is None else wend),
        n,
        limit,
        complete,
        base,
        nv,
        len(code),
        gp.uses_registers,
        put(gp.registers.fold_spans()),
        2 * gp.registers.n_acc,
        span,
        plan.spec.all_ends,
    )


def put(array: np.ndarray) -> DeviceArray:
    """``array`` copied to the device (timed as a host-to-device copy)."""
    array = np.ascontiguousarray(array)
    with timed(H2D, array.nbytes):
        return cuda.to_device(array)


def get(array: DeviceArray) -> np.ndarray:
    """A device array copied back to the host (timed as a device-to-host copy)."""
    with timed(D2H, int(array.nbytes)):
        host: np.ndarray = array.copy_to_host()
        return host


def matches_of(
    inp: DeviceInput, kept: np.ndarray, ends: np.ndarray, config: Config, first_number: int
) -> Matches:
    """The kept starts' matches, their labels written by a second launch."""
    lengths = np.maximum(ends[kept] - kept + 1, 0)
    offsets = selection.exclusive_scan(lengths)
    codes = labels_of(inp, kept, lengths, offsets, config)
    return Matches(
        starts=kept.copy(),
        lengths=lengths.astype(np.int64),
        numbers=np.arange(first_number + 1, first_number + len(kept) + 1, dtype=np.int64),
        labels=codes // 2,
        offsets=offsets,
        excluded=(codes & 1).astype(bool),
    )


def _launch(
    inp: DeviceInput,
    starts: np.ndarray,
    config: Config,
    frames: int,
    labels: DeviceArray,
    label_off: DeviceArray,
    write: bool,
    rec: DeviceArray,
) -> tuple[np.ndarray, ...]:
    m = len(starts)
    stack = cuda.device_array((m, frames, G.FRAME), np.int64)
    slots = frames + 1 if inp.regs else 1
    lp = cuda.device_array((m, slots, inp.n_vars), np.int64)
    fp = cuda.device_array((m, slots, inp.n_vars), np.int64)
    sv = cuda.device_array((m, inp.code_len + 1), np.float64)
    sn = cuda.device_array((m, inp.code_len + 1), np.int64)
    acc = cuda.device_array((m, slots * max(inp.acc_w, 1)), np.float64)
    seen = cuda.device_array((m, frames + 1) if inp.each else (1, 1), np.uint8)
    path = cuda.device_array((m, frames) if inp.each and write else (1, 1), np.int64)
    out = [cuda.device_array(m, np.int64) for _ in range(7)]
    # A block no wider than the starts: the simulator runs every thread of a block.
    width = max(1, min(THREADS_PER_BLOCK, m))
    blocks = (m + width - 1) // width
    max_steps = max(1 << 20, 64 * min(inp.n, inp.span + 1))
    on_device = put(starts)
    with timed(KERNEL):
        G.walk[blocks, width](
            inp.prog,
            inp.rl,
            inp.mask,
            on_device,
            inp.n,
            inp.span,
            max_steps,
            stack,
            *out[:4],
            labels,
            label_off,
            write,
            *inp.registers[:5],
            inp.registers[5],
            lp,
            fp,
            sv,
            sn,
            inp.wend,
            inp.limit,
            inp.complete,
            inp.base,
            inp.fspans,
            acc,
            inp.each,
            seen,
            path,
            *out[4:],
            rec,
        )
        cuda.synchronize()
    return tuple(get(a) for a in out)


def decide(
    inp: DeviceInput,
    starts: np.ndarray,
    config: Config,
    labels: DeviceArray = None,
    label_off: np.ndarray | None = None,
    rec: DeviceArray = None,
) -> tuple[np.ndarray, ...]:
    """``(ends, firsts, lasts, status, counts, totals, his)`` of every start (its
    preferred end, SKIP TO rows, status, how many matches, their rows in all, the last
    end), in chunks that keep the stacks under :data:`STACK_BYTES`, growing the stack
    of the starts that ran out of it. With ``labels``, the launch writes them (and,
    under ``each``, the match records ``rec``) at ``label_off``."""
    m = len(starts)
    ends = np.full(m, G.NO_MATCH, np.int64)
    firsts = np.full(m, -1, np.int64)
    lasts = np.full(m, -1, np.int64)
    status = np.zeros(m, np.int64)
    counts = np.zeros(m, np.int64)
    totals = np.zeros(m, np.int64)
    his = np.full(m, G.NO_MATCH, np.int64)
    todo = np.arange(m)
    frames = STACK_FRAMES
    write = labels is not None
    dummy = cuda.device_array(1, np.int64)
    no_slots = cuda.device_array((1, 2), np.int64)
    rec = rec if rec is not None else cuda.device_array((1, 2), np.int64)
    while len(todo):
        per_start = frames * (G.FRAME + (2 * inp.n_vars + inp.acc_w if inp.regs else 0)) * 8
        per_start += frames * G.EACH_BYTES_PER_FRAME if inp.each else 0
        chunk = max(1, STACK_BYTES // per_start)
        for a in range(0, len(todo), chunk):
            idx = todo[a : a + chunk]
            off = put(label_off[idx]) if write and label_off is not None else no_slots
            got = _launch(
                inp, starts[idx], config, frames, labels if write else dummy, off, write, rec
            )
            for whole, part in zip((ends, firsts, lasts, status, counts, totals, his), got):
                whole[idx] = part
        todo = todo[status[todo] == G.S_STACK]
        if frames >= MAX_STACK_FRAMES:
            status[todo] = G.S_STEPS
            break
        frames *= 2
    return ends, firsts, lasts, status, counts, totals, his


def every_match(
    inp: DeviceInput,
    kept: np.ndarray,
    counts: np.ndarray,
    totals: np.ndarray,
    config: Config,
    first_number: int,
) -> Matches | None:
    """Every end of the kept starts' attempts (``counts``/``totals``: each start's
    matches and label rows, from the counting launch): an exclusive scan of the
    counts places each start's labels and records, a second launch writes them.
    None where that launch could not decide a start (its stack or step budget)."""
    n_rec, n_lab = counts[kept], totals[kept]
    slots = np.stack([selection.exclusive_scan(n_lab), selection.exclusive_scan(n_rec)], axis=1)
    labels = cuda.device_array(max(int(n_lab.sum()), 1), np.int64)
    rec = cuda.device_array((max(int(n_rec.sum()), 1), 2), np.int64)
    status = decide(inp, kept, config, labels, slots, rec)[3]
    if (status != G.S_OK).any():
        return None
    records = get(rec)[: int(n_rec.sum())]
    return selection.every_end(kept, n_rec, records, get(labels), first_number)


def labels_of(
    inp: DeviceInput, kept: np.ndarray, lengths: np.ndarray, offsets: np.ndarray, config: Config
) -> np.ndarray:
    """The label codes (variable * 2 + excluded) of the kept starts' matches."""
    total = int(lengths.sum())
    labels = cuda.device_array(max(total, 1), np.int64)
    decide(inp, kept, config, labels, np.stack([offsets, offsets + lengths], axis=1))
    return get(labels)[:total].astype(np.int64)
