"""Row pattern syntax: quantifiers, alternation, grouping, PERMUTE, anchors,
empty patterns, exclusion, and the AFTER MATCH SKIP modes.

Every case here runs over a *letter table* ``s(id, v)`` (see
:func:`case.letters`): ``DEFINE A AS v = 'a'`` etc., and variables outside
A-E (X, Y, Z) are undefined and so true for every row. With that, a row
pattern behaves like a regular expression over the string of letters, and
the expected matches can be derived as one derives regex matches — except
for the points where row pattern matching differs from text regexes:

* the match reported from a start row is the first in *preference order*
  (greedy: more iterations first; reluctant: fewer first; alternation: left
  branch first; PERMUTE: permutations in lexicographic order of the list
  positions), not the longest;
* matches are searched from every row, in order, and the next search starts
  where AFTER MATCH SKIP says (after an empty match: at the next row);
* ``^``/``$`` are the partition's first row / the point after its last row;
* an empty match is a real match: it gets a match number and, in ONE ROW
  PER MATCH or ALL ROWS PER MATCH SHOW EMPTY MATCHES, one output row.

Expected values: ``one("mn:first-last ...")`` for ONE ROW PER MATCH, where
``first``/``last`` are ``FIRST(id)``/``LAST(id)`` (NULL for an empty match),
and ``rows("idLABEL ... | ...")`` for ALL ROWS PER MATCH, one ``|``-separated
group per match, ``5-`` for an empty match's row, ``5~`` for an unmatched row,
``#`` for a match that output nothing.
"""

from __future__ import annotations

import matchsql

from .case import Case, all_query, letters, one, one_query, rows


def one_case(
    name: str,
    data: str,
    pattern: str,
    spec: str,
    why: str,
    *,
    skip: str = "PAST LAST ROW",
    undefined: str = "",
) -> Case:
    """A ONE ROW PER MATCH case over ``letters(data)``."""
    return Case(
        name,
        letters(data),
        one_query(pattern, skip=skip, undefined=undefined),
        one(spec),
        why,
        tags=("pattern",),
    )


def all_case(
    name: str,
    data: str,
    pattern: str,
    spec: str,
    why: str,
    *,
    skip: str = "PAST LAST ROW",
    mode: str = "",
    undefined: str = "",
) -> Case:
    """An ALL ROWS PER MATCH case over ``letters(data)``."""
    return Case(
        name,
        letters(data),
        all_query(pattern, skip=skip, mode=mode, undefined=undefined),
        rows(spec),
        why,
        tags=("pattern",),
    )


def error_case(
    name: str,
    data: str,
    pattern: str,
    error: type[matchsql.Error],
    why: str,
    *,
    skip: str = "PAST LAST ROW",
    all_rows: bool = False,
    mode: str = "",
) -> Case:
    query = all_query(pattern, skip=skip, mode=mode) if all_rows else one_query(pattern, skip=skip)
    return Case(name, letters(data), query, error, why, tags=("pattern", "error"))


QUANTIFIERS = [
    one_case(
        "single_variable",
        "abaa",
        "A",
        "1:1-1 2:3-3 3:4-4",
        "each 'a' row is a one-row match; 'b' starts none",
    ),
    one_case("concatenation", "abab", "A B", "1:1-2 2:3-4", "two adjacent a-b pairs"),
    one_case("concatenation_no_match", "aabb", "B A", "", "no 'b' is followed by an 'a'"),
    one_case("plus_greedy", "aabaaa", "A+", "1:1-2 2:4-6", "A+ takes every consecutive 'a'"),
    one_case(
        "plus_reluctant",
        "aab",
        "A+?",
        "1:1-1 2:2-2",
        "A+? stops after one iteration when nothing follows",
    ),
    one_case(
        "star_greedy_then_empty",
        "aab",
        "A*",
        "1:1-2 2:-",
        "rows 1-2 match; at row 3 A* still matches, emptily",
    ),
    one_case(
        "star_reluctant_always_empty",
        "aa",
        "A*?",
        "1:- 2:-",
        "A*? prefers zero iterations: an empty match at every row",
    ),
    one_case(
        "question_greedy",
        "ab",
        "A?",
        "1:1-1 2:-",
        "A? takes the 'a'; at the 'b' it matches zero rows",
    ),
    one_case("question_reluctant", "ab", "A??", "1:- 2:-", "A?? prefers zero rows everywhere"),
    one_case(
        "exact_two", "aaaaab", "A{2}", "1:1-2 2:3-4", "pairs 1-2 and 3-4; row 5 has no second 'a'"
    ),
    one_case("exact_one", "ba", "A{1}", "1:2-2", "{1} is a single A"),
    one_case("exact_too_few_rows", "aa", "A{3}", "", "only two 'a' rows"),
    one_case(
        "range_greedy",
        "aaaaab",
        "A{2,3}",
        "1:1-3 2:4-5",
        "three rows first, then the remaining two",
    ),
    one_case(
        "range_reluctant",
        "aaaaab",
        "A{2,3}?",
        "1:1-2 2:3-4",
        "two rows preferred; row 5 alone cannot make two",
    ),
    one_case(
        "at_least_greedy",
        "aaabaaaa",
        "A{2,}",
        "1:1-3 2:5-8",
        "unbounded upper limit takes whole runs",
    ),
    one_case(
        "at_least_reluctant",
        "aaaaa",
        "A{2,}?",
        "1:1-2 2:3-4",
        "minimum two rows; the fifth row is left alone",
    ),
    one_case(
        "at_most_greedy",
        "aaab",
        "A{,2}",
        "1:1-2 2:3-3 3:-",
        "{,2} is {0,2}: two rows, then one, then an empty match at 'b'",
    ),
    one_case("at_most_reluctant", "aab", "A{,2}?", "1:- 2:- 3:-", "{,2}? prefers zero rows"),
    one_case("zero_to_one_braces", "ab", "A{0,1}", "1:1-1 2:-", "same as A?"),
    one_case(
        "b_a_plus_b",
        "baaabab",
        "B A+ B",
        "1:1-5",
        "rows 1-5; the next search starts at row 6 ('a') and finds no B A+ B",
    ),
    one_case(
        "plus_then_same_variable",
        "aaa",
        "A+ A",
        "1:1-3",
        "A+ gives back one row so that the final A can match",
    ),
    one_case(
        "reluctant_plus_then_same_variable",
        "aaa",
        "A+? A",
        "1:1-2",
        "A+? takes one row, A the second; row 3 alone cannot match",
    ),
    one_case("star_then_b", "aabab", "A* B", "1:1-3 2:4-5", "a a b, then a b"),
    one_case(
        "reluctant_star_then_b", "aabab", "A*? B", "1:1-3 2:4-5", "only one way to reach each 'b'"
    ),
    one_case(
        "undefined_star_greedy",
        "aabab",
        "X* B",
        "1:1-5",
        "X is true everywhere; greedy X* runs to the end and backs off to the last 'b'",
    ),
    one_case(
        "undefined_star_reluctant",
        "aabab",
        "X*? B",
        "1:1-3 2:4-5",
        "reluctant X*? stops at the first 'b'",
    ),
    one_case(
        "undefined_plus_greedy", "abab", "X+ B", "1:1-4", "greedy: the last 'b' ends the match"
    ),
    one_case(
        "undefined_plus_reluctant",
        "abab",
        "X+? B",
        "1:1-2 2:3-4",
        "reluctant: the nearest 'b' after at least one row",
    ),
    one_case(
        "group_plus",
        "ababbab",
        "(A B)+",
        "1:1-4 2:6-7",
        "two a-b iterations, then row 5 'b' starts nothing, then 6-7",
    ),
    one_case("group_plus_reluctant", "abab", "(A B)+?", "1:1-2 2:3-4", "one iteration per match"),
    one_case(
        "alternation_in_loop",
        "abbcac",
        "(A | B)+ C",
        "1:1-4 2:5-6",
        "any run of a/b closed by a 'c'",
    ),
    one_case(
        "nested_quantifiers",
        "aab",
        "(A*)*",
        "1:1-2 2:-",
        "the outer loop does not repeat empty inner iterations: 1-2, then empty at 3",
    ),
    one_case(
        "star_of_group_empty_everywhere",
        "bb",
        "(A B)*",
        "1:- 2:-",
        "no 'a': the group loop matches emptily at each row",
    ),
    one_case("bounded_group", "abababab", "(A B){2}", "1:1-4 2:5-8", "two pairs each"),
    one_case(
        "bounded_group_range_reluctant",
        "ababab",
        "(A B){1,2}? B",
        "",
        "after one pair the next row is 'a', after two pairs 'a' again: B never follows",
    ),
    one_case(
        "optional_in_middle",
        "acabc",
        "A B? C",
        "1:1-2 2:3-5",
        "B? skipped in the first match, taken in the second",
    ),
    one_case(
        "reluctant_optional_in_middle",
        "abc",
        "A B?? C",
        "1:1-3",
        "B?? prefers skipping B, but then C fails at 'b', so B is taken",
    ),
    one_case("star_before_and_after", "aaabbb", "A* B*", "1:1-6", "both runs in one match"),
    one_case(
        "reluctant_star_before_greedy",
        "aaabbb",
        "A*? B*",
        "1:- 2:- 3:- 4:4-6",
        "A*? takes nothing and B* finds no 'b' at rows 1-3: empty matches; then 4-6",
    ),
    one_case(
        "greedy_then_reluctant",
        "aabb",
        "A+ B*?",
        "1:1-2",
        "A+ takes rows 1-2 and B*? takes none; 'b' rows cannot start A+",
    ),
    one_case("long_run_bounded", "aaaaaaa", "A{3}", "1:1-3 2:4-6", "row 7 is left over"),
]

LABELLING = [
    all_case(
        "undefined_reluctant_labels",
        "abab",
        "X+? B",
        "1X 2B | 3X 4B",
        "X covers the rows before each nearest 'b'",
    ),
    all_case("undefined_greedy_labels", "abab", "X+ B", "1X 2X 3X 4B", "greedy X+ takes rows 1-3"),
    all_case(
        "alternation_left_first",
        "ab",
        "A | X",
        "1A | 2X",
        "row 1 could be A or X; the left branch wins",
    ),
    all_case(
        "alternation_undefined_first", "ab", "X | A", "1X | 2X", "X is always true and preferred"
    ),
    one_case(
        "alternation_prefers_left_not_longest",
        "ab",
        "A | A B",
        "1:1-1",
        "the first branch matches, so the longer A B is not reported; row 2 matches nothing",
    ),
    one_case(
        "alternation_falls_back",
        "aab",
        "A B | A",
        "1:1-1 2:2-3",
        "at row 1 A B fails (row 2 is 'a'), so the branch A is taken",
    ),
    all_case(
        "alternation_backtracks_into_right",
        "abc",
        "(A | A B) C",
        "1A 2B 3C",
        "branch A leaves C facing 'b'; branch A B lets C match",
    ),
    all_case(
        "alternation_three_way",
        "cba",
        "A | B | C",
        "1C | 2B | 3A",
        "each row takes the branch that fits",
    ),
    all_case(
        "loop_of_alternation_labels",
        "aab",
        "(A | X)* B",
        "1A 2A 3B",
        "row 3 could be X inside the loop, but then B has no row; "
        "leaving the loop lets B take row 3",
    ),
    all_case(
        "loop_prefers_left_branch_each_iteration",
        "aba",
        "(A | X)+",
        "1A 2X 3A",
        "each iteration tries A first; 'b' falls to X",
    ),
    all_case(
        "group_optional_inner",
        "abcaab",
        "(A (B C)?)+",
        "1A 2B 3C 4A 5A",
        "iterations: a-b-c, a, a; row 6 'b' cannot start an iteration",
    ),
    all_case("nested_groups", "ab", "((A) (B))", "1A 2B", "parentheses change nothing"),
    one_case("group_then_variable", "abc", "(A B) C", "1:1-3", "same as A B C"),
    one_case(
        "empty_branch_in_loop",
        "ab",
        "(A | ())+ B",
        "1:1-2",
        "the loop takes 'a'; an empty iteration adds nothing; B takes 'b'",
    ),
    all_case(
        "reluctant_loop_labels",
        "aaab",
        "A*? X",
        "1X | 2X | 3X | 4X",
        "A*? takes nothing when X can match the row itself",
    ),
    all_case(
        "greedy_loop_gives_back",
        "aaa",
        "A* X",
        "1A 2A 3X",
        "A* takes all three rows and gives back the last one to X",
    ),
]

PERMUTE = [
    all_case(
        "permute_two",
        "abba",
        "PERMUTE(A, B)",
        "1A 2B | 3B 4A",
        "A B at rows 1-2; at row 3 A B fails and B A matches",
    ),
    all_case(
        "permute_three_order", "cab", "PERMUTE(A, B, C)", "1C 2A 3B", "only C A B fits the data"
    ),
    all_case(
        "permute_prefers_list_order",
        "aa",
        "PERMUTE(X, A)",
        "1X 2A",
        "X A and A X both fit; X A comes first lexicographically",
    ),
    all_case(
        "permute_prefers_list_order_reversed",
        "aa",
        "PERMUTE(A, X)",
        "1A 2X",
        "A X is the first permutation and it fits",
    ),
    all_case(
        "permute_second_choice", "ba", "PERMUTE(A, X)", "1X 2A", "A X fails at 'b'; X A is next"
    ),
    all_case(
        "permute_with_quantified_items",
        "aabba",
        "PERMUTE(A+, B)",
        "1A 2A 3B | 4B 5A",
        "A+ B at rows 1-3; at row 4 only B A+ fits",
    ),
    one_case("permute_then_variable", "bac", "PERMUTE(A, B) C", "1:1-3", "B A then C"),
    all_case(
        "permute_three_first_fits",
        "aaa",
        "PERMUTE(A, X, Y)",
        "1A 2X 3Y",
        "A X Y is the most preferred and fits",
    ),
    all_case(
        "permute_three_with_undefined_order",
        "baa",
        "PERMUTE(X, A, Y)",
        "1X 2A 3Y",
        "X A Y fits directly",
    ),
    all_case(
        "permute_three_second_permutation",
        "aab",
        "PERMUTE(Y, X, A)",
        "1Y 2A 3X",
        "Y X A fails (row 3 is 'b'); Y A X is next in order and fits",
    ),
    one_case("permute_no_fit", "aa", "PERMUTE(A, B)", "", "no 'b' anywhere"),
    all_case(
        "permute_in_loop",
        "abba",
        "PERMUTE(A, B){2}",
        "1A 2B 3B 4A",
        "two iterations, each in its own order",
    ),
    all_case(
        "permute_with_group",
        "bca",
        "PERMUTE(A, (B C))",
        "1B 2C 3A",
        "the group B C is one item: order (B C) A",
    ),
]

ANCHORS = [
    one_case("start_anchor", "aaa", "^ A", "1:1-1", "only the first row is at the partition start"),
    one_case(
        "end_anchor", "aaba", "A $", "1:4-4", "only the last row is followed by the partition end"
    ),
    one_case("both_anchors", "aaa", "^ A+ $", "1:1-3", "the whole partition"),
    one_case("both_anchors_fail", "aab", "^ A+ $", "", "the 'b' breaks the run before the end"),
    one_case(
        "start_anchor_empty_match",
        "ba",
        "^ A*",
        "1:-",
        "at row 1 A* matches emptily after ^; from row 2 on ^ fails",
    ),
    one_case(
        "end_anchor_after_star",
        "ab",
        "A* $",
        "",
        "$ is after row 2, and A* cannot reach it from row 1 or row 2",
    ),
    one_case(
        "end_anchor_after_star_reaches", "ba", "A* $", "1:2-2", "from row 2 A* reaches the end"
    ),
    all_case(
        "anchor_in_alternation",
        "bab",
        "^ B | A",
        "1B | 2A",
        "row 1 takes ^ B; later rows can only take A",
    ),
    one_case(
        "anchor_in_middle_never_matches",
        "ab",
        "A ^ B",
        "",
        "after a row has been matched the position is never the partition start",
    ),
    one_case(
        "end_anchor_in_middle_never_matches",
        "ab",
        "A $ B",
        "",
        "B would have to match after the partition end",
    ),
    one_case(
        "only_anchors_nonempty_partition",
        "ab",
        "^ $ A?",
        "",
        "^ $ needs an empty partition, which has no row to start from",
    ),
    one_case(
        "start_anchor_with_skip_to_next",
        "aaa",
        "^ A+",
        "1:1-3",
        "later searches start at rows 2 and 3, where ^ fails",
        skip="TO NEXT ROW",
    ),
    one_case(
        "start_anchor_reluctant",
        "aaa",
        "^ A+?",
        "1:1-1",
        "reluctant: one row; nothing else starts at the partition start",
    ),
    one_case(
        "end_anchor_reluctant_must_extend",
        "aaa",
        "A+? $",
        "1:1-3",
        "A+? would stop at one row, but $ forces it to the end",
    ),
    one_case(
        "end_anchor_optional",
        "aab",
        "A $?",
        "1:1-1 2:2-2",
        "a quantified anchor: $? may match zero times",
    ),
    one_case(
        "start_anchor_loop",
        "ab",
        "(^ A)+ B",
        "1:1-2",
        "the anchored group iterates once; ^ cannot match again at row 2",
    ),
    one_case("start_anchor_empty_table", "", "^ A*", "", "no rows: no match"),
]

EMPTY = [
    one_case(
        "empty_pattern_preferred",
        "ab",
        "() | A",
        "1:- 2:-",
        "the empty branch is preferred, so every row starts an empty match",
    ),
    one_case(
        "empty_pattern_fallback",
        "ab",
        "A | ()",
        "1:1-1 2:-",
        "A at row 1; the empty branch at row 2",
    ),
    all_case(
        "show_empty_default",
        "aba",
        "A*",
        "1A | 2- | 3A",
        "ALL ROWS PER MATCH shows empty matches by default: one row for the match at 2",
    ),
    all_case(
        "show_empty_explicit",
        "aba",
        "A*",
        "1A | 2- | 3A",
        "same output with SHOW EMPTY MATCHES",
        mode="SHOW EMPTY MATCHES",
    ),
    all_case(
        "omit_empty",
        "aba",
        "A*",
        "1A | # | 3A",
        "the empty match at row 2 still takes match number 2 but has no row",
        mode="OMIT EMPTY MATCHES",
    ),
    all_case(
        "unmatched_shows_empty_matches",
        "aba",
        "A*",
        "1A | 2- | 3A",
        "row 2 starts an empty match, so it is not an unmatched row",
        mode="WITH UNMATCHED ROWS",
    ),
    all_case(
        "unmatched_rows",
        "aba",
        "A+",
        "1A | 2~ | 3A",
        "row 2 is in no match: output with NULL measures, no match number",
        mode="WITH UNMATCHED ROWS",
    ),
    all_case(
        "unmatched_rows_all",
        "bb",
        "A+",
        "1~ | 2~",
        "no match at all: every row is unmatched",
        mode="WITH UNMATCHED ROWS",
    ),
    all_case(
        "reluctant_star_all_rows",
        "aa",
        "A*?",
        "1- | 2-",
        "two empty matches, each shown by its starting row",
    ),
    all_case(
        "empty_pattern_all_rows_omit",
        "ab",
        "() | A",
        "# | #",
        "only empty matches, all omitted",
        mode="OMIT EMPTY MATCHES",
    ),
    one_case("empty_matches_empty_table", "", "A*", "", "no rows, no starting row, no match"),
    all_case(
        "empty_then_nonempty", "bab", "A?", "1- | 2A | 3-", "A? at the 'b' rows matches emptily"
    ),
    all_case(
        "unmatched_between_matches",
        "abbab",
        "A B",
        "1A 2B | 3~ | 4A 5B",
        "row 3 is neither in a match nor the start of an empty one",
        mode="WITH UNMATCHED ROWS",
    ),
    all_case(
        "omit_empty_keeps_numbers",
        "bab",
        "A*",
        "# | 2A | #",
        "match numbers 1 and 3 are empty and omitted",
        mode="OMIT EMPTY MATCHES",
    ),
]

EXCLUSION = [
    all_case(
        "exclude_middle",
        "abbc",
        "A {- B+ -} C",
        "1A 4C",
        "rows 2-3 are matched as B but not output",
    ),
    all_case("exclude_first", "abab", "{- A -} B", "2B | 4B", "the A rows are hidden"),
    all_case("exclude_last", "ab", "A {- B -}", "1A", "the B row is hidden"),
    all_case(
        "exclude_everything",
        "aa",
        "{- A -}",
        "# | #",
        "two matches whose only rows are excluded: no output",
    ),
    one_case(
        "exclusion_no_effect_one_row",
        "abc",
        "A {- B -} C",
        "1:1-3",
        "exclusion only affects ALL ROWS output",
    ),
    all_case(
        "exclusion_in_loop", "abab", "(A {- B -})+", "1A 3A", "each iteration hides its B row"
    ),
    all_case(
        "exclusion_with_alternation",
        "acb",
        "A {- B | C -} B",
        "1A 3B",
        "the excluded alternation matched the 'c' row",
    ),
    all_case(
        "exclusion_overlapping_matches",
        "aab",
        "A+ {- B -}",
        "1A 2A | 2A",
        "with SKIP TO NEXT ROW the second match starts at row 2",
        skip="TO NEXT ROW",
    ),
    all_case(
        "exclusion_empty",
        "ab",
        "A {- B* -} B",
        "1A 2B",
        "B* inside the exclusion gives the 'b' back to B, which is output",
    ),
    all_case(
        "exclusion_omit_empty",
        "abb",
        "A {- B -} | ()",
        "1A | #",
        "rows 1-2 match and only A is shown; row 3's empty match is omitted",
        mode="OMIT EMPTY MATCHES",
    ),
]

SKIP = [
    one_case("skip_past_last_row", "aaab", "A+ B", "1:1-4", "no overlapping matches"),
    one_case(
        "skip_to_next_row",
        "aaab",
        "A+ B",
        "1:1-4 2:2-4 3:3-4",
        "a new search starts at rows 2 and 3",
        skip="TO NEXT ROW",
    ),
    one_case(
        "skip_to_first_b",
        "aaab",
        "A+ B",
        "1:1-4",
        "row 4 ('b') cannot start A+ B",
        skip="TO FIRST B",
    ),
    all_case(
        "skip_to_next_row_all_rows",
        "aab",
        "A+ B",
        "1A 2A 3B | 2A 3B",
        "rows 2-3 appear in both matches",
        skip="TO NEXT ROW",
    ),
    one_case(
        "skip_to_next_vs_first",
        "ccaab",
        "X{2} A+ B",
        "1:1-5 2:2-5",
        "TO NEXT ROW: the search from row 2 finds X X A B (rows 2-5)",
        skip="TO NEXT ROW",
    ),
    one_case(
        "skip_to_first_a",
        "ccaab",
        "X{2} A+ B",
        "1:1-5",
        "TO FIRST A jumps to row 3; neither row 3 nor row 4 starts a match",
        skip="TO FIRST A",
    ),
    one_case(
        "skip_to_last_a",
        "caaabab",
        "X A+ B",
        "1:1-5 2:5-7",
        "after 1-5 the search resumes at the last A (row 4), fails there, finds 5-7",
        skip="TO LAST A",
    ),
    one_case(
        "skip_to_a_means_last",
        "caaabab",
        "X A+ B",
        "1:1-5 2:5-7",
        "SKIP TO A is SKIP TO LAST A",
        skip="TO A",
    ),
    one_case(
        "skip_to_next_row_many",
        "caaabab",
        "X A+ B",
        "1:1-5 2:2-5 3:3-5 4:5-7",
        "every row that can start a match does",
        skip="TO NEXT ROW",
    ),
    one_case(
        "skip_to_first_a_many",
        "caaabab",
        "X A+ B",
        "1:1-5 2:2-5 3:3-5 4:5-7",
        "the first A is always the second row of the match",
        skip="TO FIRST A",
    ),
    one_case(
        "skip_to_last_b",
        "caaabab",
        "X A+ B",
        "1:1-5 2:5-7",
        "resume at row 5, the B of the first match",
        skip="TO LAST B",
    ),
    one_case(
        "skip_to_last_a_chain",
        "abaaba",
        "A B* A",
        "1:1-3 2:3-4 3:4-6",
        "each match ends with an A that starts the next",
        skip="TO LAST A",
    ),
    one_case(
        "skip_past_last_row_chain",
        "abaaba",
        "A B* A",
        "1:1-3 2:4-6",
        "rows 3 and 4 cannot share matches",
    ),
    error_case(
        "skip_to_first_row_error",
        "ab",
        "A B",
        matchsql.ExecutionError,
        "TO FIRST A would restart at the match's own first row: an error",
        skip="TO FIRST A",
    ),
    error_case(
        "skip_to_last_first_row_error",
        "aab",
        "A+ B",
        matchsql.ExecutionError,
        "match 1-3 resumes at row 2; match 2-3 has its last A at its first row: error",
        skip="TO LAST A",
    ),
    error_case(
        "skip_to_absent_variable_error",
        "ac",
        "A B? C",
        matchsql.ExecutionError,
        "B is not present in the match 1-2, so there is nowhere to skip to",
        skip="TO B",
    ),
    one_case(
        "skip_after_empty_match_moves_on",
        "ba",
        "A*",
        "1:- 2:2-2",
        "after an empty match the search always resumes at the next row",
        skip="PAST LAST ROW",
    ),
    one_case(
        "skip_to_next_after_empty",
        "ba",
        "A*",
        "1:- 2:2-2",
        "same with TO NEXT ROW",
        skip="TO NEXT ROW",
    ),
    all_case(
        "skip_to_next_row_with_unmatched",
        "abab",
        "A B",
        "1A 2B | 3A 4B",
        "rows 2 and 4 are part of matches, so they are not unmatched",
        skip="TO NEXT ROW",
        mode="WITH UNMATCHED ROWS",
    ),
    all_case(
        "skip_to_next_row_unmatched_rows",
        "abbab",
        "A B",
        "1A 2B | 3~ | 4A 5B",
        "row 2 was matched already; row 3 never was",
        skip="TO NEXT ROW",
        mode="WITH UNMATCHED ROWS",
    ),
    one_case(
        "skip_to_next_row_all_overlaps",
        "aaaa",
        "A{2}",
        "1:1-2 2:2-3 3:3-4",
        "every row but the last starts a pair",
        skip="TO NEXT ROW",
    ),
    one_case(
        "skip_to_next_row_reluctant",
        "aaa",
        "A+?",
        "1:1-1 2:2-2 3:3-3",
        "reluctant with TO NEXT ROW: same as PAST LAST ROW here",
        skip="TO NEXT ROW",
    ),
    one_case(
        "skip_to_last_x_undefined",
        "aaa",
        "X X B?",
        "1:1-2 2:2-3",
        "TO LAST X resumes at the second row of each match; B? never finds a 'b'",
        skip="TO LAST X",
    ),
    one_case(
        "skip_to_first_second_variable",
        "abab",
        "A B",
        "1:1-2 2:3-4",
        "TO FIRST B resumes at the 'b' row, which starts nothing",
        skip="TO FIRST B",
    ),
]

CASES: list[Case] = QUANTIFIERS + LABELLING + PERMUTE + ANCHORS + EMPTY + EXCLUSION + SKIP
