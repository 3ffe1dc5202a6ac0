"""Whether the GPU column path applies to a query, and its work estimate.

The reasons come from the one support table (:mod:`matchsql.expr.support`,
backend ``gpu``) for the DEFINE terms; the rest are the shapes this path does
not take yet, each named so that ``SET gpu = 'on'`` and EXPLAIN can say why.
"""

from __future__ import annotations

from matchsql.config import Config
from matchsql.expr.support import GPU, why_not
from matchsql.fsm.compiled.lowering import conjuncts, is_numeric
from matchsql.fsm.compiled.matcher import CompiledPlan
from matchsql.plan.binder import bind
from matchsql.plan.bound import Pointer
from matchsql.plan.spec import MatchSpec, RowsPerMatch


def unsupported(spec: MatchSpec, plan: CompiledPlan | None, why_no_plan: str) -> str | None:
    """Why the GPU path cannot run ``spec`` (None: it can)."""
    if spec.within is not None:
        return "WITHIN bounds the match in time"
    if plan is None:
        return why_no_plan
    if spec.all_matches or spec.incremental:
        return "ALL MATCHES / INCREMENTAL keep every end of an attempt"
    if spec.rows_per_match is RowsPerMatch.ALL_WITH_UNMATCHED:
        return "WITH UNMATCHED ROWS is output per row"
    if plan.measures is None:
        return "the measures are evaluated per match on the CPU"
    if plan.path != "row_local":
        return ("a DEFINE reads other rows of the match (A.x, FIRST/LAST); the GPU path "
                "evaluates row-local terms only")
    types = {f.name: f.type for f in spec.columns}
    for var, expr in spec.defines.items():
        for term in conjuncts(bind(expr, spec)):
            reason = why_not(term, GPU)
            if reason is not None:
                return f"DEFINE {var}: {reason}"
            for p in term.find_all(Pointer):
                if p.column is not None and not is_numeric(types[p.column]):
                    return f"DEFINE {var}: {p.text} is not a numeric column"
    return None


def window(config: Config) -> int:
    """Rows one candidate start may walk: the attempt bound ``max_buffered_rows``."""
    return config.max_buffered_rows


def work(rows: int, config: Config) -> int:
    """Estimated row visits of one partition: rows x window (the window capped by rows)."""
    return rows * min(rows, window(config))
