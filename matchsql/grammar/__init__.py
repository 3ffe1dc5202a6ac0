"""SQL text -> sqlglot trees: the matchsql dialect (DuckDB + MATCH_RECOGNIZE, in
``dialect``), statements (``statements``: split, parse, to_sql), the row pattern
parser (``pattern_parser``) and the semantic analysis that yields a MatchSpec
(``analyze``).

Nothing is imported here: ``sqltext`` (the REPL's statement scanner) is used
at start-up, and must not load sqlglot with it.
"""
