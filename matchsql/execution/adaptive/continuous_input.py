"""Continuous (and hybrid) MATCH_RECOGNIZE input: archive history, then the live tail.

The pipeline of one continuous query::

    archive (ORDER BY _seq) --\
                               > HashPartitionRouter -> one matcher run per key -> matches
    LiveReader (ring+spill) --/        (runs live until end of stream)
          |
          +--> Archive.append (every tuple consumed, filtered, with its _seq)

Handover (:class:`~matchsql.execution.live_source.LiveSource`, the rule's one
home): the history ends at the last archived sequence number ``k`` and live
tuples up to ``k`` are skipped. The matcher runs see one uninterrupted
sequence, so a match that spans the boundary is found once, exactly as in a
one-shot query over the concatenation.

The archive is the stream's log: the ring frees a tuple only once the
archive holds it durably (its writer, one of the readers, flushes when a
writer waits for room, when its buffer fills half the ring, each second, and
at the end), so after a reader is killed the next one finds every tuple
after ``k`` still in the ring - no gap, and the skip above makes no duplicate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import duckdb
import pyarrow as pa

from matchsql.engine.matcher import Matcher
from matchsql.errors import ExecutionError
from matchsql.execution.adaptive.metrics import InputMetrics
from matchsql.execution.adaptive.modes import InputOptions
from matchsql.execution.adaptive.push import LocalRuns, PushInput, PushRuns, WorkerRuns
from matchsql.execution.live_source import LiveSource
from matchsql.execution.router.hashed import HashPartitionRouter
from matchsql.execution.router.protocol import LiveRouter
from matchsql.storage.catalog import StreamDef
from matchsql.storage.live_reader import LiveReader
from matchsql.storage.shm_ring import W_HEAD_SEQ


def continuous_batches(
    definition: StreamDef,
    partition_by: list[str],
    new_run: Callable[[tuple], Matcher],
    *,
    con: duckdb.DuckDBPyConnection,
    batch_rows: int,
    cancelled: Callable[[], bool],
    on_producer_death: str = "error",
    history: bool = True,
    input_options: InputOptions | None = None,
    workers: WorkerRuns | None = None,
    derive: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Match batches of a query over ``definition``'s stream, as soon as they are final.

    ``input_options`` picks pull (the default, the query thread reads the
    store), push or adaptive input (a push thread reads; see
    :mod:`matchsql.execution.adaptive.push`) and receives the query's input metrics.
    ``workers`` replaces the in-process hash router (worker processes:
    :class:`matchsql.execution.workers.stream_router.StreamRouter`, which is also its own
    :class:`~matchsql.execution.adaptive.push.PushRuns`). The router is closed at the end.
    The input mode is only how this router's input is read: history and live
    tuples reach the same runs, wherever they live. ``derive`` adds the query's derived
    columns to each batch read (history and live) before it is routed.
    """
    options = input_options or InputOptions()
    metrics = InputMetrics()
    metrics.start(time.monotonic())
    stop = threading.Event()
    reader = LiveReader(
        definition,
        on_producer_death=on_producer_death,
        cancelled=lambda: stop.is_set() or cancelled(),
        max_rows=batch_rows,
    )
    source = LiveSource(reader, con, batch_rows)
    push: PushInput | None = None
    # The runs: in this thread unless ``workers`` holds them.
    local: HashPartitionRouter | None = None
    router: LiveRouter
    if workers is None:
        router = local = HashPartitionRouter(partition_by, new_run)
    else:
        router = workers
    try:
        reader.open()
        if history:
            # ``more``: another history batch follows, so a router of worker
            # processes may keep this one in flight (the last one it answers).
            for batch, more in source.history():
                yield from router.route(derive(batch) if derive else batch, more=more)
                if cancelled():
                    raise ExecutionError("statement interrupted")
        else:
            source.skip_history()
        live = source.live()
        if derive is not None:
            live = ((derive(batch), enqueued) for batch, enqueued in live)
        if options.mode == "pull":
            sampling = options.stats is not None  # pull costs nothing extra unless asked
            for batch, enqueue_sum_ns in live:
                queued = _queued(reader)
                if sampling:  # first selection: the batch goes to the matchers now
                    metrics.selected_batch(batch.num_rows, enqueue_sum_ns, time.monotonic_ns())
                # A backlog: the next batch is at hand, this one may stay in flight.
                yield from _counted(metrics, router.route(batch, more=queued > 0))
                if sampling:
                    metrics.routed(router.buffered_rows, queued, batch.num_rows)
            yield from _counted(metrics, router.finish())
        else:
            # The runs of the history (if any) go on with the live tuples.
            runs: PushRuns
            if local is not None:
                runs = LocalRuns(local)
            else:
                assert workers is not None
                runs = workers
            # (batch, enqueue_sum_ns) pairs: PushInput records the latency when the
            # query thread takes a batch from an InputHolder (its first selection).
            push = PushInput(
                partition_by,
                new_run,
                lambda: next(live, None),
                metrics=metrics,
                queued=lambda: _queued(reader),
                adaptive=options.mode == "adaptive",
                states=options.states,
                label_state=options.label_state,
                u=options.adaptive_u,
                sliding=options.sliding,
                rule=options.rule,
                runs=runs,
                memory_budget=options.memory_budget,
            )
            push.start()
            yield from _counted(metrics, push.batches())  # ends with every run's finish
    finally:
        try:
            router.close()
            if push is not None:
                stop.set()  # wakes a push thread blocked in reader.read()
                push.close()
            metrics.finish(time.monotonic())
            if options.stats is not None:
                options.stats.clear()
                options.stats.update(metrics.row())
                options.stats["input_mode"] = options.mode
        finally:
            source.close()
            if push is None or not push.thread.is_alive():
                reader.close()


def _counted(metrics: InputMetrics, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Pass output batches through, counting result rows (matches with ONE ROW PER MATCH)."""
    for batch in batches:
        metrics.matched(batch.num_rows)
        yield batch


def _queued(reader: LiveReader) -> int:
    """Tuples published to the store but not yet read: two shared-memory words."""
    return max(0, reader.ring.word(W_HEAD_SEQ) - reader.next_seq)
