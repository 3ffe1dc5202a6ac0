"""Worker processes give the rows of one process, exactly, in the same order.

Two sources of queries: the conformance cases that partition their input
(expected rows worked out by hand there; run here with ``workers = 2`` and a
tiny ``batch_size`` so that partitions cross batches and messages), and
random queries over random data with many partitions of mixed sizes,
compared between ``workers = 1, 2, 3`` - without and with random bucket
migrations injected while the query runs.
"""

from __future__ import annotations

import random

import pytest

import matchsql
from matchsql.execution.workers.balance import RandomMigrations
from tests.conformance.case import Case
from tests.conformance.test_conformance import ALL_CASES

PARTITIONED = [c for c in ALL_CASES if "PARTITION BY" in c.query.upper()]


def _reset(con: matchsql.Connection) -> None:
    """Drop every table and view, so the next case's setup starts from nothing."""
    rows = con.sql("SELECT table_name, table_type FROM information_schema.tables").fetchall()
    for name, kind in rows:
        con.sql(f'DROP {"VIEW" if kind == "VIEW" else "TABLE"} IF EXISTS "{name}"')


@pytest.fixture(scope="module")
def two_workers():
    con = matchsql.connect(demo=False, workers=2, batch_size=3)
    yield con
    con.close()


def test_cases_partition_input() -> None:
    assert len(PARTITIONED) >= 20, len(PARTITIONED)


@pytest.mark.parametrize("case", PARTITIONED, ids=[c.name for c in PARTITIONED])
def test_conformance_case_on_workers(two_workers, case: Case) -> None:
    con = two_workers
    _reset(con)
    for stmt in case.setup:
        con.sql(stmt)
    if isinstance(case.expected, type):
        with pytest.raises(case.expected):
            result = con.sql(case.query)
            if result is not None:
                result.fetchall()
        return
    got = con.sql(case.query).fetchall()
    if case.ordered:
        assert got == case.expected, case.why
    else:
        assert sorted(got, key=repr) == sorted(case.expected, key=repr), case.why


# -- random queries -------------------------------------------------------------------------

PATTERNS = ["A B+", "A B* C", "(A | B)+ C", "A+ B{1,3}", "A B? C+", "A{2} B*"]
DEFINES = [
    "v > PREV(v)",
    "v < PREV(v)",
    "v % 3 = 0",
    "v >= 50",
    "v < 30",
    "v > FIRST(A.v)",
    "COUNT(*) < 4",
]
MEASURES = [
    "MATCH_NUMBER() AS mn, FIRST(ts) AS s, LAST(ts) AS e, COUNT(*) AS n",
    "CLASSIFIER() AS c, SUM(v) AS total, LAST(v) - FIRST(v) AS d",
]


def _random_query(rng: random.Random) -> str:
    pattern = rng.choice(PATTERNS)
    names = sorted({ch for ch in pattern if ch.isalpha()})
    defines = ", ".join(f"{n} AS {rng.choice(DEFINES[:5] if n == 'A' else DEFINES)}" for n in names)
    rows = rng.choice(["ONE ROW PER MATCH", "ALL ROWS PER MATCH"])
    after = rng.choice(["PAST LAST ROW", "TO NEXT ROW"])
    measures = rng.choice(MEASURES)
    return (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        f"MEASURES {measures} {rows} AFTER MATCH SKIP {after} "
        f"PATTERN ({pattern}) DEFINE {defines})"
    )


def _random_table(con: matchsql.Connection, rng: random.Random, interleaved: bool = False) -> None:
    """Table ``t`` of partitions of mixed sizes, stored partition by partition or, with
    ``interleaved``, in time order with the partitions mixed (a feed: the engine groups
    it itself, and the workers take their rows from the shared grouped input)."""
    sizes = [rng.choice([1, 2, 5, 17, 60, 300]) for _ in range(rng.randint(40, 120))]
    rows = []
    for p, size in enumerate(sizes):
        key = f"k{p}" if p % 7 else None  # NULL keys form one partition of their own
        # ts unique within every partition (the NULL one gathers several p): rows tied in
        # ORDER BY may come in any order, in SQL and in DuckDB's sort alike.
        rows += [
            (key, ts * 1000 + p if interleaved else p * 1000 + ts, rng.randint(0, 99))
            for ts in range(size)
        ]
    if interleaved:
        rows.sort(key=lambda row: row[1])
    con.sql("DROP TABLE IF EXISTS t")
    con.sql("CREATE TABLE t (p VARCHAR, ts INTEGER, v INTEGER)")
    con.duckdb.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)


@pytest.fixture(scope="module")
def connections():
    cons = {n: matchsql.connect(demo=False, workers=n) for n in (1, 2, 3)}
    yield cons
    for con in cons.values():
        con.close()


def _mode(connections, mode: str) -> None:
    """Scatter (workers sort their rows) or sorted (pieces of DuckDB-sorted input)."""
    for n in (2, 3):
        connections[n]._executor.workers.mode = mode


MODES = ["scatter", "sorted"]


def _rows(con: matchsql.Connection, query: str, batch_size: int) -> list[tuple]:
    con.sql(f"SET batch_size = {batch_size}")
    return con.sql(query).fetchall()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(4))
def test_random_queries_same_rows(connections, seed: int, mode: str) -> None:
    _mode(connections, mode)
    rng = random.Random(seed)
    for con in connections.values():
        _random_table(con, random.Random(seed), interleaved=seed % 2 == 1)
    for _ in range(4):
        query = _random_query(rng)
        batch_size = rng.choice([7, 64, 1000, 65_536])
        expected = _rows(connections[1], query, batch_size)
        for n in (2, 3):
            assert _rows(connections[n], query, batch_size) == expected, (n, query)
            # grouped here (the NULL partition's rows lie apart in either layout): the
            # workers took their rows from the shared input
            assert connections[n]._executor.workers.last.shared == (mode == "sorted")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rows_per_match", ["ONE ROW PER MATCH", "ALL ROWS PER MATCH"])
def test_nan_and_null_keys_same_rows(connections, mode: str, rows_per_match: str) -> None:
    """Floating partition keys with NaN (a partition of its own: DuckDB groups NaN with
    NaN) and NULL, many short partitions matched together on a worker: a worker hands
    each partition's matches back by count, so a key that is not equal to itself
    (NaN) gets its own rows, as in one process."""
    _mode(connections, mode)
    rng = random.Random(5)
    keys = [float("nan"), None, *[p / 4 for p in range(60)]]
    rows = [(rng.choice(keys), ts, rng.randint(0, 99)) for ts in range(3000)]
    for con in connections.values():
        con.sql("DROP TABLE IF EXISTS t")
        con.sql("CREATE TABLE t (p DOUBLE, ts INTEGER, v INTEGER)")
        con.duckdb.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    query = (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        f"MATCH_NUMBER() AS mn, COUNT(*) AS n, LAST(v) AS lv {rows_per_match} "
        f"PATTERN (A B+) DEFINE B AS v > PREV(v))"
    )
    expected = _rows(connections[1], query, 65_536)
    assert any(row[0] != row[0] for row in expected)  # the NaN partition has matches
    assert any(row[0] is None for row in expected)
    for n in (2, 3):
        got = _rows(connections[n], query, 65_536)
        assert repr(got) == repr(expected), n  # repr: NaN == NaN


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(4))
def test_random_migrations_same_rows(connections, seed: int, mode: str) -> None:
    """Buckets move between workers while the query runs (State Transfer)."""
    _mode(connections, mode)
    rng = random.Random(100 + seed)
    for con in connections.values():
        _random_table(con, random.Random(100 + seed), interleaved=seed % 2 == 1)
    moved = 0
    for round_ in range(3):
        query = _random_query(rng)
        batch_size = rng.choice([5, 13, 50])
        expected = _rows(connections[1], query, batch_size)
        for n in (2, 3):
            session = connections[n]._executor.workers
            injector = RandomMigrations(seed * 10 + round_, rate=0.2)
            session.policy_factory = lambda injector=injector: injector
            assert _rows(connections[n], query, batch_size) == expected, (n, query)
            assert session.last.shared == (mode == "sorted")
            moved += len(session.last.migrations)
            assert len(session.last.migrations) <= injector.started
    assert moved > 0


@pytest.mark.parametrize("mode", MODES)
def test_migrations_move_open_state(connections, mode: str) -> None:
    """Some migrations carry open state: open runs (a partition split across two
    workers) for sorted input, a wave's buffered rows for scattered input."""
    _mode(connections, mode)
    con = connections[2]
    _random_table(con, random.Random(7))
    _random_table(connections[1], random.Random(7))
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "FIRST(ts) AS s, LAST(ts) AS e ALL ROWS PER MATCH PATTERN (A B*) "
        "DEFINE B AS v >= 10)"
    )
    expected = _rows(connections[1], query, 3)
    session = con._executor.workers
    session.policy_factory = lambda: RandomMigrations(3, rate=1.0)
    assert _rows(con, query, 3) == expected
    moves = session.last.migrations
    assert any(m.open_partitions if mode == "sorted" else m.state_rows for m in moves)


@pytest.mark.parametrize("path", ["reference", "auto"])
def test_migrations_on_each_matcher_kind(connections, path: str) -> None:
    """Both kinds of matcher move between workers (their state in the snapshot format)."""
    _mode(connections, "sorted")  # open runs move only where partitions arrive in pieces
    _random_table(connections[1], random.Random(11))
    _random_table(connections[2], random.Random(11))
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        "MATCH_NUMBER() AS mn, FIRST(ts) AS s, LAST(ts) AS e ONE ROW PER MATCH "
        "PATTERN (A B+ C?) DEFINE B AS v > FIRST(A.v) - 40, C AS v < PREV(v))"
    )
    for con in (connections[1], connections[2]):
        con.sql(f"SET execution_path = {path}")
    try:
        expected = _rows(connections[1], query, 4)
        session = connections[2]._executor.workers
        session.policy_factory = lambda: RandomMigrations(5, rate=0.5)
        assert _rows(connections[2], query, 4) == expected
        assert any(m.open_partitions for m in session.last.migrations)
    finally:
        for con in (connections[1], connections[2]):
            con.sql("SET execution_path = auto")


def test_nested_match_recognize(connections) -> None:
    """The outer MATCH_RECOGNIZE reads the inner one's matches while both run: one of
    them has the pool, the other runs in the connection's process; same rows."""
    for n in (1, 2):
        _random_table(connections[n], random.Random(21))
    query = (
        "SELECT * FROM (SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        "MEASURES FIRST(ts) AS s, LAST(v) AS lv ONE ROW PER MATCH PATTERN (A B+) "
        "DEFINE B AS v > PREV(v))) MATCH_RECOGNIZE (PARTITION BY p ORDER BY s "
        "MEASURES COUNT(*) AS n, LAST(s) AS last_s ONE ROW PER MATCH PATTERN (X Y*) "
        "DEFINE Y AS lv >= PREV(lv))"
    )
    _mode(connections, "scatter")
    expected = _rows(connections[1], query, 16)
    assert expected
    assert _rows(connections[2], query, 16) == expected
    assert _rows(connections[2], query, 16) == expected  # the pool is free again


def test_duckdb_functions_on_workers():
    """Derived input columns, DuckDB's measures and aggregates: the rows of workers = 1."""
    query = (
        "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        "MEASURES concat_ws('/', lower(FIRST(symbol)), strftime(LAST(ts), '%H:%M')) AS tag, "
        "median(B.price) AS med, string_agg(CAST(round(price) AS VARCHAR), ',') AS ps "
        "ONE ROW PER MATCH PATTERN (A B+) "
        "DEFINE B AS round(B.price, 0) < round(PREV(B.price), 0) AND length(symbol) > 0)"
    )
    one = matchsql.connect()
    two = matchsql.connect(workers=2)
    try:
        # no ORDER BY: the workers hand partitions back in the order they finish
        expected = sorted(one.sql(query).fetchall())
        assert len(expected) > 100
        assert sorted(two.sql(query).fetchall()) == expected
    finally:
        one.close()
        two.close()
