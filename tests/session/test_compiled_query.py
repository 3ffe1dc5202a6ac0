"""One compile step for every MATCH_RECOGNIZE (matchsql/engine/compiled_query.py).

The same bad query fails with the same error on every path (a one-time query,
a live stream, a continuous query, a row pattern window, Spark's driver); a
statement run again is not analysed again unless its input schema or the
settings the checks read changed; a subquery is folded afresh on every run;
EXPLAIN says what it said before; the plans of a spec are its own.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

import duckdb
import pyarrow as pa
import pytest

import matchsql
from matchsql.config import Config
from matchsql.engine import compiled_query
from matchsql.engine.compiled_query import CompiledQueries, compile_match
from matchsql.engine.planner import physical
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.integrations.spark.spark_plan import build_plan
from matchsql.saved_state import snapshot
from matchsql.storage.stream_lifecycle import create_stream

COLUMNS = [("k", "BIGINT"), ("i", "BIGINT"), ("v", "DOUBLE")]
SCHEMA = pa.schema([("k", pa.int64()), ("i", pa.int64()), ("v", pa.float64())])
TABLE = (
    "CREATE TABLE t AS SELECT i % 3 AS k, i, CAST(i * 7919 % 100 AS DOUBLE) AS v "
    "FROM range(60) r(i)"
)
RISING = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY i "
    "MEASURES FIRST(A.v) AS fv, COUNT(*) AS n PATTERN (A B+) DEFINE B AS v > PREV(v))"
)
FRAME = "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING"

#: Bad queries: the MATCH_RECOGNIZE and, where a window can say the same, the window.
BAD = {
    "no output columns": ("MATCH_RECOGNIZE (ORDER BY i PATTERN (A B) DEFINE B AS v > A.v)", None),
    "pattern over max_pattern_size": (
        "MATCH_RECOGNIZE (PARTITION BY k ORDER BY i MEASURES COUNT(*) AS n PATTERN (A{20}) "
        "DEFINE A AS v > 0)",
        f"(PARTITION BY k ORDER BY i MEASURES COUNT(*) AS n {FRAME} PATTERN (A{{20}}) "
        "DEFINE A AS v > 0)",
    ),
    "unknown column": (
        "MATCH_RECOGNIZE (PARTITION BY k ORDER BY i MEASURES COUNT(*) AS n PATTERN (A B) "
        "DEFINE B AS nope > 1)",
        f"(PARTITION BY k ORDER BY i MEASURES COUNT(*) AS n {FRAME} PATTERN (A B) "
        "DEFINE B AS nope > 1)",
    ),
    "unknown function": (
        "MATCH_RECOGNIZE (PARTITION BY k ORDER BY i MEASURES COUNT(*) AS n PATTERN (A B) "
        "DEFINE B AS no_such_fn(v) > 1)",
        f"(PARTITION BY k ORDER BY i MEASURES COUNT(*) AS n {FRAME} PATTERN (A B) "
        "DEFINE B AS no_such_fn(v) > 1)",
    ),
}


@pytest.fixture
def db(tmp_path, monkeypatch) -> str:
    """A file database with a table ``t`` and a stream ``s`` (archived, so that a
    continuous query may read it) of the same columns, in a registry of its own."""
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(tmp_path / "runtime"))
    path = str(tmp_path / "compiled.duckdb")
    create_stream(
        duckdb.connect(), path, "s", COLUMNS, SCHEMA, archive=str(tmp_path / "hist") + "/"
    )
    return path


@pytest.fixture
def analyses(monkeypatch) -> list[str]:
    """The statement texts the analyser is called for, in order."""
    calls: list[str] = []
    real = compiled_query.analyze

    def counting(node, schema, *, sql, con, **kwargs):
        calls.append(sql)
        return real(node, schema, sql=sql, con=con, **kwargs)

    monkeypatch.setattr(compiled_query, "analyze", counting)
    return calls


@pytest.fixture
def con():
    con = matchsql.connect(demo=False, threads=2)
    con.sql(TABLE)
    yield con
    con.close()


def failure(run) -> tuple[type, str]:
    with pytest.raises(matchsql.Error) as info:
        result = run()
        if result is not None:
            result.fetchall()
    return type(info.value), info.value.message


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_query_fails_alike_on_every_path(db, name):
    mr, window = BAD[name]
    con = matchsql.connect(db, max_pattern_size=10)
    try:
        con.sql("CREATE TABLE t (k BIGINT, i BIGINT, v DOUBLE)")
        con.sql("CREATE TABLE sink (k BIGINT, n BIGINT)")
        paths = {
            "one-time": lambda: con.sql(f"SELECT * FROM t {mr}"),
            "EXPLAIN": lambda: con.sql(f"EXPLAIN SELECT * FROM t {mr}"),
            "stream": lambda: con.sql(f"SELECT * FROM s {mr}"),
            "continuous": lambda: con.sql(
                f"CREATE CONTINUOUS QUERY q AS INSERT INTO sink SELECT * FROM s {mr}"
            ),
            "spark": lambda: build_plan(
                f"SELECT * FROM t {mr}", "t", SCHEMA, config=Config(max_pattern_size=10)
            ),
        }
        if window is not None:
            paths["window"] = lambda: con.sql(f"SELECT i, n OVER w FROM t WINDOW w AS {window}")
        errors = {path: failure(run) for path, run in paths.items()}
        assert len(set(errors.values())) == 1, errors
        assert con.sql("SHOW CONTINUOUS QUERIES").fetchall() == []
    finally:
        con.close()


def test_a_statement_run_again_is_analysed_once(con, analyses):
    first = con.sql(RISING).fetchall()
    assert first and len(analyses) == 1
    assert con.sql(RISING).fetchall() == first
    assert con.sql(RISING + " ORDER BY ALL").fetchall() == sorted(first)  # another text
    assert len(analyses) == 2
    assert con.sql(RISING).fetchall() == first
    assert len(analyses) == 2


def test_a_changed_input_schema_is_analysed_again(con, analyses):
    first = con.sql(RISING).fetchall()
    # DuckDB's own connection changes the table: the session sees only the new schema
    con.duckdb.execute("ALTER TABLE t ADD COLUMN w INTEGER")
    assert con.sql(RISING).fetchall() == first
    assert len(analyses) == 2
    # another table of the same name: its v is an integer now, and so is FIRST(A.v)
    con.duckdb.execute("CREATE OR REPLACE TABLE t AS SELECT k, i, CAST(v AS INTEGER) AS v FROM t")
    assert con.sql(RISING).arrow().schema.field("fv").type == pa.int32()
    assert len(analyses) == 3


def test_a_statement_that_changes_the_catalog_drops_the_compiled_queries(con, analyses):
    con.sql("CREATE MACRO f(x) AS x")
    query = RISING.replace("FIRST(A.v) AS fv", "f(FIRST(A.v)) AS fv")
    assert con.sql(query).arrow().schema.field("fv").type == pa.float64()
    con.sql("CREATE OR REPLACE MACRO f(x) AS CAST(x AS INTEGER)")
    assert con.sql(query).arrow().schema.field("fv").type == pa.int32()
    assert len(analyses) == 2


def test_the_settings_the_checks_read_are_part_of_the_key(con, analyses):
    query = RISING.replace("PATTERN (A B+)", "PATTERN (A{6} B+)")
    rows = con.sql(query).fetchall()
    con.sql("SET max_pattern_size = 5")
    kind, message = failure(lambda: con.sql(query))
    assert kind is matchsql.SemanticError and "row pattern too large" in message
    con.sql("RESET max_pattern_size")
    assert con.sql(query).fetchall() == rows
    assert len(analyses) == 2  # the first compile is found again after RESET


def test_each_match_recognize_of_a_statement_is_its_own(con, analyses):
    first = "MEASURES FIRST(A.i) AS x PATTERN (A B+) DEFINE B AS v > PREV(v))"
    last = "MEASURES LAST(B.i) AS x PATTERN (A B+) DEFINE B AS v > PREV(v))"
    head = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY i "
    alone = sorted(con.sql(head + first).fetchall() + con.sql(head + last).fetchall())
    both = f"{head}{first} UNION ALL {head}{last} ORDER BY ALL"
    assert con.sql(both).fetchall() == alone
    assert con.sql(both).fetchall() == alone
    assert len(analyses) == 4  # two alone, two in the UNION, once each


def test_nested_match_recognizes_and_windows_are_analysed_once(con, analyses):
    nested = (
        f"SELECT * FROM ({RISING}) MATCH_RECOGNIZE (ORDER BY fv, k MEASURES COUNT(*) AS c "
        "PATTERN (L+) DEFINE L AS n > 1)"
    )
    window = (
        f"SELECT i, n OVER w AS n FROM t WINDOW w AS (PARTITION BY k ORDER BY i "
        f"MEASURES COUNT(*) AS n {FRAME} PATTERN (A B+) DEFINE B AS v > PREV(v)) "
        "ORDER BY i"
    )
    for query, compiles in ((nested, 2), (window, 1)):
        before = len(analyses)
        rows = con.sql(query).fetchall()
        assert rows and len(analyses) == before + compiles
        assert con.sql(query).fetchall() == rows
        assert len(analyses) == before + compiles


def test_a_prepared_statement_compiles_once_per_value(con, analyses):
    con.sql("PREPARE rising AS " + RISING.replace("v > PREV(v)", "v > PREV(v) + ?"))
    zero = con.sql("EXECUTE rising(0)").fetchall()
    assert con.sql("EXECUTE rising(0)").fetchall() == zero
    assert len(analyses) == 1
    assert len(con.sql("EXECUTE rising(90)").fetchall()) < len(zero)
    assert len(analyses) == 2


def test_a_subquery_sees_the_data_of_each_run(con, analyses):
    con.sql("CREATE TABLE lim AS SELECT CAST(0 AS DOUBLE) AS x")
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY i MEASURES COUNT(*) AS n "
        "PATTERN (A+) DEFINE A AS v > (SELECT max(x) FROM lim))"
    )
    low = con.sql(query).fetchall()
    con.sql("UPDATE lim SET x = 90")
    high = con.sql(query).fetchall()
    assert sum(n for _, n in high) < sum(n for _, n in low)
    assert len(analyses) == 2
    con.sql("UPDATE lim SET x = 0")
    assert con.sql(query).fetchall() == low


EXPLAINED = [
    "-- MATCH_RECOGNIZE #1 of 1",
    "MATCH_RECOGNIZE PATTERN (A B+)",
    "path: row_local",
    "why: every DEFINE reads only the current row and physical PREV/NEXT offsets",
    "measures: column-wise (Arrow gathers and segment reductions)",
    "automaton: DFA (4 states)",
    "partitions: 2 threads (partitions spread over 2 threads)",
    "split: rows to match in chunks of >= 16384 rows on 2 threads, fixed up to the "
    "sequential result",
    "batched: yes (partitions inside one input batch are matched together)",
    "program (7 instructions, 1 loops):",
    "  0: label A",
    "  1: label B",
    "  2: split 3, 6",
    "  3: begin_iter #0",
    "  4: label B",
    "  5: end_iter #0 loop 2 exit 6",
    "  6: done",
]


def explained(con, query: str) -> list[str]:
    return [row[0] for row in con.sql("EXPLAIN " + query).fetchall()]


def test_explain_shows_the_same_lines(con, analyses):
    assert explained(con, RISING) == EXPLAINED
    con.sql(RISING).fetchall()
    assert explained(con, RISING) == EXPLAINED
    assert len(analyses) == 2  # the EXPLAIN's text once, the query's once
    # The physical plan is decided per setting, not kept from another.
    con.sql("SET threads = 1")
    single = explained(con, RISING)
    assert "partitions: sequential (SET threads = 1)" in single
    assert "split: no (SET threads = 1 or split_rows = 0)" in single
    con.sql("RESET threads")
    con.sql("SET threads = 2")
    assert explained(con, RISING) == EXPLAINED
    assert len(analyses) == 2


def test_a_forced_path_that_does_not_apply_says_so_alike(con):
    registers = RISING.replace("v > PREV(v)", "v > A.v")
    con.sql("SET execution_path = 'row_local'")
    lines = explained(con, registers)
    message = (
        "execution_path 'row_local' does not apply to this query: a DEFINE reads other "
        "rows of the match (A.x, FIRST/LAST, ...); use 'registers' or 'auto'"
    )
    assert lines[2:4] == ["path: none", f"why: {message}"]
    assert failure(lambda: con.sql(registers)) == (matchsql.ExecutionError, message)


# -- the compiled object and its plans ---------------------------------------------------


def compiled(sql: str, cache: CompiledQueries | None = None, schema: pa.Schema = SCHEMA):
    node = next(parse(sql)[0].find_all(MatchRecognizeTable))
    return compile_match(node, schema, sql=sql, con=duckdb.connect(), config=Config(), cache=cache)


def test_a_narrowed_query_plans_for_itself():
    query = compiled(RISING, schema=SCHEMA.append(pa.field("w", pa.string())))
    config = Config(threads=2)
    wide = query.physical(config)
    assert query.physical(config) is wide  # once per config
    assert query.over(query.spec.columns) is query
    narrow = query.over(SCHEMA)  # the input without the column no clause reads
    assert narrow is not query and narrow.spec.columns.equals(SCHEMA)
    assert narrow.spec.memo is not query.spec.memo
    assert narrow.physical(config) is not wide
    assert query.over(SCHEMA) is narrow  # kept for the next run
    replaced = dataclasses.replace(query.spec)
    assert replaced == query.spec and not replaced.memo


def test_the_plan_memo_is_left_behind_by_pickles_copies_and_snapshots():
    spec = compiled(RISING).spec
    physical(spec, Config())
    assert spec.memo
    assert not pickle.loads(pickle.dumps(spec)).memo
    assert not copy.deepcopy(spec).memo
    paths = snapshot.plan_paths({"spec": spec})
    assert not any(("attr", "memo") in path for path in paths)


def test_the_cache_keeps_the_last_used():
    cache = CompiledQueries(keep=2)
    queries = [RISING.replace("COUNT(*) AS n", f"COUNT(*) + {n} AS n") for n in range(3)]
    first, second = (compiled(query, cache=cache) for query in queries[:2])
    assert compiled(queries[0], cache=cache) is first  # used last now
    third = compiled(queries[2], cache=cache)  # drops the second
    assert len(cache) == 2
    assert compiled(queries[0], cache=cache) is first
    assert compiled(queries[2], cache=cache) is third
    assert compiled(queries[1], cache=cache) is not second
