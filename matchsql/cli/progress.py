"""A progress line with rows/s for statements that run longer than a moment.

The statement runs in the shell's worker thread, which counts the result
rows it reads (:meth:`Progress.count`); a ticker thread shows them on the
terminal, with their rate and DuckDB's own estimate of how far the query
is (``query_progress()``, when DuckDB has one), once the statement has run
for ``delay`` seconds, as DuckDB's CLI shows its progress bar only for slow
queries. The line is cleared before the first output is written, so it
never mixes with rows.

tqdm draws the line; it is imported when a statement first becomes slow,
not at start-up (that lazy import is the point: most statements never need it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import pyarrow as pa

#: Seconds a statement runs before its progress line appears.
DEFAULT_DELAY = 1.0
TICK = 0.2
_WITH_BAR = "{percentage:3.0f}%|{bar:24}| {desc} [{elapsed}]"
_WITHOUT_BAR = "running: {desc} [{elapsed}]"


class Progress:
    """Rows read so far by one statement, shown on ``stream`` once it is slow."""

    def __init__(
        self, stream: TextIO, delay: float | None, percent: Callable[[], float] = lambda: -1.0
    ) -> None:
        self.rows = 0
        self._percent = percent  # DuckDB's estimate, 0-100; negative when it has none
        self._started = time.monotonic()
        self._stream = stream
        self._delay = delay  # None: never shown
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Any = None
        self._lock = threading.Lock()

    def count(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches``, counted as they go by."""
        for batch in batches:
            self.rows += batch.num_rows
            yield batch

    def start(self) -> None:
        if self._delay is None:
            return
        self._thread = threading.Thread(target=self._tick, name="matchsql-progress", daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        if self._stopped.wait(self._delay):
            return
        # tqdm: loaded once a statement runs long enough to draw a bar (start-up).
        from tqdm import tqdm

        with self._lock:
            if self._stopped.is_set():
                return
            self._bar = tqdm(
                total=100,
                desc="0 rows",
                file=self._stream,
                leave=False,
                dynamic_ncols=True,
                mininterval=0,
                bar_format=_WITHOUT_BAR,
            )
            self._show()
        while not self._stopped.wait(TICK):
            with self._lock:
                self._show()

    def _show(self) -> None:
        if self._bar is None:
            return
        rows = self.rows
        rate = rows / max(time.monotonic() - self._started, 1e-9)
        percent = self._percent()
        self._bar.bar_format = _WITH_BAR if percent >= 0 else _WITHOUT_BAR
        self._bar.n = max(0.0, min(percent, 100.0))
        self._bar.set_description_str(f"{rows:,} rows, {rate:,.0f} rows/s", refresh=False)
        self._bar.refresh()

    def stop(self) -> None:
        """Stop the ticker and clear its line (safe to call more than once)."""
        self._stopped.set()
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)

    @property
    def shown(self) -> bool:
        return self._bar is not None
