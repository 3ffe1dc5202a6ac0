"""Cross-check the thread VM against a naive backtracking matcher.

The backtracking matcher below enumerates the paths of a pattern in the
standard's preference order by plain recursion (alternatives left first,
greedy quantifiers trying one more iteration first, an empty iteration of
an unbounded loop not repeated). The first path from a start row is the
preferred match; the first path per end row is what ALL MATCHES reports.
It is exponential and only fit for tiny inputs, which is the point: it is
too simple to share a bug with the VM.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

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
from matchsql.plan.spec import MatchSpec, Measure, RowsPerMatch, SkipMode

from .specs import expr, letters, run

Path = tuple[int, tuple[str, ...]]


def paths(node: PatternNode, text: str, pos: int, labels: tuple[str, ...]) -> Iterator[Path]:
    n = len(text)
    if isinstance(node, Label):
        # A matches 'a', B matches 'b', C matches 'a' or 'c' (overlapping on purpose).
        ok = {"A": "a", "B": "b", "C": "ac"}[node.name]
        if pos < n and text[pos] in ok:
            yield pos + 1, labels + (node.name,)
    elif isinstance(node, Empty):
        yield pos, labels
    elif isinstance(node, Anchor):
        if (node.kind is AnchorKind.START and pos == 0) or (
            node.kind is AnchorKind.END and pos == n
        ):
            yield pos, labels
    elif isinstance(node, Concatenation):
        yield from _sequence(node.items, text, pos, labels)
    elif isinstance(node, Alternation):
        for item in node.items:
            yield from paths(item, text, pos, labels)
    elif isinstance(node, Permutation):
        for order in itertools.permutations(node.items):
            yield from _sequence(order, text, pos, labels)
    elif isinstance(node, Exclusion):
        yield from paths(node.child, text, pos, labels)
    elif isinstance(node, Quantified):
        yield from _repeat(node, 0, text, pos, labels)


def _sequence(items, text: str, pos: int, labels) -> Iterator[Path]:
    if not items:
        yield pos, labels
        return
    for p, lab in paths(items[0], text, pos, labels):
        yield from _sequence(items[1:], text, p, lab)


def _repeat(node: Quantified, count: int, text: str, pos: int, labels) -> Iterator[Path]:
    can_stop = count >= node.min
    can_go = node.max is None or count < node.max

    def more() -> Iterator[Path]:
        for p, lab in paths(node.child, text, pos, labels):
            if node.max is None and count >= node.min and p == pos:
                yield p, lab  # an empty iteration of the open loop is not repeated
            else:
                yield from _repeat(node, count + 1, text, p, lab)

    if not node.greedy and can_stop:
        yield pos, labels
    if can_go:
        yield from more()
    if node.greedy and can_stop:
        yield pos, labels


def expected(pattern: PatternNode, text: str, skip: SkipMode, all_matches: bool) -> list[tuple]:
    """(match_number, start id, labels) per reported match."""
    out = []
    number = 0
    start = 0
    while start < len(text):
        found = list(paths(pattern, text, start, ()))
        if not found:
            start += 1
            continue
        if all_matches:
            by_end: dict[int, tuple[str, ...]] = {}
            for end, lab in found:
                by_end.setdefault(end, lab)
            report = [by_end[e] for e in sorted(by_end)]
        else:
            report = [found[0][1]]
        for lab in report:
            number += 1
            out.append((number, start + 1, "".join(lab)))
        best_end = found[0][0]
        if best_end == start or skip is SkipMode.TO_NEXT_ROW:
            start += 1
        else:
            start = best_end
    return out


VARS = st.sampled_from([Label("A"), Label("B"), Label("C")])


def _patterns() -> st.SearchStrategy[PatternNode]:
    def extend(children: st.SearchStrategy[PatternNode]) -> st.SearchStrategy[PatternNode]:
        pair = st.tuples(children, children)
        quant = st.tuples(
            children,
            st.sampled_from([(0, None), (1, None), (0, 1), (2, None), (1, 2), (0, 2), (2, 2)]),
            st.booleans(),
        )
        return st.one_of(
            pair.map(lambda p: Concatenation(p)),
            pair.map(lambda p: Alternation(p)),
            pair.map(lambda p: Permutation(p)),
            children.map(Exclusion),
            quant.map(lambda q: Quantified(q[0], q[1][0], q[1][1], q[2])),
        )

    leaves = st.one_of(
        VARS,
        VARS,
        VARS,
        st.just(Empty()),
        st.just(Anchor(AnchorKind.START)),
        st.just(Anchor(AnchorKind.END)),
    )
    return st.recursive(leaves, extend, max_leaves=5)


@settings(max_examples=300, deadline=None)
@given(
    pattern=_patterns(),
    text=st.text(alphabet="abc", max_size=7),
    skip=st.sampled_from([SkipMode.PAST_LAST_ROW, SkipMode.TO_NEXT_ROW]),
    all_matches=st.booleans(),
)
def test_vm_agrees_with_backtracking(pattern, text, skip, all_matches) -> None:
    rows = letters(text)
    spec = MatchSpec(
        columns=pa.schema([("id", pa.int64()), ("v", pa.string())]),
        pattern=pattern,
        order_by=["id"],
        measures=[
            Measure("mn", expr("MATCH_NUMBER()"), pa.int64()),
            Measure("first_id", expr("FIRST(id)"), pa.int64()),
            Measure("labels", expr("string_agg(CLASSIFIER(), '')"), pa.string()),
        ],
        rows_per_match=RowsPerMatch.ONE,
        skip=skip,
        defines={"A": expr("v = 'a'"), "B": expr("v = 'b'"), "C": expr("v IN ('a', 'c')")},
        all_matches=all_matches,
    )
    got = [(mn, first, labels or "") for mn, first, labels in run(spec, rows)]
    want = [
        (mn, start if lab else None, lab)
        for mn, start, lab in expected(pattern, text, skip, all_matches)
    ]
    assert got == want
