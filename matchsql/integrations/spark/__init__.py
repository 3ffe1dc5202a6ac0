"""Spark: scale-out MATCH_RECOGNIZE and a Structured Streaming source for live streams.

* :func:`match_recognize` (bounded) — ``match_recognize(df, "SELECT ... FROM
  trades MATCH_RECOGNIZE (...)")`` runs the embedded engine's matchers inside
  Spark's executors, each task matching all the PARTITION BY keys hashed to it
  (``mapInArrow``) or, without PARTITION BY, one ORDER BY range, and returns a
  DataFrame with the schema the embedded engine would give.
* :func:`match_recognize_stream` (unbounded) — the same over a streaming
  DataFrame; each key's matcher state lives in Spark's checkpointed state
  store (``applyInPandasWithState``), so a restart from the checkpoint
  neither loses nor repeats a match.
* :func:`write_stream` — a ``foreachBatch`` sink that makes a streaming
  DataFrame the producer of a matchsql live stream; a re-run micro-batch is
  not written twice (Spark batch id -> ``Producer.write_batch(batch_id=)``).

Query shapes. The statement has exactly one MATCH_RECOGNIZE, whose input is
the plain table name that stands for the DataFrame; around it a SELECT list,
WHERE, GROUP BY, HAVING, ORDER BY, LIMIT (translated to Spark SQL by
sqlglot; streaming: what Spark allows on a stream). Joins, CTEs, subqueries,
set operations and nested MATCH_RECOGNIZEs are refused with a
:class:`matchsql.SemanticError`: compose those with Spark around the result.
The query is parsed and analysed on the driver by matchsql itself, so it is
accepted, rejected and typed exactly as the embedded engine would.

Semantic choices, where Spark differs from a DuckDB table:

* Row order. Each partition is sorted in the executor by DuckDB with the
  query's own ORDER BY text, so direction, NULL placement (DuckDB's NULLS
  LAST default), NaN and collation match the embedded engine. A query
  without ORDER BY relies on table order, which a DataFrame does not have:
  it is refused unless ``input_order`` names the column(s) that give the
  order (DejaVu's Q1-Q4: ``input_order="ts"``) or is ``"as_read"`` (the order
  Spark reads the DataFrame in, via ``monotonically_increasing_id``; bounded
  only).
* No PARTITION BY: the rows are cut into ORDER BY ranges matched in parallel
  (:mod:`matchsql.integrations.spark.ranges`); each range reads ``overlap`` rows of its
  neighbours and checks, with the rule of the embedded engine's chunked runs, that
  the chains of match attempts of two neighbouring ranges meet before their
  boundary, and MATCH_NUMBER() is renumbered across ranges, so the rows are the
  embedded engine's (a match reaching further across a boundary fails the query
  with a clear error, never with a wrong row). A query that cannot be split so
  (see :func:`matchsql.integrations.spark.ranges.split_reason`) runs as one task and says why
  with a :class:`SinglePartitionWarning` and a log line.
* End of a streaming partition: an ``end_marker`` column (rows where it is
  true end their key) and/or an ``idle_timeout``; see
  :mod:`matchsql.integrations.spark.spark_stream`. Rows of a key must arrive in ORDER BY order
  across micro-batches (any order within one); a late row fails the query.

The Python workers must run an interpreter that has matchsql installed
(``PYSPARK_PYTHON``). Where the user has not set it, importing this package sets
it to this interpreter (a Spark context started afterwards hands it to its
workers): Spark's default, the system ``python3``, lacks the virtualenv's
matchsql and pyarrow, and failed inside a Java stack trace. On a cluster the
executors' interpreter is whatever ``PYSPARK_PYTHON`` names there: the first query of a
session checks that it imports matchsql (:mod:`matchsql.integrations.spark.executors`) and raises
:class:`ExecutorSetupError`, with how to ship matchsql, where it does not. Over Spark
Connect both query functions work (they use DataFrame APIs only). pyspark (>= 4.0) is imported
only when one of these is called, so ``import matchsql`` stays fast.
"""

from __future__ import annotations

import os
import sys

from matchsql.integrations.spark.executors import ExecutorSetupError
from matchsql.integrations.spark.sink import LiveStreamWriter, write_stream
from matchsql.integrations.spark.spark_batch import SinglePartitionWarning, match_recognize
from matchsql.integrations.spark.spark_plan import AS_READ, MatchPlan, build_plan
from matchsql.integrations.spark.spark_stream import match_recognize_stream

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

__all__ = [
    "AS_READ",
    "ExecutorSetupError",
    "LiveStreamWriter",
    "MatchPlan",
    "SinglePartitionWarning",
    "build_plan",
    "match_recognize",
    "match_recognize_stream",
    "write_stream",
]
