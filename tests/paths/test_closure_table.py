"""The thread VM's closure table (:func:`matchsql.engine.compiled.lowering.closure_table`).

The kernel reads a thread's epsilon closure from the table instead of walking
the program, and keeps one thread where two differ in their loop flags only.
Both must leave every result as it was: the same queries run with the table
and with the program walked (its first six columns, no table) give the same
rows, and both equal the reference matcher.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, assume, given, settings

import matchsql
from matchsql.config import Config
from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled.compiled_matcher import CompiledMatcher, CompiledPlan
from matchsql.engine.compiled.lowering import Unsupported, program_array
from matchsql.engine.planner import new_partition_matcher
from matchsql.engine.reference import CompiledQuery
from tests.paths.test_random_paths import compiled_cases
from tests.property.strategies import SCHEMA, fed_in_splits, spec_of

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _program(pattern: str) -> np.ndarray:
    spec = spec_of(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn "
        f"PATTERN ({pattern}) DEFINE A AS x > PREV(x))"
    )
    return program_array(CompiledQuery(spec).program)


def _table(prog: np.ndarray) -> dict[int, list[int]]:
    """Origin pc -> the listed LABEL/DONE pcs (rows whose count is not -1)."""
    out = {}
    for pc in range(len(prog)):
        count = int(prog[pc, K.P_CLOSURE])
        if count >= 0:
            out[pc] = prog[pc, K.P_CLOSURE + 1 : K.P_CLOSURE + 1 + count].tolist()
    return out


def test_closure_table_of_the_dejavu_shape() -> None:
    # A B+ C* D+ compiles to: 0 A, 1 B, 2 SPLIT(3, 6), 3 BEGIN, 4 B, 5 END(2, 6), 6 SPLIT(7,
    # 10), 7 BEGIN, 8 C, 9 END(6, 10), 10 D, 11 SPLIT(12, 15), 12 BEGIN, 13 D, 14 END, 15 DONE.
    # Why: after B (pc 1 or 4) the preferred successor is another B (the greedy loop),
    # then C (C* greedy), then D; after C another C, then D; after D another D, then the
    # end of the match. The seed reaches A, and A is followed by its one B.
    prog = _program("A B+ C* D+")
    assert _table(prog) == {
        0: [0],
        1: [1],
        2: [4, 8, 10],
        5: [4, 8, 10],
        9: [8, 10],
        11: [13, 15],
        14: [13, 15],
    }


def test_reluctant_loop_lists_the_exit_first() -> None:
    # Why: ``A+?`` prefers leaving the loop after each A, so B (pc 5) comes before the
    # next A (pc 3) in the closure after an A.
    prog = _program("A+? B")
    ops = prog[:, 0].tolist()
    a_pcs = [pc for pc, op in enumerate(ops) if op == K.P_LABEL and prog[pc, 1] == 0]
    b_pc = next(pc for pc, op in enumerate(ops) if op == K.P_LABEL and prog[pc, 1] == 1)
    table = _table(prog)
    assert table[a_pcs[-1] + 1][0] == b_pc and table[a_pcs[-1] + 1][1] == a_pcs[-1]


def test_no_table_where_flags_or_anchors_decide() -> None:
    # Why: a loop body that matches the empty sequence ((A?)+, (A*)*) ends an iteration
    # by its loop flag; ``^`` and ``$`` depend on the position. The kernel then walks
    # the program, so every count is -1.
    for pattern in ("(A?)+ B", "(A*)* B", "(A | B*)+", "^A+", "A+ $"):
        prog = _program(pattern)
        assert (prog[:, K.P_CLOSURE] == -1).all(), pattern


def _rows(plan: CompiledPlan, rows: list[dict], splits: list[int]):
    config = Config()
    config.execution_path = "registers"
    try:
        out = fed_in_splits(CompiledMatcher(plan, (), config), rows, splits)
    except matchsql.Error as exc:
        return "error", type(exc).__name__
    return "rows", [tuple(r.values()) for b in out for r in b.to_pylist()]


def _compare(sql: str, rows: list[dict], splits: list[int]) -> bool:
    """The rows with the table equal those with the program walked; True when the table
    applied (the kernel took it)."""
    try:
        plan = CompiledPlan.build(spec_of(sql))
    except (matchsql.Error, Unsupported):
        assume(False)
        return False
    walked = dataclasses.replace(plan, program=np.ascontiguousarray(plan.program[:, :6]))
    assert _rows(plan, rows, splits) == _rows(walked, rows, splits), (sql, rows, splits)
    return bool(plan.program[0, K.P_CLOSURE] >= 0)


@SETTINGS
@given(compiled_cases())
def test_table_equals_walked_program(case: tuple[str, list[dict], list[int]]) -> None:
    _compare(*case)


DEJAVU_ALL_ROWS = """SELECT * FROM t MATCH_RECOGNIZE (
  ORDER BY id
  MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, RUNNING SUM(B.x) AS sb,
           RUNNING COUNT(C.*) AS nc, FIRST(D.x) AS fd
  ALL ROWS PER MATCH
  AFTER MATCH SKIP {skip}
  {extension}
  PATTERN (A B+ C* D+)
  DEFINE B AS B.x < A.x AND B.x <= PREV(B.x),
         C AS C.x > B.x AND C.x >= PREV(C.x) AND C.x <= A.x,
         D AS D.x > PREV(D.x) AND D.x > A.x
)"""


def test_dejavu_shape_on_equal_prices_equals_reference() -> None:
    # Why: runs of equal values are where threads differing in their flags only met; the
    # table keeps one of them, which must change neither the matches nor their running
    # measures, CLASSIFIER and MATCH_NUMBER, under ALL MATCHES or not.
    xs = [5, 3, 3, 3, 4, 4, 5, 6, 6, 7, 2, 2, 1, 1, 3, 3, 8, 9, 9, 4, 4, 4, 2, 5, 6, 7, 7]
    rows = [{"id": i, "x": x, "y": 0} for i, x in enumerate(xs)]
    for skip in ("PAST LAST ROW", "TO NEXT ROW"):
        for extension in ("", "ALL MATCHES"):
            sql = DEJAVU_ALL_ROWS.format(skip=skip, extension=extension)
            assert _compare(sql, rows, [7, 15])
            reference = Config()
            reference.execution_path = "reference"
            matcher = new_partition_matcher(spec_of(sql), (), reference)
            out = matcher.feed(pa.RecordBatch.from_pylist(rows, schema=SCHEMA)) + matcher.finish()
            want = [tuple(r.values()) for b in out for r in b.to_pylist()]
            assert want, sql  # the data holds matches
            plan = CompiledPlan.build(spec_of(sql))
            assert _rows(plan, rows, [7, 15]) == ("rows", want), sql
