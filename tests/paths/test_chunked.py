"""One partition matched in speculative chunks equals the sequential run.

Three levels: the fix-up (:func:`matchsql.engine.compiled.chunks.match_chunks`)
over a model of the kernel's contract with arbitrary chunk cuts; the compiled
matchers with chunking forced by a tiny ``split_rows`` and many threads,
against the same path unsplit (random queries from the property suite, and
long matches that cross many chunks in every skip mode); and SQL, where the
conformance cases run with chunking forced.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.config import Config
from matchsql.engine.compiled import chunks as C
from matchsql.engine.compiled import kernel as K
from matchsql.engine.planner import new_partition_matcher
from matchsql.execution.router.partitions import feed_last
from tests.conformance.case import Case
from tests.conformance.test_conformance import ALL_CASES
from tests.paths.test_conformance_paths import COMPILED, agrees, expected, outcome
from tests.property.strategies import SCHEMA, queries, spec_of

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# -- the fix-up over a model of the kernel ------------------------------------------------


def model(lengths: list[int], skip_next: bool, errors: set[int]) -> C.WindowCall:
    """A kernel whose attempt at row ``a`` matches ``lengths[a]`` rows (0: fails), reads
    ``max(1, lengths[a])`` rows, and fails with ST_THREADS at the rows of ``errors``."""
    n = len(lengths)

    def call(start: int, limit: int, final: bool = True) -> C.Run:
        a, records, labels = start, [], []
        while a < n:
            if a in errors:
                return C.Run(K.ST_THREADS, a, a, _records(records), np.array(labels, np.int16))
            # Not final: an attempt that reads the last row may depend on rows to come.
            if a + max(1, lengths[a]) > limit - (0 if final else 1):
                return C.Run(K.ST_WAIT, a, -1, _records(records), np.array(labels, np.int16))
            if lengths[a]:
                records.append((0, a, lengths[a], 0, len(labels)))
                labels += [a % 7] * lengths[a]
            a = a + 1 if skip_next or not lengths[a] else a + lengths[a]
        return C.Run(K.ST_DONE, a, -1, _records(records), np.array(labels, np.int16))

    return call


def _records(rows: list[tuple]) -> np.ndarray:
    return np.array(rows, np.int64).reshape(-1, 5)


@settings(SETTINGS, max_examples=400)
@given(
    lengths=st.lists(st.integers(0, 12), min_size=1, max_size=80),
    data=st.data(),
    skip_next=st.booleans(),
)
def test_fix_up_equals_the_sequential_run_for_any_cuts(lengths, data, skip_next) -> None:
    n = len(lengths)
    errors = set(data.draw(st.lists(st.integers(0, n - 1), max_size=1)))
    cut = sorted(set(data.draw(st.lists(st.integers(1, n), min_size=1, max_size=12))) - {n})
    call = model(lengths, skip_next, errors)
    want = call(0, n)
    got = C.match_chunks(call, [0, *cut], n, first_step=data.draw(st.integers(1, 8)))
    assert got.status == want.status and got.stop == want.stop
    if want.status < K.ST_THREADS:  # on an error, the records before it do not matter
        assert got.records.tolist() == want.records.tolist()
        assert got.labels.tolist() == want.labels.tolist()


def test_cuts_split_only_what_pays() -> None:
    assert C.cuts(10, 30_000, 16_384, 2) == [10]  # too few rows for two chunks
    assert C.cuts(0, 100_000, 16_384, 1) == [0]  # one thread
    assert C.cuts(0, 100_000, 0, 2) == [0]  # split_rows = 0: never
    assert C.cuts(0, 100_000, 16_384, 2) == [0, 25_000, 50_000, 75_000]
    assert len(C.cuts(0, 10**6, 16_384, 2)) == 2 * C.CHUNKS_PER_THREAD
    # Whole rounds: three chunks on two threads would take as long as four.
    assert C.cuts(0, 57_357, 16_384, 2) == [0, 28_678]
    assert C.cuts(0, 80_000, 16_384, 3) == [0, 26_666, 53_333]
    assert C.cuts(0, 40_000, 16_384, 3) == [0, 20_000]  # fewer chunks than threads


def test_gathering_waits_for_whole_rounds_of_chunks() -> None:
    assert C.gather_rows(16_384, 2) == C.GATHER * 16_384 * 2
    assert C.gather_rows(16_384, 1) == 0  # one thread: nothing to split
    assert C.gather_rows(0, 8) == 0  # split_rows = 0: never split
    assert C.gather_rows(10**6, 64) == C.MAX_GATHER


# -- the compiled matchers, chunking forced -----------------------------------------------


def _run(
    spec,
    rows: list[dict],
    splits: list[int],
    path: str,
    split_rows: int,
    threads: int = 8,
    gather: bool = False,
):
    config = Config()
    config.execution_path = path
    config.split_rows = split_rows
    config.threads = threads
    try:
        matcher = new_partition_matcher(spec, (), config, gather=gather)
        out: list[pa.RecordBatch] = []
        begin = 0
        for end in sorted(splits):
            out += matcher.feed(pa.RecordBatch.from_pylist(rows[begin:end], schema=spec.columns))
            begin = end
        # The last rows and the end together, as the router sends a partition's last batch.
        out += feed_last(matcher, pa.RecordBatch.from_pylist(rows[begin:], schema=spec.columns))
    except matchsql.Error as exc:
        if "does not apply to this query" in exc.message:
            return "n/a", None
        return "error", type(exc).__name__, exc.message
    return "rows", [tuple(r.values()) for b in out for r in b.to_pylist()]


def _check(
    sql: str,
    rows: list[dict],
    splits: list[int],
    split_rows: int,
    threads: int = 8,
    schema=SCHEMA,
    gather: bool = False,
) -> None:
    """The split run (chunks of about ``len(rows) / (2 * threads)`` rows, at least
    ``split_rows``; with ``gather``, batches held until they fill
    ``C.gather_rows(split_rows, threads)`` rows) equals the unsplit one on every
    compiled path."""
    try:
        spec = spec_of(sql, schema)
    except matchsql.Error:
        assume(False)
        return
    for path in ("row_local", "registers"):
        want = _run(spec, rows, splits, path, 0)
        if want[0] == "n/a":
            continue
        got = _run(spec, rows, splits, path, split_rows, threads, gather)
        assert got == want, (path, sql, rows, splits, split_rows, threads, gather)


values = st.one_of(st.none(), st.integers(0, 3))
long_partitions = st.lists(st.tuples(values, values), min_size=2, max_size=60).map(
    lambda rows: [{"id": i, "x": x, "y": y} for i, (x, y) in enumerate(rows)]
)


@SETTINGS
@given(sql=queries(), rows=long_partitions, data=st.data())
def test_random_queries_equal_unsplit(sql: str, rows: list[dict], data) -> None:
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=2))
    _check(
        sql,
        rows,
        splits,
        data.draw(st.integers(1, 6)),
        data.draw(st.integers(2, 8)),
        gather=data.draw(st.booleans()),
    )


SKIPS = ["PAST LAST ROW", "TO NEXT ROW", "TO FIRST B", "TO LAST B", "TO LAST C"]
LONG = [
    # Q1's shape: A.x fixes the register path; runs of B and D cross chunks.
    (
        "A B+ C* D+",
        "B AS x < A.x AND x <= PREV(x), C AS x > B.x AND x <= A.x, D AS x > PREV(x) AND x > A.x",
    ),
    # Row-local: the DFA; long valleys.
    ("A B+ C+", "B AS x <= PREV(x), C AS x >= PREV(x)"),
    # Matches as long as the runs without a 9: tens of rows, many chunks each.
    ("A B* C", "B AS x <> 9, C AS x = 9"),
    ("(A | B)+ C", "A AS x < 5, B AS x < PREV(x) + 3, C AS NEXT(x) IS NULL OR x > NEXT(x)"),
    # Short matches and failures on the first row: re-runs that end exactly at their limit.
    ("A+", "A AS x <> 4 AND x <> 6"),
]


@st.composite
def walks(draw: st.DrawFn) -> list[dict]:
    """A random walk with rare 9s: long monotone stretches and long runs between 9s.

    Drawn from a seed: hypothesis' own lists lean to uniform steps, which rarely put
    a chunk's first row inside a match that the sequential run does not make."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(40, 300))
    steps = rng.choice([-2, -1, -1, 0, 1, 1, 2], n)
    x, rows = 4, []
    for i, step in enumerate(steps.tolist()):
        x = min(8, max(0, x + step))
        rows.append({"id": i, "x": 9 if rng.random() < 0.02 else x, "y": i % 3})
    return rows


@settings(SETTINGS, max_examples=200)
@given(rows=walks(), data=st.data())
def test_long_matches_across_many_chunks(rows: list[dict], data) -> None:
    pattern, define = data.draw(st.sampled_from(LONG))
    skip = data.draw(st.sampled_from(SKIPS))
    output = data.draw(st.sampled_from(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"]))
    extension = data.draw(st.sampled_from(["", "ALL MATCHES"]))
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id "
        "MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, FIRST(x) AS fx, LAST(x) AS lx, "
        f"COUNT(*) AS n {output} AFTER MATCH SKIP {skip} {extension} "
        f"PATTERN ({pattern}) DEFINE {define})"
    )
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=4))
    _check(
        sql,
        rows,
        splits,
        data.draw(st.integers(1, 20)),
        data.draw(st.integers(2, 8)),
        gather=data.draw(st.booleans()),
    )


def test_chunking_runs_in_these_tests(monkeypatch) -> None:
    calls = []
    real = C.match_chunks

    def spy(call, starts, stop, submit=None, first_step=C.FIRST_STEP, **kwargs):
        calls.append(len(starts))
        return real(call, starts, stop, submit, first_step, **kwargs)

    monkeypatch.setattr(C, "match_chunks", spy)
    rows = [{"id": i, "x": (i * 7) % 5, "y": 0} for i in range(100)]
    _check(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
        f"PATTERN ({LONG[1][0]}) DEFINE {LONG[1][1]})",
        rows,
        [],
        1,
    )
    assert calls and max(calls) > 10


def test_gathering_holds_batches_until_a_split_run_pays() -> None:
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS at "
        f"PATTERN ({LONG[1][0]}) DEFINE {LONG[1][1]})"
    )
    spec = spec_of(sql)
    rows = [{"id": i, "x": (i * 7) % 5, "y": 0} for i in range(100)]
    config = Config()
    config.split_rows, config.threads = 1, 2
    assert C.gather_rows(1, 2) == 32
    held, plain = (new_partition_matcher(spec, (), config, gather=g) for g in (True, False))
    batch = pa.RecordBatch.from_pylist(rows[:20], schema=spec.columns)
    assert held.feed(batch) == []  # 20 rows to decide: fewer than 32
    first = [r["at"] for b in plain.feed(batch) for r in b.to_pylist()]
    assert first  # the matcher of a stream or a window frame outputs them now
    batch = pa.RecordBatch.from_pylist(rows[20:40], schema=spec.columns)
    got = [r["at"] for b in held.feed(batch) for r in b.to_pylist()]
    assert got[: len(first)] == first  # 40 rows: matched split, the first ones out
    got += [r["at"] for b in held.finish() for r in b.to_pylist()]
    want = first + [r["at"] for b in [*plain.feed(batch), *plain.finish()] for r in b.to_pylist()]
    assert got == want


def test_a_re_run_ending_at_its_limit_goes_on() -> None:
    # Single-row matches at rows 1, 3 and 5: with a chunk per row, each re-run of the
    # fix-up decides its one attempt and uses up its rows, which is not the partition's end.
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn, "
        "FIRST(id) AS at PATTERN (A+) DEFINE A AS x <> 8 AND x <> 10)"
    )
    rows = [{"id": i, "x": x, "y": 0} for i, x in enumerate([7, 8, 9, 10, 11])]
    spec = spec_of(sql)
    for path in ("row_local", "registers"):
        assert _run(spec, rows, [], path, 1, 4) == ("rows", [(1, 0), (2, 2), (3, 4)])


def test_a_speculative_error_the_sequential_run_never_reaches_is_not_raised() -> None:
    # The match at row 0 (A X* B) skips to its last B, row 2, past row 1; an attempt at
    # row 1 would match C alone, where SKIP TO LAST B fails. Chunks start at every row.
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn "
        "AFTER MATCH SKIP TO LAST B PATTERN (A X* B | C) "
        "DEFINE A AS x = 1, B AS x = 2, C AS x = 3)"
    )
    rows = [{"id": i, "x": x, "y": 0} for i, x in enumerate([1, 3, 2, 0])]
    spec = spec_of(sql)
    for path in ("row_local", "registers"):
        assert _run(spec, rows, [], path, 1) == ("rows", [(1,)])
        # From row 1 on, the sequential run reaches the C match and fails: so must the split.
        assert _run(spec, rows[1:], [], path, 1)[0] == "error"
        assert _run(spec, rows[1:], [], path, 1) == _run(spec, rows[1:], [], path, 0)


def test_unsplittable_queries_name_the_reason() -> None:
    code = np.array([[K.C_MATCHNO, 0, 0, 0, 0]], np.int64)
    spec = spec_of(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
        "ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A) DEFINE A AS x = 1)"
    )
    assert "UNMATCHED" in C.unsplittable(spec, np.zeros((0, 5), np.int64), None)
    plain = spec_of(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
        "PATTERN (A) DEFINE A AS x = 1)"
    )
    assert "MATCH_NUMBER" in C.unsplittable(plain, code, None)
    assert "WITHIN" in C.unsplittable(plain, np.zeros((0, 5), np.int64), 3.0)
    assert C.unsplittable(plain, np.zeros((0, 5), np.int64), None) is None


# -- SQL: the conformance cases with chunking forced ---------------------------------------


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_conformance_cases_split(case: Case) -> None:
    want = expected(case)
    for path in COMPILED:
        got = outcome(case, path, split_rows=1, threads=4)
        if got[0] != "n/a":
            assert agrees(got, want), (path, got, want)


def test_explain_says_whether_a_partition_splits() -> None:
    con = matchsql.connect(demo=False, threads=2)
    con.sql("CREATE TABLE t(id INT, x INT, y INT)")
    query = (
        "EXPLAIN SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
        "{rows} PATTERN (A B+) DEFINE B AS x > PREV(x))"
    )
    text = "\n".join(str(r[-1]) for r in con.sql(query.format(rows="")).fetchall())
    assert "split: rows to match in chunks of >= 16384 rows on 2 threads" in text
    con.sql("SET split_rows = 0")
    text = "\n".join(str(r[-1]) for r in con.sql(query.format(rows="")).fetchall())
    assert "split: no (SET threads = 1 or split_rows = 0)" in text
    unmatched = query.format(rows="ALL ROWS PER MATCH WITH UNMATCHED ROWS")
    text = "\n".join(str(r[-1]) for r in con.sql(unmatched).fetchall())
    assert "split: no (WITH UNMATCHED ROWS" in text
