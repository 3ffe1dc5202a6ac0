"""The ``matchsql`` sqlglot dialect: DuckDB plus ``MATCH_RECOGNIZE`` table factors.

sqlglot's base parser treats ``MATCH_RECOGNIZE`` as a SELECT modifier and
keeps PATTERN as raw text; matchsql needs it as a table factor (so it can sit
in joins, subqueries and CTEs, several per statement) with a real pattern
AST. The parser below therefore removes the modifier and instead wraps any
table factor followed by ``MATCH_RECOGNIZE ( ... )`` in a
:class:`~matchsql.grammar.nodes.MatchRecognizeTable`.

Argument shapes of the node, as produced here:

* ``partition_by``: list of expressions; ``order``: ``exp.Order`` whose
  ``expressions`` are ``exp.Ordered`` (sqlglot's own shape for ORDER BY).
* ``measures``: list of ``MeasureDef(this=expr, alias=Identifier)``.
* ``rows``: ``ONE``, ``ALL SHOW``, ``ALL OMIT``, ``ALL WITH UNMATCHED`` or
  None when the clause is absent (ONE ROW PER MATCH is the default).
* ``after``: ``PAST LAST ROW``, ``TO NEXT ROW``, ``TO FIRST``, ``TO LAST``,
  ``TO`` or None; ``after_var``: ``Identifier`` of the variable.
* ``initial``: True (INITIAL), False (SEEK) or None (absent, means INITIAL).
* ``pattern``: ``RowPattern(this=PatternNode)``; ``within``: an expression.
* ``subsets``: list of ``SubsetDef(this=Identifier, expressions=[Identifier])``.
* ``define``: list of ``VariableDef(this=Identifier, expression=condition)``.
* ``all_matches``: True or None; ``match_mode``: ``MAXIMAL``/``INCREMENTAL``/None.
* ``alias``: ``exp.TableAlias``.

Variable names (identifiers above, column qualifiers, CLASSIFIER arguments)
are upper-cased unless quoted.

DejaVu spellings accepted on top of the standard: ``MATCH_NUMBER`` and
``CLASSIFIER`` without parentheses, ``ALL MATCHES``, ``MAXIMAL MATCH``,
``INCREMENTAL MATCH``, ``ONE ROW``/``ALL ROW`` (singular) ``PER MATCH``,
DEFINE entries without separating commas, and the clauses between MEASURES
and PATTERN in any order. Flink's ``WITHIN <interval>`` after PATTERN is
accepted too. The generator always writes the standard spelling, in the
standard clause order.
"""

from __future__ import annotations

import typing as t
from collections.abc import Iterator

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ErrorLevel, TokenError
from sqlglot.generators.duckdb import DuckDBGenerator
from sqlglot.parsers.duckdb import DuckDBParser
from sqlglot.tokens import Token, TokenType
from sqlglot.trie import new_trie

from matchsql.errors import SemanticError
from matchsql.grammar.ddl_parser import DdlParser
from matchsql.grammar.nodes import (
    FROM_TEXT,
    MatchRecognizeTable,
    MeasureDef,
    RowPattern,
    SubsetDef,
    VariableDef,
)
from matchsql.grammar.pattern_parser import parse_pattern
from matchsql.grammar.sqltext import pattern_body_end
from matchsql.grammar.window_pattern import PatternWindow, WindowPatternParser, patternwindow_sql
from matchsql.plan.row_functions import Classifier, MatchNumber, Navigation, PatternSemantics

__all__ = ["MatchSQL", "variable_identifier", "variable_sql"]

ROWS_TEXT = {
    "ONE": "ONE ROW PER MATCH",
    "ALL SHOW": "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
    "ALL OMIT": "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
    "ALL WITH UNMATCHED": "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
}

# Words that start the clauses which may follow AFTER MATCH SKIP.
CLAUSE_WORDS = frozenset(
    ("PATTERN", "INITIAL", "SEEK", "MEASURES", "ONE", "ALL", "MAXIMAL", "INCREMENTAL")
)


def variable_identifier(ident: exp.Identifier) -> exp.Identifier:
    """Normalise a pattern variable identifier: upper-case unless quoted."""
    if ident.quoted:
        return ident
    out = exp.Identifier(this=ident.name.upper(), quoted=False)
    out.meta.update(ident.meta)
    return out


def variable_sql(name: str) -> str:
    """Render a normalised variable name so that it parses back to ``name``."""
    if name.isidentifier() and name.upper() == name:
        return name
    return '"' + name.replace('"', '""') + '"'


class MatchSQLParser(DdlParser, WindowPatternParser, DuckDBParser):
    """DuckDB's parser plus MATCH_RECOGNIZE table factors, row pattern windows and the
    stream and continuous query statements (:mod:`matchsql.grammar.ddl_parser`)."""

    STATEMENT_PARSERS: t.ClassVar = {
        **DuckDBParser.STATEMENT_PARSERS,
        TokenType.CREATE: lambda self: self._parse_create_ddl(),
        TokenType.DROP: lambda self: self._parse_drop_ddl(),
    }
    SHOW_PARSERS: t.ClassVar = {**DuckDBParser.SHOW_PARSERS, **DdlParser.DDL_SHOW_PARSERS}
    SHOW_TRIE: t.ClassVar = new_trie(key.split(" ") for key in SHOW_PARSERS)

    QUERY_MODIFIER_PARSERS: t.ClassVar = {
        key: value
        for key, value in DuckDBParser.QUERY_MODIFIER_PARSERS.items()
        if key != TokenType.MATCH_RECOGNIZE
    }
    QUERY_MODIFIER_TOKENS: t.ClassVar = set(QUERY_MODIFIER_PARSERS)

    # Parsers only active between MATCH_RECOGNIZE's parentheses, so that a
    # column called ``final`` or a user function ``prev`` elsewhere is untouched.
    MR_FUNCTION_PARSERS: t.ClassVar = {
        "PREV": lambda self: self._parse_navigation("PREV"),
        "NEXT": lambda self: self._parse_navigation("NEXT"),
        "FIRST": lambda self: self._parse_navigation("FIRST"),
        "LAST": lambda self: self._parse_navigation("LAST"),
        "CLASSIFIER": lambda self: self._parse_classifier(),
        "MATCH_NUMBER": lambda self: self._parse_match_number(),
    }
    MR_NO_PAREN_FUNCTION_PARSERS: t.ClassVar = {
        "RUNNING": lambda self: self._parse_semantics(final=False),
        "FINAL": lambda self: self._parse_semantics(final=True),
    }

    last_error_token: Token | None = None

    def raise_error(self, message: str, token: Token | None = None) -> None:
        # Remember where the error is so matchsql can report an exact offset.
        if token is None or token.token_type == TokenType.SENTINEL:
            token = self._curr
        if token is not None and token.token_type == TokenType.SENTINEL:
            token = None  # at the end of the text
        self.last_error_token = token
        super().raise_error(message, token)

    # -- table factors -----------------------------------------------------

    def _parse_table(self, *args: t.Any, **kwargs: t.Any) -> exp.Expr | None:
        this = super()._parse_table(*args, **kwargs)
        while this is not None and self._match(TokenType.MATCH_RECOGNIZE):
            this = self._parse_match_recognize_body(this)
        return this

    def _parse_match_recognize_body(self, this: exp.Expr) -> MatchRecognizeTable:
        start = self._prev
        if not self._match(TokenType.L_PAREN):
            self.raise_error("Expecting ( after MATCH_RECOGNIZE")
        node = MatchRecognizeTable(this=this)
        node.update_positions(start)
        node.meta[FROM_TEXT] = True
        # PARTITION BY and ORDER BY name input columns: PREV, RUNNING, CLASSIFIER
        # and friends mean nothing there, so they are parsed as plain SQL.
        self._parse_mr_keys(node)
        self._enter_mr()
        try:
            self._parse_mr_clauses(node)
        finally:
            self._leave_mr()
        if not self._match(TokenType.R_PAREN):
            self.raise_error("Expecting ) to close MATCH_RECOGNIZE")
        alias = self._parse_table_alias(alias_tokens=self.TABLE_ALIAS_TOKENS)
        if alias:
            node.set("alias", alias)
        return node

    def _enter_mr(self) -> None:
        depth = getattr(self, "_mr_depth", 0)
        if depth == 0:
            # This parser's own tables while inside MATCH_RECOGNIZE, over the class's (which
            # every parser shares); _leave_mr deletes them again.
            self.FUNCTION_PARSERS = {  # type: ignore[misc]
                **type(self).FUNCTION_PARSERS,
                **self.MR_FUNCTION_PARSERS,
            }
            self.NO_PAREN_FUNCTION_PARSERS = {  # type: ignore[misc]
                **type(self).NO_PAREN_FUNCTION_PARSERS,
                **self.MR_NO_PAREN_FUNCTION_PARSERS,
            }
        self._mr_depth = depth + 1

    def _leave_mr(self) -> None:
        self._mr_depth -= 1
        if self._mr_depth == 0:
            del self.FUNCTION_PARSERS
            del self.NO_PAREN_FUNCTION_PARSERS

    def _parse_mr_keys(self, node: MatchRecognizeTable) -> None:
        if self._match(TokenType.PARTITION_BY):
            node.set("partition_by", self._parse_csv(self._parse_assignment))
        if self._match(TokenType.ORDER_BY):
            order = exp.Order(expressions=self._parse_csv(self._parse_ordered))
            order.update_positions(self._prev)
            node.set("order", order)

    def _parse_mr_clauses(self, node: MatchRecognizeTable) -> None:
        seen: set[str] = set()

        def once(clause: str, token: Token) -> None:
            if clause in seen:
                self.raise_error(f"Duplicate {clause} clause in MATCH_RECOGNIZE", token)
            seen.add(clause)

        while True:
            token = self._curr
            if self._match_text_seq("MEASURES"):
                once("MEASURES", token)
                node.set("measures", self._parse_csv(self._parse_measure))
            elif self._match_text_seq("ONE", "ROW", "PER", "MATCH") or self._match_text_seq(
                "ONE", "ROWS", "PER", "MATCH"
            ):
                once("ROWS PER MATCH", token)
                node.set("rows", "ONE")
            elif self._match_text_seq("ALL", "ROWS", "PER", "MATCH") or self._match_text_seq(
                "ALL", "ROW", "PER", "MATCH"
            ):
                once("ROWS PER MATCH", token)
                node.set("rows", self._parse_all_rows_option())
            elif self._match_text_seq("ALL", "MATCHES"):
                once("ALL MATCHES", token)
                node.set("all_matches", True)
            elif self._match_text_seq("MAXIMAL", "MATCH") or self._match_text_seq(
                "INCREMENTAL", "MATCH"
            ):
                once("MAXIMAL/INCREMENTAL MATCH", token)
                node.set("match_mode", token.text.upper())
            elif self._match_text_seq("AFTER", "MATCH", "SKIP"):
                once("AFTER MATCH SKIP", token)
                self._parse_skip(node)
            else:
                break

        if self._match_text_seq("INITIAL"):
            node.set("initial", True)
        elif self._match_text_seq("SEEK"):
            node.set("initial", False)

        if not self._match_text_seq("PATTERN"):
            self.raise_error("Expecting PATTERN (or another MATCH_RECOGNIZE clause)")
        node.set("pattern", self._parse_row_pattern())

        if self._match_text_seq("WITHIN"):
            start = self._curr
            within = self._parse_bitwise()
            if within is None:
                self.raise_error("Expecting a time bound after WITHIN")
            elif not within._meta or "start" not in within._meta:
                within.update_positions(start)  # so errors can point at INTERVAL
            node.set("within", within)
        if self._match_text_seq("SUBSET"):
            node.set("subsets", self._parse_csv(self._parse_subset))
        if self._match_text_seq("DEFINE"):
            node.set("define", self._parse_defines())

    def _parse_all_rows_option(self) -> str:
        if self._match_text_seq("SHOW", "EMPTY", "MATCHES"):
            return "ALL SHOW"
        if self._match_text_seq("OMIT", "EMPTY", "MATCHES"):
            return "ALL OMIT"
        if self._match_text_seq("WITH", "UNMATCHED", "ROWS"):
            return "ALL WITH UNMATCHED"
        return "ALL SHOW"

    def _parse_skip(self, node: MatchRecognizeTable) -> None:
        if self._match_text_seq("PAST", "LAST", "ROW"):
            node.set("after", "PAST LAST ROW")
            return
        if self._match_text_seq("TO", "NEXT", "ROW"):
            node.set("after", "TO NEXT ROW")
            return
        if not self._match_text_seq("TO"):
            self.raise_error("Expecting PAST LAST ROW or TO after AFTER MATCH SKIP")
        after = "TO"
        if self._curr and self._curr.text.upper() in ("FIRST", "LAST"):
            # ``SKIP TO FIRST`` alone would name a variable called FIRST; only
            # treat it as the keyword when a variable follows.
            nxt = self._next
            if (
                nxt
                and nxt.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
                and (nxt.token_type == TokenType.IDENTIFIER or nxt.text.upper() not in CLAUSE_WORDS)
            ):
                after = f"TO {self._curr.text.upper()}"
                self._advance()
        node.set("after", after)
        node.set("after_var", self._parse_variable_name("after AFTER MATCH SKIP " + after))

    def _parse_variable_name(self, where: str) -> exp.Identifier:
        ident = self._parse_id_var(any_token=True)
        if not isinstance(ident, exp.Identifier) or ident.this in ("(", ")", ","):
            self.raise_error(f"Expecting a pattern variable {where}")
        return variable_identifier(t.cast(exp.Identifier, ident))

    def _parse_row_pattern(self) -> RowPattern:
        open_token = self._curr
        if not self._match(TokenType.L_PAREN):
            self.raise_error("Expecting ( after PATTERN")
        depth = 1
        while self._curr and depth:
            if self._curr.token_type == TokenType.L_PAREN:
                depth += 1
            elif self._curr.token_type == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    break
            self._advance()
        if depth:
            self.raise_error("Expecting ) to close PATTERN", open_token)
        close_token = self._curr
        self._advance()
        begin = open_token.end + 1
        text = self.sql[begin : close_token.start]
        node = RowPattern(this=parse_pattern(text, begin, self.sql))
        node.update_positions(open_token)
        return node

    def _parse_measure(self) -> MeasureDef:
        expr = self._parse_assignment()
        if expr is None:
            self.raise_error("Expecting a measure expression")
        # AS is required (as in Trino): without it ``MEASURES x PATTERN (...)``
        # would read PATTERN as the measure's name.
        alias = self._match(TokenType.ALIAS) and self._parse_id_var(any_token=True)
        if not isinstance(alias, exp.Identifier):
            self.raise_error("Expecting AS name after a measure expression")
        return MeasureDef(this=normalize_expression(t.cast(exp.Expr, expr)), alias=alias)

    def _parse_subset(self) -> SubsetDef:
        name = self._parse_variable_name("in SUBSET")
        if not self._match(TokenType.EQ):
            self.raise_error("Expecting = in SUBSET")
        if not self._match(TokenType.L_PAREN):
            self.raise_error("Expecting ( in SUBSET")
        members = self._parse_csv(lambda: self._parse_variable_name("in SUBSET"))
        if not self._match(TokenType.R_PAREN):
            self.raise_error("Expecting ) to close SUBSET")
        node = SubsetDef(this=name, expressions=members)
        node.update_positions(name)
        return node

    def _parse_defines(self) -> list[VariableDef]:
        defines = [self._parse_define()]
        while True:
            if self._match(TokenType.COMMA):
                defines.append(self._parse_define())
            elif (
                self._curr
                and self._curr.token_type not in (TokenType.R_PAREN, TokenType.L_PAREN)
                and self._next
                and self._next.token_type == TokenType.ALIAS
            ):
                # DejaVu writes DEFINE entries without separating commas.
                defines.append(self._parse_define())
            else:
                return defines

    def _parse_define(self) -> VariableDef:
        name = self._parse_variable_name("in DEFINE")
        if not self._match(TokenType.ALIAS):
            self.raise_error("Expecting AS after the DEFINE variable")
        condition = self._parse_assignment()
        if condition is None:
            self.raise_error("Expecting a condition in DEFINE")
        node = VariableDef(this=name, expression=normalize_expression(t.cast(exp.Expr, condition)))
        node.update_positions(name)
        return node

    # -- functions inside MATCH_RECOGNIZE ----------------------------------

    def _parse_navigation(self, kind: str) -> Navigation:
        token = self._tokens[self._index - 2]
        args = self._parse_csv(self._parse_assignment)
        if not args or len(args) > 2:
            self.raise_error(f"{kind} takes an expression and an optional offset", token)
        offset = _navigation_offset(args[1], kind, self.sql) if len(args) == 2 else None
        node = Navigation(this=args[0], kind=kind, offset=offset)
        node.update_positions(token)
        return node

    def _parse_classifier(self) -> Classifier:
        token = self._tokens[self._index - 2]
        name = None
        if self._curr and self._curr.token_type != TokenType.R_PAREN:
            name = self._parse_variable_name("in CLASSIFIER").name
        node = Classifier(this=name)
        node.update_positions(token)
        return node

    def _parse_match_number(self) -> MatchNumber:
        token = self._tokens[self._index - 2]
        if self._curr and self._curr.token_type != TokenType.R_PAREN:
            self.raise_error("MATCH_NUMBER takes no arguments")
        node = MatchNumber()
        node.update_positions(token)
        return node

    def _parse_semantics(self, final: bool) -> exp.Expr | None:
        token = self._prev
        index = self._index
        inner = None
        if self._curr and self._curr.token_type not in (
            TokenType.COMMA,
            TokenType.R_PAREN,
            TokenType.ALIAS,
        ):
            inner = self._parse_column()
        if inner is None:
            # Not a prefix after all (e.g. a column called ``final``).
            self._retreat(index - 1)
            return None
        node = PatternSemantics(this=inner, final=final)
        node.update_positions(token)
        return node


def _navigation_offset(arg: exp.Expr, kind: str, sql: str) -> int:
    """Offsets must be non-negative integer constants (checked at parse time
    because :class:`Navigation` stores a Python int)."""
    if isinstance(arg, exp.Literal) and not arg.is_string and arg.this.isdigit():
        return int(arg.this)
    raise SemanticError(
        f"the offset of {kind} must be a non-negative integer constant",
        sql=sql,
        offset=first_offset(arg),
    )


def first_offset(node: exp.Expr) -> int | None:
    """Earliest character offset recorded on ``node`` or any descendant."""
    best: int | None = None
    for sub in node.walk():
        meta = sub._meta
        if meta and meta.get("start") is not None:
            start = meta["start"]
            if best is None or start < best:
                best = start
    return best


def normalize_expression(expr: exp.Expr) -> exp.Expr:
    """Bring a DEFINE/MEASURES expression into the shapes of :mod:`nodes`.

    Upper-cases unquoted variable qualifiers, turns DejaVu's bare
    ``MATCH_NUMBER`` / ``CLASSIFIER`` (parsed as columns) into their nodes,
    reads ``count()`` as ``count(*)`` (as Trino does) and DuckDB's ``$$text$$``
    as the string literal it is, so that no later stage meets those forms.
    """

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Count) and node.this is None and not node.expressions:
            node.set("this", exp.Star())
            return node
        if isinstance(node, exp.RawString):  # $$text$$: a plain string in DuckDB
            text = exp.Literal.string(node.this)
            text.meta.update(node.meta)
            return text
        if not isinstance(node, exp.Column):
            return node
        table = node.args.get("table")
        if isinstance(table, exp.Identifier):
            node.set("table", variable_identifier(table))
            return node
        ident = node.this
        if isinstance(ident, exp.Identifier) and not ident.quoted and not node.args.get("db"):
            upper = ident.name.upper()
            if upper in ("MATCH_NUMBER", "CLASSIFIER"):
                repl: exp.Expr = MatchNumber() if upper == "MATCH_NUMBER" else Classifier()
                repl.meta.update(ident.meta)
                return repl
        return node

    return expr.transform(visit, copy=False)


class MatchSQLGenerator(DuckDBGenerator):
    """DuckDB's generator plus the row pattern recognition nodes."""

    # sqlglot only finds ``<key>_sql`` methods for its own classes; ours are
    # registered explicitly.
    TRANSFORMS: t.ClassVar = {
        **DuckDBGenerator.TRANSFORMS,
        MatchRecognizeTable: lambda self, e: self.matchrecognizetable_sql(e),
        RowPattern: lambda self, e: self.rowpattern_sql(e),
        MeasureDef: lambda self, e: self.measuredef_sql(e),
        SubsetDef: lambda self, e: self.subsetdef_sql(e),
        VariableDef: lambda self, e: self.variabledef_sql(e),
        Navigation: lambda self, e: self.navigation_sql(e),
        PatternSemantics: lambda self, e: self.patternsemantics_sql(e),
        Classifier: lambda self, e: self.classifier_sql(e),
        MatchNumber: lambda self, e: self.matchnumber_sql(e),
        PatternWindow: patternwindow_sql,
    }

    def log_sql(self, expression: exp.Log) -> str:
        """``log2(x)`` and ``log10(x)`` as written: sqlglot reads them as ``LOG(2, x)``,
        which DuckDB computes by another formula (its last bit differs)."""
        base = expression.this
        if (
            expression.expression is not None
            and isinstance(base, exp.Literal)
            and not base.is_string
            and base.this in ("2", "10")
        ):
            return self.func(f"LOG{base.this}", expression.expression)
        return super().log_sql(expression)

    def matchrecognizetable_sql(self, expression: MatchRecognizeTable) -> str:
        parts: list[str] = []
        if expression.args.get("partition_by"):
            parts.append("PARTITION BY " + self.expressions(expression, "partition_by", flat=True))
        if expression.args.get("order"):
            parts.append("ORDER BY " + self.expressions(expression.args["order"], flat=True))
        if expression.args.get("measures"):
            parts.append("MEASURES " + self.expressions(expression, "measures", flat=True))
        rows = expression.args.get("rows")
        if rows:
            parts.append(ROWS_TEXT[rows])
        after = expression.args.get("after")
        if after:
            text = "AFTER MATCH SKIP " + after
            var = expression.args.get("after_var")
            if var is not None:
                text += " " + variable_sql(var.name)
            parts.append(text)
        if expression.args.get("all_matches"):
            parts.append("ALL MATCHES")
        if expression.args.get("match_mode"):
            parts.append(f"{expression.args['match_mode']} MATCH")
        initial = expression.args.get("initial")
        if initial is not None:
            parts.append("INITIAL" if initial else "SEEK")
        parts.append(self.sql(expression, "pattern"))
        if expression.args.get("within") is not None:
            parts.append("WITHIN " + self.sql(expression, "within"))
        if expression.args.get("subsets"):
            parts.append("SUBSET " + self.expressions(expression, "subsets", flat=True))
        if expression.args.get("define"):
            parts.append("DEFINE " + self.expressions(expression, "define", flat=True))
        text = f"{self.sql(expression, 'this')} MATCH_RECOGNIZE ({' '.join(parts)})"
        alias = expression.args.get("alias")
        if alias is not None:
            text += " AS " + self.sql(alias)
        return text

    def rowpattern_sql(self, expression: RowPattern) -> str:
        return f"PATTERN ({expression.this.to_sql()})"

    def measuredef_sql(self, expression: MeasureDef) -> str:
        return f"{self.sql(expression, 'this')} AS {self.sql(expression, 'alias')}"

    def subsetdef_sql(self, expression: SubsetDef) -> str:
        members = ", ".join(variable_sql(m.name) for m in expression.expressions)
        return f"{variable_sql(expression.this.name)} = ({members})"

    def variabledef_sql(self, expression: VariableDef) -> str:
        return f"{variable_sql(expression.this.name)} AS {self.sql(expression, 'expression')}"

    def navigation_sql(self, expression: Navigation) -> str:
        offset = expression.args.get("offset")
        suffix = f", {offset}" if offset is not None else ""
        return f"{expression.kind}({self.sql(expression, 'this')}{suffix})"

    def patternsemantics_sql(self, expression: PatternSemantics) -> str:
        word = "FINAL" if expression.final else "RUNNING"
        return f"{word} {self.sql(expression, 'this')}"

    def classifier_sql(self, expression: Classifier) -> str:
        var = expression.variable
        return f"CLASSIFIER({variable_sql(var) if var else ''})"

    def matchnumber_sql(self, expression: MatchNumber) -> str:
        return "MATCH_NUMBER()"


def _pattern_bodies(tokens: list[Token], sql: str) -> Iterator[tuple[int, int]]:
    """``(begin, end)`` of each PATTERN body that ``tokens`` show inside a MATCH_RECOGNIZE.

    Only the tokens up to a PATTERN's ``(`` need to be right, which is what
    makes this usable on the tokens of text whose pattern the SQL rules
    mis-read.
    """
    depth = 0
    bodies: list[int] = []  # paren depth just inside each open MATCH_RECOGNIZE
    for i, token in enumerate(tokens):
        kind = token.token_type
        if kind == TokenType.L_PAREN:
            depth += 1
            if i and tokens[i - 1].token_type == TokenType.MATCH_RECOGNIZE:
                bodies.append(depth)
        elif kind == TokenType.R_PAREN:
            if bodies and bodies[-1] == depth:
                bodies.pop()
            depth -= 1
        elif (
            bodies
            and depth == bodies[-1]
            and token.text.upper() == "PATTERN"
            and i + 1 < len(tokens)
            and tokens[i + 1].token_type == TokenType.L_PAREN
        ):
            begin = tokens[i + 1].end + 1
            yield begin, pattern_body_end(sql, begin)


class MatchSQLTokenizer(DuckDB.Tokenizer):
    """DuckDB's tokenizer, with ``$`` inside PATTERN ( ... ) read as the end anchor.

    DuckDB's ``$tag$ ... $tag$`` strings and ``$1`` parameters make the SQL
    tokenizer read ``PATTERN (^B | $C$)`` as the start of a dollar-quoted
    string. The pattern body is parsed from the raw text anyway (see
    :mod:`matchsql.grammar.pattern_parser`); its tokens only have to keep the
    parentheses right. So every ``$`` of a PATTERN body is tokenized as a
    blank, one body at a time: the tokens before a body's ``(`` are right
    however the rest was mis-read. The tokens' offsets are those of the
    original text; ``$`` anywhere else keeps DuckDB's meaning.
    """

    KEYWORDS = {**DuckDB.Tokenizer.KEYWORDS, "MATCH_RECOGNIZE": TokenType.MATCH_RECOGNIZE}

    def tokenize(self, sql: str) -> list[Token]:
        text = sql
        done: set[int] = set()
        while True:
            failure: Exception | None = None
            try:
                tokens = super().tokenize(text)
            except TokenError as exc:
                failure = exc
                tokens = list(self._core.tokens)
            body = next(
                (
                    (b, e)
                    for b, e in _pattern_bodies(tokens, text)
                    if b not in done and "$" in text[b:e]
                ),
                None,
            )
            if body is None:
                if failure is not None:
                    raise failure
                return tokens
            begin, end = body
            done.add(begin)
            text = text[:begin] + text[begin:end].replace("$", " ") + text[end:]


class MatchSQL(DuckDB):
    """DuckDB's dialect with full row pattern recognition; registered as ``matchsql``."""

    Tokenizer = MatchSQLTokenizer

    Parser = MatchSQLParser
    Generator = MatchSQLGenerator


def new_parser() -> MatchSQLParser:
    """A parser that raises at the first error (matchsql reports one error)."""
    return t.cast(MatchSQLParser, MatchSQL().parser(error_level=ErrorLevel.IMMEDIATE))
