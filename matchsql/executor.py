"""Runs statements: plain SQL straight to DuckDB, MATCH_RECOGNIZE through the matchers."""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa

from matchsql.config import Config
from matchsql.errors import CatalogError, Error, ExecutionError, ParseError, SemanticError


class Executor:
    """Statement runner bound to one DuckDB connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, config: Config) -> None:
        self.con = con
        self.config = config

    def run(self, text: str):
        from matchsql.connection import Result

        try:
            rel = self.con.sql(text)
        except duckdb.Error as exc:
            raise self.translate(exc) from None
        if rel is None:
            return None
        return Result(rel.to_arrow_reader(self.config.batch_size))

    def interrupt(self) -> None:
        self.con.interrupt()

    @staticmethod
    def translate(exc: duckdb.Error) -> Error:
        """Turn a DuckDB exception into the matching matchsql error, keeping its message."""
        message = str(exc)
        kind = {
            duckdb.ParserException: ParseError,
            duckdb.CatalogException: CatalogError,
            duckdb.BinderException: SemanticError,
        }
        for duck_type, ours in kind.items():
            if isinstance(exc, duck_type):
                return ours(_strip_prefix(message))
        if isinstance(exc, duckdb.InterruptException):
            return ExecutionError("statement interrupted")
        return ExecutionError(_strip_prefix(message))


def _strip_prefix(message: str) -> str:
    return re.sub(r"^[A-Za-z ]+Error: ", "", message)


__all__ = ["Executor", "pa"]
