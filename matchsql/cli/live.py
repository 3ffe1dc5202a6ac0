"""A continuous query's rows in the shell: a changelog, and a status line below it.

Rows come as matches become final, so the shell cannot draw them as one table.
They are printed as a changelog in the manner of the Flink SQL client's: an
``op`` column first, ``+I`` for a row inserted (a match is final once it is
out: matchsql never retracts or updates one, so every row is ``+I``). In the
``box`` modes each row is a line of ``|``-separated values under a header
line; the other modes (``csv``, ``line``, ``json``, ``markdown``) print the
rows as they print any result, with the ``op`` column.

On a terminal, a status line below the rows shows the rows so far, their rate,
the stream's lag (tuples written and not yet read by its slowest reader) and the
time; it is redrawn every half second and erased before rows are printed and
when the query ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TextIO

from matchsql.cli.output_modes import render

if TYPE_CHECKING:
    import pyarrow as pa

#: Where a terminal's cursor goes back to the line's start and the line is erased.
ERASE_LINE = "\r\x1b[2K"
#: Seconds between two drawings of the status line.
TICK = 0.5
#: The change each row is: matches are only ever inserted.
INSERT = "+I"


class LiveView:
    """Prints one continuous result as a changelog in ``mode``, with a status line on
    ``status`` (a terminal; None: no status line)."""

    def __init__(
        self,
        out: TextIO,
        status: TextIO | None,
        mode: str,
        *,
        max_width: int | None = None,
        lag: Callable[[], int | None] | None = None,
    ) -> None:
        self.out = out
        self.status = status
        self.mode = mode
        self.max_width = max_width
        self.lag = lag
        self.rows = 0
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._shown = False  # the status line is on the terminal
        self._stopped = threading.Event()

    def status_text(self) -> str:
        """``12 rows | 3.4 rows/s | lag 0 | 5 s``: what the status line says now."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        lag = None
        if self.lag is not None:
            try:
                lag = self.lag()
            except Exception:  # the stream is gone or ending: no lag to show
                lag = None
        parts = [
            f"{self.rows:,} row{'s' if self.rows != 1 else ''}",
            f"{self.rows / elapsed:,.1f} rows/s",
            f"lag {'-' if lag is None else format(lag, ',')}",
            f"{elapsed:,.0f} s",
        ]
        return "live: " + " | ".join(parts)

    def show(self, result) -> int:
        """Print ``result``'s rows as they arrive, until it ends; the number of rows."""
        ticker = None
        if self.status is not None:
            ticker = threading.Thread(target=self._tick, name="matchsql-live", daemon=True)
            ticker.start()
        try:
            for piece in self._pieces(result):
                self._write(piece)
        finally:
            self._stopped.set()
            if ticker is not None:
                ticker.join(timeout=1.0)
            with self._lock:
                self._erase()
            self.out.write(f"({self.rows} row{'s' if self.rows != 1 else ''})\n")
            self.out.flush()
        return self.rows

    def _pieces(self, result) -> Iterator[str]:
        batches = self._counted(result.fetch_batches())
        if self.mode in ("box", "duckbox"):
            yield " | ".join(["op", *result.columns]) + "\n"
            for batch in batches:
                for row in zip(*(column.to_pylist() for column in batch.columns)):
                    yield (
                        " | ".join([INSERT, *("NULL" if v is None else str(v) for v in row)]) + "\n"
                    )
            return
        import pyarrow as pa  # loaded with the result's rows already (start-up)

        schema = pa.schema([pa.field("op", pa.string()), *result.schema])
        marked = (
            pa.RecordBatch.from_arrays(
                [pa.array([INSERT] * batch.num_rows, pa.string()), *batch.columns], schema=schema
            )
            for batch in batches
        )
        types = ["VARCHAR", *result.type_names]
        yield from render(self.mode, schema, marked, max_width=self.max_width, types=types)

    def _counted(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self.rows += batch.num_rows
            yield batch

    def _write(self, piece: str) -> None:
        with self._lock:
            self._erase()
            self.out.write(piece)
            self.out.flush()
            self._draw()

    def _tick(self) -> None:
        while not self._stopped.wait(TICK):
            with self._lock:
                if not self._stopped.is_set():
                    self._draw()

    def _draw(self) -> None:
        if self.status is None or self._stopped.is_set():
            return
        self.status.write(ERASE_LINE + self.status_text())
        self.status.flush()
        self._shown = True

    def _erase(self) -> None:
        if self._shown and self.status is not None:
            self.status.write(ERASE_LINE)
            self.status.flush()
            self._shown = False
