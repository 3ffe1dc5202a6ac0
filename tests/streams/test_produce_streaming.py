"""``matchsql produce`` streams its rows: synthetic trades are generated batch by batch
and files are read batch by batch, so memory stays bounded whatever ``--count`` is."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from matchsql.cli.produce import CSV_BLOCK_BYTES
from matchsql.storage.demo import (
    EXACT_ROWS,
    SCHEMA,
    TRADING_DAYS,
    synthetic_trade_batches,
    synthetic_trades,
)
from tests.streams.conftest import ROOT, WAIT_S, bounded

TRADES = "CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)"
ROWS = "SELECT symbol, price, volume, ts FROM trades"
# The producer runs in a process of its own, which reports its peak resident memory.
MEASURED = """
import sys
from matchsql.cli.produce import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    peak = next(line for line in status if line.startswith("VmHWM:"))
print(int(peak.split()[1]) * 1024)
sys.exit(code)
"""


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", MEASURED, *args],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def produce(*args: str) -> subprocess.CompletedProcess:
    """Run ``matchsql produce ARGS`` to its end (for a stream with room, or no reader)."""
    return finish(start(*args))


def rows_of(table: pa.Table) -> list[tuple]:
    return [tuple(row.values()) for row in table.to_pylist()]


def together(batches) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=SCHEMA)


# -- the batched generator ------------------------------------------------------------


def test_batches_of_a_small_count_are_the_rows_of_the_whole_table():
    batches = list(synthetic_trade_batches(5_000, 7, 3, batch_rows=777))
    assert [b.num_rows for b in batches] == [777] * 6 + [338]
    assert together(batches).equals(synthetic_trades(5_000, 7, 3))
    assert together(synthetic_trade_batches(0, 3)).num_rows == 0


def test_a_large_count_is_made_block_by_block_the_same_way_in_both():
    """Past ``exact_rows`` both functions build the data block by block (small sizes here,
    EXACT_ROWS and BLOCK_ROWS in use): batches give the same rows as the whole table,
    whatever their size, and the data keep the shape of the one-piece generator."""
    sizes = {"exact_rows": 1_000, "block_rows": 1_500}
    whole = synthetic_trades(10_000, 7, 3, **sizes)
    for batch_rows in (999, 4_096):
        batches = list(synthetic_trade_batches(10_000, 7, 3, batch_rows=batch_rows, **sizes))
        assert max(b.num_rows for b in batches) <= batch_rows
        assert together(batches).equals(whole)
    assert whole.num_rows == 10_000 and whole.schema == SCHEMA
    assert whole.equals(synthetic_trades(10_000, 7, 3, **sizes))  # deterministic
    assert not whole.equals(synthetic_trades(10_000, 7, 4, **sizes))
    assert len(set(whole.column("symbol").to_pylist())) == 7
    ts = whole.column("ts").cast(pa.int64()).to_numpy()
    assert np.all(np.diff(ts) > 0)  # strictly increasing, across blocks too
    days = {day.date() for day in whole.column("ts").to_pylist()}
    assert days <= set(TRADING_DAYS) and len(days) == len(TRADING_DAYS)  # spread over all
    times = whole.column("ts").to_pylist()
    assert all(dt.time(9, 30) <= t.time() < dt.time(16, 0) for t in times)
    # Each symbol's price walk goes on across blocks: no jump at a block boundary.
    for symbol in ("MSFT", "INTC"):
        prices = whole.filter(pc.equal(whole.column("symbol"), symbol)).column("price")
        steps = np.abs(np.diff(np.log(prices.to_numpy())))
        assert steps.max() < 0.02


def test_the_generator_refuses_bad_sizes_when_called():
    with pytest.raises(ValueError, match="at most"):
        synthetic_trade_batches(10**15, 3)
    with pytest.raises(ValueError, match="batch_rows"):
        synthetic_trade_batches(10, 3, batch_rows=0)


# -- the command -------------------------------------------------------------------


def test_produce_synthetic_keeps_its_memory_bounded(con):
    """Three times EXACT_ROWS trades into a stream a reader drains: the producer's peak
    memory is what it is for a handful of rows, plus a bounded amount (built whole, the
    rows alone would take about 300 MB more)."""
    assert 3 * EXACT_ROWS > 3_000_000
    peaks = {}
    for count in (10_000, 3 * EXACT_ROWS):
        con.sql(TRADES + " WITH (capacity = 65536)")  # a small ring: its pages count too
        proc = start("trades", "--synthetic", "--count", str(count))
        counted = bounded(con.sql("SELECT count(*), count(DISTINCT ts) FROM trades").fetchall)
        done = finish(proc)
        assert done.returncode == 0, done.stderr
        assert counted == [(count, count)]  # all there, none twice
        assert f"{count:,} rows in" in done.stderr
        peaks[count] = int(done.stdout.split()[-1])
        con.sql("DROP STREAM trades")
    assert peaks[3 * EXACT_ROWS] < peaks[10_000] + 100 * 2**20, peaks


def test_produce_reads_a_parquet_file_in_batches_up_to_count(con, tmp_path):
    data = synthetic_trades(10_000, 5, 1)
    path = tmp_path / "trades.parquet"
    pq.write_table(data, path, row_group_size=3_000)
    con.sql(TRADES)
    done = produce("trades", "--from", str(path), "--count", "7000", "--batch-rows", "1000")
    assert done.returncode == 0, done.stderr
    assert bounded(con.sql(ROWS).fetchall) == rows_of(data.slice(0, 7_000))
    assert "7,000 rows in" in done.stderr


def test_produce_reads_a_csv_file_block_by_block_with_the_streams_types(con, tmp_path):
    """A CSV file of several blocks (1 MiB each) whose first block has whole prices only:
    parsed as the stream's DOUBLE throughout, not as integers guessed from block one."""
    rows = 40_000
    lines = ["symbol,price,volume,ts"]
    start = dt.datetime(2006, 1, 3, 9, 30)
    for i in range(rows):
        price = f"{i % 90 + 10}" if i < rows // 2 else f"{i % 90 + 10}.25"
        lines.append(
            f"SYM{i % 7},{price},{100 * (i % 5 + 1)},{start + dt.timedelta(microseconds=i)}"
        )
    path = tmp_path / "trades.csv"
    path.write_text("\n".join(lines) + "\n")
    assert path.stat().st_size > CSV_BLOCK_BYTES  # more than one block
    con.sql(TRADES)
    done = produce("trades", "--from", str(path), "--count", "30000", "--batch-rows", "4096")
    assert done.returncode == 0, done.stderr
    got = bounded(con.sql(ROWS).fetchall)
    assert len(got) == 30_000
    assert [r[0] for r in got[:8]] == [f"SYM{i % 7}" for i in range(8)]
    assert [r[1] for r in got[19_999:20_001]] == [19_999 % 90 + 10, 20_000 % 90 + 10.25]
    assert got[-1][3] == start + dt.timedelta(microseconds=29_999)


def test_produce_refuses_bad_arguments_and_files_cleanly(con, tmp_path):
    con.sql(TRADES)
    for args, code, text in [
        (["--synthetic", "--count", "-1"], 2, "--count: must be at least 0, got -1"),
        (["--synthetic", "--batch-rows", "0"], 2, "--batch-rows: must be at least 1"),
        (["--synthetic", "--seed", "x"], 2, "--seed: not a whole number: 'x'"),
        (
            ["--synthetic", "--count", str(10**15)],
            1,
            "cannot generate 1000000000000000 synthetic trades: at most",
        ),
        (["--from", str(tmp_path / "none.parquet")], 1, "cannot read"),
    ]:
        done = produce("trades", *args)
        assert done.returncode == code, (args, done.stderr)
        assert text in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("symbol,price,volume,ts\nA,1.5,100,2006-01-03 09:30:00\nB,cheap,1,x\n")
    done = produce("trades", "--from", str(bad))
    assert done.returncode == 1 and f"cannot read {bad}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_produce_into_a_spill_stream_stops_at_its_limit_and_says_what_went_in(con):
    con.sql(TRADES + " WITH (capacity = 10000, on_full = 'spill', max_spill = 256 KiB)")
    done = produce("trades", "--synthetic", "--count", "400000", "--batch-rows", "10000")
    assert done.returncode == 1
    assert "reached its spill limit, max_spill = 262,144 bytes (256 KiB)" in done.stderr
    written = int(re.search(r"([\d,]+) rows were written", done.stderr)[1].replace(",", ""))
    assert 10_000 < written < 400_000
    # The command ended the stream: a reader gets exactly what it wrote, in order.
    got = bounded(con.sql(ROWS).fetchall)
    assert len(got) == written
    assert [row[3] for row in got] == synthetic_trades(400_000, 50, 0).column("ts").to_pylist()[
        :written
    ]
