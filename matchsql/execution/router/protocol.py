"""What every router does, so that callers never ask a router what kind it is.

A router takes a query's input batches, hands each partition's rows to that
partition's run (a :class:`~matchsql.execution.router.partitions.PartitionRun`) and gives
back the runs' output in order. Two shapes follow from the input:

* :class:`Router`: the whole input at once (``run``), for one-time queries;
  the parallel, worker and scatter routers read ahead, so they only have this
  shape.
* :class:`LiveRouter`: one batch at a time (``route``), keeping runs open
  between batches, until ``finish``; for live streams, hybrid and continuous
  queries and sorted one-time input. Every live router is a :class:`Router`
  too, through :class:`RoutesBatches`.

Both are closed after use, a clean end or not (a router of worker processes
gives its pool back then).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import pyarrow as pa


class Router(Protocol):
    """The matches of every partition of a query's input, in the sequential order."""

    def run(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]: ...

    def close(self) -> None: ...


class LiveRouter(Router, Protocol):
    """A router fed one batch at a time, its runs open until :meth:`finish`."""

    def route(self, batch: pa.RecordBatch, more: bool = False) -> Iterator[pa.RecordBatch]:
        """Feed ``batch``; yield every output batch that became final. ``more``: the
        caller has the next batch at hand (a router of worker processes may keep this
        one in flight)."""
        ...

    def finish(self) -> Iterator[pa.RecordBatch]:
        """End of input: every run finishes."""
        ...

    @property
    def buffered_rows(self) -> int:
        """Rows the runs keep (their InputHolders), for the input metrics."""
        ...


class RoutesBatches:
    """:meth:`Router.run` and :meth:`Router.close` for a live router: every batch
    routed, then the end. (A live router that holds nothing to give back inherits
    the empty ``close``.)"""

    def route(self, batch: pa.RecordBatch, more: bool = False) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def finish(self) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def run(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from self.route(batch)
        yield from self.finish()

    def close(self) -> None:
        return None
