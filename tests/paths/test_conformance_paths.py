"""Every conformance query on every compiled path gives the reference matcher's result.

The cases are the conformance suite's (same tables, same statements); each
runs once with ``execution_path = 'reference'`` and once per compiled path.
A path that does not apply to a query says so with an error naming the
reason; such combinations are skipped, and ``auto`` must then have chosen
the reference matcher.
"""

from __future__ import annotations

import pytest

import matchsql
from tests.conformance.case import Case
from tests.conformance.test_conformance import ALL_CASES

COMPILED = ("row_local", "registers")
NOT_APPLICABLE = "does not apply to this query"


def outcome(case: Case, path: str) -> tuple[str, object]:
    """('rows', sorted-or-ordered rows) or ('error', error class name) of ``case`` on ``path``."""
    con = matchsql.connect(demo=False, execution_path=path)
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
def test_paths_agree(case: Case) -> None:
    reference = outcome(case, "reference")
    applied = 0
    for path in COMPILED:
        got = outcome(case, path)
        if got[0] == "n/a":
            continue
        applied += 1
        assert got == reference, (path, case.query)
    auto = outcome(case, "auto")
    assert auto == reference, ("auto", case.query)
