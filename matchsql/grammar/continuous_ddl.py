"""Statements of named continuous queries (their execution: :mod:`matchsql.session.continuous`).

    CREATE CONTINUOUS QUERY [IF NOT EXISTS] name
        [WITH (checkpoint_interval = <seconds>, checkpoint_rows = <tuples>)]
        AS INSERT INTO sink [(columns)] SELECT ... FROM stream MATCH_RECOGNIZE (...) ...
    RESUME CONTINUOUS QUERY name
    STOP CONTINUOUS QUERY name
    DROP CONTINUOUS QUERY [IF EXISTS] name
    SHOW CONTINUOUS QUERIES

Like the stream statements these are recognised by their first words and
parsed over the matchsql tokenizer; the body after ``AS`` is kept as text
(with its offset, so errors in it point into the whole statement) and
analysed when the query is created.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from sqlglot.tokens import TokenType

from matchsql.grammar.stream_ddl import _Parser

OPTIONS = ("checkpoint_interval", "checkpoint_rows")
#: Each option is 0 (none) or within (lowest, highest); a checkpoint more often than every
#: millisecond or rarer than every 11 days, or past 10^12 tuples, is a typo, not a plan.
OPTION_RANGES: dict[str, tuple[Decimal, Decimal]] = {
    "checkpoint_interval": (Decimal("0.001"), Decimal(1_000_000)),
    "checkpoint_rows": (Decimal(1), Decimal(10**12)),
}


def option_rule(key: str) -> str:
    """What ``key`` accepts, in the words its errors use."""
    low, high = OPTION_RANGES[key]
    if key == "checkpoint_rows":
        return f"0 (none) or a whole number of tuples from {low:,} to {high:,}"
    return f"0 (none) or a number of seconds from {low} to {high:,}"


def check_option(key: str, value: object) -> float | int:
    """``value`` (a number, or its SQL text) if ``key`` accepts it; ValueError with the rule.

    Compared as a decimal, so that ``1e-400`` is not taken for 0 (which would turn
    checkpoints off) nor ``1e400`` for infinity.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(option_rule(key))
    try:
        number = Decimal(value.strip() if isinstance(value, str) else repr(value))
    except InvalidOperation:
        raise ValueError(option_rule(key)) from None
    low, high = OPTION_RANGES[key]
    whole = key == "checkpoint_rows"
    if (
        not number.is_finite()
        or (number != 0 and not low <= number <= high)
        or (whole and number != number.to_integral_value())
    ):
        raise ValueError(option_rule(key))
    return int(number) if whole else float(number)


_QUERY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
NAME_RULE = "a continuous query name is a letter or '_' followed by up to 62 letters, digits or '_'"


def valid_name(name: str) -> bool:
    return _QUERY_NAME.match(name) is not None


@dataclass
class CreateContinuousQuery:
    name: str
    body: str  # the INSERT statement after AS
    body_offset: int  # where the body starts in the statement
    options: dict[str, float] = field(default_factory=dict)
    if_not_exists: bool = False


@dataclass
class ContinuousQueryAction:
    """RESUME, STOP or DROP of one query."""

    action: str  # resume | stop | drop
    name: str
    if_exists: bool = False


@dataclass
class ShowContinuousQueries:
    pass


ContinuousStatement = CreateContinuousQuery | ContinuousQueryAction | ShowContinuousQueries


def parse_continuous_statement(sql: str) -> ContinuousStatement:
    """Parse one continuous-query statement (classified by matchsql.session.statements)."""
    return _ContinuousParser(sql).continuous()


class _ContinuousParser(_Parser):
    def continuous(self) -> ContinuousStatement:
        if self.word("SHOW"):
            self.expect_word("CONTINUOUS")
            self.expect_word("QUERIES")
            self.end()
            return ShowContinuousQueries()
        for action in ("RESUME", "STOP", "DROP"):
            if self.word(action):
                self.expect_word("CONTINUOUS")
                self.expect_word("QUERY")
                if_exists = action == "DROP" and self.word("IF")
                if if_exists:
                    self.expect_word("EXISTS")
                name = self.query_name()
                self.end()
                return ContinuousQueryAction(action.lower(), name, if_exists)
        self.expect_word("CREATE")
        self.expect_word("CONTINUOUS")
        self.expect_word("QUERY")
        if_not_exists = self.word("IF")
        if if_not_exists:
            self.expect_word("NOT")
            self.expect_word("EXISTS")
        name = self.query_name()
        options = self.cq_options() if self.word("WITH") else {}
        as_token = self.peek()
        if not self.word("AS"):
            raise self.error("expected AS and the query's INSERT INTO ... SELECT statement")
        body = self.peek()
        if body is None or body.text.upper() != "INSERT":
            raise self.error(
                "a continuous query is INSERT INTO <table> SELECT ... FROM "
                "<stream> MATCH_RECOGNIZE (...)",
                body,
            )
        start = as_token.end + 1 if as_token is not None else 0
        return CreateContinuousQuery(name, self.sql[start:], start, options, if_not_exists)

    def query_name(self) -> str:
        token = self.peek()
        name = self.name("a continuous query name")
        if not valid_name(name):
            raise self.error(NAME_RULE, token)
        return name

    def cq_options(self) -> dict[str, float]:
        self.expect(TokenType.L_PAREN, "'(' and continuous query options")
        options: dict[str, float] = {}
        while True:
            token = self.peek()
            key = self.name("an option name").lower()
            if key not in OPTIONS:
                raise self.error(
                    f"unknown continuous query option {key!r}; known: {', '.join(OPTIONS)}", token
                )
            if key in options:
                raise self.error(f"{key} is given twice", token)
            self.expect(TokenType.EQ, "'='")
            value = self.peek()
            if value is None or value.token_type != TokenType.NUMBER:
                raise self.error(
                    f"{key} is a number ({'seconds' if 'interval' in key else 'tuples'}"
                    ", 0 for none)",
                    value,
                )
            self.i += 1
            try:
                options[key] = check_option(key, value.text)
            except ValueError as rule:
                raise self.error(f"{key} must be {rule}, got {value.text}", value) from None
            if self.peek() is not None and self.peek().token_type == TokenType.COMMA:
                self.i += 1
                continue
            self.expect(TokenType.R_PAREN, "',' or ')'")
            return options
