"""PREPARE / EXECUTE / DEALLOCATE of statements with a MATCH_RECOGNIZE.

DuckDB prepares only what it can plan, and a MATCH_RECOGNIZE is not SQL it
knows: such a statement is kept here as text (its MATCH_RECOGNIZE views
expanded when it is prepared, as DuckDB binds a view then), and EXECUTE binds
its values as literals and runs it as a statement of its own. Every other
prepared statement is DuckDB's; the executor asks here first.

The executor loads this module on the first PREPARE: it brings sqlglot (the
views' expansion, the arguments' tokens), which plain SQL never needs.
"""

from __future__ import annotations

from typing import Any

from matchsql.errors import ParseError
from matchsql.session.host import StatementHost
from matchsql.session.statement_kinds import MatchQuery, Prepare, query
from matchsql.session.statement_text import bind_texts, split_arguments
from matchsql.session.views import expand


class PreparedMatches:
    """The prepared statements with a MATCH_RECOGNIZE of one executor (its
    :class:`~matchsql.session.host.StatementHost`)."""

    def __init__(self, executor: StatementHost) -> None:
        self.executor = executor
        # lower-cased name -> text, blanks in front keeping its offsets in the PREPARE
        self._texts: dict[str, str] = {}

    def prepare(self, statement: Prepare, views: dict[str, str]) -> bool:
        """PREPARE of a statement with a MATCH_RECOGNIZE: kept here as text (True); False
        for one that DuckDB prepares itself (which replaces one of that name kept here)."""
        self._texts.pop(statement.name, None)
        body = expand(statement.body, views)
        if not isinstance(query(body, 0), MatchQuery):
            return False
        self._texts[statement.name] = " " * statement.body_offset + body
        return True

    def prepared(self, name: str) -> bool:
        return name in self._texts

    def deallocate(self, name: str) -> bool:
        return self._texts.pop(name, None) is not None

    def execute(self, name: str, arguments: str, text: str, at: int) -> Any:
        """EXECUTE of a statement prepared here: its parameters bound as literals."""
        rest = arguments.strip()
        if rest and not (rest.startswith("(") and rest.endswith(")")):
            raise ParseError(
                "EXECUTE takes its values in parentheses: EXECUTE name(v1, v2)", sql=text, offset=at
            )
        values = split_arguments(rest[1:-1]) if rest else []
        return self.executor.dispatch(query(bind_texts(self._texts[name], values), 0))
