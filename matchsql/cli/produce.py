"""``matchsql produce``: feed a live stream from a file or synthetic trades.

    matchsql produce STREAM (--from FILE.parquet|FILE.csv | --synthetic)
                     [--rate N/s] [--count N] [-d DATABASE] [--batch-rows N]

Rows are streamed, never loaded whole: a Parquet file is read batch by batch
(``ParquetFile.iter_batches``), a CSV file block by block (``pyarrow.csv.open_csv``,
its columns parsed as the stream's types), and synthetic trades are generated
batch by batch (:func:`matchsql.storage.demo.synthetic_trade_batches`), so
memory stays bounded by a batch (a Parquet row group, a CSV block, a block of
synthetic trades) whatever ``--count`` is. Each batch is cast to the stream's
schema and written; ``--rate`` paces them (batches are sized so that at least
~100 go out per second), ``--count`` stops after N rows (synthetic data
defaults to 1,000,000). The stream ends when the command ends, also on Ctrl-C.
On a terminal a progress bar shows the rows written and their rate
(``--progress on|off`` to force it).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.csv as csv
import pyarrow.parquet as pq

from matchsql.errors import Error, StreamWriteError
from matchsql.runtime.progress_bar import MODES, progress_bar
from matchsql.storage.demo import synthetic_trade_batches
from matchsql.storage.producer import Producer, stream_schema

SYNTHETIC_COUNT = 1_000_000
CSV_BLOCK_BYTES = 1 << 20  # bytes of CSV text parsed at a time


def parse_rate(text: str) -> float:
    value = text.strip().lower().removesuffix("/s")
    multiplier = 1
    for suffix, factor in (("k", 1_000), ("m", 1_000_000)):
        if value.endswith(suffix):
            value, multiplier = value[:-1], factor
    try:
        rate = float(value) * multiplier
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a rate: {text!r} (e.g. 10000/s, 1M/s)") from None
    if not rate > 0 or rate == float("inf"):
        raise argparse.ArgumentTypeError("the rate must be a positive number")
    return rate


def _whole(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``least`` (a clear usage error, not a
    traceback from deep inside, for ``--count -1`` or ``--batch-rows 0``)."""

    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="matchsql produce", description="Write rows into a live stream."
    )
    parser.add_argument("stream", help="the stream's name (CREATE STREAM)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--from",
        dest="path",
        metavar="FILE",
        help="a .parquet or .csv file with the stream's columns",
    )
    source.add_argument(
        "--synthetic", action="store_true", help="synthetic trades (symbol, price, volume, ts)"
    )
    parser.add_argument("--rate", type=parse_rate, metavar="N/s", help="rows per second")
    parser.add_argument("--count", type=_whole(0), metavar="N", help="stop after N rows")
    parser.add_argument("--symbols", type=_whole(1), default=50, help="symbols of --synthetic")
    parser.add_argument("--seed", type=_whole(0), default=0, help="seed of --synthetic")
    parser.add_argument(
        "-d",
        "--database",
        default=None,
        metavar="PATH",
        help="the DuckDB file whose stream it is (default: in memory)",
    )
    parser.add_argument(
        "--batch-rows",
        type=_whole(1),
        default=8192,
        metavar="N",
        help="rows per write (default 8192)",
    )
    parser.add_argument(
        "--progress",
        choices=MODES,
        default="auto",
        help="progress bar with rows/s on stderr (auto: when stderr is a terminal)",
    )
    return parser


def open_source(
    args: argparse.Namespace, schema: pa.Schema, chunk: int
) -> tuple[Iterator[pa.RecordBatch], int | None]:
    """The rows to write, as batches of at most ``chunk`` rows, and how many there are
    (None when unknown before reading: a CSV file without ``--count``).

    Opening reads no rows: a file that cannot be opened fails here, before the
    command attaches to the stream.
    """
    if args.synthetic:
        count = SYNTHETIC_COUNT if args.count is None else args.count
        try:
            batches = synthetic_trade_batches(count, args.symbols, args.seed, batch_rows=chunk)
        except ValueError as exc:
            raise Error(f"cannot generate {count} synthetic trades: {exc}") from None
        return batches, count
    path = str(args.path)
    total: int | None
    try:
        if path.lower().endswith(".csv"):
            reader: Iterable[pa.RecordBatch] = csv.open_csv(
                path,
                read_options=csv.ReadOptions(block_size=CSV_BLOCK_BYTES),
                convert_options=csv.ConvertOptions(column_types=_csv_types(schema)),
            )
            total = None
        else:
            parquet = pq.ParquetFile(path)
            reader = parquet.iter_batches(batch_size=chunk)
            total = parquet.metadata.num_rows
    except (OSError, pa.ArrowException) as exc:
        raise Error(f"cannot read {path}: {exc}") from None
    batches = _sliced(_reading(reader, path), chunk)
    if args.count is not None:
        batches = _first(batches, args.count)
        total = args.count if total is None else min(total, args.count)
    return batches, total


def _csv_types(schema: pa.Schema) -> dict[str, pa.DataType]:
    """The stream's column types that the CSV reader parses itself, so that every block
    gets the same types (inferring them per block could change a column's type half way);
    other columns are inferred, and cast to the stream's type when written."""

    def parsed(t: pa.DataType) -> bool:
        if pa.types.is_timestamp(t):
            return t.tz is None
        return (
            pa.types.is_integer(t)
            or pa.types.is_floating(t)
            or pa.types.is_boolean(t)
            or pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_date(t)
            or pa.types.is_decimal(t)
        )

    return {f.name: f.type for f in schema if parsed(f.type)}


def _reading(batches: Iterable[pa.RecordBatch], path: str) -> Iterator[pa.RecordBatch]:
    """``batches`` of the file ``path``; a file that turns out unreadable part way (a bad
    value, a truncated file) is an Error naming it."""
    iterator = iter(batches)
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            return
        except (OSError, pa.ArrowException) as exc:
            raise Error(f"cannot read {path}: {exc}") from None
        yield batch


def _sliced(batches: Iterable[pa.RecordBatch], chunk: int) -> Iterator[pa.RecordBatch]:
    """``batches`` cut to at most ``chunk`` rows (a CSV block holds any number)."""
    for batch in batches:
        for start in range(0, batch.num_rows, chunk):
            yield batch.slice(start, chunk)


def _first(batches: Iterable[pa.RecordBatch], count: int) -> Iterator[pa.RecordBatch]:
    """The first ``count`` rows of ``batches``; reads no further."""
    left = count
    for batch in batches:
        if left <= 0:
            return
        if batch.num_rows > left:
            batch = batch.slice(0, left)
        left -= batch.num_rows
        yield batch


def main(argv: list[str]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    chunk = args.batch_rows
    if args.rate:
        chunk = max(1, min(chunk, int(args.rate / 100)))
    try:
        batches, total = open_source(args, stream_schema(args.stream, args.database), chunk)
        producer = Producer.open(args.stream, args.database)
    except Error as err:
        print(f"Error: {err}", file=sys.stderr)
        return 1
    written = 0
    started = time.monotonic()
    bar = progress_bar(
        mode=args.progress, total=total, desc=args.stream, unit=" rows", unit_scale=True
    )
    try:
        for batch in batches:
            producer.write_batch(batch)
            written += batch.num_rows
            bar.update(batch.num_rows)
            if args.rate:
                ahead = started + written / args.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
    except KeyboardInterrupt:
        pass
    except Error as err:
        if isinstance(err, StreamWriteError):
            written += err.rows_written
        bar.close()
        print(f"Error: {err}\n{written:,} rows were written", file=sys.stderr)
        return 1
    finally:
        bar.close()
        try:
            producer.close()
        except Error:
            pass
    seconds = time.monotonic() - started
    print(
        f"{written:,} rows in {seconds:.2f} s ({written / max(seconds, 1e-9):,.0f} rows/s)",
        file=sys.stderr,
    )
    return 0
