"""Row pattern AST -> automaton program for the thread VM.

The program is a flat list of instructions in the style of a backtracking
regex VM (Thompson/Pike; the model is Trino's row pattern matcher): ``SPLIT``
forks a thread with the first target preferred, so running threads in order
of creation enumerates matches in the standard's preference order without
any search. Keeping the program flat and tiny makes it easy to check by eye
and cheap to interpret, and the same program is the input of faster paths.

Compilation goes through a small IR (:func:`lower`) that already encodes the
desugaring choices: ``PERMUTE`` becomes an alternation of permutations in
lexicographic order of list position, bounded quantifiers are unrolled into
nested optionals, and unbounded loops get an empty-iteration guard so that a
loop iteration that consumed no row is never repeated (which both ends
otherwise infinite epsilon loops and matches the standard's rule).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias

from matchsql.config import MAX_PATTERN_SIZE
from matchsql.errors import LimitExceededError, SemanticError
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

#: Unrolling a bounded quantifier copies its body; beyond this many
#: instructions a pattern is refused instead of building a huge program.
#: Statements are held to the ``max_pattern_size`` setting (matchsql/config.py)
#: before planning; this is the cap for any caller, whatever the setting.
MAX_PROGRAM_SIZE = MAX_PATTERN_SIZE

#: PERMUTE of n items expands to n! orders: beyond this arity no program
#: size setting could hold it, and n! itself gets slow to compute.
MAX_PERMUTE = 10


class Op(Enum):
    """Instruction kinds. Only ``LABEL`` and ``END_ANCHOR`` wait for input."""

    LABEL = "label"  # consume the next row if it satisfies DEFINE of ``var``
    SPLIT = "split"  # fork: continue at ``target`` (preferred), then ``alt``
    JUMP = "jump"  # continue at ``target``
    BEGIN_ITER = "begin_iter"  # an iteration of loop ``slot`` starts here
    END_ITER = "end_iter"  # loop back to ``target`` unless the iteration was empty
    START_ANCHOR = "^"  # pass only at the partition's first row
    END_ANCHOR = "$"  # pass only after the partition's last row (waits for finish)
    DONE = "done"  # a match ends here


@dataclass(frozen=True)
class Instruction:
    op: Op
    var: str | None = None  # LABEL: the primary variable
    excluded: bool = False  # LABEL: inside ``{- -}``, matched but not output
    target: int = -1  # SPLIT/JUMP/END_ITER: where to go (preferred)
    alt: int = -1  # SPLIT: the second choice; END_ITER: the loop exit
    slot: int = -1  # BEGIN_ITER/END_ITER: which loop's empty-iteration flag

    def __str__(self) -> str:
        op = self.op
        if op is Op.LABEL:
            return f"label {self.var}" + (" (excluded)" if self.excluded else "")
        if op is Op.SPLIT:
            return f"split {self.target}, {self.alt}"
        if op is Op.JUMP:
            return f"jump {self.target}"
        if op is Op.BEGIN_ITER:
            return f"begin_iter #{self.slot}"
        if op is Op.END_ITER:
            return f"end_iter #{self.slot} loop {self.target} exit {self.alt}"
        return op.value


@dataclass
class Program:
    """Instructions plus the facts about them that the matchers need."""

    instructions: list[Instruction]
    loops: int  # number of empty-iteration slots (one per unbounded loop)
    variables: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.instructions)

    def __getitem__(self, pc: int) -> Instruction:
        return self.instructions[pc]

    def dump(self) -> str:
        """One numbered instruction per line, for EXPLAIN and tests."""
        return "\n".join(f"{pc:3d}: {ins}" for pc, ins in enumerate(self.instructions))


# -- IR ---------------------------------------------------------------------------------
#
# The IR is the pattern after desugaring: sequences, ordered choices, optional
# and star (greedy or reluctant), labels and anchors. It is what the program
# emitter and any other backend consume.


@dataclass(frozen=True)
class IRLabel:
    var: str
    excluded: bool


@dataclass(frozen=True)
class IRAnchor:
    kind: AnchorKind


@dataclass(frozen=True)
class IRSeq:
    items: tuple


@dataclass(frozen=True)
class IRChoice:
    items: tuple  # ordered: the first is preferred


@dataclass(frozen=True)
class IROptional:
    body: object
    greedy: bool


@dataclass(frozen=True)
class IRStar:
    body: object
    greedy: bool


IRNode: TypeAlias = IRLabel | IRAnchor | IRSeq | IRChoice | IROptional | IRStar


def lower(node: PatternNode, excluded: bool = False):
    """Desugar a pattern AST into IR (see the module docstring for the rules)."""
    if isinstance(node, Label):
        return IRLabel(node.name, excluded)
    if isinstance(node, Empty):
        return IRSeq(())
    if isinstance(node, Anchor):
        return IRAnchor(node.kind)
    if isinstance(node, Concatenation):
        return IRSeq(tuple(lower(item, excluded) for item in node.items))
    if isinstance(node, Alternation):
        return IRChoice(tuple(lower(item, excluded) for item in node.items))
    if isinstance(node, Permutation):
        # itertools.permutations yields orders lexicographically by position,
        # which is exactly the preference order the standard gives PERMUTE.
        items = [lower(item, excluded) for item in node.items]
        orders = tuple(IRSeq(tuple(order)) for order in itertools.permutations(items))
        return orders[0] if len(orders) == 1 else IRChoice(orders)
    if isinstance(node, Exclusion):
        return lower(node.child, True)
    if isinstance(node, Quantified):
        body = lower(node.child, excluded)
        if node.max is not None and node.max < node.min:
            raise SemanticError(
                f"quantifier {{{node.min},{node.max}}}: the maximum is below the minimum",
                offset=node.offset,
            )
        required = [body] * node.min
        tail: list[IRNode]
        if node.max is None:
            tail = [IRStar(body, node.greedy)]
        else:
            # x{0,k} = (x (x (...)?)?)? : nested optionals keep preference
            # per iteration exactly as a counted loop would.
            tail = []
            optional: IROptional | None = None
            for _ in range(node.max - node.min):
                inner = body if optional is None else IRSeq((body, optional))
                optional = IROptional(inner, node.greedy)
            if optional is not None:
                tail = [optional]
        return IRSeq(tuple(required + tail))
    raise SemanticError(f"unsupported row pattern element {type(node).__name__}")


# -- emitter ----------------------------------------------------------------------------


class _Emitter:
    def __init__(self, limit: int = MAX_PROGRAM_SIZE) -> None:
        self.code: list[Instruction] = []
        self.loops = 0
        self.limit = limit

    def here(self) -> int:
        return len(self.code)

    def put(self, ins: Instruction) -> int:
        if len(self.code) >= self.limit:
            raise SemanticError(_too_large(self.limit))
        self.code.append(ins)
        return len(self.code) - 1

    def patch(self, at: int, **changes) -> None:
        old = self.code[at]
        self.code[at] = Instruction(
            op=changes.get("op", old.op),
            var=old.var,
            excluded=old.excluded,
            target=changes.get("target", old.target),
            alt=changes.get("alt", old.alt),
            slot=changes.get("slot", old.slot),
        )

    def emit(self, ir) -> None:
        if isinstance(ir, IRLabel):
            self.put(Instruction(Op.LABEL, var=ir.var, excluded=ir.excluded))
        elif isinstance(ir, IRAnchor):
            op = Op.START_ANCHOR if ir.kind is AnchorKind.START else Op.END_ANCHOR
            self.put(Instruction(op))
        elif isinstance(ir, IRSeq):
            for item in ir.items:
                self.emit(item)
        elif isinstance(ir, IRChoice):
            jumps = []
            for k, item in enumerate(ir.items):
                if k < len(ir.items) - 1:
                    split = self.put(Instruction(Op.SPLIT))
                    self.emit(item)
                    jumps.append(self.put(Instruction(Op.JUMP)))
                    self.patch(split, target=split + 1, alt=self.here())
                else:
                    self.emit(item)
            for jump in jumps:
                self.patch(jump, target=self.here())
        elif isinstance(ir, IROptional):
            # x{0,k} lowers to k optionals nested in a chain; walking the chain
            # in a loop keeps emission depth independent of k. Every split of
            # the chain skips to its end.
            splits = []
            link: IROptional | None = ir
            while link is not None:
                splits.append(self.put(Instruction(Op.SPLIT)))
                link = self._emit_link(link)
            end = self.here()
            for split in splits:
                self._order(split, split + 1, end, ir.greedy)
        elif isinstance(ir, IRStar):
            slot = self.loops
            self.loops += 1
            head = self.put(Instruction(Op.SPLIT))
            self.put(Instruction(Op.BEGIN_ITER, slot=slot))
            self.emit(ir.body)
            end = self.put(Instruction(Op.END_ITER, slot=slot, target=head))
            exit_pc = self.here()
            self.patch(end, alt=exit_pc)
            self._order(head, head + 1, exit_pc, ir.greedy)
        else:  # pragma: no cover - lower() only builds the classes above
            raise TypeError(ir)

    def _emit_link(self, optional: IROptional) -> IROptional | None:
        """Emit the body of one optional of a chain; the next optional of the chain, if any."""
        body = optional.body
        if (
            isinstance(body, IRSeq)
            and len(body.items) == 2
            and isinstance(body.items[1], IROptional)
            and body.items[1].greedy == optional.greedy
        ):
            self.emit(body.items[0])
            return body.items[1]
        self.emit(body)
        return None

    def _order(self, split: int, body: int, skip: int, greedy: bool) -> None:
        """Greedy prefers entering the body, reluctant prefers skipping it."""
        if greedy:
            self.patch(split, target=body, alt=skip)
        else:
            self.patch(split, target=skip, alt=body)


def program_size(pattern: PatternNode, sql: str | None = None) -> int:
    """Instructions :func:`compile_pattern` would emit for ``pattern`` (without ``DONE``).

    Computed from the counts alone, bottom up with an explicit stack, so that
    ``A{99999999}`` or ``PERMUTE`` of many items is measured in microseconds
    and refused before anything is built. Follows :func:`lower` and
    :class:`_Emitter` rule for rule.
    """
    sizes: list[int] = []  # of the finished nodes whose parent is not finished yet
    stack: list[tuple[PatternNode, bool]] = [(pattern, False)]
    while stack:
        node, expanded = stack.pop()
        children = node.children()
        if not expanded and children:
            if isinstance(node, Permutation) and len(children) > MAX_PERMUTE:
                raise SemanticError(
                    f"PERMUTE of {len(children)} items: at most {MAX_PERMUTE} (it expands "
                    f"to all {len(children)}! orders)",
                    sql=sql,
                    offset=node.offset,
                )
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(children))
            continue
        inner = sizes[len(sizes) - len(children) :]
        del sizes[len(sizes) - len(children) :]
        if isinstance(node, (Label, Anchor)):
            size = 1
        elif isinstance(node, Empty):
            size = 0
        elif isinstance(node, (Concatenation, Exclusion)):
            size = sum(inner)
        elif isinstance(node, Alternation):
            size = sum(inner) + 2 * (len(inner) - 1)
        elif isinstance(node, Permutation):
            orders = math.factorial(len(inner))
            size = orders * sum(inner) + 2 * (orders - 1)
        elif isinstance(node, Quantified):
            body = inner[0]
            if node.max is None:
                size = node.min * body + body + 3  # split, begin_iter, end_iter
            else:
                size = node.min * body + max(0, node.max - node.min) * (body + 1)
        else:
            raise SemanticError(f"unsupported row pattern element {type(node).__name__}")
        sizes.append(size)
    return sizes[0]


def check_pattern_size(
    pattern: PatternNode, limit: int = MAX_PROGRAM_SIZE, sql: str | None = None
) -> None:
    """Refuse a pattern whose program would exceed ``limit`` instructions, before building it."""
    limit = min(limit, MAX_PROGRAM_SIZE)
    if program_size(pattern, sql) > limit:
        raise SemanticError(_too_large(limit), sql=sql, offset=getattr(pattern, "offset", None))


def check_first_rows(pattern: PatternNode, max_threads: int, sql: str | None = None) -> None:
    """Refuse a pattern whose every match attempt needs more than ``max_threads`` live
    threads on its first row: each variable a match may begin with is a thread there
    (``(V0 | V1 | ... | V19999) B`` starts 20,000), so the attempt at the first row of
    any input would fail with that error after the whole pattern was built and run."""
    starts = _first_labels(pattern)
    if starts > max_threads:
        raise LimitExceededError(
            f"row pattern matching needs more than max_threads={max_threads} live threads: "
            f"a match attempt may begin with any of {starts:,} pattern variables; simplify "
            "the pattern or raise the limit with SET max_threads = ...",
            sql=sql,
            offset=getattr(pattern, "offset", None),  # every node's dataclass has its own
        )


def _first_labels(node: PatternNode) -> int:
    """How many variables (label positions) a match of ``node`` may begin with, at least
    (PERMUTE counts each item once, not once per order)."""
    if isinstance(node, Label):
        return 1
    if isinstance(node, Exclusion):
        return _first_labels(node.child)
    if isinstance(node, Quantified):
        return 0 if node.max == 0 else _first_labels(node.child)
    if isinstance(node, Alternation | Permutation):
        return sum(_first_labels(item) for item in node.items)
    if isinstance(node, Concatenation):
        total = 0
        for item in node.items:
            total += _first_labels(item)
            if not _nullable(item):
                break
        return total
    return 0  # an anchor or ()


def _nullable(node: PatternNode) -> bool:
    """Whether ``node`` may match no row."""
    if isinstance(node, Label):
        return False
    if isinstance(node, Exclusion):
        return _nullable(node.child)
    if isinstance(node, Quantified):
        return node.min == 0 or _nullable(node.child)
    if isinstance(node, Alternation):
        return any(_nullable(item) for item in node.items)
    if isinstance(node, Concatenation | Permutation):
        return all(_nullable(item) for item in node.items)
    return True


def _too_large(limit: int) -> str:
    return (
        f"row pattern too large: its automaton needs more than {limit} instructions "
        "after unrolling bounded quantifiers and PERMUTE (limit max_pattern_size; "
        "SET max_pattern_size = ... to raise it)"
    )


def compile_pattern(pattern: PatternNode, limit: int = MAX_PROGRAM_SIZE) -> Program:
    """Compile a row pattern to a program whose last instruction is ``DONE``.

    ``limit`` is checked on the pattern first (see :func:`program_size`).
    """
    check_pattern_size(pattern, limit)
    emitter = _Emitter(limit + 1)  # DONE comes on top
    emitter.emit(lower(pattern))
    emitter.put(Instruction(Op.DONE))
    return Program(emitter.code, emitter.loops, pattern.variables())
