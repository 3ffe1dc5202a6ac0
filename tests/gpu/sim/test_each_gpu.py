"""ALL MATCHES on the GPU column path: the DejaVu queries Q1-Q4 verbatim.

Q1-Q4 (:mod:`matchsql.queries`) keep every end of an attempt (ALL MATCHES);
under ``SET gpu = 'on'`` in numba's simulator they must run on the device
(no partition falls back to the CPU matcher) and give the CPU paths' rows.
"""

from __future__ import annotations

import numpy as np
import pytest

import matchsql
from matchsql.gpu.matcher import GpuMatcher
from matchsql.queries import DEJAVU


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
