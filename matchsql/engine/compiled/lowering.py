"""Lowering for the compiled kernel: program and DEFINE conditions -> numpy arrays.

The automaton program of :mod:`matchsql.engine.program` becomes an ``int64``
table. Each DEFINE is split into its top-level ``AND`` terms (a condition is
TRUE exactly when every term is TRUE, so the split is exact under SQL's
three-valued logic); terms that read only the current row and physical
``PREV``/``NEXT`` offsets go to :mod:`.rowlocal` and are evaluated
column-wise, the rest are compiled here into a small stack bytecode that the
kernel interprets against a thread's registers. Anything the bytecode cannot
express exactly raises :class:`Unsupported`, and the planner routes the query
to the reference matcher, naming the reason.

Running aggregates (``SUM(A.x)``, ``COUNT(A.*)``, ``MIN``/``MAX``/``AVG``, with
FILTER) are accumulators a thread carries like its registers, one slot per
distinct aggregate (a value and a count of the rows it took). Each variable
gets a *fold* code: for every slot whose rows include the variable, the
aggregate's FILTER and argument evaluated at the tested row, then ``C_FOLD``
into the slot. The kernels run a variable's fold code on a copy of the
thread's accumulators before its conditions, so ``C_AGG`` (which finishes a
slot: NULL over no rows, ``AVG`` = sum / count) sees the rows matched so far
including the current one: RUNNING, as DEFINE always is. A failed condition
discards the copy; a passed one makes it the new thread's.

The bytecode is built from the bound form (:mod:`matchsql.plan.bound`):
each pointer becomes one register load, each constant one operand; names and
literals were resolved by the binder, and no user text is ever evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from sqlglot import exp

from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled import ordinals as O
from matchsql.engine.program import Op, Program
from matchsql.expr.support import REGISTER_AGGREGATES, REGISTERS, why_not
from matchsql.plan.bound import AggregateCall, Const, MatchNumberRef, Pointer, describe
from matchsql.plan.spec import MatchSpec

_OPS = [
    Op.LABEL,
    Op.SPLIT,
    Op.JUMP,
    Op.BEGIN_ITER,
    Op.END_ITER,
    Op.START_ANCHOR,
    Op.END_ANCHOR,
    Op.DONE,
]


# Register conditions as conjuncts with fused comparisons (RegisterCode.conjunct_table);
# False: the stack interpreter alone, as before that form (benchmarks compare the two).
FUSED_CONJUNCTS = True


#: The most cells a closure table may take (32 MiB); a larger one is not built.
MAX_CLOSURE_CELLS = 1 << 22


class Unsupported(Exception):
    """A construct the compiled paths do not evaluate; the message says which."""


def program_array(program: Program) -> np.ndarray:
    """``int64[n, 6 + w]``: op, variable id, excluded, target, alt, loop slot, then the
    closure table of :func:`closure_table` (``w`` columns)."""
    ids = {v: i for i, v in enumerate(program.variables)}
    out = np.zeros((max(len(program), 1), 6), np.int64)
    for pc, ins in enumerate(program.instructions):
        out[pc] = (
            _OPS.index(ins.op),
            ids.get(ins.var, -1) if ins.var else -1,
            int(ins.excluded),
            ins.target,
            ins.alt,
            ins.slot,
        )
    return np.hstack([out, closure_table(out)])


def closure_table(prog: np.ndarray) -> np.ndarray:
    """``int64[n, w]``: per closure origin ``o`` (``0``, the seed, and the pc after each
    LABEL), ``[count, pc, ...]``: the LABEL and DONE instructions the kernel's epsilon
    closure from ``o`` reaches, in the order it reaches them, each once; ``count`` is -1
    in the other rows, and in every row when the table does not apply.

    The kernel walks this list instead of the program (K.P_CLOSURE): the SPLIT, JUMP
    and loop BEGIN/END instructions between two rows cost it a stack push, a pop and a
    ``seen`` entry each, most of its time per thread on ``A B+ C* D+``. That is exact
    when the loop flags never decide anything, i.e. no END is reached in the same
    closure as its BEGIN (no loop body matches the empty sequence) from any origin: the
    flags are then always clear again once a row is taken, so two threads at one
    instruction that differ in their flags only are the same thread (the one later in
    preference order can reach no end that the earlier one does not reach first), and
    the kernel keeps one. Not for programs with anchors (``^`` and ``$`` decide on
    the position, ``$`` holds threads): the table is -1 throughout. Nor where the
    table would hold more than :data:`MAX_CLOSURE_CELLS` (20,000 alternatives reach
    20,000 labels from the seed: a table of 60,000 x 20,000 words, 9.6 GB, where the
    kernel's own walk of the program needs none).
    """
    n = len(prog)
    ops = prog[:, 0].tolist()
    rows: dict[int, list[int]] = {}
    usable = K.P_START not in ops and K.P_ENDANCHOR not in ops
    origins = [0] + [pc + 1 for pc, op in enumerate(ops) if op == K.P_LABEL]
    width = 1
    for origin in origins if usable else []:
        found = _terminals(prog, origin)
        width = max(width, 1 + len(found or ()))
        if found is None or n * width > MAX_CLOSURE_CELLS:
            usable, width = False, 1
            break
        rows[origin] = found
    table = np.full((n, width), -1, np.int64)
    for origin, found in rows.items() if usable else ():
        table[origin, 0] = len(found)
        table[origin, 1 : 1 + len(found)] = found
    return table


def _terminals(prog: np.ndarray, origin: int) -> list[int] | None:
    """The LABEL/DONE pcs of the closure from ``origin`` in the kernel's order (its stack
    walk, flags included), each once; None where a loop flag decides an END."""
    stack = [(origin, 0)]
    visited: set[tuple[int, int]] = set()
    found: list[int] = []
    seen: set[int] = set()
    while stack:
        pc, fl = stack.pop()
        if (pc, fl) in visited:
            continue
        visited.add((pc, fl))
        op, target, alt, slot = (
            int(prog[pc, 0]),
            int(prog[pc, 3]),
            int(prog[pc, 4]),
            int(prog[pc, 5]),
        )
        if op in (K.P_LABEL, K.P_DONE):
            if pc not in seen:
                seen.add(pc)
                found.append(pc)
            continue
        if op == K.P_SPLIT:
            stack += [(alt, fl), (target, fl)]  # the target is taken first
        elif op == K.P_JUMP:
            stack.append((target, fl))
        elif op == K.P_BEGIN:
            stack.append((pc + 1, fl | (1 << slot)))
        elif op == K.P_END:
            if fl & (1 << slot):
                return None
            stack.append((target, fl))
        else:
            return None
    return found


def conjuncts(expr: exp.Expression) -> list[exp.Expression]:
    """The top-level ``AND`` terms of a bound condition."""
    if isinstance(expr, exp.And):
        return conjuncts(expr.this) + conjuncts(expr.expression)
    return [expr]


def is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


@dataclass
class RegisterCode:
    """Register bytecode of every variable plus what the kernel needs with it."""

    variables: list[str]
    code: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    consts: list[float] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    sets: list[frozenset[str]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # columns the bytecode reads
    # how a column that is not a number reaches the kernel: "bool" (0 and 1) or the
    # group of its codes (:mod:`.ordinals`); numbers are read as they are
    encodings: dict[str, str | pa.DataType] = field(default_factory=dict)
    literals: dict[pa.DataType, list] = field(default_factory=dict)  # per group
    ordered: set[pa.DataType] = field(default_factory=set)  # groups an ordering reads
    obs_last: set[str] = field(default_factory=set)
    obs_first: set[str] = field(default_factory=set)
    # per variable, the code range of each top-level AND term (before the C_AND joining it)
    terms: list[list[tuple[int, int]]] = field(default_factory=list)
    # per accumulator slot: the variables whose rows it takes (None: every row) and its
    # fold body (FILTER and argument at the tested row, then C_FOLD), code and constants
    folds: list[tuple[frozenset[str] | None, list, list[float]]] = field(default_factory=list)
    _tables: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_acc(self) -> int:
        """Accumulator slots a thread carries (one per distinct running aggregate)."""
        return len(self.folds)

    def assembled(self) -> tuple[list, list[float], np.ndarray]:
        """``(code, consts, fold_spans)``: the condition code followed by each variable's
        fold code (its slots' bodies, then a TRUE constant, so that the kernel can run it
        as a conjunct that always holds); ``fold_spans[v]`` is variable ``v``'s range
        (empty when no slot takes its rows)."""
        got = self._tables.get("assembled")
        if got is None:
            code, consts = list(self.code), list(self.consts)
            spans = np.zeros((max(len(self.variables), 1), 2), np.int64)
            for v, name in enumerate(self.variables):
                lo = len(code)
                for members, body, values in self.folds:
                    if members is None or name in members:
                        code += body
                        consts += values
                if len(code) > lo:
                    code.append((K.C_CONST, 0, 0, 0, 0))
                    consts.append(1.0)
                spans[v] = (lo, len(code))
            got = self._tables["assembled"] = (code, consts, spans)
        return got

    def fold_spans(self) -> np.ndarray:
        return self.assembled()[2]

    def arrays(self) -> tuple[np.ndarray, ...]:
        nv = max(len(self.variables), 1)
        full, values, _ = self.assembled()
        code = np.array(full, np.int64).reshape(-1, 5)
        consts = np.array(values, np.float64)
        spans = np.zeros((nv, 2), np.int64)
        for i, span in enumerate(self.spans):
            spans[i] = span
        masks = np.zeros((max(len(self.sets), 1), nv), np.uint8)
        for s, members in enumerate(self.sets):
            for v in members:
                masks[s, self.variables.index(v)] = 1
        obs_last = np.array([v in self.obs_last for v in self.variables] or [False], np.uint8)
        obs_first = np.array([v in self.obs_first for v in self.variables] or [False], np.uint8)
        return code, consts, spans, masks, obs_last, obs_first

    def conjunct_table(
        self, fused: bool | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(conj, cconst, conj_spans)``: the conditions as the kernel evaluates them.

        ``conj_spans[v]`` is variable ``v``'s range of rows in ``conj``
        (``int64[m, CJ_WIDTH]``), one row per top-level AND term: ``CJ_COMPARE``
        with the comparison opcode and its two operands (see
        :data:`.kernel.CJ_WIDTH`; a constant's value in ``cconst[row, side]``) for a
        comparison of loads and constants, which the kernel evaluates without the
        operand stack, or ``(CJ_STACK, lo, hi)`` for any other term (the stack code
        ``code[lo:hi]``). With ``fused`` False (default: :data:`FUSED_CONJUNCTS`)
        every variable gets a single ``CJ_STACK`` row over its whole code: the
        interpreter as it was before (kept for comparisons). A variable whose rows
        running aggregates take has its fold code (:meth:`assembled`) as its first row.
        """
        fused = FUSED_CONJUNCTS if fused is None else fused
        got = self._tables.get(fused)
        if got is None:
            got = self._tables[fused] = self._conjunct_table(fused)
        return got

    def _conjunct_table(self, fused: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        nv = max(len(self.variables), 1)
        rows: list[list[int]] = []
        consts: list[tuple[float, float]] = []
        spans = np.zeros((nv, 2), np.int64)
        fold_spans = self.fold_spans()
        for v, (lo, hi) in enumerate(self.spans):
            first = len(rows)
            ranges = (
                self.terms[v] if fused and v < len(self.terms) else ([(lo, hi)] if hi > lo else [])
            )
            fa, fb = (int(x) for x in fold_spans[v])
            if fb > fa:
                rows.append([K.CJ_STACK, fa, fb] + [0] * (K.CJ_WIDTH - 3))
                consts.append((0.0, 0.0))
            for a, b in ranges:
                row, values = self._conjunct(a, b) if fused else ([K.CJ_STACK, a, b], (0.0, 0.0))
                rows.append(row + [0] * (K.CJ_WIDTH - len(row)))
                consts.append(values)
            spans[v] = (first, len(rows))
        conj = np.array(rows or [[K.CJ_STACK] + [0] * (K.CJ_WIDTH - 1)], np.int64)
        cconst = np.array(consts or [(0.0, 0.0)], np.float64)
        return conj, cconst, spans

    def _conjunct(self, lo: int, hi: int) -> tuple[list[int], tuple[float, float]]:
        """Stack code ``code[lo:hi]`` as one conjunct row and its constants."""
        ops = self.code[lo:hi]
        if len(ops) != 3 or not K.C_LT <= ops[2][0] <= K.C_NE:
            return [K.CJ_STACK, lo, hi], (0.0, 0.0)
        row = [K.CJ_COMPARE, ops[2][0]]
        values = []
        for k in (lo, lo + 1):
            op, col, kind, s, offset = self.code[k]
            values.append(self.consts[k])
            if op == K.C_CONST:
                row += [0, 0, 0, 0, 0]
                continue
            if op != K.C_LOAD:
                return [K.CJ_STACK, lo, hi], (0.0, 0.0)
            arg = s
            if kind in (K.R_LAST, K.R_FIRST):
                if len(self.sets[s]) != 1:  # a union's last/first row: the stack code
                    return [K.CJ_STACK, lo, hi], (0.0, 0.0)
                arg = self.variables.index(next(iter(self.sets[s])))
            row += [1, col, kind, arg, offset]
        return row, (values[0], values[1])

    @property
    def empty(self) -> bool:
        return not self.code and not self.obs_last and not self.obs_first


_BINARY: dict[type[exp.Expression], int] = {
    exp.Add: K.C_ADD,
    exp.Sub: K.C_SUB,
    exp.Mul: K.C_MUL,
    exp.Div: K.C_DIV,
}
_AGGREGATES = {
    "count": K.A_COUNT,
    "count_star": K.A_COUNT,
    "sum": K.A_SUM,
    "avg": K.A_AVG,
    "min": K.A_MIN,
    "max": K.A_MAX,
}
assert set(_AGGREGATES) == REGISTER_AGGREGATES
_COMPARE: dict[type[exp.Expression], int] = {
    exp.LT: K.C_LT,
    exp.LTE: K.C_LE,
    exp.GT: K.C_GT,
    exp.GTE: K.C_GE,
    exp.EQ: K.C_EQ,
    exp.NEQ: K.C_NE,
}


class RegisterCompiler:
    """Compiles DEFINE terms that read other rows of the match into bytecode."""

    def __init__(self, spec: MatchSpec, variables: list[str]) -> None:
        self.spec = spec
        self.types = {f.name: f.type for f in spec.columns}
        self.out = RegisterCode(list(variables))
        self.var = ""
        self.slots: dict[str, int] = {}  # an aggregate's bound form -> its accumulator slot
        self.in_aggregate = False  # emitting an aggregate's argument or FILTER
        # the constant slots of literals compared with coded columns: (consts list, index,
        # group, value), set once the group's literals are all known (:meth:`define`)
        self.literal_slots: list[tuple[list[float], int, pa.DataType, object]] = []

    def add(self, var: str, terms: list[exp.Expression]) -> None:
        """Compile ``terms`` (ANDed) as variable ``var``'s register condition."""
        self.var = var
        lo = len(self.out.code)
        ranges = []
        for i, term in enumerate(terms):
            reason = why_not(term, REGISTERS)
            if reason is not None:
                raise Unsupported(reason)
            at = len(self.out.code)
            kind = self.emit(term)
            if kind not in ("bool", "null"):
                raise Unsupported(f"DEFINE {var}: a condition that is not boolean")
            ranges.append((at, len(self.out.code)))
            if i:
                self.put(K.C_AND)
        self.out.spans.append((lo, len(self.out.code)))
        self.out.terms.append(ranges)

    def define(self, var: str, terms: list[exp.Expression]) -> None:
        """Variable ``var``'s register condition: its ``terms`` (ANDed; none: no register
        condition); Unsupported names the variable."""
        if not terms:
            self.skip()
            return
        try:
            self.add(var, terms)
        except Unsupported as exc:
            raise Unsupported(f"DEFINE {var}: {exc}") from None
        self.place_literals()

    def place_literals(self) -> None:
        """Set every coded literal's constant from its group's literals so far (a later
        variable's literal may sort before it: each call places them all again)."""
        if not self.literal_slots:
            return
        codes = {g: O.literal_codes(values, g) for g, values in self.out.literals.items()}
        for consts, k, group, value in self.literal_slots:
            consts[k] = codes[group][value]
        self.out._tables.clear()

    def skip(self) -> None:
        """A variable with no register terms."""
        n = len(self.out.code)
        self.out.spans.append((n, n))
        self.out.terms.append([])

    def put(
        self, op: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0, value: float = 0.0
    ) -> None:
        self.out.code.append((op, a, b, c, d))
        self.out.consts.append(value)

    def set_id(self, members: frozenset[str]) -> int:
        if members not in self.out.sets:
            self.out.sets.append(members)
        return self.out.sets.index(members)

    def emit(self, node: exp.Expression) -> str:
        """Emit code for ``node``; return its kind: 'num', 'bool', 'null' or, for a column
        read through codes, ``ord:`` and its group."""
        if isinstance(node, Const):
            value = node.value
            if value is None:
                self.put(K.C_NULL)
                return "null"
            if isinstance(value, bool):
                self.put(K.C_CONST, value=1.0 if value else 0.0)
                return "bool"
            if isinstance(value, str):
                raise Unsupported("string values in conditions that read other rows")
            self.put(K.C_CONST, value=float(value))
            return "num"
        if isinstance(node, MatchNumberRef):
            if self.in_aggregate:
                raise Unsupported("MATCH_NUMBER() inside a running aggregate")
            self.put(K.C_MATCHNO)
            return "num"
        if isinstance(node, AggregateCall):
            if node.function == "count_star" and node.vars is None and node.condition is None:
                self.put(K.C_COUNT_ALL)
                return "num"
            self.put(K.C_AGG, self.slot(node), _AGGREGATES[node.function])
            return "num"
        if isinstance(node, Pointer):
            return self.kind(self.load(node))
        if type(node) in _BINARY:
            self.numeric(node.this, node.expression)
            self.put(_BINARY[type(node)])
            return "num"
        if type(node) in _COMPARE:
            self.compare(node.this, node.expression, _COMPARE[type(node)])
            return "bool"
        if isinstance(node, exp.And | exp.Or):
            for side in (node.this, node.expression):
                if self.emit(side) not in ("bool", "null"):
                    raise Unsupported("AND/OR over non-boolean values")
            self.put(K.C_AND if isinstance(node, exp.And) else K.C_OR)
            return "bool"
        if isinstance(node, exp.Not):
            if self.emit(node.this) not in ("bool", "null"):
                raise Unsupported("NOT over a non-boolean value")
            self.put(K.C_NOT)
            return "bool"
        if isinstance(node, exp.Neg | exp.Abs):
            if self.emit(node.this) not in ("num", "null"):
                raise Unsupported("arithmetic on non-numeric values")
            self.put(K.C_NEG if isinstance(node, exp.Neg) else K.C_ABS)
            return "num"
        if (
            isinstance(node, exp.Is)
            and isinstance(node.expression, Const)
            and node.expression.value is None
        ):
            self.emit(node.this)
            self.put(K.C_ISNULL)
            return "bool"
        if isinstance(node, exp.Between):
            # x BETWEEN lo AND hi == x >= lo AND x <= hi (x is evaluated twice: pure)
            self.compare(node.this, node.args["low"], K.C_GE)
            self.compare(node.this, node.args["high"], K.C_LE)
            self.put(K.C_AND)
            return "bool"
        raise Unsupported(f"{describe(node)} in a condition that reads other rows")

    def slot(self, node: AggregateCall) -> int:
        """The accumulator slot of running aggregate ``node`` (shared by equal aggregates),
        its fold body compiled on first use."""
        if node.function not in _AGGREGATES or node.distinct or node.final:
            raise Unsupported(f"{describe(node)} in a condition that reads other rows")
        key = repr(node)
        found = self.slots.get(key)
        if found is not None:
            return found
        s = len(self.out.folds)
        code, consts = self.out.code, self.out.consts
        self.out.code, self.out.consts = [], []
        self.in_aggregate = True
        try:
            condition = node.condition
            filtered = condition is not None
            if condition is not None and self.emit(condition) not in ("bool", "null"):
                raise Unsupported(f"{describe(node)}: a FILTER that is not boolean")
            if node.function == "count_star":
                self.put(K.C_CONST, value=1.0)
            elif len(node.expressions) != 1 or self.emit(node.expressions[0]) not in (
                "num",
                "null",
            ):
                raise Unsupported(f"{describe(node)} over non-numeric values")
            self.put(K.C_FOLD, s, _AGGREGATES[node.function], int(filtered))
            body = (node.vars, self.out.code, self.out.consts)
        finally:
            self.in_aggregate = False
            self.out.code, self.out.consts = code, consts
        self.out.folds.append(body)
        self.slots[key] = s
        return s

    def numeric(self, left: exp.Expression, right: exp.Expression) -> None:
        for side in (left, right):
            if self.emit(side) not in ("num", "null"):
                raise Unsupported("a comparison or arithmetic over non-numeric values")

    def compare(self, left: exp.Expression, right: exp.Expression, op: int) -> None:
        """``left op right``: numbers with numbers, booleans with booleans (0 and 1), or
        columns read through codes with columns and literals of their group."""
        group = next((g for g in (self.group(left), self.group(right)) if g is not None), None)
        if group is None:
            kinds = {self.emit(left), self.emit(right)} - {"null"}
            if not kinds <= {"num"} and not kinds <= {"bool"}:
                raise Unsupported("a comparison or arithmetic over non-numeric values")
        else:
            for side in (left, right):
                self.operand(side, group)
            if op not in (K.C_EQ, K.C_NE):
                self.out.ordered.add(group)
        self.put(op)

    def group(self, node: exp.Expression) -> pa.DataType | None:
        """The code group of a pointer to a column read through codes, else None."""
        if isinstance(node, Pointer) and node.column is not None and node.column in self.types:
            return O.group_of(self.types[node.column])
        return None

    def operand(self, node: exp.Expression, group: pa.DataType) -> None:
        """One side of a comparison over codes of ``group``: a column of the group, NULL,
        or a literal of the group (its code placed once all literals are known)."""
        if isinstance(node, Const) and node.value is not None:
            value = O.literal(node.value, group)
            if value is None:
                raise Unsupported(f"a comparison of {group} values with {node.value!r}")
            found = self.out.literals.setdefault(group, [])
            if value not in found:
                if len(found) >= O.MAX_LITERALS:
                    raise Unsupported("too many literals in conditions that read other rows")
                found.append(value)
            self.put(K.C_CONST)
            self.literal_slots.append((self.out.consts, len(self.out.consts) - 1, group, value))
            return
        kind = self.emit(node)
        if kind not in ("null", f"ord:{group}"):
            raise Unsupported(f"a comparison of {group} values with values of another type")

    def kind(self, name: str) -> str:
        """The kind of a column's loaded value (see :meth:`emit`)."""
        encoding = self.out.encodings.get(name)
        if encoding is None:
            return "num"
        return "bool" if encoding == "bool" else f"ord:{encoding}"

    # -- row references -------------------------------------------------------------------

    def load(self, node: Pointer) -> str:
        """One register load: the row the pointer names, as the kernel's row kinds say it;
        the column it reads."""
        at = node.position
        name = node.column
        if name is None:
            raise Unsupported(f"{node.text} in a condition that reads other rows")
        if at.aggregated != self.in_aggregate:
            # an aggregate's argument reads the row it visits, which its fold code runs at
            raise Unsupported(
                f"{node.text}: a row other than the aggregated one inside an aggregate"
                if self.in_aggregate
                else f"{node.text} in a condition that reads other rows"
            )
        if at.aggregated:
            self.put(K.C_LOAD, self.column(name), K.R_CUR, 0, 0)
            return name
        if at.final:
            raise Unsupported("FINAL inside DEFINE")
        col = self.column(name)
        members, k = at.vars, at.offset
        if not at.first:
            if members is None or self.var in members:
                if members is not None and k:
                    raise Unsupported(f"{node.text}: LAST with an offset over a variable")
                kind, s = (K.R_CUR, 0) if k == 0 else (K.R_BACK, k)
            else:
                if k:
                    raise Unsupported(f"{node.text}: LAST with an offset over a variable")
                kind, s = K.R_LAST, self.set_id(members)
                self.out.obs_last |= members
        else:
            if members is None:
                kind, s = (K.R_START, 0) if k == 0 else (K.R_FORTH, k)
            else:
                if k:
                    raise Unsupported(f"{node.text}: FIRST with an offset over a variable")
                kind, s = K.R_FIRST, self.set_id(members)
                self.out.obs_first |= members
        self.put(K.C_LOAD, col, kind, s, at.physical)
        return name

    def column(self, name: str) -> int:
        t = self.types[name]
        if not is_numeric(t):
            if pa.types.is_boolean(t):
                self.out.encodings[name] = "bool"
            elif O.group_of(t) is not None:
                self.out.encodings[name] = O.group_of(t)
            else:
                raise Unsupported(
                    f"column {name} of type {t} in a condition that reads "
                    "other rows (numbers, booleans, strings, dates, times, "
                    "timestamps and decimals only)"
                )
        if name not in self.out.columns:
            self.out.columns.append(name)
        return self.out.columns.index(name)
