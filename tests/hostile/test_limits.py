"""Issue 14's hostile inputs, one by one: each gives rows or a located matchsql.Error,
at once, and deep-but-reasonable statements work."""

from __future__ import annotations

import threading
import time

import pytest

import matchsql
from matchsql.engine import planner
from matchsql.engine.compiled.batch import WholePartitions
from matchsql.engine.compiled.lowering import MAX_CLOSURE_CELLS, closure_table, program_array
from matchsql.engine.program import compile_pattern
from matchsql.errors import LimitExceededError, ParseError, SemanticError
from matchsql.grammar.pattern_parser import parse_pattern


@pytest.fixture(scope="module")
def con():
    connection = matchsql.connect(demo=False)
    connection.duckdb.execute(
        "CREATE TABLE t100 AS SELECT i AS id, 'S' || (i % 3) AS symbol, "
        "(100 + (i * 7919) % 13 - 6)::DOUBLE AS price FROM range(100) r(i)"
    )
    connection.duckdb.execute(
        "CREATE TABLE t100k AS SELECT i AS id, (100 + (i * 7919) % 13 - 6)::DOUBLE AS price "
        "FROM range(100000) r(i)"
    )
    yield connection
    connection.close()


def mr(body: str, table: str = "t100") -> str:
    return f"SELECT * FROM {table} MATCH_RECOGNIZE (ORDER BY id {body})"


def define(condition: str) -> str:
    return mr(f"MEASURES FIRST(id) AS f, COUNT(*) AS n PATTERN (A B) DEFINE B AS {condition}")


def rows(con, sql: str) -> list[tuple]:
    return con.sql(sql).fetchall()


def fails(con, sql: str, kind: type, match: str, seconds: float = 5.0) -> matchsql.Error:
    began = time.monotonic()
    with pytest.raises(kind, match=match) as info:
        con.sql(sql).fetchall()
    assert time.monotonic() - began < seconds
    assert "Traceback" not in str(info.value)
    return info.value


def test_fifty_nested_parentheses_work(con) -> None:
    flat = rows(con, define("price > 100"))
    assert flat  # the nesting below must not change the answer
    assert rows(con, define("(" * 50 + "price" + ")" * 50 + " > 100")) == flat
    measured = rows(
        con,
        mr(
            "MEASURES "
            + "(" * 50
            + "LAST(B.price)"
            + ")" * 50
            + " AS x PATTERN (A B) DEFINE B AS price > 100"
        ),
    )
    assert measured == rows(
        con, mr("MEASURES LAST(B.price) AS x PATTERN (A B) DEFINE B AS price > 100")
    )


def test_fifty_nested_navigations_parse(con) -> None:
    # Nesting PREV in PREV is refused by rule, not by the parser running out of stack.
    fails(
        con,
        define("PREV(" * 50 + "price" + ")" * 50 + " > 100"),
        SemanticError,
        "PREV cannot be nested inside PREV",
    )


@pytest.mark.parametrize(
    "condition",
    [
        "NOT " * 500 + "price > 100",
        "(" * 500 + "price" + ")" * 500 + " > 100",
        "- (" * 500 + "price" + ")" * 500 + " < 0",
        "CASE WHEN " * 300 + "true" + " THEN true END" * 300,
    ],
)
def test_deep_expressions_refused_with_position(con, condition: str) -> None:
    err = fails(con, define(condition), ParseError, r"nested too deeply \(limit 100\)")
    assert err.line == 1 and err.column is not None


def test_deep_row_pattern_refused(con) -> None:
    sql = mr(
        "MEASURES COUNT(*) AS n PATTERN ("
        + "(" * 500
        + "A"
        + ")" * 500
        + " B) DEFINE B AS price > 100"
    )
    fails(con, sql, ParseError, r"nested too deeply \(limit 100\)")


def test_long_operator_chains(con) -> None:
    assert rows(con, define(" AND ".join(["price > 1"] * 300) + " AND price > 100")) == rows(
        con, define("price > 100")
    )
    fails(
        con,
        define(" + ".join(["price"] * 2000) + " > 0"),
        ParseError,
        r"too many chained operators .*\(limit 400\)",
    )


def test_long_bounded_quantifier_runs(con) -> None:
    # Emission of 999 nested optionals used to recurse once per optional.
    got = rows(con, mr("MEASURES COUNT(*) AS n PATTERN (A{1,1000} B) DEFINE B AS price < 95"))
    assert got and all(n >= 2 for (n,) in got)


@pytest.mark.parametrize("quantifier", ["{1000000}", "{99999999}", "{0,99999999}", "{99999999,}"])
def test_huge_quantifiers_refused_at_once(con, quantifier: str) -> None:
    sql = mr(f"MEASURES COUNT(*) AS n PATTERN (A B{quantifier}) DEFINE B AS price > 100")
    fails(con, sql, SemanticError, r"row pattern too large.*max_pattern_size", seconds=2)
    fails(con, "EXPLAIN " + sql, SemanticError, r"row pattern too large", seconds=2)


def test_quantifier_bound_beyond_machine_numbers(con) -> None:
    sql = mr("MEASURES COUNT(*) AS n PATTERN (A B{99999999999}) DEFINE B AS price > 100")
    fails(con, sql, ParseError, r"quantifier bound 99999999999 is too large \(limit 1000000000\)")
    fails(con, "EXPLAIN " + sql, ParseError, r"quantifier bound .* too large")


def test_max_pattern_size_setting(con) -> None:
    sql = mr("MEASURES COUNT(*) AS n PATTERN (A{2000} B) DEFINE B AS price > 100")
    assert rows(con, sql) == []  # 2,001 instructions: within the default
    con.sql("SET max_pattern_size = 1000")
    try:
        fails(con, sql, SemanticError, "more than 1000 instructions")
    finally:
        con.sql("SET max_pattern_size = 100000")


def test_permute_and_alternatives(con) -> None:
    names = [f"V{k}" for k in range(11)]
    fails(
        con,
        mr(
            "MEASURES COUNT(*) AS n PATTERN (PERMUTE("
            + ", ".join(names)
            + ")) DEFINE V0 AS price > 100"
        ),
        SemanticError,
        r"PERMUTE of 11 items: at most 10",
        seconds=2,
    )
    alternatives = " | ".join(f"V{k}" for k in range(1000))
    got = rows(
        con,
        mr(
            f"MEASURES COUNT(*) AS n PATTERN (({alternatives}) B) "
            "DEFINE V0 AS price > 200, B AS price > 100"
        ),
    )
    assert got == rows(
        con,
        mr(
            "MEASURES COUNT(*) AS n PATTERN ((V0 | V1) B) "
            "DEFINE V0 AS price > 200, B AS price > 100"
        ),
    )


def test_twenty_thousand_alternatives_are_refused_before_anything_is_built(con) -> None:
    """Each variable a match may begin with is a live thread on its first row: more than
    max_threads of them fail every attempt, so the statement is refused at analysis."""
    alternatives = " | ".join(f"V{k}" for k in range(20_000))
    fails(
        con,
        mr(f"MEASURES COUNT(*) AS n PATTERN (({alternatives}) B) DEFINE B AS price > 100"),
        LimitExceededError,
        r"needs more than max_threads=10000 live threads: a match attempt "
        r"may begin with any of 20,000 pattern variables",
        seconds=60,
    )


@pytest.mark.parametrize(
    ("pattern", "starts"),
    [
        ("(A | B)* C", 3),  # C may begin a match too (the loop may take no row)
        ("A? (B | C{0}) D", 3),  # C{0} takes no row: A, B and D
        ("PERMUTE(A, B) C", 2),
        ("^ (A | B)", 2),
        ("{- A -} | B", 2),
    ],
)
def test_the_variables_a_match_may_begin_with_are_counted(pattern, starts) -> None:
    con = matchsql.connect(demo=False, max_threads=starts)
    con.sql("CREATE TABLE t100 AS SELECT range AS id, range::DOUBLE AS price FROM range(5)")
    query = mr(f"MEASURES COUNT(*) AS n PATTERN ({pattern}) DEFINE A AS price > 1")
    con.sql(query).fetchall()  # exactly max_threads of them: it runs
    con.sql(f"SET max_threads = {starts - 1}")
    fails(con, query, LimitExceededError, f"may begin with any of {starts} pattern variables")
    con.close()


def test_five_thousand_alternatives_end_with_a_limit_not_with_memory(con) -> None:
    """Each live thread of the compiled matcher holds registers per variable: with 5,001
    variables its working arrays are refused by their size (1.3 GiB at 8,192 threads)
    instead of taking the machine's memory."""
    alternatives = " | ".join(f"V{k}" for k in range(5_000))
    error = fails(
        con,
        mr(f"MEASURES COUNT(*) AS n PATTERN (({alternatives}) B) DEFINE B AS price > 100"),
        LimitExceededError,
        r"the compiled matcher would need [\d.]+ GiB of registers for [\d,]+ live "
        r"threads of a pattern with 5,001 variables",
        seconds=60,
    )
    assert "ran out of memory" not in str(error)


def test_a_closure_table_too_large_is_not_built() -> None:
    wide = compile_pattern(parse_pattern("(" + " | ".join(f"V{k}" for k in range(3_000)) + ")"))
    table = program_array(wide)
    assert table.shape[1] == 6 + 1 and (table[:, 6] == -1).all()  # 6,000 x 3,000 cells: none
    narrow = program_array(compile_pattern(parse_pattern("(V0 | V1 | V2) B")))
    assert narrow.shape[1] > 7 and narrow[0, 6] == 3  # the seed reaches V0, V1, V2
    assert closure_table(narrow[:, :6]).size <= MAX_CLOSURE_CELLS


def test_a_hundred_measures(con) -> None:
    measures = ", ".join(f"LAST(A.price, {k % 3}) + {k} AS m{k}" for k in range(100))
    began = time.monotonic()
    got = rows(
        con, mr(f"MEASURES {measures} PATTERN (A+ B) DEFINE A AS price > 99, B AS price < 99")
    )
    assert got and len(got[0]) == 100
    assert time.monotonic() - began < 10


@pytest.mark.parametrize(
    "sql",
    [
        define("symbol = '\ud800'"),
        mr('MEASURES COUNT(*) AS "\ud800" PATTERN (A B) DEFINE B AS price > 100'),
        "SELECT '\udfff'",
    ],
)
def test_lone_surrogates(con, sql: str) -> None:
    err = fails(con, sql, ParseError, r"lone surrogate \\u(d800|dfff)")
    err.excerpt.encode("utf-8")  # printable: the surrogate is replaced in the excerpt


def test_overlong_names_and_literals(con) -> None:
    fails(
        con,
        mr("MEASURES COUNT(*) AS " + "x" * 10_000_000 + " PATTERN (A) DEFINE A AS true"),
        ParseError,
        "identifier or word longer than 10000 characters",
        seconds=2,
    )
    fails(
        con,
        define("symbol = '" + "y " * 1_000_000 + "'"),
        ParseError,
        "string literal longer than 1000000 characters",
        seconds=2,
    )


#: The buffer limit the runaway tests set: t100k's rows are at most 16 bytes (id, price),
#: at least 8, so a partition may hold 32,000 to 64,000 of its 100,000 rows.
LOW_LIMIT = "SET max_buffered_bytes = '512KB'"
#: The error at that limit, naming the setting, its amount and how to raise it.
AT_LOW_LIMIT = r"max_buffered_bytes = 500.0 KiB buffered.*SET max_buffered_bytes = '1000KiB'"


@pytest.fixture
def low_limit(con):
    con.sql(LOW_LIMIT)
    yield con
    con.sql("RESET max_buffered_bytes")


@pytest.mark.parametrize(
    "pattern, condition",
    [
        ("(A|B)*(A|B)*(A|B)*C", "A AS price > 100, B AS price <= 100, C AS price < 0"),
        ("(A+)+B", "A AS price > 0, B AS price < 0"),
        ("A B+", "B AS CLASSIFIER() = 'B'"),
        ("A+ B", "A AS A.price >= FIRST(A.price) - 100, B AS price < 0"),
    ],
)
def test_runaway_patterns_stop_at_the_buffer_limit(low_limit, pattern: str, condition: str) -> None:
    # C/B never holds: every start row's attempt would run to the partition's end.
    sql = mr(f"MEASURES COUNT(*) AS n PATTERN ({pattern}) DEFINE {condition}", "t100k")
    fails(low_limit, sql, LimitExceededError, AT_LOW_LIMIT, seconds=10)


def test_runaway_in_whole_partitions_of_a_batch_stops(low_limit) -> None:
    # Partitions of 60,000 rows fit in one input batch and are matched together
    # (batch.py); an attempt there reads at most the rows the buffer limit allows too
    # (24-byte rows: 21,333 of them).
    con = low_limit
    con.duckdb.execute(
        "CREATE TABLE parts AS SELECT i // 60000 AS p, i AS id, "
        "(100 + (i * 7919) % 13 - 6)::DOUBLE AS price FROM range(120000) r(i)"
    )
    sql = (
        "SELECT * FROM parts MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES "
        "COUNT(*) AS n AFTER MATCH SKIP TO NEXT ROW PATTERN ((A|B)*(A|B)*(A|B)*C) "
        "DEFINE A AS price > 100, B AS price <= 100, C AS price < 0)"
    )
    assert "batched: yes" in "\n".join(r[0] for r in con.sql(f"EXPLAIN {sql}").fetchall())
    fails(
        con,
        sql,
        LimitExceededError,
        r"max_buffered_bytes = 500.0 KiB buffered \(21,334 rows of about 24 bytes, for a "
        r"match attempt open since partition row 1\).*SET max_buffered_bytes",
        seconds=10,
    )


@pytest.mark.parametrize(
    "condition",
    [
        "sum(price) > 10",
        "sum(B.price) > 10",
        "avg(price) > 10 AND count(B.price) > 0",
        "max(B.price) >= min(price) AND count(*) > 0",
    ],
)
def test_running_aggregates_in_define_are_linear(con, condition: str) -> None:
    # Every B row keeps the aggregate true, so the attempt at row 1 runs to the
    # limit; recomputing the aggregate at each row took minutes.
    sql = mr(f"MEASURES COUNT(*) AS n PATTERN (A B+) DEFINE B AS {condition}", "t100k")
    con.sql(LOW_LIMIT)
    try:
        fails(con, sql, LimitExceededError, AT_LOW_LIMIT, seconds=10)
    finally:
        con.sql("RESET max_buffered_bytes")
    began = time.monotonic()
    assert rows(con, sql) == [(100_000,)]  # the default holds the 1.6 MB partition
    assert time.monotonic() - began < 10


def test_runaway_with_unmatched_rows_stops(low_limit) -> None:
    sql = mr(
        "MEASURES COUNT(*) AS n ALL ROWS PER MATCH WITH UNMATCHED ROWS "
        "PATTERN ((A|B)* C) DEFINE A AS price > 100, B AS price <= 100, C AS price < 0",
        "t100k",
    )
    fails(low_limit, sql, LimitExceededError, AT_LOW_LIMIT, seconds=10)


def test_permute_of_eight_refused_by_size(con) -> None:
    sql = mr(
        "MEASURES COUNT(*) AS n PATTERN (PERMUTE(A, B, C, D, E, F, G, H)) DEFINE A AS price > 0",
        "t100k",
    )
    fails(con, sql, SemanticError, "max_pattern_size", seconds=2)


@pytest.mark.parametrize("path", ["reference", "row_local", "registers"])
def test_limit_stops_the_matchers(path: str) -> None:
    # Rows 0-99 match as (even, odd) pairs at once; from row 100 on an attempt
    # never ends and would fail on the buffer limit (1 MB: 125,000 of the 8-byte rows).
    # With LIMIT the matchers stop after the first input batches, before reaching it.
    # The compiled paths used to gather up to 2M rows per speculative run (split_rows)
    # first, past the limit.
    con = matchsql.connect(
        demo=False, batch_size=1000, execution_path=path, max_buffered_bytes="1MB"
    )
    con.duckdb.execute("CREATE TABLE tail AS SELECT i AS id FROM range(200000) r(i)")
    sql = (
        "SELECT * FROM tail MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS f "
        "ALL ROWS PER MATCH PATTERN (A+ B) DEFINE A AS id % 2 = 0 OR id >= 100, "
        "B AS id % 2 = 1 AND id < 100)"
    )
    with pytest.raises(LimitExceededError, match="max_buffered_bytes"):
        con.sql(sql).fetchall()
    got = con.sql(sql + " LIMIT 15").fetchall()
    assert [row[0] for row in got] == list(range(15))
    assert [row[1] for row in got] == [k - k % 2 for k in range(15)]
    assert con.sql(sql + " LIMIT 0").fetchall() == []
    con.close()


MODES = {
    "one row": ("ONE ROW PER MATCH", "A* B", "B AS price < 50"),
    "all rows": ("ALL ROWS PER MATCH", "A* B", "B AS price < 50"),
    "unmatched rows": ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", "A* B", "B AS price < 50"),
    "show empty": ("ALL ROWS PER MATCH SHOW EMPTY MATCHES", "A* C?", "C AS price < 10"),
    "omit empty": ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", "A* C?", "C AS price < 10"),
}
LIMIT_ROWS = 200_000


@pytest.fixture(scope="module")
def counted(request):
    """A connection over ``LIMIT_ROWS`` rows (one partition and 50) whose matchers count
    the rows they are fed: ``(connection, counter)``, the counter a list of one int."""
    fed = [0]
    lock = threading.Lock()
    patch = pytest.MonkeyPatch()

    def add(n: int) -> None:
        with lock:
            fed[0] += n

    class Counting:
        def __init__(self, inner) -> None:
            self.inner = inner

        def feed(self, batch):
            add(batch.num_rows)
            return self.inner.feed(batch)

        def feed_final(self, batch):
            add(batch.num_rows)
            return self.inner.feed_final(batch)

        def __getattr__(self, name: str):
            return getattr(self.inner, name)

    new = planner.new_partition_matcher
    whole = WholePartitions.match_counted
    patch.setattr(planner, "new_partition_matcher", lambda *a, **k: Counting(new(*a, **k)))
    patch.setattr(
        WholePartitions,
        "match_counted",
        lambda self, batch, *a, **k: (add(batch.num_rows), whole(self, batch, *a, **k))[1],
    )
    con = matchsql.connect(demo=False, batch_size=4096)
    for name, parts in (("one", 1), ("fifty", 50)):
        for table, rows in ((name, LIMIT_ROWS), (f"{name}_head", 20_000)):
            con.duckdb.execute(
                f"CREATE TABLE {table} AS SELECT i % {parts} AS p, i AS id, "
                f"(hash(i) % 100)::DOUBLE AS price FROM range({rows}) r(i)"
            )
    yield con, fed
    con.close()
    patch.undo()


@pytest.mark.parametrize(
    "setting",
    [
        "execution_path = 'reference'",
        "execution_path = 'row_local'",
        "execution_path = 'registers'",
        "threads = 2",
        "workers = 2",
    ],
)
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("table", ["one", "fifty"])
@pytest.mark.parametrize("select", ["*", "p, n, f"])
def test_limit_stops_every_output_mode(
    counted, setting: str, mode: str, table: str, select: str
) -> None:
    # A LIMIT 20 answer may cost the matchers a few input batches, never the input: the
    # rows fed to the matchers (in this process, or routed to workers) are counted.
    con, fed = counted
    rows, pattern, condition = MODES[mode]
    sql = (
        f"SELECT {select} FROM {{}} MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES "
        f"count(*) AS n, FIRST(id) AS f {rows} AFTER MATCH SKIP TO NEXT ROW "
        f"PATTERN ({pattern}) DEFINE A AS price > PREV(price), {condition}) LIMIT 20"
    )
    con.sql(f"SET {setting}")
    try:
        expected = con.sql(sql.format(f"{table}_head")).fetchall()
        fed[0] = 0
        workers = con._executor.workers
        before = workers.last
        got = con.sql(sql.format(table)).fetchall()
        router = workers.last if workers.last is not before else None
    finally:
        con.sql(f"RESET {setting.split()[0]}")
    assert got == expected and len(got) == 20
    routed = sum(router.routed) if router is not None else 0
    assert fed[0] + routed <= 4 * 4096, (fed[0], routed)


@pytest.mark.parametrize(
    "keys, kind, match",
    [
        ("ORDER BY RUNNING id", ParseError, "Expecting PATTERN"),
        ("PARTITION BY PREV(id) ORDER BY id", matchsql.CatalogError, "prev does not exist"),
    ],
)
def test_row_pattern_functions_are_plain_sql_in_keys(
    con, keys: str, kind: type, match: str
) -> None:
    # Used to reach DuckDB's SQL generator as our own nodes: a raw ValueError.
    sql = (
        f"SELECT * FROM t100 MATCH_RECOGNIZE ({keys} MEASURES COUNT(*) AS n PATTERN (A) "
        "DEFINE A AS price > 100)"
    )
    fails(con, sql, kind, match)
    fails(con, "EXPLAIN " + sql, kind, match)
