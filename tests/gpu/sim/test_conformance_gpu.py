"""Every conformance case the GPU path takes gives the CPU paths' rows on it.

Each case runs with ``gpu = 'off'`` (the planner's CPU choice) and with
``gpu = 'on'`` in numba's CUDA simulator; a case the GPU path does not take
fails with a message naming the reason and is counted as skipped.
"""

from __future__ import annotations

import pytest

import matchsql
from tests.conformance.case import Case
from tests.conformance.test_conformance import ALL_CASES

NOT_APPLICABLE = "gpu = 'on' does not apply to this query"


def outcome(case: Case, gpu: str) -> tuple[str, object]:
    con = matchsql.connect(demo=False, gpu=gpu)
    try:
        for stmt in case.setup:
            con.sql(stmt)
        result = con.sql(case.query)
        rows = result.fetchall() if result is not None else []
    except matchsql.Error as exc:
        if NOT_APPLICABLE in str(exc):
            return "n/a", str(exc)
        return "error", type(exc).__name__
    finally:
        con.close()
    return "rows", rows if case.ordered else sorted(rows, key=repr)


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_gpu_agrees(case: Case) -> None:
    got = outcome(case, "on")
    if got[0] == "n/a":
        pytest.skip(str(got[1]))
    assert got == outcome(case, "off"), case.query
