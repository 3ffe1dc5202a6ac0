"""Whether the GPU column path applies to a query, its per-query arrays, and its work estimate.

:class:`GpuPlan` splits each DEFINE into its ``AND`` terms: the row-local ones
(support table backend ``gpu``) become elementwise device terms
(:mod:`matchsql.engine.gpu.columns`), the rest the CPU kernel's register bytecode
(:class:`~matchsql.engine.compiled.lowering.RegisterCompiler`, checked against
backend ``gpu_registers``), which the device kernel interprets in-thread. It
is built once per query (cached with the compiled plan), so the kernel,
compiled once per process, is specialised to a query shape by these arrays.
The reasons the path does not apply come from the one support table
(:mod:`matchsql.expr.support`); the rest are the shapes this path does not
take, each named so that ``SET gpu = 'on'`` and EXPLAIN can say why.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from matchsql.config import Config
from matchsql.engine.buffer_limit import RowWidth, max_rows
from matchsql.engine.compiled.compiled_matcher import CompiledPlan
from matchsql.engine.compiled.lowering import (
    RegisterCode,
    RegisterCompiler,
    Unsupported,
    conjuncts,
    is_numeric,
)
from matchsql.engine.gpu.columns import DeviceTerm, compile_term, is_row_local
from matchsql.expr.support import GPU_REGISTERS, why_not
from matchsql.plan.binder import bind
from matchsql.plan.bound import Pointer
from matchsql.plan.spec import MatchSpec


@dataclass
class GpuPlan:
    """A query's device terms and register bytecode (shared by its partitions)."""

    terms: list[list[DeviceTerm]]  # per variable id: the row-local AND terms
    columns: list[str]  # numeric columns the device terms read
    registers: RegisterCode
    arrays: tuple[np.ndarray, ...] = field(default_factory=tuple)  # registers.arrays()

    @property
    def uses_registers(self) -> bool:
        return not self.registers.empty


_cache: dict[int, GpuPlan] = {}


def gpu_plan(plan: CompiledPlan) -> GpuPlan:
    """The GPU plan of ``plan`` (built once; raises :class:`Unsupported` with the reason)."""
    cached = _cache.get(id(plan))
    if cached is None:
        cached = _cache[id(plan)] = _build(plan)
        weakref.finalize(plan, _cache.pop, id(plan), None)
    return cached


def _build(plan: CompiledPlan) -> GpuPlan:
    spec = plan.spec
    types = {f.name: f.type for f in spec.columns}
    strings = frozenset(name for name, t in types.items() if _is_text(t))
    regs = RegisterCompiler(spec, plan.variables)
    terms: list[list[DeviceTerm]] = []
    columns: list[str] = []
    for var in plan.variables:
        expr = spec.defines.get(var)
        local: list[DeviceTerm] = []
        other = []
        for term in conjuncts(bind(expr, spec)) if expr is not None else []:
            row_local = is_row_local(term, var)
            for p in term.find_all(Pointer):
                if (
                    p.column is not None
                    and not is_numeric(types[p.column])
                    and not (row_local and _is_text(types[p.column]))
                ):
                    raise Unsupported(f"DEFINE {var}: {p.text} is not a numeric column")
            if row_local:
                try:
                    local.append(compile_term(term, strings))
                except Unsupported as exc:
                    raise Unsupported(f"DEFINE {var}: {exc}") from None
                columns += [p.column for p in term.find_all(Pointer) if p.column is not None]
                continue
            reason = why_not(term, GPU_REGISTERS)
            if reason is not None:
                raise Unsupported(f"DEFINE {var}: {reason}")
            other.append(term)
        terms.append(local)
        regs.define(var, other)
    return GpuPlan(terms, list(dict.fromkeys(columns)), regs.out, regs.out.arrays())


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def unsupported(spec: MatchSpec, plan: CompiledPlan | None, why_no_plan: str) -> str | None:
    """Why the GPU path cannot run ``spec`` (None: it can)."""
    if plan is None:
        return why_no_plan
    if plan.measures is None:
        return "the measures are evaluated per match on the CPU"
    try:
        gpu_plan(plan)
    except Unsupported as exc:
        return str(exc)
    return None


def window(config: Config, width: RowWidth) -> int:
    """Rows one candidate start may walk: the attempt bound of the buffer limit
    (:func:`matchsql.engine.buffer_limit.max_rows`) for rows ``width`` wide."""
    return max_rows(config, width)


def work(rows: int, config: Config, width: RowWidth) -> int:
    """Estimated row visits of one partition: rows x window (the window capped by rows)."""
    return rows * min(rows, window(config, width))
