"""Where buckets go: route-key balancing at first sight, then migrations from load metrics.

UPM-CEP assigns each route key (here: a bucket of partition keys) to an
instance manager and lets a metric server move hot keys off saturated
instances. :func:`least_loaded` is the first part: a bucket met for the
first time goes to the worker with the fewest rows routed so far (the
measured load: every row costs the same matcher work to first order);
where the new buckets' rows are known before any is routed (a grouped input,
or a live batch), :func:`spread` places them all at once, largest first. The
buckets of a one-time query's grouped input, where every partition and its
rows are known, are runs of consecutive partitions (:func:`in_ranges`).
:class:`Rebalancer` is the second: when one worker's queue (rows sent and
not yet matched) runs well ahead of the others', its busiest bucket of the
recent past moves to the least queued worker, at most one move in flight.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class Load:
    """What a policy sees: per worker, rows routed and rows still queued; per bucket,
    its owner and rows routed since the last decision."""

    routed: Sequence[int]
    queued: Sequence[int]
    owner: dict[int, int]
    recent: dict[int, int]
    migrating: frozenset[int]
    total: dict[int, int] = field(default_factory=dict)  # rows routed per bucket so far


class Policy(Protocol):
    def decide(self, load: Load) -> list[tuple[int, int]]:
        """Migrations to start now, as ``(bucket, target worker)``."""


def least_loaded(load: Load) -> int:
    """The worker a new bucket goes to."""
    return min(range(len(load.routed)), key=lambda w: (load.routed[w], w))


def rows_per_bucket(buckets: Sequence[int], rows: Sequence[int]) -> dict[int, int]:
    """The rows of each bucket, from each partition's bucket and rows."""
    sums: dict[int, int] = {}
    for bucket, n in zip(buckets, rows):
        sums[bucket] = sums.get(bucket, 0) + n
    return sums


def charge(
    cpu_ns: dict[int, int], spent_ns: int, buckets: Sequence[int], rows: Sequence[int]
) -> None:
    """Add ``spent_ns`` of a message's CPU to ``cpu_ns`` per bucket, shared by the rows
    each bucket had in it: the clock is read once per message, not once per partition
    (a read of the CPU clock is a system call)."""
    total = sum(rows) or 1
    for bucket, n in rows_per_bucket(buckets, rows).items():
        cpu_ns[bucket] = cpu_ns.get(bucket, 0) + spent_ns * n // total


def spread(
    bucket_rows: dict[int, int], workers: int, loads: Sequence[int] | None = None
) -> dict[int, int]:
    """Owners for buckets whose rows are known before the first is routed (a one-time
    query's grouped input, or the buckets a live batch meets for the first time):
    largest bucket first, each to the worker with the fewest rows so far (LPT, from
    ``loads``: rows each worker has been routed already), so the workers finish
    together; ties to the lowest number."""
    loads = list(loads) if loads is not None else [0] * workers
    owner: dict[int, int] = {}
    for bucket in sorted(bucket_rows, key=lambda b: (-bucket_rows[b], b)):
        worker = min(range(workers), key=lambda w: (loads[w], w))
        owner[bucket] = worker
        loads[worker] += bucket_rows[bucket]
    return owner


def in_ranges(rows: np.ndarray, buckets: int) -> np.ndarray:
    """Each partition's bucket, for partitions whose rows (``rows``, in output order) are
    all known before the first is routed: a bucket is a run of consecutive partitions of
    about ``1 / buckets`` of the rows (by where a partition's middle row lies).

    A worker's answer then holds runs of consecutive partitions, each passed on by the
    router as one piece. Buckets of hashed keys interleave the workers' partitions one
    by one, and the merge in partition order is then a slice and a copy per partition,
    in the router's one process while the workers match (1M rows of 500 partitions, 2
    workers: 3 ms of the router's CPU). The owners are still spread by rows
    (:func:`spread`), not given a run of buckets each: partitions next to each other in
    key order may cost alike, and a worker with all the costly ones would finish last."""
    rows = np.asarray(rows, np.int64)
    total = max(int(rows.sum()), 1)
    middles = np.cumsum(rows) - rows + rows // 2
    return np.minimum(middles * buckets // total, buckets - 1)


class Rebalancer:
    """Moves the busiest bucket off a worker whose queue is ``ratio`` times the shortest."""

    def __init__(self, ratio: float = 2.0, min_rows: int = 200_000) -> None:
        self.ratio = ratio
        self.min_rows = min_rows

    def decide(self, load: Load) -> list[tuple[int, int]]:
        if load.migrating or len(load.queued) < 2:
            return []
        busy = max(range(len(load.queued)), key=lambda w: load.queued[w])
        idle = min(range(len(load.queued)), key=lambda w: load.queued[w])
        if load.queued[busy] < self.min_rows or load.queued[busy] < self.ratio * max(
            1, load.queued[idle]
        ):
            return []
        mine = [b for b, w in load.owner.items() if w == busy]
        if len(mine) < 2:
            return []  # moving a worker's only bucket just moves the hot spot
        hottest = max(mine, key=lambda b: (load.recent.get(b, 0), -b))
        if load.recent.get(hottest, 0) == 0:
            return []
        return [(hottest, idle)]


class RandomMigrations:
    """Moves a random bucket to a random other worker with probability ``rate`` per
    decision: the fault injector of the differential tests."""

    def __init__(self, seed: int, rate: float = 0.5) -> None:
        self.random = random.Random(seed)
        self.rate = rate
        self.started = 0

    def decide(self, load: Load) -> list[tuple[int, int]]:
        workers = len(load.routed)
        candidates = sorted(b for b in load.owner if b not in load.migrating)
        if workers < 2 or not candidates or self.random.random() >= self.rate:
            return []
        bucket = self.random.choice(candidates)
        target = self.random.choice([w for w in range(workers) if w != load.owner[bucket]])
        self.started += 1
        return [(bucket, target)]
