"""Worker processes read their input by the rule of one process
(matchsql/session/ordered_input.py): in the input's own order when that is ORDER BY
order (no DuckDB sort), else DuckDB's sort; rows exactly those of ``workers = 1``.

"sorted" mode: the router gets its rows as one process does; which input queries
ran is seen by wrapping the functions of the rule, as tests/api/test_presorted_input.py
does for one process. "scatter" mode: each worker groups its own rows the same way
(execution/router/presorted.py) or sorts them where they are out of order.
"""

from __future__ import annotations

import random

import pytest

import matchsql
import matchsql.session.matching as matching
from matchsql.execution.workers.balance import RandomMigrations
from matchsql.session import ordered_input

QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
    "MATCH_NUMBER() AS mn, CLASSIFIER() AS c, FIRST(x) AS fx, LAST(x) AS lx "
    "ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B*) "
    "DEFINE B AS v >= PREV(v))"
)


@pytest.fixture(scope="module")
def cons():
    cons = {n: matchsql.connect(demo=False, workers=n, threads=1) for n in (1, 2)}
    yield cons
    for con in cons.values():
        con.close()


@pytest.fixture
def opened(monkeypatch) -> list[tuple[str, ordered_input.InputQueries]]:
    """Each input query run, with the queries object of its MATCH_RECOGNIZE (one process
    reads batches, the workers' router the grouped rows: both by the same rule)."""
    seen: list[tuple[str, ordered_input.InputQueries]] = []

    def spying(original):
        def spy(queries, open_input, *rest):
            def opening(sql):
                seen.append((sql, queries))
                return open_input(sql)

            return original(queries, opening, *rest)

        return spy

    monkeypatch.setattr(matching, "input_batches", spying(ordered_input.input_batches))
    monkeypatch.setattr(matching, "ordered_rows", spying(ordered_input.ordered_rows))
    return seen


def _table(cons, rows: list[tuple], order: str) -> None:
    """Table ``t`` (p, ts, v, x) of ``rows``, stored in ``order`` (an ORDER BY)."""
    for con in cons.values():
        con.sql("DROP TABLE IF EXISTS t")
        con.sql("DROP TABLE IF EXISTS src")
        con.sql("CREATE TABLE src (p VARCHAR, ts INTEGER, v INTEGER, x INTEGER)")
        con.duckdb.executemany("INSERT INTO src VALUES (?, ?, ?, ?)", rows)
        con.sql(f"CREATE TABLE t AS SELECT * FROM src {order}")


def _time_ordered(rng: random.Random, n: int, parts: int, ties: bool = False) -> list[tuple]:
    """Rows in time order, partitions interleaved (a trade feed); ``ties``: several
    rows of one partition share a ts."""
    rows = []
    ts = 0
    for x in range(n):
        ts += 0 if ties and rng.random() < 0.5 else 1
        rows.append((f"k{rng.randrange(parts)}", ts, rng.randrange(100), x))
    return rows


MODES = ["sorted", "scatter"]


def _mode(cons, mode: str) -> None:
    cons[2]._executor.workers.mode = mode


def _rows(con, query: str = QUERY, batch_size: int = 7) -> list[tuple]:
    con.sql(f"SET batch_size = {batch_size}")
    return con.sql(query).fetchall()


def test_ordered_input_goes_to_the_workers_without_a_sort(cons, opened) -> None:
    _mode(cons, "sorted")
    _table(cons, _time_ordered(random.Random(1), 3000, 40), "ORDER BY x")
    expected = _rows(cons[1])
    opened.clear()
    got = _rows(cons[2])
    assert got == expected
    assert len(opened) == 1 and "ORDER BY" not in opened[0][0]
    assert opened[0][1].presorted is True
    router = cons[2]._executor.workers.last
    assert router.partitions == 40 and sum(router.routed) == 3000  # the workers matched it


@pytest.mark.parametrize("mode", MODES)
def test_out_of_order_input_falls_back_to_the_sort_on_workers(cons, opened, mode) -> None:
    _mode(cons, mode)
    rows = _time_ordered(random.Random(2), 3000, 40)
    _table(cons, rows, "ORDER BY v, x DESC")  # partitions' rows far from ts order
    expected = _rows(cons[1])
    opened.clear()
    assert _rows(cons[2]) == expected
    assert cons[2]._executor.workers.last.partitions == 40
    if mode == "scatter":
        return  # the workers sorted their rows: no input query of this kind ran
    assert len(opened) == 2 and "ORDER BY" not in opened[0][0] and "ORDER BY" in opened[1][0]
    assert opened[0][1].presorted is False


@pytest.mark.parametrize("mode", MODES)
def test_one_row_out_of_order_late_in_the_input_falls_back(cons, opened, mode) -> None:
    """The first batch is in order (the cheap early check passes); the whole check does not."""
    _mode(cons, mode)
    rows = _time_ordered(random.Random(3), 3000, 10)
    late = [i for i in range(2500, 2990) if rows[i][0] == rows[-1][0]][0]
    rows[late], rows[-1] = (
        (*rows[late][:1], rows[-1][1], *rows[late][2:]),
        (*rows[-1][:1], rows[late][1], *rows[-1][2:]),
    )  # swap two ts of one partition
    _table(cons, rows, "ORDER BY x")
    expected = _rows(cons[1])
    opened.clear()
    assert _rows(cons[2]) == expected
    if mode == "scatter":
        return
    assert len(opened) == 2 and "ORDER BY" in opened[1][0]
    assert opened[1][1].presorted is False


@pytest.mark.parametrize("mode", MODES)
def test_ties_keep_input_order_as_one_process(cons, opened, mode) -> None:
    """Rows tied in ORDER BY keep the order they are stored in, on both routers: each
    partition's rows are the stored rows stably sorted by ts."""
    _mode(cons, mode)
    rows = _time_ordered(random.Random(4), 2000, 12, ties=True)
    _table(cons, rows, "ORDER BY x")
    query = (
        "SELECT p, x FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        "MEASURES MATCH_NUMBER() AS mn ALL ROWS PER MATCH PATTERN (A B*) "
        "DEFINE B AS v >= PREV(v))"
    )
    one = _rows(cons[1], query, 5)
    opened.clear()
    two = _rows(cons[2], query, 5)
    assert mode == "scatter" or opened[0][1].presorted is True
    assert two == one
    expected = [(p, x) for p, ts, _, x in sorted(rows, key=lambda r: (int(r[0][1:]), r[1]))]
    # Every row is in some match (A matches any row): the output is the whole input.
    by_key = sorted(one, key=lambda r: int(r[0][1:]))  # stable: keeps each partition's order
    assert by_key == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(3))
def test_random_migrations_on_the_unsorted_path_stay_exact(
    cons, opened, seed: int, mode: str
) -> None:
    _mode(cons, mode)
    rng = random.Random(50 + seed)
    rows = _time_ordered(rng, 4000, rng.choice([30, 90, 200]))
    out_of_order = seed == 2
    _table(cons, rows, "ORDER BY v, x" if out_of_order else "ORDER BY x")
    session = cons[2]._executor.workers
    for round_ in range(2):
        batch_size = rng.choice([5, 13, 64])
        expected = _rows(cons[1], QUERY, batch_size)
        injector = RandomMigrations(seed * 10 + round_, rate=0.3)
        opened.clear()
        saved = session.policy_factory
        session.policy_factory = lambda injector=injector: injector
        try:
            assert _rows(cons[2], QUERY, batch_size) == expected
        finally:
            session.policy_factory = saved
        assert mode == "scatter" or opened[0][1].presorted is (not out_of_order)
        assert session.last.migrations
