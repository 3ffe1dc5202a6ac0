"""Semantic analysis: MatchSpec contents, measure typing, and located semantic errors."""

from __future__ import annotations

import datetime

import duckdb
import pyarrow as pa
import pytest
from grammar_helpers import SEED_QUERIES, only_mr
from sqlglot import exp

from matchsql.errors import CatalogError, SemanticError, TypeMismatchError, line_column
from matchsql.grammar.analyze import analyze
from matchsql.plan.pattern import Concatenation
from matchsql.plan.row_functions import Navigation
from matchsql.plan.spec import RowsPerMatch, SkipMode

SCHEMA = pa.schema(
    [
        ("symbol", pa.string()),
        ("ts", pa.timestamp("us")),
        ("price", pa.float64()),
        ("qty", pa.int32()),
        ("day", pa.date32()),
        ("amount", pa.decimal128(10, 2)),
        ("seq", pa.int64()),
        ("Flag", pa.bool_()),
    ]
)


@pytest.fixture(scope="module")
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


def run(sql: str, con, schema: pa.Schema = SCHEMA):
    return analyze(only_mr(sql), schema, sql=sql, con=con)


def mr(body: str) -> str:
    return f"SELECT * FROM t MATCH_RECOGNIZE ({body})"


# -- seed queries -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "partition", "skip"),
    [
        ("Q1", [], SkipMode.PAST_LAST_ROW),
        ("Q2", ["symbol"], SkipMode.PAST_LAST_ROW),
        ("Q3", [], SkipMode.TO_NEXT_ROW),
        ("Q4", ["symbol"], SkipMode.TO_NEXT_ROW),
    ],
)
def test_seed_queries_analyse(con, name, partition, skip):
    spec = run(SEED_QUERIES[name], con)
    assert spec.partition_by == partition
    assert spec.order_by == []
    assert spec.skip is skip
    assert spec.all_matches is True
    assert spec.incremental is False
    assert spec.rows_per_match is RowsPerMatch.ONE
    assert spec.variables == ["A", "B", "C", "D"]
    assert set(spec.defines) == {"B", "C", "D"}
    assert [(m.name, m.type) for m in spec.measures] == [("matchno", pa.int64())]
    assert spec.output_schema().names == [*partition, "matchno"]


def test_seed_columns_resolve_to_schema_names(con):
    spec = run(SEED_QUERIES["Q1"], con)
    names = {c.name for cond in spec.defines.values() for c in cond.find_all(exp.Column)}
    assert names == {"price"}
    tables = {c.table for cond in spec.defines.values() for c in cond.find_all(exp.Column)}
    assert tables == {"A", "B", "C", "D"}


def test_analysis_does_not_modify_the_parsed_tree(con):
    sql = SEED_QUERIES["Q1"]
    node = only_mr(sql)
    before = node.copy()
    analyze(node, SCHEMA, sql=sql, con=con)
    assert node == before
    assert {c.name for c in node.find_all(exp.Column)} == {"Price"}


# -- spec fields --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clause", "rows"),
    [
        ("", RowsPerMatch.ONE),
        ("ONE ROW PER MATCH", RowsPerMatch.ONE),
        ("ALL ROWS PER MATCH", RowsPerMatch.ALL_SHOW_EMPTY),
        ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", RowsPerMatch.ALL_OMIT_EMPTY),
        ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", RowsPerMatch.ALL_WITH_UNMATCHED),
    ],
)
def test_rows_per_match(con, clause, rows):
    assert run(mr(f"{clause} PATTERN (A)"), con).rows_per_match is rows


@pytest.mark.parametrize(
    ("clause", "skip", "var"),
    [
        ("", SkipMode.PAST_LAST_ROW, None),
        ("AFTER MATCH SKIP TO NEXT ROW", SkipMode.TO_NEXT_ROW, None),
        ("AFTER MATCH SKIP TO FIRST b", SkipMode.TO_FIRST, "B"),
        ("AFTER MATCH SKIP TO LAST b", SkipMode.TO_LAST, "B"),
        ("AFTER MATCH SKIP TO b", SkipMode.TO_LAST, "B"),
        ("AFTER MATCH SKIP TO u", SkipMode.TO_LAST, "U"),
    ],
)
def test_skip_modes(con, clause, skip, var):
    spec = run(mr(f"{clause} PATTERN (A B) SUBSET U = (A, B)"), con)
    assert (spec.skip, spec.skip_variable) == (skip, var)


def test_initial_seek_match_mode_and_subsets(con):
    spec = run(mr("ALL MATCHES INCREMENTAL MATCH SEEK PATTERN (A B C) SUBSET U = (a, c, a)"), con)
    assert spec.initial is False
    assert spec.all_matches and spec.incremental
    assert spec.subsets == {"U": ("A", "C")}
    assert run(mr("MAXIMAL MATCH PATTERN (A)"), con).incremental is False
    assert run(mr("PATTERN (A)"), con).initial is True


def test_define_optional_and_empty_pattern(con):
    spec = run(mr("PATTERN (())"), con)
    assert spec.variables == [] and spec.defines == {}
    spec = run(mr("PATTERN (A B)"), con)
    assert spec.defines == {}


def test_partition_and_order_columns(con):
    spec = run(mr('PARTITION BY SYMBOL ORDER BY Ts DESC, "SEQ" PATTERN (A)'), con)
    assert spec.partition_by == ["symbol"]
    assert spec.order_by == ["ts", "seq"]


def test_pattern_is_the_parsed_ast(con):
    spec = run(mr("PATTERN (A B+)"), con)
    assert isinstance(spec.pattern, Concatenation)


def test_within_interval_and_number(con):
    spec = run(mr("ORDER BY ts PATTERN (A B) WITHIN INTERVAL '5' MINUTE"), con)
    assert spec.within == datetime.timedelta(minutes=5)
    spec = run(mr("ORDER BY seq PATTERN (A B) WITHIN 100"), con)
    assert spec.within == 100
    assert run(mr("ORDER BY ts PATTERN (A)"), con).within is None


def test_define_keeps_navigation_shape(con):
    spec = run(mr("ORDER BY ts PATTERN (A B) DEFINE B AS B.Price > PREV(LAST(A.price), 1)"), con)
    (nav,) = [n for n in spec.defines["B"].find_all(Navigation) if n.kind == "PREV"]
    assert nav.this.kind == "LAST"
    assert nav.this.this == exp.column("price", table="A")


def test_all_rows_output_schema(con):
    spec = run(
        mr(
            "PARTITION BY symbol ORDER BY ts MEASURES CLASSIFIER() AS cls, "
            "RUNNING SUM(A.qty) AS total ALL ROWS PER MATCH PATTERN (A+)"
        ),
        con,
    )
    assert spec.output_schema().names == [
        "symbol",
        "ts",
        "cls",
        "total",
        "price",
        "qty",
        "day",
        "amount",
        "seq",
        "Flag",
    ]


def test_case_insensitive_and_quoted_resolution(con):
    spec = run(mr('MEASURES A.PRICE AS p, "flag" AS f, a."Qty" AS q PATTERN (A)'), con)
    cols = [next(m.expr.find_all(exp.Column)).name for m in spec.measures]
    assert cols == ["price", "Flag", "qty"]


def test_uses_own_cursor_so_pending_results_survive(con):
    pending = con.execute("SELECT * FROM range(3)")
    run(mr("ORDER BY ts PATTERN (A B) WITHIN INTERVAL '1' HOUR DEFINE B AS B.price > 1"), con)
    assert pending.fetchall() == [(0,), (1,), (2,)]


# -- measure typing ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("measure", "expected"),
    [
        ("A.price", pa.float64()),
        ("A.qty", pa.int32()),
        ("A.seq", pa.int64()),
        ("A.symbol", pa.string()),
        ("A.day", pa.date32()),
        ("A.amount", pa.decimal128(10, 2)),
        ("A.ts", pa.timestamp("us")),
        ("LAST(A.ts) - FIRST(A.ts)", pa.month_day_nano_interval()),
        ("A.price > 1", pa.bool_()),
        ("CLASSIFIER()", pa.string()),
        ("CLASSIFIER", pa.string()),
        ("MATCH_NUMBER()", pa.int64()),
        ("MATCH_NUMBER", pa.int64()),
        ("COUNT(*)", pa.int64()),
        ("COUNT(A.*)", pa.int64()),
        ("COUNT(B.qty)", pa.int64()),
        ("AVG(A.qty)", pa.float64()),
        ("MAX(U.price)", pa.float64()),
        ("MIN(A.day)", pa.date32()),
        ("FINAL LAST(B.qty)", pa.int32()),
        ("PREV(A.price, 2) * 2", pa.float64()),
        ("FIRST(A.qty) + 1", pa.int32()),
        ("A.price - AVG(A.price)", pa.float64()),
        ("CAST(A.qty AS BIGINT)", pa.int64()),
        ("upper(A.symbol)", pa.string()),
        ("CASE WHEN A.price > 1 THEN 'up' ELSE 'down' END", pa.string()),
        ("price", pa.float64()),
    ],
)
def test_measure_types(con, measure, expected):
    spec = run(mr(f"MEASURES {measure} AS m PATTERN (A B) SUBSET U = (A, B)"), con)
    assert spec.result_schema().field("m").type == expected


@pytest.mark.parametrize(
    ("measure", "plain"),
    [
        ("SUM(A.qty)", "SUM(qty)"),
        ("SUM(A.amount)", "SUM(amount)"),
        ("AVG(A.amount)", "AVG(amount)"),
        ("SUM(A.price) / COUNT(*)", "SUM(price) / COUNT(*)"),
    ],
)
def test_aggregate_types_match_duckdb(con, measure, plain):
    spec = run(mr(f"MEASURES {measure} AS m PATTERN (A)"), con)
    rel = con.from_arrow(SCHEMA.empty_table())
    expected = rel.query("x", f"SELECT {plain} AS m FROM x").to_arrow_table().schema.field(0).type
    assert spec.measures[0].type == expected


# -- semantic errors -----------------------------------------------------------------

# (body, error class, text the error must point at (last occurrence), message fragment)
ERRORS = [
    # undefined variables
    ("PATTERN (A) DEFINE B AS TRUE", SemanticError, "B AS", "does not appear in PATTERN"),
    ("MEASURES C.price AS m PATTERN (A B)", SemanticError, "C.", "not a pattern variable"),
    ("MEASURES CLASSIFIER(C) AS m PATTERN (A B)", SemanticError, "CLASSIFIER", "not a pattern"),
    ("AFTER MATCH SKIP TO FIRST C PATTERN (A B)", SemanticError, "C PATTERN", "SKIP"),
    ("AFTER MATCH SKIP TO c PATTERN (A B)", SemanticError, "c PATTERN", "SKIP"),
    ("PATTERN (A B) SUBSET U = (A, C)", SemanticError, "C)", "not a variable in PATTERN"),
    ("PATTERN (A B) DEFINE B AS X.price > 0", SemanticError, "X.", "not a pattern variable"),
    # duplicates and clashes
    ("PATTERN (A B) DEFINE B AS TRUE, b AS FALSE", SemanticError, "b AS", "defined twice"),
    ("PATTERN (A B) SUBSET A = (B)", SemanticError, "A =", "clashes"),
    ("PATTERN (A B) SUBSET U = (A), U = (B)", SemanticError, "U =", "defined twice"),
    ("MEASURES 1 AS x, 2 AS X PATTERN (A)", SemanticError, "X PATTERN", "defined twice"),
    # RUNNING / FINAL
    ("PATTERN (A B) DEFINE B AS FINAL LAST(A.price) > 0", SemanticError, "FINAL", "FINAL"),
    ("MEASURES FINAL A.price AS m PATTERN (A)", SemanticError, "A.price", "applies only"),
    ("MEASURES RUNNING (A.price + 1) AS m PATTERN (A)", SemanticError, "A.price", None),
    # navigation offsets and arguments
    ("MEASURES PREV(1) AS m PATTERN (A)", SemanticError, "PREV", "column reference"),
    ("MEASURES NEXT(CAST(NULL AS INT)) AS m PATTERN (A)", SemanticError, "NEXT", "column"),
    ("MEASURES LAST(A.price + B.price) AS m PATTERN (A B)", SemanticError, "B.", "mixes"),
    ("MEASURES FIRST(A.price + qty) AS m PATTERN (A B)", SemanticError, "qty", "mixes"),
    ("MEASURES SUM(A.price * B.qty) AS m PATTERN (A B)", SemanticError, "B.qty", "mixes"),
    ("MEASURES PREV(A.price - B.price) AS m PATTERN (A B)", SemanticError, "B.", "mixes"),
    # nesting
    ("MEASURES FIRST(PREV(A.price)) AS m PATTERN (A)", SemanticError, "PREV", "nested"),
    ("MEASURES PREV(NEXT(A.price)) AS m PATTERN (A)", SemanticError, "NEXT", "nested"),
    ("MEASURES LAST(FIRST(A.price)) AS m PATTERN (A)", SemanticError, "FIRST", "nested"),
    ("MEASURES LAST(1) AS m PATTERN (A)", SemanticError, "LAST", "column reference"),
    (
        "ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A {- B+ -})",
        SemanticError,
        "{-",
        "exclusion",
    ),
    ("MEASURES PREV(SUM(A.price)) AS m PATTERN (A)", SemanticError, "SUM", "inside PREV"),
    ("MEASURES SUM(PREV(A.price)) AS m PATTERN (A)", SemanticError, "PREV", "aggregate"),
    ("MEASURES SUM(AVG(A.price)) AS m PATTERN (A)", SemanticError, "AVG", "nested"),
    ("MEASURES LAST(MATCH_NUMBER()) AS m PATTERN (A)", SemanticError, "LAST", None),
    ("MEASURES PREV(A.price + MATCH_NUMBER()) AS m PATTERN (A)", SemanticError, "MATCH_", None),
    ("MEASURES SUM(A.price) OVER () AS m PATTERN (A)", SemanticError, "SUM", "window"),
    ("MEASURES (SELECT max(A.price)) AS m PATTERN (A)", SemanticError, "A.price", "correlated"),
    ("MEASURES (SELECT CLASSIFIER()) AS m PATTERN (A)", SemanticError, "CLASSIFIER", "subquery"),
    ("PATTERN (A) DEFINE A AS A.price > ANY (SELECT 1)", SemanticError, "1)", "IN or EXISTS"),
    ("MEASURES A.* AS m PATTERN (A)", SemanticError, "A.*", "COUNT"),
    # keys
    ("PARTITION BY lower(symbol) PATTERN (A)", SemanticError, "lower", "columns"),
    ("ORDER BY ts + INTERVAL 1 DAY PATTERN (A)", SemanticError, "ts +", "columns"),
    ("PARTITION BY nope PATTERN (A)", CatalogError, "nope", "not found"),
    ("ORDER BY A.ts PATTERN (A)", SemanticError, "A.ts", "columns"),
    # unknown columns and functions, type errors
    ("MEASURES A.pricee AS m PATTERN (A)", CatalogError, "pricee", "pricee"),
    ("PATTERN (A B) DEFINE B AS B.nope > 1", CatalogError, "nope", "not found"),
    ("MEASURES nosuchfn(A.price) AS m PATTERN (A)", CatalogError, "nosuchfn", "nosuchfn"),
    ("PATTERN (A B) DEFINE B AS B.price", TypeMismatchError, "B.price", "BOOLEAN"),
    ("PATTERN (A B) DEFINE B AS B.qty + 1", TypeMismatchError, "B.qty", "BOOLEAN"),
    (
        "MEASURES A.price + 1 AS ok, A.symbol || (A.price * A.day) AS m PATTERN (A)",
        TypeMismatchError,
        "A.price *",
        None,
    ),
    ("PATTERN (A B) DEFINE B AS B.price + B.symbol > 0", TypeMismatchError, "B.price +", "+"),
    ("MEASURES upper(A.price) AS m PATTERN (A)", TypeMismatchError, "upper", "upper"),
    # output shape
    ("MEASURES 1 AS price ALL ROWS PER MATCH PATTERN (A)", SemanticError, "price ALL", "dupl"),
    ("PARTITION BY symbol MEASURES 1 AS Symbol PATTERN (A)", SemanticError, "Symbol", "dupl"),
    ("MEASURES 1 AS x PATTERN (A)) AS m (a, b", SemanticError, "m (a", "alias names 2"),
    # WITHIN
    ("PATTERN (A) WITHIN INTERVAL '5' MINUTE", SemanticError, "INTERVAL", "ORDER BY"),
    ("ORDER BY seq PATTERN (A) WITHIN INTERVAL '5' MINUTE", TypeMismatchError, "INTERVAL", None),
    ("ORDER BY ts PATTERN (A) WITHIN 5", TypeMismatchError, "5", "numeric"),
    ("ORDER BY ts PATTERN (A) WITHIN 'soon'", TypeMismatchError, "'soon'", "WITHIN"),
]


@pytest.mark.parametrize(("body", "cls", "at", "fragment"), ERRORS)
def test_semantic_errors_are_located(con, body, cls, at, fragment):
    sql = "SELECT *\nFROM t MATCH_RECOGNIZE (\n  " + body + "\n)"
    with pytest.raises(cls) as info:
        run(sql, con)
    error = info.value
    assert (error.line, error.column) == line_column(sql, sql.rindex(at))
    if fragment:
        assert fragment in error.message
    assert error.excerpt.splitlines()[-1].endswith("^")


def test_exclusion_allowed_with_other_output_modes(con):
    spec = run(mr("ALL ROWS PER MATCH OMIT EMPTY MATCHES PATTERN (A {- B+ -})"), con)
    assert spec.variables == ["A", "B"]


def test_valid_nesting_and_placements(con):
    spec = run(
        mr(
            "ORDER BY ts MEASURES PREV(FIRST(A.price, 1), 2) AS p, NEXT(LAST(B.qty)) AS n, "
            "FINAL COUNT(B.*) AS c, RUNNING MAX(U.price) AS hi, PREV(CLASSIFIER()) AS pc, "
            "FINAL MATCH_NUMBER() AS mn ALL ROWS PER MATCH PATTERN (A B+) SUBSET U = (A, B) "
            "DEFINE B AS B.price > PREV(B.price) AND SUM(B.qty) < 100 AND RUNNING LAST(A.price) > 0"
            " AND CLASSIFIER() = 'B' AND MATCH_NUMBER() > 0"
        ),
        con,
    )
    assert [m.name for m in spec.measures] == ["p", "n", "c", "hi", "pc", "mn"]
    assert [m.type for m in spec.measures] == [
        pa.float64(),
        pa.int32(),
        pa.int64(),
        pa.float64(),
        pa.string(),
        pa.int64(),
    ]


def test_errors_point_into_multi_statement_text(con):
    sql = "SELECT 1;\nSELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS A.zzz > 1)"
    from matchsql.grammar.statements import parse

    node = list(parse(sql)[1].find_all(type(only_mr(mr("PATTERN (A)")))))[0]
    with pytest.raises(CatalogError) as info:
        analyze(node, SCHEMA, sql=sql, con=con)
    assert (info.value.line, info.value.column) == (2, sql.index("zzz") - sql.index("\n"))


def test_all_expressions_are_typed_in_one_round_trip(con, monkeypatch):
    """DEFINE and MEASURES types come from one DuckDB query, not one per expression."""
    from matchsql.grammar import typer

    calls = []
    original = typer.ExpressionTyper._bind
    monkeypatch.setattr(
        typer.ExpressionTyper,
        "_bind",
        lambda self, plain: calls.append(plain) or original(self, plain),
    )
    spec = run(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.qty AS aq, "
        "AVG(B.price) AS avg_b, CLASSIFIER() AS c PATTERN (A B+) "
        "DEFINE B AS B.price < A.price AND qty > 0)",
        con,
    )
    assert calls == []
    assert [m.type for m in spec.measures] == [pa.int32(), pa.float64(), pa.string()]


def test_a_failing_expression_is_still_located_after_the_shared_bind(con):
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.qty AS aq "
        "PATTERN (A B) DEFINE B AS price + symbol > 1)"
    )
    with pytest.raises(TypeMismatchError) as err:
        run(sql, con)
    assert (err.value.line, err.value.column) == line_column(sql, sql.index("price + symbol"))


def test_many_measures_are_typed_in_bounded_projections(monkeypatch, con):
    """1,000 measures: typed by projections of at most PRIME_CHUNK columns, none on its
    own (one projection of them all needed blocks a capped address space refused, and
    each measure then cost a round trip of its own)."""
    from matchsql.grammar import typer

    widths, calls = [], []
    original_prime = typer.ExpressionTyper._prime_texts
    monkeypatch.setattr(
        typer.ExpressionTyper,
        "_prime_texts",
        lambda self, texts: widths.append(len(texts)) or original_prime(self, texts),
    )
    original = typer.ExpressionTyper._bind
    monkeypatch.setattr(
        typer.ExpressionTyper,
        "_bind",
        lambda self, plain: calls.append(plain) or original(self, plain),
    )
    measures = ", ".join(f"LAST(A.price, {k % 3}) + {k} AS m{k}" for k in range(1000))
    spec = run(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measures} "
        "PATTERN (A+ B) DEFINE B AS price > 1)",
        con,
    )
    assert calls == []
    assert sum(widths) == 1001 and max(widths) <= typer.PRIME_CHUNK  # 1,000 + the DEFINE
    assert len(spec.measures) == 1000
