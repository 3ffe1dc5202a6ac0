"""parse -> to_sql -> parse gives an equal tree, and rendering is a fixpoint."""

from __future__ import annotations

import pytest
from grammar_helpers import SEED_QUERIES, match_tables

from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse, to_sql

QUERIES = [
    *SEED_QUERIES.values(),
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (()))",
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY a, b ORDER BY c DESC NULLS LAST PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY c ASC NULLS FIRST PATTERN (A B* C+?))",
    "SELECT * FROM t MATCH_RECOGNIZE (MEASURES FINAL LAST(A.x) AS l, RUNNING FIRST(B.y, 2) AS f"
    " ALL ROWS PER MATCH PATTERN (A B+))",
    "SELECT * FROM t MATCH_RECOGNIZE (MEASURES PREV(LAST(A.x, 2), 3) AS p, NEXT(x) AS n"
    " PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (MEASURES CLASSIFIER() AS c, CLASSIFIER(B) AS cb,"
    " MATCH_NUMBER() AS m PATTERN (A B))",
    "SELECT * FROM t MATCH_RECOGNIZE (MEASURES COUNT(*) AS n, COUNT(A.*) AS na, SUM(A.x) AS s,"
    " AVG(U.x) AS a, MIN(x) AS lo, MAX(B.x) AS hi PATTERN (A B) SUBSET U = (A, B))",
    "SELECT * FROM t MATCH_RECOGNIZE (ONE ROW PER MATCH PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (ALL ROWS PER MATCH PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (ALL ROWS PER MATCH SHOW EMPTY MATCHES PATTERN (A*))",
    "SELECT * FROM t MATCH_RECOGNIZE (ALL ROWS PER MATCH OMIT EMPTY MATCHES PATTERN (A*))",
    "SELECT * FROM t MATCH_RECOGNIZE (ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP TO NEXT ROW PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP TO FIRST B PATTERN (A B))",
    "SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP TO LAST B PATTERN (A B))",
    "SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP TO B PATTERN (A B))",
    'SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP TO "b" PATTERN (A "b"))',
    "SELECT * FROM t MATCH_RECOGNIZE (INITIAL PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (SEEK PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) WITHIN INTERVAL '5' MINUTE)",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY n PATTERN (A B) WITHIN 100)",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B C) SUBSET U = (A, B), V = (C)"
    " DEFINE A AS A.x > 0, C AS C.x < LAST(U.x))",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (^ A {- B -} PERMUTE(C, D) $))",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A{2} B{,3}? C{2,} D{1,4}?))",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN ((A | B)* C)) AS m",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) AS m(x, y, z)",
    "SELECT * FROM t AS src MATCH_RECOGNIZE (PATTERN (A)) AS m",
    "SELECT * FROM t MATCH_RECOGNIZE (ALL MATCHES MAXIMAL MATCH PATTERN (A+))",
    "SELECT * FROM t MATCH_RECOGNIZE (ALL MATCHES INCREMENTAL MATCH PATTERN (A+))",
    "SELECT * FROM t MATCH_RECOGNIZE (MEASURES CLASSIFIER AS c, MATCH_NUMBER AS m PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B) DEFINE B AS B.x > A.x C AS TRUE)".replace(
        "(A B)", "(A B C)"
    ),
    'SELECT * FROM t MATCH_RECOGNIZE (MEASURES "a".x AS ax PATTERN ("a" B))',
    "SELECT * FROM t MATCH_RECOGNIZE (MEASURES final AS f, running AS r PATTERN (A))",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS CASE WHEN A.x > 1 THEN TRUE"
    " ELSE PREV(A.x) IS NULL END)",
    "WITH m AS (SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))) SELECT * FROM m",
    "SELECT * FROM t1 MATCH_RECOGNIZE (PATTERN (A)) AS x JOIN t2 MATCH_RECOGNIZE"
    " (PATTERN (B)) AS y ON x.k = y.k",
    "SELECT * FROM (SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))) AS s MATCH_RECOGNIZE"
    " (PATTERN (B))",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) MATCH_RECOGNIZE (PATTERN (B))",
    "SELECT * FROM read_parquet('x.parquet') MATCH_RECOGNIZE (PATTERN (A+))",
    "SELECT * FROM (VALUES (1), (2)) AS v(x) MATCH_RECOGNIZE (PATTERN (A))",
    "SELECT count(*) FROM t MATCH_RECOGNIZE (PATTERN (A)) WHERE x > 1 GROUP BY y ORDER BY 1",
    "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)) UNION SELECT * FROM u MATCH_RECOGNIZE"
    " (PATTERN (B))",
    "INSERT INTO r SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A))",
    "SELECT 1 + 2 AS x, 'a;b' FROM t WHERE y IN (1, 2)",
    "SELECT final, running, prev(x) FROM t",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_round_trip(sql):
    trees = parse(sql)
    rendered = [to_sql(t) for t in trees]
    again = [parse(r)[0] for r in rendered]
    assert again == trees
    # rendering the re-parsed tree gives the same text: a fixpoint
    assert [to_sql(t) for t in again] == rendered


@pytest.mark.parametrize("sql", QUERIES)
def test_round_trip_keeps_every_match_recognize(sql):
    (tree,) = parse(sql)
    count = len(match_tables(tree))
    (again,) = parse(to_sql(tree))
    assert len(list(again.find_all(MatchRecognizeTable))) == count


def test_equality_sees_differences():
    a = parse("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B))")[0]
    b = parse("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B*))")[0]
    c = parse("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B) DEFINE B AS B.x > 1)")[0]
    d = parse("SELECT * FROM t MATCH_RECOGNIZE (AFTER MATCH SKIP TO NEXT ROW PATTERN (A B))")[0]
    assert len({a, b, c, d}) == 4
