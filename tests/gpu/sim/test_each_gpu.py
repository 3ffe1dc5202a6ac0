"""ALL MATCHES on the GPU column path: the DejaVu queries Q1-Q4 verbatim.

Q1-Q4 (:mod:`matchsql.testing.dejavu_queries`) keep every end of an attempt (ALL MATCHES);
under ``SET gpu = 'on'`` in numba's simulator they must run on the device
(no partition falls back to the CPU matcher) and give the CPU paths' rows.
Hand-worked partitions check the slots of every end when a match outgrows the
first stack, and unmatched rows across a live stream's batches.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import matchsql
from matchsql.config import Config
from matchsql.engine.gpu import gpu_matcher as M
from matchsql.engine.gpu.gpu_live import LiveGpuMatcher
from matchsql.engine.gpu.gpu_matcher import GpuMatcher
from matchsql.engine.planner import new_partition_matcher
from matchsql.testing.dejavu_queries import DEJAVU
from tests.property.strategies import SCHEMA, spec_of


def _trade(con: matchsql.Connection) -> None:
    """A seeded random walk of three symbols: its dips and recoveries make Q1-Q4 match."""
    rng = np.random.default_rng(7)
    price = {s: 100.0 for s in ("AAA", "BBB", "CCC")}
    values = []
    for ts in range(150):
        symbol = ("AAA", "BBB", "CCC")[int(rng.integers(3))]
        price[symbol] = round(price[symbol] + float(rng.normal()) * 2, 1)
        values.append(f"('{symbol}', {price[symbol]}, {int(rng.integers(1, 500))}, {ts})")
    con.sql("CREATE TABLE trade(symbol VARCHAR, price DOUBLE, volume BIGINT, ts BIGINT)")
    con.sql("INSERT INTO trade VALUES " + ", ".join(values))


def _rows(sql: str, gpu: str) -> list[tuple]:
    con = matchsql.connect(demo=False)
    try:
        _trade(con)
        con.sql(f"SET gpu = '{gpu}'")
        return con.sql(sql).fetchall()
    finally:
        con.close()


@pytest.fixture
def device_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition that the GPU matcher hands to the CPU fails the test instead."""

    def refuse(self: GpuMatcher, table: object) -> list:
        raise AssertionError("a partition ran on the CPU matcher")

    monkeypatch.setattr(GpuMatcher, "_on_cpu", refuse)


@pytest.mark.parametrize("name", sorted(DEJAVU))
def test_dejavu_query_on_the_device(name: str, device_only: None) -> None:
    expected = _rows(DEJAVU[name], "off")
    assert expected, "the data must give matches"
    assert _rows(DEJAVU[name], "on") == expected


def test_all_matches_keeps_more_than_the_preferred_match(device_only: None) -> None:
    """The data exercise several ends per start: Q3 without ALL MATCHES finds fewer."""
    preferred_only = DEJAVU["Q3"].replace("  ALL MATCHES\n", "")
    assert preferred_only != DEJAVU["Q3"]
    assert len(_rows(preferred_only, "on")) < len(_rows(DEJAVU["Q3"], "on"))


EVERY_END = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS c, LAST(id) AS e "
    "ONE ROW PER MATCH ALL MATCHES PATTERN (A+) DEFINE A AS x > 0)"
)


def _matcher_rows(sql: str, rows: list[dict], splits: list[int], live: bool) -> list[tuple]:
    config = Config()
    config.gpu = "on"
    matcher = new_partition_matcher(spec_of(sql), (), config, live=live)
    assert isinstance(matcher, LiveGpuMatcher if live else GpuMatcher)
    out = []
    for a, b in zip([0, *splits], [*splits, len(rows)]):
        out += matcher.feed(pa.RecordBatch.from_pylist(rows[a:b], schema=SCHEMA))
    out += matcher.finish()
    assert matcher.ran_on == "gpu"
    return [tuple(r.values()) for b in out for r in b.to_pylist()]


def test_every_end_of_a_match_longer_than_the_first_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows 0-9 and 11 are A, row 10 is not: the attempt from row 0 ends at rows 0, 1,
    ... 9 (A+ takes one row, two, ... ten), ten matches; SKIP PAST LAST ROW then moves
    past the preferred (longest) one, to row 10 (no match) and row 11 (one row). With a
    stack of 2 frames the ends bitmap holds lengths up to 2: the stack grows to 16."""
    monkeypatch.setattr(M, "STACK_FRAMES", 2)
    rows = [{"id": i, "x": 0 if i == 10 else 1, "y": 0} for i in range(12)]
    want = [(k, k - 1) for k in range(1, 11)] + [(1, 11)]
    assert _matcher_rows(EVERY_END, rows, [], live=False) == want


def test_unmatched_rows_across_live_batches() -> None:
    """x = 1 at rows 2-3 and 6; A B? takes a row with x = 1 and the next if y = 1.
    Row 2 starts a match of rows 2-3 (row 3's y is 1); row 6's match is row 6 alone.
    Rows 0, 1, 4, 5, 7 are unmatched, output between the matches, in row order, each
    once, whichever batch decides it."""
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS m "
        "ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A B?) "
        "DEFINE A AS x = 1, B AS y = 1)"
    )
    rows = [{"id": i, "x": int(i in (2, 3, 6)), "y": int(i == 3)} for i in range(8)]
    want = [(0, None), (1, None), (2, 1), (3, 1), (4, None), (5, None), (6, 2), (7, None)]
    got = _matcher_rows(sql, rows, [3, 5], live=True)
    assert [(r[0], r[1]) for r in got] == want
    assert _matcher_rows(sql, rows, [], live=False) == got
