"""Every aggregate in MEASURES computed column-wise equals the reference evaluator.

Each aggregate of the reference (:mod:`matchsql.expr.aggregates`) over
plain columns, expressions, ``CLASSIFIER()`` and ``MATCH_NUMBER()``, with
FILTER, variables and subsets, runs in ONE ROW and ALL ROWS PER MATCH,
RUNNING and FINAL, over a table with NULLs, ties and empty matches: the
compiled path must say it computes the measures column-wise (EXPLAIN) and
give the reference's rows. Hand-derived cases pin the tie and NULL rules;
a hypothesis test draws random aggregate measures into the property suite's
random queries and compares every compiled path with the reference.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

import matchsql
from tests.conformance.test_conformance import ALL_CASES
from tests.paths.test_random_paths import SETTINGS, _check
from tests.property.strategies import partitions, queries

SETUP = (
    "CREATE TABLE t (id INTEGER, p VARCHAR, x INTEGER, f DOUBLE, s VARCHAR, b BOOLEAN, d DATE)",
    "INSERT INTO t VALUES "
    "(1, 'p', 3, 1.5, 'pear', true, DATE '2024-03-01'), "
    "(2, 'p', NULL, 0.1, NULL, false, NULL), "
    "(3, 'p', 5, NULL, 'apple', NULL, DATE '2023-12-31'), "
    "(4, 'p', 5, 0.2, 'fig', true, DATE '2024-01-15'), "
    "(5, 'p', 0, -0.0, 'kiwi', false, DATE '2024-01-15'), "
    "(6, 'p', 2, 0.3, 'apple', true, DATE '2022-06-30'), "
    "(7, 'q', 1, 2.0, 'plum', true, DATE '2021-01-01'), "
    "(8, 'q', 4, NULL, NULL, NULL, NULL), "
    "(9, 'q', NULL, 1e16, 'date', false, DATE '2020-02-29'), "
    "(10, 'q', 4, -1e16, 'yam', true, DATE '2020-02-28')",
)

# A* B*: an empty match wherever a row is neither A nor B (x = 0, 1); SUBSET U = (A, B)
QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
    "MEASURES {measure} AS m, MATCH_NUMBER() AS mn {rows} AFTER MATCH SKIP {skip} "
    "PATTERN (A* B*) SUBSET U = (A, B) "
    "DEFINE A AS x IS NULL OR x > 2, B AS x = 2 OR x = 4 OR x IS NULL) ORDER BY ALL"
)

MEASURES = [
    "count(x)",
    "count(*) FILTER (WHERE x > 2)",
    "count(B.*)",
    "count(U.f)",
    "sum(x * 2)",
    "sum(A.x * 2) FILTER (WHERE b)",
    "avg(x + f)",
    "sum(f)",
    "avg(B.x)",
    "min(s)",
    "max(B.x)",
    "min(d)",
    "max(b)",
    "max(x - id)",
    "count_if(x > 2)",
    "bool_and(b)",
    "bool_or(U.b)",
    "bool_and(x >= 3) FILTER (WHERE x > 0)",
    "any_value(s)",
    "arbitrary(x)",
    "any_value(B.s)",
    "max_by(s, x)",
    "min_by(id, x)",
    "max_by(d, s) FILTER (WHERE x IS NOT NULL)",
    "min_by(x, b)",
    "max_by(f, CLASSIFIER())",
    "array_agg(x)",
    "array_agg(CLASSIFIER())",
    "list(s) FILTER (WHERE b)",
    "array_agg(U.x * 2)",
    "array_agg(f)",
    "array_agg(B.d)",
    "max(f)",
    "min(U.f * 2)",
    "max_by(id, f)",
    "string_agg(s, '-')",
    "string_agg(x, '')",
    "string_agg(CLASSIFIER())",
    "string_agg(A.s, ', ') FILTER (WHERE id > 2)",
    "sum(MATCH_NUMBER() * 10)",
    "array_agg(CLASSIFIER() || CAST(MATCH_NUMBER() AS VARCHAR))",
    "sum(CASE WHEN CLASSIFIER() = 'B' THEN x ELSE 0 END)",
    "count(CLASSIFIER())",
    "max(CLASSIFIER())",
    "sum(x) FILTER (WHERE CLASSIFIER() = 'A' AND MATCH_NUMBER() > 1)",
    "avg(IF(b, x, NULL))",
    "count(*) FILTER (WHERE x IN (2, 5) OR x BETWEEN 4 AND 4)",
    "sum(abs(x - 4)) FILTER (WHERE NOT b)",
    "sum(x / 2)",
    # operators over aggregates, column reads, CLASSIFIER() and MATCH_NUMBER()
    "count(B.x) + count(CLASSIFIER())",
    "max(x) - min(x)",
    "max(x) - A.x",
    "avg(f) * 2",
    "count(*) > 2",
    "CASE WHEN count(*) > 1 THEN max(s) ELSE 'none' END",
    "MATCH_NUMBER() * 10 + count(*)",
    "CLASSIFIER() || max(s)",
    "-max(x)",
    "x + 1",
]
COMPOSITE_RUNNING_FINAL = "FINAL count(*) - RUNNING count(*)"
MODES = [
    ("ALL ROWS PER MATCH", ""),
    ("ALL ROWS PER MATCH", "FINAL "),
    ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", "RUNNING "),
    ("ONE ROW PER MATCH", ""),
]


def run(con: matchsql.Connection, query: str, path: str) -> list[tuple]:
    con.sql(f"SET execution_path = '{path}'")
    result = con.sql(query)
    assert result is not None
    return result.fetchall()


def explain(con: matchsql.Connection, query: str) -> list[str]:
    con.sql("SET execution_path = 'registers'")
    return [r[0] for r in con.sql("EXPLAIN " + query).fetchall()]


@pytest.fixture(scope="module")
def con() -> matchsql.Connection:
    con = matchsql.connect(demo=False)
    for stmt in SETUP:
        con.sql(stmt)
    return con


#: DuckDB's aggregate over a column and the label: the matcher collects both per row (a
#: struct), which the column-wise arguments do not build.
ROW_WISE = {"max_by(f, CLASSIFIER())"}


@pytest.mark.parametrize("mode", MODES, ids=["all", "all-final", "omit-empty", "one"])
@pytest.mark.parametrize("measure", MEASURES)
def test_column_wise_equals_reference(
    con: matchsql.Connection, measure: str, mode: tuple[str, str]
) -> None:
    rows, semantics = mode
    for skip in ("PAST LAST ROW", "TO NEXT ROW"):
        query = QUERY.format(measure=semantics + measure, rows=rows, skip=skip)
        try:
            expected = run(con, query, "reference")
        except matchsql.Error as exc:  # the analysis rejects it: on every path alike
            with pytest.raises(type(exc)):
                run(con, query, "registers")
            continue
        lines = explain(con, query)
        if measure in ROW_WISE:
            assert any("STRUCT is not evaluated by the column-wise" in line for line in lines), (
                lines
            )
            assert run(con, query, "registers") == expected, query
            continue
        assert any(
            "measures: column-wise" in line or "output: column-wise rows" in line for line in lines
        ), lines
        assert run(con, query, "registers") == expected, query
        assert run(con, query, "row_local") == expected, query


@pytest.mark.parametrize("rows", ["ALL ROWS PER MATCH", "ONE ROW PER MATCH"])
def test_running_and_final_parts_in_one_measure(con: matchsql.Connection, rows: str) -> None:
    query = QUERY.format(measure=COMPOSITE_RUNNING_FINAL, rows=rows, skip="PAST LAST ROW")
    assert not any("reference evaluator" in line for line in explain(con, query))
    expected = run(con, query, "reference")
    assert run(con, query, "registers") == expected
    if rows.startswith("ALL"):  # rows still to come in the match: 0 on its last row
        assert all(row[2] >= 0 for row in expected)


def test_sum_inside_an_expression_stays_on_the_reference(con: matchsql.Connection) -> None:
    """SUM over integers is a HUGEINT (a Python Decimal in the reference): its arithmetic
    is not Arrow's, so it is computed column-wise only as a whole measure."""
    query = QUERY.format(
        measure="sum(x) / count(x)", rows="ONE ROW PER MATCH", skip="PAST LAST ROW"
    )
    assert any(
        "reference evaluator per match" in line and "inside an expression" in line
        for line in explain(con, query)
    )
    assert run(con, query, "registers") == run(con, query, "reference")


def test_distinct_is_duckdbs(con: matchsql.Connection) -> None:
    """An aggregate with DISTINCT is DuckDB's, over the rows the matcher collects."""
    query = QUERY.format(
        measure="count(DISTINCT x)", rows="ALL ROWS PER MATCH", skip="PAST LAST ROW"
    )
    assert any(
        "DuckDB computes over the matches" in line and "COUNT(DISTINCT" in line
        for line in explain(con, query)
    )
    assert run(con, query, "registers") == run(con, query, "reference")


FLOATS = (
    "CREATE TABLE g (id INTEGER, p VARCHAR, f DOUBLE, s VARCHAR)",
    "INSERT INTO g VALUES (1, 'p', 0.0, 'a'), (2, 'p', -0.0, 'b'), (3, 'p', 'NaN', 'c'), "
    "(4, 'p', 2.5, 'd'), (5, 'p', NULL, 'e'), (6, 'q', NULL, 'f'), (7, 'q', 'NaN', 'g'), "
    "(8, 'q', 9.0, 'h')",
)
FLOAT_QUERY = (
    "SELECT id, hi, lo, hb, lb FROM g MATCH_RECOGNIZE (PARTITION BY p ORDER BY id "
    "MEASURES max(f) AS hi, min(f) AS lo, max_by(s, f) AS hb, min_by(s, f) AS lb "
    "ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true) ORDER BY id"
)


@pytest.mark.parametrize("path", ["reference", "registers"])
def test_float_extremes_by_hand(path: str) -> None:
    """NaN is ordered as DuckDB orders it, above every other number and equal to itself
    (and -0.0 equals 0.0): a later equal key never replaces the best one."""
    con = matchsql.connect(demo=False)
    for stmt in FLOATS:
        con.sql(stmt)
    assert any("output: column-wise rows" in line for line in explain(con, FLOAT_QUERY))
    got = [
        tuple(repr(v) if isinstance(v, float) else v for v in row)
        for row in run(con, FLOAT_QUERY, path)
    ]
    assert got == [
        (1, "0.0", "0.0", "a", "a"),
        (2, "0.0", "0.0", "a", "a"),  # -0.0 equals 0.0: the first row keeps it
        (3, "nan", "0.0", "c", "a"),  # NaN is the greatest value
        (4, "nan", "0.0", "c", "a"),
        (5, "nan", "0.0", "c", "a"),  # NULL keys are skipped
        (6, None, None, None, None),
        (7, "nan", "nan", "g", "g"),
        (8, "nan", "9.0", "g", "h"),  # 9.0 is below NaN
    ]


TIES = (
    "CREATE TABLE k (id INTEGER, x INTEGER, s VARCHAR)",
    "INSERT INTO k VALUES (1, 3, 'a'), (2, 5, 'b'), (3, 5, 'c'), (4, NULL, NULL), (5, 2, 'e')",
)
TIE_QUERY = (
    "SELECT id, hi, lo, l, j, fv, av FROM k MATCH_RECOGNIZE (ORDER BY id "
    "MEASURES max_by(s, x) AS hi, min_by(s, x) AS lo, array_agg(x) AS l, "
    "string_agg(s, '/') AS j, any_value(CASE WHEN id > 3 THEN s END) AS fv, "
    "arbitrary(s) FILTER (WHERE id > 3) AS av "
    "ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true) ORDER BY id"
)


@pytest.mark.parametrize("path", ["reference", "registers", "row_local"])
def test_ties_and_nulls_by_hand(path: str) -> None:
    con = matchsql.connect(demo=False)
    for stmt in TIES:
        con.sql(stmt)
    assert any("output: column-wise rows" in line for line in explain(con, TIE_QUERY))
    assert run(con, TIE_QUERY, path) == [
        # one match of rows 1-5; every value is over rows 1..id
        (1, "a", "a", [3], "a", None, None),
        # x 5 beats 3: max_by takes b
        (2, "b", "a", [3, 5], "a/b", None, None),
        # row 3 ties row 2 at 5: the first row keeps it (b, not c)
        (3, "b", "a", [3, 5, 5], "a/b/c", None, None),
        # row 4's NULL key is skipped by max_by/min_by, kept by array_agg, skipped by
        # string_agg; from row 4 on (CASE, FILTER) any_value skips its NULL, arbitrary not
        (4, "b", "a", [3, 5, 5, None], "a/b/c", None, None),
        # x 2 is the new least: min_by takes e; any_value now finds e
        (5, "b", "e", [3, 5, 5, None, 2], "a/b/c/e", "e", None),
    ]


def test_match_number_running_sum_by_hand() -> None:
    """Issue 12's example: RUNNING sum(MATCH_NUMBER() * 10) in ALL ROWS PER MATCH."""
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE u (id INTEGER)")
    con.sql("INSERT INTO u VALUES (1), (2), (3), (4), (5)")
    query = (
        "SELECT id, s FROM u MATCH_RECOGNIZE (ORDER BY id MEASURES "
        "RUNNING sum(MATCH_NUMBER() * 10) AS s ALL ROWS PER MATCH "
        "PATTERN (A{1,2}) DEFINE A AS true) ORDER BY id"
    )
    assert any("output: column-wise rows" in line for line in explain(con, query))
    # matches 1-2 (number 1), 3-4 (2), 5 (3): running sums 10, 20 | 20, 40 | 30
    expected = [
        (1, Decimal(10)),
        (2, Decimal(20)),
        (3, Decimal(20)),
        (4, Decimal(40)),
        (5, Decimal(30)),
    ]
    for path in ("reference", "registers"):
        assert run(con, query, path) == expected


# -- random aggregate measures -----------------------------------------------------------------

NUMERIC = [
    "{q}x",
    "{q}y",
    "{q}x * 2",
    "{q}x + {q}y",
    "MATCH_NUMBER()",
    "{q}x - MATCH_NUMBER()",
    "CASE WHEN CLASSIFIER() = 'A' THEN {q}x ELSE {q}y END",
    "{q}x / 2",
    "1",
]
BOOLEAN = ["{q}x > {q}y", "{q}x IS NULL", "CLASSIFIER() = 'B'", "{q}y >= 2 OR {q}x = 0"]
TEXT = ["CLASSIFIER()", "CLASSIFIER() || CAST({q}x AS VARCHAR)"]
FILTERS = [
    "",
    "",
    " FILTER (WHERE {q}x > 1)",
    " FILTER (WHERE CLASSIFIER() <> 'A')",
    " FILTER (WHERE MATCH_NUMBER() > 1 OR {q}y IS NULL)",
]


@st.composite
def aggregate_measures(draw: st.DrawFn) -> str:
    """One aggregate call: a function, an argument fit for it, a variable, a FILTER."""
    kind = draw(st.sampled_from(["numeric", "boolean", "text", "pair", "star"]))
    if kind == "numeric":
        fn = draw(
            st.sampled_from(
                [
                    "sum",
                    "avg",
                    "min",
                    "max",
                    "count",
                    "any_value",
                    "arbitrary",
                    "array_agg",
                    "string_agg",
                ]
            )
        )
        call = f"{fn}({draw(st.sampled_from(NUMERIC))})"
    elif kind == "boolean":
        fn = draw(st.sampled_from(["count_if", "bool_and", "bool_or", "count", "array_agg"]))
        call = f"{fn}({draw(st.sampled_from(BOOLEAN))})"
    elif kind == "text":
        fn = draw(st.sampled_from(["min", "max", "array_agg", "count", "any_value"]))
        call = f"{fn}({draw(st.sampled_from(TEXT))})"
        if draw(st.booleans()):
            call = f"string_agg({draw(st.sampled_from(TEXT))}, '-')"
    elif kind == "pair":
        fn = draw(st.sampled_from(["max_by", "min_by"]))
        call = f"{fn}({draw(st.sampled_from(NUMERIC + TEXT))}, {draw(st.sampled_from(NUMERIC))})"
    else:
        call = "count({q}*)"
    q = draw(st.sampled_from(["", "A.", "B.", "U."]))
    text = (call + draw(st.sampled_from(FILTERS))).replace("{q}", q)
    return draw(st.sampled_from(["", "RUNNING ", "FINAL "])) + text


@SETTINGS
@given(sql=queries(), rows=partitions, data=st.data())
def test_random_aggregate_measures(sql: str, rows: list[dict], data: st.DataObject) -> None:
    head, _, rest = sql.partition("MEASURES ")
    _, _, tail = rest.partition("\n")
    measures = data.draw(st.lists(aggregate_measures(), min_size=1, max_size=4))
    if data.draw(st.booleans()):  # an operator over two aggregates
        op = data.draw(st.sampled_from([" + ", " - ", " * ", " > ", " = ", " || "]))
        measures.append(data.draw(aggregate_measures()) + op + data.draw(aggregate_measures()))
    listed = ", ".join(f"{m} AS m{i}" for i, m in enumerate(measures))
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    _check(f"{head}MEASURES {listed}\n{tail}", rows, splits)


# -- conformance cases that used the reference evaluator before ---------------------------------

COLUMN_WISE_CASES = [
    "match_number_running_sum",
    "match_number_final_sum",
    "match_number_max_count",
    "match_number_avg_with_column",
    "classifier_running_count",
    "classifier_running_max",
    "classifier_final_min",
    "classifier_string_agg",
    "classifier_array_agg",
    "classifier_case_inside_sum",
    "classifier_and_match_number_in_one_aggregate",
    "filter_final_sum",
]


@pytest.mark.parametrize("name", COLUMN_WISE_CASES)
def test_conformance_cases_go_column_wise(name: str) -> None:
    case = next(c for c in ALL_CASES if c.name == name)
    con = matchsql.connect(demo=False)
    for stmt in case.setup:
        con.sql(stmt)
    lines = explain(con, case.query)
    assert any(
        "measures: column-wise" in line or "output: column-wise rows" in line for line in lines
    ), lines
    assert run(con, case.query, "registers") == case.expected
