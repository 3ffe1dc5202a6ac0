"""The DEFINE/MEASURES evaluator, driven directly through MatchView."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from matchsql.errors import ExecutionError, SemanticError
from matchsql.expr.rows import ListRows, MatchView
from matchsql.expr.rowwise import analyze_expression, compile_expression
from matchsql.plan.spec import MatchSpec

from .specs import expr, pattern

# Partition of 6 rows; a match from row 1 to 4 labelled A B B A (row 0 and
# row 5 lie outside the match).
ROWS = [
    {"id": 0, "x": 5, "s": "p", "ts": dt.datetime(2024, 1, 1, 0, 0)},
    {"id": 1, "x": 10, "s": "a", "ts": dt.datetime(2024, 1, 1, 0, 1)},
    {"id": 2, "x": 20, "s": "bb", "ts": dt.datetime(2024, 1, 1, 0, 2)},
    {"id": 3, "x": None, "s": "b", "ts": dt.datetime(2024, 1, 1, 0, 3)},
    {"id": 4, "x": 40, "s": "aa", "ts": dt.datetime(2024, 1, 1, 0, 4)},
    {"id": 5, "x": 50, "s": "q", "ts": dt.datetime(2024, 1, 1, 0, 5)},
]
LABELS = ["A", "B", "B", "A"]
SPEC = MatchSpec(
    columns=pa.schema(
        [("id", pa.int64()), ("x", pa.int64()), ("s", pa.string()), ("ts", pa.timestamp("us"))]
    ),
    pattern=pattern("(A | B)+"),
    subsets={"U": ("A", "B")},
)


def ev(
    text: str,
    current: int = 4,
    final: bool = False,
    labels=None,
    start: int = 1,
    match_number: int = 7,
) -> object:
    fn = compile_expression(expr(text), SPEC)
    view = MatchView(
        ListRows(ROWS), start, LABELS if labels is None else labels, current, match_number, final
    )
    return fn(view)


# -- row references and navigation ---------------------------------------------------------


def test_column_references() -> None:
    assert ev("x") == 40  # unqualified: the current row (4)
    assert ev("A.x") == 40  # last A row up to current = row 4
    assert ev("B.x") is None  # last B row = row 3, x is NULL
    assert ev("A.x", current=3) == 10  # running at row 3: last A is row 1
    assert ev("U.id", current=2) == 2


def test_running_and_final() -> None:
    # At row 2 running sees rows 1-2; FINAL sees the whole match (rows 1-4).
    assert ev("LAST(id)", current=2) == 2
    assert ev("FINAL(LAST(id))", current=2) == 4
    assert ev("FINAL(LAST(A.id))", current=2) == 4
    assert ev("RUNNING(LAST(A.id))", current=2, final=True) == 1
    # view.final makes the default FINAL (ONE ROW PER MATCH).
    assert ev("A.id", current=2, final=True) == 4
    assert ev("COUNT(*)", current=2) == 2
    assert ev("FINAL(COUNT(*)) - RUNNING(COUNT(*))", current=2) == 2


def test_logical_navigation() -> None:
    assert ev("FIRST(id)") == 1
    assert ev("FIRST(B.id)") == 2
    assert ev("FIRST(B.id, 1)") == 3
    assert ev("FIRST(B.id, 2)") is None
    assert ev("LAST(A.id, 1)") == 1
    assert ev("LAST(A.id, 2)") is None
    assert ev("LAST(id, 3)") == 1
    assert ev("LAST(id, 4)") is None


def test_physical_navigation_leaves_the_match() -> None:
    assert ev("PREV(x)") is None  # row 3: x NULL
    assert ev("PREV(x, 2)") == 20
    assert ev("PREV(id, 4)") == 0  # row 0 is before the match but in the partition
    assert ev("PREV(id, 5)") is None  # before the partition
    assert ev("NEXT(id)") == 5
    assert ev("NEXT(id, 2)") is None  # past the (complete) partition
    assert ev("PREV(A.id)", current=3) == 0  # last A is row 1, one row back


def test_nested_navigation() -> None:
    # LAST(A.id, 1) is row 1; PREV(.., 1) moves to row 0.
    assert ev("PREV(LAST(A.id, 1), 1)") == 0
    # FIRST(B.x) is row 2; NEXT by 2 is row 4.
    assert ev("NEXT(FIRST(B.x), 2)") == 40
    assert ev("PREV(FIRST(A.id + A.x))") == 5  # row 0: 0 + 5


def test_classifier_and_match_number() -> None:
    assert ev("CLASSIFIER()") == "A"
    assert ev("CLASSIFIER()", current=3) == "B"
    assert ev("CLASSIFIER(B)") == "B"
    assert ev("PREV(CLASSIFIER())") == "B"
    assert ev("PREV(CLASSIFIER(), 4)") is None  # row 0 is outside the match
    assert ev("MATCH_NUMBER()") == 7
    assert ev("MATCH_NUMBER") == 7  # DejaVu's bare form


def test_empty_match() -> None:
    # An empty match: no labels; everything about rows is NULL, COUNT is 0.
    assert ev("CLASSIFIER()", labels=[], current=1) is None
    assert ev("COUNT(*)", labels=[], current=1) == 0
    assert ev("COUNT(A.x)", labels=[], current=1) == 0
    assert ev("SUM(x)", labels=[], current=1) is None
    assert ev("x", labels=[], current=1) is None
    assert ev("MATCH_NUMBER()", labels=[], current=1) == 7


# -- aggregates ----------------------------------------------------------------------------


def test_counts() -> None:
    assert ev("COUNT(*)") == 4
    assert ev("COUNT(A.*)") == 2
    assert ev("COUNT(B.x)") == 1  # row 3's NULL is not counted
    assert ev("COUNT(U.*)") == 4
    assert ev("COUNT(A.*)", current=2) == 1  # running
    assert ev("COUNT(DISTINCT s)") == 4


def test_numeric_aggregates() -> None:
    assert ev("SUM(A.x)") == 50
    assert ev("SUM(x)") == 70  # NULL ignored
    assert ev("AVG(x)") == pytest.approx(70 / 3)
    assert ev("MIN(B.x)") == 20
    assert ev("MAX(U.x)") == 40
    assert ev("AVG(B.x)", current=2) == 20.0


def test_other_aggregates() -> None:
    assert ev("array_agg(x)") == [10, 20, None, 40]
    assert ev("list(CLASSIFIER())") == ["A", "B", "B", "A"]
    assert ev("max_by(id, x)") == 4
    assert ev("min_by(s, x)") == "a"
    assert ev("bool_and(x > 5)") is True  # NULL ignored
    assert ev("bool_or(B.x > 30)") is False
    assert ev("count_if(x >= 20)") == 2
    assert ev("arbitrary(B.x)") == 20
    assert ev("any_value(x)") == 10
    assert ev("string_agg(s, '-')") == "a-bb-b-aa"
    assert ev("SUM(x) FILTER (WHERE x > 10)") == 60


# -- scalar semantics ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 // 2", -3),
        ("-7 % 2", -1),
        ("7 % 3", 1),
        ("2 ^ 3", 8.0),
        ("1 + NULL", None),
        ("abs(-3)", 3),
        ("round(2.5)", 3.0),
        ("round(-2.5)", -3.0),
        ("round(2.345, 2)", 2.35),
        ("floor(2.5)", 2.0),
        ("ceil(2.1)", 3.0),
        ("sign(-4)", -1),
        ("CAST(2.5 AS INT)", 3),
        ("CAST('12' AS BIGINT)", 12),
        ("CAST(7 AS VARCHAR)", "7"),
        ("CAST(1.5 AS VARCHAR)", "1.5"),
        ("TRY_CAST('x' AS INT)", None),
        ("CAST('2.50' AS DECIMAL(5,1))", Decimal("2.5")),
        ("coalesce(NULL, 2, 3)", 2),
        ("greatest(1, NULL, 3)", 3),
        ("least(4, 2)", 2),
        ("nullif(2, 2)", None),
        ("CASE WHEN 1 > 2 THEN 'a' WHEN 2 > 1 THEN 'b' END", "b"),
        ("CASE 3 WHEN 1 THEN 'x' ELSE 'y' END", "y"),
        ("if(NULL, 1, 2)", 2),
        ("'ab' || 'c'", "abc"),
        ("'ab' || NULL", None),
        ("concat('a', NULL, 'b')", "ab"),
        ("lower('AbC')", "abc"),
        ("upper('a')", "A"),
        ("length('abc')", 3),
        ("substr('abcdef', 2, 3)", "bcd"),
        ("substr('abcdef', -2)", "ef"),
        ("trim('  a ')", "a"),
        ("replace('aXb', 'X', '-')", "a-b"),
        ("starts_with('abc', 'ab')", True),
        ("contains('abc', 'd')", False),
        ("'abc' LIKE 'a%'", True),
        ("'abc' LIKE 'a_'", False),
        ("'ABC' ILIKE 'a%c'", True),
        ("NULL LIKE 'a'", None),
        ("3 IN (1, 2, 3)", True),
        ("3 IN (1, NULL)", None),
        ("NULL IN (1)", None),
        ("2 BETWEEN 1 AND 3", True),
        ("5 NOT BETWEEN 1 AND 3", True),
        ("NULL IS NULL", True),
        ("1 IS NOT NULL", True),
        ("NULL AND FALSE", False),
        ("NULL OR TRUE", True),
        ("NULL AND TRUE", None),
        ("NOT NULL", None),
        ("1 IS DISTINCT FROM NULL", True),
        ("NULL IS NOT DISTINCT FROM NULL", True),
    ],
)
def test_scalars(text: str, expected: object) -> None:
    assert ev(text) == expected


def test_scalars_agree_with_duckdb() -> None:
    """Spot-check that numeric results equal DuckDB's for the same expressions."""
    texts = [
        "7 / 2",
        "-7 // 2",
        "-7 % 3",
        "7 % -3",
        "round(2.5)",
        "round(-0.5)",
        "CAST(-2.5 AS INT)",
        "2 ^ 10",
        "1 / 0",
        "abs(-7) * 3 - 4 // 3",
        "CAST('3.5' AS INT)",
        "greatest(1, NULL)",
        "length('hello')",
    ]
    con = duckdb.connect()
    for text in texts:
        ((want,),) = con.sql(f"SELECT {text}").fetchall()
        got = ev(text)
        if isinstance(want, Decimal):
            want = float(want)
        assert got == want, text


def test_dates_and_intervals() -> None:
    assert ev("ts + INTERVAL '1' HOUR") == dt.datetime(2024, 1, 1, 1, 4)
    assert ev("ts - INTERVAL 2 MINUTES") == dt.datetime(2024, 1, 1, 0, 2)
    assert ev("LAST(ts) - FIRST(ts)") == dt.timedelta(minutes=3)
    assert ev("LAST(ts) - FIRST(ts) <= INTERVAL '3' MINUTE") is True
    assert ev("ts > '2024-01-01 00:03:30'") is True
    assert ev("ts > TIMESTAMP '2024-01-01 00:05:00'") is False
    assert ev("DATE '2024-01-31' + INTERVAL '1' MONTH") == dt.date(2024, 2, 29)
    assert ev("extract(minute FROM ts)") == 4
    assert ev("date_part('hour', ts)") == 0
    assert ev("date_trunc('hour', ts)") == dt.datetime(2024, 1, 1)
    assert ev("CAST(ts AS DATE)") == dt.date(2024, 1, 1)


def test_errors() -> None:
    # A function the value library lacks is DuckDB's (analysis has checked that DuckDB
    # knows it; one it does not know fails when evaluated, naming the call)
    with pytest.raises(ExecutionError, match="(?i)frobnicate"):
        ev("frobnicate(x)")
    with pytest.raises(SemanticError, match="unknown column"):
        compile_expression(expr("A.nope"), SPEC)
    with pytest.raises(SemanticError, match="unknown pattern variable"):
        compile_expression(expr("Z.x"), SPEC)
    with pytest.raises(SemanticError, match="single pattern variable"):
        compile_expression(expr("LAST(A.x + B.x)"), SPEC)
    with pytest.raises(SemanticError):
        compile_expression(expr("PREV(PREV(x))"), SPEC)
    with pytest.raises(ExecutionError, match="division by zero"):
        ev("1 // 0")


def test_history_use_and_reach() -> None:
    """What DEFINEs observe decides thread merging; reach decides buffering."""
    use = analyze_expression(expr("A.x > LAST(B.x, 2) AND COUNT(U.*) > 1"), SPEC).history
    assert use.last == {frozenset("A"): 0, frozenset("B"): 2}
    assert use.count == {frozenset("AB")}
    # In A's own DEFINE, A.x is the current row: no history observed for A.
    assert use.in_define_of("A").last == {frozenset("B"): 2}
    assert analyze_expression(expr("x > PREV(x) AND COUNT(*) > 2"), SPEC).history.empty
    reach = analyze_expression(expr("PREV(LAST(A.x), 3) < NEXT(x, 2)"), SPEC).reach
    assert (reach.back, reach.ahead) == (3, 2)
