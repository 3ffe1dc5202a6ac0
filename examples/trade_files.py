"""Example data: synthetic trades dropped into a directory as Parquet files, over time.

    python examples/trade_files.py DIR [--rows 20000] [--symbols 20] [--files 20] [--every 1.0]

Stands in for an upstream system that lands files (Spark's file source picks
each one up as it appears). Rows are ``matchsql.storage.demo.synthetic_trades``
in time order, cut into ``--files`` consecutive pieces; a file is written
under a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pyarrow.parquet as pq

from matchsql.storage.demo import synthetic_trades


def land_files(
    directory: Path, *, rows: int, symbols: int, files: int, every: float, seed: int = 0
) -> None:
    """Write ``files`` Parquet files of consecutive trades into ``directory``, ``every`` s apart."""
    directory.mkdir(parents=True, exist_ok=True)
    data = synthetic_trades(rows, symbols, seed)
    size = max(1, -(-rows // files))
    for index, start in enumerate(range(0, rows, size)):
        final = directory / f"trades-{index:05d}.parquet"
        partial = directory / f".trades-{index:05d}.parquet.tmp"
        pq.write_table(data.slice(start, size), partial)
        os.replace(partial, final)
        print(f"landed {final.name}: {min(size, rows - start)} trades", flush=True)
        if every > 0:
            time.sleep(every)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--symbols", type=int, default=20)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between files")
    args = parser.parse_args(argv)
    land_files(
        args.directory, rows=args.rows, symbols=args.symbols, files=args.files, every=args.every
    )


if __name__ == "__main__":
    main()
