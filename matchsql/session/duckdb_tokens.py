"""DuckDB's tokens of a statement, as the session classifies statements by them.

DuckDB's tokenizer is loaded with DuckDB (no sqlglot at start-up) and never
fails: strings, quoted names and comments are single tokens, so a word inside
them never counts. Its offsets count UTF-8 bytes; the tokens here count
characters, as every position matchsql reports does.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from matchsql.grammar.sqltext import char_offsets

__all__ = ["OPERATOR", "STRING", "Token", "duckdb_tokens", "leading_words", "tokens"]

OPERATOR = duckdb.token_type.operator
_WORDS = (duckdb.token_type.keyword, duckdb.token_type.identifier)
_COMMENT = duckdb.token_type.comment
STRING = duckdb.token_type.string_const


@dataclass(frozen=True)
class Token:
    start: int
    end: int  # exclusive; the blanks up to the next token are not part of it
    kind: duckdb.token_type
    text: str

    @property
    def word(self) -> str | None:
        """The upper-cased word of an unquoted keyword or name; None for anything else."""
        if self.kind in _WORDS and not self.text.startswith('"'):
            return self.text.upper()
        return None


def duckdb_tokens(sql: str) -> list[tuple[int, duckdb.token_type]]:
    """DuckDB's tokens of ``sql``: each one's start, as a character offset (DuckDB
    counts UTF-8 bytes), and its kind."""
    found = duckdb.tokenize(sql)
    return list(
        zip(
            char_offsets(sql, [start for start, _ in found]),
            [kind for _, kind in found],
            strict=True,
        )
    )


def tokens(sql: str) -> list[Token]:
    """DuckDB's tokens of ``sql``, comments left out (its tokenizer never fails)."""
    found = duckdb_tokens(sql)
    out: list[Token] = []
    for i, (start, kind) in enumerate(found):
        if kind == _COMMENT:
            continue
        end = found[i + 1][0] if i + 1 < len(found) else len(sql)
        text = sql[start:end].rstrip()
        if kind in _WORDS and not text.startswith('"'):
            # A word ends where its letters do ("a.b", "f(x)" are several tokens).
            stop = 0
            while stop < len(text) and (text[stop].isalnum() or text[stop] in "_$"):
                stop += 1
            text = text[:stop] or text
        out.append(Token(start, start + len(text), kind, text))
    return out


def leading_words(found: list[Token]) -> list[str]:
    """The first keywords of a statement (up to six, upper case): what classifies it."""
    words: list[str] = []
    for token in found[:6]:
        if token.word is None:
            break
        words.append(token.word)
    return words
