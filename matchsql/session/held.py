"""The matches of a MATCH_RECOGNIZE held in memory before the statement around it runs.

DuckDB reads a MATCH_RECOGNIZE's matches from a registered Arrow reader. When
that reader is read while the enclosing statement runs (``SELECT count(*)
FROM (... MATCH_RECOGNIZE ...)``, a join, a GROUP BY), the input query behind
the matchers runs nested in the outer one on the same database, and DuckDB
runs it markedly slower there: ``SELECT count(*)`` around the row-local
``A B+ C+`` over 1M rows took 1.6x the time of the bare statement, the extra
time all in the input query's sort and scan (bench/around.py). Reading the matches first, outside
any DuckDB statement, and registering them as a table removes that cost.

Memory stays bounded: at most ``budget`` bytes of matches are held; a
MATCH_RECOGNIZE with more output is registered as a reader that yields the
held batches and then goes on streaming (nested, as before). A statement with
a LIMIT streams as before too: it may stop long before the matchers finish.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from sqlglot import exp

HELD_BYTES = 64 << 20  # matches held per MATCH_RECOGNIZE before the outer statement starts
ENABLED = True  # False: the matches stream into the running statement (the benchmarks' "before")


def may_stop_early(tree: exp.Expr) -> bool:
    """Whether the statement may read only part of its inputs (a LIMIT or FETCH)."""
    return tree.find(exp.Limit, exp.Fetch) is not None


def hold(reader: pa.RecordBatchReader) -> pa.Table | pa.RecordBatchReader:
    """``reader``'s batches as a table when they fit in HELD_BYTES; otherwise a reader
    of the batches read so far followed by the rest of ``reader``."""
    budget = HELD_BYTES
    batches: list[pa.RecordBatch] = []
    size = 0
    for batch in reader:
        batches.append(batch)
        size += batch.nbytes
        if size > budget:
            return pa.RecordBatchReader.from_batches(reader.schema, _chain(batches, reader))
    return pa.Table.from_batches(batches, schema=reader.schema)


def _chain(first: list[pa.RecordBatch], rest: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    first.reverse()
    while first:  # each held batch is let go once DuckDB has it
        yield first.pop()
    yield from rest
