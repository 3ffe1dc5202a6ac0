"""The demo ``trade`` table: deterministic synthetic trades shaped like NYSE TAQ.

The DejaVu seed queries run over a ``trade(symbol, price, volume, ts)``
table, and ``matchsql`` with no arguments must be able to run them at once,
without downloading anything. So the data is generated: every symbol's price
is a geometric random walk rounded to cents (so flat ticks, falls and rises
all occur, which the seed patterns look for), trades arrive at random
microsecond instants during NYSE trading hours of January 2006, and volumes
are round lots. A fixed seed makes every install identical, so tests and
benchmarks can compare results across runs and machines.

Rows are in global time order: the seed queries have no ORDER BY and rely on
arrival order, which for a DuckDB table is insertion order.

Building the table takes longer than starting matchsql, so a connection
builds it on first use (:func:`matchsql.storage.demo_needed.needs_demo`): ``matchsql -c "SELECT 1"``
never pays for it.

``matchsql produce --synthetic`` may ask for billions of rows, which must not
be built in memory first: :func:`synthetic_trade_batches` yields them batch by
batch. Up to :data:`EXACT_ROWS` rows it gives exactly the rows of
:func:`synthetic_trades` (the demo table, benchmarks); beyond, both generate
the data block by block (:data:`BLOCK_ROWS` rows each, the price walks and the
clock carried over from block to block), so a larger data set has other values
than the one-piece algorithm would give, and the same ones either way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa

DEMO_ROWS = 500_000
DEMO_SYMBOLS = 50

# Real tickers with roughly their early-January 2006 prices, most active
# first: trade counts follow a Zipf-like law, as in TAQ, so partitions have
# realistic, unequal sizes.
TICKERS = {
    "MSFT": 26.8,
    "INTC": 25.0,
    "CSCO": 17.5,
    "GE": 35.0,
    "ORCL": 12.5,
    "PFE": 23.8,
    "C": 49.0,
    "XOM": 58.0,
    "AAPL": 72.0,
    "TWX": 17.6,
    "BAC": 46.0,
    "JPM": 40.0,
    "WMT": 46.5,
    "IBM": 82.0,
    "T": 24.5,
    "VZ": 30.0,
    "MO": 75.0,
    "JNJ": 60.0,
    "HPQ": 29.0,
    "DELL": 30.0,
    "QCOM": 45.0,
    "AMAT": 18.0,
    "YHOO": 40.0,
    "EBAY": 44.0,
    "SUNW": 4.2,
    "MRK": 32.0,
    "KO": 40.5,
    "PEP": 59.0,
    "PG": 58.0,
    "WFC": 63.0,
    "AIG": 68.0,
    "HD": 40.5,
    "MOT": 22.6,
    "TXN": 32.0,
    "DIS": 24.0,
    "F": 7.9,
    "GM": 20.0,
    "AMGN": 79.0,
    "BA": 70.0,
    "CVX": 57.0,
    "COP": 58.0,
    "MCD": 34.0,
    "UPS": 75.0,
    "GOOG": 430.0,
    "AMZN": 47.0,
    "NKE": 87.0,
    "CAT": 58.0,
    "MMM": 78.0,
    "SBUX": 30.0,
    "EMC": 13.6,
}

# NYSE trading days of January 2006 (Jan 2 and Jan 16 were market holidays).
TRADING_DAYS = tuple(
    dt.date(2006, 1, day)
    for day in range(1, 32)
    if dt.date(2006, 1, day).weekday() < 5 and day not in (2, 16)
)
_OPEN_US = (9 * 3600 + 30 * 60) * 1_000_000  # 09:30 after midnight
_SESSION_US = int(6.5 * 3600 * 1_000_000)  # 09:30-16:00
_EPOCH = dt.date(1970, 1, 1)

SCHEMA = pa.schema(
    [
        ("symbol", pa.string()),
        ("price", pa.float64()),
        ("volume", pa.int64()),
        ("ts", pa.timestamp("us")),
    ]
)


def symbol_names(symbols: int) -> list[str]:
    """``symbols`` ticker names: the real ones first, then made-up ``SYM0051``-style names."""
    names = list(TICKERS)[:symbols]
    names += [f"SYM{i + 1:04d}" for i in range(len(names), symbols)]
    return names


#: Up to this many rows, synthetic trades are generated in one piece (the values they
#: have always had); beyond, block by block (:func:`synthetic_trade_batches`).
EXACT_ROWS = 1 << 20
#: Rows per block of a data set larger than :data:`EXACT_ROWS` (what memory holds at once).
BLOCK_ROWS = 1 << 16


def synthetic_trades(
    rows: int,
    symbols: int,
    seed: int = 0,
    *,
    exact_rows: int = EXACT_ROWS,
    block_rows: int = BLOCK_ROWS,
) -> pa.Table:
    """``rows`` synthetic trades over ``symbols`` tickers, in strictly increasing time order.

    The same arguments always give the same table (benchmarks rely on it).
    Columns follow :data:`SCHEMA`; timestamps fall in trading hours of
    :data:`TRADING_DAYS` and are strictly increasing in microseconds. More
    than ``exact_rows`` rows are the blocks of :func:`synthetic_trade_batches`.
    """
    _check(rows, symbols)
    if block_rows < 1:
        raise ValueError("block_rows must be >= 1")
    if rows > exact_rows:
        return pa.Table.from_batches(list(_blocks(rows, symbols, seed, block_rows)), schema=SCHEMA)
    return _one_piece(rows, symbols, seed)


def synthetic_trade_batches(
    rows: int,
    symbols: int,
    seed: int = 0,
    *,
    batch_rows: int = 65_536,
    exact_rows: int = EXACT_ROWS,
    block_rows: int = BLOCK_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The rows of :func:`synthetic_trades` (same arguments) as batches of at most
    ``batch_rows`` rows, holding at most ``max(exact_rows, block_rows)`` rows at a time.

    Why: a producer of a billion synthetic trades must not build them all
    first. Up to ``exact_rows`` rows the one-piece table is built and sliced
    (its values need every row at once); beyond, each block is generated as
    the batches go out.
    """
    _check(rows, symbols)  # now, not at the first batch
    if batch_rows < 1 or block_rows < 1:
        raise ValueError("batch_rows and block_rows must be >= 1")
    return _batches(rows, symbols, seed, batch_rows, exact_rows, block_rows)


def _batches(
    rows: int, symbols: int, seed: int, batch_rows: int, exact_rows: int, block_rows: int
) -> Iterator[pa.RecordBatch]:
    if rows <= exact_rows:
        yield from _one_piece(rows, symbols, seed).to_batches(max_chunksize=batch_rows)
        return
    for block in _blocks(rows, symbols, seed, block_rows):
        for start in range(0, block.num_rows, batch_rows):
            yield block.slice(start, batch_rows)


def _check(rows: int, symbols: int) -> None:
    if rows < 0 or symbols < 1:
        raise ValueError("rows must be >= 0 and symbols >= 1")
    if rows > _MAX_ROWS:
        raise ValueError(f"at most {_MAX_ROWS} rows fit in the trading sessions")


def _weights(symbols: int) -> np.ndarray:
    """How often each symbol trades: Zipf-like, the first (real) tickers most."""
    weights = 1.0 / np.arange(1, symbols + 1) ** 0.8
    return weights / weights.sum()


def _one_piece(rows: int, symbols: int, seed: int) -> pa.Table:
    """The original generator: every value depends on the whole data set (volatility on
    each symbol's count of trades, the clock on the rows per day)."""
    rng = np.random.default_rng(seed)
    names = symbol_names(symbols)

    weights = 1.0 / np.arange(1, symbols + 1) ** 0.8
    sym = rng.choice(symbols, size=rows, p=weights / weights.sum()).astype(np.int32)

    ts = _timestamps(rng, rows)

    # Geometric random walk per symbol: cumulative log returns within each
    # symbol's own trades (a stable sort keeps each symbol's trades in time order).
    # Made-up symbols start anywhere between $5 and $200. Per-trade volatility
    # is scaled so that every symbol moves about 8 % over the data set,
    # however often it trades: busy symbols tick in cents, quiet ones jump.
    made_up = rng.uniform(np.log(5.0), np.log(200.0), size=max(symbols - len(TICKERS), 0))
    start = np.concatenate((np.array(list(TICKERS.values()))[:symbols], np.exp(made_up)))
    counts = np.bincount(sym, minlength=symbols)
    sigma = 0.08 / np.sqrt(np.maximum(counts, 1))
    steps = rng.standard_normal(rows) * sigma[sym]
    order = np.argsort(sym, kind="stable")
    walk = np.cumsum(steps[order])
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    base = np.where(first > 0, walk[np.maximum(first - 1, 0)], 0.0) if rows else first * 0.0
    walk -= np.repeat(base, counts)
    log_price = np.empty(rows)
    log_price[order] = walk
    price = np.maximum(np.round(start[sym] * np.exp(log_price), 2), 0.01)

    lots = rng.geometric(0.35, size=rows)
    blocks = np.where(rng.random(rows) < 0.02, 50, 1)  # the odd block trade
    volume = (lots * blocks * 100).astype(np.int64)

    return pa.Table.from_arrays(
        [
            _strings(names).take(_column(pa.int32(), sym, np.int32)),
            _column(pa.float64(), price, np.float64),
            _column(pa.int64(), volume, np.int64),
            _column(pa.timestamp("us"), ts, np.int64),
        ],
        schema=SCHEMA,
    )


def _blocks(rows: int, symbols: int, seed: int, block_rows: int) -> Iterator[pa.RecordBatch]:
    """``rows`` trades, ``block_rows`` at a time, each block from a generator of its own.

    Same shape as :func:`_one_piece`, made of what is known before the data:
    a symbol's volatility comes from its *expected* count of trades (so every
    symbol moves about 8 % over the data set), each block's trades fill its
    share of the trading sessions (rows spread evenly over the clock), and the
    price walks continue from one block to the next.
    """
    rng = np.random.default_rng(seed)
    names = _strings(symbol_names(symbols))
    p = _weights(symbols)
    made_up = rng.uniform(np.log(5.0), np.log(200.0), size=max(symbols - len(TICKERS), 0))
    start = np.concatenate((np.array(list(TICKERS.values()))[:symbols], np.exp(made_up)))
    sigma = 0.08 / np.sqrt(np.maximum(rows * p, 1.0))
    level = np.zeros(symbols)  # each symbol's log price change so far
    session_us = len(TRADING_DAYS) * _SESSION_US  # the clock: trading time only
    day_start = np.array([(d - _EPOCH).days * 86_400_000_000 + _OPEN_US for d in TRADING_DAYS])
    for index, first in enumerate(range(0, rows, block_rows)):
        n = min(block_rows, rows - first)
        block_rng = np.random.default_rng([seed, index])
        sym = block_rng.choice(symbols, size=n, p=p).astype(np.int32)
        # Exponential gaps scaled into the block's share of the clock, each at least
        # 1 us; shares do not overlap, so timestamps increase across blocks too.
        low, high = session_us * first // rows, session_us * (first + n) // rows
        gaps = block_rng.exponential(size=n + 1)
        gaps *= max(high - low - n - 1, 0) / gaps.sum()
        clock = low + np.cumsum(gaps[:n].astype(np.int64) + 1)
        ts = day_start[clock // _SESSION_US] + clock % _SESSION_US
        # Each symbol's walk within the block (cumulative sums per symbol over the
        # trades sorted by symbol), on top of where the previous block left it.
        steps = block_rng.standard_normal(n) * sigma[sym]
        order = np.argsort(sym, kind="stable")
        counts = np.bincount(sym, minlength=symbols)
        ends = np.cumsum(counts)
        walk = np.cumsum(steps[order])
        starts = ends - counts
        walk -= np.repeat(np.where(starts > 0, walk[np.maximum(starts - 1, 0)], 0.0), counts)
        log_price = np.empty(n)
        log_price[order] = walk
        log_price += level[sym]
        moved = counts > 0
        level[moved] = log_price[order][ends[moved] - 1]
        price = np.maximum(np.round(start[sym] * np.exp(log_price), 2), 0.01)
        lots = block_rng.geometric(0.35, size=n)
        blocks = np.where(block_rng.random(n) < 0.02, 50, 1)
        volume = (lots * blocks * 100).astype(np.int64)
        yield pa.RecordBatch.from_arrays(
            [
                names.take(_column(pa.int32(), sym, np.int32)),
                _column(pa.float64(), price, np.float64),
                _column(pa.int64(), volume, np.int64),
                _column(pa.timestamp("us"), ts, np.int64),
            ],
            schema=SCHEMA,
        )


# pa.array() on Python or numpy input imports pandas (0.4 s) to check for
# pandas types; building from buffers keeps REPL startup fast.
def _column(type_: pa.DataType, values: np.ndarray, dtype: type) -> pa.Array:
    data: np.ndarray = np.ascontiguousarray(values, dtype=dtype)
    return pa.Array.from_buffers(type_, len(data), [None, pa.py_buffer(data)])


def _strings(values: list[str]) -> pa.Array:
    encoded = [v.encode() for v in values]
    offsets = np.concatenate(([0], np.cumsum([len(b) for b in encoded]))).astype(np.int32)
    return pa.Array.from_buffers(
        pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


# At least 1 us apart, and a block's share of the clock holds its rows: 2 us on average.
_MAX_ROWS = len(TRADING_DAYS) * _SESSION_US // 2


def _timestamps(rng: np.random.Generator, rows: int) -> np.ndarray:
    """Strictly increasing microsecond timestamps spread over the trading sessions."""
    days = len(TRADING_DAYS)
    per_day = np.full(days, rows // days)
    per_day[: rows % days] += 1
    day_start = np.array([(d - _EPOCH).days * 86_400_000_000 + _OPEN_US for d in TRADING_DAYS])
    out = np.empty(rows, dtype=np.int64)
    pos = 0
    for start_us, n in zip(day_start, per_day):
        if n == 0:
            continue
        # Exponential gaps (Poisson arrivals) scaled into the session, each at
        # least 1 us so that timestamps are strictly increasing.
        gaps = rng.exponential(size=n + 1)
        gaps *= (_SESSION_US - n - 1) / gaps.sum()
        offsets = np.cumsum(gaps[:n].astype(np.int64) + 1)
        out[pos : pos + n] = start_us + offsets
        pos += n
    return out


def install_demo_trade(
    con: duckdb.DuckDBPyConnection,
    rows: int = DEMO_ROWS,
    symbols: int = DEMO_SYMBOLS,
    seed: int = 0,
) -> None:
    """Create the demo ``trade`` table unless a table or view of that name exists.

    Rows are inserted in timestamp order, since queries without ORDER BY
    (the DejaVu seeds) see rows in insertion order.
    """
    ((exists,),) = con.execute(
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_name = 'trade' AND table_schema = current_schema() "
        "AND table_catalog = current_database()"
    ).fetchall()
    if exists:
        return
    table = synthetic_trades(rows, symbols, seed)
    # One statement, so that an interrupted build leaves no empty table behind.
    con.register("__matchsql_demo_trade", table)
    try:
        con.execute("CREATE TABLE trade AS SELECT * FROM __matchsql_demo_trade")
    finally:
        con.unregister("__matchsql_demo_trade")
