"""Routes a one-time query's partitions to worker processes and merges their matches.

The input arrives in partition and ORDER BY order, exactly as one process
gets it (matchsql/session/ordered_input.py: the input's own order where it
is in order, DuckDB's sort otherwise). Partition number *i* (in that order)
falls into one of ``buckets`` buckets; a bucket belongs to one worker at a
time (:mod:`.balance` picks which). Where the rows were grouped here, every
partition is known before the first message: the rows go into the pool's
shared segment once (:mod:`.shared_rows`), the buckets are runs of
consecutive partitions spread over the workers by their rows, and a message
names ranges of grouped rows, which the worker copies out itself. Sorted
batches from DuckDB are cut into partitions as
:func:`~matchsql.execution.router.partitions.split` cuts them, each partition's key
hashes into its bucket, and the pieces go through the worker's channel.
Either way pieces are gathered per worker and sent ``chunk_rows`` at a time
(ranges of the shared input in fewer, larger messages:
:data:`SHARED_MESSAGES`), or as soon as the worker is idle.

Order: every worker answers for its partitions in the order it got them,
each partition's matches tagged with its number, plus a "done" mark. The
router yields partition *i*'s matches once every partition before it is
done, so the output is exactly the single-process router's, row for row; an
answer's run of consecutive partitions goes on as one piece.

Migration (State Transfer, UPM-CEP section 5): the router sends the
bucket's pending pieces to its source worker, then asks it for a snapshot
and keeps (buffers) the bucket's further pieces; the source, having matched
everything it got before the request, returns the bucket's open runs as
bytes and forgets them; the router hands them to the target worker ahead of
the buffered pieces, and from then on routes the bucket there. The source's
matches of a moving partition all reach the router before its snapshot does
(one ordered channel), the target's after: no match is lost, repeated or
reordered.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import select
import time
import zlib
from collections import deque
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from matchsql.config import Config
from matchsql.errors import ExecutionError
from matchsql.execution.router.parallel import coalesce
from matchsql.execution.router.partitions import keys_of, split
from matchsql.execution.router.presorted import GroupedRows
from matchsql.execution.workers.balance import (
    Load,
    Policy,
    in_ranges,
    least_loaded,
    rows_per_bucket,
    spread,
)
from matchsql.execution.workers.frames import Packed, unpack
from matchsql.execution.workers.pool import Worker, WorkerLost, WorkerPool
from matchsql.execution.workers.shared_rows import SharedLayout
from matchsql.execution.workers.wire import MessageError, error_of, loads, query_bytes
from matchsql.execution.workers.worker_matching import take_bytes
from matchsql.plan.spec import MatchSpec
from matchsql.runtime.cancel import INTERRUPTED, Cancellation

BUCKETS = 64
#: How long the router waits for answers before it looks at the interrupt again (it waits
#: for nothing else then: 10 ms keeps an interrupt's latency well under 100 ms).
_POLL_S = 0.01
#: Rows per message to a worker. A worker matches the complete partitions of a
#: message in one kernel call and each partition cut by a message's edge as a run of
#: its own, so small messages multiply the fixed cost per call: on 1M rows of 500
#: partitions (Q2), 16,384 rows cost the workers 0.375 s of CPU, 65,536 rows 0.29 s
#: (measured side by side, bench notes in bench/results/workers.txt).
CHUNK_ROWS = 65_536
#: Where the workers take their rows from the shared input, messages name ranges and
#: carry no rows: they are then made larger, about this many per worker in all (the
#: first goes out at once, the next as the rows accumulate while the worker is busy),
#: since each costs the router and the worker a fixed part. On 1M rows of 500
#: partitions, 2 workers: Q2 82.5 -> 78.2 ms, V-shape 77.9 -> 71.6 ms against
#: 65,536-row messages (medians of 8 runs in turns; bench notes in
#: bench/results/workers.txt).
SHARED_MESSAGES = 2
#: ... but at most this many rows a message: a worker copies a message's rows out of the
#: segment, so this bounds what it holds at once (10M rows, 2 workers: as fast as
#: 2.5M-row messages, bench notes in bench/results/workers.txt).
SHARED_MESSAGE_ROWS = 1 << 20
#: Whether a message leaves out the partition still open at its end (see
#: :meth:`WorkerRouter._send`); False only for the bench's "before".
HOLD_OPEN = True
#: Whether the buckets of a shared input are runs of consecutive partitions
#: (:func:`~matchsql.execution.workers.balance.in_ranges`); False: hashed keys, as elsewhere (the
#: bench's migration table, which picks its hot partition's bucket by key).
RANGE_BUCKETS = True


def query_payload(spec: MatchSpec, config: Config) -> bytes:
    """The "query" message of ``spec`` under ``config`` (:func:`~.wire.query_bytes`), kept
    in the spec's memo per settings: a statement run again sends it without writing its
    spec again (half a millisecond of the router's serial part, a short query's spec)."""
    key = ("workers.query", dataclasses.astuple(config))
    found = spec.memo.get(key)
    if found is None:
        found = spec.memo[key] = query_bytes(spec, config)
    return found


def bucket_of(key: tuple, buckets: int) -> int:
    """A partition key's bucket: stable across processes and runs (no salted ``hash``)."""
    return zlib.crc32(repr(key).encode()) % buckets


@dataclass
class Migration:
    bucket: int
    source: int
    target: int
    started: float
    buffered: list[tuple[tuple, pa.RecordBatch | tuple[int, int] | None]] = field(
        default_factory=list
    )
    # The scatter router's: rows of the bucket, not yet cut into partitions.
    held: list[pa.RecordBatch] = field(default_factory=list)
    buffered_rows: int = 0


@dataclass
class MigrationRecord:
    """One finished migration, for SHOW WORKERS and the bench."""

    bucket: int
    source: int
    target: int
    pause_s: float  # from the snapshot request to the switch of routing
    state_bytes: int
    open_partitions: int
    buffered_rows: int
    state_rows: int = 0  # rows the snapshot carried (buffered input of an open wave)


class WorkerChannels:
    """What every router over the pool shares: messages to the workers and their answers,
    the load figures the policy reads, the migration records. A one-time query's
    :class:`WorkerRouter` and a continuous query's
    :class:`~matchsql.execution.workers.stream_router.StreamRouter` route and merge
    differently on top of it: their inputs differ, so they share no ``run``."""

    def __init__(
        self,
        pool: WorkerPool,
        spec: MatchSpec,
        config: Config,
        cancel: Cancellation,
        *,
        buckets: int = BUCKETS,
        chunk_rows: int | None = None,
        max_queued_rows: int | None = None,
        policy: Policy | None = None,
        sample_rows: int = 0,
    ) -> None:
        self.pool = pool
        # The first ``sample_rows`` rows of the input in grouped order, kept as the run
        # starts (None: not asked for, or no rows): what a replacement pool matches to
        # load this query's kernels (:class:`~.session.Priming`).
        self._sample_rows = sample_rows
        self.sample: pa.Table | None = None
        self.workers: list[Worker] = pool.workers
        self.spec = spec
        self.config = config
        self.cancel = cancel
        self.buckets = buckets
        # None: CHUNK_ROWS, or sized by the input where it is shared (see SHARED_MESSAGES)
        self._sized = chunk_rows is None
        self.chunk_rows = chunk_rows or CHUNK_ROWS
        self._max_queued_rows = max_queued_rows
        self.policy = policy
        n = len(self.workers)
        self.owner: dict[int, int] = {}
        self.routed = [0] * n  # rows sent (or pending) per worker
        self.done_rows = [0] * n  # rows the worker has matched, as it last said
        self.bucket_rows: dict[int, int] = {}
        self.recent: dict[int, int] = {}
        # Per worker: (entry, its pieces) not sent yet, one entry per partition.
        self._pending: list[list[tuple[tuple, list[pa.RecordBatch]]]] = [[] for _ in range(n)]
        self._pending_rows = [0] * n
        self.migrating: dict[int, Migration] = {}
        self.migrations: list[MigrationRecord] = []
        self._states: deque[tuple[int, bytes]] = deque()  # snapshots to hand on
        # The merge, by partition label: a number in input order, or (the scatter router,
        # whose workers number their own partitions) whatever sorts them into it.
        self._order: deque[Hashable] = deque()
        self._out: dict[Hashable, list[pa.RecordBatch]] = {}
        self._done: set[Hashable] = set()
        self._through: dict[Hashable, int] = {}  # runs of done partitions: first -> length
        self._ended = 0
        self.worker_cpu_s = [0.0] * n  # this query's matching CPU per worker
        self.worker_process_cpu_s = [0.0] * n  # ... and all its process's CPU meanwhile
        # (kind, start, end) of each message a worker served (perf_counter: one clock for
        # all processes of this machine), and the router's own steps: the bench's timeline.
        self.worker_spans: list[list[tuple[str, float, float]]] = [[] for _ in range(n)]
        self.marks: dict[str, tuple[float, float]] = {}  # step -> (wall, this process's CPU)
        self.bucket_cpu_s: dict[int, float] = {}  # ... and per bucket
        self.partitions = 0
        self.shared = False  # whether the workers took their rows from the shared input
        # One poll of every worker's answers and life (a process's sentinel is ready once
        # it has ended), set up once: multiprocessing's wait() builds a selector each time,
        # and the router polls at every step and every wait for room in a ring.
        self._poller = select.poll()
        self._pipe_of: dict[int, int] = {}
        self._sentinel_of: dict[int, int] = {}
        for index, worker in enumerate(self.workers):
            self._pipe_of[worker.pipe.fileno()] = index
            self._sentinel_of[worker.proc.sentinel] = index
        for fd in [*self._pipe_of, *self._sentinel_of]:
            self._poller.register(fd, select.POLLIN)

    def close(self) -> None:
        """Nothing to give back here: the pool's owner (:mod:`matchsql.execution.workers.session`)
        keeps or replaces it by how :meth:`run` ended."""

    def _mark(self, step: str) -> None:
        self.marks[step] = (time.perf_counter(), time.process_time())

    def routed_unmatched(self, index: int) -> int:
        """Rows sent to worker ``index`` that it has not matched yet."""
        return self.routed[index] - self._pending_rows[index] - self.done_rows[index]

    def _load(self) -> Load:
        queued = [self.routed[i] - self.done_rows[i] for i in range(len(self.workers))]
        return Load(
            tuple(self.routed),
            tuple(queued),
            dict(self.owner),
            dict(self.recent),
            frozenset(self.migrating),
            dict(self.bucket_rows),
        )

    # -- messages -------------------------------------------------------------------------

    def _post(self, index: int, kind: str, payload=None, extra=None) -> None:
        """Send to worker ``index``, taking answers while its channel is full."""
        worker = self.workers[index]
        try:
            worker.inbox.send(kind, payload, extra, idle=self._drain)
        except OSError:  # a broken pipe: the worker is gone
            self._check()
            raise _died(worker, worker.reaped_death()) from None

    # -- answers --------------------------------------------------------------------------

    def _drain(self) -> None:
        """Take every answer already there, without waiting."""
        self._check()
        while True:
            ready = self._poller.poll(0)
            answered = sorted(self._pipe_of[fd] for fd, _ in ready if fd in self._pipe_of)
            if not answered:
                break
            for index in answered:
                self._take(index, self.workers[index])
        self._check_alive(ready)

    def _wait(self) -> None:
        """Wait for at least one answer (watching the interrupt and the workers' lives)."""
        self._check()
        if self._poller.poll(_POLL_S * 1000):
            self._drain()

    def _take(self, index: int, worker: Worker) -> None:
        assert worker.outbox is not None
        try:
            kind, payload, extra = worker.outbox.receive()
        except (EOFError, OSError):
            self._check()
            raise _died(worker, worker.reaped_death()) from None  # its pipe closed: dying
        if kind == "out":
            self._on_out(index, payload, extra)
        elif kind == "state":
            self._states.append((extra, payload))
        elif kind == "error":
            raise error_of(payload)
        elif kind == "ended":
            extra = _stats(payload)
            self._ended += 1
            worker.rows_done += extra[0]
            worker.busy_s += extra[1] / 1e9
            self.worker_cpu_s[index] = extra[1] / 1e9
            self.worker_process_cpu_s[index] = extra[3] / 1e9
            self.worker_spans[index] = extra[4]
            for bucket, ns in extra[2].items():
                self.bucket_cpu_s[bucket] = self.bucket_cpu_s.get(bucket, 0.0) + ns / 1e9
        else:
            self._answer(index, kind, payload, extra)

    def _on_out(self, index: int, payload: bytes, extra) -> None:
        """A worker's matches ("out"): each kind of router files them its own way."""
        raise NotImplementedError

    def _answer(self, index: int, kind: str, payload: bytes, extra) -> None:
        """An answer of a kind that only another kind of router expects."""
        raise ExecutionError(f"worker process {index} sent an unexpected {kind!r}")

    def _check(self) -> None:
        if self.cancel.cancelled:
            raise ExecutionError(INTERRUPTED)

    def _check_alive(self, ready: list[tuple[int, int]]) -> None:
        """Fail if a worker ended (its sentinel is among the ``ready`` of a poll) with no
        answer left to take."""
        self._check()  # an interrupt that killed nothing yet is still an interrupt
        for fd, _ in ready:
            index = self._sentinel_of.get(fd)
            if index is None:
                continue
            worker = self.workers[index]
            death = worker.death()
            if death is not None and not worker.pipe.poll(0):
                raise _died(worker, death)


class WorkerRouter(WorkerChannels):
    """Runs ``spec``'s partitions of sorted batches on ``pool``'s workers."""

    #: Whether partition numbers are consecutive integers in output order, so that an
    #: answer's run of consecutive partitions can be passed on as one piece (:meth:`_on_out`).
    consecutive_numbers = True

    @property
    def max_queued_rows(self) -> int:
        """Rows a worker may have queued before the router waits (back-pressure): four
        messages' worth unless given."""
        return self._max_queued_rows or 4 * self.chunk_rows

    # -- the query --------------------------------------------------------------------

    def _keep_sample(self, rows: GroupedRows | pa.Table) -> None:
        """Keep the first rows of ``rows`` (grouped order) as :attr:`sample`, if asked."""
        stop = min(self._sample_rows, rows.num_rows)
        if not stop:
            return
        if isinstance(rows, pa.Table):
            self.sample = rows.slice(0, stop)
            return
        batch = rows.gather(np.array([0]), np.array([stop]), None, copy=True)
        self.sample = pa.Table.from_batches([batch])

    def run(
        self, source: GroupedRows | pa.Table | Iterable[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        """The matches of every partition of ``source`` (the input in partition and ORDER BY
        order: grouped here, or batches), in the single-process order."""
        self._mark("start")
        payload = query_payload(self.spec, self.config)
        for index in range(len(self.workers)):
            self._post(index, "query", payload)
        grouped = source if isinstance(source, GroupedRows) else None
        shareable = grouped is not None and all(
            grouped.schema.get_field_index(name) in grouped.keys for name in self.spec.partition_by
        )
        layout = self.pool.arena.put(grouped) if grouped is not None and shareable else None
        if grouped is not None and layout is not None:
            self.shared = True
            self._keep_sample(grouped)  # after put: placed columns are sliced, not taken
            yield from self._route_shared(grouped, layout)
        elif isinstance(source, GroupedRows):
            self._keep_sample(source)
            yield from self._route(source.batches(self.chunk_rows))
        elif isinstance(source, pa.Table):
            self._keep_sample(source)
            yield from self._route(source.to_batches(max_chunksize=self.chunk_rows))
        else:
            batches = iter(source)
            first = next(batches, None)
            if first is not None:
                self._keep_sample(pa.Table.from_batches([first]))
                batches = itertools.chain([first], batches)
            yield from self._route(batches)
        for index in range(len(self.workers)):
            self._send(index, whole=True)
        self._mark("routed")
        # Nothing more goes to the workers unless a migration is still moving a bucket:
        # their "ended" then follows their last answer, rather than a round trip after it.
        end_now = not self.migrating
        for index in range(len(self.workers) if end_now else 0):
            self._post(index, "end")
        while self._order or self.migrating:
            self._wait()
            self._step(decide=False)
            yield from self._ready()
        self._mark("merged")
        for index in range(0 if end_now else len(self.workers)):
            self._post(index, "end")
        while self._ended < len(self.workers):
            self._wait()
        self.pool.arena.ended()

    def _route(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Route the pieces of partitions of ``batches``, each partition numbered in turn."""
        open_number: int | None = None
        open_key: tuple | None = None
        open_bucket = 0
        for batch in batches:
            self._check()
            if "input" not in self.marks:
                self._mark("input")  # the first rows in order: the serial part before them
            for key, piece in split(batch, self.spec.partition_by):
                if open_number is None or key != open_key:
                    if open_number is not None:
                        self._add(open_bucket, (open_number, open_bucket, open_key, 0, True), None)
                    open_key, open_bucket = key, bucket_of(key, self.buckets)
                    open_number = self._begin_partition(open_bucket)
                entry = (open_number, open_bucket, open_key, piece.num_rows, False)
                self._add(open_bucket, entry, piece)
            self._step()
            yield from self._ready()
        if open_number is not None:
            self._add(open_bucket, (open_number, open_bucket, open_key, 0, True), None)

    def _route_shared(self, rows: GroupedRows, layout: SharedLayout) -> Iterator[pa.RecordBatch]:
        """Route ranges of ``rows`` (in the pool's shared segment, described by ``layout``):
        the workers take the rows themselves. Every partition is known here, so the
        buckets are runs of consecutive partitions (:func:`~.balance.in_ranges`) and
        the partitions of a step are routed together; a partition longer than a step
        goes in pieces, as :meth:`_route` sends batches' pieces of it."""
        self._mark("input")
        if self._sized:
            share = -(-rows.num_rows // (SHARED_MESSAGES * len(self.workers)))
            self.chunk_rows = max(self.chunk_rows, min(share, SHARED_MESSAGE_ROWS))
        shared = layout.bytes()
        for index in range(len(self.workers)):
            self._post(index, "share", shared)
        names = self.spec.partition_by
        fields = [rows.schema.get_field_index(name) for name in names]
        heads = pa.RecordBatch.from_arrays([rows.keys[i] for i in fields], names=names)
        keys = keys_of(heads, names)
        counts = np.diff(rows.ends, prepend=0)
        buckets = (
            in_ranges(counts, self.buckets).tolist()
            if RANGE_BUCKETS
            else [bucket_of(key, self.buckets) for key in keys]
        )
        for bucket, worker in spread(
            rows_per_bucket(buckets, counts.tolist()), len(self.workers)
        ).items():
            self.owner.setdefault(bucket, worker)
        ends = rows.ends.tolist()
        # Decisions (migrations, sends to idle workers) as often as for batches of the
        # input, and a partition in pieces of at most that many rows, as it comes there.
        step_rows = max(1, min(self.config.batch_size, self.chunk_rows))
        part = start = 0
        while part < len(ends):
            last = bisect.bisect_right(ends, start + step_rows, part)
            if last > part:  # whole partitions
                self._add_whole(part, last, keys, buckets, ends)
                part, start = last, ends[last - 1]
                self._check()
                self._step()
                yield from self._ready()
                continue
            bucket, key, end = buckets[part], keys[part], ends[part]
            number = self._begin_partition(bucket)
            assert number == part
            while start < end:  # (a partition has rows: its last piece ends it)
                stop = min(end, start + step_rows)
                self._add(bucket, (number, bucket, key, stop - start, stop == end), (start, stop))
                start = stop
                self._check()  # (the partition may still be open: it may move)
                self._step()
                yield from self._ready()
            part += 1

    def _add_whole(
        self, first: int, last: int, keys: list[tuple], buckets: list[int], ends: list[int]
    ) -> None:
        """Route partitions ``first:last`` of the shared input whole, a run of one bucket at
        a time (the bookkeeping of :meth:`_add` once per run, not per partition)."""
        assert self.partitions == first  # a worker finds the partition's key by its number
        self.partitions = last
        self._order.extend(range(first, last))
        begin = ends[first - 1] if first else 0
        run = first
        while run < last:
            bucket = buckets[run]
            end = run + 1
            while end < last and buckets[end] == bucket:
                end += 1
            if bucket not in self.owner:
                self.owner[bucket] = least_loaded(self._load())
            if bucket in self.migrating:
                for number in range(run, end):
                    entry = (number, bucket, keys[number], ends[number] - begin, True)
                    self._add(bucket, entry, (begin, ends[number]))
                    begin = ends[number]
            else:
                # The run's rows as one piece, on its first partition (a message lists
                # its pieces in order, and the partitions' rows tell where each ends).
                items: list[tuple[tuple, Any]] = []  # (entry, its pieces: spans or none)
                before = begin
                for number in range(run, end):
                    items.append(((number, bucket, keys[number], ends[number] - before, True), ()))
                    before = ends[number]
                items[0] = (items[0][0], [(begin, before)])
                self._add_run(bucket, items, before - begin)
                begin = before
            run = end

    def _add_run(self, bucket: int, items: list[tuple[tuple, Any]], rows: int) -> None:
        """:meth:`_add` of whole partitions of ``bucket`` (not moving), all at once: ``rows``
        in all."""
        self.bucket_rows[bucket] = self.bucket_rows.get(bucket, 0) + rows
        self.recent[bucket] = self.recent.get(bucket, 0) + rows
        index = self.owner[bucket]
        self._pending[index].extend(items)
        self._pending_rows[index] += rows
        self.routed[index] += rows
        if self._pending_rows[index] >= self.chunk_rows:
            self._send(index)

    def _begin_partition(self, bucket: int) -> int:
        """Number the next partition and give its bucket an owner if it has none."""
        number = self.partitions
        self.partitions += 1
        self._order.append(number)
        if bucket not in self.owner:
            self.owner[bucket] = least_loaded(self._load())
        return number

    def _step(self, decide: bool = True) -> None:
        """Safe point (not inside a send): hand on snapshots, start migrations, send."""
        self._settle(decide)
        for index in range(len(self.workers)):
            if self._pending_rows[index] >= self.chunk_rows or (
                self._pending[index] and not self.routed_unmatched(index)
            ):
                self._send(index)

    def _settle(self, decide: bool = True) -> None:
        """Hand on the snapshots that arrived and start the migrations the policy asks for."""
        self._drain()
        while self._states:
            self._finish_migration(*self._states.popleft())
        if decide and self.policy is not None:
            for bucket, target in self.policy.decide(self._load()):
                self.migrate(bucket, target)
            self.recent = {}

    # -- routing ------------------------------------------------------------------------

    def _add(
        self, bucket: int, entry: tuple, piece: pa.RecordBatch | tuple[int, int] | None
    ) -> None:
        """Queue a piece of a partition (rows, or a range of the shared input) for the
        bucket's worker; a piece with ``entry``'s last mark and no rows ends it."""
        rows = entry[3]
        self.bucket_rows[bucket] = self.bucket_rows.get(bucket, 0) + rows
        self.recent[bucket] = self.recent.get(bucket, 0) + rows
        moving = self.migrating.get(bucket)
        if moving is not None:
            moving.buffered.append((entry, piece))
            moving.buffered_rows += rows
            return
        index = self.owner[bucket]
        pending = self._pending[index]
        if pending and pending[-1][0][0] == entry[0]:
            # The same partition's next piece (or its end): one entry of both, so the worker
            # sees it whole and matches it with the others of the message.
            last, pieces = pending[-1]
            pending[-1] = ((*last[:3], last[3] + rows, entry[4]), pieces)
        else:
            pieces = []
            pending.append((entry, pieces))
        if piece is not None and rows:
            pieces.append(piece)
        self._pending_rows[index] += rows
        self.routed[index] += rows
        if self._pending_rows[index] >= self.chunk_rows:
            self._send(index)

    def _send(self, index: int, whole: bool = False) -> None:
        """Send worker ``index``'s pending pieces; the partition still open at their end
        stays pending (unless ``whole``, or it is a message's worth of rows itself): sent
        with its end, it is matched with the others of its message, where a partition
        cut by a message's edge is a run of its own (a run per partition costs the
        worker a kernel call per piece and its matcher's set-up)."""
        pending = self._pending[index]
        if not pending:
            return
        # Back-pressure: a worker's queue stays short, so a snapshot request (which
        # waits behind it) is answered soon and the queue lengths mean something.
        while self.routed_unmatched(index) > self.max_queued_rows:
            self._wait()
            pending = self._pending[index]
        if not pending:
            return
        held: list = []
        if (
            HOLD_OPEN
            and not whole
            and not pending[-1][0][4]
            and pending[-1][0][3] < self.chunk_rows
        ):
            held = [pending.pop()]
            if not pending:
                pending.extend(held)
                return
        self._pending[index] = held
        self._pending_rows[index] = held[0][0][3] if held else 0
        pieces = [piece for _, batches in pending for piece in batches]
        if "sent" not in self.marks:
            self._mark("sent")
        entries = [entry for entry, _ in pending]
        if pieces and isinstance(pieces[0], tuple):  # ranges of the shared input
            # Runs of consecutive rows (a bucket's partitions lie together): the worker
            # finds the partitions in them by where they end.
            runs: list[list[int]] = []
            for start, stop in pieces:
                if runs and runs[-1][1] == start:
                    runs[-1][1] = stop
                else:
                    runs.append([start, stop])
            bounds = np.array(runs, np.int64).reshape(-1, 2)
            self._post(index, "take", take_bytes(entries, bounds[:, 0], bounds[:, 1]))
            return
        # The pieces go as they are (the worker concatenates them: that copy runs in
        # parallel there, not in this serial router). Written straight into the
        # worker's ring: one copy of the rows in this process.
        self._post(index, "data", Packed(entries, pieces))

    # -- migration ----------------------------------------------------------------------

    def migrate(self, bucket: int, target: int) -> bool:
        """Start moving ``bucket`` to worker ``target``; False when there is nothing to do."""
        source = self.owner.get(bucket)
        if source is None or source == target or bucket in self.migrating:
            return False
        # flush: the source gets every piece routed before the request
        self._send(source, whole=True)
        self.migrating[bucket] = Migration(bucket, source, target, time.perf_counter())
        self._post(source, "snapshot", None, bucket)
        return True

    def _finish_migration(self, bucket: int, state: bytes) -> None:
        moving = self.migrating.pop(bucket)
        self._post(moving.target, "restore", state, bucket)
        self.owner[bucket] = moving.target
        _, runs = loads(state)
        for entry, piece in moving.buffered:
            rows = entry[3]
            self.bucket_rows[bucket] -= rows  # _add counts them again
            self.recent[bucket] = self.recent.get(bucket, 0) - rows
            self._add(bucket, entry, piece)
        self._send(moving.target, whole=True)
        self.migrations.append(
            MigrationRecord(
                bucket,
                moving.source,
                moving.target,
                time.perf_counter() - moving.started,
                len(state),
                len(runs),
                moving.buffered_rows,
            )
        )
        self.pool.migrations += 1

    # -- the merge ---------------------------------------------------------------------------

    def _on_out(self, index: int, payload: bytes, extra) -> None:
        """Matches of sorted pieces: per partition number its rows of the answer's one
        batch, with its "done" mark."""
        entries, batches = unpack(payload)
        position = 0
        head, head_at = -1, 0  # the partition the rows from head_at on are filed under
        follows = -1  # the partition that may join head's run
        done_from = last_done = None  # the run of done partitions from head on
        for number, rows, done in entries:
            # A run of consecutive partitions, each done before the next begins and with
            # no rows filed before, is filed (and later passed on) as one slice.
            if number != follows or number in self._out:
                if position > head_at:
                    self._out.setdefault(head, []).append(
                        batches[0].slice(head_at, position - head_at)
                    )
                head, head_at = number, position
                self._mark_done(done_from, last_done)
                done_from = None
            position += rows
            if done:
                done_from = number if done_from is None else done_from
                last_done = number
            else:
                self._mark_done(done_from, last_done)
                done_from = None
            follows = number + 1 if done and self.consecutive_numbers else -1
        if position > head_at:
            self._out.setdefault(head, []).append(batches[0].slice(head_at, position - head_at))
        self._mark_done(done_from, last_done)
        self.done_rows[index] = extra

    def _mark_done(self, first, last) -> None:
        """Partitions ``first..last`` (consecutive numbers, their rows all filed under
        ``first``) are done; ``first`` None: none. A run is kept as its first and length, so
        :meth:`_ready` passes it on without a lookup per partition."""
        if first is None:
            return
        if last != first:
            self._through[first] = last - first + 1
        else:
            self._done.add(first)

    def _ready(self) -> Iterator[pa.RecordBatch]:
        """The matches of the leading partitions, as far as they are known."""
        out: list[pa.RecordBatch] = []
        while self._order:
            number = self._order[0]
            out += self._out.pop(number, ())
            length = self._through.pop(number, None)
            if length is not None:  # number and the length - 1 after it, in order
                for _ in range(length):
                    self._order.popleft()
                continue
            if number not in self._done:
                break
            self._done.discard(number)
            self._order.popleft()
        yield from coalesce(out)


def _stats(payload: bytes) -> tuple:
    """A worker's figures of its query (see :mod:`.process`)."""
    stats = loads(payload)
    if not (
        isinstance(stats, tuple)
        and len(stats) == 5
        and isinstance(stats[2], dict)
        and isinstance(stats[4], list)
    ):
        raise MessageError("a worker process message is unreadable: figures that are not figures")
    return stats


def _died(worker: Worker, how: str) -> ExecutionError:
    return WorkerLost(
        f"worker process {worker.index} (pid {worker.pid}) {how} while running the query; "
        "its partitions' matches are lost, so the query failed"
    )
