"""Parameters bound into MATCH_RECOGNIZE statements, and EXECUTE's values.

DuckDB binds the parameters of the statements it runs; a statement matchsql
runs gets its ``?``, ``$1`` and ``$name`` replaced by literals here, before it
is parsed. Both read the tokens of the matchsql dialect, whose strings,
quoted names and comments are single tokens: a ``?`` or ``,`` inside them
never counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot.tokens import Token, TokenType

from matchsql.errors import SemanticError
from matchsql.grammar.statements import tokenize
from matchsql.session.literals import literal

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


# -- EXECUTE's values ---------------------------------------------------------------


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
