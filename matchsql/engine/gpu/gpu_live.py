"""A live stream's partition on the GPU path: processed per batch, not per event.

CDP's "delay until the terminator" applied to a stream: the rows of a batch
are appended to the partition's ring columns on the device
(:class:`~matchsql.engine.gpu.ring.DeviceRing`: only the new rows are copied,
asynchronously from pinned memory where CuPy runs; rows no attempt can reach
any more are dropped from the front), and the batch is one launch: every
start not decided yet is walked at once. A walk that
needs a row that has not arrived (or a row whose ``NEXT`` is not known yet)
reports ``S_WAIT``; the sequential SKIP scan (:mod:`matchsql.engine.gpu.skip`) keeps
the starts before the first waiting one, and the next batch resumes there.
Matches whose measures read rows past the ones held wait the same way (under ALL
MATCHES, a start's matches wait for its last end's). With
WITHIN an attempt ends at its bound, so the held rows follow the bound, not
the stream.
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np
import pyarrow as pa

from matchsql.config import Config
from matchsql.engine.buffer_limit import RowWidth, check_held, max_rows
from matchsql.engine.compiled.compiled_matcher import CompiledPlan, kernel_params, raise_status
from matchsql.engine.compiled.kernel import K_SKIP, ST_DONE, ST_SPAN
from matchsql.engine.compiled.match_arrays import Rows
from matchsql.engine.compiled.measures import output_batch
from matchsql.engine.compiled.within import within_ends
from matchsql.engine.gpu import skip as S
from matchsql.engine.gpu.gpu_matcher import (
    DeviceStatistics,
    decide,
    device_input,
    every_match,
    matches_of,
)
from matchsql.engine.gpu.gpu_plan import gpu_plan
from matchsql.engine.gpu.ring import DeviceRing
from matchsql.engine.gpu.selection import add_unmatched
from matchsql.errors import ExecutionError
from matchsql.runtime.cancel import Cancellation
from matchsql.saved_state.state_format import state_class


@state_class
class LiveGpuMatcher(DeviceStatistics):
    """One live partition on the GPU path (the :class:`~matchsql.engine.matcher.Matcher`
    contract); see the module docstring."""

    #: The last row of a match output so far (WITH UNMATCHED ROWS); a class default, so
    #: that a snapshot taken before it was kept restores with none.
    covered = -1

    def __init__(
        self,
        plan: CompiledPlan,
        partition_key: tuple = (),
        config: Config | None = None,
        cancel: Cancellation | None = None,
    ) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.key = tuple(partition_key)
        self.config = config or Config()
        self.cancel = cancel or Cancellation()
        self.table = self.spec.columns.empty_table()
        self.width = RowWidth(self.spec.columns)  # of the rows received, for the buffer limit
        self.ring = DeviceRing(gpu_plan(plan))
        self.base = 0  # partition row of the held rows' first
        self.count = 0
        self.next_start = 0
        self.match_number = 0
        self.complete = False
        self.skip_mode = int(kernel_params(self.spec, self.config, self.width)[K_SKIP])
        self.launches = 0  # kernel launches (one per batch that had a start to decide)
        self.ran_on = "gpu"

    @property
    def buffered_rows(self) -> int:
        return self.count - self.base

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if self.complete:
            raise ExecutionError("internal error: rows fed after the partition finished")
        if not batch.num_rows:
            return []
        new = pa.Table.from_batches([batch], schema=self.spec.columns)
        self.table = pa.concat_tables([self.table, new]).combine_chunks()
        self.ring.append(new, gpu_plan(self.plan))
        self.width.add(batch)
        self.count += batch.num_rows
        return self._run()

    def feed_final(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        out = self.feed(batch)
        return out + self.finish()

    def finish(self) -> list[pa.RecordBatch]:
        self.complete = True
        return self._run()

    def _run(self) -> list[pa.RecordBatch]:
        n = self.count - self.base
        begin = self.next_start - self.base
        if begin >= n:
            self._release()
            return []
        q = self.plan.query
        limit = n if self.complete else max(0, n - q.define_ahead)
        wend = (
            within_ends(
                self.spec, self.plan.within, self.table.column(self.spec.order_by[0]).chunk(0)
            )
            if self.plan.within is not None
            else None
        )
        inp = device_input(
            self.plan,
            self.table,
            self.base,
            n,
            limit,
            self.complete,
            wend,
            self.ring.columns(),
            self.ring.register_arrays(),
            span=max_rows(self.config, self.width),
        )
        starts = np.arange(begin, n, dtype=np.int64)
        got = decide(inp, starts, self.config)
        self.launches += 1
        self.cancel.check()
        fills = (S.NO_MATCH, -1, -1, S.S_OK, 0, 0, S.NO_MATCH)
        full = [np.full(n, fill, np.int64) for fill in fills]
        for whole, part in zip(full, got):
            whole[begin:] = part
        ends, firsts, lasts, status, counts, totals, his = full
        st, row, kept, lone = S.resolve(
            ends,
            firsts,
            lasts,
            status,
            his,
            self.skip_mode,
            self.spec.with_unmatched,
            begin,
            self.covered - self.base,
        )
        if st == S.ST_RETRY:
            self._no_budget(int(row))
        if st not in (ST_DONE, S.ST_WAIT):
            raise_status(
                self.spec,
                self.config,
                self.width,
                ST_SPAN if st == ST_SPAN else int(st),
                self.base + int(row),
            )
        resume = int(row)
        if not self.complete and len(kept):
            # Measures may read NEXT rows past a match: such a match waits, and so does
            # everything after it (it is decided again, with the same result, later).
            ready = his[kept] + q.measure_ahead < n
            if not ready.all():
                cut = int(np.argmin(ready))
                resume = int(kept[cut])
                kept = kept[:cut]
                lone = lone[lone < resume]
        out: list[pa.RecordBatch] = []
        if len(kept) or len(lone):
            if inp.each and len(kept):
                matches = every_match(inp, kept, counts, totals, self.config, self.match_number)
                if matches is None:
                    self._no_budget(int(kept[0]))
            else:
                matches = matches_of(inp, kept, ends, self.config, self.match_number)
            matches = add_unmatched(matches, lone)
            matches.starts += self.base
            self.match_number += int(np.count_nonzero(matches.numbers))
            if len(kept):
                self.covered = max(self.covered, self.base + int(his[kept].max()))
            rows = Rows(self.table, self.base, self.count, self.complete)
            measures = self.plan.measures
            assert measures is not None  # gpu_plan.unsupported: column-wise measures only
            out.append(output_batch(self.spec, measures, matches, rows))
        self.next_start = self.base + resume
        self._release()
        return out

    def _no_budget(self, row: int) -> NoReturn:
        """Raise: the device could not decide the attempt at held row ``row``."""
        raise ExecutionError(
            f"the GPU path could not decide the match attempt at partition row "
            f"{self.base + row + 1} within its stack budget; SET gpu = 'off' runs "
            "this continuous query on a CPU path"
        )

    def _release(self) -> None:
        """Drop the rows before the oldest one an attempt or a PREV can still read."""
        start = min(self.next_start, self.count)
        back = self.plan.query.lookback_for(self.count, self.complete)
        keep = start - back
        drop = keep - self.base
        if drop > 0:
            self.table = self.table.slice(drop)
            self.ring.drop(drop)
            self.base = keep
        check_held(self.config, self.width, self.count - self.base, start, back)
