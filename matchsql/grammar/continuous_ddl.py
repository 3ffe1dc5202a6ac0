"""The nodes of the named continuous queries' statements, and the rules of their options
(their execution: :mod:`matchsql.session.continuous_queries`).

    CREATE CONTINUOUS QUERY [IF NOT EXISTS] name
        [WITH (checkpoint_interval = <seconds>, checkpoint_rows = <tuples>)]
        AS INSERT INTO sink [(columns)] SELECT ... FROM stream MATCH_RECOGNIZE (...) ...
    RESUME CONTINUOUS QUERY name
    STOP CONTINUOUS QUERY name
    DROP CONTINUOUS QUERY [IF EXISTS] name
    SHOW CONTINUOUS QUERIES

Like the stream statements these are recognised by their first words and
read by the matchsql dialect's parser (:mod:`matchsql.grammar.ddl_parser`);
the body after ``AS`` is kept as text (with its offset, so errors in it point
into the whole statement) and analysed when the query is created. The option
rules live here because the Python API checks the same values.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from sqlglot import exp

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
    """Whether ``name`` is a valid continuous query name (:data:`NAME_RULE`)."""
    return _QUERY_NAME.match(name) is not None


class CreateContinuousQuery(exp.Expression):
    """``CREATE CONTINUOUS QUERY``: ``this`` the name; ``body`` the INSERT statement after
    AS, as written, and ``body_offset`` where it starts in the statement; ``options``
    ``(key, value)`` pairs (a tuple: sqlglot hashes a node by its arguments)."""

    arg_types = {
        "this": True,
        "body": True,
        "body_offset": True,
        "options": False,
        "if_not_exists": False,
    }

    @property
    def body(self) -> str:
        return self.args["body"]

    @property
    def body_offset(self) -> int:
        return self.args["body_offset"]

    @property
    def options(self) -> dict[str, float]:
        return dict(self.args.get("options") or ())

    @property
    def if_not_exists(self) -> bool:
        return bool(self.args.get("if_not_exists"))


class ContinuousQueryAction(exp.Expression):
    """RESUME, STOP or DROP of one query: ``this`` its name, ``action`` resume, stop or drop."""

    arg_types = {"this": True, "action": True, "if_exists": False}

    @property
    def action(self) -> str:
        return self.args["action"]

    @property
    def if_exists(self) -> bool:
        return bool(self.args.get("if_exists"))


class ShowContinuousQueries(exp.Expression):
    """``SHOW CONTINUOUS QUERIES``."""

    arg_types = {}


ContinuousStatement = CreateContinuousQuery | ContinuousQueryAction | ShowContinuousQueries
