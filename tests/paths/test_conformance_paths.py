"""Every conformance case on every execution path that accepts it gives the same rows.

The cases are the conformance suite's (same tables, same statements); each
runs once per path, forced with ``execution_path``: the reference matcher,
each compiled path, and ``auto``. A path that does not apply to a query says
so with an error naming the reason; such combinations are skipped, and
``auto`` must then have chosen another path. Every path that runs a case must
give the case's hand-derived rows (or raise its error class), not merely
agree with the reference; the compiled paths run a second time with tiny
DuckDB batches, so that their matchers resume across batch boundaries.
"""

from __future__ import annotations

import pytest

import matchsql
from tests.conformance.case import Case
from tests.conformance.test_conformance import ALL_CASES

PATHS = ("reference", "row_local", "registers", "auto")
COMPILED = ("row_local", "registers")
NOT_APPLICABLE = "does not apply to this query: "


def outcome(case: Case, path: str, **options: object) -> tuple[str, object]:
    """('rows', sorted-or-ordered rows), ('error', error class) or ('n/a', the reason)
    of ``case`` on ``path``."""
    con = matchsql.connect(demo=False, execution_path=path, **options)
    try:
        for stmt in case.setup:
            con.sql(stmt)
        result = con.sql(case.query)
        rows = result.fetchall() if result is not None else []
    except matchsql.Error as exc:
        if NOT_APPLICABLE in str(exc):
            return "n/a", str(exc).split(NOT_APPLICABLE, 1)[1]
        return "error", type(exc)
    finally:
        con.close()
    return "rows", rows if case.ordered else sorted(rows, key=repr)


def expected(case: Case) -> tuple[str, object]:
    if isinstance(case.expected, type):
        return "error", case.expected
    return "rows", case.expected if case.ordered else sorted(case.expected, key=repr)


def agrees(got: tuple[str, object], want: tuple[str, object]) -> bool:
    if want[0] == "error":  # the class or one of its subclasses, as pytest.raises does
        return got[0] == "error" and issubclass(got[1], want[1])  # type: ignore[arg-type]
    return got == want


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_every_path_gives_the_expected_rows(case: Case) -> None:
    want = expected(case)
    runs = [(path, {}) for path in PATHS] + [(path, {"batch_size": 2}) for path in COMPILED]
    for path, options in runs:
        got = outcome(case, path, **options)
        if got[0] == "n/a":
            assert path in COMPILED and str(got[1]).strip(), (path, got)  # a reason is named
            continue
        assert agrees(got, want), (path, options, case.query, case.why)
