"""SQL text -> sqlglot trees: the matchsql dialect (DuckDB + MATCH_RECOGNIZE, in
``dialect``; the stream and continuous query statements in ``ddl_parser``, their
nodes in ``stream_ddl`` and ``continuous_ddl``), statements (``statements``:
tokenize, parse, to_sql), the row pattern parser (``pattern_parser``) and the
semantic analysis that yields a MatchSpec (``analyze``).

Nothing is imported here: ``sqltext`` (the one statement splitter, which the
session, the shell and the REPL use) runs at start-up, and must not load
sqlglot with it.
"""
