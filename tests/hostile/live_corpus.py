"""A hostile corpus of the statements around live data: streams, continuous queries,
settings and SHOW, each generated from a seed.

They run in one file database per worker (tests/hostile/worker.py ``--live``), which
holds a stream ``ticks`` (with a Parquet archive, so continuous queries may read it), a
table ``t100`` and a ``sink`` whose columns fit :data:`PATTERN`'s measures. ``{tmp}`` in a
statement is the worker's private directory. Names come from small pools (``s0``..``s3``,
``q0``..``q3``) so that later statements meet what earlier ones made: a RESUME of a
query that runs, a DROP of a stream a query reads, a CREATE of a name that exists.

Left out: a SELECT over a live stream, which waits for its producer by design (the
stream tests cover it with producers).
"""

from __future__ import annotations

import random

from matchsql.config import CHOICES, SIZE_RANGES, WHOLE_RANGES
from tests.hostile.corpus import NUMBERS, Case, mutate

PATTERN = (
    "MATCH_RECOGNIZE (PARTITION BY k ORDER BY i MEASURES FIRST(A.i) AS s, LAST(B.i) AS e"
    " ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.v > PREV(B.v))"
)
STREAM_COLUMNS = "(k BIGINT, i BIGINT, v DOUBLE, name VARCHAR)"

#: Values a SET may meet: in range, at and past the ends, of the wrong kind.
SET_VALUES = [
    "0",
    "1",
    "2",
    "-1",
    "64",
    "65",
    "1024",
    "1025",
    "auto",
    "'auto'",
    "1e30",
    "9223372036854775808",
    "NULL",
    "''",
    "'é'",
    "true",
    "1.5",
    "'registers'",
    "'push'",
    "'adaptive'",
    "'off'",
    "DEFAULT",
    "x",
    "(1)",
    "1 + 1",
    "'1'",
    "'1KiB'",
    "'1023 bytes'",
    "'1MB'",
    "'1.5 GiB'",
    "'1 PiB'",
    "'2PiB'",
    "'1 XB'",
]
OPTION_VALUES = [
    "0",
    "1",
    "0.25",
    "-1",
    "1e-400",
    "1e400",
    "1e30",
    "2.5",
    "'1'",
    "NULL",
    "1000000000000",
    "1000000000001",
    "0.001",
    "0.0001",
]
CAPACITIES = [
    "1",
    "64",
    "1000",
    "0",
    "-5",
    "1073741824",
    "1073741825",
    "4294967296",
    "1e3",
    "'64'",
    "99999999999999999999",
]


def seeds(rng: random.Random) -> list[str]:
    """Valid (or nearly valid) statements with random names and values."""
    s, q = f"s{rng.randrange(4)}", f"q{rng.randrange(4)}"
    setting = rng.choice(sorted([*WHOLE_RANGES, *SIZE_RANGES, *CHOICES]))
    value = rng.choice(SET_VALUES)
    option = rng.choice(["checkpoint_interval", "checkpoint_rows"])
    on_full = rng.choice(["'block'", "'spill'", "'drop'", "block"])
    archive = rng.choice(
        [
            "'{tmp}/a/" + s + "/'",
            "'" + s + "_hist'",
            "'/etc/'",
            "'../x/'",
            "'{tmp}/a/" + s + ".parquet'",
            "''",
        ]
    )
    sink = rng.choice(
        [
            "sink",
            "sink",
            "nosuch",
            "ticks",
            "t100",
            "__matchsql_continuous_queries",
            "main.sink",
            "nosch.sink",
        ]
    )
    return [
        f"CREATE STREAM {s} {STREAM_COLUMNS}",
        f"CREATE STREAM IF NOT EXISTS {s} {STREAM_COLUMNS} WITH (capacity = "
        f"{rng.choice(CAPACITIES)}, on_full = {on_full})",
        f"CREATE STREAM {s} {STREAM_COLUMNS} WITH (archive = {archive}, archive_filter = "
        f"'v > {rng.choice(NUMBERS)}')",
        f"DROP STREAM {rng.choice(['', 'IF EXISTS '])}{rng.choice([s, 'ticks'])}",
        "SHOW STREAMS",
        f"SHOW STREAM READERS {rng.choice([s, 'ticks', ''])}",
        f"CREATE CONTINUOUS QUERY {q} WITH ({option} = {rng.choice(OPTION_VALUES)}) AS "
        f"INSERT INTO {sink} SELECT * FROM ticks {PATTERN}",
        f"CREATE CONTINUOUS QUERY IF NOT EXISTS {q} AS INSERT INTO sink SELECT * FROM "
        f"{rng.choice(['ticks', s, 't100'])} {PATTERN}",
        f"STOP CONTINUOUS QUERY {q}",
        f"RESUME CONTINUOUS QUERY {q}",
        f"DROP CONTINUOUS QUERY {rng.choice(['', 'IF EXISTS '])}{q}",
        "SHOW CONTINUOUS QUERIES",
        f"SET {setting} = {value}",
        f"SET SESSION {setting} TO {value}",
        f"RESET {setting}",
        f"SHOW {setting}",
        f"SELECT current_setting('{setting}')",
        "SHOW WORKERS",
        "SHOW STATS",
        f"SELECT * FROM t100 {PATTERN.replace('PARTITION BY k ORDER BY i', 'ORDER BY id')}".replace(
            "A.i", "A.id"
        )
        .replace("B.i", "B.id")
        .replace("B.v", "B.price")
        .replace("PREV(B.price)", "PREV(price)"),
    ]


def generate_live(count: int, seed: int = 34) -> list[Case]:
    """``count`` statements: the seeds as they are, and token-level mutations of them."""
    rng = random.Random(seed)
    cases: list[Case] = []
    while len(cases) < count:
        sql = rng.choice(seeds(rng))
        if rng.random() < 0.5:
            cases.append(Case("live", sql))
        else:
            kind, mutated = mutate(sql, rng)
            cases.append(Case(f"live mutation:{kind}", mutated))
    return cases
