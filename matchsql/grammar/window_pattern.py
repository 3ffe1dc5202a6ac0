"""Row pattern recognition in the WINDOW clause (SQL:2016 R020), as Trino documents it.

``WINDOW w AS (PARTITION BY .. ORDER BY .. MEASURES .. ROWS BETWEEN CURRENT ROW
AND .. [AFTER MATCH SKIP ..] [INITIAL | SEEK] PATTERN (..) [SUBSET ..] DEFINE ..)``
parses into a :class:`PatternWindow`; ``m OVER w`` (a measure called over the
window) parses into sqlglot's ``exp.Window(this=Column(m), alias=w)``. The
clauses shared with MATCH_RECOGNIZE are read by the same parser methods, so a
window's MEASURES, PATTERN and DEFINE have exactly MATCH_RECOGNIZE's shapes (see
:mod:`matchsql.grammar.dialect`). What the standard forbids in a window (a frame
other than ``ROWS BETWEEN CURRENT ROW AND ..``, ``ONE/ALL ROWS PER MATCH``) is
refused here, where the tokens are; the rest is checked by
:mod:`matchsql.session.window_measures` against the input.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from matchsql.errors import SemanticError

__all__ = ["PatternWindow", "WindowPatternParser", "patternwindow_sql"]

# Words at the window's top level that make it a row pattern window.
_PATTERN_WORDS = frozenset(("MEASURES", "PATTERN"))


class PatternWindow(exp.Expression):
    """A named window with row pattern recognition.

    ``this``: the window name (Identifier); ``partition_by``, ``order``,
    ``measures``, ``after``, ``after_var``, ``initial``, ``pattern``,
    ``subsets``, ``define``: as on :class:`~matchsql.grammar.nodes.MatchRecognizeTable`;
    ``end``: the frame end, ``CURRENT ROW``, ``UNBOUNDED`` or an expression
    (``n FOLLOWING``).
    """

    arg_types = {
        "this": True,
        "partition_by": False,
        "order": False,
        "measures": False,
        "end": True,
        "after": False,
        "after_var": False,
        "initial": False,
        "pattern": True,
        "subsets": False,
        "define": False,
    }


if t.TYPE_CHECKING:
    from sqlglot.parser import Parser

    class _Host(Parser):
        """What the mixin uses of the class it is mixed into: sqlglot's parser and the
        MATCH_RECOGNIZE clause parsers of :class:`matchsql.grammar.dialect.MatchSQLParser`."""

        sql: str

        def _enter_mr(self) -> None:
            raise NotImplementedError

        def _leave_mr(self) -> None:
            raise NotImplementedError

        def _parse_skip(self, node: t.Any) -> None:
            raise NotImplementedError

        def _parse_row_pattern(self) -> exp.Expression:
            raise NotImplementedError

        def _parse_measure(self) -> exp.Expression:
            raise NotImplementedError

        def _parse_subset(self) -> exp.Expression:
            raise NotImplementedError

        def _parse_defines(self) -> list[t.Any]:
            raise NotImplementedError

else:
    _Host = object


class WindowPatternParser(_Host):
    """Parser mixin of the matchsql dialect: named windows with row pattern recognition
    and measure calls ``m OVER w``. Relies on the MATCH_RECOGNIZE clause parsers of
    the class it is mixed into."""

    def _parse_column(self) -> exp.Expr | None:
        this = super()._parse_column()
        # ``measure OVER w``: a bare name called over a window (DuckDB knows no such form).
        if (
            isinstance(this, exp.Column)
            and self._curr is not None
            and self._curr.token_type == TokenType.OVER
            and not getattr(self, "_mr_depth", 0)
        ):
            return self._parse_window(this)
        return this

    def _parse_window(self, this: exp.Expr | None, alias: bool = False) -> exp.Expr | None:
        token = self._curr
        if (
            not alias
            and token is not None
            and token.token_type == TokenType.OVER
            and self._is_pattern_window(1)
        ):
            raise SemanticError(
                "row pattern recognition in an OVER clause is not supported: define the "
                "window in the WINDOW clause and call its measures as m OVER w",
                sql=self.sql,
                offset=token.start,
            )
        return super()._parse_window(this, alias)

    def _parse_named_window(self) -> exp.Expr | None:
        index = self._index
        name = self._parse_id_var()
        if name is None or not self._match(TokenType.ALIAS) or not self._is_pattern_window():
            self._retreat(index)
            return super()._parse_named_window()
        start = self._curr
        self._advance()
        node = PatternWindow(this=name)
        node.update_positions(start)
        partition, order = self._parse_partition_and_order()
        if partition:
            node.set("partition_by", partition)
        if order is not None:
            node.set("order", order)
        self._enter_mr()
        try:
            self._parse_window_pattern_clauses(node)
        finally:
            self._leave_mr()
        if not self._match(TokenType.R_PAREN):
            self.raise_error("Expecting ) to close the window with row pattern recognition")
        return node

    def _is_pattern_window(self, ahead: int = 0) -> bool:
        """True when the parenthesised window ``ahead`` tokens on names MEASURES or PATTERN
        at its top level."""
        tokens = self._tokens[self._index + ahead :]
        if not tokens or tokens[0].token_type != TokenType.L_PAREN:
            return False
        depth = 0
        for i, token in enumerate(tokens):
            if token.token_type == TokenType.L_PAREN:
                depth += 1
            elif token.token_type == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    return False
            elif (
                depth == 1
                and token.text.upper() in _PATTERN_WORDS
                and i + 1 < len(tokens)
                and _starts_clause(tokens[i - 1], tokens[i + 1])
            ):
                return True
        return False

    def _parse_window_pattern_clauses(self, node: PatternWindow) -> None:
        match_seq = self._match_text_seq
        if match_seq("MEASURES"):
            node.set("measures", self._parse_csv(self._parse_measure))
        self._refuse_rows_per_match()
        node.set("end", self._parse_pattern_frame())
        self._refuse_rows_per_match()
        if match_seq("AFTER", "MATCH", "SKIP"):
            self._parse_skip(node)
        if match_seq("INITIAL"):
            node.set("initial", True)
        elif match_seq("SEEK"):
            node.set("initial", False)
        if not match_seq("PATTERN"):
            self.raise_error("Expecting PATTERN in the window with row pattern recognition")
        node.set("pattern", self._parse_row_pattern())
        if match_seq("SUBSET"):
            node.set("subsets", self._parse_csv(self._parse_subset))
        if match_seq("DEFINE"):
            node.set("define", self._parse_defines())

    def _refuse_rows_per_match(self) -> None:
        token = self._curr
        if token is None:
            return
        words = [tok.text.upper() for tok in self._tokens[self._index : self._index + 4]]
        if words[:1] in (["ONE"], ["ALL"]) and words[2:4] == ["PER", "MATCH"]:
            raise SemanticError(
                f"{' '.join(words)} is not allowed in a window: a window with row pattern "
                "recognition gives one row for every input row",
                sql=self.sql,
                offset=token.start,
            )

    def _parse_pattern_frame(self) -> str | exp.Expr:
        """The frame end of ``ROWS BETWEEN CURRENT ROW AND <end>``, the only frame allowed."""
        token = self._curr
        if token is None or token.text.upper() not in ("ROWS", "RANGE", "GROUPS"):
            raise SemanticError(
                "a window with row pattern recognition needs the frame "
                "ROWS BETWEEN CURRENT ROW AND ...",
                sql=self.sql,
                offset=token.start if token is not None else len(self.sql.rstrip()),
            )
        kind = token.text.upper()
        self._advance()
        between = self._match(TokenType.BETWEEN)
        start = self._parse_window_spec()
        end = self._parse_window_spec() if self._match(TokenType.AND) else None
        if kind != "ROWS" or not between or start["value"] != "CURRENT ROW" or end is None:
            raise SemanticError(
                f"the frame of a window with row pattern recognition must be ROWS BETWEEN "
                f"CURRENT ROW AND ..., not {kind} {'BETWEEN ' if between else ''}"
                f"{_bound_sql(start)}",
                sql=self.sql,
                offset=token.start,
            )
        value, side = end["value"], end["side"]
        following = isinstance(side, str) and side.upper() == "FOLLOWING"
        if value == "CURRENT ROW" and side is None:
            result: str | exp.Expr = "CURRENT ROW"
        elif value == "UNBOUNDED" and following:
            result = "UNBOUNDED"
        elif isinstance(value, exp.Expr) and following:
            result = value
        else:
            raise SemanticError(
                "the frame of a window with row pattern recognition must end at CURRENT ROW, "
                f"n FOLLOWING or UNBOUNDED FOLLOWING, not {_bound_sql(end)}",
                sql=self.sql,
                offset=token.start,
            )
        if self._match_text_seq("EXCLUDE"):
            where = self._prev
            if not self._match_text_seq("NO", "OTHERS"):
                raise SemanticError(
                    "the only frame exclusion allowed with row pattern recognition is "
                    "EXCLUDE NO OTHERS",
                    sql=self.sql,
                    offset=where.start,
                )
        return result


def _starts_clause(before: Token, after: Token) -> bool:
    """Whether MEASURES or PATTERN between ``before`` and ``after`` is the clause, not a
    column of that name (``ORDER BY pattern``, ``PARTITION BY a, measures``)."""
    if before.token_type in (TokenType.ORDER_BY, TokenType.PARTITION_BY, TokenType.COMMA):
        return False
    return after.token_type not in (TokenType.R_PAREN, TokenType.COMMA)


def _bound_sql(bound: dict) -> str:
    value = bound["value"]
    text = value.sql(dialect="duckdb") if isinstance(value, exp.Expr) else str(value)
    return f"{text} {bound['side']}" if bound.get("side") else text


def patternwindow_sql(generator: t.Any, node: PatternWindow) -> str:
    """``w AS (...)`` in the standard clause order (the generator of the dialect)."""
    parts: list[str] = []
    if node.args.get("partition_by"):
        parts.append("PARTITION BY " + generator.expressions(node, "partition_by", flat=True))
    if node.args.get("order"):
        parts.append("ORDER BY " + generator.expressions(node.args["order"], flat=True))
    if node.args.get("measures"):
        parts.append("MEASURES " + generator.expressions(node, "measures", flat=True))
    end = node.args["end"]
    end_sql = (
        end
        if end == "CURRENT ROW"
        else "UNBOUNDED FOLLOWING"
        if end == "UNBOUNDED"
        else f"{generator.sql(end)} FOLLOWING"
    )
    parts.append(f"ROWS BETWEEN CURRENT ROW AND {end_sql}")
    after = node.args.get("after")
    if after:
        var = node.args.get("after_var")
        parts.append("AFTER MATCH SKIP " + after + (f" {generator.sql(var)}" if var else ""))
    initial = node.args.get("initial")
    if initial is not None:
        parts.append("INITIAL" if initial else "SEEK")
    parts.append(generator.sql(node, "pattern"))
    if node.args.get("subsets"):
        parts.append("SUBSET " + generator.expressions(node, "subsets", flat=True))
    if node.args.get("define"):
        parts.append("DEFINE " + generator.expressions(node, "define", flat=True))
    return f"{generator.sql(node, 'this')} AS ({' '.join(parts)})"
