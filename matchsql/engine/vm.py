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
:class:`~matchsql.expr.history.HistoryUse`: with DEFINEs that read no
history the state alone decides, which makes ``(A|B)*(A|B)*C`` linear.

The VM knows nothing about rows or expressions: the caller hands it one
test per pattern variable, ``test(history, key, row) -> bool``. It is
resumable by construction: the caller calls :meth:`Attempt.run` (or
:meth:`Attempt.step`) whenever rows are available and
:meth:`Attempt.end_of_partition` when the partition has ended.

Speed without a second semantics: the epsilon moves that follow a consumed
row (or start an attempt) depend only on the program counter, because a
consumed row resets every loop's empty-iteration flag and epsilon moves never
change the history. :class:`Closures` therefore runs the same depth-first
closure as :meth:`Attempt._closure` once per program counter and remembers the
waiting states and completions it reaches, in preference order; a step then
only walks that list. The per-step duplicate check on waiting states gives
the same result as checking every intermediate state: the set of states seen
in a step is always closed under epsilon moves, so a state below an already
seen one was seen too. ``$`` after the partition's end is rare and takes the
general closure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from matchsql.engine.program import Op, Program
from matchsql.errors import LimitExceededError
from matchsql.expr.history import HistoryUse
from matchsql.saved_state.state_format import state_class

#: One row of a thread's history: ``(parent, var, excluded)``, a cons cell
#: pointing at the previous row (None before the first row). Tuples, not
#: objects: one is made per row per surviving thread, so construction cost
#: is the VM's inner loop.
Node = tuple
History = Node | None


def history_length(node: History) -> int:
    n = 0
    while node is not None:
        n += 1
        node = node[0]
    return n


def walk_back(node: History) -> Iterator[Node]:
    while node is not None:
        yield node
        node = node[0]


def history_lists(node: History) -> tuple[list[str], list[bool]]:
    """The labels and exclusion flags of a history, first row first."""
    labels: list[str] = []
    excluded: list[bool] = []
    while node is not None:
        node, var, excl = node
        labels.append(var)
        excluded.append(excl)
    labels.reverse()
    excluded.reverse()
    return labels, excluded


@state_class(lower=list)  # a snapshot stores a plain list
class HistorySequence(Sequence):
    """The labels (``field`` 1) or exclusion flags (``field`` 2) of a finished
    history, built on first use.

    A reported match carries its labels, but ONE ROW PER MATCH measures such
    as ``MATCH_NUMBER()`` never look at them, and with ALL MATCHES a start row
    can report many long matches; the length alone is known for free.
    """

    __slots__ = ("_history", "_length", "_field", "_list")

    def __init__(self, history: History, length: int, field: int) -> None:
        self._history = history
        self._length = length
        self._field = field
        self._list: list | None = None

    def __len__(self) -> int:
        return self._length

    def _items(self) -> list:
        if self._list is None:
            items = []
            node, field = self._history, self._field
            while node is not None:
                items.append(node[field])
                node = node[0]
            items.reverse()
            self._list = items
            self._history = None
        return self._list

    def __getitem__(self, index):
        return self._items()[index]

    def __iter__(self) -> Iterator:
        return iter(self._items())

    def __reversed__(self) -> Iterator:
        return reversed(self._items())

    def __eq__(self, other: object) -> bool:
        return list(self) == (list(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]  # like the list it stands for

    def __repr__(self) -> str:
        return repr(self._items())

    def __reduce__(self) -> tuple:
        return list, (self._items(),)  # snapshots store a plain list


class HistoryLabels(Sequence[str]):
    """A thread's labels plus one tentative label, without copying the history.

    DEFINE conditions mostly look backwards (``A.x`` is the last row of A), so
    reversed iteration walks the linked list directly; anything else
    materialises the list once. When the thread's :class:`HistoryKey` already
    tracks the last rows of a variable set, :meth:`last_rows` answers from it
    without walking at all.
    """

    __slots__ = ("_tail", "_extra", "_list", "_row", "_key", "_summary", "_length", "_folds")

    def __init__(
        self,
        tail: History,
        extra: str,
        row: int = -1,
        key: tuple = (),
        summary: HistoryKey | None = None,
        length: int | None = None,
        folds: dict | None = None,
    ) -> None:
        self._tail = tail
        self._extra = extra
        self._list: list[str] | None = None
        self._row = row
        self._key = key
        self._summary = summary
        # Histories are contiguous from the attempt's start, so callers that
        # know the start pass the length instead of having it counted.
        self._length = length
        self._folds = folds

    def fold(self, token: object, initial: Any, step: Callable[[Any, int, str], Any]) -> Any:
        """``step`` folded over ``(row, label)`` of every row, the tentative one last.

        Running aggregates in DEFINE: the state after each history node is
        remembered in ``folds`` (one dict per attempt, per ``token``), and
        threads share their history's nodes, so each row is folded once per
        node instead of once per later row. A node is keyed by its id; the
        entry holds the node, so the id stays its own while the entry lives.
        """
        memo: dict = {}
        if self._folds is not None:
            memo = self._folds.setdefault(token, memo)
        state = initial
        pending: list[tuple[Node, int]] = []
        node, row = self._tail, self._row - 1
        while node is not None:
            hit = memo.get(id(node))
            if hit is not None and hit[0] is node:
                state = hit[1]
                break
            pending.append((node, row))
            node = node[0]
            row -= 1
        for node, row in reversed(pending):
            state = step(state, row, node[1])
            memo[id(node)] = (node, state)
        return step(state, self._row, self._extra)

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
        if self._length is None:
            self._length = history_length(self._tail) + 1
        return self._length

    def _materialise(self) -> list[str]:
        if self._list is None:
            labels, _ = history_lists(self._tail)
            labels.append(self._extra)
            self._list = labels
        return self._list

    def __getitem__(self, index):
        if (
            self._list is None
            and isinstance(index, int)
            and (index == -1 or index == len(self) - 1)
        ):
            return self._extra  # CLASSIFIER() of the current row: no walk, no copy
        return self._materialise()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._materialise())

    def __reversed__(self) -> Iterator[str]:
        if self._list is not None:
            yield from reversed(self._list)
            return
        yield self._extra
        for node in walk_back(self._tail):
            yield node[1]


# -- observable history keys --------------------------------------------------------------

Advance = Callable[[tuple, int], tuple]  # (key, row) -> key after mapping row to a variable


@state_class
class HistoryKey:
    """Incrementally maintained summary of a history as far as DEFINEs can observe it.

    The key is a tuple with one component per observation in a
    :class:`HistoryUse`; equal keys mean DEFINE cannot tell the histories
    apart. Components are kept small (last/first k rows, counts) where the
    observation allows it. The most common one, the last row of a variable
    set without its labels (``A.x``), is a bare row number (None before the
    set's first row): keys are hashed for every thread merge, and flat tuples
    of ints hash fastest.
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
        self.initial: tuple = tuple(
            0
            if part[0] == "count"
            else ()
            if part[0] in ("last", "first") and not _scalar(part)
            else None
            for part in self.parts
        )
        self._advancers: dict[str, Advance | None] = {}

    def recent(self, key: tuple, vars_: frozenset[str]) -> tuple[tuple[int, ...], bool] | None:
        """The tracked last rows of ``vars_`` in ``key`` and whether they are all of them."""
        for i, part in enumerate(self.parts):
            kind, s, k, with_label = part
            if kind == "last" and s == vars_:
                entries = key[i]
                if _scalar(part):
                    return ((), True) if entries is None else ((entries,), False)
                rows = tuple(e[0] for e in entries) if with_label else entries
                return rows, len(entries) < k
        return None

    def last_slot(self, vars_: frozenset[str]) -> tuple[int, bool, bool] | None:
        """Where ``key`` keeps the last rows of ``vars_``: (component, entries carry
        labels, the component is a bare row number or None)."""
        for i, part in enumerate(self.parts):
            kind, s, _k, with_label = part
            if kind == "last" and s == vars_:
                return i, with_label, _scalar(part)
        return None

    @property
    def trivial(self) -> bool:
        return not self.parts

    def advance(self, key: tuple, row: int, var: str) -> tuple:
        """The key after mapping ``row`` to ``var``."""
        if not self.parts:
            return key
        out = list(key)
        for i, part in enumerate(self.parts):
            kind, vars_, k, with_label = part
            if vars_ is not None and var not in vars_:
                continue
            entry = (row, var) if with_label else row
            if _scalar(part):
                out[i] = row
            elif kind == "last":
                out[i] = (key[i] + (entry,))[-k:]
            elif kind == "first":
                if len(key[i]) < k:
                    out[i] = key[i] + (entry,)
            elif kind == "count":
                out[i] = key[i] + 1
            else:  # every / labels
                out[i] = Chain(key[i], entry)
        return tuple(out)

    def advancer(self, var: str) -> Advance | None:
        """:meth:`advance` specialised to ``var``; None when mapping a row to ``var``
        leaves every key unchanged (so the key tuple can be shared as is)."""
        if var in self._advancers:
            return self._advancers[var]
        touched = [
            i
            for i, (_kind, vars_, _k, _wl) in enumerate(self.parts)
            if vars_ is None or var in vars_
        ]
        n = len(self.parts)
        fn: Advance | None
        if not touched:
            fn = None
        elif len(touched) == 1 and _scalar(self.parts[touched[0]]):
            # The common case: only the variable's last row changes (``A.x``).
            i = touched[0]
            if n == 1:

                def fn(key: tuple, row: int) -> tuple:
                    return (row,)
            elif n == 2 and i == 0:

                def fn(key: tuple, row: int) -> tuple:
                    return (row, key[1])
            elif n == 2:

                def fn(key: tuple, row: int) -> tuple:
                    return (key[0], row)
            else:

                def fn(key: tuple, row: int) -> tuple:
                    return key[:i] + (row,) + key[i + 1 :]
        else:

            def fn(key: tuple, row: int) -> tuple:
                return self.advance(key, row, var)

        self._advancers[var] = fn
        return fn


@state_class
class Chain:
    """A key component that grows by one entry per row (all rows of a set): a cons list.

    A tuple would be copied and rehashed whole at every row, which makes a long
    attempt quadratic. A chain appends in O(1), keeps its hash, and compares
    equal chains in O(1) where they share their tail (threads forked from one
    thread do), walking only as far as two chains were built apart.
    """

    __slots__ = ("parent", "entry", "length", "_hash")

    def __init__(self, parent: Chain | None, entry: Any) -> None:
        self.parent = parent
        self.entry = entry
        self.length: int = 1 if parent is None else parent.length + 1
        self._hash: int = hash((None if parent is None else parent._hash, entry))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        a: Chain | None = self
        b = other
        while a is not b:
            if (
                not isinstance(b, Chain)
                or a is None
                or a._hash != b._hash
                or a.length != b.length
                or a.entry != b.entry
            ):
                return False
            a, b = a.parent, b.parent
        return True

    def __repr__(self) -> str:
        entries = []
        node: Chain | None = self
        while node is not None:
            entries.append(node.entry)
            node = node.parent
        return f"Chain({entries[::-1]!r})"


def _scalar(part: tuple) -> bool:
    """Whether a key component is kept as a bare row number (see :class:`HistoryKey`)."""
    kind, _vars, k, with_label = part
    return kind == "last" and k == 1 and not with_label


def _set_order(item) -> tuple:
    s = item[0] if isinstance(item, tuple) else item
    return tuple(sorted(s))


# -- static epsilon closures --------------------------------------------------------------

#: A state reached by epsilon moves: (pc, loop flags, is DONE). Not DONE means
#: the thread waits there for the next row (a LABEL, or ``$`` before the end).
Leaf = tuple[int, int, bool]


#: Marks a :attr:`Closures.labels` entry not computed yet.
MISSING = object()


class Closures:
    """Epsilon closures of a program that depend on the program counter alone.

    After a row is consumed every loop flag is clear, ``^`` cannot pass (the
    position is past the partition's first row) and ``$`` waits (the
    partition has not ended, or the step would not run). So the states an
    ``Attempt`` reaches from ``pc`` are a fixed list, computed on first use
    (eagerly would be quadratic for some huge unrolled programs). Shared by
    every partition of a query.

    ``labels[pc]`` is, for a LABEL instruction, ``(var, excluded, var_index,
    advance, leaves)`` (``leaves``: the closure after consuming the row), None
    for any other instruction, or :data:`MISSING` until first needed.
    """

    def __init__(self, program: Program, history_key: HistoryKey) -> None:
        self.program = program
        self.history_key = history_key
        self.variables: list[str] = sorted(
            {ins.var for ins in program.instructions if ins.op is Op.LABEL and ins.var is not None}
        )
        self._index = {var: i for i, var in enumerate(self.variables)}
        self._after: dict[int, tuple[Leaf, ...]] = {}
        self.labels: list[tuple | None | object] = [MISSING] * len(program)
        self.seed_at_start = self._closure(0, at_start=True)  # attempt at partition row 0
        self.seed = self._closure(0, at_start=False)  # attempt at any later row

    def label(self, pc: int) -> tuple | None:
        """Fill and return ``labels[pc]``."""
        ins = self.program[pc]
        info: tuple | None = None
        if ins.op is Op.LABEL:
            var = ins.var
            assert var is not None
            info = (
                var,
                ins.excluded,
                self._index[var],
                self.history_key.advancer(var),
                self.after(pc + 1),
            )
        self.labels[pc] = info
        return info

    def after(self, pc: int) -> tuple[Leaf, ...]:
        """States reached from ``pc`` with clear flags after a consumed row."""
        leaves = self._after.get(pc)
        if leaves is None:
            leaves = self._after[pc] = self._closure(pc, at_start=False)
        return leaves

    def _closure(self, pc: int, at_start: bool) -> tuple[Leaf, ...]:
        """The depth-first order of :meth:`Attempt._closure`, leaves only."""
        program = self.program
        stack = [(pc, 0)]
        seen: set[tuple[int, int]] = set()
        leaves: list[Leaf] = []
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            pc, flags = state
            ins = program[pc]
            op = ins.op
            if op is Op.LABEL or op is Op.END_ANCHOR:
                leaves.append((pc, flags, False))
            elif op is Op.SPLIT:
                stack.append((ins.alt, flags))
                stack.append((ins.target, flags))
            elif op is Op.JUMP:
                stack.append((ins.target, flags))
            elif op is Op.BEGIN_ITER:
                stack.append((pc + 1, flags | (1 << ins.slot)))
            elif op is Op.END_ITER:
                bit = 1 << ins.slot
                if flags & bit:
                    stack.append((ins.alt, flags & ~bit))
                else:
                    stack.append((ins.target, flags))
            elif op is Op.START_ANCHOR:
                if at_start:
                    stack.append((pc + 1, flags))
            elif op is Op.DONE:
                leaves.append((pc, flags, True))
        return tuple(leaves)


# -- threads and attempts ---------------------------------------------------------------------

#: A test decides DEFINE of one variable: (history so far, its key, row) -> true?
Test = Callable[[History, tuple, int], bool]

#: A partial match: ``(pc, flags, history, key, preferred)``. ``flags`` bit i:
#: loop i's current iteration has consumed no row yet; ``key`` is the
#: :class:`HistoryKey` summary of ``history``; ``preferred``: not behind any
#: completed match (ALL MATCHES mode). A tuple because one is made per row
#: per surviving thread.
Thread = tuple


@state_class
class Machine:
    """Everything an attempt needs that is the same for all attempts of one partition.

    ``tests`` follows :attr:`Closures.variables`: DEFINE of each variable
    (None: no DEFINE, always true). Cheap to build, so one per partition.
    """

    __slots__ = ("program", "closures", "tests", "history_key", "max_threads", "all_ends")

    def __init__(
        self,
        closures: Closures,
        tests: dict[str, Test | None],
        max_threads: int,
        all_ends: bool = False,
    ) -> None:
        self.program = closures.program
        self.closures = closures
        self.tests: list[Test | None] = []
        self.bind(tests)
        self.history_key = closures.history_key
        self.max_threads = max_threads
        self.all_ends = all_ends

    def __getstate__(self) -> dict:
        """A checkpoint keeps everything but the DEFINE tests: they are closures over the
        owner's rows, which its owner binds again on restore (:meth:`bind`)."""
        return {name: getattr(self, name) for name in self.__slots__ if name != "tests"}

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self.tests = []

    def bind(self, tests: dict[str, Test | None]) -> None:
        """Install the DEFINE tests (each variable's, None: always true)."""
        self.tests = [tests.get(var) for var in self.closures.variables]


#: Shared empty ``by_end`` of attempts without matches (never written to).
_NO_MATCHES: dict = {}


@state_class
class Completion:
    """A complete match found by an attempt."""

    __slots__ = ("history", "end")

    def __init__(self, history: History, end: int) -> None:
        self.history = history
        self.end = end  # absolute index of the last row (start - 1 for an empty match)


@state_class
class Attempt:
    """All threads of the match attempt starting at row ``start``.

    ``best`` is the standard's preferred match so far. With ``all_ends`` the
    attempt also keeps, for every end row, the preferred match ending there
    (``by_end``), and lets lower-preference threads run on to find them.
    """

    __slots__ = (
        "machine",
        "start",
        "all_ends",
        "best",
        "by_end",
        "threads",
        "_demote",
        "_ended",
        "_end_rank",
        "_finishing_index",
    )

    def __init__(self, machine: Machine, start: int) -> None:
        self.machine = machine
        self.start = start
        self.all_ends = machine.all_ends
        self.best: Completion | None = None
        # ALL MATCHES: the preferred match per end row, and how many waiting
        # threads were ahead of the thread that ended there (-1 once nothing
        # can beat it any more). Made at the first match: most attempts find none.
        self.by_end: dict[int, Completion] = _NO_MATCHES
        self._end_rank: dict[int, int] = _NO_MATCHES
        self.threads: list[Thread] = []
        self._demote = False
        self._ended = False  # set once the partition is known to end at the position
        self._finishing_index = 0
        closures = machine.closures
        leaves = closures.seed_at_start if start == 0 else closures.seed
        key = machine.history_key.initial
        out = self.threads
        for pc, flags, done in leaves:
            if done:
                if self._complete(None, not self._demote, start, len(out)):
                    break
            else:
                out.append((pc, flags, None, key, not self._demote))
        if len(out) > machine.max_threads:
            self._check_limit(out)

    @property
    def alive(self) -> bool:
        return bool(self.threads)

    def kill(self) -> None:
        """End the attempt without consuming more rows (e.g. a time window ran out)."""
        self.threads = []

    def step(self, row: int) -> None:
        """Consume row ``row`` (which must be the next one) in every live thread."""
        self.run(row, row + 1)

    def run(self, row: int, limit: int) -> int:
        """Consume rows ``row``, ``row + 1``, ... before ``limit`` while threads live.

        Returns the next row to consume. This is the matcher's inner loop, so
        everything it touches is hoisted into locals.
        """
        machine = self.machine
        labels = machine.closures.labels
        fill = machine.closures.label
        tests = machine.tests
        max_threads = machine.max_threads
        complete = self._complete
        current = self.threads
        while current and row < limit:
            out: list[Thread] = []
            demote = False  # a preferred match ended in this step: later threads are not
            # One thread's leaves are distinct states: only several threads need dedup.
            seen: set | None = set() if len(current) > 1 else None
            position = row + 1
            for pc, _flags, history, key, preferred in current:
                info = labels[pc]
                if info is MISSING:
                    info = fill(pc)
                if info is None:
                    continue  # a thread waiting at ``$`` dies: a row follows
                var, excluded, index, advance, leaves = info
                test = tests[index]
                if test is not None and not test(history, key, row):
                    continue
                node = (history, var, excluded)
                if advance is not None:
                    key = advance(key, row)
                keep = preferred and not demote
                stop = False
                for lpc, lflags, done in leaves:
                    if seen is not None:
                        state = (lpc, lflags, key)
                        if state in seen:
                            continue  # an equivalent, more preferred thread got here first
                        seen.add(state)
                    if done:
                        ahead = len(out)  # waiting threads more preferred than this match
                        if ahead > max_threads:
                            self._check_limit(out)
                        self._demote = demote
                        if complete(node, keep, position, ahead):
                            stop = True  # every thread behind this match is less preferred
                            break
                        demote = self._demote
                        keep = preferred and not demote
                    else:
                        out.append((lpc, lflags, node, key, keep))
                if stop:
                    break
            # Checked at each match above and here: raises exactly when the thread
            # list ever exceeds the limit, as a check at every append would.
            if len(out) > max_threads:
                self._check_limit(out)
            row = position
            current = out
        self.threads = current
        return row

    def end_of_partition(self, position: int) -> None:
        """The partition ended before row ``position``: threads waiting on ``$`` pass."""
        current, self.threads = self.threads, []
        seen: set = set()
        self._demote = False
        self._ended = True
        program = self.machine.program
        for index, thread in enumerate(current):
            self._finishing_index = index
            pc = thread[0]
            if program[pc].op is Op.END_ANCHOR:
                moved = (pc + 1,) + thread[1:]
                if self._closure(moved, position, self.threads, seen):
                    break
        # Any thread still alive waits for a row that will never come.
        self.threads = []

    def _check_limit(self, threads: list[Thread]) -> None:
        max_threads = self.machine.max_threads
        if len(threads) > max_threads:
            raise LimitExceededError(
                f"row pattern matching needs more than max_threads={max_threads} live "
                f"threads for the match attempt at partition row {self.start + 1}; simplify "
                "the pattern or raise the limit with SET max_threads = ..."
            )

    def _closure(self, thread: Thread, position: int, out: list[Thread], seen: set) -> bool:
        """Follow epsilon moves from ``thread`` at ``position`` (the next row to consume).

        The general closure (any position, ``$`` after the end); :class:`Closures`
        precomputes its result for the common cases. Threads that wait for a row
        are appended to ``out`` in preference order. Returns True when, in the
        standard mode, a match completed and the caller must stop (everything
        after it is less preferred).
        """
        program = self.machine.program
        stack = [thread]
        while stack:
            pc, flags, history, key, preferred = stack.pop()
            if self._demote:
                preferred = False
            state = (pc, flags, key)
            if state in seen:
                continue  # an equivalent, more preferred thread got here first
            seen.add(state)
            ins = program[pc]
            op = ins.op
            if op is Op.END_ANCHOR and self._ended:
                stack.append((pc + 1, flags, history, key, preferred))  # the partition ended
            elif op is Op.LABEL or op is Op.END_ANCHOR:
                out.append((pc, flags, history, key, preferred))
                if len(out) > self.machine.max_threads:
                    self._check_limit(out)
            elif op is Op.SPLIT:
                stack.append((ins.alt, flags, history, key, preferred))
                stack.append((ins.target, flags, history, key, preferred))
            elif op is Op.JUMP:
                stack.append((ins.target, flags, history, key, preferred))
            elif op is Op.BEGIN_ITER:
                stack.append((pc + 1, flags | (1 << ins.slot), history, key, preferred))
            elif op is Op.END_ITER:
                bit = 1 << ins.slot
                if flags & bit:  # the iteration consumed nothing: never repeat it
                    stack.append((ins.alt, flags & ~bit, history, key, preferred))
                else:
                    stack.append((ins.target, flags, history, key, preferred))
            elif op is Op.START_ANCHOR:
                if position == 0:
                    stack.append((pc + 1, flags, history, key, preferred))
            elif op is Op.DONE:
                if self._complete(history, preferred, position, len(out)):
                    return True
        return False

    def _complete(self, history: History, preferred: bool, position: int, rank: int) -> bool:
        """Record a match; ``rank`` = how many waiting threads are more preferred."""
        done = Completion(history, position - 1)
        if not self.all_ends:
            self.best = done
            return True
        end = done.end
        if self.by_end is _NO_MATCHES:
            self.by_end, self._end_rank = {}, {}
        earlier = self._end_rank.get(end)
        if earlier is None:
            self.by_end[end] = done
            self._end_rank[end] = rank if not self._ended else -1
        elif self._ended and self._finishing_index < earlier:
            # A thread that waited on ``$`` was ahead of the thread that ended a
            # match at the same row during the last step: it is preferred.
            self.by_end[end] = done
            self._end_rank[end] = -1
        if preferred:
            self.best = done
            self._demote = True  # everything after this thread is less preferred
        return False
