"""Statements that must fail with a :class:`matchsql.Error` subclass.

Static errors (analysis) follow the rules stated in Trino's MATCH_RECOGNIZE
documentation and the SQL standard: FINAL only in MEASURES, non-negative
constant navigation offsets, consistent pattern variables inside one
navigation or aggregate, no navigation inside aggregates and vice versa, no
exclusion together with WITH UNMATCHED ROWS, known variables, columns and
tables. The runtime errors of AFTER MATCH SKIP are in ``cases_patterns``.
Where the exact class is a matter of taste the case only requires
``matchsql.Error``.
"""

from __future__ import annotations

import matchsql

from .case import Case, table

T = table("t", "id INTEGER, x INTEGER", [(1, 1), (2, 2), (3, 3)])


def bad(
    name: str,
    *,
    measures: str = "COUNT(*) AS n",
    pattern: str = "A B+",
    define: str = "B AS x > PREV(x)",
    extra: str = "",
    rows: str = "ONE ROW PER MATCH",
    error: type[matchsql.Error] = matchsql.Error,
    why: str = "",
    source: str = "t",
    order: str = "ORDER BY id",
    partition: str = "",
) -> Case:
    """A query over ``t(id, x)`` with one clause made wrong."""
    query = (
        f"SELECT * FROM {source} MATCH_RECOGNIZE (\n"
        f"  {partition} {order}\n"
        f"  MEASURES {measures}\n"
        f"  {rows}\n"
        f"  {extra}\n"
        f"  PATTERN ({pattern})\n"
        f"  DEFINE {define}\n"
        ")"
    )
    return Case(name, T, query, error, why, tags=("error",))


def _with_subset(name: str, subset: str, why: str) -> Case:
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        "  MEASURES COUNT(*) AS n\n"
        "  PATTERN (A B+)\n"
        f"  SUBSET {subset}\n"
        "  DEFINE B AS x > PREV(x)\n"
        ")"
    )
    return Case(name, T, query, matchsql.Error, why, tags=("error",))


CASES: list[Case] = [
    bad(
        "error_define_variable_not_in_pattern",
        define="C AS x > 0",
        why="C is defined but not a variable of the pattern",
    ),
    bad(
        "error_unknown_variable_in_measure",
        measures="Z.x AS zx",
        why="Z is neither a pattern variable nor a subset",
    ),
    bad("error_unknown_variable_in_define", define="B AS x > Z.x", why="Z is unknown"),
    bad(
        "error_final_in_define",
        define="B AS x > FINAL LAST(A.x)",
        why="FINAL is only allowed in MEASURES",
    ),
    bad(
        "error_final_aggregate_in_define",
        define="B AS FINAL COUNT(*) > 1",
        why="FINAL is only allowed in MEASURES",
    ),
    bad(
        "error_negative_prev_offset",
        define="B AS x > PREV(x, -1)",
        why="offsets must be non-negative",
    ),
    bad(
        "error_negative_first_offset",
        measures="FIRST(x, -2) AS f",
        why="offsets must be non-negative",
    ),
    bad(
        "error_non_constant_offset",
        define="B AS x > PREV(x, id)",
        why="the offset must be a constant",
    ),
    bad("error_unknown_column_of_variable", define="B AS B.nope > 0", why="t has no column nope"),
    bad("error_unknown_column_unqualified", define="B AS nope > 0", why="t has no column nope"),
    bad(
        "error_unknown_column_in_measure", measures="LAST(A.nope) AS v", why="t has no column nope"
    ),
    bad(
        "error_skip_to_unknown_variable",
        extra="AFTER MATCH SKIP TO LAST Z",
        why="Z is not a pattern variable",
    ),
    bad(
        "error_exclusion_with_unmatched_rows",
        pattern="A {- B+ -}",
        rows="ALL ROWS PER MATCH WITH UNMATCHED ROWS",
        why="exclusion cannot be combined with WITH UNMATCHED ROWS",
    ),
    bad(
        "error_navigation_mixes_variables",
        measures="LAST(A.x + B.x) AS v",
        why="all column references inside one navigation must use the same variable",
    ),
    bad(
        "error_aggregate_mixes_variables",
        measures="SUM(A.x + B.x) AS v",
        why="an aggregate's arguments must refer to one set of rows",
    ),
    bad(
        "error_aggregate_inside_navigation",
        measures="PREV(SUM(x)) AS v",
        why="aggregates cannot be nested in navigation",
    ),
    bad(
        "error_navigation_inside_aggregate",
        measures="SUM(PREV(x)) AS v",
        why="navigation cannot be nested in aggregates",
    ),
    bad(
        "error_navigation_without_column",
        measures="LAST(1) AS v",
        why="navigation needs a column reference or CLASSIFIER inside",
    ),
    bad(
        "error_quantifier_bounds_reversed",
        pattern="A B{3,2}",
        why="the lower bound exceeds the upper bound",
    ),
    bad(
        "error_pattern_syntax",
        pattern="A (B",
        error=matchsql.ParseError,
        why="unbalanced parenthesis in PATTERN",
    ),
    bad(
        "error_pattern_dangling_alternation",
        pattern="A |",
        error=matchsql.ParseError,
        why="alternation without a right branch",
    ),
    bad("error_unknown_table", source="nope", error=matchsql.CatalogError, why="no such table"),
    bad("error_partition_by_unknown_column", partition="PARTITION BY nope", why="no such column"),
    bad("error_order_by_unknown_column", order="ORDER BY nope", why="no such column"),
    bad(
        "error_duplicate_define", define="B AS x > 0, B AS x < 5", why="a variable is defined twice"
    ),
    bad("error_classifier_unknown_variable", measures="CLASSIFIER(Z) AS c", why="Z is unknown"),
    bad("error_define_not_boolean", define="B AS x + 1", why="a DEFINE condition must be boolean"),
    bad(
        "error_nested_aggregates", measures="SUM(COUNT(*)) AS v", why="aggregates cannot be nested"
    ),
    bad(
        "error_missing_pattern_variable_definition_syntax",
        define="B x > 0",
        error=matchsql.ParseError,
        why="DEFINE needs AS",
    ),
    _with_subset(
        "error_subset_named_like_variable",
        "A = (B)",
        "a subset cannot reuse the name of a primary variable",
    ),
    _with_subset("error_subset_unknown_member", "U = (A, Z)", "Z is not a pattern variable"),
    _with_subset("error_duplicate_subset", "U = (A), U = (B)", "U is defined twice"),
]
