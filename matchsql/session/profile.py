"""What EXPLAIN ANALYZE measures of one MATCH_RECOGNIZE: rows in, matches out, time per stage.

The input stage is DuckDB computing and sorting the input relation, or
grouping it by partition where it is in order already (the time spent
waiting for its next batch); the matching stage is everything
else done between the moments the output is asked for a batch and hands
one over (routing, the matchers, assembling output rows). Time the caller
spends on a batch it was handed counts in neither.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa


@dataclass
class MatchProfile:
    path: str = "?"
    one_row: bool = True  # ONE ROW PER MATCH: each output row is one match
    rows_in: int = 0
    batches_in: int = 0
    rows_out: int = 0
    input_s: float = 0.0
    busy_s: float = 0.0  # input and matching together

    def input(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches`` (the input query's), counted and timed."""
        iterator = iter(batches)
        while True:
            started = time.perf_counter()
            batch = next(iterator, None)
            self.input_s += time.perf_counter() - started
            if batch is None:
                return
            self.rows_in += batch.num_rows
            self.batches_in += 1
            yield batch

    def output(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches`` (the matches), counted and timed while being produced."""
        while True:
            started = time.perf_counter()
            batch = next(batches, None)
            self.busy_s += time.perf_counter() - started
            if batch is None:
                return
            self.rows_out += batch.num_rows
            yield batch

    def lines(self) -> list[str]:
        matching = max(self.busy_s - self.input_s, 0.0)
        return [
            f"analyze: path {self.path}",
            f"analyze: rows in {self.rows_in:,} ({self.batches_in:,} batches)",
            f"analyze: {'matches' if self.one_row else 'rows out'} {self.rows_out:,}",
            f"analyze: input (DuckDB query and sort) {self.input_s * 1000:.3f} ms",
            f"analyze: matching {matching * 1000:.3f} ms",
        ]
