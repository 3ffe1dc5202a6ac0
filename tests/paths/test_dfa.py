"""The row-local DFA (:mod:`matchsql.engine.compiled.dfa`) decides exactly what the thread VM does.

(a) Kernel level: random patterns (the property suite's: concatenation,
alternation, quantifiers greedy and reluctant, bounded repetition, ``^``,
exclusions, PERMUTE) over random label bits, both kernels driven the way the
matcher drives them (rows arriving in batches, an open attempt waiting and
re-run, output arrays growing from tiny capacities, a look-ahead limit):
records, labels and the final counters are equal.

(b) Through the matcher: random row-local queries on the forced ``row_local``
path (the DFA) equal the reference matcher and the ``registers`` path (the
thread VM).
"""

from __future__ import annotations

import inspect

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from matchsql.config import Config
from matchsql.engine.compiled import dfa as D
from matchsql.engine.compiled import kernel as K
from matchsql.engine.compiled.lowering import program_array
from matchsql.engine.planner import new_partition_matcher
from matchsql.engine.program import Op, compile_pattern
from matchsql.plan.pattern import Anchor, AnchorKind, Concatenation, Label, Quantified
from tests.paths.test_random_paths import _check
from tests.property.strategies import SKIPS, patterns, spec_of, values

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SQL_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
MAX_THREADS = 10_000


NOT_CANCELLED = np.zeros(1, np.uint8)


def _vm_call(prog, rl, skip_mask, params, work):
    """``run_attempts`` called with no registers and no statistics (by parameter name)."""
    n_vars = rl.shape[1]
    known = {
        "prog": prog,
        "rl": rl,
        "viable": np.zeros(0, np.uint8),
        "wend": np.zeros(0, np.int64),
        "code": np.zeros((1, 5), np.int64),
        "fconst": np.zeros(1, np.float64),
        "spans": np.zeros((n_vars, 2), np.int64),
        "conj": np.zeros((1, 12), np.int64),
        "conj_spans": np.zeros((n_vars, 2), np.int64),
        "cconst": np.zeros((1, 2), np.float64),
        "cols": np.zeros((1, 1), np.float64),
        "valid": np.ones((1, 1), np.uint8),
        "set_mask": np.zeros((1, n_vars), np.uint8),
        "obs_last": np.zeros(n_vars, np.uint8),
        "obs_first": np.zeros(n_vars, np.uint8),
        "skip_mask": skip_mask,
        "params": params,
        "stat_state": np.zeros(0, np.int64),
        "stat_kind": np.zeros(0, np.uint8),
        "stat": np.zeros((4, 1), np.int64),
    }
    names = list(inspect.signature(K.run_attempts.py_func).parameters)
    head = [known[name] for name in names[: len(names) - len(work) - 1]]
    return K.run_attempts(*head, *work, NOT_CANCELLED)


def _drive(kind, prog, rl, dfa, splits, base, ahead, skip, skip_mask, unmatched, flip):
    """Feed ``rl`` in batches to one kernel as the matcher does; (records, final counters,
    rows read by the attempts).

    Rows past the look-ahead limit are not final yet: their conditioned bits
    arrive flipped (``flip``), so a kernel reading them gives different rows.
    """
    n_total = rl.shape[0]
    n_vars = rl.shape[1]
    caps = np.array([1, 1, 2, 1, 1, 1], np.int64)  # tiny: every output array must grow
    work = K.workspace(caps, len(prog), n_vars)
    params = np.zeros(K.K_PARAMS, np.int64)
    params[K.K_MAX_SPAN] = 1 << 40  # no cap on an attempt's rows
    next_start, mn, covered = 0, 0, -1
    out = []
    status = K.ST_DONE
    ends = [*sorted(set(splits)), n_total]
    for k, n in enumerate(ends):
        complete = k == len(ends) - 1
        params[K.K_ROWS] = n
        params[K.K_BASE] = base
        limit = n if complete else max(0, n - ahead)
        params[K.K_LIMIT] = limit
        seen = rl[:n].copy()
        seen[limit:] ^= flip
        sym = D.symbols(dfa, seen)
        params[K.K_COMPLETE] = int(complete)
        params[K.K_SKIP] = skip
        params[K.K_MAX_THREADS] = MAX_THREADS
        params[K.K_UNMATCHED] = int(unmatched)
        while True:
            params[K.K_NEXT] = next_start
            params[K.K_MN] = mn
            params[K.K_COVERED] = covered
            if kind == "dfa":
                res = D.run(dfa, sym, skip_mask, params, work[-2], work[-1], NOT_CANCELLED)
            else:
                res = _vm_call(prog, seen, skip_mask, params, work)
            status, nxt, mn, covered, err_row, n_rec, n_lab = (int(x) for x in res)
            records, labels = work[-2], work[-1]
            for r in range(n_rec):
                kd, start, length, number, offset = (int(x) for x in records[r])
                codes = labels[offset : offset + length].tolist() if kd == 0 else []
                out.append((kd, start, length, number, codes))
            next_start = nxt
            if status != K.ST_FULL:
                break
            caps[err_row] *= 2
            work = K.workspace(caps, len(prog), n_vars)
        if status >= K.ST_THREADS:
            return out, (status, next_start, mn, covered, err_row), int(params[K.K_STEPS])
    return out, (status, next_start, mn, covered), int(params[K.K_STEPS])


def _no_end_anchor(pattern) -> bool:
    return not any(isinstance(n, Anchor) and n.kind is AnchorKind.END for n in pattern.walk())


@SETTINGS
@given(pattern=patterns.filter(_no_end_anchor), data=st.data())
def test_dfa_equals_thread_vm(pattern, data: st.DataObject) -> None:
    _differential(pattern, data, data.draw(st.integers(0, 30)), [0.3, 0.5, 0.7, 0.9])


@settings(SETTINGS, max_examples=150)
@given(pattern=patterns.filter(_no_end_anchor), data=st.data())
def test_dfa_dead_ends_equal_thread_vm(pattern, data: st.DataObject) -> None:
    """Long inputs, variables mostly true or mostly false: long attempts that fail at the
    end or far from their start, so that later attempts meet the dead ends the DFA
    records every ``MEMO_EVERY`` rows and stop there; the rows are the thread VM's,
    which runs every attempt to its end."""
    _differential(
        pattern,
        data,
        data.draw(st.integers(2 * D.MEMO_EVERY, 8 * D.MEMO_EVERY)),
        [0.0, 0.01, 0.03, 0.9, 0.97, 1.0],
    )


def _differential(pattern, data: st.DataObject, rows: int, densities: list[float]) -> None:
    program = compile_pattern(pattern)
    assume(len(program.variables) > 0 or data.draw(st.booleans()))
    prog = program_array(program)
    n_vars = max(len(program.variables), 1)
    conditioned = data.draw(
        st.lists(st.sampled_from([True, True, True, False]), min_size=n_vars, max_size=n_vars)
    )
    dfa = D.build(prog, conditioned)
    assert dfa is not None
    # Random bits from a seed (Hypothesis' own lists shrink towards all-false rows).
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # One density per variable: a rare variable ends attempts late or never.
    density = np.array(
        data.draw(st.lists(st.sampled_from(densities), min_size=n_vars, max_size=n_vars))
    )
    rl = rng.random((rows, n_vars)) < density
    rl = (rl | ~np.array(conditioned, bool)).astype(np.uint8)
    splits = data.draw(st.lists(st.integers(0, rows), max_size=3))
    base = data.draw(st.sampled_from([0, 0, 3]))
    ahead = data.draw(st.integers(0, 2))
    skip = data.draw(st.sampled_from([K.SKIP_PAST, K.SKIP_NEXT, K.SKIP_FIRST, K.SKIP_LAST]))
    skip_mask = np.array(
        data.draw(st.lists(st.booleans(), min_size=n_vars, max_size=n_vars)), np.uint8
    )
    unmatched = data.draw(st.booleans())
    flip = np.array(conditioned, np.uint8)
    args = (prog, rl, dfa, splits, base, ahead, skip, skip_mask, unmatched, flip)
    assert _drive("dfa", *args)[:2] == _drive("vm", *args)[:2], program.dump()


def test_dfa_declines() -> None:
    """``$`` and too many conditioned variables keep the thread VM."""
    prog = program_array(compile_pattern(Anchor(AnchorKind.END)))
    assert D.build(prog, []) is None
    names = [f"V{i}" for i in range(D.MAX_COND_VARS + 1)]
    prog = program_array(compile_pattern(Concatenation(tuple(Label(n) for n in names))))
    assert D.build(prog, [True] * len(names)) is None
    assert D.build(prog, [True] * D.MAX_COND_VARS + [False]) is not None


def test_dfa_small_tables() -> None:
    """``A B+ C+`` with A unconditioned: four symbols, a handful of states."""
    plus = [Quantified(Label(v), 1, None) for v in "BC"]
    program = compile_pattern(Concatenation((Label("A"), *plus)))
    assert program.instructions[0].op is Op.LABEL
    dfa = D.build(program_array(program), [False, True, True])
    assert dfa is not None and dfa.trans.shape[1] == 4 and dfa.states < 10


# -- (b) through the matcher -------------------------------------------------------------

ROW_LOCAL_CONDITIONS = [
    "x > PREV(x)",
    "x = 1",
    "x IS NULL",
    "y >= 2",
    "NEXT(x) IS NOT NULL AND NEXT(x) > x",
    "x <> PREV(x, 2)",
    "x IN (0, 2)",
    "NOT (x > y)",
    "-x < y - 2",
    "x < 2 AND y <> x",
]
MEASURES = "MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n, FIRST(x) AS fx, LAST(y) AS ly"
ROWS = [
    "ONE ROW PER MATCH",
    "ALL ROWS PER MATCH",
    "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
    "ALL ROWS PER MATCH OMIT EMPTY MATCHES",
]
partitions = st.lists(st.tuples(values, values), max_size=12).map(
    lambda rows: [{"id": i, "x": x, "y": y} for i, (x, y) in enumerate(rows)]
)


@SQL_SETTINGS
@given(pattern=patterns.filter(_no_end_anchor), rows=partitions, data=st.data())
def test_row_local_queries(pattern, rows: list[dict], data: st.DataObject) -> None:
    a = data.draw(st.sampled_from(ROW_LOCAL_CONDITIONS))
    b = data.draw(st.sampled_from(ROW_LOCAL_CONDITIONS))
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY id\n"
        f"  MEASURES {MEASURES}\n  {data.draw(st.sampled_from(ROWS))}\n"
        f"  AFTER MATCH SKIP {data.draw(st.sampled_from(SKIPS))}\n"
        f"  PATTERN ({pattern.to_sql()})\n  SUBSET U = (A, B)\n"
        f"  DEFINE A AS {a}, B AS {b}\n)"
    )
    try:
        spec = spec_of(sql)
    except Exception:  # noqa: BLE001 - e.g. SKIP TO a variable the pattern lacks
        assume(False)
        return
    config = Config()
    config.execution_path = "row_local"
    matcher = new_partition_matcher(spec, (), config)
    assert matcher.dfa is not None, sql
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    _check(sql, rows, splits)


def test_explain_names_the_automaton() -> None:
    import matchsql

    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE t (id INTEGER, x INTEGER, y INTEGER)")
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
        "PATTERN (A B+ C+) DEFINE B AS x < PREV(x), C AS {c})"
    )
    lines = [r[0] for r in con.sql("EXPLAIN " + query.format(c="x > PREV(x)")).fetchall()]
    assert any(line.startswith("automaton: DFA (") for line in lines), lines
    lines = [r[0] for r in con.sql("EXPLAIN " + query.format(c="x > A.x")).fetchall()]
    assert "automaton: thread VM (DEFINE reads registers)" in lines, lines
    con.sql("SET execution_path = 'registers'")
    lines = [r[0] for r in con.sql("EXPLAIN " + query.format(c="x > PREV(x)")).fetchall()]
    assert any(line.startswith("automaton: thread VM (forced") for line in lines), lines


def test_max_threads_keeps_the_thread_vm() -> None:
    spec = spec_of(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
        "PATTERN ((A | B)+) DEFINE A AS x > 1, B AS y > 1)"
    )
    config = Config()
    assert new_partition_matcher(spec, (), config).dfa is not None
    config.max_threads = 1
    assert new_partition_matcher(spec, (), config).dfa is None
