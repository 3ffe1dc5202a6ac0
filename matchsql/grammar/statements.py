"""Statement-level entry points: tokenize a statement, parse it, render trees back
(statements are split by :func:`matchsql.grammar.sqltext.split_script`).

Every sqlglot exception is turned into a :class:`matchsql.errors.ParseError`
carrying the exact character offset, so callers only ever see matchsql errors.
"""

from __future__ import annotations

import threading

from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from matchsql.errors import ParseError
from matchsql.grammar.dialect import MatchSQL, new_parser
from matchsql.grammar.kept_texts import KEPT_TEXT_CHARS, KEPT_TEXTS, kept_per_text
from matchsql.runtime.deep import MAX_CHAIN, MAX_NESTING, nested_too_deeply

__all__ = ["known_depth", "parse", "parsed", "to_sql", "tokenize"]


def tokenize(sql: str) -> list[Token]:
    """Tokenize ``sql`` in the matchsql dialect, raising a located ParseError."""
    tokenizer = MatchSQL().tokenizer()
    try:
        return tokenizer.tokenize(sql)
    except TokenError as exc:
        cause = str(exc.__cause__ or exc)
        if cause.startswith("Missing "):
            message = f"unterminated quoted text: missing {cause.split()[1]}"
        else:
            message = f"cannot tokenize the statement: {cause}"
        # The tokenizer keeps the start of the token it failed on.
        core = getattr(tokenizer, "_core", tokenizer)
        raise ParseError(message, sql=sql, offset=getattr(core, "_start", None)) from None


def parse(sql: str) -> list[exp.Expr]:
    """Parse every statement of ``sql`` (empty statements are dropped): new trees, which
    the caller may rewrite (a text parsed before is copied from its kept trees)."""
    return [tree.copy() for tree in parsed(sql)]


def parsed(sql: str) -> tuple[exp.Expr, ...]:
    """The trees of :func:`parse`, shared: for a caller that only reads them (a copy of a
    short statement's tree costs about what parsing it again does), never to be changed."""
    return _kept_parse(sql)


def known_depth(sql: str) -> int | None:
    """How deep ``sql``'s trees go (levels of nesting and chained operators, as
    :func:`check_nesting` counts them) where its tokens were counted lately (it parsed, or
    failed to parse after the count); else None."""
    return _depths.get(sql)


def _parse(sql: str) -> tuple[exp.Expr, ...]:
    tokens = tokenize(sql)
    deepest = check_nesting(tokens, sql)
    if len(sql) <= KEPT_TEXT_CHARS:
        with _depths_lock:
            _depths[sql] = deepest
            while len(_depths) > KEPT_TEXTS:
                del _depths[next(iter(_depths))]
    parser = new_parser()
    try:
        trees = parser.parse(tokens, sql)
    except SqlglotParseError as exc:
        token = parser.last_error_token
        description = exc.errors[0].get("description") if exc.errors else None
        message = _friendly(description or str(exc).split(". Line")[0])
        offset = len(sql.rstrip()) if token is None else token.start
        raise ParseError(message, sql=sql, offset=offset) from None
    return tuple(tree for tree in trees if tree is not None)


_kept_parse = kept_per_text(_parse)
_depths: dict[str, int] = {}  # the depth of each text parsed lately (oldest first)
_depths_lock = threading.Lock()


_OPEN = frozenset((TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE))
_CLOSE = frozenset((TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END))
_PREFIX = frozenset((TokenType.NOT, TokenType.DASH, TokenType.PLUS, TokenType.TILDE))
_BINARY = frozenset(
    (
        TokenType.AND,
        TokenType.OR,
        TokenType.PLUS,
        TokenType.DASH,
        TokenType.STAR,
        TokenType.SLASH,
        TokenType.DPIPE,
        TokenType.MOD,
        TokenType.CARET,
        TokenType.AMP,
        TokenType.DIV,
    )
)  # comparisons do not chain: ``a < b < c`` is an error anyway


def check_nesting(tokens: list[Token], sql: str) -> int:
    """Refuse text that nests deeper than the parser and the tree walkers can go,
    before parsing it; else how deep it goes (levels, the larger of the two counts).

    The parser recurses once per level of brackets, ``CASE`` and prefix
    operators (``NOT NOT x``, ``- - x``): at most :data:`MAX_NESTING` of
    those. A chain ``a + b + ... + z`` parses in a loop but becomes a tree as
    deep as the chain is long, which the evaluators walk recursively: the
    chained operators of all open levels count too, up to :data:`MAX_CHAIN`.
    Counting on the token stream is a loop and cannot overflow anything.
    Inside ``PATTERN ( ... )`` ``|``, ``*`` and ``+`` are row pattern
    operators, parsed flat: only the brackets count there.
    """
    depth = 0
    run = 0  # prefix operators in a row: each is one more level of recursion
    chained = [0]  # binary operators so far on each open level
    pattern_at = 0  # the depth of PATTERN's parenthesis while inside it, else 0
    previous: Token | None = None
    deepest = 0
    for token in tokens:
        kind = token.token_type
        if kind in _OPEN:
            if (
                kind is TokenType.L_PAREN
                and previous is not None
                and not pattern_at
                and previous.text.upper() == "PATTERN"
            ):
                pattern_at = depth + 1
            depth += 1
            chained.append(0)
        elif kind in _CLOSE:
            if depth == pattern_at:
                pattern_at = 0
            depth = max(0, depth - 1)
            if len(chained) > 1:
                chained.pop()
        elif kind is TokenType.COMMA:
            chained[-1] = 0
        elif kind in _BINARY and not pattern_at:
            chained[-1] += 1
        run = run + 1 if kind in _PREFIX else 0
        if depth + run > MAX_NESTING:
            raise ParseError(nested_too_deeply(), sql=sql, offset=token.start)
        deepest = max(deepest, depth + run)
        if kind in _BINARY:
            if depth + sum(chained) > MAX_CHAIN:
                raise ParseError(
                    f"expression too long: too many chained operators and "
                    f"nesting levels (limit {MAX_CHAIN})",
                    sql=sql,
                    offset=token.start,
                )
            deepest = max(deepest, depth + sum(chained))
        previous = token
    return deepest


def _friendly(message: str) -> str:
    """Reword sqlglot's internal-looking messages for users."""
    if message.startswith("Required keyword") and "<class" in message:
        kind = message.rsplit(".", 1)[-1].rstrip("'>")
        return f"incomplete {kind.upper()} clause or expression"
    return message


def to_sql(expr: exp.Expr) -> str:
    """Render ``expr`` in the matchsql dialect (``parse(to_sql(e))`` gives ``e`` back)."""
    return MatchSQL().generate(expr, copy=True)
