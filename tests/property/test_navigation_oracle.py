"""Random navigation in MEASURES and DEFINE: every path gives the oracle's rows.

Measures nest PREV/NEXT around FIRST/LAST with offsets, under RUNNING and
FINAL, over columns, pattern variables, the subset U and CLASSIFIER(); the
queries use random patterns, output modes and skips from the shared
strategies. The oracle resolves navigation by its own rules
(:mod:`matchsql.testing.oracle_navigation`), so this is a real second opinion
for the reference evaluator as well as for the compiled measures.

A longer run (the issue asks for thousands of queries)::

    NAV_EXAMPLES=2000 .venv/bin/python -m pytest -q -p no:cacheprovider \\
        tests/property/test_navigation_oracle.py
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.plan.pattern import Concatenation, Label, PatternNode, Quantified
from matchsql.testing.oracle import Oracle
from tests.paths.test_random_paths import _run as run_path

from .strategies import (
    CONDITIONS,
    ROWS,
    SKIPS,
    VARIABLES,
    as_result,
    partitions,
    patterns,
    spec_of,
    with_derived,
)

EXAMPLES = int(os.environ.get("NAV_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("NAV_EXAMPLES"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
PATHS = ("reference", "row_local", "registers", "auto")

offsets = st.integers(0, 3)
semantics = st.sampled_from(["", "", "RUNNING ", "FINAL "])
numeric_targets = st.sampled_from(["x", "y", "A.x", "B.y", "U.x", "C.y", "x + y", "A.x * 2"])
label_targets = st.sampled_from(["CLASSIFIER()", "CLASSIFIER(U)", "CLASSIFIER(A)"])


@st.composite
def navigation(draw: st.DrawFn, targets: st.SearchStrategy[str], define: bool = False) -> str:
    """One value reference: a target, maybe inside FIRST/LAST, maybe inside PREV/NEXT."""
    target = draw(targets)
    form = draw(st.sampled_from(["plain", "logical", "physical", "nested", "nested"]))
    sem = "" if define else draw(semantics)
    logical = f"{sem}{draw(st.sampled_from(['FIRST', 'LAST']))}({target}, {draw(offsets)})"
    physical = draw(st.sampled_from(["PREV", "NEXT"]))
    if form == "plain":
        return target
    if form == "logical":
        return logical
    if form == "physical":
        return f"{physical}({target}, {draw(offsets)})"
    return f"{physical}({logical}, {draw(offsets)})"


@st.composite
def measures(draw: st.DrawFn) -> str:
    items = [draw(navigation(numeric_targets)) for _ in range(draw(st.integers(1, 3)))]
    if items[0].startswith(("PREV", "NEXT")):  # semantics around PREV/NEXT reach inside
        items[0] = draw(semantics) + items[0]
    items.append(draw(navigation(label_targets)))
    if draw(st.booleans()):
        items.append(
            f"COALESCE({draw(navigation(numeric_targets))}, -1) "
            f"+ {draw(navigation(numeric_targets))}"
        )
    return ", ".join(f"{m} AS m{i}" for i, m in enumerate(items))


@st.composite
def conditions(draw: st.DrawFn) -> str:
    """A DEFINE condition: one of the shared ones or a comparison over navigation."""
    if draw(st.booleans()):
        return draw(st.sampled_from(CONDITIONS))
    left = draw(navigation(numeric_targets, define=True))
    right = draw(st.sampled_from(["x", "y", "1", "PREV(x)"]))
    if draw(st.integers(0, 3)) == 0:
        return f"{draw(navigation(label_targets, define=True))} IS NULL"
    return f"{left} {draw(st.sampled_from(['<', '>=', '<>']))} {right}"


@st.composite
def full_patterns(draw: st.DrawFn) -> PatternNode:
    """A random pattern that names A, B and C (the measures and SUBSET U refer to them):
    each missing variable is put before or after it, maybe optional or repeated."""
    pattern = draw(patterns)
    for name in VARIABLES:
        if name in pattern.variables():
            continue
        lo, hi = draw(st.sampled_from([(1, 1), (0, 1), (0, None), (1, None)]))
        part = Label(name) if (lo, hi) == (1, 1) else Quantified(Label(name), lo, hi, True)
        pattern = Concatenation((part, pattern) if draw(st.booleans()) else (pattern, part))
    return pattern


@st.composite
def queries(draw: st.DrawFn) -> str:
    return (
        "SELECT * FROM t MATCH_RECOGNIZE (\n"
        "  ORDER BY id\n"
        f"  MEASURES {draw(measures())}\n"
        f"  {draw(st.sampled_from(ROWS))}\n"
        f"  AFTER MATCH SKIP {draw(st.sampled_from(SKIPS))}\n"
        f"  PATTERN ({draw(full_patterns()).to_sql()})\n"
        "  SUBSET U = (A, B)\n"
        f"  DEFINE A AS {draw(conditions())}, B AS {draw(conditions())}\n"
        ")"
    )


@SETTINGS
@given(sql=queries(), rows=partitions, data=st.data())
def test_navigation_matches_oracle(sql: str, rows: list[dict], data: st.DataObject) -> None:
    try:
        spec = spec_of(sql)
    except matchsql.Error:
        assume(False)
        return
    try:
        expected = ("rows", as_result(spec, Oracle(spec).run(with_derived(spec, rows), ())))
    except matchsql.Error as exc:
        assume(type(exc).__name__ != "LimitExceededError")
        expected = ("error", type(exc).__name__)
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    for path in PATHS:
        got = run_path(spec, rows, splits, path)
        if got[0] != "n/a":
            assert got == expected, (path, sql, rows, splits)
