"""The data of ``matchsql experiment`` and the producer process that replays them.

Apart from :mod:`matchsql.cli.experiment` so that the producer process, which
runs this module's :func:`serve`, imports only what writing needs (numpy,
pyarrow, the producer), not the command line, the plots or the connection's
query side.

Data: like :func:`matchsql.storage.demo.synthetic_trades` (same schema,
tickers and start prices), and every symbol's price is a geometric random
walk with a fixed per-tick volatility, so the data look alike at every size
and the only thing that changes between rates is the rate. The stream's
shape is ``--skew``: ``uniform`` spreads the rows round-robin over the
symbols (every partition gets the same share), ``zipf:S`` draws each row's
symbol with probability proportional to ``1 / rank**S`` (the first ticker is
the hottest partition), the shape under which the switch's partition rules
differ.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from typing import TextIO

import numpy as np
import pyarrow as pa

from matchsql.storage.demo import SCHEMA, TICKERS, TRADING_DAYS, symbol_names

TICK_VOLATILITY = 0.001  # log return per tick: cent-sized moves, as busy TAQ symbols
UNIFORM = "uniform"
ZIPF_DEFAULT_EXPONENT = 1.0


def parse_skew(text: str) -> str:
    """The canonical form of a ``--skew`` value: ``uniform`` or ``zipf:S`` with S > 0.

    ``zipf`` alone means ``zipf:1``. Raises ValueError with a message fit for
    a usage error.
    """

    word = text.strip().lower()
    if word == UNIFORM:
        return UNIFORM
    name, _, exponent = word.partition(":")
    if name != "zipf":
        raise ValueError(f"unknown skew {text!r} (uniform, or zipf:S such as zipf:1.2)")
    try:
        value = float(exponent) if exponent else ZIPF_DEFAULT_EXPONENT
    except ValueError:
        raise ValueError(f"the zipf exponent must be a number, got {exponent!r}") from None
    if not 0 < value <= 10:
        raise ValueError(f"the zipf exponent must be above 0 and at most 10, got {exponent!r}")
    return f"zipf:{value:g}"


def zipf_exponent(skew: str) -> float | None:
    """S of a canonical ``zipf:S`` skew; None for uniform."""
    return None if skew == UNIFORM else float(skew.partition(":")[2])


def experiment_data(rows: int, symbols: int, seed: int = 0, skew: str = UNIFORM) -> pa.Table:
    """``rows`` synthetic trades over ``symbols`` tickers, spread as ``skew`` says.

    Same columns, tickers and start prices as
    :func:`~matchsql.storage.demo.synthetic_trades`; deterministic in its arguments.
    """

    if rows < 0 or symbols < 1:
        raise ValueError("rows must be >= 0 and symbols >= 1")
    rng = np.random.default_rng(seed)
    known = list(TICKERS.values())[:symbols]
    start = np.concatenate(
        (known, np.exp(rng.uniform(np.log(5.0), np.log(200.0), size=symbols - len(known))))
    )
    exponent = zipf_exponent(parse_skew(skew))
    if exponent is None:
        sym, log_price = _round_robin(rng, rows, symbols)
    else:
        sym, log_price = _zipf(rng, rows, symbols, exponent)
    price = np.maximum(np.round(start[sym] * np.exp(log_price), 2), 0.01)
    volume = rng.geometric(0.35, size=rows).astype(np.int64) * 100
    first = dt.datetime.combine(TRADING_DAYS[0], dt.time(9, 30))
    epoch_us = int((first - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000)
    ts = epoch_us + np.arange(rows, dtype=np.int64) * 1000  # one trade per millisecond
    return pa.table(
        {
            "symbol": pa.array(symbol_names(symbols), pa.string()).take(pa.array(sym, pa.int32())),
            "price": pa.array(price, pa.float64()),
            "volume": pa.array(volume, pa.int64()),
            "ts": pa.array(ts, pa.int64()).cast(pa.timestamp("us")),
        },
        schema=SCHEMA,
    )


def _round_robin(
    rng: np.random.Generator, rows: int, symbols: int
) -> tuple[np.ndarray, np.ndarray]:
    """Symbols round-robin; row i is the (i // symbols)-th tick of its symbol."""
    sym = np.arange(rows) % symbols
    # Lay the steps out as (ticks, symbols) and take cumulative sums down the columns.
    ticks = -(-rows // symbols) if rows else 0
    steps = rng.standard_normal((ticks, symbols)) * TICK_VOLATILITY
    return sym, np.cumsum(steps, axis=0).reshape(-1)[:rows]


def _zipf(
    rng: np.random.Generator, rows: int, symbols: int, exponent: float
) -> tuple[np.ndarray, np.ndarray]:
    """Symbols drawn Zipf-distributed; each symbol's walk advances on its own rows only."""
    weights = 1.0 / np.arange(1, symbols + 1, dtype=np.float64) ** exponent
    sym = rng.choice(symbols, size=rows, p=weights / weights.sum())
    steps = rng.standard_normal(rows) * TICK_VOLATILITY
    if not rows:
        return sym, steps
    # Cumulative sums per symbol: sort the rows by symbol (stably, so each
    # symbol's rows keep their order), sum, subtract each group's offset.
    order = np.argsort(sym, kind="stable")
    ordered = steps[order]
    total = np.cumsum(ordered)
    grouped = sym[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    offsets = np.repeat(total[starts] - ordered[starts], np.diff(np.r_[starts, rows]))
    log_price = np.empty(rows)
    log_price[order] = total - offsets
    return sym, log_price


# -- the producer process ---------------------------------------------------------------


def serve(commands: TextIO, replies: TextIO) -> int:
    """The producer process's loop: one run per ``run`` command, until end of input.

    ``run STREAM ROWS SYMBOLS SEED RATE SKEW`` makes (or reuses, when the
    arguments repeat) the data, attaches to the stream, answers ``ready`` and
    waits for ``go``; then it writes paced to RATE tuples per second, closes
    the stream (end of stream) and answers ``done ROWS SECONDS``. One process
    serves a whole experiment, so a run does not pay for starting Python and
    importing pyarrow: that took longer than a short run itself.
    """

    from matchsql.storage.producer import Producer

    cached: tuple[tuple[str, ...], pa.Table] | None = None
    while line := commands.readline():
        words = line.split()
        if len(words) != 7 or words[0] != "run":
            print(f"producer: unknown command {line.strip()!r}", file=sys.stderr)
            return 2
        stream, rate = words[1], float(words[5])
        if cached is None or cached[0] != tuple(words[2:5] + words[6:]):
            cached = (
                tuple(words[2:5] + words[6:]),
                experiment_data(int(words[2]), int(words[3]), int(words[4]), words[6]),
            )
        producer = Producer.open(stream)
        _reply(replies, "ready")
        if commands.readline().strip() != "go":
            producer.close()
            return 0
        written, seconds = _write_paced(producer, cached[1], rate)
        _reply(replies, f"done {written} {seconds:.6f}")
    return 0


def _write_paced(producer, table: pa.Table, rate: float) -> tuple[int, float]:
    """Write ``table`` at ``rate`` tuples/s (>= 200 writes a second); close the stream."""
    chunk = max(1, min(65_536, int(rate / 200)))
    written = 0
    started = time.monotonic()
    try:
        for batch in table.to_batches(max_chunksize=chunk):
            producer.write_batch(batch)
            written += batch.num_rows
            ahead = started + written / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    finally:
        producer.close()
    return written, time.monotonic() - started


def _reply(replies: TextIO, text: str) -> None:
    replies.write(text + "\n")
    replies.flush()
