"""SQL text -> sqlglot trees: the matchsql dialect (DuckDB + MATCH_RECOGNIZE),
the row pattern parser, and the semantic analysis that yields a MatchSpec."""

from matchsql.grammar.analyze import analyze
from matchsql.grammar.dialect import MatchSQL
from matchsql.grammar.pattern_parser import parse_pattern
from matchsql.grammar.statements import parse, split_statements, to_sql

__all__ = ["MatchSQL", "analyze", "parse", "parse_pattern", "split_statements", "to_sql"]
