"""A continuous query in the shell: its rows as a changelog (``+I``, in the manner of the
Flink SQL client) in the shell's mode, and a status line on the terminal with the rows
so far, their rate and the stream's lag."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pyarrow as pa
import pytest

import matchsql
from matchsql.cli.live import ERASE_LINE, LiveView
from matchsql.cli.shell import Shell
from matchsql.results.result import BatchSource, Result
from tests.cli.conftest import ROOT

SCHEMA = pa.schema([("symbol", pa.string()), ("n", pa.int64())])


def live_result(*batches: list[tuple]) -> Result:
    arrow = [
        pa.RecordBatch.from_pylist([dict(zip(SCHEMA.names, row)) for row in rows], schema=SCHEMA)
        for rows in batches
    ]
    result = Result(BatchSource(SCHEMA, (batch for batch in arrow)), continuous=True)
    result.lag = lambda: 1234
    return result


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_box_mode_prints_a_changelog_line_per_row() -> None:
    out = io.StringIO()
    rows = LiveView(out, None, "box").show(live_result([("AAPL", 3), (None, 4)], [("MSFT", 5)]))
    assert rows == 3
    assert out.getvalue() == (
        "op | symbol | n\n+I | AAPL | 3\n+I | NULL | 4\n+I | MSFT | 5\n(3 rows)\n"
    )


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("csv", "op,symbol,n\n+I,AAPL,3\n+I,MSFT,5\n(2 rows)\n"),
        (
            "line",
            "    op = +I\nsymbol = AAPL\n     n = 3\n\n    op = +I\nsymbol = MSFT\n     n = 5\n"
            "(2 rows)\n",
        ),
    ],
)
def test_other_modes_print_the_rows_with_their_op(mode: str, expected: str) -> None:
    out = io.StringIO()
    LiveView(out, None, mode).show(live_result([("AAPL", 3)], [("MSFT", 5)]))
    assert out.getvalue() == expected


def test_the_status_line_says_rows_rate_and_lag_and_is_erased() -> None:
    out, terminal = io.StringIO(), Terminal()
    LiveView(out, terminal, "box", lag=lambda: 1234).show(live_result([("AAPL", 3)]))
    status = terminal.getvalue()
    assert "live: 1 row | " in status and " rows/s | lag 1,234 | " in status
    assert status.endswith(ERASE_LINE)  # gone when the query ends
    view = LiveView(out, terminal, "box", lag=lambda: None)
    assert " | lag - | " in view.status_text()


def test_a_continuous_query_in_the_shell(tmp_path, monkeypatch) -> None:
    """Through the shell, with a producer in another process: .mode csv applies, the
    status line goes to the terminal, not into the rows."""
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(tmp_path / "runtime"))
    out, terminal = io.StringIO(), Terminal()
    shell = Shell(matchsql.connect(demo=False), out=out, err=terminal)
    assert shell.run_text(
        "CREATE STREAM ticks (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP);"
    )
    assert shell.run_dot(".mode csv")
    producer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "matchsql",
            "produce",
            "ticks",
            "--synthetic",
            "--rate",
            "20k/s",
            "--count",
            "5000",
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert shell.run_text(
            "SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES "
            "count(*) AS n PATTERN (A B{3,}) DEFINE B AS price < PREV(price));"
        ), terminal.getvalue()
    finally:
        _, err = producer.communicate(timeout=120)
    assert producer.returncode == 0, err
    lines = out.getvalue().splitlines()
    assert lines[0] == "op,symbol,n"
    rows = lines[1:-1]
    assert rows and all(line.startswith("+I,") for line in rows)
    assert lines[-1] == f"({len(rows)} rows)"
    assert "live: " in terminal.getvalue() and "live: " not in out.getvalue()
