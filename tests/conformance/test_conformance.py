"""Runs every conformance case through the public API.

Each case creates its own tables in a fresh in-memory connection (no demo
data), runs one statement, and compares the rows with the hand-derived
expectation, or checks that the statement raises the expected
:class:`matchsql.Error` subclass.
"""

from __future__ import annotations

import pytest

import matchsql

from . import (
    cases_errors,
    cases_expressions,
    cases_navigation,
    cases_patterns,
    cases_running,
    cases_semantics,
    cases_sql,
    cases_window,
    cases_within,
)
from .case import Case

ALL_CASES: list[Case] = (
    cases_patterns.CASES
    + cases_expressions.CASES
    + cases_sql.CASES
    + cases_errors.CASES
    + cases_semantics.CASES
    + cases_navigation.CASES
    + cases_window.CASES
    + cases_within.CASES
    + cases_running.CASES
)


def _run(case: Case) -> matchsql.Result | None:
    con = matchsql.connect(demo=False)
    for stmt in case.setup:
        con.sql(stmt)
    return con.sql(case.query)


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_case(case: Case) -> None:
    if isinstance(case.expected, type):
        with pytest.raises(case.expected):
            result = _run(case)
            if result is not None:
                result.fetchall()
        return
    result = _run(case)
    assert result is not None
    if case.columns is not None:
        assert tuple(result.columns) == case.columns
    got = result.fetchall()
    expected = case.expected
    if case.ordered:
        assert got == expected, case.why
    else:
        assert sorted(got, key=repr) == sorted(expected, key=repr), case.why


def test_case_count() -> None:
    """The suite promises at least 300 cases."""
    assert len(ALL_CASES) >= 300, len(ALL_CASES)


def test_case_names_unique() -> None:
    names = [c.name for c in ALL_CASES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
