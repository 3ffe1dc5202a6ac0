"""Whole partitions of a batch matched together (engine/compiled/batch.py) give the
per-partition matchers' rows.

Random patterns and DEFINEs (PREV/NEXT included, which must stop at partition
edges), random partition sizes and random batch cuts: the sorted router with
the batched matcher on each compiled path equals the reference matcher run
partition by partition.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.config import Config
from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled.rowlocal import PartitionEdges
from matchsql.engine.planner import _plan, explain, new_partition_matcher, whole_partitions
from matchsql.errors import ExecutionError
from matchsql.execution.router.parallel import ParallelPartitionRouter
from matchsql.execution.router.partitions import SortedPartitionRouter
from tests.property.strategies import ROWS, patterns
from tests.property.strategies import spec_of as spec_of_schema

SCHEMA = pa.schema([("p", pa.int32()), ("id", pa.int32()), ("x", pa.int32()), ("y", pa.int32())])
CONDITIONS = [
    "x > PREV(x)",
    "x = 1",
    "x IS NULL",
    "y >= 2",
    "PREV(x) IS NULL",
    "NEXT(x) IS NULL",
    "NEXT(x) > x",
    "x <> PREV(x, 2)",
    "y = NEXT(y, 2)",
    "A.x <= x",
    "x > FIRST(x)",
    "COUNT(*) <= 3",
    "B.y < A.x + 1",
]
MEASURES = (
    "MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n, FIRST(x) AS fx, "
    "LAST(y) AS ly, A.id AS aid, COUNT(U.*) AS nu"
)
SKIPS = ["PAST LAST ROW", "TO NEXT ROW", "TO FIRST A", "TO LAST B"]
SETTINGS = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def spec_of(sql: str):
    return spec_of_schema(sql, SCHEMA)


RUNNING_MEASURES = (
    "MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n, FIRST(x) AS fx, "
    "LAST(y) AS ly, A.id AS aid, COUNT(U.*) AS nu, FINAL LAST(x) AS flx, "
    "FIRST(U.y) AS fuy, LAST(x, 1) AS lx1, FIRST(id, 1) AS fid1"
)


def query(pattern: str, a: str, b: str, skip: str, rows: str = "ONE ROW PER MATCH") -> str:
    measures = MEASURES if rows == "ONE ROW PER MATCH" else RUNNING_MEASURES
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES {measures} "
        f"{rows} AFTER MATCH SKIP {skip} PATTERN ({pattern}) "
        f"SUBSET U = (A, B) DEFINE A AS {a}, B AS {b})"
    )


def table(sizes: list[int], seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    p = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
    x = rng.integers(0, 4, n).astype(np.int32)
    y = rng.integers(0, 4, n).astype(np.int32)
    return pa.table(
        {
            "p": p,
            "id": np.arange(n, dtype=np.int32),
            "x": pa.array(x, mask=rng.random(n) < 0.1),
            "y": y,
        },
        schema=SCHEMA,
    )


def run(spec, rows: pa.Table, cuts: list[int], path: str, batched: bool, threads: int = 1):
    """The output rows of ``spec`` over ``rows`` cut into batches at ``cuts``;
    ``threads`` > 1: the parallel router, with groups of about 8 rows."""
    config = Config()
    config.execution_path = path
    whole = whole_partitions(spec, config)[0] if batched else None
    match = whole.match_counted if whole is not None else None

    def new_run(key):
        return new_partition_matcher(spec, key, config)

    batches = []
    begin = 0
    for end in [*sorted(set(cuts)), rows.num_rows]:
        batches += rows.slice(begin, end - begin).to_batches()
        begin = end
    out: list[pa.RecordBatch] = []
    try:
        if threads > 1:
            out = list(
                ParallelPartitionRouter(
                    spec.partition_by, new_run, threads, chunk_rows=8, whole=match
                ).run(batches)
            )
        else:
            router = SortedPartitionRouter(spec.partition_by, new_run, match)
            for batch in batches:
                out += router.route(batch)
            out += router.finish()
    except ExecutionError as exc:
        return "error", exc.message
    return "rows", [tuple(r.values()) for b in out for r in b.to_pylist()]


def prepare(sql: str, sizes: list[int], seed: int, data: st.DataObject):
    """``(spec, rows, batch cuts, the reference's result)``; rejects a query that does
    not analyse."""
    try:
        spec = spec_of(sql)
    except matchsql.Error:
        assume(False)
        raise
    rows = table(sizes, seed)
    cuts = data.draw(st.lists(st.integers(0, rows.num_rows), max_size=3))
    return spec, rows, cuts, run(spec, rows, [], "reference", batched=False)


@SETTINGS
@given(
    pattern=patterns,
    a=st.sampled_from(CONDITIONS),
    b=st.sampled_from(CONDITIONS),
    skip=st.sampled_from(SKIPS),
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=8),
    seed=st.integers(0, 2**16),
    output=st.sampled_from(ROWS),
    data=st.data(),
)
def test_batched_equals_reference(pattern, a, b, skip, sizes, seed, output, data) -> None:
    spec, rows, cuts, expected = prepare(
        query(pattern.to_sql(), a, b, skip, output), sizes, seed, data
    )
    for path in ("row_local", "registers"):
        config = Config()
        config.execution_path = path
        whole, why = whole_partitions(spec, config)
        if why == "no applicable path":
            continue
        assert (whole is None) == (output == ROWS[-1]), why  # unmatched rows: per partition
        assert run(spec, rows, cuts, path, batched=True) == expected, (path, cuts)
        assert run(spec, rows, cuts, path, batched=True, threads=2) == expected, (path, cuts)
        if whole is not None and expected[0] == "rows":
            # How many output rows each partition has (ALL ROWS: its matched rows but
            # excluded ones, an empty match's row where shown): a worker hands its
            # partitions' matches back by these counts.
            out, counts = whole.match_counted(
                rows.combine_chunks().to_batches()[0], np.cumsum([0, *sizes])
            )
            owners = np.bincount([row[0] for row in expected[1]], minlength=len(sizes))
            assert counts.tolist() == owners.tolist(), path
            assert sum(batch.num_rows for batch in out) == counts.sum()


def test_edges_stop_prev_and_next_at_partition_boundaries() -> None:
    edges = PartitionEdges(np.array([0, 3, 4, 7]))
    assert edges.outside(-1).to_pylist() == [True, False, False, True, True, False, False]
    assert edges.outside(-2).to_pylist() == [True, True, False, True, True, True, False]
    assert edges.outside(1).to_pylist() == [False, False, True, True, False, False, True]


def test_sql_uses_the_batched_matcher_and_agrees_with_reference() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
        "MEASURES MATCH_NUMBER() AS mn, FIRST(x) AS fx, LAST(x) AS lx, COUNT(*) AS n "
        "PATTERN (A B+ C+) DEFINE B AS x < PREV(x), C AS x > PREV(x)) ORDER BY p, mn"
    )
    results = {}
    for path in ("reference", "auto"):
        con = matchsql.connect(demo=False, batch_size=1000, execution_path=path)
        con.duckdb.register("src", table([1, 5, 40, 7, 300, 2, 1200, 3] * 20, 7))
        con.sql("CREATE TABLE t AS SELECT * FROM src")
        results[path] = con.sql(sql).fetchall()
        if path == "auto":
            plan = "\n".join(r[0] for r in con.sql(f"EXPLAIN {sql}").fetchall())
            assert "batched: yes" in plan
    assert results["auto"] == results["reference"]
    assert len(results["auto"]) > 100


def test_many_matches_grow_the_output_arrays() -> None:
    """More matches in one partition than the initial record capacity (4096)."""
    spec = spec_of(query("A B?", "TRUE", "x = 9", "PAST LAST ROW"))
    rows = table([10_000, 3, 5_000, 2], 1)
    got = run(spec, rows, [], "row_local", batched=True)
    assert got == run(spec, rows, [], "reference", batched=False)
    assert len(got[1]) == rows.num_rows


def test_skip_error_names_the_partition_row() -> None:
    spec = spec_of(query("A B?", "TRUE", "x = 3", "TO LAST B"))
    rows = table([4, 6, 3], 3)
    got = run(spec, rows, [], "row_local", batched=True)
    assert got == run(spec, rows, [], "reference", batched=False)
    assert got[0] == "error" and "partition row" in got[1]


def test_measure_reading_prev_is_not_batched() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES PREV(x) AS px "
        "PATTERN (A B) DEFINE B AS x > A.x)"
    )
    spec = spec_of(sql)
    whole, why = whole_partitions(spec, Config())
    assert whole is None and "PREV/NEXT" in why
    assert "batched: no" in explain(spec, Config())


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n PATTERN (A+) "
        "DEFINE A AS x > 0)",
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id ALL ROWS PER MATCH "
        "WITH UNMATCHED ROWS PATTERN (A+) DEFINE A AS x > 0)",
    ],
)
def test_not_batched_without_partitions_or_with_unmatched_rows(sql: str) -> None:
    assert whole_partitions(spec_of(sql), Config())[0] is None


@SETTINGS
@given(
    pattern=patterns,
    a=st.sampled_from(CONDITIONS),
    b=st.sampled_from(CONDITIONS),
    skip=st.sampled_from(SKIPS),
    output=st.sampled_from(ROWS[:3]),
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_column_wise_running_measures_equal_reference(
    pattern, a, b, skip, output, sizes, seed, data
) -> None:
    """Per-partition matchers (not batched), with PREV/NEXT measures too."""
    sql = query(pattern.to_sql(), a, b, skip, output).replace(
        "FIRST(id, 1) AS fid1", "FIRST(id, 1) AS fid1, PREV(x) AS px, NEXT(A.y, 2) AS nay"
    )
    spec, rows, cuts, expected = prepare(sql, sizes, seed, data)
    for path in ("row_local", "registers"):
        config = Config()
        config.execution_path = path
        if whole_partitions(spec, config)[1] == "no applicable path":
            continue
        assert _plan(spec)[1].measures is not None  # column-wise, not the reference builder
        assert run(spec, rows, cuts, path, batched=False) == expected, (path, cuts)


def batched_match(spec, rows: pa.Table, sizes: list[int], config: Config):
    """Rows or the error of the batched matcher alone over one batch of whole partitions."""
    whole, why = whole_partitions(spec, config)
    assert whole is not None, why
    bounds = np.cumsum([0, *sizes])
    try:
        out = whole.match(rows.combine_chunks().to_batches()[0], bounds)
    except ExecutionError as exc:
        return "error", exc.message
    return "rows", [tuple(r.values()) for b in out for r in b.to_pylist()]


@pytest.mark.parametrize("path", ["row_local", "registers"])
def test_batched_attempts_read_at_most_max_buffered_rows(path: str) -> None:
    # B never holds (x < 4 always), so every attempt of (A|B)* C runs to the
    # partition's end; with max_buffered_rows=20 the one at row 1 of the 30-row
    # partition must stop at 20 rows with the per-partition matcher's error.
    spec = spec_of(
        query("(A|B)* C", "x >= 0 OR x IS NULL", "x < 0", "TO NEXT ROW").replace(
            "DEFINE", "DEFINE C AS y > 9,"
        )
    )
    config = Config(max_buffered_rows=20)
    config.execution_path = path
    rows = table([5, 30, 4], 2)
    got = batched_match(spec, rows, [5, 30, 4], config)
    assert got[0] == "error"
    assert "max_buffered_rows=20" in got[1] and "partition row 1)" in got[1]
    matcher = new_partition_matcher(spec, (1,), config)
    with pytest.raises(ExecutionError) as caught:
        matcher.feed(rows.slice(5, 30).to_batches()[0])
        matcher.finish()
    assert caught.value.message == got[1]


@pytest.mark.parametrize("path", ["row_local", "registers"])
def test_batched_window_moves_past_short_matches(path: str) -> None:
    # Matches of 2-3 rows in partitions longer than the cap: the window moves on
    # and the rows are those of the reference matcher without a cap.
    spec = spec_of(query("A B?", "TRUE", "x = 1", "PAST LAST ROW"))
    config = Config(max_buffered_rows=7)
    config.execution_path = path
    rows = table([50, 3, 41], 5)
    got = batched_match(spec, rows, [50, 3, 41], config)
    assert got == run(spec, rows, [], "reference", batched=False)
    assert len(got[1]) > 60


@pytest.mark.parametrize("output", ["ONE ROW PER MATCH", "ALL ROWS PER MATCH"])
def test_outputs_and_workspace_grown_mid_batch_keep_every_partitions_matches(output) -> None:
    """Every capacity at 1: the thread VM stops for more room again and again, in the
    middle of partitions; the matches written before each stop stay where they are and
    the labels (CLASSIFIER, A.id, COUNT(U.*)) are those of the reference."""
    spec = spec_of(
        query("A B+ C*", "x >= 0 OR x IS NULL", "B.y >= A.x OR x IS NULL", "TO NEXT ROW", output)
        .replace("PATTERN (A B+ C*)", "PATTERN (A B+ {- C* -})")
        .replace("DEFINE", "DEFINE C AS y < 3,")
    )
    config = Config()
    config.execution_path = "registers"
    sizes = [1, 40, 2, 7, 60, 3, 25]
    whole, why = whole_partitions(spec, config)
    assert whole is not None, why
    whole.caps[:] = 1
    rows = table(sizes, 11)
    bounds = np.cumsum([0, *sizes])
    out = whole.match(rows.combine_chunks().to_batches()[0], bounds)
    got = [tuple(r.values()) for b in out for r in b.to_pylist()]
    assert ("rows", got) == run(spec, rows, [], "reference", batched=False)
    assert len(got) > 50 and (whole.caps[[K.W_THREADS, K.W_RECORDS, K.W_LABELS]] > 1).all()
