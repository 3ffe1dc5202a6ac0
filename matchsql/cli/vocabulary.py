"""Words the REPL completes and highlights beyond what DuckDB's catalog lists.

DuckDB knows its keywords and functions (``duckdb_keywords()``,
``duckdb_functions()``); the row-pattern words of MATCH_RECOGNIZE are
matchsql's own, and so are its statements (streams, settings, stats).
"""

from __future__ import annotations

#: Clauses and keywords of MATCH_RECOGNIZE, multi-word ones as they are typed.
MATCH_RECOGNIZE_WORDS = (
    "MATCH_RECOGNIZE",
    "PARTITION BY",
    "ORDER BY",
    "MEASURES",
    "ONE ROW PER MATCH",
    "ALL ROWS PER MATCH",
    "SHOW EMPTY MATCHES",
    "OMIT EMPTY MATCHES",
    "WITH UNMATCHED ROWS",
    "AFTER MATCH SKIP",
    "PAST LAST ROW",
    "TO NEXT ROW",
    "TO FIRST",
    "TO LAST",
    "PATTERN",
    "SUBSET",
    "DEFINE",
    "PERMUTE",
    "RUNNING",
    "FINAL",
    "INITIAL",
    "SEEK",
)

#: Functions that only exist inside MATCH_RECOGNIZE.
MATCH_RECOGNIZE_FUNCTIONS = ("CLASSIFIER", "MATCH_NUMBER", "PREV", "NEXT", "FIRST", "LAST")

#: matchsql's own statements.
STATEMENT_WORDS = (
    "CREATE STREAM",
    "DROP STREAM",
    "SHOW STREAMS",
    "SHOW STATS",
    "EXPLAIN ANALYZE",
    "STREAM",
)
