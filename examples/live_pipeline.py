"""A live pipeline: a producer process -> a live stream -> a continuous query -> a sink.

    python examples/live_pipeline.py                       # 50,000 trades, sink matches.duckdb
    python examples/live_pipeline.py --rows 5000 --sink /tmp/falls.duckdb

The script creates the live stream ``ticks`` and starts a producer, a second
Python process (this script with ``--produce``) that writes synthetic trades
into the stream in batches of ``--batch`` rows. While the producer runs, a
continuous ``MATCH_RECOGNIZE`` finds falls of at least three trades per
symbol; each match is appended to the table ``falls`` of a DuckDB database
file (the sink) as soon as it is final. When the producer ends, the stream
ends, the query finishes and the script prints what the sink holds::

    $ duckdb matches.duckdb "SELECT symbol, count(*) FROM falls GROUP BY ALL"

The stream belongs to this script (its creator) and is gone when it ends.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import duckdb

import matchsql

COLUMNS = "symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP"

# A fall: a trade, then at least three trades each cheaper than the one before.
QUERY = """SELECT * FROM {source} MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS since, A.price AS top, LAST(B.price) AS bottom,
           count(B.*) AS steps
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B{{3,}})
  DEFINE B AS price < PREV(price)
)"""


def produce(stream: str, rows: int, symbols: int, batch: int, pause: float) -> None:
    """The producer process: synthetic trades in time order, ``batch`` rows at a time."""
    from matchsql.storage import Producer
    from matchsql.storage.demo import synthetic_trades

    data = synthetic_trades(rows, symbols)
    with Producer.open(stream) as producer:  # leaving the block ends the stream
        for start in range(0, rows, batch):
            producer.write_batch(data.slice(start, batch))
            time.sleep(pause)


def run(stream: str, rows: int, symbols: int, batch: int, pause: float, sink: Path) -> int:
    """Create the stream, start the producer, sink the matches; the number of matches."""
    con = matchsql.connect(demo=False)
    try:
        con.sql(f"CREATE STREAM {stream} ({COLUMNS})")
    except matchsql.Error as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(2)
    producer = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--produce",
            "--stream",
            stream,
            "--rows",
            str(rows),
            "--symbols",
            str(symbols),
            "--batch",
            str(batch),
            "--pause",
            str(pause),
        ]
    )
    out = duckdb.connect(str(sink))
    out.execute(
        "CREATE OR REPLACE TABLE falls (symbol VARCHAR, since TIMESTAMP, top DOUBLE, "
        "bottom DOUBLE, steps BIGINT)"
    )
    found, said = 0, time.monotonic()
    try:
        result = con.sql(QUERY.format(source=stream))
        for matches in result.fetch_batches():  # the matches that just became final
            if matches.num_rows:
                out.register("new_matches", matches)
                out.execute("INSERT INTO falls SELECT * FROM new_matches")
                out.unregister("new_matches")
                found += matches.num_rows
                if time.monotonic() - said >= 1.0:  # progress, once a second at most
                    print(f"{found:,} matches so far", flush=True)
                    said = time.monotonic()
    except matchsql.Error as exc:
        print(f"Error: {exc}", file=sys.stderr)
        producer.kill()
        sys.exit(1)
    finally:
        producer.wait()
        con.close()
    summary = out.execute("SELECT count(*), count(DISTINCT symbol), max(steps) FROM falls")
    count, tickers, longest = summary.fetchone()
    out.close()
    print(
        f"{count:,} falls of {tickers} symbols in {sink} (table falls); the longest has "
        f"{longest} steps down",
        flush=True,
    )
    return count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", default="ticks")
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--symbols", type=int, default=10)
    parser.add_argument("--batch", type=int, default=1_000, help="rows per producer write")
    parser.add_argument("--pause", type=float, default=0.01, help="seconds between writes")
    parser.add_argument("--sink", type=Path, default=Path("matches.duckdb"))
    parser.add_argument("--produce", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.produce:
        produce(args.stream, args.rows, args.symbols, args.batch, args.pause)
    else:
        run(args.stream, args.rows, args.symbols, args.batch, args.pause, args.sink)


if __name__ == "__main__":
    main()
