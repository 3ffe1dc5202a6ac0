"""Build MatchSpecs by hand for matcher tests, independent of the SQL front end.

``expr("PREV(A.x) < x")`` parses with sqlglot's DuckDB dialect and normalises
the tree into the shapes of :mod:`matchsql.grammar.nodes` (PREV/NEXT/FIRST/
LAST -> Navigation, CLASSIFIER, MATCH_NUMBER, and ``FINAL(e)`` / ``RUNNING(e)``
written as calls -> PatternSemantics). ``pattern("A B+? (C|D)*")`` parses a
row pattern into the AST with a tiny recursive-descent parser. ``run`` feeds
rows through a ReferenceMatcher (optionally in several batches) and returns
the output as a list of tuples.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from matchsql.config import Config
from matchsql.engine.reference import ReferenceMatcher
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
from matchsql.plan.row_functions import Classifier, MatchNumber, Navigation, PatternSemantics
from matchsql.plan.spec import MatchSpec, Measure, RowsPerMatch, SkipMode

# -- expressions ----------------------------------------------------------------------------


def expr(text: str) -> exp.Expression:
    """Parse and normalise one DEFINE/MEASURES expression."""
    tree = sqlglot.parse_one(text, read="duckdb")
    return normalise(tree)


def _offset(node: exp.Expression | None) -> int | None:
    if node is None:
        return None
    return int(node.this)


def normalise(tree: exp.Expression) -> exp.Expression:
    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table:
            ident = node.args["table"]
            if not ident.quoted:
                node.set("table", exp.to_identifier(ident.name.upper()))
        if isinstance(node, exp.Column) and not node.table and node.name.upper() == "MATCH_NUMBER":
            return MatchNumber()
        if isinstance(node, exp.First | exp.Last):
            kind = "FIRST" if isinstance(node, exp.First) else "LAST"
            return Navigation(this=node.this, kind=kind, offset=_offset(node.expression))
        if isinstance(node, exp.Anonymous):
            name = node.name.upper()
            args = node.expressions
            if name in ("PREV", "NEXT", "FIRST", "LAST"):
                off = _offset(args[1]) if len(args) > 1 else None
                return Navigation(this=args[0], kind=name, offset=off)
            if name == "CLASSIFIER":
                var = args[0].name.upper() if args else None
                return Classifier(this=var)
            if name == "MATCH_NUMBER":
                return MatchNumber()
            if name in ("FINAL", "RUNNING"):
                return PatternSemantics(this=args[0], final=name == "FINAL")
        return node

    # Rewrite bottom-up so that a navigation's argument is normalised first
    # (PREV(LAST(A.x, 1), 1) has a sqlglot LAST inside an anonymous PREV).
    for node in reversed(list(tree.walk())):
        fixed = fix(node)
        if fixed is not node:
            if node is tree:
                tree = fixed
            else:
                node.replace(fixed)
    return tree


# -- patterns --------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(\{-|-\}|\{\s*\d*\s*(?:,\s*\d*\s*)?\}|[A-Za-z_][A-Za-z_0-9]*|\"[^\"]*\"|[()|*+?^$,])"
)


def pattern(text: str) -> PatternNode:
    tokens = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"bad pattern near {text[pos:]!r}")
        tokens.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    parser = _PatternParser(tokens)
    node = parser.alternation()
    if parser.i != len(tokens):
        raise ValueError(f"trailing tokens in pattern: {tokens[parser.i :]}")
    return node


class _PatternParser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def alternation(self) -> PatternNode:
        items = [self.concatenation()]
        while self.peek() == "|":
            self.take()
            items.append(self.concatenation())
        return items[0] if len(items) == 1 else Alternation(tuple(items))

    def concatenation(self) -> PatternNode:
        items = []
        while self.peek() not in (None, "|", ")", "-}", ","):
            items.append(self.quantified())
        if not items:
            return Empty()
        return items[0] if len(items) == 1 else Concatenation(tuple(items))

    def quantified(self) -> PatternNode:
        node = self.primary()
        while True:
            tok = self.peek()
            if tok in ("*", "+", "?"):
                self.take()
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[tok]
            elif tok is not None and tok.startswith("{") and tok != "{-":
                self.take()
                body = tok[1:-1].replace(" ", "")
                if "," in body:
                    a, b = body.split(",")
                    lo, hi = int(a or 0), (int(b) if b else None)
                else:
                    lo = hi = int(body)
            else:
                return node
            greedy = True
            if self.peek() == "?":
                self.take()
                greedy = False
            node = Quantified(node, lo, hi, greedy)

    def primary(self) -> PatternNode:
        tok = self.take()
        if tok == "(":
            if self.peek() == ")":
                self.take()
                return Empty()
            node = self.alternation()
            assert self.take() == ")"
            return node
        if tok == "{-":
            node = self.alternation()
            assert self.take() == "-}"
            return Exclusion(node)
        if tok == "^":
            return Anchor(AnchorKind.START)
        if tok == "$":
            return Anchor(AnchorKind.END)
        if tok.upper() == "PERMUTE" and self.peek() == "(":
            self.take()
            items = [self.alternation()]
            while self.peek() == ",":
                self.take()
                items.append(self.alternation())
            assert self.take() == ")"
            return Permutation(tuple(items))
        if tok.startswith('"'):
            return Label(tok[1:-1])
        return Label(tok.upper())


# -- specs and runs ---------------------------------------------------------------------------


def schema_of(rows: Sequence[dict], types: dict[str, pa.DataType] | None = None) -> pa.Schema:
    types = types or {}
    if rows:
        inferred = pa.Table.from_pylist(list(rows)).schema
        fields = [pa.field(f.name, types.get(f.name, f.type)) for f in inferred]
    else:
        fields = [pa.field(n, t) for n, t in types.items()]
    return pa.schema(fields)


def make_spec(
    rows: Sequence[dict],
    pattern_text: str,
    *,
    define: dict[str, str] | None = None,
    measures: Iterable[tuple[str, str, pa.DataType]] = (),
    rows_per_match: RowsPerMatch = RowsPerMatch.ONE,
    skip: SkipMode = SkipMode.PAST_LAST_ROW,
    skip_variable: str | None = None,
    subsets: dict[str, tuple[str, ...]] | None = None,
    partition_by: Sequence[str] = (),
    order_by: Sequence[str] = ("id",),
    types: dict[str, pa.DataType] | None = None,
    all_matches: bool = False,
    within: Any = None,
) -> MatchSpec:
    return MatchSpec(
        columns=schema_of(rows, types),
        pattern=pattern(pattern_text),
        partition_by=list(partition_by),
        order_by=list(order_by),
        measures=[Measure(name, expr(text), t) for name, text, t in measures],
        rows_per_match=rows_per_match,
        skip=skip,
        skip_variable=skip_variable,
        subsets=dict(subsets or {}),
        defines={k.upper(): expr(v) for k, v in (define or {}).items()},
        all_matches=all_matches,
        within=within,
    )


def run(
    spec: MatchSpec, rows: Sequence[dict], splits: Sequence[int] = (), config: Config | None = None
) -> list[tuple]:
    """Feed ``rows`` (one partition) split at the given row offsets; output as tuples."""
    table = pa.Table.from_pylist(list(rows), schema=spec.columns)
    bounds = [0, *sorted(set(s for s in splits if 0 < s < len(rows))), len(rows)]
    matcher = ReferenceMatcher(spec, (), config)
    out: list[pa.RecordBatch] = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        for batch in table.slice(a, b - a).to_batches():
            out.extend(matcher.feed(batch))
    out.extend(matcher.finish())
    result: list[tuple] = []
    for batch in out:
        assert batch.schema.equals(spec.output_schema())
        for row in batch.to_pylist():
            result.append(tuple(row.values()))
    return result


def letters(text: str, **extra: Sequence[Any]) -> list[dict]:
    """Rows ``{"id": 1.., "v": char}``: a pattern over a string is easy to reason about."""
    rows = [{"id": i + 1, "v": ch} for i, ch in enumerate(text)]
    for name, values in extra.items():
        for row, value in zip(rows, values):
            row[name] = value
    return rows


LETTER_DEFINES = {c: f"v = '{c.lower()}'" for c in "ABCDEFGH"}


MATCH_BOUNDS = (
    ("mn", "MATCH_NUMBER()", pa.int64()),
    ("first_id", "FIRST(id)", pa.int64()),
    ("last_id", "LAST(id)", pa.int64()),
)
ROW_MEASURES = (("mn", "MATCH_NUMBER()", pa.int64()), ("cls", "CLASSIFIER()", pa.string()))
