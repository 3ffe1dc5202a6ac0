"""Random queries on partitions long enough for dead ends: the thread VM equals the reference.

The dead-end rule of the thread VM (the comment at
:data:`matchsql.engine.compiled.kernel.MEMO_EVERY`) compares states every MEMO_EVERY
rows, so the property suite's short partitions never reach it. Here partitions have several times
that many rows, and the patterns keep
attempts open for long: ``C`` (undefined, always true) under a greedy or reluctant
quantifier reads on past every match, to the end or to a ``$``; the conditions are
the compiled paths' (registers, running aggregates, the start row, MATCH_NUMBER()).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchsql.engine.compiled.kernel import MEMO_EVERY
from tests.paths.test_random_paths import COMPILED_CONDITIONS, _check
from tests.property.strategies import ROWS, SKIPS, values

PATTERNS = [
    "A C* B",
    "A (C | A)* B B",
    "C+ B $",
    "A C* B+ $",
    "(A C*)+ B",
    "A (C C)* B",
    "A C* B | C A",
    "A C*? B",
    "A {- C* -} B",
    "(A | B) C* (B | $)",
    "A C{3,} B C",
]

long_partitions = st.lists(
    st.tuples(values, values), min_size=2 * MEMO_EVERY, max_size=6 * MEMO_EVERY
).map(lambda rows: [{"id": i, "x": x, "y": y} for i, (x, y) in enumerate(rows)])


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rows=long_partitions, data=st.data())
def test_dead_ends_random(rows: list[dict], data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from(PATTERNS))
    a = data.draw(st.sampled_from(COMPILED_CONDITIONS))
    b = data.draw(st.sampled_from(COMPILED_CONDITIONS))
    output = data.draw(st.sampled_from(ROWS))
    skip = data.draw(st.sampled_from(SKIPS))
    extension = data.draw(st.sampled_from(["", "", "ALL MATCHES"]))
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY id\n"
        "  MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n, "
        "FIRST(id) AS f, LAST(id) AS l\n"
        f"  {output}\n  AFTER MATCH SKIP {skip}\n  {extension}\n  PATTERN ({pattern})\n"
        f"  SUBSET U = (A, B)\n  DEFINE A AS {a}, B AS {b}\n)"
    )
    splits = data.draw(st.lists(st.integers(0, len(rows)), max_size=2))
    _check(sql, rows, splits)
