"""The thesis' linear states of a row pattern (DejaVu thesis, section 4.3.1).

The Go4Risk statistics count tuples per state of a *linear* automaton of
singletons and stars; the matchers run the program of
:mod:`matchsql.engine.program`. This module maps one onto the other, so both the
matchers (which count) and the adaptive switch (which predicts) use the same
states without the matchers depending on the switch.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from matchsql.engine.program import compile_pattern
from matchsql.plan.pattern import (
    Alternation,
    Anchor,
    Concatenation,
    Empty,
    Exclusion,
    Label,
    PatternNode,
    Permutation,
    Quantified,
)


class StateKind(Enum):
    """The thesis' basic state types; Final holds no tuple and is not a state here."""

    SINGLETON = "singleton"
    STAR = "star"


@dataclass(frozen=True)
class StateSpec:
    """One state of the linearised automaton: the variable it tests and its type."""

    name: str
    kind: StateKind


def states_from_pattern(node: PatternNode) -> tuple[StateSpec, ...]:
    """The thesis' linear state sequence for a row pattern.

    The thesis only knows sequences of singletons and stars, so richer
    patterns are linearised: ``A+`` is ``A A*`` (the composite "Plus" state),
    ``A{n,m}`` is ``n`` singletons then a star when ``m > n``, ``A?`` a star;
    an alternation or permutation consumes one tuple first whichever branch
    wins, so it is one singleton named by its alternatives. Anchors and the
    empty pattern consume nothing and vanish.
    """
    if isinstance(node, Label):
        return (StateSpec(node.name, StateKind.SINGLETON),)
    if isinstance(node, Concatenation):
        return tuple(s for child in node.children() for s in states_from_pattern(child))
    if isinstance(node, Exclusion):
        return tuple(s for child in node.children() for s in states_from_pattern(child))
    if isinstance(node, (Alternation, Permutation)):
        names = "|".join(dict.fromkeys(node.variables()))
        return (StateSpec(names or "()", StateKind.SINGLETON),)
    if isinstance(node, Quantified):
        body = states_from_pattern(node.child)
        if not body:
            return ()
        required = body * node.min
        if node.max is not None and node.max == node.min:
            return required
        return required + tuple(StateSpec(s.name, StateKind.STAR) for s in body)
    if isinstance(node, (Anchor, Empty)):
        return ()
    raise TypeError(f"unknown pattern node {type(node).__name__}")


def label_states(node: PatternNode) -> tuple[tuple[StateSpec, ...], list[int]]:
    """The linear states of ``node`` and, per LABEL instruction of its program, its state.

    The matchers run the program of :mod:`matchsql.engine.program`, whose LABEL
    instructions are emitted in the order of the desugared pattern; this walk
    follows the same order so that a matcher can count a tuple evaluated at
    instruction ``pc`` against the thesis state the instruction belongs to.
    The states equal :func:`states_from_pattern`'s (a test pins that): every
    copy of a bounded quantifier's optional tail maps to its star states, and
    every label of an alternation or permutation to its one singleton.
    """
    states: list[StateSpec] = []
    ids = _label_ids(node, states, False)
    return tuple(states), ids


def _label_ids(node: PatternNode, states: list[StateSpec], star: bool) -> list[int]:
    kind = StateKind.STAR if star else StateKind.SINGLETON
    if isinstance(node, Label):
        states.append(StateSpec(node.name, kind))
        return [len(states) - 1]
    if isinstance(node, (Concatenation, Exclusion)):
        return [i for child in node.children() for i in _label_ids(child, states, star)]
    if isinstance(node, (Alternation, Permutation)):
        names = "|".join(dict.fromkeys(node.variables()))
        states.append(StateSpec(names or "()", kind))
        labels = sum(1 for ins in compile_pattern(node).instructions if ins.var is not None)
        return [len(states) - 1] * labels
    if isinstance(node, Quantified):
        ids: list[int] = []
        for _ in range(node.min):
            ids += _label_ids(node.child, states, star)
        if node.max is None or node.max > node.min:
            tail = _label_ids(node.child, states, True)
            ids += tail * (1 if node.max is None else node.max - node.min)
        return ids
    if isinstance(node, (Anchor, Empty)):
        return []
    raise TypeError(f"unknown pattern node {type(node).__name__}")
