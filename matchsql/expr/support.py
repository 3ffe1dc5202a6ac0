"""Which backend evaluates which bound node: the one table behind "why this path".

Every backend compiles the same bound form (:mod:`matchsql.plan.bound`). Before a
backend compiles a DEFINE term it asks :func:`why_not` whether every node of the
term is one it evaluates; the first node that is not gives the reason the
planner shows in EXPLAIN. The backends keep finer checks that depend on types
or on the pattern (the column types registers read, say) and report those in
their own words. A new backend (the GPU column path) adds one column here.

Backends:

* ``rowwise`` - the reference evaluator, row at a time (:mod:`matchsql.expr.rowwise`);
  evaluates every bound node and is the fallback of every other backend;
* ``define_fast`` - the reference VM's specialised DEFINE closures
  (:mod:`matchsql.engine.defines`);
* ``registers`` - the compiled kernel's register bytecode
  (:mod:`matchsql.engine.compiled.lowering`);
* ``row_local`` - column-wise Arrow terms over the tested row and PREV/NEXT of it
  (:mod:`matchsql.engine.compiled.rowlocal`);
* ``gpu`` - the GPU column path's per-variable bitsets (:mod:`matchsql.engine.gpu.columns`):
  row-local terms, evaluated elementwise on the device (the path checks the column types
  itself: numbers, and strings compared for equality only);
* ``gpu_registers`` - the GPU kernel's in-thread register bytecode (:mod:`matchsql.engine.gpu.
  kernels`): the ``registers`` bytecode less ``MATCH_NUMBER()``, which a thread cannot
  know before the SKIP scan over all starts has numbered the matches.
* ``aggregate_args`` - column-wise Arrow terms over the rows an aggregate visits, its
  arguments and FILTER in MEASURES (:mod:`matchsql.engine.compiled.aggregate_inputs`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from matchsql.plan.bound import (
    AggregateCall,
    Const,
    MatchNumberRef,
    Pointer,
    describe,
    folded_values,
)

ROWWISE, DEFINE_FAST, REGISTERS, ROW_LOCAL = "rowwise", "define_fast", "registers", "row_local"
GPU, GPU_REGISTERS = "gpu", "gpu_registers"
AGGREGATE_ARGS = "aggregate_args"
BACKENDS = (ROWWISE, DEFINE_FAST, REGISTERS, ROW_LOCAL, GPU, GPU_REGISTERS, AGGREGATE_ARGS)
_NAMES = {
    ROWWISE: "the reference evaluator",
    DEFINE_FAST: "the VM's fast DEFINE path",
    REGISTERS: "the compiled register bytecode",
    ROW_LOCAL: "the column-wise row-local terms",
    GPU: "the GPU column path",
    GPU_REGISTERS: "the GPU kernel's register bytecode",
    AGGREGATE_ARGS: "the column-wise aggregate arguments",
}

_CORE = frozenset({DEFINE_FAST, REGISTERS, ROW_LOCAL, GPU, GPU_REGISTERS, AGGREGATE_ARGS})
_ARGS = frozenset({AGGREGATE_ARGS})
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)

#: Node kind -> the backends (other than ``rowwise``) that evaluate it.
SUPPORT: dict[type, frozenset[str]] = {
    Const: _CORE,
    Pointer: _CORE,
    MatchNumberRef: frozenset({REGISTERS, AGGREGATE_ARGS}),
    AggregateCall: frozenset({REGISTERS, GPU_REGISTERS}),
    exp.Add: _CORE,
    exp.Sub: _CORE,
    exp.Mul: _CORE,
    exp.Div: _CORE,
    exp.IntDiv: frozenset({DEFINE_FAST}),
    exp.Mod: frozenset({DEFINE_FAST}),
    exp.Pow: frozenset({DEFINE_FAST}),
    **{c: _CORE for c in _COMPARISONS},
    exp.And: _CORE,
    exp.Or: _CORE,
    exp.Not: _CORE,
    exp.Neg: _CORE,
    exp.Abs: frozenset({REGISTERS, GPU_REGISTERS, ROW_LOCAL, AGGREGATE_ARGS}),
    exp.Is: _CORE,
    exp.Between: frozenset({REGISTERS, GPU_REGISTERS, ROW_LOCAL, GPU, AGGREGATE_ARGS}),
    exp.In: frozenset({ROW_LOCAL, GPU, AGGREGATE_ARGS}),
    exp.Case: _ARGS,
    exp.If: _ARGS,
    exp.DPipe: _ARGS,
    exp.Cast: _ARGS,
    exp.DataType: _ARGS,
    exp.DataTypeParam: _ARGS,
}


def _pointer_rule(node: Pointer, backend: str) -> str | None:
    """What a backend cannot read of a pointer (None: it can)."""
    at = node.position
    if backend == AGGREGATE_ARGS:
        return None if at.aggregated else f"{node.text} reads a row other than the aggregated one"
    if node.classifier:
        return f"{node.text} (a label)"
    if at.aggregated:
        return None
    if backend in (ROW_LOCAL, GPU) and not at.current:
        return f"{node.text} reads other rows of the match"
    if backend == DEFINE_FAST and not at.current:
        return f"{node.text} (FIRST/LAST with an offset)"
    return None


#: The aggregates the register bytecode keeps running per thread (COUNT(*) over the whole
#: match is the match's length, the others are accumulators forked with the thread); their
#: arguments and FILTER are checked by the lowering (numeric, the aggregated row only).
REGISTER_AGGREGATES = frozenset({"count", "count_star", "sum", "avg", "min", "max"})


def _aggregate_rule(node: AggregateCall, backend: str) -> str | None:
    if (
        backend in (REGISTERS, GPU_REGISTERS)
        and node.function in REGISTER_AGGREGATES
        and not node.distinct
    ):
        return None
    return f"{node.text}"


def _is_rule(node: exp.Is, backend: str) -> str | None:
    target = node.expression
    if isinstance(target, Const) and target.value is None:
        return None
    return "IS TRUE/FALSE" if backend != ROWWISE else None


def _in_rule(node: exp.In, backend: str) -> str | None:
    """A folded subquery's set is looked up by the reference evaluator only (DuckDB
    computes the test in the input wherever it reads one row: the usual case)."""
    folded = folded_values(node)
    return None if folded is None else f"IN over a subquery's {len(folded)} values"


_RULES: dict[type, Callable[..., str | None]] = {
    Pointer: _pointer_rule,
    AggregateCall: _aggregate_rule,
    exp.Is: _is_rule,
    exp.In: _in_rule,
}


def why_not(node: exp.Expression, backend: str) -> str | None:
    """Why ``backend`` cannot evaluate bound ``node`` (its first unsupported part), or None."""
    if backend == ROWWISE:
        return None
    pending = [node]
    while pending:
        n = pending.pop()
        backends = SUPPORT.get(type(n))
        if backends is None or backend not in backends:
            return f"{describe(n)} is not evaluated by {_NAMES[backend]}"
        rule = _RULES.get(type(n))
        reason = rule(n, backend) if rule is not None else None
        if reason is not None:
            return f"{reason} is not evaluated by {_NAMES[backend]}"
        if not isinstance(n, AggregateCall):  # an aggregate's arguments are its own business
            pending.extend(reversed(list(n.iter_expressions())))
    return None
