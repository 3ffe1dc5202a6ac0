"""Under ALL MATCHES, a path through ``$`` competes with a path that ends at the same row.

A thread that waits at ``$`` reaches its end only when the partition has ended, after the
step of the last row has already ended other threads there. Found by the random input-mode
test (hypothesis): the compiled path kept the first thread that reached an end, not the
preferred one. The expected rows are worked out by hand from the preference order
(an alternation prefers its left branch; a reluctant quantifier prefers fewer).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher
from matchsql.engine.reference import ReferenceMatcher
from tests.property.strategies import SCHEMA, spec_of

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (
  ORDER BY id
  MEASURES MATCH_NUMBER() AS mn, CLASSIFIER() AS cls, COUNT(*) AS n
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  ALL MATCHES
  PATTERN ({pattern})
  DEFINE A AS x IS NULL, B AS x IS NULL
)"""

CASES = [
    # One row: ``A $`` and ``() B`` both end at row 0; A is preferred to ().
    ("(A | ()) (B | $)", 1, [{"mn": 1, "cls": "A", "n": 1}]),
    # Two rows: X alone ends first (reluctant, the preferred match), then at row 1
    # ``X A $`` is preferred to ``X () B``, though the second reaches row 1's end before
    # the partition ends. Skipping past the preferred match, row 1 starts again: X alone.
    (
        "X ((A | ()) (B | $))??",
        2,
        [
            {"mn": 1, "cls": "X", "n": 1},
            {"mn": 2, "cls": "A", "n": 2},
            {"mn": 3, "cls": "X", "n": 1},
        ],
    ),
]


def _rows(matcher, n_rows: int) -> list[dict]:
    rows = [{"id": i, "x": None, "y": None} for i in range(n_rows)]
    batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
    return [row for out in matcher.feed(batch) + matcher.finish() for row in out.to_pylist()]


@pytest.mark.parametrize(("pattern", "n_rows", "expected"), CASES)
@pytest.mark.parametrize("path", ["reference", "registers", "row_local", "auto"])
def test_the_preferred_path_to_an_end_is_reported(
    pattern: str, n_rows: int, expected: list[dict], path: str
) -> None:
    spec = spec_of(QUERY.format(pattern=pattern))
    if path == "reference":
        matcher = ReferenceMatcher(spec, ())
    else:
        matcher = new_partition_matcher(spec, (), Config(execution_path=path, gpu="off"))
    assert _rows(matcher, n_rows) == expected
