"""The buffer limit is in bytes (``max_buffered_bytes``, matchsql/engine/buffer_limit.py).

Ordinary queries on the demo table whose partitions hold more than the old limit of
50,000 rows (MSFT has 76,872 trades) run with the default settings, and agree with
the reference path and with plain SQL; a low limit fails on every path with one
message that names the setting, its amount and how to raise it; a malformed or
out-of-range value is refused with the range.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import matchsql
from matchsql.config import Config, default_max_buffered_bytes
from matchsql.engine.buffer_limit import MIN_ROW_BYTES, RowWidth, max_rows, row_width
from matchsql.errors import Error, LimitExceededError

PATHS = ["reference", "row_local", "registers"]

#: Runs of trades above $10 per symbol: MSFT's whole partition (76,872 rows) is one.
RUNS = (
    "SELECT symbol, n, lo, hi FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES COUNT(*) AS n, MIN(price) AS lo, MAX(price) AS hi ONE ROW PER MATCH "
    "PATTERN (C+) DEFINE C AS price > 10) ORDER BY ALL"
)
#: The same runs in plain SQL (gaps and islands), independent of any matcher.
RUNS_SQL = """
    WITH marked AS (
        SELECT symbol, ts, price, price > 10 AS c,
               row_number() OVER (PARTITION BY symbol ORDER BY ts) AS r,
               row_number() OVER (PARTITION BY symbol, price > 10 ORDER BY ts) AS rc
        FROM trade)
    SELECT symbol, count(*) AS n, min(price) AS lo, max(price) AS hi
    FROM marked WHERE c GROUP BY symbol, r - rc ORDER BY ALL"""
#: The issue's query: a swing of rises and falls up to a flat tick, from every row.
SWINGS = (
    "SELECT symbol, first_ts, n FROM (SELECT * FROM trade WHERE symbol IN ('MSFT', 'EMC')) "
    "MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES FIRST(ts) AS first_ts, "
    "COUNT(*) AS n ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN ((A|B)+ C) "
    "DEFINE A AS price > PREV(price), B AS price < PREV(price), C AS price = PREV(price)) "
    "ORDER BY ALL"
)


@pytest.fixture(scope="module")
def demo():
    con = matchsql.connect()
    yield con
    con.close()


def on_path(con, path: str, sql: str) -> list[tuple]:
    con.sql(f"SET execution_path = '{path}'")
    try:
        return con.sql(sql).fetchall()
    finally:
        con.sql("SET execution_path = 'auto'")


def test_a_run_longer_than_the_old_row_limit_matches_with_the_defaults(demo) -> None:
    got = demo.sql(RUNS).fetchall()
    assert got == demo.sql(RUNS_SQL).fetchall()
    assert max(n for _, n, _, _ in got) == 76_872  # MSFT, one run over its partition
    assert on_path(demo, "reference", RUNS) == got


def test_the_issues_swings_query_agrees_with_the_reference(demo) -> None:
    got = demo.sql(SWINGS).fetchall()
    assert got and got == on_path(demo, "reference", SWINGS)


@pytest.mark.parametrize("path", PATHS)
def test_a_low_limit_fails_naming_the_setting_and_the_amount(demo, path: str) -> None:
    demo.sql("SET max_buffered_bytes = '1MB'")
    try:
        with pytest.raises(LimitExceededError) as info:
            on_path(demo, path, RUNS)
    finally:
        demo.sql("RESET max_buffered_bytes")
    message = info.value.message
    found = re.search(
        r"a partition needs more than max_buffered_bytes = 976\.6 KiB buffered "
        r"\((?:at least [\d.]+ [KM]iB: )?([\d,]+) rows of about (\d+) bytes, for a "
        r"match attempt open since partition row 1\); bound the pattern \(e\.g\. "
        r"WITHIN\) or raise the limit with SET max_buffered_bytes = '2MiB'$",
        message,
    )
    assert found, message
    rows, width = int(found.group(1).replace(",", "")), int(found.group(2))
    assert rows * width > 1_000_000 and (rows - 1) * width <= 1_000_000
    # The suggested value is taken, and the query then runs.
    demo.sql("SET max_buffered_bytes = '2MiB'")
    try:
        assert on_path(demo, path, RUNS) == demo.sql(RUNS_SQL).fetchall()
    finally:
        demo.sql("RESET max_buffered_bytes")


def test_the_row_bound_names_itself_where_it_is_the_lower(demo) -> None:
    demo.sql("SET max_buffered_rows = 50000")
    try:
        with pytest.raises(
            LimitExceededError,
            match=r"more than max_buffered_rows=50000 buffered "
            r"rows \(a match attempt open since partition row 1\).*SET "
            r"max_buffered_rows = \.\.\. \(0 sets no bound by rows\)",
        ):
            demo.sql(RUNS).fetchall()
        demo.sql("SET max_buffered_bytes = '1MB'")  # now the lower bound: it is named
        with pytest.raises(LimitExceededError, match="max_buffered_bytes = 976.6 KiB"):
            demo.sql(RUNS).fetchall()
    finally:
        demo.sql("RESET max_buffered_rows")
        demo.sql("RESET max_buffered_bytes")


def test_worker_processes_hold_the_same_limit() -> None:
    con = matchsql.connect(workers=2, max_buffered_bytes="1MB")
    try:
        with pytest.raises(LimitExceededError, match="max_buffered_bytes = 976.6 KiB"):
            con.sql(RUNS).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize(
    "value",
    [
        "'1KB'",
        "0",
        "-1",
        "'2 PiB'",
        "'ten MB'",
        "'1e9'",
        "''",
        "'1.5'",
        "'5 apples'",
        "99999999999999999999999",
    ],
)
def test_a_malformed_or_out_of_range_size_is_refused_with_the_range(value: str) -> None:
    con = matchsql.connect(demo=False)
    before = con.sql("SELECT current_setting('max_buffered_bytes')").fetchall()
    with pytest.raises(
        Error,
        match=r"setting 'max_buffered_bytes' must be a size from 1\.0 KiB "
        r"to 1\.0 PiB \(a number of bytes, or a number and a unit: '512MB', "
        r"'2GiB'\), got ",
    ):
        con.sql(f"SET max_buffered_bytes = {value}")
    assert con.sql("SELECT current_setting('max_buffered_bytes')").fetchall() == before
    con.close()


def test_sizes_are_read_as_duckdb_reads_memory_limit() -> None:
    con = matchsql.connect(demo=False)
    for value, size in [
        ("'1MB'", 10**6),
        ("'1MiB'", 1 << 20),
        ("'2 GiB'", 2 << 30),
        ("'1.5GB'", 1_500_000_000),
        ("4096", 4096),
        ("'64 KiB'", 64 << 10),
    ]:
        con.sql(f"SET max_buffered_bytes = {value}")
        assert con.sql("SHOW max_buffered_bytes").fetchall() == [(str(size),)]
    con.sql("RESET max_buffered_bytes")
    assert con.sql("SELECT current_setting('max_buffered_bytes')").fetchall() == [
        (default_max_buffered_bytes(),)
    ]
    con.close()
    with pytest.raises(Error, match="must be a size from"):
        matchsql.connect(demo=False, max_buffered_bytes="lots")
    assert Config.from_options({"max_buffered_bytes": "3GiB"}).max_buffered_bytes == 3 << 30


def test_the_default_is_an_eighth_of_the_memory() -> None:
    import os

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < default_max_buffered_bytes() <= memory // 8
    assert Config().max_buffered_bytes == default_max_buffered_bytes()
    assert Config().max_buffered_rows == 0  # no bound by count


def test_the_row_width_is_the_mean_arrow_size_of_the_rows_received() -> None:
    fixed = pa.record_batch(
        {"a": pa.array(range(100), pa.int64()), "b": pa.array([1.0] * 100, pa.float64())}
    )
    assert row_width(fixed).per_row == 16
    text = pa.record_batch({"s": pa.array(["x" * 96] * 10)})  # 4-byte offsets, 96 bytes
    assert row_width(text).per_row == -(-text.nbytes // 10) >= 100
    width = RowWidth()
    width.add(fixed)
    width.add(text)
    assert width.per_row == -(-(fixed.nbytes + text.nbytes) // 110)
    assert RowWidth().per_row == MIN_ROW_BYTES  # nothing received yet
    assert row_width(pa.record_batch({"a": pa.array([True] * 8)})).per_row == MIN_ROW_BYTES
    # A slice counts the bytes it covers, not its parent's buffers.
    assert row_width(fixed.slice(10, 20)).per_row == 16
    config = Config()
    config.set("max_buffered_bytes", "16KiB")
    assert max_rows(config, row_width(fixed)) == 1024
    config.set("max_buffered_rows", 100)
    assert max_rows(config, row_width(fixed)) == 100


def test_the_shells_boxed_result_gets_the_same_error() -> None:
    # The shell reads a result as a relation (its schema first): the error came wrapped
    # as "internal error (InvalidInputException): ... reading the stream ... failed".
    con = matchsql.connect(max_buffered_bytes="1MB")
    try:
        with pytest.raises(LimitExceededError) as info:
            con.sql(f"SELECT * FROM ({RUNS}) ORDER BY n DESC LIMIT 3", as_relation=True).fetchall()
    finally:
        con.close()
    assert info.value.message.startswith(
        "a partition needs more than max_buffered_bytes = 976.6 KiB buffered"
    )
