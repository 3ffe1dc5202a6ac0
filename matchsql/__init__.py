"""matchsql: SQL MATCH_RECOGNIZE over archived and live event streams, embedded in DuckDB.

import matchsql
con = matchsql.connect()                 # in-memory DuckDB with the demo ``trade`` table
con.sql("SELECT * FROM trade MATCH_RECOGNIZE (...)").fetchall()
"""

from matchsql.api.connection import Connection, Result, connect
from matchsql.errors import (
    CatalogError,
    Error,
    ExecutionError,
    LimitExceededError,
    ParseError,
    SemanticError,
    StreamError,
    StreamWriteError,
    TypeMismatchError,
)

__all__ = [
    "CatalogError",
    "Connection",
    "Error",
    "ExecutionError",
    "LimitExceededError",
    "ParseError",
    "Result",
    "SemanticError",
    "StreamError",
    "StreamWriteError",
    "TypeMismatchError",
    "connect",
]
__version__ = "0.1.0"
