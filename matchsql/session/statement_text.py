"""Text-level pieces of the session layer: a statement's leading keywords, parameters
bound into MATCH_RECOGNIZE statements, and the parts of CREATE VIEW / PREPARE / EXECUTE.

sqlglot parses PREPARE, EXECUTE and EXPLAIN ANALYZE as opaque commands (and
logs a warning when it does), so these statements are taken apart here, by
the tokenizer of the matchsql dialect (strings, quoted names and comments
are single tokens, never split), and the statement inside goes on alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot.tokens import Token, TokenType

from matchsql.errors import ParseError, SemanticError
from matchsql.grammar.statements import tokenize
from matchsql.session.literals import literal

_WORD = re.compile(r"[A-Za-z_]+")
#: Whitespace and comments (an unterminated block comment runs to the end).
_BLANK = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.DOTALL)


def leading_words(statement: str, count: int) -> list[str]:
    """The first ``count`` words of ``statement`` (upper case), after leading comments.

    Only keywords are looked at, so no string or quoted name can come before
    them; the scan stops at the first thing that is not a word.
    """
    words: list[str] = []
    i = _BLANK.match(statement).end()
    while len(words) < count:
        match = _WORD.match(statement, i)
        if match is None:
            break
        words.append(match.group(0).upper())
        i = _BLANK.match(statement, match.end()).end()
    return words


# -- parameters ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Marker:
    start: int
    end: int  # exclusive
    key: int | str | None  # None for ``?``, a 1-based number for ``$1``, a name for ``$name``


def _markers(sql: str) -> list[_Marker]:
    tokens = tokenize(sql)
    found: list[_Marker] = []
    for i, token in enumerate(tokens):
        if token.token_type == TokenType.PLACEHOLDER and token.text == "?":
            found.append(_Marker(token.start, token.end + 1, None))
        elif (
            token.token_type == TokenType.PARAMETER
            and i + 1 < len(tokens)
            and tokens[i + 1].start == token.end + 1
        ):
            following: Token = tokens[i + 1]
            key: int | str = (
                int(following.text) if following.token_type == TokenType.NUMBER else following.text
            )
            found.append(_Marker(token.start, following.end + 1, key))
    return found


def bind_texts(sql: str, values: Sequence[str] | Mapping[str, str]) -> str:
    """``sql`` with its ``?``, ``$1`` and ``$name`` replaced by the SQL texts ``values``.

    ``?`` take the values in order, ``$n`` the n-th one, ``$name`` the one of
    that name; every parameter must get a value and every value be used.
    """
    markers = _markers(sql)
    named = isinstance(values, Mapping)
    used: set[int | str] = set()
    pieces: list[str] = []
    last = 0
    position = 0
    for marker in markers:
        if named:
            if not isinstance(marker.key, str):
                raise SemanticError(
                    "named parameters ($name) need a dict of values, "
                    "positional ones (? or $1) a list",
                    sql=sql,
                    offset=marker.start,
                )
            key: int | str = marker.key
            if key not in values:
                raise SemanticError(f"no value for parameter ${key}", sql=sql, offset=marker.start)
            text = values[key]  # type: ignore[index]
        else:
            if isinstance(marker.key, str):
                raise SemanticError(
                    f"parameter ${marker.key} needs a dict of values", sql=sql, offset=marker.start
                )
            index = position if marker.key is None else marker.key - 1
            position += marker.key is None
            if not 0 <= index < len(values):
                raise SemanticError(
                    f"parameter {index + 1} has no value: {len(values)} given",
                    sql=sql,
                    offset=marker.start,
                )
            key = index
            text = values[index]  # type: ignore[index]
        used.add(key)
        pieces += [sql[last : marker.start], f"({text})"]
        last = marker.end
    expected = len(values)
    if len(used) != expected:
        raise SemanticError(
            f"the statement has {len(used)} parameter(s) but {expected} value(s) were given"
        )
    return "".join(pieces) + sql[last:]


def bind_values(sql: str, params: Sequence[Any] | Mapping[str, Any]) -> str:
    """``sql`` with its parameters replaced by the literals of ``params``."""
    if isinstance(params, Mapping):
        return bind_texts(sql, {k: literal(v) for k, v in params.items()})
    return bind_texts(sql, [literal(v) for v in params])


# -- statement parts ------------------------------------------------------------------


@dataclass(frozen=True)
class CreateView:
    """``CREATE [OR REPLACE] [TEMP] VIEW [IF NOT EXISTS] name [(columns)] AS query``."""

    name: str  # as written, quotes and all
    replace: bool
    temporary: bool
    if_not_exists: bool
    columns: str | None  # the column list as written, parentheses included
    query: str
    query_offset: int


def create_view(statement: str) -> CreateView | None:
    """The parts of a CREATE VIEW statement; None for any other statement."""
    words = leading_words(statement, 6)
    i = 1
    if words[:1] != ["CREATE"]:
        return None
    replace = words[1:3] == ["OR", "REPLACE"]
    i += 2 * replace
    temporary = words[i : i + 1] in (["TEMP"], ["TEMPORARY"])
    i += temporary
    if words[i : i + 1] != ["VIEW"]:
        return None
    try:
        tokens = tokenize(statement)
    except ParseError:
        return None
    # Tokens: CREATE [OR REPLACE] [TEMP] VIEW ... then the name up to "(" or AS.
    at = i + 1
    if_not_exists = [t.text.upper() for t in tokens[at : at + 3]] == ["IF", "NOT", "EXISTS"]
    at += 3 * if_not_exists
    depth = 0
    name_end = None
    columns_start = columns_end = None
    for j in range(at, len(tokens)):
        token = tokens[j]
        if token.token_type == TokenType.L_PAREN:
            if depth == 0 and name_end is None:
                name_end = j
                columns_start = token.start
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0 and columns_start is not None and columns_end is None:
                columns_end = token.end + 1
        elif depth == 0 and token.token_type == TokenType.ALIAS:
            if name_end is None:
                name_end = j
            if name_end == at or j + 1 >= len(tokens):
                return None
            name = statement[tokens[at].start : tokens[name_end - 1].end + 1]
            query_offset = tokens[j + 1].start
            columns = statement[columns_start:columns_end] if columns_start is not None else None
            return CreateView(
                name,
                replace,
                temporary,
                if_not_exists,
                columns,
                statement[query_offset:],
                query_offset,
            )
    return None


def split_arguments(text: str) -> list[str]:
    """The comma-separated SQL expressions of ``text`` (commas inside parentheses kept)."""
    tokens = tokenize(text)
    pieces: list[str] = []
    depth = 0
    start = 0
    for token in tokens:
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE):
            depth += 1
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE):
            depth -= 1
        elif token.token_type == TokenType.COMMA and depth == 0:
            pieces.append(text[start : token.start].strip())
            start = token.end + 1
    last = text[start:].strip()
    if last or pieces:
        pieces.append(last)
    return pieces
