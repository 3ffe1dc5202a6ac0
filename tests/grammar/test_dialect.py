"""The matchsql dialect: MATCH_RECOGNIZE clauses, placement, DejaVu spellings, normalisation."""

from __future__ import annotations

import pytest
import sqlglot
from grammar_helpers import SEED_QUERIES, match_tables, only_mr
from sqlglot import exp

from matchsql.grammar.dialect import MatchSQL
from matchsql.grammar.nodes import MatchRecognizeTable, MeasureDef
from matchsql.grammar.statements import parse, to_sql
from matchsql.plan.pattern import Concatenation, Label, Quantified
from matchsql.plan.row_functions import Classifier, MatchNumber, Navigation, PatternSemantics


def measure(node: MatchRecognizeTable, index: int = 0) -> exp.Expr:
    return node.args["measures"][index].this


def define(node: MatchRecognizeTable, name: str) -> exp.Expr:
    for item in node.args["define"]:
        if item.this.name == name:
            return item.expression
    raise KeyError(name)


# -- seed queries -------------------------------------------------------------


def test_seed_queries_parse_verbatim(seed_query):
    node = only_mr(seed_query)
    assert node.this == exp.to_table("trade")
    assert node.args["all_matches"] is True
    assert node.args.get("order") is None
    assert node.args.get("rows") is None
    assert [d.this.name for d in node.args["define"]] == ["B", "C", "D"]
    (m,) = node.args["measures"]
    assert isinstance(m.this, MatchNumber)
    assert m.args["alias"].name == "matchno"
    pattern = node.args["pattern"].this
    assert pattern.variables() == ["A", "B", "C", "D"]


@pytest.mark.parametrize(
    ("name", "partition", "after"),
    [
        ("Q1", False, "PAST LAST ROW"),
        ("Q2", True, "PAST LAST ROW"),
        ("Q3", False, "TO NEXT ROW"),
        ("Q4", True, "TO NEXT ROW"),
    ],
)
def test_seed_query_clauses(name, partition, after):
    node = only_mr(SEED_QUERIES[name])
    assert node.args["after"] == after
    keys = node.args.get("partition_by") or []
    assert [k.name for k in keys] == (["symbol"] if partition else [])


def test_seed_line_break_inside_qualified_column():
    node = only_mr(SEED_QUERIES["Q1"])
    cond = define(node, "C")
    columns = [(c.table, c.name) for c in cond.find_all(exp.Column)]
    assert ("C", "Price") in columns
    assert columns.count(("A", "Price")) == 1


def test_seed_define_uses_navigation():
    node = only_mr(SEED_QUERIES["Q1"])
    navs = list(define(node, "B").find_all(Navigation))
    assert len(navs) == 1
    assert navs[0].kind == "PREV" and navs[0].offset == 1
    assert navs[0].this == exp.column("Price", table="B")


def test_define_with_and_without_commas_agree():
    with_commas = only_mr(
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B C) DEFINE B AS B.x > 1, C AS C.x < 2)"
    )
    without = only_mr(
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B C) DEFINE B AS B.x > 1 C AS C.x < 2)"
    )
    assert with_commas == without


# -- clauses --------------------------------------------------------------------


def test_full_standard_clause_set():
    node = only_mr(
        """SELECT * FROM ticker MATCH_RECOGNIZE (
            PARTITION BY symbol, venue
            ORDER BY ts DESC NULLS FIRST, seq
            MEASURES FINAL LAST(up.price) AS top, RUNNING COUNT(*) AS n
            ALL ROWS PER MATCH WITH UNMATCHED ROWS
            AFTER MATCH SKIP TO LAST up
            SEEK
            PATTERN (strt down+ up+)
            SUBSET updown = (up, down)
            DEFINE down AS price < PREV(price), up AS price > PREV(price)
        ) AS mr (a, b)"""
    )
    assert [p.name for p in node.args["partition_by"]] == ["symbol", "venue"]
    first, second = node.args["order"].expressions
    assert first.this.name == "ts" and first.args["desc"] is True
    assert first.args["nulls_first"] is True
    assert second.this.name == "seq" and not second.args.get("desc")
    assert node.args["rows"] == "ALL WITH UNMATCHED"
    assert node.args["after"] == "TO LAST"
    assert node.args["after_var"].name == "UP"
    assert node.args["initial"] is False
    (subset,) = node.args["subsets"]
    assert subset.this.name == "UPDOWN"
    assert [m.name for m in subset.expressions] == ["UP", "DOWN"]
    assert node.args["alias"].name == "mr"
    assert [c.name for c in node.args["alias"].columns] == ["a", "b"]


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        ("ONE ROW PER MATCH", "ONE"),
        ("ALL ROWS PER MATCH", "ALL SHOW"),
        ("ALL ROWS PER MATCH SHOW EMPTY MATCHES", "ALL SHOW"),
        ("ALL ROWS PER MATCH OMIT EMPTY MATCHES", "ALL OMIT"),
        ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", "ALL WITH UNMATCHED"),
        ("ALL ROW PER MATCH", "ALL SHOW"),
        ("ONE ROWS PER MATCH", "ONE"),
        ("one row per match", "ONE"),
    ],
)
def test_rows_per_match(clause, expected):
    node = only_mr(f"SELECT * FROM t MATCH_RECOGNIZE ({clause} PATTERN (A))")
    assert node.args["rows"] == expected


@pytest.mark.parametrize(
    ("clause", "after", "var"),
    [
        ("AFTER MATCH SKIP PAST LAST ROW", "PAST LAST ROW", None),
        ("AFTER MATCH SKIP TO NEXT ROW", "TO NEXT ROW", None),
        ("AFTER MATCH SKIP TO FIRST b", "TO FIRST", "B"),
        ("AFTER MATCH SKIP TO LAST b", "TO LAST", "B"),
        ("AFTER MATCH SKIP TO b", "TO", "B"),
        ('AFTER MATCH SKIP TO "b"', "TO", "b"),
        ("AFTER MATCH SKIP TO first", "TO", "FIRST"),
    ],
)
def test_after_match_skip(clause, after, var):
    node = only_mr(f"SELECT * FROM t MATCH_RECOGNIZE ({clause} PATTERN (A B))")
    assert node.args["after"] == after
    got = node.args.get("after_var")
    assert (got.name if got is not None else None) == var


@pytest.mark.parametrize(("word", "value"), [("INITIAL", True), ("SEEK", False), ("", None)])
def test_initial_and_seek(word, value):
    node = only_mr(f"SELECT * FROM t MATCH_RECOGNIZE ({word} PATTERN (A))")
    assert node.args.get("initial") is value


def test_within_interval():
    node = only_mr(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B+) WITHIN INTERVAL '5' MINUTE"
        " DEFINE B AS B.x > 0)"
    )
    within = node.args["within"]
    assert isinstance(within, exp.Interval)
    assert within.this.name == "5" and within.unit.name.upper() == "MINUTE"
    assert node.args["define"][0].this.name == "B"


def test_define_is_optional():
    node = only_mr("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B))")
    assert node.args.get("define") is None


def test_empty_pattern_allowed():
    node = only_mr("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (()))")
    assert node.args["pattern"].this.variables() == []


@pytest.mark.parametrize(
    "order",
    [
        "MEASURES 1 AS x AFTER MATCH SKIP PAST LAST ROW ALL MATCHES MAXIMAL MATCH",
        "MEASURES 1 AS x ALL MATCHES MAXIMAL MATCH AFTER MATCH SKIP PAST LAST ROW",
        "MAXIMAL MATCH MEASURES 1 AS x ALL MATCHES AFTER MATCH SKIP PAST LAST ROW",
        "ALL MATCHES AFTER MATCH SKIP PAST LAST ROW MAXIMAL MATCH MEASURES 1 AS x",
    ],
)
def test_dejavu_clauses_in_any_order(order):
    node = only_mr(f"SELECT * FROM t MATCH_RECOGNIZE ({order} PATTERN (A))")
    assert node.args["all_matches"] is True
    assert node.args["match_mode"] == "MAXIMAL"
    assert node.args["after"] == "PAST LAST ROW"
    assert node.args["measures"][0].args["alias"].name == "x"


def test_incremental_match_after_rows_per_match():
    node = only_mr(
        "SELECT * FROM t MATCH_RECOGNIZE (ONE ROW PER MATCH INCREMENTAL MATCH PATTERN (A))"
    )
    assert node.args["rows"] == "ONE"
    assert node.args["match_mode"] == "INCREMENTAL"


# -- placement ------------------------------------------------------------------


def test_in_cte():
    (tree,) = parse(
        "WITH m AS (SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A))) SELECT * FROM m"
    )
    (node,) = match_tables(tree)
    assert isinstance(node.parent, exp.From)
    assert node.find_ancestor(exp.CTE) is not None


def test_in_joins_twice():
    (tree,) = parse(
        "SELECT * FROM t1 MATCH_RECOGNIZE (PATTERN (A)) AS x "
        "JOIN t2 MATCH_RECOGNIZE (PATTERN (B)) AS y ON x.k = y.k"
    )
    left, right = match_tables(tree)
    assert left.this.name == "t1" and left.args["alias"].name == "x"
    assert right.this.name == "t2" and isinstance(right.parent, exp.Join)


def test_over_subquery_and_nested():
    (tree,) = parse(
        "SELECT * FROM (SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))) AS s "
        "MATCH_RECOGNIZE (PATTERN (B C))"
    )
    outer, inner = match_tables(tree)
    assert isinstance(outer.this, exp.Subquery)
    assert outer.this.alias == "s"
    assert inner.find_ancestor(exp.Subquery) is outer.this


def test_chained_match_recognize():
    (tree,) = parse("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) MATCH_RECOGNIZE (PATTERN (B))")
    outer, inner = match_tables(tree)
    assert outer.this is inner


@pytest.mark.parametrize(
    ("sql", "count"),
    [
        ("SELECT * FROM read_parquet('x.parquet') MATCH_RECOGNIZE (PATTERN (A+))", 1),
        ("SELECT * FROM (VALUES (1), (2)) AS v(x) MATCH_RECOGNIZE (PATTERN (A))", 1),
        ("SELECT * FROM t LEFT JOIN (SELECT * FROM u MATCH_RECOGNIZE (PATTERN (A))) s ON true", 1),
        ("SELECT (SELECT count(*) FROM t MATCH_RECOGNIZE (PATTERN (A)))", 1),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) UNION ALL "
            "SELECT * FROM u MATCH_RECOGNIZE (PATTERN (B))",
            2,
        ),
        ("INSERT INTO r SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))", 1),
        ("CREATE TABLE r AS SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))", 1),
        ("SELECT * FROM t AS src MATCH_RECOGNIZE (PATTERN (A)) m, u", 1),
        ("SELECT * FROM s.t MATCH_RECOGNIZE (PATTERN (A)) m WHERE m.x > 1 ORDER BY 1", 1),
        ("SELECT * FROM t", 0),
    ],
)
def test_placement(sql, count):
    (tree,) = parse(sql)
    assert len(match_tables(tree)) == count


def test_input_alias_is_kept_on_input():
    node = only_mr("SELECT * FROM t AS src MATCH_RECOGNIZE (PATTERN (A)) AS m")
    assert node.this.alias == "src"
    assert node.args["alias"].name == "m"


def test_several_statements():
    trees = parse(
        "SELECT 1; SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A));\n"
        "SELECT * FROM u MATCH_RECOGNIZE (PATTERN (B)); ;"
    )
    assert [len(match_tables(t)) for t in trees] == [0, 1, 1]


# -- normalisation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "offset"),
    [
        ("PREV(A.x)", "PREV", 1),
        ("PREV(A.x, 3)", "PREV", 3),
        ("NEXT(x)", "NEXT", 1),
        ("NEXT(x, 0)", "NEXT", 0),
        ("FIRST(A.x)", "FIRST", 0),
        ("LAST(A.x, 2)", "LAST", 2),
        ("first(a.x)", "FIRST", 0),
    ],
)
def test_navigation_nodes(text, kind, offset):
    node = only_mr(f"SELECT * FROM t MATCH_RECOGNIZE (MEASURES {text} AS m PATTERN (A))")
    nav = measure(node)
    assert isinstance(nav, Navigation)
    assert nav.kind == kind and nav.offset == offset
    assert nav.physical == (kind in ("PREV", "NEXT"))


def test_nested_navigation():
    node = only_mr(
        "SELECT * FROM t MATCH_RECOGNIZE (MEASURES PREV(LAST(a.x, 2), 3) AS m PATTERN (A))"
    )
    outer = measure(node)
    assert outer.kind == "PREV" and outer.offset == 3
    assert outer.this.kind == "LAST" and outer.this.offset == 2
    assert outer.this.this == exp.column("x", table="A")


@pytest.mark.parametrize(("word", "final"), [("FINAL", True), ("RUNNING", False), ("final", True)])
def test_running_final(word, final):
    node = only_mr(
        f"SELECT * FROM t MATCH_RECOGNIZE (MEASURES {word} LAST(a.x) AS m, {word} SUM(a.x) AS s "
        "ALL ROWS PER MATCH PATTERN (A))"
    )
    sem = measure(node)
    assert isinstance(sem, PatternSemantics) and sem.final is final
    assert isinstance(sem.this, Navigation)
    assert isinstance(measure(node, 1).this, exp.Sum)


def test_classifier_and_match_number_forms():
    node = only_mr(
        "SELECT * FROM t MATCH_RECOGNIZE (MEASURES CLASSIFIER() AS a, CLASSIFIER(b) AS b, "
        'CLASSIFIER AS c, MATCH_NUMBER() AS d, MATCH_NUMBER AS e, CLASSIFIER("q") AS f '
        'PATTERN (A B "q"))'
    )
    values = [m.this for m in node.args["measures"]]
    assert [type(v) for v in values] == [
        Classifier,
        Classifier,
        Classifier,
        MatchNumber,
        MatchNumber,
        Classifier,
    ]
    assert [v.variable for v in values if isinstance(v, Classifier)] == [None, "B", None, "q"]


def test_qualifiers_upper_cased_unless_quoted():
    node = only_mr(
        'SELECT * FROM t MATCH_RECOGNIZE (MEASURES a.Price + "b".price AS m PATTERN (A "b"))'
    )
    cols = list(measure(node).find_all(exp.Column))
    assert [(c.table, c.name) for c in cols] == [("A", "Price"), ("b", "price")]
    assert cols[1].args["table"].quoted


def test_count_star_shapes():
    node = only_mr(
        "SELECT * FROM t MATCH_RECOGNIZE (MEASURES COUNT(*) AS a, COUNT(b.*) AS b PATTERN (A B))"
    )
    star = measure(node, 0)
    assert isinstance(star, exp.Count) and isinstance(star.this, exp.Star)
    var = measure(node, 1)
    assert isinstance(var.this, exp.Column) and isinstance(var.this.this, exp.Star)
    assert var.this.table == "B"


def test_pattern_specific_words_stay_plain_outside():
    (tree,) = parse("SELECT final, running, prev(x), first(y) FROM t")
    assert not list(tree.find_all(Navigation))
    assert not list(tree.find_all(PatternSemantics))
    assert [c.name for c in tree.find_all(exp.Column)][:2] == ["final", "running"]


def test_column_called_final_inside_match_recognize():
    node = only_mr(
        "SELECT * FROM t MATCH_RECOGNIZE (MEASURES final AS f, running + 1 AS r PATTERN (A))"
    )
    assert measure(node) == exp.column("final")
    assert isinstance(measure(node, 1), exp.Add)


def test_measure_defs_are_typed_nodes():
    node = only_mr("SELECT * FROM t MATCH_RECOGNIZE (MEASURES 1 AS one PATTERN (A))")
    assert isinstance(node.args["measures"][0], MeasureDef)


def test_pattern_offsets_point_into_statement():
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A  B+))"
    pattern = only_mr(sql).args["pattern"].this
    assert isinstance(pattern, Concatenation)
    first, second = pattern.items
    assert isinstance(first, Label) and sql[first.offset] == "A"
    assert isinstance(second, Quantified) and sql[second.offset] == "B"


def test_dialect_is_registered_with_sqlglot():
    tree = sqlglot.parse_one("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B*))", read="matchsql")
    assert match_tables(tree)
    assert "MATCH_RECOGNIZE (PATTERN (A B*))" in tree.sql(dialect="matchsql")
    assert sqlglot.Dialect.get_or_raise("matchsql").__class__ is MatchSQL


def test_to_sql_writes_standard_spelling():
    text = to_sql(parse(SEED_QUERIES["Q2"])[0])
    assert "MATCH_NUMBER() AS matchno" in text
    assert "PARTITION BY symbol" in text
    assert "DEFINE B AS" in text and "), C AS (" in text
