"""A stream's tuples in sequence order, each exactly once: the archive's history, then the
live tail. The one handover from archive to live.

Every reader of a stream with an archive (a one-time query over the stream, a
hybrid MATCH_RECOGNIZE, plain SQL over the stream, a continuous query replaying
from its checkpoint) needs the same guarantee: no tuple missed between the
history and the live tail, none read twice. The rule that gives it, written
here only:

* the reader joins the archive *before* its ring position is claimed
  (:meth:`LiveReader.take_archive` then :meth:`LiveReader.open`), so no tuple
  leaves the ring unarchived while the history is being read;
* the history ends at the last archived sequence number ``k``; live tuples
  with a sequence number up to ``k`` were read as history and are skipped,
  a live batch that straddles ``k`` is cut.

``next_seq`` is the sequence number of the next tuple a caller will receive;
a continuous query stores it as its position in each checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from matchsql.storage.archive import Archive
from matchsql.storage.live_reader import LiveReader

T = TypeVar("T")


class LiveSource:
    """History from ``since`` on (when read), then the live tail, for one :class:`LiveReader`.

    Construct it before ``reader.open()``: joining the archive first is what
    leaves no gap. ``con`` writes the archive (the reader may lead its
    archiving); the history is read through a cursor of it."""

    def __init__(
        self,
        reader: LiveReader,
        con: duckdb.DuckDBPyConnection,
        batch_rows: int,
        *,
        since: int = 0,
    ) -> None:
        self.reader = reader
        self.batch_rows = batch_rows
        self.next_seq = since
        self.archive: Archive | None = reader.take_archive(con)
        self._cursor = con.cursor() if self.archive is not None else None

    def history(self) -> Iterator[tuple[pa.RecordBatch, bool]]:
        """The archived tuples from ``next_seq`` on: ``(batch, whether another follows)``.

        The flag lets a router of worker processes keep a batch in flight while
        the next one is read."""
        if self.archive is None or self._cursor is None:
            return
        pieces = self.archive.history(self._cursor, self.batch_rows, since=self.next_seq)
        for (last, batch), more in with_more(pieces):
            self.next_seq = last + 1
            yield batch, more

    def skip_history(self) -> None:
        """Start the live tail after the archive's last tuple (a query that wants only
        what arrives from now on)."""
        if self.archive is not None and self._cursor is not None:
            self.next_seq = max(self.next_seq, self.archive.last_seq(self._cursor) + 1)

    def live(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        """Live tuples from ``next_seq`` on (those before it were read as history).

        Yields ``(batch, enqueue_sum_ns)``: the sum of the batch's tuples' enqueue
        instants (monotonic ns), for the latency metric."""
        reader = self.reader
        while (item := reader.read()) is not None:
            first, batch = item
            enqueue_sum_ns = reader.last_enqueue_sum_ns
            if first + batch.num_rows <= self.next_seq:
                continue  # already archived (and read as history)
            if first < self.next_seq:
                rows = batch.num_rows
                batch = batch.slice(self.next_seq - first)
                first = self.next_seq
                enqueue_sum_ns = enqueue_sum_ns * batch.num_rows // rows  # rows * mean enqueue
            self.next_seq = first + batch.num_rows
            yield batch, enqueue_sum_ns

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Every tuple's batch: the history, then the live tail, until end of stream."""
        for batch, _ in self.history():
            yield batch
        for batch, _ in self.live():
            yield batch

    def close(self) -> None:
        """Close the history's cursor (the reader is its owner's to close)."""
        if self._cursor is not None:
            self._cursor.close()
            self._cursor = None


_END: Any = object()  # no item (an iterator's end: items may be None)


def with_more(items: Iterable[T]) -> Iterator[tuple[T, bool]]:
    """``(item, whether another item follows)`` for each item, one item read ahead."""
    iterator = iter(items)
    previous = next(iterator, _END)
    while previous is not _END:
        item = next(iterator, _END)
        yield previous, item is not _END
        previous = item
