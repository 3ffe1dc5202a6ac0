"""Source: a Structured Streaming query as the producer of a matchsql live stream.

``write_stream`` attaches a ``foreachBatch`` sink. Each micro-batch is
collected to the driver as Arrow (the live store is a local shared-memory
queue, so the driver is where it must be written anyway) and written with
``Producer.write_batch(..., batch_id=<Spark batch id>)``.

Retries do not duplicate tuples. Spark re-runs a micro-batch after a failure
or a restart with the same batch id; the producer slot of the sink's
``name`` remembers the last batch id and how many of its rows went out, so a
re-run batch is skipped, or resumed right after the rows already published.
Resuming is exact because every micro-batch is written in one deterministic
row order (``order_by`` first, then every other sortable column), so a
re-run of the same data yields the same row sequence. The name must stay the
same across restarts (the default derives it from the stream name).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from matchsql.integrations.spark.schema import require_pyspark
from matchsql.storage import Producer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery


class LiveStreamWriter:
    """The running Spark query that feeds a live stream, and the producer it writes with.

    Stopping it (:meth:`stop`) also closes the producer, which marks end of
    stream unless ``end_of_stream=False`` (for a query to be restarted later).
    Every other attribute is the underlying ``StreamingQuery``'s.
    """

    def __init__(self, stream: str, database: str | None, name: str, order_by: list[str]) -> None:
        self.stream = stream
        self.database = database
        self.name = name
        self.order_by = order_by
        self.query: StreamingQuery | None = None
        self.batches_written = 0
        self.batches_skipped = 0
        self._producer: Producer | None = None
        self._lock = threading.Lock()

    def write_batch(self, batch_df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` function (runs on the driver)."""
        table = deterministic_order(batch_df.toArrow(), self.order_by)
        with self._lock:
            if self._producer is None:
                self._producer = Producer.open(self.stream, self.database, name=self.name)
            if self._producer.write_batch(table, batch_id=int(batch_id)):
                self.batches_written += 1
            else:
                self.batches_skipped += 1

    def await_termination(self, timeout: float | None = None) -> bool | None:
        assert self.query is not None
        return self.query.awaitTermination(timeout)

    def stop(self, end_of_stream: bool = True) -> None:
        """Stop the Spark query, then close the producer."""
        if self.query is not None:
            self.query.stop()
        self.close(end_of_stream)

    def close(self, end_of_stream: bool = True) -> None:
        """Close the producer: with ``end_of_stream``, readers see the stream end."""
        with self._lock:
            if self._producer is not None:
                self._producer.close(end_of_stream=end_of_stream)
                self._producer = None

    def __getattr__(self, item: str) -> Any:
        query = self.__dict__.get("query")
        if query is None:
            raise AttributeError(item)
        return getattr(query, item)


def write_stream(
    df: DataFrame,
    stream: str,
    database: str | None = None,
    *,
    name: str | None = None,
    order_by: str | list[str] | None = None,
    checkpoint_location: str | None = None,
    query_name: str | None = None,
    trigger: dict[str, Any] | None = None,
) -> LiveStreamWriter:
    """Start writing the streaming DataFrame ``df`` into the live stream ``stream``.

    ``stream`` must exist (``CREATE STREAM``) in ``database``'s namespace and
    have ``df``'s column names (types are cast to the stream's). ``name`` is
    the producer name that de-duplicates retried micro-batches (default
    ``spark-<stream>``); ``order_by`` the columns each micro-batch is written
    in order of (e.g. the event time, so a MATCH_RECOGNIZE over the stream
    sees it in time order); ``checkpoint_location`` makes the query
    restartable; ``trigger`` goes to ``DataStreamWriter.trigger`` (e.g.
    ``{"availableNow": True}``).
    """
    require_pyspark()
    if not df.isStreaming:
        raise ValueError("write_stream needs a streaming DataFrame (spark.readStream...)")
    columns = [order_by] if isinstance(order_by, str) else list(order_by or [])
    writer = LiveStreamWriter(stream, database, name or f"spark-{stream}", columns)
    builder = df.writeStream.foreachBatch(writer.write_batch)
    if checkpoint_location:
        builder = builder.option("checkpointLocation", checkpoint_location)
    if query_name:
        builder = builder.queryName(query_name)
    if trigger:
        builder = builder.trigger(**trigger)
    writer.query = builder.start()
    return writer


def deterministic_order(table: pa.Table, order_by: list[str]) -> pa.Table:
    """``table`` sorted by ``order_by``, then by every other column that can be sorted.

    Rows that tie on every column are identical, so the result's row
    sequence depends only on the set of rows: a re-run micro-batch comes out
    the same, which is what lets a half-written batch resume exactly.
    """
    if table.num_rows <= 1:
        return table
    missing = [c for c in order_by if c not in table.column_names]
    if missing:
        raise ValueError(f"order_by names unknown column(s) {missing}")
    rest = [f.name for f in table.schema if f.name not in order_by and _sortable(f.type)]
    keys = [(c, "ascending") for c in [*order_by, *rest]]
    return table.take(pc.sort_indices(table, sort_keys=keys))


def _sortable(kind: pa.DataType) -> bool:
    return not (pa.types.is_nested(kind) or pa.types.is_dictionary(kind) or pa.types.is_null(kind))
