"""The pattern compiler: IR desugaring and the emitted program."""

from __future__ import annotations

import pytest

from matchsql.engine.program import (
    IRChoice,
    IRLabel,
    IRSeq,
    Op,
    check_pattern_size,
    compile_pattern,
    lower,
    program_size,
)
from matchsql.errors import SemanticError
from matchsql.plan.pattern import Label, Quantified

from .specs import pattern


def ops(text: str) -> list[str]:
    return [str(ins) for ins in compile_pattern(pattern(text)).instructions]


def test_concatenation_and_plus() -> None:
    # B+ = B B*: one required copy, then a greedy loop preferring the body (3)
    # over the exit (6); the loop's iteration is guarded against being empty.
    assert ops("A B+ C") == [
        "label A",
        "label B",
        "split 3, 6",
        "begin_iter #0",
        "label B",
        "end_iter #0 loop 2 exit 6",
        "label C",
        "done",
    ]


def test_alternation_prefers_left() -> None:
    assert ops("A | B") == ["split 1, 3", "label A", "jump 4", "label B", "done"]


def test_reluctant_star_prefers_exit() -> None:
    # The split's preferred target is the exit (4), the body second.
    assert ops("A*?") == [
        "split 4, 1",
        "begin_iter #0",
        "label A",
        "end_iter #0 loop 0 exit 4",
        "done",
    ]


def test_bounded_quantifier_unrolled() -> None:
    # A{2,3}: two required copies and one greedy optional.
    assert ops("A{2,3}") == ["label A", "label A", "split 3, 4", "label A", "done"]
    # A{1,3}?: reluctant optionals prefer skipping; nested so a 3rd needs a 2nd.
    assert ops("A{1,3}?") == ["label A", "split 5, 2", "label A", "split 5, 4", "label A", "done"]


def test_nested_optionals_shape() -> None:
    program = compile_pattern(pattern("A{0,2}"))
    # split(body, exit) ; A ; split(body, exit) ; A ; done
    assert [i.op for i in program.instructions] == [Op.SPLIT, Op.LABEL, Op.SPLIT, Op.LABEL, Op.DONE]
    assert program[0].alt == 4 and program[2].alt == 4


def test_permute_is_lexicographic_alternation() -> None:
    ir = lower(pattern("PERMUTE(A, B, C)"))
    assert isinstance(ir, IRChoice)
    orders = ["".join(label.var for label in seq.items) for seq in ir.items]
    assert orders == ["ABC", "ACB", "BAC", "BCA", "CAB", "CBA"]


def test_exclusion_marks_labels() -> None:
    ir = lower(pattern("A {- B C -} D"))
    assert ir == IRSeq(
        (IRLabel("A", False), IRSeq((IRLabel("B", True), IRLabel("C", True))), IRLabel("D", False))
    )
    assert ops("^A {- B -} $") == ["^", "label A", "label B (excluded)", "$", "done"]


def test_variables_in_order() -> None:
    assert compile_pattern(pattern("B (A | C)* B")).variables == ["B", "A", "C"]


def test_bad_bounds_rejected() -> None:
    with pytest.raises(SemanticError):
        compile_pattern(Quantified(Label("A"), 3, 2))


@pytest.mark.parametrize(
    "text",
    [
        "A",
        "A B+ C",
        "A | B | C",
        "A*? B{2,5} (C | D)+",
        "PERMUTE(A, B | C, D*)",
        "^ A {- B{0,3} -} $",
        "((A{1,3}){2}){0,2}",
        "()",
        "(A B{3,}?)*",
    ],
)
def test_program_size_is_the_emitted_size(text: str) -> None:
    node = pattern(text)
    assert program_size(node) == len(compile_pattern(node)) - 1  # without DONE


def test_huge_patterns_refused_before_building() -> None:
    # Each would take minutes or all memory to build; measuring takes microseconds.
    for text in (
        "A{99999999}",
        "A{0,99999999}",
        "A{99999999,}",
        "((A{1,50}){1,50}){1,50}",
        "PERMUTE(A, B, C, D, E, F, G, H, I)",
    ):
        with pytest.raises(SemanticError, match=r"row pattern too large.*limit max_pattern_size"):
            check_pattern_size(pattern(text), 100_000)
    with pytest.raises(SemanticError, match=r"PERMUTE of 11 items: at most 10"):
        program_size(pattern("PERMUTE(A, B, C, D, E, F, G, H, I, J, K)"))


def test_long_bounded_quantifier_compiles_without_deep_recursion() -> None:
    # A{1,5000} unrolls into 4999 nested optionals; emission walks the chain.
    program = compile_pattern(pattern("A{1,5000} B"))
    assert len(program) == 1 + 2 * 4999 + 2
    assert program[1].op is Op.SPLIT and program[1].alt == len(program) - 2
