"""Helpers for the grammar tests: the DejaVu seed queries and tree access."""

from __future__ import annotations

from sqlglot import exp

from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse

_DEFINE = """  DEFINE /* A defaults to True, matches any row */
    B AS (B.Price < A.Price AND B.Price <= PREV(B.Price))
    C AS (C.Price > B.Price AND C.Price >= PREV(C.Price) AND C.
      Price <= A.Price)
    D AS (D.Price > PREV(D.Price) AND D.Price > A.Price)
);"""


def _seed(partition: bool, skip: str) -> str:
    part = "  PARTITION BY symbol\n" if partition else ""
    return (
        "SELECT * FROM trade MATCH_RECOGNIZE(\n"
        f"{part}"
        "  MEASURES MATCH_NUMBER AS matchno\n"
        f"  AFTER MATCH SKIP {skip}\n"
        "  ALL MATCHES\n"
        "  PATTERN(A B+ C* D+)\n" + _DEFINE
    )


SEED_QUERIES = {
    "Q1": _seed(False, "PAST LAST ROW"),
    "Q2": _seed(True, "PAST LAST ROW"),
    "Q3": _seed(False, "TO NEXT ROW"),
    "Q4": _seed(True, "TO NEXT ROW"),
}


def match_tables(tree: exp.Expr) -> list[MatchRecognizeTable]:
    """Every MATCH_RECOGNIZE in ``tree``, outermost and leftmost first."""
    return list(tree.find_all(MatchRecognizeTable))


def only_mr(sql: str) -> MatchRecognizeTable:
    """The single MATCH_RECOGNIZE of a one-statement text."""
    (tree,) = parse(sql)
    (node,) = match_tables(tree)
    return node
