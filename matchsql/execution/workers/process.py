"""The worker process: runs the partition matchers of the buckets routed to it.

A worker serves one query at a time, for the life of its pool. It takes
notices in order from its input channel, so everything the router sent for
a bucket before a snapshot request has been matched when the snapshot is
taken (the State Transfer protocol's "flush" needs nothing more):

* ``query``: the MatchSpec and Config of the next query (:func:`.wire.query_bytes`); ``gather``
  and ``stream`` start the other kinds of query (:mod:`.gather`, :mod:`.stream_runs`);
* ``data``: pieces of partitions, one Arrow batch, in input order per partition;
  a partition's last piece finishes its run;
* ``share`` / ``take``: the query's grouped input lies in shared memory
  (:mod:`.shared_rows`); a ``take`` names ranges of it, and is served as a
  ``data`` of those rows;
* ``snapshot`` / ``restore``: a bucket's open runs leave / join this worker;
* ``end``: the query is over; ``stop``: exit.

It answers with ``out`` (matches per partition, in order), ``state``,
``error`` (the first matchsql error of the query; the rest of the query is
skipped) and ``ended`` (the query's figures: rows, CPU serving messages, per
bucket and in all, and when each message was served, for the bench's timeline).

Every payload is read with :mod:`.wire` (or :mod:`.frames`): nothing read from the
channel is unpickled.
"""

from __future__ import annotations

import os
import signal
import time
from collections import OrderedDict
from collections.abc import Callable
from multiprocessing.connection import Connection

from matchsql.errors import Error, internal_error
from matchsql.execution.workers import segments
from matchsql.execution.workers.channel import RingReader, RingWriter
from matchsql.execution.workers.gather import Gather
from matchsql.execution.workers.shared_rows import Attached, SharedLayout
from matchsql.execution.workers.stream_runs import Streamed
from matchsql.execution.workers.wire import dumps, error_bytes, query_of
from matchsql.execution.workers.worker_matching import Query
from matchsql.runtime.allocator import keep_freed_memory

#: The first notice of a query names its kind: sorted pieces, rows to sort, a live stream.
KINDS = {"query": Query, "gather": Gather, "stream": Streamed}
#: Queries (their message bytes: spec and settings) whose built objects a worker keeps.
KEPT_QUERIES = 8


def main(
    prefix: str,
    index: int,
    inbox: Connection,
    inbox_name: str,
    outbox: Connection,
    outbox_name: str,
    capacity: int,
    *,
    greeted: Callable[[], None] = lambda: None,
) -> None:
    """The worker's loop (run by :func:`matchsql.execution.workers.boot.start`, the spawned target).

    The outbox is made under the name the pool chose (``outbox_name``), and payloads too
    large for it under the pool's ``prefix``: the pool can remove them even if this
    process dies before saying their names (see :mod:`.segments`). ``greeted`` runs just before
    the router is greeted (the boot module clears the start-up death signal there)."""
    # Ctrl-C in a terminal reaches the whole process group: the router turns it into an
    # interrupt of the statement (which kills this pool); dying here on our own would
    # report a lost worker instead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_freed_memory()  # this process is ours: its messages' buffers stay warm
    reader = RingReader(inbox, inbox_name, capacity)
    writer = RingWriter(outbox, capacity, name=outbox_name, prefix=prefix)
    # The start-up death signal goes before the greeting, not after: the thread that
    # started the pool may end as soon as every worker has greeted (a spare pool's does).
    # From here on the orphan watch of boot.watch_parent covers a router that dies.
    greeted()
    outbox.send(("hello", writer.name, os.getpid()))
    query: Query | Gather | Streamed | None = None
    attached = Attached()  # the router's shared input segments, mapped once
    kept: OrderedDict[bytes, tuple] = OrderedDict()
    cpu_ns = 0  # the process's CPU when the query began
    spans: list[tuple[str, float, float]] = []  # (kind, start, end) of each message served
    try:
        while True:
            try:
                kind, payload, extra = reader.receive()
            except EOFError:
                # The router's process is gone (a live router kills its workers before it
                # closes their channels): nobody else frees the pool's shared memory.
                segments.sweep(prefix)
                return
            except OSError:
                return  # the router's process is gone
            if kind != "take" and isinstance(query, Query):
                query.flush(writer)  # its kept answers go first (see Query.flush)
            if kind == "stop":
                return
            if kind in KINDS:
                cpu_ns, spans = time.process_time_ns(), []
                try:
                    query = KINDS[kind](index, *_query(kept, payload))
                except Error as err:  # a message it will not read: the query fails
                    query = None
                    writer.send("error", error_bytes(err))
                except Exception as exc:
                    query = None
                    writer.send("error", error_bytes(internal_error(exc)))
                continue
            if kind == "end":
                stats = (
                    (
                        query.rows,
                        query.busy_ns,
                        query.bucket_ns,
                        time.process_time_ns() - cpu_ns,
                        spans,
                    )
                    if query is not None
                    else (0, 0, {}, 0, [])
                )
                query = None
                attached.ended()
                writer.send("ended", dumps(stats))
                continue
            if query is None or query.failed:
                continue
            started, began = time.process_time_ns(), time.perf_counter()
            try:
                if kind == "share" and isinstance(query, Query):
                    query.shared = attached.rows(SharedLayout.of(payload))
                else:
                    query.serve(writer, kind, payload, extra)
            except Error as err:
                query.failed = True
                writer.send("error", error_bytes(err))
            except MemoryError:
                query.failed = True
                writer.send("error", error_bytes(Error("a worker process ran out of memory")))
            except Exception as exc:  # a bug in the engine: a one-line error, no traceback
                query.failed = True
                writer.send("error", error_bytes(internal_error(exc)))
            if isinstance(query, Query) and query.deferred and not reader.poll(0):
                query.flush(writer)
            query.busy_ns += time.process_time_ns() - started
            spans.append((kind, began, time.perf_counter()))
    finally:
        query = None
        attached.release()
        reader.close()
        writer.close()


def _query(kept: OrderedDict[bytes, tuple], payload: bytes) -> tuple:
    """A query's spec and settings; the same objects as last time for the same bytes.

    Compiled plans are kept in each spec's own memo (planner._plan): a query
    run again (the same statement, or a prepared one) then finds its plan
    built, where a freshly read spec would build it again in every worker
    (about 3 ms each, 1M-row Q2) while the router reads the input.
    """
    found = kept.get(payload)
    if found is None:
        found = kept[payload] = query_of(payload)
        if len(kept) > KEPT_QUERIES:
            kept.popitem(last=False)
    else:
        kept.move_to_end(payload)
    return found
