"""run_deep: recursion room for statement compilation, and no RecursionError out of it."""

from __future__ import annotations

import sys

import pytest

from matchsql.deep import NestingError, run_deep


def depth(n: int) -> int:
    return 0 if n == 0 else 1 + depth(n - 1)


def test_deep_recursion_runs_and_the_limit_comes_back() -> None:
    before = sys.getrecursionlimit()
    with pytest.raises(RecursionError):
        depth(before + 100)
    assert run_deep(lambda: depth(5_000)) == 5_000
    assert sys.getrecursionlimit() == before


def test_runaway_recursion_is_a_matchsql_error() -> None:
    def forever(n: int) -> int:
        return forever(n + 1)

    with pytest.raises(NestingError, match=r"nested too deeply \(limit 100\)"):
        run_deep(lambda: forever(0))


def test_errors_and_nested_calls_pass_through() -> None:
    with pytest.raises(KeyError):
        run_deep(lambda: {}["missing"])
    assert run_deep(lambda: run_deep(lambda: depth(3_000))) == 3_000
