"""The matchsql statements in the dialect's parser: streams and continuous queries.

    CREATE STREAM ... / DROP STREAM ... / SHOW STREAMS / SHOW STREAM READERS [name]
    CREATE CONTINUOUS QUERY ... AS INSERT ... / RESUME | STOP | DROP CONTINUOUS QUERY name
    SHOW CONTINUOUS QUERIES

(the full grammar: :mod:`matchsql.grammar.stream_ddl`,
:mod:`matchsql.grammar.continuous_ddl`, which hold the nodes made here and the
rules of their values). :class:`DdlParser` is a mixin of the dialect's parser
(:class:`matchsql.grammar.dialect.MatchSQLParser`) and hooks in where sqlglot
extends a dialect: CREATE and DROP through ``STATEMENT_PARSERS`` (anything
else after them goes on to sqlglot's own CREATE and DROP), SHOW through
``SHOW_PARSERS``, and RESUME and STOP, which are no keywords (a column may be
called ``stop``), before the statement table is asked. Errors name what was
expected at the token where it was not (``raise_error``: the statement layer
turns them into a located :class:`matchsql.errors.ParseError`).
"""

from __future__ import annotations

import re
import typing as t

from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.tokens import Token, TokenType

from matchsql.grammar.continuous_ddl import NAME_RULE as QUERY_NAME_RULE
from matchsql.grammar.continuous_ddl import OPTIONS as QUERY_OPTIONS
from matchsql.grammar.continuous_ddl import (
    ContinuousQueryAction,
    CreateContinuousQuery,
    ShowContinuousQueries,
    check_option,
    valid_name,
)
from matchsql.grammar.stream_ddl import (
    CAPACITY_RULE,
    MAX_SPILL_RULE,
    NAME_RULE,
    ON_FULL,
    OPTIONS,
    RESERVED_COLUMNS,
    SIZE_UNITS,
    CreateStream,
    DropStream,
    ShowStreamReaders,
    ShowStreams,
    is_capacity,
    is_stream_name,
    spill_limit,
)

__all__ = ["DdlParser"]

#: Tokens that cannot be a name.
_NOT_NAMES = frozenset(
    (
        TokenType.L_PAREN,
        TokenType.R_PAREN,
        TokenType.COMMA,
        TokenType.STRING,
        TokenType.NUMBER,
        TokenType.EQ,
    )
)


class DdlParser:
    """The stream and continuous query statements, over sqlglot's token cursor."""

    if t.TYPE_CHECKING:  # what the sqlglot parser this mixes into provides
        sql: str
        _curr: Token
        _index: int
        _tokens: list[Token]
        _chunks: list[list[Token]]
        _chunk_index: int

        def _advance(self, times: int = 1) -> None: ...
        def _retreat(self, index: int) -> None: ...
        def raise_error(self, message: str, token: Token | None = None) -> None: ...
        def _parse_create(self) -> exp.Create | exp.Command: ...
        def _parse_drop(
            self, exists: bool = False, kind: str | None = None
        ) -> exp.Drop | exp.Command: ...

    #: SHOW's statements here, by the words after SHOW (merged into ``SHOW_PARSERS``).
    DDL_SHOW_PARSERS: t.ClassVar = {
        "STREAMS": lambda self: self._parse_show_streams(),
        "STREAM": lambda self: self._parse_show_stream_readers(),
        "CONTINUOUS": lambda self: self._parse_show_continuous(),
    }

    # -- hooks ---------------------------------------------------------------------------

    def _parse_statement(self) -> exp.Expr | None:
        for action in ("RESUME", "STOP"):
            if self._ddl_words(action, "CONTINUOUS", "QUERY"):
                return self._parse_query_action(action.lower())
        return super()._parse_statement()  # type: ignore[misc]

    def _parse_create_ddl(self) -> exp.Expr:
        """CREATE: of a stream or a continuous query here, of anything else sqlglot's."""
        if self._ddl_words("STREAM"):
            return self._parse_create_stream()
        if self._ddl_words("CONTINUOUS", "QUERY"):
            return self._parse_create_continuous()
        return self._parse_create()

    def _parse_drop_ddl(self) -> exp.Expr:
        """DROP: of a stream or a continuous query here, of anything else sqlglot's."""
        if self._ddl_words("STREAM"):
            if_exists = self._ddl_if("EXISTS")
            name = self._stream_name()
            self._ddl_end()
            return DropStream(this=name, if_exists=if_exists)
        if self._ddl_words("CONTINUOUS", "QUERY"):
            return self._parse_query_action("drop")
        return self._parse_drop()

    # -- token helpers ------------------------------------------------------------------

    def _ddl_fail(self, message: str, token: Token | None = None) -> t.NoReturn:
        self.raise_error(message, token or self._curr)
        raise SqlglotParseError(message)  # only where the error level collects errors

    def _ddl_words(self, *words: str) -> bool:
        """Consume ``words`` (unquoted, any case) if they come next; else consume nothing."""
        index = self._index
        for word in words:
            token = self._curr
            if not token or token.token_type == TokenType.IDENTIFIER or token.text.upper() != word:
                self._retreat(index)
                return False
            self._advance()
        return True

    def _ddl_expect_word(self, word: str) -> None:
        if not self._ddl_words(word):
            self._ddl_fail(f"expected {word}")

    def _ddl_if(self, *words: str) -> bool:
        """``IF <words>`` (NOT EXISTS, EXISTS) if it comes next."""
        if not self._ddl_words("IF"):
            return False
        for word in words:
            self._ddl_expect_word(word)
        return True

    def _ddl_expect(self, kind: TokenType, what: str) -> Token:
        token = self._curr
        if not token or token.token_type != kind:
            self._ddl_fail(f"expected {what}")
        self._advance()
        return token

    def _ddl_comma(self) -> bool:
        if self._curr and self._curr.token_type == TokenType.COMMA:
            self._advance()
            return True
        return False

    def _ddl_name(self, what: str) -> str:
        token = self._curr
        if not token or token.token_type in _NOT_NAMES:
            self._ddl_fail(f"expected {what}")
        self._advance()
        return token.text if token.token_type == TokenType.IDENTIFIER else token.text.lower()

    def _ddl_end(self) -> None:
        if self._curr:
            self._ddl_fail("unexpected text after the statement")

    # -- streams -------------------------------------------------------------------------

    def _parse_show_streams(self) -> ShowStreams:
        self._ddl_end()
        return ShowStreams()

    def _parse_show_stream_readers(self) -> ShowStreamReaders:
        self._ddl_expect_word("READERS")
        name = self._stream_name() if self._curr else None
        self._ddl_end()
        return ShowStreamReaders(this=name)

    def _parse_create_stream(self) -> CreateStream:
        if_not_exists = self._ddl_if("NOT", "EXISTS")
        name = self._stream_name()
        columns, offsets = self._stream_columns()
        options = self._stream_options() if self._ddl_words("WITH") else {}
        self._ddl_end()
        return CreateStream(
            this=name,
            columns=tuple(columns),
            type_offsets=tuple(offsets),
            options=tuple(options.items()),
            if_not_exists=if_not_exists,
        )

    def _stream_name(self) -> str:
        token = self._curr
        name = self._ddl_name("a stream name")
        if not is_stream_name(name):
            self._ddl_fail(NAME_RULE, token)
        return name

    def _stream_columns(self) -> tuple[list[tuple[str, str]], list[int]]:
        """The columns, each ``(name, type as written)``, and where each type starts."""
        self._ddl_expect(TokenType.L_PAREN, "'(' and the stream's columns")
        columns: list[tuple[str, str]] = []
        offsets: list[int] = []
        seen: set[str] = set()
        while True:
            token = self._curr
            column = self._ddl_name("a column name")
            if column.lower() in seen:
                self._ddl_fail(f"column {column!r} appears twice", token)
            if column.lower() in RESERVED_COLUMNS:
                self._ddl_fail(f"column name {column!r} is reserved for sequence numbers", token)
            seen.add(column.lower())
            type_text, offset = self._type_text()
            columns.append((column, type_text))
            offsets.append(offset)
            if self._ddl_comma():
                continue
            self._ddl_expect(TokenType.R_PAREN, "',' or ')'")
            return columns, offsets

    def _type_text(self) -> tuple[str, int]:
        """The type as written (tokens up to the next ',' or ')' outside parentheses), and
        where it starts: DuckDB, not this parser, says which types there are."""
        first = self._curr
        depth = 0
        last = None
        while token := self._curr:
            if token.token_type == TokenType.L_PAREN:
                depth += 1
            elif token.token_type == TokenType.R_PAREN:
                if depth == 0:
                    break
                depth -= 1
            elif token.token_type == TokenType.COMMA and depth == 0:
                break
            last = token
            self._advance()
        if not first or last is None:
            self._ddl_fail("expected a column type")
        return self.sql[first.start : last.end + 1], first.start

    def _stream_options(self) -> dict[str, object]:
        self._ddl_expect(TokenType.L_PAREN, "'(' and stream options")
        options: dict[str, object] = {}
        keys: dict[str, Token] = {}
        while True:
            token = self._curr
            key = self._ddl_name("an option name").lower()
            if key not in OPTIONS:
                self._ddl_fail(f"unknown stream option {key!r}; known: {', '.join(OPTIONS)}", token)
            if key in keys:  # which one would count is a guess; say so instead
                self._ddl_fail(f"{key} is given twice", token)
            keys[key] = token
            self._ddl_expect(TokenType.EQ, "'='")
            value_token = self._curr
            if not value_token:
                self._ddl_fail("expected an option value")
            self._advance()
            options[key] = self._stream_option_value(key, value_token)
            if self._ddl_comma():
                continue
            self._ddl_expect(TokenType.R_PAREN, "',' or ')'")
            break
        if "max_spill" in keys and options.get("on_full") != "spill":
            self._ddl_fail(
                "max_spill bounds the spill files of an on_full = 'spill' stream; "
                "this stream blocks when full and never spills",
                keys["max_spill"],
            )
        return options

    def _stream_option_value(self, key: str, token: Token) -> object:
        text = token.text
        if key == "max_spill":
            return self._spill_value(token)
        if key == "capacity":
            if (
                token.token_type != TokenType.NUMBER
                or not re.fullmatch(r"[0-9]{1,12}", text)
                or not is_capacity(int(text))
            ):
                self._ddl_fail(f"{CAPACITY_RULE}, got {text}", token)
            return int(text)
        if token.token_type not in (TokenType.STRING, TokenType.VAR, TokenType.IDENTIFIER):
            self._ddl_fail(f"{key} takes a quoted string", token)
        if key == "on_full":
            if text.lower() not in ON_FULL:
                self._ddl_fail(f"on_full is {' or '.join(map(repr, ON_FULL))}", token)
            return text.lower()
        if not text.strip():
            self._ddl_fail(f"{key} must not be empty", token)
        return text

    def _spill_value(self, token: Token) -> int:
        """``max_spill``'s bytes: a number, optionally followed by a unit (``512 MiB``), or a
        quoted size (``'2 GB'``); an error points at the value and gives the range."""
        text = token.text
        if token.token_type == TokenType.NUMBER:
            unit = self._curr
            if unit and unit.token_type == TokenType.VAR and unit.text.lower() in SIZE_UNITS:
                self._advance()
                text = f"{text} {unit.text}"
        elif token.token_type != TokenType.STRING:
            self._ddl_fail(f"max_spill takes a number of bytes; {MAX_SPILL_RULE}", token)
        try:
            return spill_limit(text)
        except ValueError as exc:
            self._ddl_fail(str(exc), token)

    # -- continuous queries --------------------------------------------------------------

    def _parse_show_continuous(self) -> ShowContinuousQueries:
        self._ddl_expect_word("QUERIES")
        self._ddl_end()
        return ShowContinuousQueries()

    def _parse_query_action(self, action: str) -> ContinuousQueryAction:
        """RESUME, STOP or DROP (``action``) of the query named next."""
        if_exists = action == "drop" and self._ddl_if("EXISTS")
        name = self._query_name()
        self._ddl_end()
        return ContinuousQueryAction(this=name, action=action, if_exists=if_exists)

    def _parse_create_continuous(self) -> CreateContinuousQuery:
        if_not_exists = self._ddl_if("NOT", "EXISTS")
        name = self._query_name()
        options = self._query_options() if self._ddl_words("WITH") else {}
        as_token = self._curr
        if not self._ddl_words("AS"):
            self._ddl_fail("expected AS and the query's INSERT INTO ... SELECT statement")
        body = self._curr
        if not body or body.text.upper() != "INSERT":
            self._ddl_fail(
                "a continuous query is INSERT INTO <table> SELECT ... FROM "
                "<stream> MATCH_RECOGNIZE (...)",
                body,
            )
        start = as_token.end + 1
        end = self._body_end()
        return CreateContinuousQuery(
            this=name,
            body=self.sql[start:end],
            body_offset=start,
            options=tuple(options.items()),
            if_not_exists=if_not_exists,
        )

    def _body_end(self) -> int:
        """Where the body after AS ends: the statement's last token (the body is text,
        analysed when the query is created), or the end of the text where this is its
        last statement, so that a trailing comment stays in the body as written."""
        last = self._tokens[-1]
        while self._curr:
            self._advance()
        if self._chunk_index >= len(self._chunks):
            return len(self.sql)
        return last.end + 1

    def _query_name(self) -> str:
        token = self._curr
        name = self._ddl_name("a continuous query name")
        if not valid_name(name):
            self._ddl_fail(QUERY_NAME_RULE, token)
        return name

    def _query_options(self) -> dict[str, float]:
        self._ddl_expect(TokenType.L_PAREN, "'(' and continuous query options")
        options: dict[str, float] = {}
        while True:
            token = self._curr
            key = self._ddl_name("an option name").lower()
            if key not in QUERY_OPTIONS:
                self._ddl_fail(
                    f"unknown continuous query option {key!r}; known: {', '.join(QUERY_OPTIONS)}",
                    token,
                )
            if key in options:
                self._ddl_fail(f"{key} is given twice", token)
            self._ddl_expect(TokenType.EQ, "'='")
            value = self._curr
            if not value or value.token_type != TokenType.NUMBER:
                self._ddl_fail(
                    f"{key} is a number ({'seconds' if 'interval' in key else 'tuples'}"
                    ", 0 for none)",
                    value,
                )
            self._advance()
            try:
                options[key] = check_option(key, value.text)
            except ValueError as rule:
                self._ddl_fail(f"{key} must be {rule}, got {value.text}", value)
            if self._ddl_comma():
                continue
            self._ddl_expect(TokenType.R_PAREN, "',' or ')'")
            return options
