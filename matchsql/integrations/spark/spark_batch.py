"""Bounded scale-out: one MATCH_RECOGNIZE over a DataFrame, spread by PARTITION BY.

The rows are hash-partitioned by the PARTITION BY keys, so that every row of a key
lands in one Spark task, and each task runs ``mapInArrow`` over all of its rows
(:func:`matchsql.integrations.spark.worker.run_task`): grouped by key and put in ORDER BY order
there (as DuckDB orders, so the order is the embedded engine's), then matched by the
embedded engine's matchers, short partitions many at a time. One plan and one set of
matchers per task: one ``applyInArrow`` group per key planned and built them per key,
at about 10k rows/s. Keys of nested types are grouped by Spark instead (one
``applyInArrow`` group each). A query without PARTITION BY is cut into ORDER BY
ranges matched in parallel (:mod:`matchsql.integrations.spark.ranges`), or, where it cannot be,
runs as one task.
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from matchsql.config import Config
from matchsql.errors import SemanticError
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.integrations.spark.executors import check_executors
from matchsql.integrations.spark.ranges import (
    COUNT,
    KEY,
    ORIGIN,
    OVERLAP,
    helper_fields,
    range_function,
    range_keys,
    renumber_function,
    renumbered,
    split_reason,
    spread_function,
)
from matchsql.integrations.spark.schema import (
    arrow_schema_of,
    as_spark_arrow,
    require_pyspark,
    session_time_zone,
    spark_schema_of,
)
from matchsql.integrations.spark.spark_plan import (
    ALL_KEY,
    MATCHES_VIEW,
    ROW_ID,
    MatchPlan,
    build_plan,
)
from matchsql.integrations.spark.worker import group_function, groupable, task_function

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger("matchsql.integrations.spark")


class SinglePartitionWarning(UserWarning):
    """The query has no PARTITION BY and cannot be cut into ORDER BY ranges (the
    warning says why), so Spark runs it as one task."""


def match_recognize(
    df: DataFrame,
    query: str,
    *,
    table: str | None = None,
    input_order: str | list[str] | None = None,
    config: Config | dict | None = None,
    partitions: int | None = None,
    ranges: int | None = None,
    overlap: int = OVERLAP,
) -> DataFrame:
    """Run ``query`` over ``df`` in Spark's executors; return the result as a DataFrame.

    ``query`` reads ``df`` under the table name ``table`` (by default:
    whatever plain table name its MATCH_RECOGNIZE reads). The output has the
    schema the embedded engine would give. ``input_order`` replaces the
    table order a query without ORDER BY relies on (see
    :func:`matchsql.integrations.spark.spark_plan.build_plan`). ``config`` holds matcher limits
    (:class:`matchsql.config.Config` or its options as a dict).
    ``partitions`` is the number of tasks the keys are spread over (default:
    Spark's default parallelism); it is fixed on purpose, because adaptive
    execution would otherwise merge a small input's shuffle partitions into
    one task, while the per-row matching cost is what needs spreading.

    Without PARTITION BY the rows are cut into ``ranges`` ORDER BY ranges (default:
    ``partitions``) matched in parallel, each reading ``overlap`` rows across its
    boundaries to join the chain of attempts of its neighbour
    (:mod:`matchsql.integrations.spark.ranges`); a query that cannot be split so runs as one task,
    with a :class:`SinglePartitionWarning` that says why.
    """
    require_pyspark()
    settings = Config.from_options(config) if isinstance(config, dict) else config
    plan = build_plan(
        query,
        table or _table_name(query),
        arrow_schema_of(df),
        input_order=input_order,
        config=settings,
    )
    check_executors(df.sparkSession)
    source = df.withColumn(ROW_ID, _row_id()) if plan.row_id else df
    out_schema = plan.output_schema()
    returned = as_spark_arrow(out_schema, session_time_zone(df.sparkSession))
    if plan.partition_by:
        keys = [_col(name) for name in plan.partition_by]
        # A fixed number of tasks: adaptive execution would merge a small input's
        # shuffle partitions into one task (see the docstring).
        source = source.repartition(partitions or _parallelism(df), *keys)
        if groupable(plan.spec.input_schema, plan.partition_by):
            matches = source.mapInArrow(
                task_function(plan, settings, returned), spark_schema_of(out_schema)
            )
            return apply_outer(plan, matches)
        grouped = source.groupBy(*keys)  # reuses the hash partitioning: one shuffle
    else:
        count = ranges if ranges is not None else (partitions or _parallelism(df))
        why = "ranges=1" if count <= 1 else split_reason(plan, settings or Config(), overlap)
        if why is None:
            return apply_outer(plan, _ranged(plan, settings, source, returned, count, overlap))
        _warn_single_task(why)
        grouped = source.withColumn(ALL_KEY, _zero()).groupBy(ALL_KEY)
    matches = grouped.applyInArrow(
        group_function(plan, settings, returned), spark_schema_of(out_schema)
    )
    return apply_outer(plan, matches)


def _ranged(
    plan: MatchPlan,
    settings: Config | None,
    source: DataFrame,
    returned: pa.Schema,
    count: int,
    overlap: int,
) -> DataFrame:
    """The query without PARTITION BY matched as ``count`` ORDER BY ranges (see
    :mod:`matchsql.integrations.spark.ranges`): range partitioning, one shuffle that gives
    each range its neighbours' head and tail, the matching, and MATCH_NUMBER() renumbered by the
    matches of the ranges before."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    config = settings or Config()
    assert plan.arrow_sort is not None  # split_reason checked it
    order = [_ordered(name, way, nulls) for name, way, nulls in plan.arrow_sort]
    ranged = source.repartitionByRange(count, *order).withColumn(ORIGIN, F.spark_partition_id())
    time_zone = session_time_zone(source.sparkSession)
    data = as_spark_arrow(arrow_schema_of(source), time_zone)
    spread_arrow = pa.schema([f.with_nullable(True) for f in data] + helper_fields())
    spread_spark = StructType(
        [StructField(f.name, f.dataType, True) for f in source.schema.fields]
        + [StructField(f.name, LongType(), True) for f in helper_fields()]
    )
    keys = range_keys(count)
    spread_rows = ranged.mapInArrow(
        spread_function(plan, config, spread_arrow, keys, overlap), spread_spark
    )
    out_arrow = pa.schema([f.with_nullable(True) for f in returned] + helper_fields()[2:])
    matched = spread_rows.repartition(count, _col(KEY)).mapInArrow(
        range_function(plan, config, overlap, keys, out_arrow),
        spark_schema_of(out_arrow),
    )
    numbers = renumbered(plan) or []
    if not numbers:
        return matched.where(_col(COUNT).isNull()).select(*[_col(f.name) for f in returned])
    # Each range's matches go to its task again, with every range's count: one more
    # shuffle of the matches, where a join of the counts with the matches (two reads of
    # the matching's output) ran the matching once for each read.
    return matched.repartition(count, _col(KEY)).mapInArrow(
        renumber_function(numbers, returned), spark_schema_of(returned)
    )


def _ordered(name: str, way: str, nulls: str) -> Column:
    column = _col(name)
    if way == "ascending":
        return column.asc_nulls_first() if nulls == "at_start" else column.asc_nulls_last()
    return column.desc_nulls_first() if nulls == "at_start" else column.desc_nulls_last()


def apply_outer(plan: MatchPlan, matches: DataFrame) -> DataFrame:
    """Run the statement around the MATCH_RECOGNIZE (if any) in Spark SQL over ``matches``.

    The matches go in as a DataFrame argument of ``spark.sql`` rather than a temporary
    view: over Spark Connect a SQL DataFrame is analysed again whenever it runs, so a
    view dropped after the call would be gone by then (Connect sends the DataFrame's
    plan with the statement; classic Spark registers and drops a view itself).
    """
    if plan.outer_sql is None:
        return matches
    text = plan.outer_sql.replace("{", "{{").replace("}", "}}")  # literal braces
    return matches.sparkSession.sql(text.replace(MATCHES_VIEW, "{matches}"), matches=matches)


def _parallelism(df: DataFrame) -> int:
    spark = df.sparkSession
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 200))


def _warn_single_task(why: str) -> None:
    message = (
        "MATCH_RECOGNIZE without PARTITION BY cannot be split into ORDER BY ranges "
        f"({why}): Spark runs it as a single task over all rows"
    )
    log.warning(message)
    warnings.warn(message, SinglePartitionWarning, stacklevel=3)


def _table_name(query: str) -> str:
    """The table the query's MATCH_RECOGNIZE reads (checked again by build_plan)."""
    for tree in parse(query):
        for node in tree.find_all(MatchRecognizeTable):
            if isinstance(node.this, exp.Table):
                return node.this.name
    raise SemanticError("the query has no MATCH_RECOGNIZE over a table name", sql=query, offset=0)


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _row_id() -> Column:
    from pyspark.sql import functions as F

    return F.monotonically_increasing_id()


def _zero() -> Column:
    from pyspark.sql import functions as F

    return F.lit(0)
