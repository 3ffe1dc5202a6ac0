"""Thread VM: runs a program over the rows of one match attempt.

A match attempt starts at one row and advances all its threads in lock step,
one row at a time (a Pike VM). Threads are kept in preference order, so the
first thread that reaches ``DONE`` in a step is the preferred match among
those ending there, and every thread behind it can only find less preferred
matches: in the standard mode they are cut at once.

Each thread carries its history (row -> variable labels) as a shared linked
list, so forking is O(1). Threads at the same program state whose histories
look the same to every DEFINE condition have identical futures; only the
first (preferred) of them is kept. What "look the same" means comes from
:class:`~matchsql.fsm.expressions.HistoryUse`: with DEFINEs that read no
history the state alone decides, which makes ``(A|B)*(A|B)*C`` linear.

The VM knows nothing about rows or expressions: the caller passes a
``define(var, history, key, row)`` callback. It is resumable by construction: the
caller calls :meth:`Attempt.step` whenever the next row is available and
:meth:`Attempt.end_of_partition` when the partition has ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from matchsql.errors import LimitExceededError
from matchsql.fsm.expressions import HistoryUse
from matchsql.fsm.program import Op, Program


class Node:
    """One row of a thread's history: a cons cell pointing at the previous row."""

    __slots__ = ("parent", "var", "excluded", "length")

    def __init__(self, parent: Node | None, var: str, excluded: bool) -> None:
        self.parent = parent
        self.var = var
        self.excluded = excluded
        self.length = 1 if parent is None else parent.length + 1


def history_length(node: Node | None) -> int:
    return 0 if node is None else node.length


def walk_back(node: Node | None) -> Iterator[Node]:
    while node is not None:
        yield node
        node = node.parent


def history_lists(node: Node | None) -> tuple[list[str], list[bool]]:
    """The labels and exclusion flags of a history, first row first."""
    nodes = list(walk_back(node))
    nodes.reverse()
    return [n.var for n in nodes], [n.excluded for n in nodes]


class HistoryLabels(Sequence[str]):
    """A thread's labels plus one tentative label, without copying the history.

    DEFINE conditions mostly look backwards (``A.x`` is the last row of A), so
    reversed iteration walks the linked list directly; anything else
    materialises the list once. When the thread's :class:`HistoryKey` already
    tracks the last rows of a variable set, :meth:`last_rows` answers from it
    without walking at all.
    """

    __slots__ = ("_tail", "_extra", "_list", "_row", "_key", "_summary")

    def __init__(self, tail: Node | None, extra: str, row: int = -1, key: tuple = (),
                 summary: HistoryKey | None = None) -> None:
        self._tail = tail
        self._extra = extra
        self._list: list[str] | None = None
        self._row = row
        self._key = key
        self._summary = summary

    def last_rows(self, vars_: frozenset[str]) -> tuple[tuple[int, ...], bool] | None:
        """Most recent absolute rows mapped to ``vars_`` (ascending), and whether that
        is all of them; None when the key does not track ``vars_``."""
        if self._summary is None:
            return None
        found = self._summary.recent(self._key, vars_)
        if found is None:
            return None
        rows, exhaustive = found
        if self._extra in vars_:
            rows = rows + (self._row,)
        return rows, exhaustive

    def __len__(self) -> int:
        return history_length(self._tail) + 1

    def _materialise(self) -> list[str]:
        if self._list is None:
            labels, _ = history_lists(self._tail)
            labels.append(self._extra)
            self._list = labels
        return self._list

    def __getitem__(self, index):  # type: ignore[override]
        return self._materialise()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._materialise())

    def __reversed__(self) -> Iterator[str]:
        if self._list is not None:
            yield from reversed(self._list)
            return
        yield self._extra
        for node in walk_back(self._tail):
            yield node.var


# -- observable history keys --------------------------------------------------------------


class HistoryKey:
    """Incrementally maintained summary of a history as far as DEFINEs can observe it.

    The key is a tuple with one component per observation in a
    :class:`HistoryUse`; equal keys mean DEFINE cannot tell the histories
    apart. Components are kept small (last/first k rows, counts) where the
    observation allows it.
    """

    def __init__(self, use: HistoryUse) -> None:
        self.parts: list[tuple] = []
        for s, k in sorted(use.last.items(), key=_set_order):
            self.parts.append(("last", s, k + 1, s in use.labels))
        for s, k in sorted(use.first.items(), key=_set_order):
            self.parts.append(("first", s, k + 1, s in use.labels))
        for s in sorted(use.every, key=_set_order):
            self.parts.append(("every", s, 0, s in use.labels))
        for s in sorted(use.count, key=_set_order):
            self.parts.append(("count", s, 0, False))
        if use.all_labels:
            self.parts.append(("labels", None, 0, True))
        self.initial: tuple = tuple(0 if kind == "count" else () for kind, *_ in self.parts)

    def recent(self, key: tuple, vars_: frozenset[str]) -> tuple[tuple[int, ...], bool] | None:
        """The tracked last rows of ``vars_`` in ``key`` and whether they are all of them."""
        for i, (kind, s, k, with_label) in enumerate(self.parts):
            if kind == "last" and s == vars_:
                entries = key[i]
                rows = tuple(e[0] for e in entries) if with_label else entries
                return rows, len(entries) < k
        return None

    @property
    def trivial(self) -> bool:
        return not self.parts

    def advance(self, key: tuple, row: int, var: str) -> tuple:
        if not self.parts:
            return key
        out = list(key)
        for i, (kind, vars_, k, with_label) in enumerate(self.parts):
            if vars_ is not None and var not in vars_:
                continue
            entry = (row, var) if with_label else row
            if kind == "last":
                out[i] = (key[i] + (entry,))[-k:]
            elif kind == "first":
                if len(key[i]) < k:
                    out[i] = key[i] + (entry,)
            elif kind == "count":
                out[i] = key[i] + 1
            else:  # every / labels
                out[i] = key[i] + (entry,)
        return tuple(out)


def _set_order(item) -> tuple:
    s = item[0] if isinstance(item, tuple) else item
    return tuple(sorted(s))


# -- threads and attempts ---------------------------------------------------------------------


class Thread:
    """A partial match: where it is in the program and what it has matched."""

    __slots__ = ("pc", "flags", "history", "key", "preferred")

    def __init__(self, pc: int, flags: int, history: Node | None, key: tuple,
                 preferred: bool) -> None:
        self.pc = pc
        self.flags = flags  # bit i: loop i's current iteration has consumed no row yet
        self.history = history
        self.key = key  # HistoryKey summary of ``history``
        self.preferred = preferred  # not behind any completed match (ALL MATCHES mode)

    def moved(self, pc: int, flags: int | None = None) -> Thread:
        return Thread(pc, self.flags if flags is None else flags, self.history, self.key,
                      self.preferred)


@dataclass
class Completion:
    """A complete match found by an attempt."""

    history: Node | None
    end: int  # absolute index of the last row (start - 1 for an empty match)


Define = Callable[[str, Node | None, tuple, int], bool]  # (var, history, key, row)


class Attempt:
    """All threads of the match attempt starting at row ``start``.

    ``best`` is the standard's preferred match so far. With ``all_ends`` the
    attempt also keeps, for every end row, the preferred match ending there
    (``by_end``), and lets lower-preference threads run on to find them.
    """

    def __init__(self, program: Program, start: int, define: Define, history_key: HistoryKey,
                 max_threads: int, all_ends: bool = False) -> None:
        self.program = program
        self.start = start
        self.define = define
        self.history_key = history_key
        self.max_threads = max_threads
        self.all_ends = all_ends
        self.best: Completion | None = None
        self.by_end: dict[int, Completion] = {}
        self.threads: list[Thread] = []
        self._demote = False
        self._ended = False  # set once the partition is known to end at the position
        # ALL MATCHES: per end row, how many waiting threads were ahead of the
        # thread that ended there (-1 once nothing can beat it any more).
        self._end_rank: dict[int, int] = {}
        self._finishing_index = 0
        seed = Thread(0, 0, None, history_key.initial, True)
        self._closure(seed, start, self.threads, set())
        self._check_limit(self.threads)

    @property
    def alive(self) -> bool:
        return bool(self.threads)

    def kill(self) -> None:
        """End the attempt without consuming more rows (e.g. a time window ran out)."""
        self.threads = []

    def step(self, row: int) -> None:
        """Consume row ``row`` (which must be the next one) in every live thread."""
        current, self.threads = self.threads, []
        seen: set = set()
        self._demote = False
        program, define = self.program, self.define
        for thread in current:
            ins = program[thread.pc]
            if ins.op is not Op.LABEL:
                continue  # a thread waiting at ``$`` dies: a row follows
            if not define(ins.var, thread.history, thread.key, row):
                continue
            node = Node(thread.history, ins.var, ins.excluded)
            key = self.history_key.advance(thread.key, row, ins.var)
            moved = Thread(thread.pc + 1, 0, node, key, thread.preferred)
            if self._closure(moved, row + 1, self.threads, seen):
                break  # a match ended here: every thread behind it is less preferred
        self._check_limit(self.threads)

    def end_of_partition(self, position: int) -> None:
        """The partition ended before row ``position``: threads waiting on ``$`` pass."""
        current, self.threads = self.threads, []
        seen: set = set()
        self._demote = False
        self._ended = True
        for index, thread in enumerate(current):
            self._finishing_index = index
            if self.program[thread.pc].op is Op.END_ANCHOR:
                if self._closure(thread.moved(thread.pc + 1), position, self.threads, seen):
                    break
        # Any thread still alive waits for a row that will never come.
        self.threads = []

    def _check_limit(self, threads: list[Thread]) -> None:
        if len(threads) > self.max_threads:
            raise LimitExceededError(
                f"row pattern matching needs more than max_threads={self.max_threads} live "
                f"threads for the match attempt at partition row {self.start + 1}; simplify "
                "the pattern or raise the limit with SET max_threads = ...")

    def _closure(self, thread: Thread, position: int, out: list[Thread], seen: set) -> bool:
        """Follow epsilon moves from ``thread`` at ``position`` (the next row to consume).

        Threads that wait for a row are appended to ``out`` in preference order.
        Returns True when, in the standard mode, a match completed and the caller
        must stop (everything after it is less preferred).
        """
        program = self.program
        stack = [thread]
        while stack:
            t = stack.pop()
            if self._demote:
                t.preferred = False
            state = (t.pc, t.flags, t.key)
            if state in seen:
                continue  # an equivalent, more preferred thread got here first
            seen.add(state)
            ins = program[t.pc]
            op = ins.op
            if op is Op.END_ANCHOR and self._ended:
                stack.append(t.moved(t.pc + 1))  # the partition has ended here
            elif op is Op.LABEL or op is Op.END_ANCHOR:
                out.append(t)
                if len(out) > self.max_threads:
                    self._check_limit(out)
            elif op is Op.SPLIT:
                stack.append(t.moved(ins.alt))
                stack.append(t.moved(ins.target))
            elif op is Op.JUMP:
                stack.append(t.moved(ins.target))
            elif op is Op.BEGIN_ITER:
                stack.append(t.moved(t.pc + 1, t.flags | (1 << ins.slot)))
            elif op is Op.END_ITER:
                bit = 1 << ins.slot
                if t.flags & bit:  # the iteration consumed nothing: never repeat it
                    stack.append(t.moved(ins.alt, t.flags & ~bit))
                else:
                    stack.append(t.moved(ins.target))
            elif op is Op.START_ANCHOR:
                if position == 0:
                    stack.append(t.moved(t.pc + 1))
            elif op is Op.DONE:
                if self._complete(t, position, len(out)):
                    return True
        return False

    def _complete(self, t: Thread, position: int, rank: int) -> bool:
        """Record a match; ``rank`` = how many waiting threads are more preferred."""
        done = Completion(t.history, position - 1)
        if not self.all_ends:
            self.best = done
            return True
        earlier = self._end_rank.get(done.end)
        if earlier is None:
            self.by_end[done.end] = done
            self._end_rank[done.end] = rank if not self._ended else -1
        elif self._ended and self._finishing_index < earlier:
            # A thread that waited on ``$`` was ahead of the thread that ended a
            # match at the same row during the last step: it is preferred.
            self.by_end[done.end] = done
            self._end_rank[done.end] = -1
        if t.preferred:
            self.best = done
            self._demote = True  # everything after this thread is less preferred
        return False
