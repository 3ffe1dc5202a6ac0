"""``CREATE [OR REPLACE] [TEMP] VIEW [IF NOT EXISTS] name [(columns)] AS query``: the one
place that recognises the statement and takes it apart.

The session classifies a statement once (matchsql.session.statement_kinds); a
CREATE VIEW comes out of it with its parts, read here over the same DuckDB
tokens, so that nothing looks at its words a second time. matchsql stores
the view where its query has a MATCH_RECOGNIZE (matchsql.session.views);
only the text up to ``AS`` is read here, so a PATTERN's ``$`` after it
cannot mislead the tokens that count.
"""

from __future__ import annotations

from dataclasses import dataclass

from matchsql.session.duckdb_tokens import Token

__all__ = ["CreateView", "create_view", "view_words"]


@dataclass(frozen=True)
class CreateView:
    """The parts of a CREATE VIEW statement."""

    name: str  # as written, quotes and all
    replace: bool
    temporary: bool
    if_not_exists: bool
    columns: str | None  # the column list as written, parentheses included
    query: str
    query_offset: int


def view_words(words: list[str]) -> int | None:
    """How many of ``words`` (a statement's first keywords) make ``CREATE [OR REPLACE]
    [TEMP] VIEW``; None when the statement is no CREATE VIEW."""
    if words[:1] != ["CREATE"]:
        return None
    i = 1 + 2 * (words[1:3] == ["OR", "REPLACE"])
    i += words[i : i + 1] in (["TEMP"], ["TEMPORARY"])
    return i + 1 if words[i : i + 1] == ["VIEW"] else None


def create_view(statement: str, found: list[Token], head: int) -> CreateView | None:
    """The parts of a CREATE VIEW whose first ``head`` tokens are ``CREATE ... VIEW`` (see
    :func:`view_words`); None where they are not where this looks (no name, no AS, or
    nothing after it): DuckDB runs such a statement and reports what is wrong."""
    words = [token.word for token in found[:head]]
    replace = words[1:3] == ["OR", "REPLACE"]
    temporary = words[head - 2] in ("TEMP", "TEMPORARY")
    at = head
    if_not_exists = [t.word for t in found[at : at + 3]] == ["IF", "NOT", "EXISTS"]
    at += 3 * if_not_exists
    depth = 0
    name_end = None
    columns_start = columns_end = None
    for j in range(at, len(found)):
        token = found[j]
        if token.text == "(":
            if depth == 0 and name_end is None:
                name_end = j
                columns_start = token.start
            depth += 1
        elif token.text == ")":
            depth -= 1
            if depth == 0 and columns_start is not None and columns_end is None:
                columns_end = token.end
        elif depth == 0 and token.word == "AS":
            if name_end is None:
                name_end = j
            if name_end == at or j + 1 >= len(found):
                return None
            query_offset = found[j + 1].start
            return CreateView(
                statement[found[at].start : found[name_end - 1].end],
                replace,
                temporary,
                if_not_exists,
                statement[columns_start:columns_end] if columns_start is not None else None,
                statement[query_offset:],
                query_offset,
            )
    return None
