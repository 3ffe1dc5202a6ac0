"""The worker's side of a continuous query: one long-lived run per partition key.

Live tuples arrive in time order, not by partition (see
:class:`~matchsql.execution.router.hashed.HashPartitionRouter`, which this mirrors for
the keys of this worker's buckets). Notices:

* ``feed``: pieces of one input batch, one per partition key in the order
  the keys first appear in that batch; the answer ``out`` holds each key's
  matches, in the same order;
* ``finish``: end of stream; every run finishes, in the order the keys
  first came to this worker (``finished``);
* ``snapshot`` / ``restore``: a bucket's runs leave / join (migration);
* ``dump`` / ``load``: every run's state, for a checkpoint / from one;
* ``observe``: runs count Go4Risk statistics per tuple from now on (adaptive
  input); each key of an answer then carries its run's counts.

Each key of an answer also carries the rows its run keeps (the input
metrics' Mem, and the push switch's view of the InputHolders).
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from matchsql.config import Config
from matchsql.engine.matcher import Matcher
from matchsql.engine.planner import new_partition_matcher
from matchsql.errors import Error
from matchsql.execution.workers.balance import charge
from matchsql.execution.workers.channel import RingWriter
from matchsql.execution.workers.frames import Packed, unpack
from matchsql.execution.workers.wire import dumps, loads, query_of
from matchsql.execution.workers.worker_matching import cast
from matchsql.plan.spec import MatchSpec
from matchsql.saved_state.snapshot import restore_like, snapshot_matcher


class Streamed:
    """One continuous query's runs on this worker, by partition key."""

    def __init__(self, index: int, spec: MatchSpec, config: Config, live: bool) -> None:
        self.index = index
        self.spec = spec
        self.config = config
        self.live = live
        self.schema = spec.output_schema()
        self.runs: dict[tuple, tuple[int, Matcher]] = {}  # key -> (bucket, run)
        self.failed = False
        self.rows = 0
        self.busy_ns = 0
        self.bucket_ns: dict[int, int] = {}
        self.observing: tuple | None = None  # (states, label_state) of adaptive input
        self.counting: dict[tuple, bool] = {}  # per key: whether its run counts per tuple

    def _new(self, key: tuple) -> Matcher:
        return new_partition_matcher(self.spec, key, self.config, live=self.live)

    def serve(self, writer: RingWriter, kind: str, payload: bytes, extra: Any) -> None:
        if kind == "feed":
            self.feed(writer, *unpack(payload), extra)
        elif kind == "finish":
            out = [(key, run.finish()) for key, (_, run) in self.runs.items()]
            self.runs = {}
            self._send(writer, "finished", out, extra)
        elif kind == "snapshot":
            moving = [key for key, (bucket, _) in self.runs.items() if bucket == extra]
            for key in moving:
                self.counting.pop(key, None)
            state = [(key, extra, snapshot_matcher(self.runs.pop(key)[1])) for key in moving]
            writer.send("state", dumps((extra, state)), extra)
        elif kind == "restore":
            self._load(loads(payload)[1])
        elif kind == "dump":
            state = [
                (key, bucket, snapshot_matcher(run)) for key, (bucket, run) in self.runs.items()
            ]
            writer.send("dump", dumps(state), extra)
        elif kind == "load":
            self.runs = {}
            self._load(loads(payload))
        elif kind == "observe":
            self.observing = query_of(payload)
            self.counting = {}

    def feed(
        self, writer: RingWriter, entries: list[tuple], batches: list[pa.RecordBatch], seq: int
    ) -> None:
        rows = pa.concat_batches(batches) if len(batches) > 1 else (batches[0] if batches else None)
        out = []
        offset = 0
        runs = self.runs
        observing = self.observing is not None
        started = time.process_time_ns()
        for key, bucket, count in entries:
            held = runs.get(key)
            if held is None:
                run = self._new(key)
                runs[key] = (bucket, run)
            else:
                run = held[1]
            if observing:
                self._counting(key, run)
            assert rows is not None
            out.append((key, run.feed(rows.slice(offset, count))))
            offset += count
        self.rows += offset
        charge(
            self.bucket_ns,
            time.process_time_ns() - started,
            [e[1] for e in entries],
            [e[2] for e in entries],
        )
        self._send(writer, "out", out, seq)

    def _send(
        self, writer: RingWriter, kind: str, out: list[tuple[tuple, list[pa.RecordBatch]]], seq: Any
    ) -> None:
        entries = []
        batches: list[pa.RecordBatch] = []
        runs, counting, schema = self.runs, self.counting, self.schema
        for key, produced in out:
            if produced:
                produced = [cast(b, schema) for b in produced if b.num_rows]
                batches += produced
            held = runs.get(key)
            counts, buffered = None, 0
            if held is not None:
                run = held[1]
                buffered = int(run.buffered_rows)
                counts = run.state_counts() if counting.get(key) else None
            entries.append((key, sum(b.num_rows for b in produced), counts, buffered))
        # The keys' matches as one batch (each key's rows counted in its entry): hundreds
        # of small IPC batches cost more to write and read than one copy of the rows. It
        # is written straight into the ring.
        joined = [pa.concat_batches(batches)] if len(batches) > 1 else batches
        writer.send(kind, Packed(entries, joined, schema), (seq, self.rows))

    def _counting(self, key: tuple, run: Matcher) -> bool:
        """Whether ``key``'s run counts statistics (asked once per run, when observing)."""
        if self.observing is None:
            return False
        counting = self.counting.get(key)
        if counting is None:
            counting = self.counting[key] = bool(run.observe(*self.observing))
        return counting

    def _load(self, state: list[tuple[tuple, int, bytes]]) -> None:
        for key, bucket, data in state:
            run = restore_like(self._new(key), data)
            if run is None:
                raise Error("a partition's state did not restore on a worker")
            self.runs[key] = (bucket, run)
