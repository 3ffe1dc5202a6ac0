"""Syntax highlighting of the REPL's input: Pygments' SQL lexer, taught MATCH_RECOGNIZE.

Pygments' generic SQL lexer reads the row-pattern words (``PATTERN``,
``DEFINE``, ``PREV``, ...) as plain names; :class:`MatchSqlLexer` retypes them
as keywords and functions so that they stand out like the rest of SQL. It
does so in ``get_tokens_unprocessed``, the method prompt_toolkit calls (it
bypasses Pygments filters).
"""

from __future__ import annotations

from collections.abc import Iterator

from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.styles import Style, style_from_pygments_cls
from pygments.lexers.sql import SqlLexer
from pygments.styles import get_style_by_name
from pygments.token import Error, Keyword, Name, String, Text, Whitespace, _TokenType

from matchsql.cli.vocabulary import (
    MATCH_RECOGNIZE_FUNCTIONS,
    MATCH_RECOGNIZE_WORDS,
    STATEMENT_WORDS,
)

_KEYWORDS = frozenset(
    word for phrase in MATCH_RECOGNIZE_WORDS + STATEMENT_WORDS for word in phrase.split()
)
_FUNCTIONS = frozenset(MATCH_RECOGNIZE_FUNCTIONS)


class MatchSqlLexer(SqlLexer):
    """SQL with MATCH_RECOGNIZE's words highlighted as keywords and functions.

    Also: a dot-command line is not SQL and stays plain; whitespace is left unstyled (so typed text
    is not cut up by colour codes), and the rest of a string still being typed reads as a string
    (Pygments shows its opening quote as an error and its words as names).
    """

    name = "matchsql"
    aliases = ["matchsql"]

    def get_tokens_unprocessed(
        self, text: str, *args: object
    ) -> Iterator[tuple[int, _TokenType, str]]:
        if text.lstrip().startswith("."):  # a dot-command, not SQL: left plain
            yield 0, Text, text
            return
        unterminated: _TokenType | None = None
        for index, token, value in super().get_tokens_unprocessed(text, *args):
            if unterminated is not None:
                token = unterminated
            elif token is Error and value in ("'", '"'):
                unterminated = token = String.Single if value == "'" else Name
            elif token in Whitespace:
                token = Text
            elif token in Name and token is not Name.Builtin:
                upper = value.upper()
                if upper in _FUNCTIONS:
                    token = Name.Function
                elif upper in _KEYWORDS:
                    token = Keyword
            yield index, token, value


def lexer() -> PygmentsLexer:
    return PygmentsLexer(MatchSqlLexer)


def style() -> Style:
    """Pygments' default colours."""
    return style_from_pygments_cls(get_style_by_name("default"))
