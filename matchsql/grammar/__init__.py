"""SQL text -> sqlglot trees: the matchsql dialect (DuckDB + MATCH_RECOGNIZE),
the row pattern parser, and the semantic analysis that yields a MatchSpec."""
