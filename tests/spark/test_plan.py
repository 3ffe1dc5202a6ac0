"""The Spark path without Spark: query shapes, plans, the executor-side matcher run.

Everything the executors do is plain Python over Arrow (:mod:`matchsql.integrations.spark.worker`,
:mod:`matchsql.integrations.spark.state`), so it is checked here against every conformance
case Spark can run, fast; ``test_batch``/``test_stream`` then check the Spark
wiring on a selection.
"""

from __future__ import annotations

import pickle
import random
import re
import zlib

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlglot import exp

import matchsql
from matchsql.errors import ExecutionError, SemanticError
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.integrations.spark.sink import deterministic_order
from matchsql.integrations.spark.spark_plan import AS_READ, MATCHES_VIEW, ROW_ID, build_plan
from matchsql.integrations.spark.worker import run_group
from tests.conformance.test_conformance import ALL_CASES

from .helpers import canonical, trades

pytest.importorskip("pyspark")  # state snapshots use the cloudpickle shipped with pyspark

SCHEMA = pa.schema([("p", pa.string()), ("id", pa.int32()), ("v", pa.string())])
MR = (
    "MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES MATCH_NUMBER() AS mn "
    "PATTERN (A B+) DEFINE A AS v = 'a', B AS v = 'b')"
)


# -- shapes ---------------------------------------------------------------------------


def test_select_star_has_no_outer_statement() -> None:
    plan = build_plan(f"SELECT * FROM s {MR}", "s", SCHEMA)
    assert plan.outer_sql is None
    assert plan.partition_by == ["p"]
    assert plan.sort_keys == ["id"]
    assert plan.output_schema().names == ["p", "mn"]


def test_outer_clauses_become_spark_sql() -> None:
    plan = build_plan(f"SELECT p, mn FROM s {MR} AS m WHERE mn > 1 ORDER BY p", "s", SCHEMA)
    assert plan.outer_sql is not None
    assert MATCHES_VIEW in plan.outer_sql
    assert "WHERE" in plan.outer_sql and "ORDER BY" in plan.outer_sql


def test_table_name_is_case_insensitive() -> None:
    assert build_plan(f"SELECT * FROM S {MR}", "s", SCHEMA).table == "s"


@pytest.mark.parametrize(
    "query, message",
    [
        (f"SELECT * FROM t {MR}", "DataFrame is named"),
        (f"SELECT * FROM s {MR} JOIN s AS x ON true", "only table"),
        (f"WITH c AS (SELECT 1) SELECT * FROM s {MR}", "CTEs"),
        (f"SELECT * FROM s {MR} WHERE mn IN (SELECT 1)", "subqueries"),
        (f"SELECT * FROM (SELECT * FROM s) {MR}", "plain table name"),
        (f"SELECT * FROM s {MR} UNION ALL SELECT * FROM s {MR}", "exactly one"),
        ("SELECT * FROM s", "exactly one"),
    ],
)
def test_unsupported_shapes_are_refused(query: str, message: str) -> None:
    with pytest.raises(matchsql.Error, match=message):
        build_plan(query, "s", SCHEMA)


def test_no_order_by_needs_an_input_order() -> None:
    query = "SELECT * FROM s MATCH_RECOGNIZE (MEASURES MATCH_NUMBER() AS mn PATTERN (A))"
    with pytest.raises(SemanticError, match="no ORDER BY"):
        build_plan(query, "s", SCHEMA)
    assert build_plan(query, "s", SCHEMA, input_order="id").sort_keys == ['"id"']
    as_read = build_plan(query, "s", SCHEMA, input_order=AS_READ)
    assert as_read.row_id and as_read.sort_keys == [f'"{ROW_ID}"']
    with pytest.raises(SemanticError, match="unknown column"):
        build_plan(query, "s", SCHEMA, input_order=["nope"])


def test_analysis_errors_are_the_embedded_engine_errors() -> None:
    with pytest.raises(matchsql.CatalogError):
        build_plan("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY nope PATTERN (A))", "s", SCHEMA)


def test_plan_pickles() -> None:
    plan = build_plan(f"SELECT * FROM s {MR}", "s", SCHEMA)
    again = pickle.loads(pickle.dumps(plan))
    assert again.sort_keys == plan.sort_keys and again.arrow_sort == plan.arrow_sort
    assert again.output_schema() == plan.output_schema()


# -- the executor side against the conformance suite ----------------------------------------


def _runnable_cases() -> list:
    """Conformance cases with rows (not errors) whose statement Spark accepts."""
    out = []
    for case in ALL_CASES:
        if isinstance(case.expected, type) or not case.query.lstrip().upper().startswith("SELECT"):
            continue
        found = re.search(r"FROM\s+(\w+)\s+MATCH_RECOGNIZE", case.query, re.IGNORECASE)
        if found is None or case.query.upper().count("MATCH_RECOGNIZE") != 1:
            continue
        if re.search(r"\bWITH\b|\bJOIN\b|\(\s*SELECT", case.query, re.IGNORECASE):
            continue
        out.append((case, found.group(1)))
    return out


RUNNABLE = _runnable_cases()


def executor_side(con: matchsql.Connection, case, table_name: str) -> list[tuple] | None:
    """What the Spark path computes for ``case``, with groupBy and the outer SQL done locally."""
    table = con.sql(f"SELECT * FROM {table_name}").arrow()
    try:
        plan = build_plan(case.query, table_name, table.schema)
    except SemanticError as err:
        if "no ORDER BY" in str(err):
            return None
        raise
    groups = [table]
    if plan.partition_by:
        keys = table.select(plan.partition_by).group_by(plan.partition_by).aggregate([])
        groups = []
        for key in keys.to_pylist():
            mask = pa.array([True] * table.num_rows)
            for name, value in key.items():
                column = table.column(name)
                same = (
                    pc.is_null(column)
                    if value is None
                    else pc.fill_null(pc.equal(column, pa.scalar(value, column.type)), False)
                )
                mask = pc.and_(mask, same)
            groups.append(table.filter(mask))
    parts = [run_group(plan, None, g) for g in groups]
    matches = pa.concat_tables(parts) if parts else plan.output_schema().empty_table()
    tree = parse(case.query)[0]
    node = next(tree.find_all(MatchRecognizeTable))
    node.replace(exp.Table(this=exp.to_identifier("__m"), alias=node.args.get("alias")))
    con.duckdb.register("__m", matches)
    return con.duckdb.sql(tree.sql(dialect="duckdb")).fetchall()


def embedded_outcome(con: matchsql.Connection, case) -> list[tuple] | type[matchsql.Error]:
    """The embedded engine's rows for ``case``, or the class of the error it raises."""
    try:
        return con.sql(case.query).fetchall()
    except matchsql.Error as err:
        return type(err)


@pytest.mark.parametrize("case, table_name", RUNNABLE, ids=[c.name for c, _ in RUNNABLE])
def test_conformance_executor_side(case, table_name: str) -> None:
    """Same rows as the embedded engine (or the same error, where it fails)."""
    con = matchsql.connect(demo=False)
    for statement in case.setup:
        con.sql(statement)
    expected = embedded_outcome(con, case)
    if isinstance(expected, type):
        with pytest.raises(expected):
            executor_side(con, case, table_name)
        return
    got = executor_side(con, case, table_name)
    if got is None:
        pytest.skip("no ORDER BY: Spark needs input_order")
    assert canonical(got) == canonical(expected), case.why


def test_most_conformance_cases_run_under_spark() -> None:
    assert len(RUNNABLE) >= 250, len(RUNNABLE)


# -- streaming state ------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        "MEASURES MATCH_NUMBER() AS m, FIRST(A.price) AS a, LAST(D.ts) AS d "
        "ALL MATCHES AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+ C* D+) "
        "DEFINE B AS B.price < A.price AND B.price <= PREV(B.price), "
        "C AS C.price > B.price AND C.price >= PREV(C.price) AND C.price <= A.price, "
        "D AS D.price > PREV(D.price) AND D.price > A.price)",
        "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts DESC "
        "MEASURES CLASSIFIER() AS c, RUNNING COUNT(*) AS n ALL ROWS PER MATCH WITH UNMATCHED ROWS "
        "PATTERN (U+ D{2,}?) DEFINE U AS price > NEXT(price), D AS price < PREV(price))",
    ],
)
def test_state_steps_equal_one_run(query: str) -> None:
    """Micro-batches of random size, shuffled, with a snapshot/restore after each."""
    from matchsql.integrations.spark.state import step

    data = trades(1500, 2, seed=5)
    plan = build_plan(query, "trade", data.schema)
    part = data.filter(pc.equal(data["symbol"], "MSFT"))
    descending = "DESC" in query
    whole = run_group(plan, None, part)
    rng = random.Random(7)
    ordered = part.take(
        pc.sort_indices(part, sort_keys=[("ts", "descending" if descending else "ascending")])
    )
    state, outputs, start = None, [], 0
    while start < ordered.num_rows:
        size = rng.randint(1, 120)
        chunk = ordered.slice(start, size)
        start += size
        shuffled = chunk.take(rng.sample(range(chunk.num_rows), chunk.num_rows))
        result = step(plan, None, state, shuffled, end=False, out_schema=plan.output_schema())
        state = result.state
        outputs.append(result.output)
    final = step(plan, None, state, None, end=True, out_schema=plan.output_schema())
    assert final.state is None
    got = pa.concat_tables([*outputs, final.output])
    assert got.num_rows > 0
    assert got.equals(whole)


def test_state_rejects_rows_older_than_the_last_batch() -> None:
    from matchsql.integrations.spark.state import step

    data = trades(200, 1, seed=1)
    plan = build_plan(
        "SELECT * FROM trade MATCH_RECOGNIZE (ORDER BY ts "
        "MEASURES MATCH_NUMBER() AS m PATTERN (A B+) "
        "DEFINE B AS price < PREV(price))",
        "trade",
        data.schema,
    )
    first = step(plan, None, None, data.slice(100), end=False, out_schema=plan.output_schema())
    with pytest.raises(ExecutionError, match="ORDER BY order across micro-batches"):
        step(plan, None, first.state, data.slice(0, 10), end=False, out_schema=plan.output_schema())


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_snapshot_leaves_the_shared_lowering_out(path: str) -> None:
    from matchsql.config import Config
    from matchsql.integrations.spark.state import restore_matcher
    from matchsql.integrations.spark.worker import new_matcher
    from matchsql.saved_state.snapshot import matcher_plan, snapshot_matcher

    config = Config(execution_path=path)
    data = trades(300, 1, seed=2)
    plan = build_plan(
        "SELECT * FROM trade MATCH_RECOGNIZE (ORDER BY ts "
        "MEASURES MATCH_NUMBER() AS m, AVG(B.price) AS b PATTERN (A B+ C) "
        "DEFINE B AS price < PREV(price), C AS price > A.price)",
        "trade",
        data.schema,
    )
    matcher = new_matcher(plan, (), config)
    batch = data.to_batches()[0]
    matcher.feed(batch.slice(0, 150))
    restored = restore_matcher(plan, snapshot_matcher(matcher), config)
    assert type(restored) is type(matcher)
    shared = matcher_plan(matcher)
    assert shared and matcher_plan(restored).keys() == shared.keys()
    assert all(matcher_plan(restored)[name] is obj for name, obj in shared.items())  # not copied
    rest = batch.slice(150)
    assert [b.to_pylist() for b in restored.feed(rest) + restored.finish()] == [
        b.to_pylist() for b in matcher.feed(rest) + matcher.finish()
    ]


def test_key_state_is_small_and_shares_one_plan_index() -> None:
    """A key's state holds the matcher's state, not its scratch: the compiled kernel's
    workspace (about 300 KB) stays out of the snapshot. Every key's matcher gets the same
    Config object, so all keys' snapshots use one plan index (built once per process)."""
    from matchsql.integrations.spark.state import settings, step
    from matchsql.saved_state import snapshot

    data = trades(2000, 20, seed=6)
    plan = build_plan(
        "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        "MEASURES MATCH_NUMBER() AS m ALL MATCHES AFTER MATCH SKIP TO NEXT ROW "
        "PATTERN (A B+ C* D+) DEFINE B AS B.price < A.price AND B.price <= PREV(B.price), "
        "C AS C.price > B.price AND C.price >= PREV(C.price) AND C.price <= A.price, "
        "D AS D.price > PREV(D.price) AND D.price > A.price)",
        "trade",
        data.schema,
    )
    assert settings(plan, None) is settings(plan, None)
    step(plan, None, None, data.slice(0, 50), end=False, out_schema=plan.output_schema())
    indexes = len(snapshot._INDEXES)
    states = {}
    for half in (data.slice(0, 1000), data.slice(1000)):
        for symbol in pc.unique(half["symbol"]).to_pylist():
            rows_ = half.filter(pc.equal(half["symbol"], symbol))
            result = step(
                plan, None, states.get(symbol), rows_, end=False, out_schema=plan.output_schema()
            )
            states[symbol] = result.state
    assert len(snapshot._INDEXES) == indexes  # no index per key
    assert max(len(s.matcher) for s in states.values()) < 20_000


def test_deterministic_order_depends_only_on_the_rows() -> None:
    data = trades(500, 3, seed=4)
    a = deterministic_order(data, ["ts"])
    b = deterministic_order(data.take(random.Random(1).sample(range(500), 500)), ["ts"])
    assert a.equals(b)
    assert a.column("ts").to_pylist() == sorted(data.column("ts").to_pylist())


def test_end_marker_rows_end_the_key_and_are_not_matched() -> None:
    import pandas as pd

    from matchsql.integrations.spark.spark_stream import _duration_ms, _rows_and_end

    frames = [
        pd.DataFrame({"id": [1, 2], "eos": [False, None]}),
        pd.DataFrame({"id": [3], "eos": [True]}),
    ]
    rows_, end = _rows_and_end(iter(frames), "eos")
    assert end and rows_.column_names == ["id"] and rows_.column("id").to_pylist() == [1, 2]
    rows_, end = _rows_and_end(iter(frames[:1]), "eos")
    assert not end and rows_.num_rows == 2
    assert _rows_and_end(iter([]), "eos") == (None, False)
    assert _duration_ms(1.5) == 1500
    with pytest.raises(SemanticError):
        _duration_ms(0)


def _keys_table(rng: random.Random, n: int) -> pa.Table:
    """Sort-key columns of every kind the pyarrow fast path takes, with NULLs and ties."""
    import datetime as dt
    from decimal import Decimal

    def maybe(value):
        return None if rng.random() < 0.15 else value

    return pa.table(
        {
            "i": pa.array([maybe(rng.randint(-5, 5)) for _ in range(n)], pa.int64()),
            "s": pa.array([maybe(rng.choice(["a", "B", "é", "ab", "", "Z"])) for _ in range(n)]),
            "f": pa.array([maybe(rng.choice([-1.5, 0.0, 2.25, float("inf")])) for _ in range(n)]),
            "t": pa.array(
                [
                    maybe(dt.datetime(2024, 1, 1) + dt.timedelta(seconds=rng.randint(0, 9)))
                    for _ in range(n)
                ],
                pa.timestamp("us"),
            ),
            "d": pa.array(
                [maybe(Decimal(rng.randint(-9, 9)) / 4) for _ in range(n)], pa.decimal128(6, 2)
            ),
        }
    )


@pytest.mark.parametrize("order", ["i", "i DESC NULLS LAST", "s DESC, i", "t NULLS FIRST, d"])
def test_stream_order_check_is_duckdb_order(order: str) -> None:
    """A key's first row of a micro-batch is checked against its last row with pyarrow
    where the keys allow; that says "sorts before" exactly when DuckDB does (ties and
    NULLs included)."""
    import dataclasses

    from matchsql.integrations.spark.state import _sorts_before

    table = _keys_table(random.Random(zlib.crc32(order.encode())), 120)
    plan = build_plan(
        f"SELECT * FROM r MATCH_RECOGNIZE (ORDER BY {order} "
        "MEASURES MATCH_NUMBER() AS m PATTERN (A))",
        "r",
        table.schema,
    )
    assert plan.arrow_sort is not None
    slow = dataclasses.replace(plan, arrow_sort=None)
    answers = []
    for i in range(0, table.num_rows, 2):
        last, first = table.slice(i, 1), table.slice(i + 1, 1)
        answers.append(_sorts_before(plan, last, first))
        assert answers[-1] == _sorts_before(slow, last, first), (
            last.to_pylist(),
            first.to_pylist(),
        )
        assert not _sorts_before(plan, last, last)  # a tie is not "before"
    assert True in answers and False in answers


@pytest.mark.parametrize(
    "order",
    [
        "i",
        "i DESC",
        "i NULLS FIRST",
        "i DESC NULLS LAST",
        "s DESC, i",
        "f, s DESC NULLS FIRST",
        "t DESC NULLS FIRST, i ASC NULLS LAST",
        "d, s",
    ],
)
def test_arrow_sort_is_duckdb_sort(order: str) -> None:
    """The worker's pyarrow fast path orders key columns exactly as DuckDB does."""
    import dataclasses

    from matchsql.integrations.spark.worker import sort_rows

    table = _keys_table(random.Random(zlib.crc32(order.encode())), 400)
    plan = build_plan(
        f"SELECT * FROM r MATCH_RECOGNIZE (ORDER BY {order} "
        "MEASURES MATCH_NUMBER() AS m PATTERN (A))",
        "r",
        table.schema,
    )
    assert plan.arrow_sort is not None
    keys = [name for name, _, _ in plan.arrow_sort]
    fast = sort_rows(plan, table).select(keys).to_pylist()
    slow = sort_rows(dataclasses.replace(plan, arrow_sort=None), table).select(keys).to_pylist()
    assert fast == slow


class _GroupState:
    """The part of Spark's GroupState a state function uses, for running one without Spark."""

    def __init__(self) -> None:
        self.value: tuple | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        assert self.value is not None
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value

    def remove(self) -> None:
        self.value = None


def test_bucket_of_keys_gives_each_keys_rows() -> None:
    """key_buckets' state function: three keys in one bucket, fed over three micro-batches
    (the last with the end markers), give the rows each key gives alone; the bucket's
    state is gone once every key has ended."""
    from matchsql.integrations.spark.spark_stream import bucket_function, read_keys

    data = trades(1200, 3, seed=8)
    query = (
        "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        "MEASURES MATCH_NUMBER() AS m, FIRST(A.price) AS a ALL MATCHES "
        "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+ C) "
        "DEFINE B AS price < PREV(price), C AS price > A.price)"
    )
    plan = build_plan(query, "trade", data.schema)
    marked = data.append_column("eos", pa.array([False] * data.num_rows))
    symbols = pc.unique(data["symbol"]).to_pylist()
    markers = pa.table(
        {f.name: pa.nulls(len(symbols), f.type) for f in marked.schema}, schema=marked.schema
    )
    markers = markers.set_column(0, "symbol", pa.array(symbols)).set_column(
        4, "eos", pa.array([True] * len(symbols))
    )
    fn = bucket_function(plan, None, plan.output_schema(), "eos")
    state = _GroupState()
    got = []
    pieces = [marked.slice(0, 500), marked.slice(500), markers]
    for i, piece in enumerate(pieces):
        shuffled = piece.take(random.Random(i).sample(range(piece.num_rows), piece.num_rows))
        got += [
            pa.Table.from_pandas(f, preserve_index=False)
            for f in fn((0,), iter([shuffled.to_pandas()]), state)
        ]
        if i == 0:
            assert set(read_keys(state.get[0])) == {repr((s,)) for s in symbols}
    assert not state.exists
    expected = [
        row
        for symbol in symbols
        for row in run_group(plan, None, data.filter(pc.equal(data["symbol"], symbol))).to_pylist()
    ]
    rows_ = [row for table in got for row in table.to_pylist()]
    assert rows_ and canonical([tuple(r.values()) for r in rows_]) == canonical(
        [tuple(r.values()) for r in expected]
    )
