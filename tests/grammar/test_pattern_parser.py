"""Row pattern parser: every construct, precedence, round-trips, malformed input."""

from __future__ import annotations

import pytest

from matchsql.errors import ParseError
from matchsql.grammar.pattern_parser import parse_pattern
from matchsql.plan.pattern import (
    Alternation,
    Anchor,
    AnchorKind,
    Concatenation,
    Empty,
    Exclusion,
    Label,
    Permutation,
    Quantified,
)

A, B, C, D = Label("A"), Label("B"), Label("C"), Label("D")


def q(child, lo, hi, greedy=True):
    return Quantified(child, lo, hi, greedy)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A", A),
        ("a", A),
        ('"a"', Label("a")),
        ('"A"', A),
        ('"x""y"', Label('x"y')),
        ("up_1", Label("UP_1")),
        ("A B", Concatenation((A, B))),
        ("A B C", Concatenation((A, B, C))),
        ("A | B", Alternation((A, B))),
        ("A | B | C", Alternation((A, B, C))),
        # concatenation binds tighter than alternation
        ("A B | C", Alternation((Concatenation((A, B)), C))),
        ("A | B C", Alternation((A, Concatenation((B, C))))),
        ("(A | B) C", Concatenation((Alternation((A, B)), C))),
        # quantifiers bind tighter than concatenation
        ("A B*", Concatenation((A, q(B, 0, None)))),
        ("(A B)*", q(Concatenation((A, B)), 0, None)),
        ("A*", q(A, 0, None)),
        ("A+", q(A, 1, None)),
        ("A?", q(A, 0, 1)),
        ("A*?", q(A, 0, None, False)),
        ("A+?", q(A, 1, None, False)),
        ("A??", q(A, 0, 1, False)),
        ("A B*?", Concatenation((A, q(B, 0, None, False)))),
        ("A{2}", q(A, 2, 2)),
        ("A{2}?", q(A, 2, 2, False)),
        ("A{0}", q(A, 0, 0)),
        ("A{2,}", q(A, 2, None)),
        ("A{,3}", q(A, 0, 3)),
        ("A{2,5}", q(A, 2, 5)),
        ("A{2,5}?", q(A, 2, 5, False)),
        ("A{ 2 , 5 }", q(A, 2, 5)),
        ("A{,}", q(A, 0, None)),
        ("A{,3}?", q(A, 0, 3, False)),
        ("(A*)*", q(q(A, 0, None), 0, None)),
        ("()", Empty()),
        ("(())", Empty()),
        ("", Empty()),
        ("A () B", Concatenation((A, Empty(), B))),
        ("^", Anchor(AnchorKind.START)),
        ("$", Anchor(AnchorKind.END)),
        ("^ A B $", Concatenation((Anchor(AnchorKind.START), A, B, Anchor(AnchorKind.END)))),
        ("^A$", Concatenation((Anchor(AnchorKind.START), A, Anchor(AnchorKind.END)))),
        ("{- A -}", Exclusion(A)),
        ("A {- B+ -} C", Concatenation((A, Exclusion(q(B, 1, None)), C))),
        ("{- A | B -}", Exclusion(Alternation((A, B)))),
        ("{--}", Exclusion(Empty())),
        ("{- A -}*", q(Exclusion(A), 0, None)),
        ("PERMUTE(A, B, C)", Permutation((A, B, C))),
        ("permute(a, b)", Permutation((A, B))),
        ("PERMUTE(A B, C)", Permutation((Concatenation((A, B)), C))),
        ("PERMUTE(A, B){2}", q(Permutation((A, B)), 2, 2)),
        ("PERMUTE", Label("PERMUTE")),
        # nested groups flatten, which keeps rendering a fixpoint
        ("A (B C)", Concatenation((A, B, C))),
        ("A | (B | C)", Alternation((A, B, C))),
        ("((A))", A),
        ("A /* comment */ B", Concatenation((A, B))),
        ("A -- trailing comment\n B", Concatenation((A, B))),
        ("\n  A\n  B+\n", Concatenation((A, q(B, 1, None)))),
    ],
)
def test_parses_to_expected_tree(text, expected):
    assert parse_pattern(text) == expected


def test_seed_pattern():
    assert parse_pattern("A B+ C* D+") == Concatenation(
        (A, q(B, 1, None), q(C, 0, None), q(D, 1, None))
    )


@pytest.mark.parametrize(
    "text",
    [
        "A",
        "A B C",
        "A | B C | D",
        "(A | B) (C | D)",
        "A* B+ C? D{2} A{2,} B{,3} C{1,4}",
        "A*? B+? C?? D{2}? A{2,}? B{1,3}?",
        "(A B)+ (C | D)*?",
        "^ A {- B* -} C $",
        "PERMUTE(A, B | C, D E)",
        "PERMUTE(A, B)+",
        "((A B)*)+",
        "A () B",
        "()",
        '"lower" "Mixed Case" A',
        "{- (A | B)+ -} C",
        "(A | B){3}",
        "A (B | ()) C",
    ],
)
def test_render_round_trip(text):
    tree = parse_pattern(text)
    assert parse_pattern(tree.to_sql()) == tree


def test_variables_in_order_of_first_appearance():
    assert parse_pattern("B A (B | C)* PERMUTE(D, A)").variables() == ["B", "A", "C", "D"]


def test_offsets_are_relative_to_base():
    tree = parse_pattern("A  B+", base_offset=10, sql=" " * 10 + "A  B+")
    assert isinstance(tree, Concatenation)
    assert tree.items[0].offset == 10
    assert tree.items[1].offset == 13
    assert tree.items[1].child.offset == 13


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("A |", 4, "end of pattern"),
        ("| A", 1, "expected a pattern term"),
        ("A B )", 5, "unexpected ')'"),
        ("(A B", 5, "expected ')'"),
        ("A{3,1}", 2, "maximum below minimum"),
        ("A{}", 2, "empty quantifier"),
        ("A{2", 4, "expected ',' or '}'"),
        ("A{1,2", 6, "expected '}'"),
        ("A{-1}", 4, "expected '-}'"),
        ("A**", 3, "cannot follow another quantifier"),
        ("A+*", 3, "cannot follow another quantifier"),
        ("A???", 4, "cannot follow another quantifier"),
        ("{- A", 5, "expected '-}'"),
        ("PERMUTE(A, B", 13, "PERMUTE"),
        ("PERMUTE()", 9, "expected a pattern term"),
        ('"A', 1, "unterminated"),
        ('""', 1, "empty pattern variable"),
        ("A # B", 3, "unexpected '#'"),
        ("A /* B", 3, "unterminated comment"),
        ("*", 1, "expected a pattern term"),
    ],
)
def test_malformed_patterns_report_position(text, column, fragment):
    with pytest.raises(ParseError) as info:
        parse_pattern(text)
    assert info.value.line == 1
    assert info.value.column == column
    if fragment:
        assert fragment in info.value.message


def test_error_position_inside_statement():
    sql = "SELECT *\nFROM t MATCH_RECOGNIZE (\n  PATTERN (A B{3,1})\n)"
    start = sql.index("(A") + 1
    with pytest.raises(ParseError) as info:
        parse_pattern(sql[start : sql.index("})") + 1], base_offset=start, sql=sql)
    assert (info.value.line, info.value.column) == (3, 15)
    assert "^" in info.value.excerpt
