"""An attempt still open when the input ends is decided in linear time.

``A B* C`` where no ``C`` row comes: the attempt from the first row reads to
the end and fails there, and so does the attempt from every later row. The
DFA records the failed attempt's states as dead ends and a later attempt in
the same state at the same row stops there (:mod:`matchsql.engine.compiled.dfa`),
so the work is linear in the rows. The thread VM (registers, ALL MATCHES, ``$``)
does the same with lists of threads (the comment at
:data:`matchsql.engine.compiled.kernel.MEMO_EVERY`). Work is counted in kernel steps (rows read by
attempts, ``CompiledMatcher.steps``), not seconds: twice the rows must cost about
twice the steps, where each start row reading to the end would cost four times.
The rows are the reference matcher's.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from matchsql.config import Config
from matchsql.engine.compiled.compiled_matcher import CompiledMatcher
from matchsql.engine.compiled.dfa import MEMO_EVERY
from matchsql.engine.planner import new_partition_matcher
from tests.property.strategies import spec_of

SCHEMA = pa.schema([("id", pa.int32()), ("x", pa.int32()), ("y", pa.int32())])
QUERY = """SELECT * FROM t MATCH_RECOGNIZE (
  ORDER BY id
  MEASURES FIRST(id) AS first_id, LAST(id) AS last_id, COUNT(*) AS n, CLASSIFIER() AS cls
  {rows}
  AFTER MATCH SKIP {skip}
  PATTERN ({pattern})
  DEFINE C AS {define}
)"""
C_ROWS = (5, 17, 40)  # the only rows where C holds; none after row 40


def _query(rows: str, skip: str, pattern: str, define: str = "x < 0") -> str:
    return QUERY.format(rows=rows, skip=skip, pattern=pattern, define=define)


def _rows(n: int, c_rows: tuple[int, ...] = C_ROWS) -> list[dict]:
    return [{"id": i, "x": -1 if i in c_rows else 1, "y": i % 7} for i in range(n)]


def _run(sql: str, rows: list[dict], path: str, batches: int = 4) -> tuple[list, int]:
    """Output rows of a live matcher fed ``rows`` in ``batches`` batches, and its steps."""
    config = Config()
    config.threads = 1
    config.execution_path = path
    matcher = new_partition_matcher(spec_of(sql, SCHEMA), (), config, live=True)
    out: list[pa.RecordBatch] = []
    size = -(-len(rows) // batches)
    for begin in range(0, len(rows), size):
        out += matcher.feed(pa.RecordBatch.from_pylist(rows[begin : begin + size], schema=SCHEMA))
    out += matcher.finish()
    steps = matcher.steps if isinstance(matcher, CompiledMatcher) else -1
    return [tuple(r.values()) for b in out for r in b.to_pylist()], steps


CASES = [
    ("ONE ROW PER MATCH", "PAST LAST ROW", "*"),
    ("ONE ROW PER MATCH", "TO NEXT ROW", "*"),
    ("ALL ROWS PER MATCH", "PAST LAST ROW", "*?"),
    ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", "TO NEXT ROW", "*"),
    ("ONE ROW PER MATCH", "TO LAST B", "+"),
]


@pytest.mark.parametrize(("rows", "skip", "quantifier"), CASES)
def test_open_attempt_at_end_equals_reference(rows: str, skip: str, quantifier: str) -> None:
    sql = _query(rows, skip, f"A B{quantifier} C")
    data = _rows(300)
    expected, _ = _run(sql, data, "reference")
    got, _ = _run(sql, data, "row_local")
    assert got == expected
    assert any("C" in r for r in got)  # the rows have matches (CLASSIFIER() C)


@pytest.mark.parametrize(("rows", "skip", "quantifier"), CASES)
def test_open_attempt_at_end_is_linear(rows: str, skip: str, quantifier: str) -> None:
    sql = _query(rows, skip, f"A B{quantifier} C")
    n = 20_000
    small, small_steps = _run(sql, _rows(n), "row_local")
    large, large_steps = _run(sql, _rows(2 * n), "row_local")
    # Rows from the first attempts on: equal up to the longer input's unmatched tail.
    assert large[: len(small) // 2] == small[: len(small) // 2]
    # Each start row after the last C reads at most MEMO_EVERY rows before it meets a dead
    # end; the open attempt is re-read once per batch (4 batches) and once at the end.
    assert small_steps <= (MEMO_EVERY + 2 + 5) * n
    assert large_steps <= 2.2 * small_steps


@pytest.mark.parametrize("skip", ["TO NEXT ROW", "PAST LAST ROW"])
def test_dead_ends_are_per_state(skip: str) -> None:
    """``A (B B)* C`` with one C row: attempts from starts of one parity reach it after an
    even number of B rows and match, the others read to the end and fail. At the same
    row the two kinds are in different states, so a failed attempt's dead ends must stop
    only the attempts of its own parity."""
    sql = _query("ONE ROW PER MATCH", skip, "A (B B)* C")
    data = _rows(8 * MEMO_EVERY, (6 * MEMO_EVERY,))
    expected, _ = _run(sql, data, "reference")
    got, _ = _run(sql, data, "row_local")
    assert got == expected
    assert len(got) == (3 * MEMO_EVERY if skip == "TO NEXT ROW" else 1)


# The thread VM: a row-local query forced onto it, ALL MATCHES, ``$``, and conditions
# that read registers the same for every attempt at a row (LAST(B.y): the row before;
# LAST(y, 2): two rows back, NULL only on an attempt's first rows).
VM_CASES = [
    ("ONE ROW PER MATCH", "PAST LAST ROW", "A B* C", "x < 0", "registers"),
    ("ONE ROW PER MATCH", "TO NEXT ROW", "A B+ C", "x < 0", "registers"),
    ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", "TO NEXT ROW", "A B* C", "x < 0", "registers"),
    ("ONE ROW PER MATCH", "TO LAST B", "A B+ C", "x < 0", "registers"),
    ("ALL ROWS PER MATCH ALL MATCHES", "TO NEXT ROW", "A B* C", "x < 0", "auto"),
    ("ALL ROWS PER MATCH ALL MATCHES", "PAST LAST ROW", "A B* C+", "x < 0", "auto"),
    ("ONE ROW PER MATCH", "TO NEXT ROW", "A (B* C $ | C)", "x < 0", "auto"),
    ("ALL ROWS PER MATCH WITH UNMATCHED ROWS", "PAST LAST ROW", "A B* C $", "x < 0", "auto"),
    ("ONE ROW PER MATCH", "TO NEXT ROW", "A B* C", "x < 0 AND LAST(B.y) >= 0", "auto"),
    ("ONE ROW PER MATCH", "PAST LAST ROW", "A B* C", "x < 0 AND LAST(y, 2) >= 0", "auto"),
]


def _vm_steps(sql: str, rows: list[dict], path: str) -> tuple[list, int]:
    got, steps = _run(sql, rows, path)
    assert steps >= 0
    return got, steps


@pytest.mark.parametrize(("rows", "skip", "pattern", "define", "path"), VM_CASES)
def test_vm_open_attempt_at_end_equals_reference(
    rows: str, skip: str, pattern: str, define: str, path: str
) -> None:
    sql = _query(rows, skip, pattern, define)
    data = _rows(300)
    expected, _ = _run(sql, data, "reference")
    got, _ = _vm_steps(sql, data, path)
    assert got == expected
    if "$" not in pattern:
        assert any("C" in r for r in got)


@pytest.mark.parametrize(("rows", "skip", "pattern", "define", "path"), VM_CASES)
def test_vm_open_attempt_at_end_is_linear(
    rows: str, skip: str, pattern: str, define: str, path: str
) -> None:
    sql = _query(rows, skip, pattern, define)
    n = 4_000
    small, small_steps = _vm_steps(sql, _rows(n), path)
    large, large_steps = _vm_steps(sql, _rows(2 * n), path)
    assert large[: len(small) // 2] == small[: len(small) // 2]
    assert small_steps <= (MEMO_EVERY + 2 + 5) * n
    assert large_steps <= 2.2 * small_steps


@pytest.mark.parametrize("skip", ["TO NEXT ROW", "PAST LAST ROW"])
def test_vm_dead_ends_compare_registers(skip: str) -> None:
    """``C.y > A.y`` with one C row (200): attempts from rows below 100 (y = 60) fail
    there (50 > 60 is false) and read to the end; attempts from rows 100-199 (y = 0)
    match it. At a row between, both kinds have their threads at the same program
    states, and only A's register (its row, where y differs) tells them apart: a
    failed attempt's dead ends must not stop the attempts of a different A."""
    sql = _query("ONE ROW PER MATCH", skip, "A B* C", "x < 0 AND C.y > A.y")
    data = [
        {"id": i, "x": -1 if i == 200 else 1, "y": 50 if i == 200 else (60 if i < 100 else 0)}
        for i in range(8 * MEMO_EVERY)
    ]
    expected, _ = _run(sql, data, "reference")
    got, _ = _vm_steps(sql, data, "auto")
    assert got == expected
    assert [r[0] for r in got] == (list(range(100, 200)) if skip == "TO NEXT ROW" else [100])
