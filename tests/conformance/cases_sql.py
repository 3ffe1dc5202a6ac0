"""MATCH_RECOGNIZE as part of SQL: output shapes, partitioning and ordering,
use inside CTEs, joins and subqueries, the V-shape example of Trino's
documentation, and DejaVu's dialect (the seed queries).

DejaVu mapping tested here (the project's documented choice):

* ``ALL MATCHES`` / ``INCREMENTAL MATCH``: from each start row, one match is
  reported per distinct end row at which some path of the pattern completes,
  in increasing end order, each with the most preferred labelling among the
  paths ending there; every reported match takes a MATCH_NUMBER. AFTER MATCH
  SKIP is then applied relative to the standard (preferred) match from that
  start row.
* ``MAXIMAL MATCH`` is the standard behaviour.
* bare ``MATCH_NUMBER`` means ``MATCH_NUMBER()``; DEFINE entries may be
  separated by whitespace only; without ONE/ALL ROWS PER MATCH the output is
  ONE ROW PER MATCH.
"""

from __future__ import annotations

import datetime as dt

from .case import Case, letters, one, partitioned_letters, rows, table

PART_MEASURES = "MATCH_NUMBER() AS mn, FIRST(id) AS fid, LAST(id) AS lid"


def part_one(
    name: str,
    parts: dict[str, str],
    pattern: str,
    expected: list[tuple],
    why: str,
    *,
    skip: str = "PAST LAST ROW",
) -> Case:
    """ONE ROW PER MATCH, PARTITION BY p: ``(p, mn, first id, last id)``."""
    defs = ", ".join(f"{v} AS v = '{v.lower()}'" for v in "AB" if v in pattern)
    query = (
        "SELECT p, mn, fid, lid FROM s MATCH_RECOGNIZE (\n"
        "  PARTITION BY p ORDER BY id\n"
        f"  MEASURES {PART_MEASURES}\n"
        "  ONE ROW PER MATCH\n"
        f"  AFTER MATCH SKIP {skip}\n"
        f"  PATTERN ({pattern})\n"
        f"  DEFINE {defs}\n"
        ") ORDER BY p, mn"
    )
    return Case(name, partitioned_letters(parts), query, expected, why, tags=("partition",))


PARTITIONS = [
    part_one(
        "match_number_per_partition",
        {"x": "aab", "y": "aba"},
        "A+",
        [("x", 1, 1, 2), ("y", 1, 4, 4), ("y", 2, 6, 6)],
        "numbering restarts at 1 in every partition",
    ),
    part_one(
        "start_anchor_per_partition",
        {"x": "aa", "y": "ba", "z": "ab"},
        "^ A",
        [("x", 1, 1, 1), ("z", 1, 5, 5)],
        "^ is each partition's first row; y starts with 'b'",
    ),
    part_one(
        "end_anchor_per_partition",
        {"x": "aa", "y": "ab", "z": "ba"},
        "A $",
        [("x", 1, 2, 2), ("z", 1, 6, 6)],
        "$ follows each partition's last row",
    ),
    part_one(
        "matches_do_not_cross_partitions",
        {"x": "aa", "y": "a"},
        "A{2}",
        [("x", 1, 1, 2)],
        "y's single 'a' cannot borrow a row from x",
        skip="TO NEXT ROW",
    ),
    part_one(
        "empty_match_per_partition",
        {"x": "b", "y": "ab"},
        "A*",
        [("x", 1, None, None), ("y", 1, 2, 2), ("y", 2, None, None)],
        "empty matches are numbered within their partition",
    ),
    part_one(
        "partition_without_matches",
        {"x": "bb", "y": "ab"},
        "A B",
        [("y", 1, 3, 4)],
        "partition x produces nothing",
    ),
    Case(
        "one_row_select_star_shape",
        partitioned_letters({"x": "ab", "y": "a"}),
        "SELECT * FROM s MATCH_RECOGNIZE (\n"
        "  PARTITION BY p ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, LAST(v) AS lv\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A)\n"
        "  DEFINE A AS v = 'a'\n"
        ") ORDER BY p, mn",
        [("x", 1, "a"), ("y", 1, "a")],
        "ONE ROW PER MATCH: partition columns, then measures",
        tags=("shape",),
        columns=("p", "mn", "lv"),
    ),
    Case(
        "all_rows_select_star_shape",
        partitioned_letters({"x": "ab", "y": "a"}),
        "SELECT * FROM s MATCH_RECOGNIZE (\n"
        "  PARTITION BY p ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A B?)\n"
        "  DEFINE A AS v = 'a', B AS v = 'b'\n"
        ") ORDER BY p, id",
        [("x", 1, 1, "A", "a"), ("x", 2, 1, "B", "b"), ("y", 3, 1, "A", "a")],
        "ALL ROWS PER MATCH: partition, order, measures, remaining input columns",
        tags=("shape",),
        columns=("p", "id", "mn", "c", "v"),
    ),
    Case(
        "all_rows_shape_no_partition",
        table("q", "v VARCHAR, id INTEGER, w INTEGER", [("a", 1, 10), ("b", 2, 20)]),
        "SELECT * FROM q MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES CLASSIFIER() AS c\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A B)\n"
        "  DEFINE A AS v = 'a'\n"
        ") ORDER BY id",
        [(1, "A", "a", 10), (2, "B", "b", 20)],
        "the order column comes first, then measures, then v and w in input order",
        tags=("shape",),
        columns=("id", "c", "v", "w"),
    ),
    Case(
        "one_row_shape_no_measures_partition",
        partitioned_letters({"x": "a", "y": "b"}),
        "SELECT * FROM s MATCH_RECOGNIZE (\n"
        "  PARTITION BY p ORDER BY id\n"
        "  ONE ROW PER MATCH\n"
        "  PATTERN (A)\n"
        "  DEFINE A AS v = 'a'\n"
        ") ORDER BY p",
        [("x",)],
        "without measures only the partition columns remain",
        tags=("shape",),
        columns=("p",),
    ),
    Case(
        "all_rows_shape_no_measures",
        letters("ab"),
        "SELECT * FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN (A B)\n"
        "  DEFINE A AS v = 'a'\n"
        ") ORDER BY id",
        [(1, "a"), (2, "b")],
        "order column, then the rest of the input",
        tags=("shape",),
        columns=("id", "v"),
    ),
    Case(
        "partition_by_two_columns",
        table(
            "s2",
            "a VARCHAR, b INTEGER, id INTEGER, v VARCHAR",
            [("x", 1, 1, "a"), ("x", 2, 2, "a"), ("x", 1, 3, "a"), ("y", 1, 4, "a")],
        ),
        "SELECT a, b, mn, n FROM s2 MATCH_RECOGNIZE (\n"
        "  PARTITION BY a, b ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n\n"
        "  PATTERN (A+)\n"
        "  DEFINE A AS v = 'a'\n"
        ") ORDER BY a, b, mn",
        [("x", 1, 1, 2), ("x", 2, 1, 1), ("y", 1, 1, 1)],
        "(x,1) holds rows 1 and 3, contiguous within the partition",
        tags=("partition",),
    ),
    Case(
        "partition_null_key",
        table(
            "s3",
            "p VARCHAR, id INTEGER, v VARCHAR",
            [(None, 1, "a"), ("k", 2, "a"), (None, 3, "a")],
        ),
        "SELECT p, n FROM s3 MATCH_RECOGNIZE (\n"
        "  PARTITION BY p ORDER BY id\n"
        "  MEASURES COUNT(*) AS n\n"
        "  PATTERN (A+)\n"
        "  DEFINE A AS v = 'a'\n"
        ") ORDER BY p NULLS FIRST",
        [(None, 2), ("k", 1)],
        "NULL keys form one partition of their own",
        tags=("partition",),
    ),
    Case(
        "order_by_desc",
        letters("abb"),
        "SELECT * FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id DESC\n"
        "  MEASURES FIRST(id) AS fid, LAST(id) AS lid, COUNT(*) AS n\n"
        "  PATTERN (B+ A)\n"
        "  DEFINE A AS v = 'a', B AS v = 'b'\n"
        ")",
        [(3, 1, 3)],
        "in descending order the rows read b b a",
        tags=("order",),
    ),
    Case(
        "order_by_nulls_first",
        table("k", "k INTEGER, v VARCHAR", [(1, "b"), (2, "b"), (None, "a")]),
        "SELECT * FROM k MATCH_RECOGNIZE (\n"
        "  ORDER BY k NULLS FIRST\n"
        "  MEASURES FIRST(k) AS fk, LAST(k) AS lk, COUNT(*) AS n\n"
        "  PATTERN (A B+)\n"
        "  DEFINE A AS v = 'a', B AS v = 'b'\n"
        ")",
        [(None, 2, 3)],
        "the NULL key row ('a') comes first",
        tags=("order",),
    ),
    Case(
        "order_by_nulls_last",
        table("k", "k INTEGER, v VARCHAR", [(1, "b"), (2, "b"), (None, "a")]),
        "SELECT * FROM k MATCH_RECOGNIZE (\n"
        "  ORDER BY k ASC NULLS LAST\n"
        "  MEASURES COUNT(*) AS n\n"
        "  PATTERN (A B+)\n"
        "  DEFINE A AS v = 'a', B AS v = 'b'\n"
        ")",
        [],
        "with the 'a' row last there is no A followed by B",
        tags=("order",),
    ),
    Case(
        "order_by_two_columns",
        table("o", "g INTEGER, h INTEGER, v VARCHAR", [(2, 1, "b"), (1, 2, "b"), (1, 1, "a")]),
        "SELECT * FROM o MATCH_RECOGNIZE (\n"
        "  ORDER BY g, h\n"
        "  MEASURES COUNT(*) AS n, LAST(g) AS lg\n"
        "  PATTERN (A B+)\n"
        "  DEFINE A AS v = 'a', B AS v = 'b'\n"
        ")",
        [(3, 2)],
        "order (1,1) a, (1,2) b, (2,1) b",
        tags=("order",),
    ),
    Case(
        "order_by_desc_partitioned",
        partitioned_letters({"x": "ab", "y": "ba"}),
        "SELECT p, fid FROM s MATCH_RECOGNIZE (\n"
        "  PARTITION BY p ORDER BY id DESC\n"
        "  MEASURES FIRST(id) AS fid\n"
        "  PATTERN (B A)\n"
        "  DEFINE A AS v = 'a', B AS v = 'b'\n"
        ") ORDER BY p",
        [("x", 2)],
        "x read backwards is b a; y read backwards is a b",
        tags=("order",),
    ),
]

INTEGRATION = [
    Case(
        "cte_and_count",
        letters("ababa"),
        "WITH m AS (\n"
        "  SELECT * FROM s MATCH_RECOGNIZE (\n"
        "    ORDER BY id MEASURES MATCH_NUMBER() AS mn\n"
        "    PATTERN (A B) DEFINE A AS v = 'a', B AS v = 'b')\n"
        ")\n"
        "SELECT COUNT(*) FROM m",
        [(2,)],
        "two a-b pairs",
        tags=("sql",),
    ),
    Case(
        "outer_where",
        letters("aababaaa"),
        "SELECT mn, n FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES MATCH_NUMBER() AS mn, COUNT(*) AS n\n"
        "  PATTERN (A+) DEFINE A AS v = 'a'\n"
        ") WHERE n > 1 ORDER BY mn",
        [(1, 2), (3, 3)],
        "runs of 2, 1 and 3 'a's",
        tags=("sql",),
    ),
    Case(
        "outer_group_by_classifier",
        letters("aabab"),
        "SELECT cls, COUNT(*) AS k FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES CLASSIFIER() AS cls\n"
        "  ALL ROWS PER MATCH\n"
        "  PATTERN ((A | B)+) DEFINE A AS v = 'a', B AS v = 'b'\n"
        ") GROUP BY cls ORDER BY cls",
        [("A", 3), ("B", 2)],
        "one match labels every row",
        tags=("sql",),
    ),
    Case(
        "join_with_table",
        partitioned_letters({"x": "ab", "y": "aab"})
        + table("names", "p VARCHAR, label VARCHAR", [("x", "ex"), ("y", "why")]),
        "SELECT n.label, m.lid FROM s MATCH_RECOGNIZE (\n"
        "  PARTITION BY p ORDER BY id MEASURES LAST(id) AS lid\n"
        "  PATTERN (A+ B) DEFINE A AS v = 'a', B AS v = 'b'\n"
        ") AS m JOIN names AS n ON m.p = n.p ORDER BY n.label",
        [("ex", 2), ("why", 5)],
        "the match output joins like any table",
        tags=("sql",),
    ),
    Case(
        "subquery_input",
        table("t", "id INTEGER, x INTEGER", [(1, 1), (2, None), (3, 2), (4, 3)]),
        "SELECT * FROM (SELECT * FROM t WHERE x IS NOT NULL) MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES COUNT(*) AS n, LAST(id) AS lid\n"
        "  PATTERN (A B+) DEFINE B AS x > PREV(x)\n"
        ")",
        [(3, 4)],
        "without the NULL row the values rise 1, 2, 3",
        tags=("sql",),
    ),
    Case(
        "values_input",
        (),
        "SELECT * FROM (SELECT * FROM (VALUES (1, 5), (2, 3), (3, 4)) AS v(id, x))\n"
        "MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES A.x AS ax, B.x AS bx\n"
        "  PATTERN (A B) DEFINE B AS x < A.x\n"
        ")",
        [(5, 3)],
        "a VALUES relation as input; row 3 is left over",
        tags=("sql",),
    ),
    Case(
        "union_of_two",
        letters("abab"),
        "SELECT 'ab' AS k, COUNT(*) AS n FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES MATCH_NUMBER() AS mn PATTERN (A B)\n"
        "  DEFINE A AS v = 'a', B AS v = 'b')\n"
        "UNION ALL\n"
        "SELECT 'b', COUNT(*) FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES MATCH_NUMBER() AS mn PATTERN (B)\n"
        "  DEFINE B AS v = 'b')\n"
        "ORDER BY k",
        [("ab", 2), ("b", 2)],
        "two MATCH_RECOGNIZEs in one statement",
        tags=("sql",),
    ),
    Case(
        "table_alias_qualifies",
        letters("ab"),
        "SELECT m.mn, m.c FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS c\n"
        "  PATTERN (A) DEFINE A AS v = 'a'\n"
        ") AS m ORDER BY m.mn",
        [(1, "A")],
        "the alias names the output relation",
        tags=("sql",),
    ),
    Case(
        "nested_match_recognize",
        letters("ababb"),
        "SELECT * FROM (\n"
        "  SELECT * FROM s MATCH_RECOGNIZE (\n"
        "    ORDER BY id MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH\n"
        "    PATTERN ((A | B)+) DEFINE A AS v = 'a', B AS v = 'b')\n"
        ") MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES COUNT(*) AS n\n"
        "  PATTERN (P Q+) DEFINE P AS c = 'A', Q AS c = 'B'\n"
        ") ORDER BY n",
        [(2,), (3,)],
        "the inner match labels the rows A B A B B; the outer pattern finds P Q (rows 1-2) "
        "and P Q Q (rows 3-5)",
        tags=("sql",),
    ),
    Case(
        "in_subquery_filter",
        letters("abaab"),
        "SELECT id FROM s WHERE id IN (\n"
        "  SELECT fid FROM s MATCH_RECOGNIZE (\n"
        "    ORDER BY id MEASURES FIRST(id) AS fid\n"
        "    PATTERN (A+ B) DEFINE A AS v = 'a', B AS v = 'b'))\n"
        "ORDER BY id",
        [(1,), (3,)],
        "match starts used to filter the input",
        tags=("sql",),
    ),
    Case(
        "count_star_over_match",
        letters("aaaa"),
        "SELECT COUNT(*) FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES MATCH_NUMBER() AS mn\n"
        "  AFTER MATCH SKIP TO NEXT ROW PATTERN (A A) DEFINE A AS v = 'a')",
        [(3,)],
        "three overlapping pairs",
        tags=("sql",),
    ),
    Case(
        "outer_order_by_measure_desc",
        letters("abaab"),
        "SELECT n FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES COUNT(*) AS n\n"
        "  PATTERN (A+ B) DEFINE A AS v = 'a', B AS v = 'b'\n"
        ") ORDER BY n DESC",
        [(3,), (2,)],
        "matches of 2 and 3 rows",
        tags=("sql",),
    ),
    Case(
        "lowercase_keywords_and_variables",
        letters("aab"),
        "select mn, cls from s match_recognize (\n"
        "  order by id measures match_number() as mn, classifier() as cls\n"
        "  one row per match after match skip past last row\n"
        "  pattern (a+ b) define a as v = 'a', b as v = 'b'\n"
        ") order by mn",
        [(1, "B")],
        "keywords are case-insensitive and unquoted variable names are upper-cased",
        tags=("sql",),
    ),
    Case(
        "quoted_variable_keeps_case",
        letters("ab"),
        "SELECT cls FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES CLASSIFIER() AS cls\n"
        "  PATTERN (\"a\" B) DEFINE \"a\" AS v = 'a', B AS v = 'b'\n"
        ")",
        [("B",)],
        "the quoted name keeps its case; the match ends on B",
        tags=("sql",),
    ),
    Case(
        "quoted_variable_classifier",
        letters("a"),
        "SELECT cls FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES CLASSIFIER() AS cls\n"
        '  PATTERN ("low") DEFINE "low" AS v = \'a\'\n'
        ")",
        [("low",)],
        "quoted names are case-sensitive and kept as written",
        tags=("sql",),
    ),
    Case(
        "create_table_as_match",
        letters("abab"),
        "CREATE TABLE r AS SELECT * FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id MEASURES MATCH_NUMBER() AS mn, LAST(id) AS lid\n"
        "  PATTERN (A B) DEFINE A AS v = 'a', B AS v = 'b');\n"
        "SELECT SUM(lid) FROM r",
        [(6,)],
        "matches end at rows 2 and 4",
        tags=("sql",),
    ),
]

V_SHAPE_DATA = table(
    "orders",
    "custkey INTEGER, orderdate DATE, totalprice DOUBLE",
    "(1, DATE '2024-01-01', 100.0), (1, DATE '2024-01-02', 90.0), "
    "(1, DATE '2024-01-03', 80.0), (1, DATE '2024-01-04', 95.0), "
    "(1, DATE '2024-01-05', 110.0), (1, DATE '2024-01-06', 105.0), "
    "(2, DATE '2024-01-01', 50.0), (2, DATE '2024-01-02', 60.0), "
    "(2, DATE '2024-01-03', 40.0), (2, DATE '2024-01-04', 45.0)",
)

V_SHAPE = [
    Case(
        "v_shape_trino_example",
        V_SHAPE_DATA,
        "SELECT * FROM orders MATCH_RECOGNIZE(\n"
        "     PARTITION BY custkey\n"
        "     ORDER BY orderdate\n"
        "     MEASURES\n"
        "              A.totalprice AS starting_price,\n"
        "              LAST(B.totalprice) AS bottom_price,\n"
        "              LAST(U.totalprice) AS top_price\n"
        "     ONE ROW PER MATCH\n"
        "     AFTER MATCH SKIP PAST LAST ROW\n"
        "     PATTERN (A B+ C+ D+)\n"
        "     SUBSET U = (C, D)\n"
        "     DEFINE\n"
        "              B AS totalprice < PREV(totalprice),\n"
        "              C AS totalprice > PREV(totalprice) AND totalprice <= A.totalprice,\n"
        "              D AS totalprice > PREV(totalprice)\n"
        "     ) ORDER BY custkey",
        [(1, 100.0, 80.0, 110.0)],
        "customer 1: 100 falls to 80 (B), rises to 95 <= 100 (C), then 110 (D); 105 breaks "
        "D+. Customer 2: 60 -> 40 -> 45 has no D row, and no other start has a B",
        tags=("example",),
    ),
    Case(
        "v_shape_all_rows_with_exclusion",
        V_SHAPE_DATA,
        "SELECT custkey, orderdate, cls FROM orders MATCH_RECOGNIZE(\n"
        "     PARTITION BY custkey ORDER BY orderdate\n"
        "     MEASURES CLASSIFIER() AS cls\n"
        "     ALL ROWS PER MATCH\n"
        "     PATTERN (A {- B+ C+ -} D+)\n"
        "     DEFINE\n"
        "              B AS totalprice < PREV(totalprice),\n"
        "              C AS totalprice > PREV(totalprice) AND totalprice <= A.totalprice,\n"
        "              D AS totalprice > PREV(totalprice)\n"
        "     ) ORDER BY custkey, orderdate",
        [(1, dt.date(2024, 1, 1), "A"), (1, dt.date(2024, 1, 5), "D")],
        "only the initial row and the trailing D rows are shown",
        tags=("example",),
    ),
    Case(
        "v_shape_skip_to_next_row",
        V_SHAPE_DATA,
        "SELECT custkey, mn, starting_price FROM orders MATCH_RECOGNIZE(\n"
        "     PARTITION BY custkey ORDER BY orderdate\n"
        "     MEASURES MATCH_NUMBER() AS mn, A.totalprice AS starting_price\n"
        "     AFTER MATCH SKIP TO NEXT ROW\n"
        "     PATTERN (A B+ C+ D+)\n"
        "     DEFINE\n"
        "              B AS totalprice < PREV(totalprice),\n"
        "              C AS totalprice > PREV(totalprice) AND totalprice <= A.totalprice,\n"
        "              D AS totalprice > PREV(totalprice)\n"
        "     ) ORDER BY custkey, mn",
        [(1, 1, 100.0)],
        "from the 90 row C+ would need a price <= 90 after 80, but 95 follows; from 80 "
        "no B follows; from 110 the B (105) has nothing after it; customer 2 has no match",
        tags=("example",),
    ),
]

TRADE = table(
    "trade",
    "symbol VARCHAR, price DOUBLE, volume INTEGER",
    "('X', 10, 100), ('Y', 5, 100), ('X', 8, 100), ('Y', 4, 100), ('X', 7, 100), "
    "('Y', 6, 100), ('X', 9, 100), ('X', 11, 100), ('X', 12, 100), ('X', 5, 100)",
)

SEED_DEFINE = (
    "  DEFINE /* A defaults to True, matches any row */\n"
    "    B AS (B.Price < A.Price AND B.Price <= PREV(B.Price))\n"
    "    C AS (C.Price > B.Price AND C.Price >= PREV(C.Price) AND C.Price <= A.Price)\n"
    "    D AS (D.Price > PREV(D.Price) AND D.Price > A.Price)\n"
)


def seed(skip: str, partition: bool) -> str:
    return (
        "SELECT * FROM trade MATCH_RECOGNIZE(\n"
        + ("  PARTITION BY symbol\n" if partition else "")
        + "  MEASURES MATCH_NUMBER AS matchno\n"
        f"  AFTER MATCH SKIP {skip}\n"
        "  ALL MATCHES\n"
        "  PATTERN(A B+ C* D+)\n" + SEED_DEFINE + ");"
    )


# X's prices in arrival order: 10 8 7 9 11 12 5 (its rows 1-7); Y's: 5 4 6.
# From X row 1: A=10, B=8,7, C=9, D=11 (end 5) and D=11,12 (end 6): two end rows.
# From X row 2: A=8, B=7, then 9 > 8 is D (not C: 9 > A): ends 4, 5, 6.
# No other X start has a B followed by a D. Y: A=5, B=4, D=6: one end row.
def _seed_cases() -> list[Case]:
    # Without PARTITION BY the pattern sees the interleaved stream:
    # 10 5 8 4 7 6 9 11 12 5 (rows 1-10). From row 1: A=10, B=5 (<10, <=10), B=8? 8 <= 5
    # fails; C=8? 8 > 5, 8 >= 5, 8 <= 10: C; 4: C? no (4 < 8); D? no. Dead end -> row 3 as D?
    # 8 > 5 but 8 > 10 fails. So from row 1 no path. From row 2: A=5, B=4? row 3 is 8: no.
    # Row 3: A=8, B=4 (<8, <=8); 7: B? 7 <= 4 no; C: 7 > 4, 7 >= 4, 7 <= 8: C; 6: C? no;
    #   D? 6 > 7 no.
    #   from B=4: 7 as D? 7 > 8 no. Dead.
    # Row 4: A=4, B=7? no. Row 5: A=7, B=6 (<7, <=7); 9: C? 9 <= 7 no; D: 9 > 6, 9 > 7: D
    #   (end 7); 11: D (end 8); 12: D (end 9); 5: no. Ends 7, 8, 9.
    # Row 6: A=6, B=9? no. Row 7: A=9, B=11? no. Row 8: A=11, B=12? no. Row 9: A=12,
    #   B=5 (<12, <=12), then no row for D. Row 10: nothing after.
    # PAST LAST ROW: row 5's preferred match ends at 9, so the search resumes at row 10.
    q1 = Case(
        "seed_q1_all_matches_past_last_row",
        TRADE,
        seed("PAST LAST ROW", False),
        [(1,), (2,), (3,)],
        "from row 5 (price 7) paths end at rows 7, 8 and 9",
        ordered=False,
        tags=("dejavu",),
    )
    q3 = Case(
        "seed_q3_all_matches_to_next_row",
        TRADE,
        seed("TO NEXT ROW", False),
        [(1,), (2,), (3,)],
        "no other start row completes a path",
        ordered=False,
        tags=("dejavu",),
    )
    q2 = Case(
        "seed_q2_partitioned_past_last_row",
        TRADE,
        seed("PAST LAST ROW", True),
        [("X", 1), ("X", 2), ("Y", 1)],
        "X: ends 5 and 6 from its row 1, then resume at its row 7; Y: one end row",
        ordered=False,
        tags=("dejavu",),
    )
    q4 = Case(
        "seed_q4_partitioned_to_next_row",
        TRADE,
        seed("TO NEXT ROW", True),
        [("X", 1), ("X", 2), ("X", 3), ("X", 4), ("X", 5), ("Y", 1)],
        "X: ends 5, 6 from row 1 and 4, 5, 6 from row 2; Y: one",
        ordered=False,
        tags=("dejavu",),
    )
    return [q1, q3, q2, q4]


SEED = _seed_cases()


def dejavu_one(name: str, data: str, body: str, spec: str, why: str) -> Case:
    """ONE ROW PER MATCH letters query with DejaVu clauses in ``body``."""
    query = (
        "SELECT mn, fid, lid FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER AS mn, FIRST(id) AS fid, LAST(id) AS lid\n"
        f"{body}"
        ") ORDER BY mn"
    )
    return Case(name, letters(data), query, one(spec), why, tags=("dejavu",))


def dejavu_all(name: str, data: str, body: str, spec: str, why: str) -> Case:
    query = (
        "SELECT id, mn, cls FROM s MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER AS mn, CLASSIFIER() AS cls\n"
        "  ALL ROWS PER MATCH\n"
        f"{body}"
        ") ORDER BY mn, id"
    )
    return Case(name, letters(data), query, rows(spec), why, tags=("dejavu",))


DEJAVU = SEED + [
    dejavu_one(
        "all_matches_every_end_row",
        "aaab",
        "  AFTER MATCH SKIP PAST LAST ROW\n  ALL MATCHES\n  PATTERN (A+)\n  DEFINE A AS v = 'a'\n",
        "1:1-1 2:1-2 3:1-3",
        "paths from row 1 end at rows 1, 2, 3; the preferred match ends at 3",
    ),
    dejavu_one(
        "all_matches_reluctant_skip",
        "aaa",
        "  AFTER MATCH SKIP PAST LAST ROW\n  ALL MATCHES\n  PATTERN (A+?)\n  DEFINE A AS v = 'a'\n",
        "1:1-1 2:1-2 3:1-3 4:2-2 5:2-3 6:3-3",
        "the preferred (reluctant) match from row 1 is row 1 alone, so the search "
        "resumes at row 2, and then at row 3",
    ),
    dejavu_one(
        "all_matches_to_next_row",
        "aa",
        "  AFTER MATCH SKIP TO NEXT ROW\n  ALL MATCHES\n  PATTERN (A+)\n  DEFINE A AS v = 'a'\n",
        "1:1-1 2:1-2 3:2-2",
        "ends 1 and 2 from row 1, end 2 from row 2",
    ),
    dejavu_one(
        "incremental_match_same_as_all_matches",
        "aaab",
        "  INCREMENTAL MATCH\n  AFTER MATCH SKIP PAST LAST ROW\n  PATTERN (A+)\n"
        "  DEFINE A AS v = 'a'\n",
        "1:1-1 2:1-2 3:1-3",
        "INCREMENTAL MATCH reports every end row too",
    ),
    dejavu_one(
        "maximal_match_is_standard",
        "aaab",
        "  MAXIMAL MATCH\n  AFTER MATCH SKIP PAST LAST ROW\n  PATTERN (A+)\n"
        "  DEFINE A AS v = 'a'\n",
        "1:1-3",
        "MAXIMAL MATCH: only the preferred match",
    ),
    dejavu_one(
        "all_matches_single_end",
        "ab",
        "  ALL MATCHES\n  PATTERN (A B)\n  DEFINE A AS v = 'a', B AS v = 'b'\n",
        "1:1-2",
        "a fixed-length pattern has one end row per start",
    ),
    dejavu_all(
        "all_matches_preferred_labelling_per_end",
        "ab",
        "  AFTER MATCH SKIP PAST LAST ROW\n  ALL MATCHES\n  PATTERN ((A | X)+)\n"
        "  DEFINE A AS v = 'a'\n",
        "1A | 1A 2X",
        "ending at row 1: A beats X; ending at row 2: A X beats X X",
    ),
    dejavu_all(
        "all_matches_with_all_rows",
        "aab",
        "  AFTER MATCH SKIP PAST LAST ROW\n  ALL MATCHES\n  PATTERN (A+ B)\n"
        "  DEFINE A AS v = 'a', B AS v = 'b'\n",
        "1A 2A 3B",
        "only one path from row 1, ending at row 3",
    ),
    dejavu_one(
        "define_without_commas",
        "abab",
        "  PATTERN (A B)\n  DEFINE A AS v = 'a' B AS v = 'b'\n",
        "1:1-2 2:3-4",
        "DEFINE entries separated by whitespace",
    ),
    dejavu_one(
        "bare_match_number_default_one_row",
        "aba",
        "  PATTERN (A)\n  DEFINE A AS v = 'a'\n",
        "1:1-1 2:3-3",
        "no ROWS PER MATCH clause: one row per match; MATCH_NUMBER bare",
    ),
    Case(
        "seed_q3_with_order_and_measures",
        table(
            "tr",
            "id INTEGER, price DOUBLE",
            [(1, 10), (2, 8), (3, 7), (4, 9), (5, 11), (6, 12), (7, 5)],
        ),
        "SELECT matchno, fid, lid FROM tr MATCH_RECOGNIZE(\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER AS matchno, FIRST(id) AS fid, LAST(id) AS lid\n"
        "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  ALL MATCHES\n"
        "  PATTERN(A B+ C* D+)\n" + SEED_DEFINE + ") ORDER BY matchno",
        [(1, 1, 5), (2, 1, 6), (3, 2, 4), (4, 2, 5), (5, 2, 6)],
        "row 1: A=10 B=8,7 C=9 D=11 | D=11,12; row 2: A=8 B=7 D=9 | 9,11 | 9,11,12",
        tags=("dejavu",),
    ),
    Case(
        "seed_q3_maximal",
        table(
            "tr",
            "id INTEGER, price DOUBLE",
            [(1, 10), (2, 8), (3, 7), (4, 9), (5, 11), (6, 12), (7, 5)],
        ),
        "SELECT matchno, fid, lid FROM tr MATCH_RECOGNIZE(\n"
        "  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER AS matchno, FIRST(id) AS fid, LAST(id) AS lid\n"
        "  AFTER MATCH SKIP TO NEXT ROW\n"
        "  PATTERN(A B+ C* D+)\n" + SEED_DEFINE + ") ORDER BY matchno",
        [(1, 1, 6), (2, 2, 6)],
        "without ALL MATCHES only the greedy matches",
        tags=("dejavu",),
    ),
]

CASES: list[Case] = PARTITIONS + INTEGRATION + V_SHAPE + DEJAVU
