"""Continuous (and hybrid) MATCH_RECOGNIZE input: archive history, then the live tail.

The pipeline of one continuous query::

    archive (ORDER BY _seq) --\
                               > HashPartitionRouter -> one matcher run per key -> matches
    LiveReader (ring+spill) --/        (runs live until end of stream)
          |
          +--> Archive.append (every tuple consumed, filtered, with its _seq)

Handover: the reader claims the stream *before* the history is read, so no
other reader can consume tuples in between; the history ends at the last
archived sequence number ``k`` and live tuples with a sequence number <= k
are skipped. The matcher runs see one uninterrupted sequence, so a match that
spans the boundary is found once, exactly as in a one-shot query over the
concatenation.

The archive is the stream's log: the ring frees a tuple only once the
archive holds it durably (its writer, one of the readers, flushes when a
writer waits for room, when its buffer fills half the ring, each second, and
at the end), so after a reader is killed the next one finds every tuple
after ``k`` still in the ring - no gap, and the skip above makes no duplicate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from matchsql.adaptive.metrics import InputMetrics
from matchsql.adaptive.modes import InputOptions
from matchsql.adaptive.push import LocalRuns, PushInput
from matchsql.errors import ExecutionError
from matchsql.fsm.matcher import Matcher
from matchsql.router.hashed import HashPartitionRouter
from matchsql.storage.catalog import StreamDef
from matchsql.storage.live_reader import LiveReader
from matchsql.storage.shm_ring import W_HEAD_SEQ

T = TypeVar("T")


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
    router: Any = None,
    derive: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Match batches of a query over ``definition``'s stream, as soon as they are final.

    ``input_options`` picks pull (the default, the query thread reads the
    store), push or adaptive input (a push thread reads; see
    :mod:`matchsql.adaptive.push`) and receives the query's input metrics.
    ``router`` replaces the in-process hash router (worker processes:
    :class:`matchsql.workers.stream.StreamRouter`, which is also its own
    :class:`~matchsql.adaptive.push.PushRuns`); it is closed at the end. The
    input mode is only how this router's input is read: history and live
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
    archive = reader.take_archive(con)
    cursor = con.cursor() if archive is not None else None
    push: PushInput | None = None
    try:
        reader.open()
        if router is None:
            router = HashPartitionRouter(partition_by, new_run)
        next_seq = 0
        if archive is not None and cursor is not None:
            if history:
                # ``more``: another history batch follows, so a router of worker
                # processes may keep this one in flight (the last one it answers).
                for (last, batch), more in _with_more(archive.history(cursor, batch_rows)):
                    next_seq = last + 1
                    yield from router.route(derive(batch) if derive else batch, more=more)
                    if cancelled():
                        raise ExecutionError("statement interrupted")
            else:
                next_seq = archive.last_seq(cursor) + 1
        live = live_batches(reader, next_seq)
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
                    metrics.routed(_held(router), queued, batch.num_rows)
            yield from _counted(metrics, router.finish())
        else:
            # The runs of the history (if any) go on with the live tuples.
            runs = LocalRuns(router) if isinstance(router, HashPartitionRouter) else router
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
            if router is not None and hasattr(router, "close"):
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
            if cursor is not None:
                cursor.close()
            if push is None or not push.thread.is_alive():
                reader.close()


def live_batches(reader: LiveReader, next_seq: int) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Live tuples from ``next_seq`` on (those before it were read as archived history).

    Yields ``(batch, enqueue_sum_ns)``: the sum of the batch's tuples' enqueue
    instants (monotonic ns), for the latency metric.
    """
    while (item := reader.read()) is not None:
        first, batch = item
        enqueue_sum_ns = reader.last_enqueue_sum_ns
        if first + batch.num_rows <= next_seq:
            continue  # already archived (and read as history)
        if first < next_seq:
            rows = batch.num_rows
            batch = batch.slice(next_seq - first)
            first = next_seq
            enqueue_sum_ns = enqueue_sum_ns * batch.num_rows // rows  # rows * mean enqueue
        next_seq = first + batch.num_rows
        yield batch, enqueue_sum_ns


_END: Any = object()  # no item (an iterator's end: items may be None)


def _with_more(items: Iterable[T]) -> Iterator[tuple[T, bool]]:
    """``(item, whether another item follows)`` for each item, one item read ahead."""
    iterator = iter(items)
    previous = next(iterator, _END)
    while previous is not _END:
        item = next(iterator, _END)
        yield previous, item is not _END
        previous = item


def _counted(metrics: InputMetrics, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Pass output batches through, counting result rows (matches with ONE ROW PER MATCH)."""
    for batch in batches:
        metrics.matched(batch.num_rows)
        yield batch


def _queued(reader: LiveReader) -> int:
    """Tuples published to the store but not yet read: two shared-memory words."""
    return max(0, reader.ring.word(W_HEAD_SEQ) - reader.next_seq)


def _held(router: Any) -> int:
    """Tuples the pull-mode runs still hold (their InputHolders); a router of worker
    processes counts them from its workers' answers (reading its runs would fetch them)."""
    if not isinstance(router, HashPartitionRouter):
        return int(router.buffered_rows)
    return sum(int(getattr(run, "buffered_rows", 0)) for run in router.runs.values())
