"""Continuous queries on workers: live batches split by partition key, runs kept by workers.

:class:`StreamRouter` stands in for :class:`~matchsql.execution.router.hashed.HashPartitionRouter`
(``route``, ``finish``, ``runs``, ``partitions``): a live batch is cut into
its partitions' pieces (the same cut), each partition key hashes into a
bucket, the pieces go to the buckets' workers, and the batch's matches come
back per key and are yielded in the order the keys first appear in the batch
- the order of ``workers = 1``. At end of stream the runs finish in the order
their keys first appeared. ``runs`` gathers every run's state from the
workers (a named continuous query's checkpoint) and setting it hands saved
runs to the workers (its resumption).

A batch is routed and answered before the next one, unless the caller has
the next batch at hand (``route(batch, more=True)``: history, or a backlog
of live tuples): then one batch stays in flight, and the router cuts the
next while the workers match it. Migrations happen between batches. The
State Transfer needs no buffering here: a worker serves its messages in
order, so the source snapshots the bucket after any batch still in flight
to it, and the router posts the restore before the bucket's next pieces;
the pause holds the stream for that long.

With push or adaptive input the router is also the query's
:class:`~matchsql.execution.adaptive.push.PushRuns`: the push thread reads the stream
into InputHolders, and :meth:`StreamRouter.feed` sends every ready holder's
tuples at once (one "batch" of distinct keys), so the workers match while the
push thread reads on. Each answer carries, per key, the rows its run keeps
and, once asked (``observe``), its Go4Risk counts: the switch and the input
metrics see the workers' runs as they would see runs in this process.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from matchsql.config import Config
from matchsql.engine.states import StateSpec
from matchsql.errors import internal_error
from matchsql.execution.adaptive.push import Fed
from matchsql.execution.router.hashed import HashPartitionRouter, KeyGroups
from matchsql.execution.router.parallel import coalesce
from matchsql.execution.router.partitions import PartitionRun, RunFactory, range_positions
from matchsql.execution.router.protocol import RoutesBatches
from matchsql.execution.workers.balance import Policy, least_loaded, rows_per_bucket, spread
from matchsql.execution.workers.frames import Packed, unpack
from matchsql.execution.workers.pool import WorkerPool
from matchsql.execution.workers.wire import dumps, loads, query_bytes
from matchsql.execution.workers.worker_router import MigrationRecord, WorkerChannels, bucket_of
from matchsql.plan.spec import MatchSpec
from matchsql.runtime.cancel import Cancellation
from matchsql.saved_state.snapshot import restore_like, snapshot_matcher

#: Batches a router may keep in flight beyond the one it is routing (``route(more=True)``):
#: one is enough for the workers to have the next batch queued while the router cuts.
IN_FLIGHT = 1


class Sent(NamedTuple):
    """A batch posted to the workers: its number, how many workers will answer it and
    each of its keys' worker (keys in order of first appearance)."""

    seq: int
    answers: int
    owners: np.ndarray


class StreamRouter(RoutesBatches, WorkerChannels):
    """A continuous query's partitions on the pool's workers."""

    def __init__(
        self,
        pool: WorkerPool,
        spec: MatchSpec,
        config: Config,
        cancel: Cancellation,
        new_run: RunFactory,
        *,
        live: bool,
        policy: Policy | None = None,
        on_close: Callable[[StreamRouter, bool], None] | None = None,
    ) -> None:
        super().__init__(pool, spec, config, cancel, policy=policy)
        self.new_run = new_run
        self.live = live
        self.on_close = on_close
        self._cut = HashPartitionRouter(spec.partition_by, new_run)  # the partition cut
        self.first: dict[tuple, int] = {}  # key -> bucket, in order of first appearance
        self._seq = 0
        self._flight: deque[tuple[Sent, float]] = deque()
        # Per batch (its seq, or "finish", "dump"), per worker: the entries and matches it
        # answered, or for "dump" None and its runs' states.
        self._answers: dict[object, dict[int, tuple[list | None, list]]] = {}
        self._buffered: dict[tuple, int] = {}  # rows each run keeps, per the last answer
        self._started = False
        self._ended_cleanly = False
        self.batch_latency_s: list[tuple[float, float]] | None = None  # (at, latency)

    def _start(self) -> None:
        if not self._started:
            payload = query_bytes(self.spec, self.config, self.live)
            for index in range(len(self.workers)):
                self._post(index, "stream", payload)
            self._started = True

    # -- the HashPartitionRouter interface ----------------------------------------------

    def route(self, batch: pa.RecordBatch, more: bool = False) -> Iterator[pa.RecordBatch]:
        """Feed ``batch``; yield its matches (final once its pieces were matched).

        With ``more`` (the caller has the next batch at hand) the batch may stay in
        flight: the matches yielded are those of the batches before it, and the
        router cuts the next batch while the workers match this one. Without it,
        every batch's matches are out when this returns. Either way they come out
        batch after batch, in the order of ``workers = 1``.
        """
        if batch.num_rows:
            groups = self._cut.groups(batch)
            started = time.perf_counter()
            self._flight.append((self._send(batch, groups), started))
        yield from self._collect(more)
        self._rebalance()

    def _collect(self, more: bool) -> Iterator[pa.RecordBatch]:
        """The matches of the batches in flight, oldest first: all of them, or (``more``)
        all but the last :data:`IN_FLIGHT`."""
        while self._flight and (not more or len(self._flight) > IN_FLIGHT):
            sent, started = self._flight.popleft()
            matches = _in_key_order(sent.owners, self._answered(sent, started))
            if matches is not None:
                yield matches

    # -- push and adaptive input (matchsql.execution.adaptive.push.PushRuns) ------------

    #: Every ready InputHolder goes out at once: the workers match them in parallel
    #: while the push thread reads on.
    take_all = True

    def observe(self, states: Sequence[StateSpec], label_state: Sequence[int]) -> None:
        """The workers' runs count Go4Risk statistics per tuple from now on."""
        self._start()
        payload = query_bytes(tuple(states), tuple(label_state))
        for index in range(len(self.workers)):
            self._post(index, "observe", payload)

    def feed(self, pieces: list[tuple[tuple, pa.RecordBatch]]) -> list[Fed]:
        """Each ``(key, rows)`` to its run on its worker; what each run made of them."""
        if not pieces:
            return []
        out = self._feed(pieces)
        self._rebalance()
        return [Fed(key, *out[key]) for key, _ in pieces]

    def _feed(
        self, pieces: list[tuple[tuple, pa.RecordBatch]]
    ) -> dict[tuple, tuple[list[pa.RecordBatch], Any, int]]:
        """Send one batch's pieces (distinct keys) to their workers and wait for every
        answer: per key, its matches, its statistics (or None) and its buffered rows."""
        self._settle()
        started = time.perf_counter()
        counts = np.array([rows.num_rows for _, rows in pieces], np.int64)
        n = int(counts.sum())
        groups = KeyGroups(
            [key for key, _ in pieces],
            np.repeat(np.arange(len(pieces)), counts),
            np.arange(n),
            counts,
        )
        batch = pa.concat_batches([rows for _, rows in pieces]) if len(pieces) > 1 else pieces[0][1]
        return _by_key(self._answered(self._send(batch, groups), started))

    def _send(self, batch: pa.RecordBatch, groups: KeyGroups) -> Sent:
        """Post ``batch`` to the workers of its partitions (``groups``). Each worker gets its
        partitions' rows as one batch, partition after partition (one take here; many
        small IPC batches cost more to write and read than one copy of the rows)."""
        self._start()
        self._check()
        counts = groups.counts.tolist()
        buckets = self._place_new_buckets(groups.keys, counts)
        owner = self.owner
        owners = np.fromiter((owner[bucket] for bucket in buckets), np.int64, len(buckets))
        for bucket, n in rows_per_bucket(buckets, counts).items():  # the load figures, per bucket
            self.routed[owner[bucket]] += n
            self.bucket_rows[bucket] = self.bucket_rows.get(bucket, 0) + n
            self.recent[bucket] = self.recent.get(bucket, 0) + n
        # The keys by worker, each worker's in order of first appearance (a stable sort of
        # a few hundred keys), then their rows: one take of the rows grouped by key.
        by_worker = np.argsort(owners, kind="stable")
        sizes = groups.counts[by_worker]
        firsts = (np.cumsum(groups.counts) - groups.counts)[by_worker]
        order = groups.order[range_positions(firsts, sizes)]
        taken = batch.take(pa.array(order))
        seq = self._seq
        self._seq += 1
        keys, places = groups.keys, by_worker.tolist()
        workers = np.unique(owners).tolist()
        bounds = np.searchsorted(owners[by_worker], workers + [len(self.workers)]).tolist()
        rows_before = np.concatenate(([0], np.cumsum(sizes))).tolist()
        for index, low, high in zip(workers, bounds, bounds[1:]):
            mine = [(keys[k], buckets[k], counts[k]) for k in places[low:high]]
            rows = taken.slice(rows_before[low], rows_before[high] - rows_before[low])
            # Written straight into the worker's ring (one copy of the rows, not two).
            self._post(index, "feed", Packed(mine, [rows]), seq)
        return Sent(seq, len(workers), owners)

    def _answered(self, sent: Sent, started: float) -> dict[int, tuple]:
        """The answers to batch ``sent`` (per worker: its entries and matches), once
        every worker gave its own."""
        answers = self._gather_raw(sent.seq, sent.answers)
        for entries, _ in answers.values():
            for key, _, _, buffered in entries:
                self._buffered[key] = buffered
        if self.batch_latency_s is not None:
            self.batch_latency_s.append((started, time.perf_counter() - started))
        return answers

    def _settle(self) -> None:
        """No batch may be in flight here (its matches would be yielded late or lost)."""
        if self._flight:
            raise internal_error(RuntimeError("a batch is still in flight"))

    def _place_new_buckets(self, keys: list[tuple], counts: list[int]) -> list[int]:
        """Each key's bucket; every bucket this batch meets for the first time gets an
        owner, all at once by their rows in the batch (LPT on top of the rows routed so
        far): placed one by one as met, a bucket would go by the load before the
        batch's later partitions of the same bucket were counted, which left one worker
        20% busier on evenly loaded partitions."""
        first = self.first
        buckets = [first.get(key, -1) for key in keys]
        if -1 in buckets:  # keys met for the first time
            for i, key in enumerate(keys):
                if buckets[i] < 0:
                    buckets[i] = first[key] = bucket_of(key, self.buckets)
                    self.partitions += 1
            new = {
                bucket: n
                for bucket, n in rows_per_bucket(buckets, counts).items()
                if bucket not in self.owner
            }
            if new:
                self.owner.update(spread(new, len(self.workers), self.routed))
        return buckets

    @property
    def in_flight(self) -> int:
        """Batches routed whose matches are not out yet (``route(more=True)``)."""
        return len(self._flight)

    @property
    def buffered_rows(self) -> int:
        """Rows the runs keep, as the workers last said (the Mem of the input metrics)."""
        return sum(self._buffered.values())

    def finish(self) -> Iterator[pa.RecordBatch]:
        """End of stream: every run finishes; the pool is free again."""
        yield from self._collect(more=False)  # the batches still in flight first
        self._start()
        for index in range(len(self.workers)):
            self._post(index, "finish", None, "finish")
        out = _by_key(self._gather_raw("finish", len(self.workers)))
        self._end()
        self._buffered = {}
        yield from coalesce([b for key in self.first if key in out for b in out[key][0]])

    @property
    def runs(self) -> dict[tuple, PartitionRun]:
        """Every open run, rebuilt in this process from the workers' state (a checkpoint)."""
        if self._ended_cleanly:
            return {}  # finished: no run is open
        self._settle()
        self._start()
        for index in range(len(self.workers)):
            self._post(index, "dump", None, "dump")
        states: dict[tuple, bytes] = {}
        for _, payload in self._gather_raw("dump", len(self.workers)).values():
            for key, _, data in payload:
                states[key] = data
        runs = {}
        for key in self.first:
            if key in states:
                runs[key] = restore_like(self.new_run(key), states[key])
        return runs

    @runs.setter
    def runs(self, runs: dict[tuple, PartitionRun]) -> None:
        """Hand saved runs to the workers (a resumed query); they replace any there."""
        self._start()
        per: dict[int, list[tuple]] = {index: [] for index in range(len(self.workers))}
        self.first = {}
        for key, run in runs.items():
            bucket = self.first[key] = bucket_of(key, self.buckets)
            index = self.owner.get(bucket)
            if index is None:
                index = self.owner[bucket] = least_loaded(self._load())
            per[index].append((key, bucket, snapshot_matcher(run)))
        self.partitions = len(self.first)
        for index, state in per.items():
            self._post(index, "load", dumps(state))

    # -- migration ------------------------------------------------------------------------

    def _rebalance(self) -> None:
        if self.policy is None:
            return
        self._drain()
        for bucket, target in self.policy.decide(self._load()):
            self.migrate(bucket, target)
        self.recent = {}

    def migrate(self, bucket: int, target: int) -> bool:
        """Move ``bucket``'s runs to worker ``target`` now (between batches)."""
        source = self.owner.get(bucket)
        if source is None or source == target:
            return False
        started = time.perf_counter()
        self._post(source, "snapshot", None, bucket)
        while not self._states:
            self._wait()
        _, state = self._states.popleft()
        self._post(target, "restore", state, bucket)
        self.owner[bucket] = target
        runs = loads(state)[1]
        self.migrations.append(
            MigrationRecord(
                bucket, source, target, time.perf_counter() - started, len(state), len(runs), 0
            )
        )
        self.pool.migrations += 1
        return True

    # -- answers ----------------------------------------------------------------------------

    def _gather_raw(self, seq: object, answers: int) -> dict[int, tuple]:
        while len(self._answers.get(seq, ())) < answers:
            self._wait()
        return self._answers.pop(seq)

    def _on_out(self, index: int, payload: bytes, extra) -> None:
        seq, rows = extra
        self._answers.setdefault(seq, {})[index] = unpack(payload)
        self.done_rows[index] = rows

    def _answer(self, index: int, kind: str, payload: bytes, extra) -> None:
        if kind == "finished":
            self._on_out(index, payload, extra)
        elif kind == "dump":
            self._answers.setdefault(extra, {})[index] = (None, loads(payload))
        else:
            super()._answer(index, kind, payload, extra)

    # -- the end ----------------------------------------------------------------------------

    def _end(self) -> None:
        for index in range(len(self.workers)):
            self._post(index, "end")
        while self._ended < len(self.workers):
            self._wait()
        self._ended_cleanly = True

    def close(self) -> None:
        """Give the pool back: as it is after a clean end, else killed (state unknown)."""
        if self.on_close is not None:
            on_close, self.on_close = self.on_close, None
            on_close(self, self._ended_cleanly)


def _by_key(answers: dict[int, tuple]) -> dict[tuple, tuple[list[pa.RecordBatch], Any, int]]:
    """Per key of the workers' ``answers``: its matches, its statistics (or None) and the
    rows its run keeps. A worker's matches are one batch, key after key."""
    out: dict[tuple, tuple[list[pa.RecordBatch], Any, int]] = {}
    for entries, batches in answers.values():
        position = 0
        for key, count, counts, buffered in entries:
            out[key] = ([batches[0].slice(position, count)] if count else [], counts, buffered)
            position += count
    return out


def _in_key_order(owners: np.ndarray, answers: dict[int, tuple]) -> pa.RecordBatch | None:
    """The matches of the workers' ``answers`` to one batch, those of its first key first,
    then those of its second, ... (the order of ``workers = 1``), as one batch taken from
    the workers' batches; None where there are none. ``owners``: each key's worker, keys
    in order of first appearance. A worker answers its keys in the order they were sent
    to it, which is that order too, so a key's place among its worker's entries is its
    place among the keys of that worker."""
    parts: list[pa.RecordBatch] = []
    firsts = np.zeros(len(owners), np.int64)  # each key's first row in the parts joined
    sizes = np.zeros(len(owners), np.int64)
    position = 0
    for index, (entries, batches) in answers.items():
        parts += batches[:1]  # none where the worker's keys have no matches
        counts = np.fromiter((entry[1] for entry in entries), np.int64, len(entries))
        mine = owners == index
        if int(np.count_nonzero(mine)) != len(entries):
            raise internal_error(RuntimeError("a worker answered for other keys than it was sent"))
        sizes[mine] = counts
        firsts[mine] = position + np.cumsum(counts) - counts
        position += int(counts.sum())
    if not parts:
        return None
    joined = parts[0] if len(parts) == 1 else pa.concat_batches(parts)
    return joined.take(pa.array(range_positions(firsts, sizes)))
