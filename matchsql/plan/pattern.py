"""Row pattern AST: the regular expression inside ``PATTERN ( ... )``.

Plain frozen dataclasses so that patterns compare by value (round-trip tests)
and can be hashed (automaton caches). ``offset`` is the character offset of the
node in the statement text; it only serves error messages and does not take
part in equality.

``to_sql`` renders a pattern back to text that parses to an equal tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True)
class PatternNode:
    """Base class of all row pattern nodes."""

    def to_sql(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def children(self) -> tuple[PatternNode, ...]:
        return ()

    def walk(self) -> Iterator[PatternNode]:
        """Yield this node and all descendants, depth first, left to right."""
        yield self
        for child in self.children():
            yield from child.walk()

    def variables(self) -> list[str]:
        """Primary pattern variables in order of first appearance."""
        seen: dict[str, None] = {}
        for node in self.walk():
            if isinstance(node, Label):
                seen.setdefault(node.name, None)
        return list(seen)


@dataclass(frozen=True)
class Label(PatternNode):
    """A primary pattern variable such as ``A`` (names are upper-cased unless quoted)."""

    name: str
    offset: int | None = field(default=None, compare=False)

    def to_sql(self) -> str:
        if self.name.isidentifier() and self.name.upper() == self.name:
            return self.name
        return '"' + self.name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Empty(PatternNode):
    """The empty pattern ``()``: matches zero rows."""

    offset: int | None = field(default=None, compare=False)

    def to_sql(self) -> str:
        return "()"


class AnchorKind(Enum):
    START = "^"
    END = "$"


@dataclass(frozen=True)
class Anchor(PatternNode):
    """``^`` (partition start) or ``$`` (partition end); matches zero rows."""

    kind: AnchorKind
    offset: int | None = field(default=None, compare=False)

    def to_sql(self) -> str:
        return self.kind.value


@dataclass(frozen=True)
class Concatenation(PatternNode):
    """``A B C``: items in sequence (at least two)."""

    items: tuple[PatternNode, ...]
    offset: int | None = field(default=None, compare=False)

    def children(self) -> tuple[PatternNode, ...]:
        return self.items

    def to_sql(self) -> str:
        return " ".join(_wrap(item, Concatenation) for item in self.items)


@dataclass(frozen=True)
class Alternation(PatternNode):
    """``A | B``: the left branch is preferred (at least two items)."""

    items: tuple[PatternNode, ...]
    offset: int | None = field(default=None, compare=False)

    def children(self) -> tuple[PatternNode, ...]:
        return self.items

    def to_sql(self) -> str:
        return " | ".join(_wrap(item, Alternation) for item in self.items)


@dataclass(frozen=True)
class Permutation(PatternNode):
    """``PERMUTE(A, B, C)``: all orders, preferred lexicographically by list position."""

    items: tuple[PatternNode, ...]
    offset: int | None = field(default=None, compare=False)

    def children(self) -> tuple[PatternNode, ...]:
        return self.items

    def to_sql(self) -> str:
        return "PERMUTE(" + ", ".join(item.to_sql() for item in self.items) + ")"


@dataclass(frozen=True)
class Exclusion(PatternNode):
    """``{- ... -}``: rows are matched but left out of ALL ROWS PER MATCH output."""

    child: PatternNode
    offset: int | None = field(default=None, compare=False)

    def children(self) -> tuple[PatternNode, ...]:
        return (self.child,)

    def to_sql(self) -> str:
        return "{- " + self.child.to_sql() + " -}"


@dataclass(frozen=True)
class Quantified(PatternNode):
    """``child{min,max}``; ``max`` None is unbounded; ``greedy`` False for reluctant ``?``."""

    child: PatternNode
    min: int
    max: int | None
    greedy: bool = True
    offset: int | None = field(default=None, compare=False)

    def children(self) -> tuple[PatternNode, ...]:
        return (self.child,)

    def quantifier_sql(self) -> str:
        lo, hi = self.min, self.max
        if (lo, hi) == (0, None):
            text = "*"
        elif (lo, hi) == (1, None):
            text = "+"
        elif (lo, hi) == (0, 1):
            text = "?"
        elif hi is None:
            text = f"{{{lo},}}"
        elif lo == hi:
            text = f"{{{lo}}}"
        else:
            text = f"{{{lo},{hi}}}"
        return text if self.greedy else text + "?"

    def to_sql(self) -> str:
        return _wrap(self.child, Quantified) + self.quantifier_sql()


def _wrap(node: PatternNode, parent: type[PatternNode]) -> str:
    """Parenthesise ``node`` where precedence inside ``parent`` requires it."""
    text = node.to_sql()
    if isinstance(node, Alternation) and parent is not Alternation:
        return f"({text})"
    if isinstance(node, Concatenation) and parent is Quantified:
        return f"({text})"
    if isinstance(node, Quantified) and parent is Quantified:
        return f"({text})"
    return text
