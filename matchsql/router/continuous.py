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
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import duckdb
import pyarrow as pa

from matchsql.errors import ExecutionError
from matchsql.router.hashed import HashPartitionRouter
from matchsql.router.partitions import RunFactory
from matchsql.storage.archive import Archive
from matchsql.storage.catalog import StreamDef
from matchsql.storage.live_reader import LiveReader


def continuous_batches(definition: StreamDef, partition_by: list[str], new_run: RunFactory, *,
                       con: duckdb.DuckDBPyConnection, batch_rows: int,
                       cancelled: Callable[[], bool], on_producer_death: str = "error",
                       history: bool = True) -> Iterator[pa.RecordBatch]:
    """Match batches of a query over ``definition``'s stream, as soon as they are final."""
    reader = LiveReader(definition, on_producer_death=on_producer_death, cancelled=cancelled,
                        max_rows=batch_rows)
    archive = Archive(definition, con, reader.schema) if definition.archive else None
    cursor = con.cursor() if archive is not None else None
    try:
        reader.open()
        router = HashPartitionRouter(partition_by, new_run)
        next_seq = 0
        if archive is not None and cursor is not None:
            if history:
                for last, batch in archive.history(cursor, batch_rows):
                    next_seq = last + 1
                    yield from router.route(batch)
                    if cancelled():
                        raise ExecutionError("statement interrupted")
            else:
                next_seq = archive.last_seq(cursor) + 1
        while (item := reader.read()) is not None:
            first, batch = item
            if first + batch.num_rows <= next_seq:
                continue  # already archived (and read as history)
            if first < next_seq:
                batch = batch.slice(next_seq - first)
                first = next_seq
            next_seq = first + batch.num_rows
            if archive is not None:
                archive.append(first, batch)
            yield from router.route(batch)
        yield from router.finish()
    finally:
        try:
            if archive is not None:
                archive.flush()
        finally:
            if cursor is not None:
                cursor.close()
            reader.close()
