"""Matcher snapshots: a restored matcher goes on exactly as the one it was taken from."""

from __future__ import annotations

import pyarrow as pa
import pytest

import matchsql
from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher
from matchsql.grammar.analyze import analyze
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.saved_state.snapshot import PlanIndex

SCHEMA = pa.schema([("i", pa.int64()), ("v", pa.float64())])
QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE(ORDER BY i MEASURES FIRST(A.i) AS s, LAST(C.i) AS e, "
    "MATCH_NUMBER() AS m, avg(B.v) AS a ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
    "PATTERN (A B+ C) DEFINE B AS B.v > PREV(B.v), C AS C.v < PREV(C.v))"
)


def plan(con, path: str = "auto"):
    """The query planned afresh, as a resumed continuous query does."""
    node = next(parse(QUERY)[0].find_all(MatchRecognizeTable))
    spec = analyze(node, SCHEMA, sql=QUERY, con=con.duckdb)
    config = Config.from_options({"execution_path": path})
    return (
        spec,
        config,
        PlanIndex(
            {"spec": spec, "config": config, "template": new_partition_matcher(spec, (), config)}
        ),
    )


def rows(start: int, stop: int) -> pa.RecordBatch:
    i = list(range(start, stop))
    return pa.record_batch(
        [pa.array(i, pa.int64()), pa.array([(x * 7919 % 1000) / 10 for x in i], pa.float64())],
        schema=SCHEMA,
    )


@pytest.mark.parametrize("path", ["auto", "reference"])
@pytest.mark.parametrize("cut", [1, 7, 500, 990])
def test_a_restored_matcher_continues_like_the_original(cut, path):
    """The reference matcher's DEFINE tests are closures over its rows: a snapshot holds
    the rows and the threads, and the restored matcher binds its tests again."""
    con = matchsql.connect(demo=False)
    spec, config, index = plan(con, path)
    original = new_partition_matcher(spec, (), config)
    assert type(original).__name__ == (
        "ReferenceMatcher" if path == "reference" else "CompiledMatcher"
    )
    before = original.feed(rows(0, cut))
    blob = index.dumps({(): original})
    restored = plan(con, path)[2].loads(blob)[()]  # another plan of the same query
    rest = [rows(cut, 1000)]
    want = original.feed(rest[0]) + original.finish()
    got = restored.feed(rest[0]) + restored.finish()
    assert [r for b in got for r in b.to_pylist()] == [r for b in want for r in b.to_pylist()]
    # and the matches before and after the cut are those of one uninterrupted run
    whole = new_partition_matcher(spec, (), config)
    every = whole.feed(rows(0, 1000)) + whole.finish()
    assert [r for b in before + got for r in b.to_pylist()] == [
        r for b in every for r in b.to_pylist()
    ]
    con.close()


def test_the_plan_is_referenced_not_copied():
    con = matchsql.connect(demo=False)
    spec, config, index = plan(con)
    matcher = new_partition_matcher(spec, (), config)
    blob = index.dumps({(): matcher})
    restored = index.loads(blob)[()]
    assert restored.spec is spec and restored.config is config
    con.close()
