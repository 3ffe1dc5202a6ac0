"""Recursive-descent parser for the row pattern inside ``PATTERN ( ... )``.

The pattern is a small regular-expression language with its own lexical
rules (``{-``, reluctant ``?``, ``^``/``$`` anchors), so it is parsed from the
raw text rather than from sqlglot's SQL tokens, which split and merge those
characters in ways that lose information (``$`` may start a dollar-quoted
string, ``?`` is a placeholder).

Grammar (loosest binding first)::

    alternation   := concatenation ( '|' concatenation )*
    concatenation := quantified*                  -- empty only inside ( )
    quantified    := primary [ quantifier [ '?' ] ]
    quantifier    := '*' | '+' | '?' | '{' [n] [ ',' [m] ] '}'
    primary       := VAR | "quoted" | '(' [alternation] ')' | '^' | '$'
                   | '{-' alternation '-}' | PERMUTE '(' alternation (',' alternation)* ')'

Nested concatenations and alternations are flattened so that rendering with
:meth:`PatternNode.to_sql` and parsing again yields an equal tree.
"""

from __future__ import annotations

import re

from matchsql.errors import ParseError
from matchsql.plan.pattern import (
    Alternation,
    Anchor,
    AnchorKind,
    Concatenation,
    Empty,
    Exclusion,
    Label,
    PatternNode,
    Permutation,
    Quantified,
)

__all__ = ["MAX_BOUND", "parse_pattern"]

#: Largest quantifier bound. Any bound near it is refused later anyway by
#: ``max_pattern_size`` unless it is the lower bound of an unbounded loop
#: over an empty body; this limit only keeps the numbers machine-sized.
MAX_BOUND = 1_000_000_000


#: The clauses that follow PATTERN ( ... ), as they start: met inside a pattern body, they
#: mean its ``)`` is missing (the body then ran on to the MATCH_RECOGNIZE's own ``)``).
_NEXT_CLAUSE = re.compile(
    r'(DEFINE\s+(?:"[^"]*"|\w+)\s+AS\b|SUBSET\s+(?:"[^"]*"|\w+)\s*=|'
    r"WITHIN\s+(?:INTERVAL\b|'|\d))",
    re.IGNORECASE,
)


def parse_pattern(text: str, base_offset: int = 0, sql: str | None = None) -> PatternNode:
    """Parse row pattern ``text``; offsets are ``base_offset`` + index into ``text``.

    ``sql`` is the whole statement the pattern was cut from, used so that
    errors report line and column in the user's text; without it positions
    are relative to ``text``.
    """
    return _PatternParser(text, base_offset, sql).parse()


class _PatternParser:
    """Single-use parser over one pattern text."""

    def __init__(self, text: str, base_offset: int, sql: str | None) -> None:
        self.text = text
        self.pos = 0
        self.base = base_offset if sql is not None else 0
        self.sql = sql if sql is not None else text

    # -- lexical helpers -------------------------------------------------

    def error(self, message: str, pos: int | None = None) -> ParseError:
        where = self.pos if pos is None else pos
        return ParseError(message, sql=self.sql, offset=self.base + where)

    def skip_space(self) -> None:
        """Skip whitespace and SQL comments between pattern tokens."""
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch.isspace():
                self.pos += 1
            elif text.startswith("--", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("unterminated comment in row pattern")
                self.pos = end + 2
            else:
                return

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def startswith(self, token: str) -> bool:
        self.skip_space()
        return self.text.startswith(token, self.pos)

    def offset(self) -> int:
        self.skip_space()
        return self.base + self.pos

    # -- grammar ---------------------------------------------------------

    def parse(self) -> PatternNode:
        start = self.offset()
        if not self.peek():
            return Empty(offset=start)
        node = self.alternation(allow_empty=False)
        if self.peek():
            raise self.error(f"unexpected {self.peek()!r} in row pattern")
        return node

    def alternation(self, allow_empty: bool) -> PatternNode:
        start = self.offset()
        branches = [self.concatenation(allow_empty)]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.concatenation(allow_empty=False))
        if len(branches) == 1:
            return branches[0]
        items: list[PatternNode] = []
        for branch in branches:
            items.extend(branch.items if isinstance(branch, Alternation) else (branch,))
        return Alternation(tuple(items), offset=start)

    def concatenation(self, allow_empty: bool) -> PatternNode:
        start = self.offset()
        items: list[PatternNode] = []
        while self.starts_primary():
            item = self.quantified()
            items.extend(item.items if isinstance(item, Concatenation) else (item,))
        if not items:
            if allow_empty:
                return Empty(offset=start)
            found = self.peek()
            if found:
                raise self.error(f"expected a pattern term, found {found!r}")
            raise self.error("expected a pattern term, found end of pattern")
        if len(items) == 1:
            return items[0]
        return Concatenation(tuple(items), offset=start)

    def starts_primary(self) -> bool:
        ch = self.peek()
        if not ch:
            return False
        if ch in '(^$"' or ch.isalpha() or ch == "_":
            return True
        return self.startswith("{-")

    def quantified(self) -> PatternNode:
        start = self.offset()
        node = self.primary()
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and not self.startswith("{-")):
            low, high = self.quantifier()
            greedy = True
            if self.peek() == "?":
                self.pos += 1
                greedy = False
            node = Quantified(node, low, high, greedy, offset=start)
            if self.peek() in ("*", "+", "?", "{") and not self.startswith("{-"):
                raise self.error("a quantifier cannot follow another quantifier; use parentheses")
        return node

    def quantifier(self) -> tuple[int, int | None]:
        ch = self.peek()
        if ch in "*+?":
            self.pos += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        open_pos = self.pos
        self.pos += 1  # '{'
        low = self.integer()
        if self.peek() == "}":
            self.pos += 1
            if low is None:
                raise self.error("empty quantifier {}", open_pos)
            return low, low
        if self.peek() != ",":
            raise self.error("expected ',' or '}' in quantifier")
        self.pos += 1
        high = self.integer()
        if self.peek() != "}":
            raise self.error("expected '}' to close quantifier")
        self.pos += 1
        low = 0 if low is None else low
        if high is not None and high < low:
            raise self.error(f"quantifier {{{low},{high}}} has maximum below minimum", open_pos)
        return low, high

    def integer(self) -> int | None:
        self.skip_space()
        begin = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        if begin == self.pos:
            if self.peek() == "-":
                raise self.error("quantifier bounds must be non-negative integers")
            return None
        digits = self.text[begin : self.pos]
        if len(digits.lstrip("0")) > len(str(MAX_BOUND)) or int(digits) > MAX_BOUND:
            raise self.error(
                f"quantifier bound {digits[:20]} is too large (limit {MAX_BOUND})", begin
            )
        return int(digits)

    def primary(self) -> PatternNode:
        start = self.offset()
        ch = self.peek()
        if ch == "(":
            self.pos += 1
            node = self.alternation(allow_empty=True)
            self.expect(")", "expected ')' to close group")
            return node
        if ch == "^":
            self.pos += 1
            return Anchor(AnchorKind.START, offset=start)
        if ch == "$":
            self.pos += 1
            return Anchor(AnchorKind.END, offset=start)
        if self.startswith("{-"):
            self.pos += 2
            child = self.alternation(allow_empty=True)
            if not self.startswith("-}"):
                raise self.error("expected '-}' to close exclusion")
            self.pos += 2
            return Exclusion(child, offset=start)
        if ch == '"':
            return Label(self.quoted_name(), offset=start)
        clause = _NEXT_CLAUSE.match(self.text, self.pos)
        if clause is not None:
            word = clause.group(0).split()[0].upper()
            raise self.error(f"missing ')' to close PATTERN before {word}")
        name = self.bare_name()
        if name.upper() == "PERMUTE" and self.peek() == "(":
            return self.permute(start)
        return Label(name.upper(), offset=start)

    def permute(self, start: int) -> PatternNode:
        self.pos += 1  # '('
        items = [self.alternation(allow_empty=False)]
        while self.peek() == ",":
            self.pos += 1
            items.append(self.alternation(allow_empty=False))
        self.expect(")", "expected ',' or ')' in PERMUTE")
        return Permutation(tuple(items), offset=start)

    def expect(self, token: str, message: str) -> None:
        if self.peek() != token:
            raise self.error(message)
        self.pos += 1

    def bare_name(self) -> str:
        begin = self.pos
        text = self.text
        while self.pos < len(text) and (text[self.pos].isalnum() or text[self.pos] == "_"):
            self.pos += 1
        return text[begin : self.pos]

    def quoted_name(self) -> str:
        begin = self.pos
        self.pos += 1
        parts: list[str] = []
        text = self.text
        while True:
            end = text.find('"', self.pos)
            if end < 0:
                raise self.error("unterminated quoted pattern variable", begin)
            parts.append(text[self.pos : end])
            self.pos = end + 1
            if text.startswith('"', self.pos):
                parts.append('"')
                self.pos += 1
                continue
            break
        name = "".join(parts)
        if not name:
            raise self.error("empty pattern variable name", begin)
        return name
