"""``CREATE STREAM``, ``DROP STREAM`` and ``SHOW STREAMS``.

    CREATE STREAM [IF NOT EXISTS] name (column type, ...)
        [WITH (capacity = N, on_full = 'block' | 'spill',
               max_spill = <bytes: 1e9, 512 MiB, '2 GB'>,     (on_full = 'spill' only)
               archive = '<DuckDB table or Parquet directory>',
               archive_filter = '<SQL predicate>')]
    DROP STREAM [IF EXISTS] name
    SHOW STREAMS
    SHOW STREAM READERS [name]      one row per reader: cursor, lag, archive writer

These are not DuckDB statements: the session classifies them by their
first words (matchsql.session.statements) and they are parsed here over the matchsql tokenizer
(errors point at the offending token). Column types are kept as written and validated later by
asking DuckDB (``CAST(NULL AS type)``), so every DuckDB type name works and
the stream's Arrow schema is exactly what DuckDB would produce.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from sqlglot.tokens import Token, TokenType

from matchsql.errors import ParseError
from matchsql.grammar.statements import tokenize

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}\Z")
#: The one rule for stream names, in SQL and in the Python API (a name becomes a file
#: name in the stream registry: no '/', no '..').
NAME_RULE = "a stream name is a letter or '_' followed by up to 62 letters, digits or '_'"


def is_stream_name(name: object) -> bool:
    """Whether ``name`` is a valid stream name (:data:`NAME_RULE`)."""
    return isinstance(name, str) and _NAME.match(name) is not None


OPTIONS = ("capacity", "on_full", "max_spill", "archive", "archive_filter")
#: A ring holds at most this many tuples (its segment is also held to the shared memory
#: there is: matchsql.storage.shm_ring).
MAX_CAPACITY = 1 << 30
#: What a writer does when the ring is full: wait for readers, or spill to Parquet files.
ON_FULL = ("block", "spill")
CAPACITY_RULE = f"capacity is a whole number of tuples from 1 to {MAX_CAPACITY:,}"


def is_capacity(value: object) -> bool:
    """Whether ``value`` is a capacity :data:`CAPACITY_RULE` allows (SQL and Python)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CAPACITY


#: The range of ``max_spill``, the bytes of spill files a ``spill`` stream may hold
#: (the same rule in SQL and in the Python API). Below 64 KiB not even a small spill
#: file fits; 1 EiB is far beyond any disk and keeps byte counts exact in an int64.
MAX_SPILL_MIN = 64 * 1024
MAX_SPILL_MAX = 1 << 60
MAX_SPILL_RULE = (
    f"max_spill is a number of bytes from {MAX_SPILL_MIN:,} (64 KiB) to "
    f"{MAX_SPILL_MAX:,} (1 EiB), e.g. 1e9, 512 MiB or '2 GB'"
)
#: Size units: decimal (kB = 1000 B, as DuckDB's memory_limit) and binary (KiB = 1024 B).
SIZE_UNITS = {
    "": 1,
    "b": 1,
    "bytes": 1,
    **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgtpe")},
    **{f"{p}ib": 1024 ** (i + 1) for i, p in enumerate("kmgtpe")},
}
_SIZE = re.compile(r"\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*\Z")


def spill_limit(value: object) -> int:
    """``value`` (a number of bytes, or text such as ``'512 MiB'``) as whole bytes.

    One check for SQL and the Python API, so a limit that cannot mean what
    its writer meant never gets recorded: a number that rounds to 0 bytes (which
    would refuse every spill) or to infinity (which is no limit), and anything
    outside :data:`MAX_SPILL_RULE`'s range, raise ValueError saying why.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"max_spill takes a number of bytes, not {value!r}; {MAX_SPILL_RULE}")
    if isinstance(value, str):
        match = _SIZE.match(value)
        unit = SIZE_UNITS.get(match.group(2).lower()) if match else None
        if match is None or unit is None:
            raise ValueError(f"max_spill = {value!r} is not a size; {MAX_SPILL_RULE}")
        try:
            number = Decimal(match.group(1)) * unit
        except (InvalidOperation, ArithmeticError):  # beyond what Decimal holds: infinite
            number = Decimal("Infinity")
    else:
        number = Decimal(value)
    shown = f"{number:.3e}" if isinstance(value, int) and value.bit_length() > 64 else value
    if number.is_nan():
        raise ValueError(f"max_spill = {shown} is not a number; {MAX_SPILL_RULE}")
    if not number.is_finite() or math.isinf(float(number)):
        raise ValueError(
            f"max_spill = {shown} is too large: it rounds to infinity; {MAX_SPILL_RULE}"
        )
    if number > MAX_SPILL_MAX * 2:  # out of range; not worth an exact (huge) integer
        raise ValueError(f"max_spill = {shown} is out of range; {MAX_SPILL_RULE}")
    rounded = int(number.to_integral_value())
    if rounded == 0 and number >= 0:
        raise ValueError(f"max_spill = {shown} rounds to 0 bytes; {MAX_SPILL_RULE}")
    if not MAX_SPILL_MIN <= rounded <= MAX_SPILL_MAX:
        raise ValueError(f"max_spill = {shown} is out of range; {MAX_SPILL_RULE}")
    return rounded


RESERVED_COLUMNS = ("_seq",)


@dataclass
class CreateStream:
    name: str
    columns: list[tuple[str, str]]  # (name, type text as written)
    type_offsets: list[int]  # where each type starts in the statement, for errors
    options: dict[str, object] = field(default_factory=dict)
    if_not_exists: bool = False


@dataclass
class DropStream:
    name: str
    if_exists: bool = False


@dataclass
class ShowStreams:
    pass


@dataclass
class ShowStreamReaders:
    name: str | None = None


StreamStatement = CreateStream | DropStream | ShowStreams | ShowStreamReaders


def parse_stream_statement(sql: str) -> StreamStatement:
    """Parse one stream statement (classified as one by matchsql.session.statements)."""
    return _Parser(sql).statement()


class _Parser:
    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = [t for t in tokenize(sql) if t.token_type != TokenType.SEMICOLON]
        self.i = 0

    # -- token helpers ---------------------------------------------------------------

    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def error(self, message: str, token: Token | None = None) -> ParseError:
        token = token or self.peek()
        offset = len(self.sql.rstrip()) if token is None else token.start
        return ParseError(message, sql=self.sql, offset=offset)

    def word(self, *words: str) -> bool:
        token = self.peek()
        if (
            token is not None
            and token.token_type != TokenType.IDENTIFIER
            and token.text.upper() in words
        ):
            self.i += 1
            return True
        return False

    def expect_word(self, word: str) -> None:
        if not self.word(word):
            raise self.error(f"expected {word}")

    def expect(self, kind: TokenType, what: str) -> Token:
        token = self.peek()
        if token is None or token.token_type != kind:
            raise self.error(f"expected {what}")
        self.i += 1
        return token

    def name(self, what: str) -> str:
        token = self.peek()
        if token is None or token.token_type in (
            TokenType.L_PAREN,
            TokenType.R_PAREN,
            TokenType.COMMA,
            TokenType.STRING,
            TokenType.NUMBER,
            TokenType.EQ,
        ):
            raise self.error(f"expected {what}")
        self.i += 1
        return token.text if token.token_type == TokenType.IDENTIFIER else token.text.lower()

    def end(self) -> None:
        if self.peek() is not None:
            raise self.error("unexpected text after the statement")

    # -- statements --------------------------------------------------------------------

    def statement(self) -> StreamStatement:
        if self.word("SHOW"):
            if self.word("STREAM"):
                self.expect_word("READERS")
                name = self.stream_name() if self.peek() is not None else None
                self.end()
                return ShowStreamReaders(name)
            self.expect_word("STREAMS")
            self.end()
            return ShowStreams()
        if self.word("DROP"):
            self.expect_word("STREAM")
            if_exists = self.word("IF")
            if if_exists:
                self.expect_word("EXISTS")
            name = self.stream_name()
            self.end()
            return DropStream(name, if_exists)
        self.expect_word("CREATE")
        self.expect_word("STREAM")
        if_not_exists = self.word("IF")
        if if_not_exists:
            self.expect_word("NOT")
            self.expect_word("EXISTS")
        name = self.stream_name()
        create = CreateStream(name, [], [], if_not_exists=if_not_exists)
        self.columns(create)
        if self.word("WITH"):
            self.options(create)
        self.end()
        return create

    def stream_name(self) -> str:
        token = self.peek()
        name = self.name("a stream name")
        if not is_stream_name(name):
            raise self.error(NAME_RULE, token)
        return name

    def columns(self, create: CreateStream) -> None:
        self.expect(TokenType.L_PAREN, "'(' and the stream's columns")
        seen: set[str] = set()
        while True:
            token = self.peek()
            column = self.name("a column name")
            if column.lower() in seen:
                raise self.error(f"column {column!r} appears twice", token)
            if column.lower() in RESERVED_COLUMNS:
                raise self.error(f"column name {column!r} is reserved for sequence numbers", token)
            seen.add(column.lower())
            create.columns.append((column, self.type_text(create)))
            if self.peek() is not None and self.peek().token_type == TokenType.COMMA:
                self.i += 1
                continue
            self.expect(TokenType.R_PAREN, "',' or ')'")
            return

    def type_text(self, create: CreateStream) -> str:
        """The type as written: tokens up to the next ',' or ')' outside parentheses."""
        first = self.peek()
        depth = 0
        last = None
        while (token := self.peek()) is not None:
            if token.token_type == TokenType.L_PAREN:
                depth += 1
            elif token.token_type == TokenType.R_PAREN:
                if depth == 0:
                    break
                depth -= 1
            elif token.token_type == TokenType.COMMA and depth == 0:
                break
            last = token
            self.i += 1
        if first is None or last is None:
            raise self.error("expected a column type")
        create.type_offsets.append(first.start)
        return self.sql[first.start : last.end + 1]

    def options(self, create: CreateStream) -> None:
        self.expect(TokenType.L_PAREN, "'(' and stream options")
        keys: dict[str, Token] = {}
        while True:
            token = self.peek()
            key = self.name("an option name").lower()
            if key not in OPTIONS:
                raise self.error(
                    f"unknown stream option {key!r}; known: {', '.join(OPTIONS)}", token
                )
            if key in keys:  # which one would count is a guess; say so instead
                raise self.error(f"{key} is given twice", token)
            keys[key] = token
            self.expect(TokenType.EQ, "'='")
            value_token = self.peek()
            if value_token is None:
                raise self.error("expected an option value")
            self.i += 1
            create.options[key] = self.option_value(key, value_token)
            if self.peek() is not None and self.peek().token_type == TokenType.COMMA:
                self.i += 1
                continue
            self.expect(TokenType.R_PAREN, "',' or ')'")
            break
        if "max_spill" in keys and create.options.get("on_full") != "spill":
            raise self.error(
                "max_spill bounds the spill files of an on_full = 'spill' stream; "
                "this stream blocks when full and never spills",
                keys["max_spill"],
            )

    def option_value(self, key: str, token: Token) -> object:
        text = token.text
        if key == "max_spill":
            return self.spill_value(token)
        if key == "capacity":
            if (
                token.token_type != TokenType.NUMBER
                or not re.fullmatch(r"[0-9]{1,12}", text)
                or not is_capacity(int(text))
            ):
                raise self.error(f"{CAPACITY_RULE}, got {text}", token)
            return int(text)
        if token.token_type not in (TokenType.STRING, TokenType.VAR, TokenType.IDENTIFIER):
            raise self.error(f"{key} takes a quoted string", token)
        if key == "on_full":
            if text.lower() not in ON_FULL:
                raise self.error(f"on_full is {' or '.join(map(repr, ON_FULL))}", token)
            return text.lower()
        if not text.strip():
            raise self.error(f"{key} must not be empty", token)
        return text

    def spill_value(self, token: Token) -> int:
        """``max_spill``'s bytes: a number, optionally followed by a unit (``512 MiB``), or a
        quoted size (``'2 GB'``); an error points at the value and gives the range."""
        text = token.text
        if token.token_type == TokenType.NUMBER:
            unit = self.peek()
            if (
                unit is not None
                and unit.token_type == TokenType.VAR
                and unit.text.lower() in SIZE_UNITS
            ):
                self.i += 1
                text = f"{text} {unit.text}"
        elif token.token_type != TokenType.STRING:
            raise self.error(f"max_spill takes a number of bytes; {MAX_SPILL_RULE}", token)
        try:
            return spill_limit(text)
        except ValueError as exc:
            raise self.error(str(exc), token) from None
