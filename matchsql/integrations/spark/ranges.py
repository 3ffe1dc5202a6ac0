"""Executor side of a query without PARTITION BY: ORDER BY ranges matched in parallel.

The whole input is one partition. The driver range-partitions it by the ORDER BY
into ``n`` ranges (``repartitionByRange``), and :func:`spread` sends every range's
rows to its own task together with the last ``overlap`` rows of the range before it
(its *tail*) and the first ``overlap`` rows of the range after it (its *head*), plus
each range's row count. :func:`match_ranges` then decides each range with the
embedded engine's compiled matcher, as :mod:`matchsql.engine.compiled.chunks` decides
the chunks of one long partition, with the same rule for where a guessed chain of
attempts becomes the true one:

* the chain of attempt starts is deterministic from a start row: once two chains
  visit one row, they are one chain from there on (chunks.py's module docstring);
* task ``i`` starts its chain at the first row of the tail it got (range 0: at
  the partition's first row) and keeps the matches that start in its range;
* task ``i`` also checks its boundary with range ``i + 1``: the chain that task
  ``i + 1`` will start at the first row of the tail task ``i`` sends it must visit a
  row that task ``i``'s own chain visits (:func:`~matchsql.engine.compiled.chunks.visited`)
  before range ``i + 1`` begins, and at least ``lookback`` rows into that tail (so
  that no PREV of the next task reads a row it lacks). From that row both chains are
  the true one, so task ``i + 1``'s matches from its first row on are the true ones.
  Task ``i`` must also decide every attempt that starts in its range (and output
  every match's measures) with the head it got.

Where a check fails (a match, or an attempt, longer than ``overlap`` rows across a
boundary) the task raises :class:`~matchsql.errors.ExecutionError` naming the setting
to raise: a wrong row is never returned. Each task emits one more row per range:
the number of matches it kept, from which the driver renumbers MATCH_NUMBER()
across ranges (the matches of a range are numbered from 1 here).

This module does not import pyspark (it runs inside Spark's Python workers).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from matchsql.config import Config
from matchsql.engine.compiled import chunks as C
from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled.compiled_matcher import CompiledMatcher
from matchsql.engine.planner import choose_path, gpu_path, new_partition_matcher
from matchsql.errors import ExecutionError
from matchsql.integrations.spark.executors import shipped_function
from matchsql.integrations.spark.spark_plan import MatchPlan, plan_data, schema_bytes
from matchsql.integrations.spark.worker import (
    input_rows,
    read_schema,
    results,
    shipped_plan,
    sort_rows,
)
from matchsql.plan.row_functions import MatchNumber

# Helper columns of the ranged path (dropped again by the driver).
ORIGIN = "__matchsql_origin"  # the range a row belongs to
SEQ = "__matchsql_seq"  # its position in that range
RANGE = "__matchsql_range"  # the range (task) a copy of the row goes to
KEY = "__matchsql_key"  # the shuffle key that lands on that range's task
COUNT = "__matchsql_count"  # set on count rows only: rows of a range, matches kept

#: Rows of the tail and head each range reads across its boundaries (default).
OVERLAP = 4096

#: Column types whose order Spark's range partitioning and DuckDB's sort agree on.
_ORDERED = (
    pa.types.is_integer,
    pa.types.is_date,
    pa.types.is_timestamp,
    pa.types.is_decimal,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_boolean,
)


def split_reason(plan: MatchPlan, config: Config, overlap: int) -> str | None:
    """Why the query cannot be matched as ORDER BY ranges, or None when it can."""
    spec = plan.spec
    if plan.row_id:
        return "input_order='as_read' has no order Spark can range-partition by"
    if plan.arrow_sort is None:
        return "the ORDER BY is not plain columns (Spark must order ranges as DuckDB does)"
    for name, _, _ in plan.arrow_sort:
        kind = spec.columns.field(name).type
        if not any(test(kind) for test in _ORDERED):
            return f"ORDER BY column {name!r} of type {kind} may sort otherwise in Spark"
    if gpu_path(spec, config, False) is not None:
        return "the query runs on the GPU path"
    if choose_path(spec, config.execution_path).name == "reference":
        return "the query runs on the reference path, which has no chunked runs"
    matcher = new_partition_matcher(spec, (), config)
    if not isinstance(matcher, CompiledMatcher):
        return "the query does not run on the compiled path"
    why = C.unsplittable(spec, matcher.code, matcher.plan.within)
    if why is not None:
        return why
    if max(matcher.lookback, matcher.ahead, matcher.measure_ahead) >= overlap:
        return f"PREV/NEXT reach {overlap} rows or more (the overlap of ranges)"
    if renumbered(plan) is None:
        return "MATCH_NUMBER() is used inside an expression (it cannot be renumbered)"
    return None


def renumbered(plan: MatchPlan) -> list[str] | None:
    """The output columns that are a bare MATCH_NUMBER() (renumbered by the driver), or
    None when MATCH_NUMBER() is part of anything else."""
    names = []
    for measure in plan.spec.measures:
        if isinstance(measure.expr, MatchNumber):
            names.append(measure.name)
        elif any(isinstance(node, MatchNumber) for node in measure.expr.walk()):
            return None
    for result in plan.spec.projection:
        if result.by_duckdb and any(name in result.sql for name in names):
            return None
    return names


def spark_hash_partition(key: int, partitions: int) -> int:
    """Spark's shuffle partition of a long ``key`` under ``repartition(partitions, key)``
    (``pmod(murmur3(key, seed 42), partitions)``): the driver picks for each range a key
    that lands on a task of its own, where hashing range numbers would put two ranges in
    one task and leave another idle."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    def mix(h1: int, k1: int) -> int:
        k1 = rotl((k1 * 0xCC9E2D51) & mask, 15) * 0x1B873593 & mask
        h1 = rotl(h1 ^ k1, 13)
        return (h1 * 5 + 0xE6546B64) & mask

    value = key & 0xFFFFFFFFFFFFFFFF
    h = mix(mix(42, value & mask), value >> 32)
    h ^= 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    signed = h - (1 << 32) if h & 0x80000000 else h
    return signed % partitions


def range_keys(ranges: int) -> list[int]:
    """One shuffle key per range, each landing on the task of the range's number."""
    keys: dict[int, int] = {}
    candidate = 0
    while len(keys) < ranges:
        keys.setdefault(spark_hash_partition(candidate, ranges), candidate)
        candidate += 1
    return [keys[i] for i in range(ranges)]


def helper_fields() -> list[pa.Field]:
    return [
        pa.field(ORIGIN, pa.int64()),
        pa.field(SEQ, pa.int64()),
        pa.field(RANGE, pa.int64()),
        pa.field(KEY, pa.int64()),
        pa.field(COUNT, pa.int64()),
    ]


def spread(
    plan: MatchPlan, schema: pa.Schema, keys: list[int], overlap: int, batches: Iterator
) -> Iterator[pa.RecordBatch]:
    """One range's rows (``batches``, with their range number in :data:`ORIGIN`) sent to
    its own task, its head to the range before, its tail to the range after, and its row
    count to every range. ``schema``: the input's columns, then :func:`helper_fields`."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    table = sort_rows(plan, pa.Table.from_batches(collected))
    origin = int(table.column(ORIGIN)[0].as_py())
    n = table.num_rows
    data = table.drop_columns([ORIGIN])
    ranges = len(keys)

    def copy(lo: int, hi: int, dest: int) -> pa.RecordBatch:
        part = data.slice(lo, hi - lo)
        columns = {name: part.column(name) for name in part.column_names}
        columns[ORIGIN] = pa.array(np.full(hi - lo, origin, np.int64))
        columns[SEQ] = pa.array(np.arange(lo, hi, dtype=np.int64))
        columns[RANGE] = pa.array(np.full(hi - lo, dest, np.int64))
        columns[KEY] = pa.array(np.full(hi - lo, keys[dest], np.int64))
        columns[COUNT] = pa.nulls(hi - lo, pa.int64())
        return (
            pa.Table.from_pydict(columns)
            .select(schema.names)
            .cast(schema)
            .combine_chunks()
            .to_batches()[0]
        )

    yield copy(0, n, origin)
    if origin > 0:
        yield copy(0, min(overlap, n), origin - 1)
    if origin + 1 < ranges:
        yield copy(max(0, n - overlap), n, origin + 1)
    counts = {name: pa.nulls(ranges, schema.field(name).type) for name in schema.names}
    counts[ORIGIN] = pa.array(np.full(ranges, origin, np.int64))
    counts[SEQ] = pa.nulls(ranges, pa.int64())
    counts[RANGE] = pa.array(np.arange(ranges, dtype=np.int64))
    counts[KEY] = pa.array(np.asarray(keys, np.int64))
    counts[COUNT] = pa.array(np.full(ranges, n, np.int64))
    yield pa.RecordBatch.from_pydict(counts, schema=schema)


def match_ranges(
    plan: MatchPlan,
    config: Config,
    overlap: int,
    keys: list[int],
    out_schema: pa.Schema,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """The matches of each range among one task's rows (see the module docstring), in
    ``out_schema`` (the query's output, then :data:`RANGE`, :data:`KEY` and
    :data:`COUNT`), and for each range the number of matches kept in :data:`COUNT`, one
    row sent to every range (``keys``: the ranges' shuffle keys) for
    :func:`renumber`."""
    split = _counts_and_rows(batches)
    if split is None:
        return
    counted, rows = split
    sizes: dict[int, int] = {}
    for origin, count in zip(counted.column(ORIGIN).to_pylist(), counted.column(COUNT).to_pylist()):
        sizes[int(origin)] = int(count)
    for dest in sorted(set(counted.column(RANGE).to_pylist())):
        mine = rows.filter(pc.equal(rows.column(RANGE), dest))
        yield from _match_range(plan, config, overlap, keys, out_schema, int(dest), mine, sizes)


def _match_range(
    plan: MatchPlan,
    config: Config,
    overlap: int,
    keys: list[int],
    out_schema: pa.Schema,
    index: int,
    rows: pa.Table,
    sizes: dict[int, int],
) -> Iterator[pa.RecordBatch]:
    if not sizes.get(index):
        yield _count_rows(out_schema, keys, index, 0)
        return
    rows = rows.take(pc.sort_indices(rows, [(ORIGIN, "ascending"), (SEQ, "ascending")]))
    origins = rows.column(ORIGIN).to_numpy()
    t = int((origins < index).sum())
    r = int((origins == index).sum())
    first = not any(o < index and c for o, c in sizes.items())
    last = not any(o > index and c for o, c in sizes.items())
    if (not first and not sizes.get(index - 1)) or (not last and not sizes.get(index + 1)):
        raise ExecutionError(
            f"range {index} of the ORDER BY ranges has an empty neighbour (fewer distinct "
            "ORDER BY values than ranges); pass fewer ranges to match_recognize"
        )
    matcher = new_partition_matcher(plan.spec, (), config)
    if not isinstance(matcher, CompiledMatcher):
        raise ExecutionError("internal error: a ranged query off the compiled path")
    # The head holds all of the last range: the partition ends with it.
    ends = last or (
        not any(o > index + 1 and c for o, c in sizes.items())
        and len(origins) - t - r == sizes[index + 1]
    )
    matcher.hold(input_rows(plan, rows), ends)
    end = t + r  # the first row of the next range
    chain = matcher.run_from(0)
    if chain.stop < end:
        if chain.status >= K.ST_THREADS and chain.stop >= t:
            matcher.raise_status(chain.status, chain.stop)
        _too_long(index, overlap)
    starts = chain.records[:, 1]
    lo, hi = np.searchsorted(starts, [t, end], "left")
    kept = chain.records[lo:hi]
    if not last:  # the next range's own check covers the boundary after it
        _check_boundary(matcher, chain, end, min(overlap, r), index, overlap)
    out: list[pa.RecordBatch] = []
    if len(kept):
        first_label = int(kept[0, 4])
        last_label = int(kept[-1, 4] + kept[-1, 2])
        records = kept.copy()
        records[:, 4] -= first_label
        produced, complete = matcher.output_records(records, chain.labels[first_label:last_label])
        if not complete:
            _too_long(index, overlap)
        out = [b for b in produced if b.num_rows]
    for batch in results(plan, out):
        yield _with_range(batch, out_schema, index, keys[index])
    yield _count_rows(out_schema, keys, index, len(kept))


def _check_boundary(
    matcher: CompiledMatcher, chain: C.Run, end: int, tail: int, index: int, overlap: int
) -> None:
    """Check that the next range's chain, started at the first row of the tail this range
    sends it (``tail`` rows before ``end``), meets this range's true ``chain`` before
    ``end``, at least ``lookback`` rows into the tail."""
    begin = end - tail
    guess = matcher.run_from(begin, begin)
    # Both chains start without rows before ``begin`` where the tail is all this task
    # holds: then the next task reads what this one reads, PREV included.
    rows = np.arange(begin + (matcher.lookback if begin else 0), end, dtype=np.int64)
    meet = _visited(chain, rows) & _visited(guess, rows)
    if not meet.any():
        _too_long(index, overlap)


def _visited(run: C.Run, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` the chain of ``run`` surely visits: chunks.py's test, and the
    starts of its matches (inside another match under SKIP TO NEXT ROW, yet visited)."""
    starts = run.records[:, 1]
    return C.visited(run, C.coverage(run), rows) | np.isin(rows, starts[starts < run.stop])


def _too_long(index: int, overlap: int) -> None:
    raise ExecutionError(
        f"a match or attempt crosses the boundary after ORDER BY range {index} by more "
        f"than overlap={overlap} rows (or than the next range); pass a larger overlap= "
        "or fewer ranges= to match_recognize"
    )


def _with_range(batch: pa.RecordBatch, schema: pa.Schema, index: int, key: int) -> pa.RecordBatch:
    n = batch.num_rows
    data = pa.schema(list(schema)[:-3])
    if batch.schema != data:
        batch = batch.cast(data)
    columns = [
        *batch.columns,
        pa.array(np.full(n, index, np.int64)),
        pa.array(np.full(n, key, np.int64)),
        pa.nulls(n, pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _count_rows(schema: pa.Schema, keys: list[int], index: int, count: int) -> pa.RecordBatch:
    n = len(keys)
    columns = [pa.nulls(n, field.type) for field in schema][:-3]
    columns += [
        pa.array(np.full(n, index, np.int64)),
        pa.array(np.asarray(keys, np.int64)),
        pa.array(np.full(n, count, np.int64)),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _counts_and_rows(batches: Iterator[pa.RecordBatch]) -> tuple[pa.Table, pa.Table] | None:
    """A stage's input split into its count rows (:data:`COUNT` set) and its data rows;
    None when the task got no rows."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return None
    table = pa.Table.from_batches(collected)
    is_count = pc.is_valid(table.column(COUNT))
    return table.filter(is_count), table.filter(pc.invert(is_count))


def renumber(
    numbers: list[str], schema: pa.Schema, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """One range's matches (the rows of :func:`match_ranges` sent to its task) with the
    MATCH_NUMBER() columns ``numbers`` moved on by the matches of the ranges before, and
    without the helper columns (``schema``: the query's output). Every task got every
    range's count, so no second pass over the matches is needed."""
    split = _counts_and_rows(batches)
    if split is None:
        return
    counted, rows = split
    ranges = counted.column(RANGE).to_numpy()
    sizes = np.zeros(int(ranges.max()) + 2 if len(ranges) else 1, np.int64)
    sizes[ranges + 1] = counted.column(COUNT).to_numpy()
    offsets = np.cumsum(sizes)  # offsets[i]: matches kept by the ranges before range i
    if not rows.num_rows:
        return
    shift = pa.array(offsets[rows.column(RANGE).to_numpy()])
    columns = []
    for field in schema:
        column = rows.column(field.name)
        if field.name in numbers:
            column = pc.add(column.cast(pa.int64()), shift).cast(field.type)
        columns.append(column)
    out = pa.Table.from_arrays(columns, schema=schema)
    yield from out.to_batches()


# The functions the driver hands ``mapInArrow``: closures over plain data (see
# matchsql.integrations.spark.executors.shipped_function), each of which runs its
# ``shipped_*`` counterpart below on the executor.


def spread_function(
    plan: MatchPlan, config: Config, schema: pa.Schema, keys: list[int], overlap: int
):
    """The ``mapInArrow`` function of :func:`spread` (``config``: the one
    :func:`range_function` ships, so that a worker builds the plan once for both)."""
    data = (plan_data(plan, config), schema_bytes(schema), list(keys), overlap)
    return shipped_function(__name__, shipped_spread.__name__, data)


def shipped_spread(data: tuple[Any, ...], batches: Iterator) -> Iterator[pa.RecordBatch]:
    """:func:`spread` with what :func:`spread_function` shipped."""
    plan_of, schema, keys, overlap = data
    plan, _ = shipped_plan(plan_of)
    return spread(plan, read_schema(schema), keys, overlap, batches)


def range_function(
    plan: MatchPlan, config: Config, overlap: int, keys: list[int], schema: pa.Schema
):
    """The ``mapInArrow`` function of :func:`match_ranges`."""
    data = (plan_data(plan, config), overlap, list(keys), schema_bytes(schema))
    return shipped_function(__name__, shipped_ranges.__name__, data)


def shipped_ranges(
    data: tuple[Any, ...], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """:func:`match_ranges` with what :func:`range_function` shipped."""
    plan_of, overlap, keys, schema = data
    plan, config = shipped_plan(plan_of)
    assert config is not None  # range_function ships the settings
    return match_ranges(plan, config, overlap, keys, read_schema(schema), batches)


def renumber_function(numbers: list[str], schema: pa.Schema):
    """The ``mapInArrow`` function of :func:`renumber`."""
    return shipped_function(
        __name__, shipped_renumber.__name__, (list(numbers), schema_bytes(schema))
    )


def shipped_renumber(
    data: tuple[list[str], bytes], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """:func:`renumber` with what :func:`renumber_function` shipped."""
    numbers, schema = data
    return renumber(numbers, read_schema(schema), batches)
